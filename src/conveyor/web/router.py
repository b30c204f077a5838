"""The API's router: where each route's blocking work runs, and which role it needs.

- Every route that touches the database is a plain function (the database calls
  block). FastAPI would run them all in one shared pool of threads; on SQLite a write
  may wait seconds for another process's lock, and a few dozen such writes would then
  hold every thread while reads, which WAL lets run beside the writer, queue behind
  them. ``Router`` runs a GET or HEAD route in a pool of read threads and any other in
  a pool of write threads, so reads never wait for a thread behind writes.
- ``Router`` also records the role each route needs (from its ``auth.require``
  dependencies), so the guard can check the token and the role before a body is read.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import operator
import re
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
from anyio import CapacityLimiter
from fastapi import APIRouter, Response
from pydantic import BaseModel
from starlette.convertors import Convertor, register_url_convertor
from starlette.routing import compile_path

from conveyor.endpoints import ENDPOINTS, Endpoint
from conveyor.web import models
from conveyor.web.auth import Role, require
from conveyor.web.routes.common import errors

F = TypeVar("F", bound=Callable[..., Any])


class NameConvertor(Convertor[str]):
    """A name in a path: any text, '/' (sent as %2F, decoded before routing) and control
    characters included, so that the route, not the router, answers for it (a 422 for a
    name the queue refuses, never a 404)."""

    regex = "[\\s\\S]+"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


# Routes write ``{queue:name}``; registered before any route module builds its paths.
register_url_convertor("name", NameConvertor())

READ_THREADS = 32
WRITE_THREADS = 16

# Limiters are bound to the event loop that uses them: one pair per loop.
_LIMITERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, CapacityLimiter]] = (
    weakref.WeakKeyDictionary()
)


def limiter(kind: str) -> CapacityLimiter:
    """The running loop's pool for ``"read"`` or ``"write"`` work."""
    loop = asyncio.get_running_loop()
    pools = _LIMITERS.get(loop)
    if pools is None:
        pools = _LIMITERS[loop] = {
            "read": CapacityLimiter(READ_THREADS),
            "write": CapacityLimiter(WRITE_THREADS),
        }
    return pools[kind]


async def run_read(function: Callable[..., Any], *args: Any) -> Any:
    """Run a blocking read in the read pool."""
    call = functools.partial(function, *args)
    return await anyio.to_thread.run_sync(call, limiter=limiter("read"))


def in_pool(function: Callable[..., Any], kind: str) -> Callable[..., Any]:
    """``function`` as a coroutine that runs it in the ``kind`` pool. FastAPI reads the
    parameters from the signature, which is the function's own."""

    @functools.wraps(function)
    async def run(*args: Any, **kwargs: Any) -> Any:
        call = functools.partial(function, *args, **kwargs)
        return await anyio.to_thread.run_sync(call, limiter=limiter(kind))

    run.__signature__ = inspect.signature(function, eval_str=True)  # type: ignore[attr-defined]
    return run


@dataclass(frozen=True, slots=True)
class RouteRole:
    """A route's path pattern and methods, and the role it needs (None: public)."""

    pattern: re.Pattern[str]
    methods: frozenset[str]
    role: Role | None


class Router(APIRouter):
    """An ``APIRouter`` whose blocking routes run in the read or the write pool, and
    which remembers the role each of its routes needs (``roles``)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.roles: list[RouteRole] = []

    def add_api_route(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        methods = frozenset(str(m).upper() for m in kwargs.get("methods") or ("GET",))
        if not inspect.iscoroutinefunction(endpoint):
            endpoint = in_pool(endpoint, "read" if methods <= {"GET", "HEAD"} else "write")
        super().add_api_route(path, endpoint, **kwargs)
        needed = _strongest([*self.dependencies, *(kwargs.get("dependencies") or ())])
        pattern, _, _ = compile_path(self.prefix + path)
        self.roles.append(RouteRole(pattern, methods, needed))


def _strongest(dependencies: Sequence[Any]) -> Role | None:
    found: Role | None = None
    for dependency in dependencies:
        needed = getattr(getattr(dependency, "dependency", None), "needed", None)
        if isinstance(needed, Role) and (found is None or needed.rank > found.rank):
            found = needed
    return found


def needed_role(roles: Iterable[RouteRole], method: str, path: str) -> Role | None:
    """The role a request needs: that of the route it names; a reader's when only the
    method is wrong (the 405 then goes to callers with a token); None for public and
    unknown paths."""
    other_method = False
    for route in roles:
        if route.pattern.match(path):
            if method in route.methods:
                return route.role
            other_method = other_method or route.role is not None
    return Role.READER if other_method else None


def _model(name: str) -> Any:
    """A model named in the endpoint table: one of ``conveyor.web.models``, or a union
    of them (``"JobList | IdsOut"``)."""
    found = [getattr(models, part.strip()) for part in name.split("|")]
    return functools.reduce(operator.or_, found)


def _responses(e: Endpoint, response_model: Any) -> dict[int | str, dict[str, Any]]:
    every = errors(*e.errors)
    listed: dict[int | str, dict[str, Any]] = (
        every if e.every_error else {c: every[c] for c in e.errors}
    )
    if e.text is not None:
        return {200: {"content": {"text/plain": {}}, "description": e.text}, **listed}
    if e.also is not None:
        status, text = e.also
        return {status: {"model": response_model, "description": text}, **listed}
    return listed


def route(
    router: Router, op: str, *, method: str | None = None, operation_id: str | None = None
) -> Callable[[F], F]:
    """Register the decorated function as the route of operation ``op``, as the endpoint
    table (``conveyor.endpoints``) declares it: method, path, response model, status,
    documented errors and role. Its body parameter must be the table's request model
    (and it takes none when the table names none)."""
    e = ENDPOINTS[op]

    def register(function: F) -> F:
        wanted = None if e.request is None else _model(e.request)
        bodies = [
            p.annotation
            for p in inspect.signature(function, eval_str=True).parameters.values()
            if isinstance(p.annotation, type) and issubclass(p.annotation, BaseModel)
        ]
        if bodies != ([] if wanted is None else [wanted]):
            raise TypeError(f"route {op}: its body is {bodies}, the endpoint table says {wanted}")
        options: dict[str, Any] = {"methods": [method or e.method], "summary": e.summary}
        response_model = None
        if e.response is not None:
            response_model = options["response_model"] = _model(e.response)
        if e.status != 200:
            options["status_code"] = e.status
        if e.text is not None:
            options["response_class"] = Response
        if e.role is not None:
            options["dependencies"] = [require(Role(e.role))]
        if operation_id is not None:
            options["operation_id"] = operation_id
        router.add_api_route(e.path, function, responses=_responses(e, response_model), **options)
        return function

    return register
