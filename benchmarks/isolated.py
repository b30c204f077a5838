"""Every measurement of enqueue one and bulk enqueue in fresh processes of their own.

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

from benchmarks.harness import Figure, Timed


def in_fresh_process(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in a new interpreter; its result (or its exception) comes back."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()


def one_block(system: Any, n: int, warmup: int) -> list[float]:
    """One block of single enqueues on a fresh database: ``n`` durations, in seconds."""
    seconds: list[float] = system.enqueue_one(n, warmup).seconds
    return seconds


def enqueue_one(systems: list[Any], n: int, warmup: int, blocks: int,
                problems: dict[str, str]) -> list[Figure]:  # fmt: skip
    """Every system's single enqueue in ``blocks`` blocks of ``n / blocks`` samples, each
    block a fresh process and database after ``warmup`` untimed enqueues; the systems
    take turns block by block (rotating who goes first), and each system's blocks are
    pooled before its percentiles are taken. A system that fails is left out and said in
    ``problems``."""
    per_block = max(1, n // blocks)
    samples: dict[int, list[float]] = {id(s): [] for s in systems}
    failed: set[int] = set()
    for block in range(blocks):
        shift = block % len(systems)
        for system in systems[shift:] + systems[:shift]:
            if id(system) in failed:
                continue
            try:
                samples[id(system)] += in_fresh_process(one_block, system, per_block, warmup)
            except Exception as exc:
                if "Verification" in type(exc).__name__:
                    raise
                failed.add(id(system))
                problems[f"{system.backend} {system.name} enqueue_one"] = (
                    f"{type(exc).__name__}: {exc}"
                )
    out = []
    for system in systems:
        if id(system) in failed or not samples[id(system)]:
            continue
        lat = Timed(samples[id(system)]).latency
        note = f"{lat.count} samples in {blocks} blocks, each after {warmup} untimed"
        where = ("enqueue one", system.backend, system.name)
        out += [Figure(*where, "p50 ms", lat.p50, note), Figure(*where, "p99 ms", lat.p99, note)]
    return out


def bulk(system: Any, n: int) -> list[Figure]:
    seconds = system.bulk(n)
    if seconds is None:
        return []  # no batch API: left out of the table, said in the notes
    return [Figure("bulk enqueue", system.backend, system.name, "jobs/s", n / seconds)]


def drain(system: Any, n: int) -> list[Figure]:
    """An API loop in one process (conveyor's ``claim`` loops, the old two-transaction
    floor); the systems' workers drain in ``benchmarks.drains``."""
    return [Figure("drain", system.backend, system.name, "jobs/s", n / system.drain(n))]
