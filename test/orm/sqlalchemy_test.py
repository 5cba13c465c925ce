# SQLAlchemy and Alembic with snowflake keys, as README's "SQLAlchemy and
# Alembic" says.  Connects with libpq's variables (test/orm/run.sh sets
# them).  Prints TAP (common.py).
import textwrap

import sqlalchemy as sa
from sqlalchemy import BigInteger, Column, ForeignKey, MetaData, Table, Text, create_engine, event, func, select, text
from sqlalchemy.orm import Session, declarative_base, relationship
from alembic.autogenerate import compare_metadata, produce_migrations, render_python_code
from alembic.migration import MigrationContext
from alembic.operations import Operations

from common import APP_SEARCH_PATH, assert_block, assert_exact_key as exact_key, run, test

DEFAULT = 'snowflake.snowflake_nextval()'

# README's models
Base = declarative_base()


class Order(Base):
    __tablename__ = 'orders'
    id = Column(BigInteger, primary_key=True, server_default=text('snowflake.snowflake_nextval()'))
    item = Column(Text)


class OrderLine(Base):
    __tablename__ = 'order_lines'
    id = Column(BigInteger, primary_key=True, server_default=text('snowflake.snowflake_nextval()'))
    order_id = Column(BigInteger, ForeignKey('orders.id'), nullable=False)
    order = relationship(Order)
    name = Column(Text)


engine = create_engine('postgresql+psycopg2://')
statements = []
event.listen(engine, 'before_cursor_execute', lambda conn, cursor, sql, *rest: statements.append(sql))
# the search_path README recommends against for a tool's sessions
engine_sp = create_engine('postgresql+psycopg2://', connect_args={'options': '-c search_path=public,snowflake'})


def diff(eng, metadata, **opts):
    """What Alembic's autogenerate finds, with its strict settings."""
    with eng.connect() as c:
        mc = MigrationContext.configure(c, opts={'compare_server_default': True, 'compare_type': True, **opts})
        return compare_metadata(mc, metadata)


def column_default(table, eng=engine, column='id'):
    with eng.connect() as c:
        return c.execute(text("""SELECT column_default FROM information_schema.columns
            WHERE table_schema = 'public' AND table_name = :t AND column_name = :c"""),
                         {'t': table, 'c': column}).scalar_one()


def sql(query, params):
    with engine.connect() as c:
        return c.exec_driver_sql(query, params).all()


def assert_exact_key(key, table):
    exact_key(key, table, sql)


@test
def search_path():
    """the application's sessions run with README's search_path, without snowflake"""
    with engine.connect() as c:
        assert c.execute(text('SHOW search_path')).scalar_one() == APP_SEARCH_PATH


@test
def alembic_migration():
    """Alembic writes a migration with the declaration; applied, autogenerate finds nothing, twice"""
    first = diff(engine, Base.metadata)
    assert [d[0] for d in first] == ['add_table', 'add_table'], first
    with engine.begin() as c:
        mc = MigrationContext.configure(c, opts={'compare_server_default': True, 'compare_type': True})
        # the body of upgrade() in the migration file autogenerate writes
        code = render_python_code(produce_migrations(mc, Base.metadata).upgrade_ops)
        code = textwrap.dedent('\n'.join(line for line in code.splitlines() if not line.startswith('#')))
        assert code.count("server_default=sa.text('snowflake.snowflake_nextval()')") == 2, code
        exec(code, {'op': Operations(mc), 'sa': sa})
    assert column_default('orders') == DEFAULT
    assert column_default('order_lines') == DEFAULT
    assert diff(engine, Base.metadata) == []
    assert diff(engine, Base.metadata) == []


@test
def create_all():
    """create_all makes the tables; autogenerate (compare_server_default=True) finds nothing, twice"""
    Base.metadata.drop_all(engine)
    Base.metadata.create_all(engine)
    assert column_default('orders') == DEFAULT
    assert column_default('order_lines') == DEFAULT
    assert diff(engine, Base.metadata) == []
    assert diff(engine, Base.metadata) == []


@test
def insert():
    """the key comes back from the default exactly, as a Python int"""
    statements.clear()
    with Session(engine) as session, session.begin():
        one = Order(item='book')
        session.add(one)
        session.flush()
        assert statements == ['INSERT INTO orders (item) VALUES (%(item)s) RETURNING orders.id'], statements
        many = [Order(item='pen'), Order(item='ink')]
        session.add_all(many)
        session.flush()
        keys = [one.id] + [o.id for o in many]
    assert len(set(keys)) == 3
    for key in keys:
        assert_exact_key(key, 'orders')
    with Session(engine) as session:
        assert session.get(Order, keys[0]).item == 'book'


@test
def block():
    """README's block recipe: parents keyed from one block, children naming them, one transaction"""
    with Session(engine) as session, session.begin():
        first = session.scalar(select(func.snowflake.snowflake_nextval_block(2)))
        a, b = Order(id=first, item='order A'), Order(id=first + 1, item='order B')
        session.add_all([a, b, OrderLine(order=a, name='line 1'), OrderLine(order=a, name='line 2'),
                         OrderLine(order=b, name='line 1')])
    with Session(engine) as session:
        lines = session.scalars(select(OrderLine).order_by(OrderLine.id)).all()
        assert_block(first, [(l.id, l.order_id, l.order.item, l.name) for l in lines], sql)


@test
def phantom():
    """snowflake in the tool's search_path: the same declaration is a change on every run"""
    assert column_default('orders', engine_sp) == 'snowflake_nextval()'
    for run in (1, 2):
        found = diff(engine_sp, Base.metadata)
        assert sorted((d[0][0], d[0][2], d[0][3], d[0][5].arg.text, d[0][6].arg.text) for d in found) == [
            ('modify_default', 'order_lines', 'id', 'snowflake_nextval()', DEFAULT),
            ('modify_default', 'orders', 'id', 'snowflake_nextval()', DEFAULT)], found


@test
def unqualified():
    """an unqualified declaration matches only where snowflake is in search_path"""
    md = MetaData()
    Table('bare_orders', md, Column('id', BigInteger, primary_key=True, server_default=text('snowflake_nextval()')))
    try:
        md.create_all(engine)
    except sa.exc.ProgrammingError as e:
        assert 'function snowflake_nextval() does not exist' in str(e), e
    else:
        raise AssertionError('made without snowflake in search_path')
    md.create_all(engine_sp)
    only = {'include_name': lambda name, type_, parents: type_ != 'table' or name == 'bare_orders'}
    assert diff(engine_sp, md, **only) == []
    assert column_default('bare_orders') == DEFAULT
    md.drop_all(engine_sp)


@test
def generated():
    """a key SQLAlchemy generates cannot be used: BIGSERIAL, and autoincrement=True drops the default"""
    md = MetaData()
    Table('gen_auto', md, Column('id', BigInteger, primary_key=True))
    Table('gen_both', md, Column('id', BigInteger, primary_key=True, autoincrement=True,
                                 server_default=text('snowflake.snowflake_nextval()')))
    md.create_all(engine)
    assert column_default('gen_auto') == "nextval('gen_auto_id_seq'::regclass)"
    assert column_default('gen_both') == "nextval('gen_both_id_seq'::regclass)"


run()
