from django.db import models


class Item(models.Model):
    """A small row whose ``update`` events the emitters send (a few fields, like an app's)."""

    name = models.CharField(max_length=100)
    quantity = models.IntegerField(default=0)
    updated = models.DateTimeField(auto_now=True)
