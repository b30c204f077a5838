"""``import conveyor`` stays light: an app that only enqueues never loads the worker
runtime, the maintenance services or the notifiers; they load when first used."""

from __future__ import annotations

import subprocess
import sys

RUNTIME = ("conveyor.worker", "conveyor.maintenance", "conveyor.notify")


def loaded_after(code: str) -> list[str]:
    names = "' '.join(m for m in sys.modules if m.startswith('conveyor'))"
    probe = f"{code}\nimport sys\nprint({names})"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_import_conveyor_does_not_load_the_runtime() -> None:
    loaded = loaded_after("import conveyor\napp = conveyor.App(); ctx = conveyor.Context")
    assert "conveyor.task" in loaded
    assert [m for m in loaded if m.startswith(RUNTIME)] == []


def test_the_runtime_loads_on_first_use_of_worker() -> None:
    loaded = loaded_after("import conveyor\nassert conveyor.Worker.__name__ == 'Worker'")
    assert "conveyor.worker.runtime" in loaded and "conveyor.maintenance" in loaded
