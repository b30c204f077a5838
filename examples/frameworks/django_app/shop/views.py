"""Placing an order: the order, the stock it takes and its receipt task commit together,
or none of them does."""

from __future__ import annotations

import json
from typing import Any

from django.db import transaction
from django.db.models import F
from django.http import HttpRequest, JsonResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from shop.models import Item, Order
from shop.tasks import send_receipt


class OutOfStock(Exception):
    pass


def _order(body: bytes) -> tuple[Item, int]:
    data: dict[str, Any] = json.loads(body)
    return get_object_or_404(Item, name=data["item"]), int(data["quantity"])


def _take_stock(item: Item, quantity: int) -> None:
    # One guarded statement: two orders racing for the last unit cannot both win.
    taken = Item.objects.filter(id=item.id, stock__gte=quantity).update(stock=F("stock") - quantity)
    if not taken:
        raise OutOfStock(item.name)


@csrf_exempt
@require_POST
def place_order(request: HttpRequest) -> JsonResponse:
    """Enqueue inside the transaction: the queue shares Django's database, so the task
    is written on Django's own connection, and when the stock runs out after it was
    enqueued, the rollback takes it with it."""
    item, quantity = _order(request.body)
    try:
        with transaction.atomic():
            order = Order.objects.create(item=item, quantity=quantity)
            result = send_receipt.enqueue(order.id)
            order.receipt_job = result.id
            order.save(update_fields=["receipt_job"])
            _take_stock(item, quantity)
    except OutOfStock:
        return JsonResponse({"error": f"not enough {item.name} in stock"}, status=409)
    return JsonResponse({"order": order.id, "receipt_job": result.id}, status=201)


def _send_receipt_of(order: Order) -> None:
    order.receipt_job = send_receipt.enqueue(order.id).id
    order.save(update_fields=["receipt_job"])


@csrf_exempt
@require_POST
def place_order_on_commit(request: HttpRequest) -> JsonResponse:
    """The other way: enqueue once the transaction has committed (a crash between the
    commit and the enqueue loses the task)."""
    item, quantity = _order(request.body)
    try:
        with transaction.atomic():
            order = Order.objects.create(item=item, quantity=quantity)
            transaction.on_commit(lambda: _send_receipt_of(order))
            _take_stock(item, quantity)
    except OutOfStock:
        return JsonResponse({"error": f"not enough {item.name} in stock"}, status=409)
    return JsonResponse({"order": order.id}, status=201)


@require_GET
def show_order(request: HttpRequest, order_id: int) -> JsonResponse:
    order = get_object_or_404(Order, id=order_id)
    receipt = send_receipt.get_result(order.receipt_job) if order.receipt_job else None
    return JsonResponse(
        {
            "order": order.id,
            "receipt_sent": order.receipt_sent,
            "receipt_job": None if receipt is None else str(receipt.status),
        }
    )
