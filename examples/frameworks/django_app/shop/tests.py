"""The shop's tests (``python manage.py test shop``), on whichever database
``$DATABASE_URL`` names. TransactionTestCase: the transactions under test really
commit or roll back, and the queue's own connections see the outcome."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django.core.management import call_command
from django.db import transaction
from django.test import TransactionTestCase
from django.utils import timezone

from conveyor.integrations import django as conveyor_django
from shop.models import Item, Order
from shop.tasks import audit, send_receipt, weigh


class Rollback(Exception):
    pass


class OrdersTest(TransactionTestCase):
    def setUp(self) -> None:
        self.queue = conveyor_django.queue()
        # conveyor's tables are not Django's: clear what an earlier test left.
        for job in self.queue.jobs(limit=1000):
            if not job.is_final:
                self.queue.cancel(job.id)
        self.queue.prune(older_than=0, statuses=["completed", "failed", "cancelled"])
        self.tea = Item.objects.create(name="tea", stock=3)

    @classmethod
    def tearDownClass(cls) -> None:
        conveyor_django.close()  # before Django drops the test database
        super().tearDownClass()

    def order(self, quantity: int, path: str = "/orders") -> tuple[int, dict[str, Any]]:
        body = json.dumps({"item": "tea", "quantity": quantity})
        response = self.client.post(path, body, content_type="application/json")
        return response.status_code, response.json()

    def test_an_order_and_its_receipt_task_commit_together(self) -> None:
        status, body = self.order(2)
        self.assertEqual(status, 201)
        job = self.queue.get(int(body["receipt_job"]))
        assert job is not None
        self.assertEqual(
            (job.task, job.payload, job.status, job.priority),
            ("shop.tasks.send_receipt", {"args": [body["order"]], "kwargs": {}}, "pending", -10),
        )
        result = send_receipt.get_result(body["receipt_job"])
        self.assertEqual((str(result.status), result.args), ("READY", [body["order"]]))

    def test_the_first_order_opens_the_queue_inside_its_transaction(self) -> None:
        conveyor_django.close()  # as in a fresh server process: nothing opened yet
        status, body = self.order(1)
        self.assertEqual(status, 201, body)
        self.assertEqual(Order.objects.get(id=body["order"]).receipt_job, body["receipt_job"])

    def test_a_refused_order_leaves_neither_order_nor_task(self) -> None:
        status, _ = self.order(5)  # only 3 in stock: refused after the task was enqueued
        self.assertEqual(status, 409)
        self.assertEqual(Order.objects.count(), 0)
        self.assertEqual(self.queue.stats().total, 0)

    def test_a_rolled_back_atomic_block_takes_its_task_with_it(self) -> None:
        with self.assertRaises(Rollback), transaction.atomic():
            order = Order.objects.create(item=self.tea, quantity=1)
            result = send_receipt.enqueue(order.id)
            # Inside the transaction the job is there, for Django's connection only.
            self.assertIsNone(self.queue.get(int(result.id)))
            raise Rollback
        self.assertEqual(Order.objects.count(), 0)
        self.assertIsNone(self.queue.get(int(result.id)))
        self.assertEqual(self.queue.stats().total, 0)

    def test_on_commit_enqueues_only_once_committed(self) -> None:
        status, _ = self.order(9, "/orders/on-commit")
        self.assertEqual(status, 409)
        self.assertEqual(self.queue.stats().total, 0)  # rolled back: never enqueued
        status, body = self.order(1, "/orders/on-commit")
        self.assertEqual(status, 201)
        order = Order.objects.get(id=body["order"])
        job = self.queue.get(int(order.receipt_job))
        assert job is not None
        self.assertEqual(job.payload, {"args": [order.id], "kwargs": {}})

    def test_the_worker_command_sends_the_receipts(self) -> None:
        _, first = self.order(1)
        _, second = self.order(2)
        call_command("conveyor_worker", burst=True, concurrency=2)
        self.assertEqual(Order.objects.filter(receipt_sent=True).count(), 2)
        for body in (first, second):
            shown = self.client.get(f"/orders/{body['order']}").json()
            self.assertEqual(shown, {"order": body["order"], "receipt_sent": True,
                                     "receipt_job": "SUCCESSFUL"})  # fmt: skip
            result = send_receipt.get_result(body["receipt_job"])
            self.assertEqual(result.return_value, {"orders": 1})

    def test_results_show_status_return_value_and_errors(self) -> None:
        counted = weigh.enqueue([250, 500])
        failed = audit.enqueue("tea")
        later = weigh.using(run_after=timezone.now() + timedelta(hours=1)).enqueue([1])
        self.assertEqual(str(counted.status), "READY")
        call_command("conveyor_worker", burst=True, concurrency=2)
        counted.refresh()
        self.assertEqual(str(counted.status), "SUCCESSFUL")
        self.assertEqual(counted.return_value, {"total": 750, "attempt": 1})
        self.assertEqual(counted.attempts, 1)
        self.assertIsNotNone(counted.finished_at)
        failed.refresh()
        self.assertEqual(str(failed.status), "FAILED")
        (error,) = failed.errors
        self.assertEqual(error.exception_class_path, "shop.tasks.AuditFailed")
        self.assertIn("do not balance", error.traceback)
        later.refresh()
        self.assertEqual(str(later.status), "READY")  # not before its run_after
