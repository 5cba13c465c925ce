# docs/text-ids.md's Django recipe (Debian's Django): JsonResponse of the
# annotated text form sends IDs as strings that JSON.parse keeps; a string
# finds its row through the reader, also in upper case or with O for 0, and
# one that is no ID is not found; the plain model's int is a JSON number,
# which a browser rounds.  Connects with libpq's variables (test/text/run.sh sets
# them).  Prints TAP (test/orm/common.py).
import json
import os

import django
from django.conf import settings

settings.configure(
    INSTALLED_APPS=['text_shop'],
    DATABASES={'default': {
        'ENGINE': 'django.db.backends.postgresql',
        'NAME': os.environ['PGDATABASE'],
        'USER': os.environ['PGUSER'],
        'HOST': os.environ['PGHOST'],
        'PORT': os.environ.get('PGPORT', '5432'),
    }},
    DEFAULT_AUTO_FIELD='django.db.models.BigAutoField',
)
django.setup()

from django.db import DataError, connection  # noqa: E402
from django.db.models import BigIntegerField, F, Func, TextField, Value  # noqa: E402
from django.http import JsonResponse  # noqa: E402
from text_shop.models import Order  # noqa: E402
from common import run, test  # noqa: E402

with connection.cursor() as c:
    c.execute('''CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake.snowflake_nextval(), item text);
                 INSERT INTO orders (item) VALUES ('book'), ('pen'), ('ink')''')
    c.execute('SELECT id, item FROM orders ORDER BY id')
    HELD = c.fetchall()


def order_by_public_id(public_id):
    """The recipe's lookup: the row of a public ID in any form the reader
    takes; a string that is no ID (22P02, 22003) is not found."""
    try:
        return Order.objects.get(id=Func(Value(public_id), function='snowflake.snowflake_from_base32',
                                         output_field=BigIntegerField()))
    except DataError:
        raise Order.DoesNotExist


def browser(response):
    """What a browser's JSON.parse would keep: every integer above 2^53 as
    the double it becomes."""
    def number(s):
        v = int(s)
        return float(v) if abs(v) > 2**53 else v
    return json.loads(response.content, parse_int=number)


@test
def recipe():
    """the recipe: the annotated base32 form in JsonResponse is a string, exact, and reads back to the key"""
    orders = Order.objects.annotate(public_id=Func(F('id'), function='snowflake.snowflake_base32',
                                                   output_field=TextField())).values('public_id', 'item')
    sent = browser(JsonResponse(list(orders.order_by('id')), safe=False))
    assert [o['item'] for o in sent] == [h[1] for h in HELD], sent
    for o, (key, item) in zip(sent, HELD):
        assert isinstance(o['public_id'], str) and len(o['public_id']) == 13, o
        found = order_by_public_id(o['public_id'])
        assert (found.id, found.item) == (key, item)
        variant = o['public_id'].upper().replace('0', 'O')
        found = order_by_public_id(variant)
        assert (found.id, found.item) == (key, item), variant


@test
def not_found():
    """a string that is no ID is not found"""
    for s in ('0000-0000-0001', '8000000000000', 'order_14y6vtn380w0s', 'nonsense'):
        try:
            order_by_public_id(s)
        except Order.DoesNotExist:
            continue
        raise AssertionError(s)


@test
def plain():
    """without it the key is a JSON number, which a browser rounds"""
    sent = browser(JsonResponse(list(Order.objects.order_by('id').values('id', 'item')), safe=False))
    assert all(isinstance(o['id'], float) for o in sent), sent
    assert any(int(o['id']) != key for o, (key, _) in zip(sent, HELD)), sent


run()
