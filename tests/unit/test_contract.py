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


def test_every_queue_class_implements_its_contract() -> None:
    assert issubclass(conveyor.Queue, QueueAPI) and issubclass(RemoteQueue, QueueAPI)
    assert issubclass(AsyncQueue, AsyncQueueAPI) and issubclass(AsyncRemoteQueue, AsyncQueueAPI)
    for cls in (conveyor.Queue, RemoteQueue, AsyncQueue, AsyncRemoteQueue):
        assert not inspect.isabstract(cls), cls
    # The remote queues declare no operation of their own: the contract does.
    for cls in (RemoteQueue, AsyncRemoteQueue):
        own = {n for n in vars(cls) if not n.startswith("_")}
        assert own <= {"close", "wait"}, own
