"""Building frozen dataclasses quickly, where every enqueue builds some.

A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__`` (its
own ``__setattr__`` refuses): a Python-level call per field, which for ``Job`` (30
fields) cost more than the rest of an enqueue's checks together. ``builder(cls)`` gives
a function that takes the same keyword arguments as ``cls`` and returns the same object:
it fills an unfrozen twin of the class (the same slots, so plain attribute stores) and
then makes it an instance of ``cls``, which CPython allows between classes of the same
layout. ``__post_init__`` runs as the class's own ``__init__`` would run it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar, cast

T = TypeVar("T")


def builder(cls: type[T]) -> Callable[..., T]:
    """``cls(**fields)``, faster, for a frozen dataclass with slots (keywords only)."""
    params = getattr(cls, "__dataclass_params__", None)
    known: Any = cls  # a dataclass, as checked next
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__name__}: expected a frozen dataclass with slots")
    specs: list[tuple[str, Any, Any]] = []
    for f in dataclasses.fields(known):
        if not f.init:
            raise TypeError(f"{cls.__name__}.{f.name}: every field must be an argument")
        kept = dataclasses.field(default=f.default, default_factory=f.default_factory)
        specs.append((f.name, f.type, kept))
    post_init = getattr(cls, "__post_init__", None)

    def becomes(made: Any) -> None:  # the twin's __post_init__: the last step of its init
        made.__class__ = cls
        if post_init is not None:
            post_init(made)

    twin: type[Any] = dataclasses.make_dataclass(
        f"_Unfrozen{cls.__name__}",
        specs,
        bases=cls.__dict__.get("__orig_bases__", cls.__bases__),  # Generic[T] as written
        namespace={"__post_init__": becomes, "twin_of": cls},
        kw_only=True,
        slots=True,
        repr=False,
        eq=False,
    )
    # The layouts must match: found out here, once, rather than on a caller's call.
    try:
        twin(**{f.name: None for f in dataclasses.fields(known) if _required(f)})
    except Exception as exc:
        if isinstance(exc, TypeError) and "__class__ assignment" in str(exc):
            raise TypeError(f"{cls.__name__}: its unfrozen twin's layout differs ({exc})") from None
        # Otherwise ``__post_init__`` refused the placeholder values: the class was
        # assigned before it ran, so the layouts match.
    return cast(Callable[..., T], twin)


def is_twin(cls: type) -> bool:
    """Whether ``cls`` is a twin made by ``builder`` (a subclass of the same bases as
    its frozen class, which code that walks ``__subclasses__()`` should pass over)."""
    return "twin_of" in cls.__dict__


def _required(f: dataclasses.Field[Any]) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


__all__ = ["builder", "is_twin"]
