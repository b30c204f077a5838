"""The shop's tasks. ``App`` from the Django integration enqueues into the project's
own database; ``python manage.py conveyor_worker`` runs them."""

from __future__ import annotations

import conveyor
from conveyor.integrations.django import App
from shop.models import Order

app = App()


@app.task(name="shop.send_receipt", max_attempts=5)
def send_receipt(ctx: conveyor.Context, order_id: int) -> dict[str, int]:
    # A real shop would email the customer; this one records that it did.
    sent = Order.objects.filter(id=order_id).update(receipt_sent=True)
    return {"orders": sent}
