"""``python manage.py conveyor_worker``: run the project's tasks until stopped."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import close_old_connections

from conveyor.app import App
from conveyor.errors import ConveyorError
from conveyor.integrations._tasks import run_tasks_inside
from conveyor.integrations.django import App as DjangoApp
from conveyor.integrations.django import queue
from conveyor.integrations.django.config import settings
from conveyor.worker.loader import load_app


class Command(BaseCommand):
    help = (
        "Run the tasks of settings.CONVEYOR['APP'] (or --app) from the project's queue. "
        "SIGTERM or Ctrl-C stops claiming and lets running tasks finish within --grace."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--app", help="The conveyor.App to run, as module:attribute.")
        parser.add_argument("--queues", help="Comma-separated queues (default: the tasks').")
        parser.add_argument("--concurrency", type=int, default=10, help="Tasks at once.")
        parser.add_argument("--lease", type=float, default=30.0, help="Seconds per claim.")
        parser.add_argument("--grace", type=float, default=30.0, help="Seconds to finish.")
        parser.add_argument(
            "--burst", action="store_true", help="Exit once no job is claimable or running."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            stats = self._run(options)
        except ConveyorError as exc:
            raise CommandError(str(exc)) from None
        if options["burst"]:
            self.stderr.write(stats.summary() or "nothing to do")

    def _run(self, options: dict[str, Any]) -> Any:
        spec = options["app"] or settings().app
        app: App = load_app(spec) if spec else DjangoApp()
        if not isinstance(app, DjangoApp):
            app.bind(queue())  # a plain conveyor.App works on the project's queue too
        # Django's own tasks (settings.TASKS with conveyor's backend) run beside them.
        django_queues = _django_tasks(app)
        if not app.tasks:
            raise CommandError(
                "no tasks to run: set CONVEYOR['APP'] = 'module:app' or --app, or define "
                "tasks for conveyor's django.tasks backend"
            )
        # As around a request: no connection that went stale or broken is reused. (An
        # async task reaches the ORM through sync_to_async, on threads Django manages.)
        run_tasks_inside(app, _fresh_connections, sync_only=True)
        names = [n.strip() for n in (options["queues"] or "").split(",") if n.strip()]
        watched = names or list(dict.fromkeys([*app.queues, *django_queues]))
        return app.run_worker(
            queues=watched,
            concurrency=options["concurrency"],
            lease=options["lease"],
            grace=options["grace"],
            burst=options["burst"],
        )


def _django_tasks(app: App) -> list[str]:
    """Add the project's Django tasks to ``app`` when ``settings.TASKS`` uses conveyor's
    backend; answers the queues that backend accepts."""
    from django.conf import settings as django_settings

    backends = getattr(django_settings, "TASKS", None) or {}
    if not any(str(b.get("BACKEND", "")).startswith("conveyor.") for b in backends.values()):
        return []
    from conveyor.integrations.django.tasks import add_tasks

    return add_tasks(app)


@contextmanager
def _fresh_connections() -> Iterator[None]:
    close_old_connections()
    try:
        yield
    finally:
        close_old_connections()
