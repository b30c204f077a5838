"""Every measurement of enqueue one and bulk enqueue in a fresh process of its own.

One long-lived process measuring every system in turn is not fair: whatever ran before
(another system's drain, its garbage, its file writes still being flushed by the kernel)
lands on whoever runs next. Here each call runs in a new interpreter (``spawn``), which
imports only what that system needs, times it with ``harness.time_calls`` and exits.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from benchmarks.harness import Figure


def in_fresh_process(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in a new interpreter; its result (or its exception) comes back."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()


def one(system: Any, n: int, warmup: int) -> list[Figure]:
    lat = system.enqueue_one(n, warmup)
    note = f"{n} samples after {warmup} untimed"
    where = ("enqueue one", system.backend, system.name)
    return [Figure(*where, "p50 ms", lat.p50, note), Figure(*where, "p99 ms", lat.p99, note)]


def bulk(system: Any, n: int) -> list[Figure]:
    seconds = system.bulk(n)
    if seconds is None:
        return []  # no batch API: left out of the table, said in the notes
    return [Figure("bulk enqueue", system.backend, system.name, "jobs/s", n / seconds)]


def drain(system: Any, n: int) -> list[Figure]:
    """An API loop in one process (conveyor's ``claim`` loops, the old two-transaction
    floor); the systems' workers drain in ``benchmarks.drains``."""
    return [Figure("drain", system.backend, system.name, "jobs/s", n / system.drain(n))]
