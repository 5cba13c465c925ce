# docs/text-ids.md's SQLAlchemy and Pydantic recipe (Debian's): a
# column_property of the text form and a Pydantic model whose field is a
# str send IDs as strings that JSON.parse keeps, and a string finds its
# row; a Pydantic int field is a JSON number, which a browser rounds.
# Connects with libpq's variables (test/text/run.sh sets them).  Prints TAP
# (test/orm/common.py).
import json

from pydantic import BaseModel
from sqlalchemy import BigInteger, Column, Text, create_engine, func, select, text
from sqlalchemy.orm import Session, column_property, declarative_base

from common import run, test

Base = declarative_base()


class Order(Base):
    __tablename__ = 'orders'
    id = Column(BigInteger, primary_key=True, server_default=text('snowflake.snowflake_nextval()'))
    item = Column(Text)
    public_id = column_property(func.snowflake.snowflake_base32(id, 'order'))


class OrderOut(BaseModel):
    public_id: str
    item: str

    class Config:
        orm_mode = True


class OrderAsNumber(BaseModel):
    id: int
    item: str

    class Config:
        orm_mode = True


engine = create_engine('postgresql+psycopg2://')
Base.metadata.create_all(engine)
with Session(engine) as s:
    s.add_all([Order(item='book'), Order(item='pen'), Order(item='ink')])
    s.commit()
    HELD = [(o.id, o.item) for o in s.scalars(select(Order).order_by(Order.id))]


def browser(payload):
    """What a browser's JSON.parse would keep: integers above 2^53 become
    doubles."""
    def number(v):
        v = int(v)
        return float(v) if abs(v) > 2**53 else v
    return json.loads(payload, parse_int=number)


@test
def recipe():
    """the recipe: Pydantic's json() of the column_property is a string, exact, and reads back to the key"""
    with Session(engine) as s:
        orders = s.scalars(select(Order).order_by(Order.id)).all()
        sent = [browser(OrderOut.from_orm(o).json()) for o in orders]
        for o, (key, item) in zip(sent, HELD):
            assert o['public_id'].startswith('order_') and len(o['public_id']) == 19, o
            found = s.scalars(select(Order).where(Order.id == func.snowflake.snowflake_from_base32(o['public_id'], 'order'))).one()
            assert (found.id, found.item) == (key, item)


@test
def as_number():
    """an int field is a JSON number, which a browser rounds"""
    with Session(engine) as s:
        sent = [browser(OrderAsNumber.from_orm(o).json()) for o in s.scalars(select(Order).order_by(Order.id))]
    assert all(isinstance(o['id'], float) for o in sent)
    assert any(int(o['id']) != key for o, (key, _) in zip(sent, HELD))


run()
