"""The Django app: add ``"conveyor.integrations.django"`` to ``INSTALLED_APPS`` for the
``conveyor_worker`` management command, the settings checks, and conveyor's tables
created or upgraded by ``manage.py migrate``."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate

from conveyor.integrations.django import queue
from conveyor.integrations.django.config import settings


class ConveyorConfig(AppConfig):
    name = "conveyor.integrations.django"
    label = "conveyor"
    verbose_name = "conveyor"

    def ready(self) -> None:
        settings()  # a typo in settings.CONVEYOR stops the project at start-up
        post_migrate.connect(_migrate, sender=self)


def _migrate(using: str = "default", **kwargs: Any) -> None:
    """``manage.py migrate`` brings conveyor's tables up to date too (opening the queue
    migrates it), so no request ever opens it inside a transaction on a fresh database."""
    config = settings()
    if using == config.using or config.database_url:
        queue()
