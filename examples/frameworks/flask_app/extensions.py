"""The application's extensions, apart from the factory so views and tasks can use them."""

from __future__ import annotations

from conveyor.integrations.flask import Conveyor
from examples.frameworks.flask_app.tasks import tasks

conveyor_ = Conveyor(tasks=tasks)
