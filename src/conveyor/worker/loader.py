"""Finding the ``App`` a worker should run, from ``module:attribute`` text.

Only the module the operator names is imported: a job never names code to import."""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING

from conveyor.errors import ConfigurationError

if TYPE_CHECKING:
    from conveyor.app import App


def load_app(spec: str) -> App:
    """``"package.module:app"`` -> that ``App`` (or what a factory of that name returns).
    The current directory is importable, as it is for ``python -m``."""
    from conveyor.app import App

    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigurationError(
            f"--app: expected module:attribute (as in tasks:app), got {spec!r}"
        )
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise ConfigurationError(f"--app: no module named {module_name!r}") from None
        raise ConfigurationError(f"--app: importing {module_name} failed: {exc}") from None
    except Exception as exc:
        raise ConfigurationError(
            f"--app: importing {module_name} failed: {type(exc).__name__}: {exc}"
        ) from None
    found: object = module
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise ConfigurationError(f"--app: module {module_name} has no attribute {attribute!r}")
        found = getattr(found, part)
    if not isinstance(found, App) and callable(found):
        try:
            found = found()  # an app factory
        except TypeError as exc:
            raise ConfigurationError(f"--app: calling {spec} failed: {exc}") from None
    if not isinstance(found, App):
        raise ConfigurationError(
            f"--app: {spec} is a {type(found).__name__}, expected a conveyor.App"
        )
    return found
