"""conveyor in a Django project: the queue lives in the project's own database, so a job
can be enqueued inside ``transaction.atomic()`` and commit or roll back with the rows
that asked for it.

    # settings.py
    INSTALLED_APPS = [..., "conveyor.integrations.django"]
    CONVEYOR = {"APP": "shop.tasks:app"}        # every key is optional; see below

    # shop/tasks.py
    from conveyor.integrations.django import App
    app = App()

    @app.task(name="shop.send_receipt")
    def send_receipt(ctx, order_id: int) -> None: ...

    # shop/views.py
    from conveyor.integrations.django import db_connection
    with transaction.atomic():
        order = Order.objects.create(...)
        send_receipt.enqueue(order_id=order.id, conn=db_connection())
    # or, once the transaction has committed:
    transaction.on_commit(lambda: send_receipt.enqueue(order_id=order.id))

    $ python manage.py conveyor_worker --concurrency 4

``settings.CONVEYOR`` keys: ``DATABASE_URL`` (default: the Django database named by
``USING``, ``"default"``; ``settings.CONVEYOR_DATABASE_URL`` is read too), ``SCHEMA``
(the PostgreSQL schema of conveyor's tables), ``APP`` (``"module:attribute"``, the
``conveyor.App`` the worker command runs). Options of ``conveyor.connect`` go in the
URL's query string. PostgreSQL needs Django's psycopg 3 backend (Django 4.2+); MySQL and
MariaDB, Django's engine on mysqlclient (the ``django-mysql`` extra), whose connections
conveyor's MySQL queue takes as ``conn=``.
"""

from __future__ import annotations

import threading
from typing import Any

from django.db import connections

import conveyor
from conveyor.integrations.django.config import settings
from conveyor.queue import Queue

_lock = threading.Lock()
_queues: dict[str, Queue] = {}


def queue(url: str | None = None) -> Queue:
    """The project's queue (or the one at ``url``), opened on first use and shared by
    every thread of the process. Its schema is brought up to date only when it is not:
    checking takes no lock, so a first use inside ``transaction.atomic()`` on SQLite
    never waits for the write lock that the transaction itself holds."""
    url = url or settings().url()
    with _lock:
        if url not in _queues:  # (a test run switches to its test database)
            opened = conveyor.connect(url, migrate=False)
            try:
                if opened.schema_version() < opened.latest_schema_version:
                    opened.migrate()
            except BaseException:
                opened.close()
                raise
            _queues[url] = opened
        return _queues[url]


def db_connection(using: str | None = None) -> Any:
    """Django's own DB-API connection (sqlite3, psycopg or MySQLdb), opened if need be. Pass it
    as ``conn=`` so a job commits or rolls back with Django's transaction."""
    wrapper = connections[using or settings().using]
    wrapper.ensure_connection()
    return wrapper.connection


class App(conveyor.App):
    """A ``conveyor.App`` whose queue is the project's (``queue()``): tasks enqueue into
    Django's database, resolved when first used (so a test run's database is the one
    used in tests)."""

    @property
    def queue(self) -> Queue:
        return queue()


def close() -> None:
    """Close the queues this process opened (tests, a clean shutdown)."""
    with _lock:
        opened = list(_queues.values())
        _queues.clear()
    for q in opened:
        q.close()


__all__ = ["App", "close", "db_connection", "queue"]
