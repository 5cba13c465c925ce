# The models of docs/orms.md's "Django" section (3.2 and 4.x): a key whose
# value the column's default makes, and a table that names it.  PlainOrder is the
# declaration it warns against.
from django.db import models


class SnowflakeField(models.BigAutoField):
    """A bigint key the database fills in: Django leaves it out of the
    INSERT and takes it from RETURNING, as for any auto field, but the
    column is a plain bigint, with no sequence.  A migration gives it its
    default."""

    def db_type(self, connection):
        return 'bigint'


class Order(models.Model):
    id = SnowflakeField(primary_key=True)
    item = models.TextField()

    class Meta:
        db_table = 'orders'


class OrderLine(models.Model):
    id = SnowflakeField(primary_key=True)
    order = models.ForeignKey(Order, on_delete=models.CASCADE)
    name = models.TextField()

    class Meta:
        db_table = 'order_lines'


class PlainOrder(models.Model):
    # not so: Django sends this key in the INSERT, as NULL
    id = models.BigIntegerField(primary_key=True)
    item = models.TextField()

    class Meta:
        db_table = 'plain_orders'
