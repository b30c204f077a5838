"""How task arguments become a JSON payload and back (pure: no database)."""

from __future__ import annotations

from typing import Any

import pytest

from conveyor.errors import ConfigurationError, InvalidArgument
from conveyor.task.binding import Binding, PayloadMismatch


def roundtrip(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Store a call as its payload, then run the function with the stored arguments."""
    binding = Binding(fn, "t")
    call_args, call_kwargs = binding.to_call(binding.to_payload(args, kwargs))
    return fn(None, *call_args, **call_kwargs)


def test_positional_arguments_are_stored_under_their_parameter_names() -> None:
    def parse(ctx: Any, url: str, depth: int = 1) -> None: ...

    binding = Binding(parse, "t")
    assert binding.to_payload(("u",), {}) == {"url": "u"}
    assert binding.to_payload((), {"url": "u", "depth": 3}) == {"url": "u", "depth": 3}
    assert binding.to_payload(("u", 3), {}) == binding.to_payload((), {"url": "u", "depth": 3})


def test_defaults_are_not_stored_and_apply_when_the_job_runs() -> None:
    def f(ctx: Any, a: int, b: int = 10) -> tuple[int, int]:
        return a, b

    assert Binding(f, "t").to_payload((1,), {}) == {"a": 1}
    assert roundtrip(f, 1) == (1, 10)


def test_star_args_are_a_list_and_star_kwargs_are_merged() -> None:
    def f(ctx: Any, first: int, *rest: int, flag: bool = False, **extra: Any) -> Any:
        return first, rest, flag, extra

    binding = Binding(f, "t")
    assert binding.to_payload((1, 2, 3), {"flag": True, "colour": "red"}) == {
        "first": 1, "rest": [2, 3], "flag": True, "colour": "red"
    }  # fmt: skip
    assert roundtrip(f, 1, 2, 3, flag=True, colour="red") == (1, (2, 3), True, {"colour": "red"})


def test_positional_only_parameters_roundtrip() -> None:
    def f(ctx: Any, a: int, b: int = 2, /, c: int = 3) -> tuple[int, int, int]:
        return a, b, c

    assert roundtrip(f, 1) == (1, 2, 3)
    assert roundtrip(f, 1, 5, c=7) == (1, 5, 7)


def test_arguments_that_do_not_fit_are_refused_before_anything_is_stored() -> None:
    def f(ctx: Any, a: int) -> None: ...

    binding = Binding(f, "t")
    with pytest.raises(InvalidArgument, match="arguments for task t"):
        binding.to_payload((), {})
    with pytest.raises(InvalidArgument, match="arguments for task t"):
        binding.to_payload((1, 2), {})
    with pytest.raises(InvalidArgument):
        binding.to_payload((), {"a": 1, "b": 2})


def test_a_stored_payload_that_no_longer_fits_is_a_mismatch() -> None:
    def f(ctx: Any, a: int) -> None: ...

    binding = Binding(f, "t")
    with pytest.raises(PayloadMismatch, match="unexpected field"):
        binding.to_call({"a": 1, "gone": 2})
    with pytest.raises(PayloadMismatch, match="missing"):
        binding.to_call({})
    with pytest.raises(PayloadMismatch, match="JSON object"):
        binding.to_call([1])
    assert binding.to_call({"a": 1}) == ([], {"a": 1})


def test_keyword_payloads_fill_keyword_parameters_and_their_defaults() -> None:
    def f(ctx: Any, a: int, b: int = 2, *, c: int, d: int = 4) -> tuple[int, ...]:
        return a, b, c, d

    binding = Binding(f, "t")
    assert binding.to_call({"a": 1, "c": 3}) == ([], {"a": 1, "c": 3})
    assert roundtrip(f, 1, 5, c=3, d=6) == (1, 5, 3, 6)
    with pytest.raises(PayloadMismatch, match="missing"):
        binding.to_call({"a": 1})  # c is required
    with pytest.raises(PayloadMismatch, match="unexpected field"):
        binding.to_call({"a": 1, "c": 3, "e": 5})


def test_a_payload_member_named_as_the_context_parameter_is_a_mismatch() -> None:
    def f(ctx: Any, a: int = 1) -> None: ...

    with pytest.raises(PayloadMismatch):
        Binding(f, "t").to_call({"ctx": 1})


def test_a_function_without_a_context_parameter_is_refused() -> None:
    def no_params() -> None: ...

    def keyword_only(*, ctx: Any) -> None: ...

    for fn in (no_params, keyword_only):
        with pytest.raises(ConfigurationError, match="context first"):
            Binding(fn, "t")
