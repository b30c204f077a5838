"""conveyor in a Flask application: an extension object and a ``flask conveyor`` CLI
group.

    from flask import Flask
    from conveyor.integrations.flask import Conveyor
    from myapp.tasks import tasks             # a conveyor.App with @tasks.task functions

    conveyor_ = Conveyor(tasks=tasks)

    def create_app() -> Flask:
        app = Flask(__name__)
        app.config["CONVEYOR_DATABASE_URL"] = "sqlite:///instance/app.db"
        conveyor_.init_app(app)
        return app

    # in a view, inside the application's own transaction:
    send_receipt.enqueue(order_id=order_id, conn=get_db())
    # or through the queue itself:
    conveyor_.queue.enqueue("shop.send_receipt", {"order_id": order_id}, conn=get_db())

    $ flask --app myapp conveyor worker --concurrency 4
    $ flask --app myapp conveyor migrate

Config: ``CONVEYOR_DATABASE_URL`` (default ``sqlite:///conveyor.db``;
``$CONVEYOR_DATABASE_URL``, when set, beats it, as it beats every URL in code); options
of ``conveyor.connect`` go in its query string. The queue opens on first use, once per
Flask app, and is shared by its threads. The worker runs each task inside the Flask
app's application context.
"""

from __future__ import annotations

import threading
from typing import Any

import click
from flask import Flask, current_app
from flask.cli import AppGroup, with_appcontext

import conveyor
from conveyor.app import App
from conveyor.config import database_url
from conveyor.errors import ConfigurationError, ConveyorError
from conveyor.integrations._tasks import run_tasks_inside
from conveyor.queue import Queue

EXTENSION = "conveyor"


class Conveyor:
    """The extension. ``tasks``: the ``conveyor.App`` whose tasks the worker runs; it is
    bound to the Flask app's database, and its queue is the extension's queue, so
    ``task.enqueue(...)`` and ``conveyor_.queue`` are the same."""

    def __init__(self, app: Flask | None = None, *, tasks: App | None = None) -> None:
        self.tasks = tasks
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        app.config.setdefault("CONVEYOR_DATABASE_URL", database_url(None))
        url = app.config["CONVEYOR_DATABASE_URL"]
        if self.tasks is not None:
            # Now, so that no task is ever enqueued elsewhere (it connects on first use).
            # One conveyor.App follows one Flask app: the last one set up.
            self.tasks.bind(url)
        app.extensions[EXTENSION] = _Opened(url, self.tasks)
        app.cli.add_command(_cli)

    @property
    def queue(self) -> Queue:
        """The current Flask app's queue (opened on first use)."""
        return _state(current_app).queue()

    def close(self, app: Flask | None = None) -> None:
        """Close the queue of ``app`` (default: the current one)."""
        _state(app or current_app).close()


class _Opened:
    """One Flask app's queue, opened once for all its threads."""

    def __init__(self, url: str, tasks: App | None) -> None:
        self.url = url
        self.tasks = tasks
        self._queue: Queue | None = None
        self._lock = threading.Lock()

    def queue(self) -> Queue:
        if self.tasks is not None:
            return self.tasks.queue  # the tasks' queue, opened by them on first use
        with self._lock:
            if self._queue is None:
                self._queue = conveyor.connect(self.url)
            return self._queue

    def close(self) -> None:
        if self.tasks is not None:
            self.tasks.close()
        with self._lock:
            if self._queue is not None:
                self._queue.close()
            self._queue = None


def _state(app: Flask) -> _Opened:
    state = app.extensions.get(EXTENSION)
    if not isinstance(state, _Opened):
        raise ConfigurationError("conveyor is not set up for this Flask app: call init_app(app)")
    return state


# -- flask conveyor ... -------------------------------------------------------------
_cli = AppGroup(EXTENSION, help="The conveyor job queue of this application.")


@_cli.command("worker")
@click.option("--queues", help="Comma-separated queues (default: those of the tasks).")
@click.option("--concurrency", type=click.IntRange(min=1), default=10, show_default=True)
@click.option("--lease", type=click.FloatRange(min=0.001), default=30.0, show_default=True)
@click.option("--grace", type=click.FloatRange(min=0), default=30.0, show_default=True)
@click.option("--burst", is_flag=True, help="Exit once no job is claimable or running.")
@with_appcontext
def _worker(queues: str | None, **options: Any) -> None:
    """Run the application's tasks until stopped. SIGTERM or Ctrl-C stops claiming and
    lets running tasks finish within --grace."""
    app: Flask = current_app._get_current_object()  # type: ignore[attr-defined]
    state = _state(app)
    if state.tasks is None:
        raise click.ClickException("no tasks to run: give Conveyor(tasks=...) a conveyor.App")
    try:
        run_tasks_inside(state.tasks, app.app_context)
        names = [n.strip() for n in (queues or "").split(",") if n.strip()]
        stats = state.tasks.run_worker(queues=names or None, **options)
    except ConveyorError as exc:
        raise click.ClickException(str(exc)) from None
    if options["burst"]:
        click.echo(stats.summary() or "nothing to do", err=True)


@_cli.command("migrate")
@with_appcontext
def _migrate() -> None:
    """Create or upgrade conveyor's tables."""
    try:
        queue = _state(current_app).queue()  # opening migrates
        click.echo(f"schema at version {queue.schema_version()} on {queue.url}")
    except ConveyorError as exc:
        raise click.ClickException(str(exc)) from None


__all__ = ["Conveyor"]
