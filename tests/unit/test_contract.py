"""One contract: every queue class implements it, and the asynchronous contract is the
synchronous one with coroutines, derived from it (never edited apart)."""

from __future__ import annotations

import ast
import importlib.util
import inspect
from pathlib import Path

import conveyor
from conveyor.aio import AsyncQueue, AsyncQueueAPI
from conveyor.aio.client import AsyncRemoteQueue
from conveyor.client import RemoteQueue
from conveyor.contract import QueueAPI

ROOT = Path(__file__).resolve().parents[2]


def _generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "generate_async_contract", ROOT / "scripts/generate_async_contract.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_async_contract_is_generated_from_the_contract() -> None:
    committed = (ROOT / "src/conveyor/aio/contract.py").read_text(encoding="utf-8")
    fresh = _generator().generate()
    # Compared as syntax trees: formatting aside, nothing may differ.
    assert ast.dump(ast.parse(committed)) == ast.dump(ast.parse(fresh)), (
        "src/conveyor/aio/contract.py is stale: run scripts/generate_async_contract.py"
    )


def test_every_operation_has_the_same_signature_in_both_contracts() -> None:
    public = [n for n, f in inspect.getmembers(QueueAPI, inspect.isfunction) if n[0] != "_"]
    assert len(public) > 40
    for name in public:
        sync, twin = getattr(QueueAPI, name), getattr(AsyncQueueAPI, name)
        assert inspect.signature(sync) == inspect.signature(twin), name
        assert inspect.iscoroutinefunction(twin) == (name not in {"generation"}), name


QUEUES = {QueueAPI: (conveyor.Queue, RemoteQueue), AsyncQueueAPI: (AsyncQueue, AsyncRemoteQueue)}


def _operations(api: type) -> list[str]:
    return [n for n, f in inspect.getmembers(api, inspect.isfunction) if n[0] != "_"]


def test_every_queue_class_implements_its_contract() -> None:
    for api, classes in QUEUES.items():
        for cls in classes:
            assert issubclass(cls, api) and not inspect.isabstract(cls), cls


def test_no_queue_class_copies_a_signature_of_the_contract() -> None:
    # Each operation is declared once, in the contract: a class that redefines one (to
    # change its arguments, or to repeat them) fails here.
    for api, classes in QUEUES.items():
        for cls in classes:
            for name in _operations(api):
                own = name in vars(cls)
                assert not own or name in {"close", "generation", "wait_for_change"}, (
                    f"{cls.__name__}.{name} redeclares an operation of the contract"
                )
                assert inspect.signature(getattr(cls, name)) == inspect.signature(
                    getattr(api, name)
                ), f"{cls.__name__}.{name}"
    # The remote queues only say how a call travels (``_run``, ``_watch``) and close.
    for cls in (RemoteQueue, AsyncRemoteQueue):
        own = {n for n in vars(cls) if not n.startswith("_")}
        assert own == {"close"}, own


def test_the_conformance_suite_calls_every_operation() -> None:
    # tests/core runs each of its tests against all four kinds of queue: an operation it
    # never calls would be an operation no asynchronous or remote queue is proven to do.
    suite = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "tests/core").glob("*.py"))
    # ``generation`` and ``wait_for_change`` are how ``wait`` is made: ``wait`` covers them.
    untested = [
        name for name in _operations(QueueAPI)
        if f".{name}(" not in suite and name not in {"generation", "wait_for_change"}
    ]  # fmt: skip
    assert untested == []
