"""The tasks backend on Django 6's own ``django.tasks`` (Django 6 needs Python 3.12+):
the example shop's tests run under a Python 3.12 interpreter, in a virtualenv made once
and kept under the temporary directory, keyed by its requirements, on SQLite and on
MySQL (Django's MySQL engine: mysqlclient, built against the MariaDB client library)."""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.frameworks.conftest import ROOT, drop_database

SHOP = ROOT / "examples/frameworks/django_app"
# conveyor itself comes from the source tree (PYTHONPATH): only its dependencies here.
REQUIREMENTS = [
    "django>=6,<7",
    "typer>=0.12",
    "rich>=13",
    "cronsim>=2.6",
    "PyMySQL>=1.1",
    "mysqlclient>=2.2.1",
]


def _python312() -> str | None:
    """A Python 3.12 that runs (pyenv's shims may name one that does not)."""
    pyenv = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python")))
    for candidate in [*reversed(pyenv), shutil.which("python3.12")]:
        if candidate is None:
            continue
        probe = subprocess.run(
            [candidate, "-c", "import sys; print(sys.version_info[:2] == (3, 12))"],
            capture_output=True, text=True,
        )  # fmt: skip
        if probe.returncode == 0 and probe.stdout.strip() == "True":
            return candidate
    return None


def _virtualenv(python: str) -> Path:
    """A virtualenv of ``python`` with ``REQUIREMENTS``, made once per requirements."""
    key = hashlib.sha256("\n".join([python, *REQUIREMENTS]).encode()).hexdigest()[:16]
    home = Path(tempfile.gettempdir()) / f"conveyor-django6-{key}"
    ready = home / "ready"
    if ready.exists():
        return home
    shutil.rmtree(home, ignore_errors=True)
    subprocess.run([python, "-m", "venv", str(home)], check=True, timeout=300)
    subprocess.run(
        [str(home / "bin/python"), "-m", "pip", "install", "-q", *REQUIREMENTS],
        check=True, timeout=900, capture_output=True,
    )  # fmt: skip
    ready.write_text("\n".join(REQUIREMENTS))
    return home


@pytest.mark.parametrize("backend_name", ["sqlite", "mysql"])
def test_the_shop_tests_pass_on_django_6(
    app_db_url: str, backend_name: str, database_name: str
) -> None:
    python = _python312()
    if python is None:
        pytest.skip("no Python 3.12 interpreter (python3.12, or pyenv's 3.12): Django 6 needs it")
    home = _virtualenv(python)
    venv_python = str(home / "bin/python")
    version = subprocess.run(
        [venv_python, "-c", "import django, django.tasks; print(django.get_version())"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert version.startswith("6."), version
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")},
        "DATABASE_URL": app_db_url,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
    }
    try:
        run = subprocess.run(
            [venv_python, "manage.py", "test", "shop", "--noinput", "-v", "2"],
            cwd=SHOP, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    finally:
        if backend_name == "mysql":  # when a failed run left it behind
            drop_database(f"test_{database_name}", backend_name)
    report = run.stderr
    assert run.returncode == 0, report[-4000:]
    assert "Ran 7 tests" in report and "\nOK" in report
    # The backport is not installed there: the backend ran on Django's own framework.
    missing = subprocess.run([venv_python, "-c", "import django_tasks"], capture_output=True)
    assert missing.returncode != 0
