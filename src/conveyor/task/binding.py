"""How a task's arguments become a job's JSON payload, and back.

The payload is a JSON object keyed by parameter name. Positional arguments are bound to
their parameter names when the job is enqueued, so ``parse.enqueue("u")`` and
``parse.enqueue(url="u")`` store the same job. A ``*args`` parameter is stored as a list
under its own name, and ``**kwargs`` are merged into the object. Defaults are not
stored: they apply when the job runs. Nothing but JSON goes in; nothing is imported by
name from job data."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from conveyor.errors import ConfigurationError, InvalidArgument

_P = inspect.Parameter


class PayloadMismatch(Exception):
    """A stored payload does not fit the task's parameters (the task changed since)."""


class Binding:
    """The parameters of a task function, after its leading ``ctx``."""

    def __init__(self, fn: Callable[..., Any], task_name: str) -> None:
        self.task_name = task_name
        self._signature = inspect.signature(fn)
        params = list(self._signature.parameters.values())
        if not params or params[0].kind not in (_P.POSITIONAL_ONLY, _P.POSITIONAL_OR_KEYWORD):
            raise ConfigurationError(
                f"task {task_name}: expected the function to take the context first, "
                f"as in def {getattr(fn, '__name__', 'task')}(ctx, ...)"
            )
        self._ctx_name = params[0].name
        self.parameters = {p.name: p for p in params[1:]}
        self._var_positional = next(
            (p.name for p in params[1:] if p.kind is _P.VAR_POSITIONAL), None
        )
        self._var_keyword = any(p.kind is _P.VAR_KEYWORD for p in params[1:])
        # Checked on every run; inspect's full bind runs only when one is missing.
        self._required = frozenset(
            p.name
            for p in params[1:]
            if p.default is _P.empty and p.kind not in (_P.VAR_POSITIONAL, _P.VAR_KEYWORD)
        )
        # Every parameter taken by keyword (no positional-only one, no *args): a payload
        # whose members are all parameters and hold every required one is the keywords
        # themselves, checked with two set comparisons (each job a worker runs passes here).
        by_keyword = all(p.kind in (_P.POSITIONAL_OR_KEYWORD, _P.KEYWORD_ONLY) for p in params[1:])
        self._keywords = frozenset(self.parameters) if by_keyword else None

    def to_payload(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The JSON object stored for a call with ``args`` and ``kwargs``."""
        try:
            bound = self._signature.bind(None, *args, **kwargs)
        except TypeError as exc:
            raise InvalidArgument(f"arguments for task {self.task_name}: {exc}") from None
        payload: dict[str, Any] = {}
        for name, value in bound.arguments.items():
            if name == self._ctx_name:
                continue
            kind = self.parameters[name].kind
            if kind is _P.VAR_POSITIONAL:
                if value:
                    payload[name] = list(value)
            elif kind is _P.VAR_KEYWORD:
                clash = set(value) & set(payload)
                if clash or (self._var_positional in value):
                    raise InvalidArgument(
                        f"arguments for task {self.task_name}: keyword(s) "
                        f"{', '.join(sorted(clash or {self._var_positional or ''}))} "
                        "collide with a parameter name"
                    )
                payload.update(value)
            else:
                payload[name] = value
        return payload

    def to_call(self, payload: Any) -> tuple[list[Any], dict[str, Any]]:
        """Positional and keyword arguments (after ``ctx``) for a stored payload."""
        if payload is None:
            payload = {}
        keywords = self._keywords
        if keywords is not None and type(payload) is dict:
            given = payload.keys()
            if given <= keywords and self._required <= given:
                return [], dict(payload)
        if not isinstance(payload, dict):
            raise PayloadMismatch(f"expected a JSON object, got {type(payload).__name__}")
        rest = dict(payload)
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        # Values before a *args parameter go positionally so *args can follow them; once
        # one is missing (its default applies), later ones can only go by keyword.
        gap = False
        for name, param in self.parameters.items():
            if param.kind is _P.VAR_POSITIONAL:
                extra = rest.pop(name, [])
                if not isinstance(extra, list):
                    raise PayloadMismatch(f"{name}: expected a list for *{name}")
                if extra and gap:
                    raise PayloadMismatch(f"cannot pass *{name} after a missing argument")
                args.extend(extra)
            elif param.kind is _P.VAR_KEYWORD:
                continue
            elif param.kind is _P.POSITIONAL_ONLY or (
                param.kind is _P.POSITIONAL_OR_KEYWORD and self._var_positional is not None
            ):
                if name not in rest:
                    gap = True
                elif not gap:
                    args.append(rest.pop(name))
                elif param.kind is _P.POSITIONAL_ONLY:
                    raise PayloadMismatch(f"{name}: positional-only, after a missing argument")
                else:
                    kwargs[name] = rest.pop(name)
            elif name in rest:
                kwargs[name] = rest.pop(name)
        if rest and not self._var_keyword:
            raise PayloadMismatch(f"unexpected field(s) {', '.join(sorted(rest))}")
        kwargs.update(rest)
        if self._ctx_name in kwargs or not self._required <= payload.keys():
            try:  # for inspect's own words about what is missing
                self._signature.bind(None, *args, **kwargs)
            except TypeError as exc:
                raise PayloadMismatch(str(exc)) from None
        return args, kwargs
