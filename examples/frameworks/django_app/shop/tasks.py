"""The shop's tasks, written for Django's own task framework (``django.tasks``; the
``django-tasks`` backport before Django 6). ``settings.TASKS`` keeps them in conveyor,
in the project's database; ``python manage.py conveyor_worker`` runs them."""

from __future__ import annotations

import asyncio
from typing import Any

try:
    from django.tasks import task  # Django 6
except ImportError:
    from django_tasks import task  # the backport, Django 4.2 to 5.x

from shop.models import Order


class AuditFailed(Exception):
    pass


@task(priority=10)
def send_receipt(order_id: int) -> dict[str, int]:
    # A real shop would email the customer; this one records that it did.
    sent = Order.objects.filter(id=order_id).update(receipt_sent=True)
    return {"orders": sent}


@task(takes_context=True, queue_name="stock")
async def weigh(context: Any, grams: list[int]) -> dict[str, int]:
    """An async task that reads its context: which attempt this is."""
    await asyncio.sleep(0)
    return {"total": sum(grams), "attempt": context.attempt}


@task(queue_name="stock")
def audit(name: str) -> None:
    raise AuditFailed(f"the books for {name} do not balance")
