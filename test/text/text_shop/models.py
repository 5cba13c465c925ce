# The table of docs/text-ids.md's Django recipe, made by django_test.py.
from django.db import models


class Order(models.Model):
    id = models.BigIntegerField(primary_key=True)
    item = models.TextField()

    class Meta:
        db_table = 'orders'
        managed = False
