from __future__ import annotations

from django.db import models


class Item(models.Model):
    name = models.CharField(max_length=100, unique=True)
    stock = models.PositiveIntegerField(default=0)


class Order(models.Model):
    item = models.ForeignKey(Item, on_delete=models.PROTECT)
    quantity = models.PositiveIntegerField()
    receipt_sent = models.BooleanField(default=False)
    # The id of the receipt task's result (TaskResult.id).
    receipt_job = models.CharField(max_length=32, blank=True, default="")
