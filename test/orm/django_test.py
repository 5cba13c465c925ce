# Django (Debian's) with snowflake keys, as docs/orms.md's "Django" says for
# Django 3.2 and 4.x: the models of snowflake_shop, the migration
# makemigrations writes for them, and its migration that gives the
# keys their default.  Connects with libpq's variables (test/orm/run.sh
# sets them); writes the app's migrations beside this file.  Prints TAP
# (common.py).
import io
import os
import pathlib

import django
from django.conf import settings

HERE = pathlib.Path(__file__).resolve().parent
settings.configure(
    INSTALLED_APPS=['snowflake_shop'],
    DATABASES={'default': {
        'ENGINE': 'django.db.backends.postgresql',
        'NAME': os.environ['PGDATABASE'],
        'USER': os.environ['PGUSER'],
        'HOST': os.environ['PGHOST'],
        'PORT': os.environ.get('PGPORT', '5432'),
    }},
    DEFAULT_AUTO_FIELD='django.db.models.BigAutoField',
    USE_TZ=True,
)
django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import IntegrityError, connection, transaction  # noqa: E402
from snowflake_shop.models import Order, OrderLine, PlainOrder  # noqa: E402
from common import APP_SEARCH_PATH, assert_block, assert_exact_key as exact_key, run, test  # noqa: E402

DEFAULT = 'snowflake.snowflake_nextval()'

# docs/orms.md's migration that gives the keys their default, written as
# makemigrations --empty snowflake_shop names it
DEFAULT_MIGRATION = '''\
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [('snowflake_shop', '0001_initial')]

    operations = [
        migrations.RunSQL(
            [f'ALTER TABLE {table} ALTER COLUMN id SET DEFAULT snowflake.snowflake_nextval()'
             for table in ('orders', 'order_lines', 'plain_orders')],
            [f'ALTER TABLE {table} ALTER COLUMN id DROP DEFAULT'
             for table in ('orders', 'order_lines', 'plain_orders')],
        ),
    ]
'''


def sql(query, params=()):
    with connection.cursor() as c:
        c.execute(query, params)
        return c.fetchall()


def column_default(table, column='id'):
    return sql("""SELECT column_default FROM information_schema.columns
        WHERE table_schema = 'public' AND table_name = %s AND column_name = %s""", (table, column))[0][0]


def makemigrations(*args):
    out = io.StringIO()
    call_command('makemigrations', 'snowflake_shop', *args, stdout=out, stderr=out)
    return out.getvalue()


def assert_exact_key(key, table):
    exact_key(key, table, sql)


@test
def search_path():
    """the application's sessions run with README's search_path, without snowflake"""
    assert sql('SHOW search_path') == [(APP_SEARCH_PATH,)]


@test
def migrations():
    """makemigrations writes the tables; with docs/orms.md's migration applied, it finds no change, twice"""
    out = makemigrations()
    assert '0001_initial.py' in out, out
    initial = (HERE / 'snowflake_shop' / 'migrations' / '0001_initial.py').read_text()
    assert initial.count('snowflake_shop.models.SnowflakeField(primary_key=True, serialize=False)') == 2, initial
    (HERE / 'snowflake_shop' / 'migrations' / '0002_snowflake_default.py').write_text(DEFAULT_MIGRATION)
    call_command('migrate', 'snowflake_shop', verbosity=0)
    for table in ('orders', 'order_lines', 'plain_orders'):
        assert column_default(table) == DEFAULT, table
    assert sql("""SELECT data_type FROM information_schema.columns
        WHERE table_name = 'order_lines' AND column_name = 'order_id'""") == [('bigint',)]
    assert sql("SELECT pg_get_serial_sequence('orders', 'id'), pg_get_serial_sequence('order_lines', 'id')") == \
        [(None, None)], 'no sequence'
    for run in (1, 2):
        out = makemigrations('--check', '--dry-run')
        assert out.strip() == 'No changes detected in app \'snowflake_shop\'', out
        call_command('migrate', 'snowflake_shop', verbosity=0)


@test
def insert():
    """save(), create() and bulk_create() take the key from the default, exactly, as a Python int"""
    one = Order(item='book')
    one.save()
    two = Order.objects.create(item='pen')
    many = Order.objects.bulk_create([Order(item='ink'), Order(item='paper')])
    keys = [one.id, two.id] + [o.id for o in many]
    assert len(set(keys)) == 4, keys
    for key in keys:
        assert_exact_key(key, 'orders')
    assert Order.objects.get(pk=keys[0]).item == 'book'
    line = OrderLine.objects.create(order=one, name='line 1')
    assert_exact_key(line.id, 'order_lines')
    got = OrderLine.objects.select_related('order').get(pk=line.id)
    assert (got.order.id, got.order.item) == (one.id, 'book')


@test
def block():
    """README's block recipe: parents keyed from one block, children naming them, one transaction"""
    with transaction.atomic():
        [(first,)] = sql('SELECT snowflake.snowflake_nextval_block(%s)', (2,))
        a = Order.objects.create(id=first, item='order A')
        b = Order.objects.create(id=first + 1, item='order B')
        OrderLine.objects.bulk_create([OrderLine(order=a, name='line 1'), OrderLine(order=a, name='line 2'),
                                       OrderLine(order=b, name='line 1')])
    lines = OrderLine.objects.filter(order__in=[a, b]).select_related('order').order_by('id')
    assert_block(first, [(l.id, l.order_id, l.order.item, l.name) for l in lines], sql)


@test
def plain():
    """BigIntegerField(primary_key=True) cannot be used: Django inserts its key as NULL"""
    try:
        with transaction.atomic():
            PlainOrder.objects.create(item='book')
    except IntegrityError as e:
        assert 'null value in column "id"' in str(e), e
    else:
        raise AssertionError('the INSERT of a NULL key succeeded')
    assert sql('SELECT count(*) FROM plain_orders') == [(0,)]


run()
