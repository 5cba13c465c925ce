# docs/text-ids.md's SQLAlchemy and Pydantic recipe (Debian's): a
# column_property of the text form and a Pydantic model whose field is a
# str send IDs as strings that JSON.parse keeps; a string finds its row
# through the reader, also in upper case or with O for 0, and one that is
# no ID is not found; a Pydantic int field is a JSON number, which a
# browser rounds.  Pydantic 1 (Debian 12) as the recipe has it, or 2
# (later Debian) as its comment says.
# Connects with libpq's variables (test/text/run.sh sets them).  Prints TAP
# (test/orm/common.py).
import json

import pydantic
from pydantic import BaseModel
from sqlalchemy import BigInteger, Column, Text, create_engine, func, select, text
from sqlalchemy.exc import DataError, NoResultFound
from sqlalchemy.orm import Session, column_property, declarative_base

from common import run, test

Base = declarative_base()


class Order(Base):
    __tablename__ = 'orders'
    id = Column(BigInteger, primary_key=True, server_default=text('snowflake.snowflake_nextval()'))
    item = Column(Text)
    public_id = column_property(func.snowflake.snowflake_base32(id, 'order'))


PYDANTIC2 = int(pydantic.VERSION.split('.')[0]) >= 2


class FromRows(BaseModel):
    """Models read from ORM objects: orm_mode, from_attributes in Pydantic 2."""
    if PYDANTIC2:
        model_config = pydantic.ConfigDict(from_attributes=True)
    else:
        class Config:
            orm_mode = True


class OrderOut(FromRows):
    public_id: str
    item: str


class OrderAsNumber(FromRows):
    id: int
    item: str


def to_json(model, obj):
    """What the model sends of an ORM object."""
    if PYDANTIC2:
        return model.model_validate(obj).model_dump_json()
    return model.from_orm(obj).json()


engine = create_engine('postgresql+psycopg2://')
Base.metadata.create_all(engine)
with Session(engine) as s:
    s.add_all([Order(item='book'), Order(item='pen'), Order(item='ink')])
    s.commit()
    HELD = [(o.id, o.item) for o in s.scalars(select(Order).order_by(Order.id))]


def order_by_public_id(session, public_id):
    """The recipe's lookup: the row of a public ID in any form the reader
    takes; a string that is no ID (22P02, 22003) is not found."""
    try:
        return session.scalars(select(Order).where(
            Order.id == func.snowflake.snowflake_from_base32(public_id, 'order'))).one()
    except DataError:
        session.rollback()
        raise NoResultFound(public_id)


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
        sent = [browser(to_json(OrderOut, o)) for o in orders]
        for o, (key, item) in zip(sent, HELD):
            assert o['public_id'].startswith('order_') and len(o['public_id']) == 19, o
            found = order_by_public_id(s, o['public_id'])
            assert (found.id, found.item) == (key, item)
            variant = 'order_' + o['public_id'][len('order_'):].upper().replace('0', 'O')
            found = order_by_public_id(s, variant)
            assert (found.id, found.item) == (key, item), variant


@test
def not_found():
    """a string that is no ID is not found"""
    with Session(engine) as s:
        for bad in ('order_0000-0000-0001', 'order_8000000000000', 'user_14y6vtn380w0s', 'nonsense'):
            try:
                order_by_public_id(s, bad)
            except NoResultFound:
                continue
            raise AssertionError(bad)


@test
def as_number():
    """an int field is a JSON number, which a browser rounds"""
    with Session(engine) as s:
        sent = [browser(to_json(OrderAsNumber, o)) for o in s.scalars(select(Order).order_by(Order.id))]
    assert all(isinstance(o['id'], float) for o in sent)
    assert any(int(o['id']) != key for o, (key, _) in zip(sent, HELD))


run()
