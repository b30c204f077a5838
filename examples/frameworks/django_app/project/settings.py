"""Settings of the example shop: one database (``$DATABASE_URL``) holds the shop's
tables and conveyor's queue, so an order and its receipt task commit together."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlsplit

BASE_DIR = Path(__file__).resolve().parent.parent
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "only-for-the-example")
DEBUG = True
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
ROOT_URLCONF = "project.urls"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "conveyor.integrations.django",  # python manage.py conveyor_worker
    "shop",
]
try:
    import django.tasks  # noqa: F401  (Django 6)
except ImportError:
    INSTALLED_APPS.append("django_tasks")  # the backport, Django 4.2 to 5.x

# Django's tasks live in conveyor's queue, in Django's default database (the same one:
# a task enqueued inside transaction.atomic() commits or rolls back with it).
TASKS = {
    "default": {
        "BACKEND": "conveyor.integrations.django.tasks.ConveyorBackend",
        "QUEUES": ["default", "stock"],
    }
}


def _database(url: str) -> dict[str, object]:
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        name = Path(parts.path.removeprefix("/"))
        # A file for tests too: conveyor's own connections must see the test database.
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": name,
            "TEST": {"NAME": name.with_name(f"test_{name.name}")},
        }
    if parts.scheme in ("mysql", "mariadb"):
        return {
            # mysqlclient: pip install 'conveyor[django-mysql]'
            "ENGINE": "django.db.backends.mysql",
            "NAME": parts.path.removeprefix("/"),
            "USER": unquote(parts.username or ""),
            "PASSWORD": unquote(parts.password or ""),
            "HOST": parts.hostname or "",
            "PORT": parts.port or "",
            # Four-byte UTF-8 (emoji) as conveyor's own tables and connections take it.
            "OPTIONS": {"charset": "utf8mb4"},
            "TEST": {"CHARSET": "utf8mb4"},
        }
    return {
        "ENGINE": "django.db.backends.postgresql",  # psycopg 3
        "NAME": parts.path.removeprefix("/"),
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "",
        "PORT": parts.port or "",
    }


DATABASES = {"default": _database(os.environ.get("DATABASE_URL", f"sqlite:///{BASE_DIR}/shop.db"))}
