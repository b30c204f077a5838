"""Turn summaries into Markdown tables and the speed targets as ratios."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from benchmarks.harness import Summary

SQLITE_PEERS = ("huey", "persist-queue", "litequeue")
PG_PEERS = ("procrastinate", "pgqueuer")
PAIRED = "enqueue one, paired"
PROCS = "drain, worker processes"  # benchmarks.drains.WORKLOAD
LOCK = "write lock held per job"  # benchmarks.drains.LOCK
FLOOR_QUEUE = "floor queue"
FLOOR_ONE = "floor queue, 1 process"
CONVEYOR_WORKER = "conveyor worker"


class Table:
    def __init__(self, summaries: Iterable[Summary]) -> None:
        self.by_key = {(s.workload, s.backend, s.system, s.metric): s for s in summaries}

    def get(self, workload: str, backend: str, system: str, metric: str) -> Summary | None:
        return self.by_key.get((workload, backend, system, metric))

    def value(self, workload: str, backend: str, system: str, metric: str) -> float | None:
        s = self.get(workload, backend, system, metric)
        return None if s is None else s.median

    def systems(self, backend: str, workload: str | None = None) -> list[str]:
        seen: list[str] = []
        for w, b, system, _m in self.by_key:
            if b == backend and (workload is None or w == workload) and system not in seen:
                seen.append(system)
        return seen

    def workloads(self, backend: str, prefix: str = "") -> list[str]:
        seen: list[str] = []
        for w, b, _s, _m in self.by_key:
            if b == backend and w.startswith(prefix) and w not in seen:
                seen.append(w)
        return seen


def _cell(s: Summary | None, digits: int = 0) -> str:
    if s is None:
        return "-"
    value = f"{s.median:,.{digits}f}"
    return f"{value} (+-{s.spread * 50:.0f}%)" if s.runs > 1 else value


def main_table(t: Table, backend: str) -> list[str]:
    lines = ["| system | enqueue one p50 / p99 (ms) | bulk enqueue (jobs/s) "
             "| drain, API loop in 1 process (jobs/s) |", "|---|---:|---:|---:|"]  # fmt: skip
    for system in t.systems(backend):
        if system.startswith("conveyor worker") or system == FLOOR_QUEUE:
            continue
        p50 = t.get("enqueue one", backend, system, "p50 ms")
        p99 = t.get("enqueue one", backend, system, "p99 ms")
        one = "-" if p50 is None or p99 is None else f"{p50.median:.3f} / {p99.median:.3f}"
        bulk = _cell(t.get("bulk enqueue", backend, system, "jobs/s"))
        drain = _cell(t.get("drain", backend, system, "jobs/s"))
        if one == bulk == drain == "-":
            continue
        lines.append(f"| {system} | {one} | {bulk} | {drain} |")
    return lines


def process_table(t: Table, backend: str) -> list[str]:
    """Every system's own workers, the same number of processes, against the floor queue."""
    names = t.systems(backend, PROCS)
    if not names:
        return []
    floor = t.value(PROCS, backend, FLOOR_QUEUE, "jobs/s")
    ours = t.value(PROCS, backend, CONVEYOR_WORKER, "jobs/s")
    lines = ["| drain, worker processes | processes | jobs/s | of the floor queue "
             "| conveyor worker ÷ this |", "|---|---|---:|---:|---:|"]  # fmt: skip
    for name in names:
        s = t.get(PROCS, backend, name, "jobs/s")
        if s is None:
            continue
        share = f"{s.median / floor:.0%}" if floor else "-"
        times = f"{ours / s.median:.2f}x" if ours else "-"
        lines.append(f"| {name} | {s.note or '-'} | {_cell(s)} | {share} | {times} |")
    lock = lock_table(t, backend)
    return lines + (["", *lock] if lock else [])


def lock_table(t: Table, backend: str) -> list[str]:
    floor = t.get(LOCK, backend, FLOOR_QUEUE, "us")
    ours = t.get(LOCK, backend, CONVEYOR_WORKER, "us")
    if floor is None and ours is None:
        return []
    lines = ["| SQLite write lock held per job (1 process) | µs per job | transactions "
             "| ÷ floor queue |", "|---|---:|---|---:|"]  # fmt: skip
    for name, s in ((FLOOR_QUEUE, floor), (CONVEYOR_WORKER, ours)):
        if s is None:
            continue
        ratio = f"{s.median / floor.median:.2f}x" if floor else "-"
        lines.append(f"| {name} | {_cell(s, 1)} | {s.note} | {ratio} |")
    return lines


def floor_shares(t: Table, backend: str) -> list[str]:
    """Each conveyor figure as a fraction of the floor's, same number of processes."""
    rows = []
    floor_one = t.value("enqueue one", backend, "floor", "p50 ms")
    one = t.value("enqueue one", backend, "conveyor", "p50 ms")
    if floor_one and one:  # a latency: the floor's p50 over conveyor's is the share of its speed
        rows.append(("enqueue one, p50 in µs, 1 process", one * 1000, floor_one * 1000, "floor"))
    floor_bulk = t.value("bulk enqueue", backend, "floor", "jobs/s")
    for name in BULK_SYSTEMS:
        v = t.value("bulk enqueue", backend, name, "jobs/s")
        if v and floor_bulk:
            rows.append((f"bulk enqueue, {name}, 1 process", v, floor_bulk, "floor"))
    floor_q = t.value(PROCS, backend, FLOOR_QUEUE, "jobs/s")
    floor_1 = t.value(PROCS, backend, FLOOR_ONE, "jobs/s") or floor_q
    # "4 processes", without the CPU note the floor queue's figure may carry after it.
    processes = (t.get(PROCS, backend, FLOOR_QUEUE, "jobs/s") or Summary("", "", "", "", 0, 0,
                 0, 0, "N processes")).note.split(";")[0]  # fmt: skip
    for name in ("conveyor", ACKED):
        v = t.value("drain", backend, name, "jobs/s")
        if v and floor_1:
            rows.append((f"drain, {name} API loop", v, floor_1, "floor queue, 1 process"))
    v = t.value("drain", backend, WORKER, "jobs/s")
    how = (t.get("drain", backend, WORKER, "jobs/s") or Summary("", "", "", "", 0, 0, 0, 0)).note
    if v and floor_1 and how.startswith("1 process"):
        rows.append((f"drain, conveyor worker, recommended ({how})", v, floor_1,
                     "floor queue, 1 process"))  # fmt: skip
    v = t.value(PROCS, backend, CONVEYOR_WORKER, "jobs/s")
    if v and floor_q:
        rows.append((f"drain, conveyor worker, {processes}", v, floor_q,
                     f"floor queue, {processes}"))  # fmt: skip
    if not rows:
        return []
    lines = ["| conveyor | conveyor | floor | of the floor | floor measured as |",
             "|---|---:|---:|---:|---|"]  # fmt: skip
    for what, mine, base, how in rows:
        share = base / mine if "p50" in what else mine / base
        lines.append(f"| {what} | {mine:,.0f} | {base:,.0f} | {share:.0%} | {how} |")
    return lines


def worker_table(t: Table, backend: str) -> list[str]:
    def runtime(w: str, b: str, s: str) -> bool:
        return b == backend and s.startswith("conveyor worker") and w not in (PROCS, LOCK)

    if not any(runtime(w, b, s) for (w, b, s, _m) in t.by_key):
        return []
    lines = ["| worker runtime | figure |", "|---|---:|"]
    for (w, b, s, m), summary in t.by_key.items():
        if runtime(w, b, s):
            digits = 0 if m == "jobs/s" else (1 if m == "MB" else 3)
            how = f" ({summary.note})" if summary.note else ""
            lines.append(f"| {s}{how}: {w} | {_cell(summary, digits)} {m} |")
    return lines


def paired_table(t: Table, backend: str) -> list[str]:
    names = t.systems(backend, PAIRED)
    if not names:
        return []
    base = t.value(PAIRED, backend, "floor", "p50 ms")
    lines = [f"| {PAIRED} | p50 (ms) | p99 (ms) | p50 / bare floor |", "|---|---:|---:|---:|"]
    for name in names:
        p50 = t.value(PAIRED, backend, name, "p50 ms")
        p99 = t.value(PAIRED, backend, name, "p99 ms")
        ratio = "-" if not (p50 and base) else f"{p50 / base:.2f}x"
        lines.append(f"| {name} | {_num(p50, 3)} | {_num(p99, 3)} | {ratio} |")
    return lines


def backlog_table(t: Table, backend: str) -> list[str]:
    workloads = t.workloads(backend, "claim+complete") + t.workloads(backend, "bulk fill")
    if not workloads:
        return []
    lines = ["| conveyor | p50 (ms) | p99 (ms) | jobs/s |", "|---|---:|---:|---:|"]
    for w in workloads:
        p50 = t.value(w, backend, "conveyor", "p50 ms")
        p99 = t.value(w, backend, "conveyor", "p99 ms")
        rate = t.value(w, backend, "conveyor", "jobs/s")
        lines.append(f"| {w} | {_num(p50, 3)} | {_num(p99, 3)} | {_num(rate, 0)} |")
    return lines


def _num(v: float | None, digits: int) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


@dataclass
class Target:
    what: str
    measured: str
    ratio: str
    holds: bool | None  # None: not measured in this run


WORKER = "conveyor worker, recommended"  # benchmarks.workers.RECOMMENDED
ACKED = "conveyor (claim with ack)"
IDLE_WORKER = "conveyor worker, 1 process x 10 threads"
BULK_SYSTEMS = ("conveyor", "conveyor (enqueue_ids)")
COUNTING = ", counting remaining"
NAMES = {"sqlite": "SQLite", "postgresql": "PostgreSQL", "mariadb": "MariaDB"}


def targets(t: Table) -> list[Target]:
    """conveyor's speed targets, each as a ratio against its reference in the same run."""
    out: list[Target] = []

    def add(what: str, mine: float | None, base: float | None, goal: float, *,
            at_least: bool, unit: str, limit: bool = False) -> None:  # fmt: skip
        if mine is None or not base:
            out.append(Target(what, "not measured", "-", None))
            return
        ratio = mine / base
        shown = f"{_fmt(mine, unit)} vs {_fmt(base, unit)}"
        if limit:
            shown = f"{_fmt(mine, unit)} (limit {_fmt(base, unit)})"
        holds = ratio >= goal if at_least else ratio <= goal
        out.append(Target(what, shown, f"{ratio:.2f}x", holds))

    def drain(backend: str, system: str) -> float | None:
        return t.value("drain", backend, system, "jobs/s")

    def procs(backend: str, system: str) -> float | None:
        return t.value(PROCS, backend, system, "jobs/s")

    for backend, share, peer, goal in (("sqlite", 0.35, "huey", 8.0),
                                       ("postgresql", 0.50, "pgqueuer", 7.0),
                                       ("mariadb", 0.35, None, 0.0)):  # fmt: skip
        name = NAMES[backend]
        mine = procs(backend, CONVEYOR_WORKER)
        if backend == "mariadb" and mine is None and procs(backend, FLOOR_QUEUE) is None:
            continue  # MariaDB not in this run at all
        add(f"{name} worker drain ≥ {share:.0%} of the floor queue (same processes)", mine,
            procs(backend, FLOOR_QUEUE), share, at_least=True, unit="jobs/s")  # fmt: skip
        if peer:
            add(f"{name} worker drain ≥ {goal:g}x {peer}'s (same processes)", mine,
                procs(backend, peer), goal, at_least=True, unit="jobs/s")  # fmt: skip
    fast = procs("mariadb", f"{CONVEYOR_WORKER}, mysqlclient")
    if fast is not None:  # the same through the C client library (?client=mysqlclient)
        add("MariaDB worker drain through mysqlclient ≥ 35% of the floor queue", fast,
            procs("mariadb", FLOOR_QUEUE), 0.35, at_least=True, unit="jobs/s")  # fmt: skip
    add("SQLite write lock held per job ≤ 4x the floor queue's",
        t.value(LOCK, "sqlite", CONVEYOR_WORKER, "us"), t.value(LOCK, "sqlite", FLOOR_QUEUE, "us"),
        4.0, at_least=False, unit="us")  # fmt: skip
    # MariaDB's rows only where it was measured (no peer serves it).
    maria = ("mariadb",) if t.systems("mariadb") else ()
    for backend, peers in (("sqlite", SQLITE_PEERS), ("postgresql", PG_PEERS),
                           *((b, ()) for b in maria)):  # fmt: skip
        name = NAMES[backend]
        paired = t.value(PAIRED, backend, "conveyor", "p50 ms")
        add(f"{name} enqueue one ≤ 1.2x a plain durable commit into conveyor's table "
            "(p50, paired)", paired, t.value(PAIRED, backend, "floor (conveyor table)",
            "p50 ms"), 1.2, at_least=False, unit="ms")  # fmt: skip
        mine = t.value("enqueue one", backend, "conveyor", "p50 ms")
        for peer in peers:
            add(f"{name} enqueue one no slower than {peer}'s (p50)", mine,
                t.value("enqueue one", backend, peer, "p50 ms"), 1.0, at_least=False,
                unit="ms")  # fmt: skip
    for backend, peer in (("sqlite", "litequeue"), ("postgresql", "pgqueuer")):
        name = NAMES[backend]
        rates = [(s, t.value("bulk enqueue", backend, s, "jobs/s")) for s in BULK_SYSTEMS]
        best = max((v for _s, v in rates if v), default=None)
        add(f"{name} bulk enqueue ≥ {peer}'s (fastest conveyor mode)", best,
            t.value("bulk enqueue", backend, peer, "jobs/s"), 1.0, at_least=True,
            unit="jobs/s")  # fmt: skip
    for backend in ("sqlite", "postgresql", *maria):
        name = NAMES[backend]
        # The default claim counts what remains; smallest backlog against the larger ones
        # (1k against 100k and 1M in a full run).
        sizes = [w.split("@")[1].split(",")[0] for w in t.workloads(backend, "claim+complete @")
                 if w.endswith(COUNTING)]  # fmt: skip
        if len(sizes) < 2:
            out.append(Target(f"{name} default claim(limit=1) + complete at 100k and 1M "
                              "pending ≤ 1.5x at 1k (p50)", "not measured", "-", None))  # fmt: skip
        for size in sizes[1:]:
            add(f"{name} default claim(limit=1) + complete at {size} pending ≤ 1.5x at "
                f"{sizes[0]} (p50)", _claim(t, backend, size), _claim(t, backend, sizes[0]),
                1.5, at_least=False, unit="ms")  # fmt: skip
        read = t.workloads(backend, "stats() @")
        add(f"{name} stats() at {read[-1].split('@')[1] if read else '1M'} jobs ≤ 50 ms (p50)",
            t.value(read[-1], backend, "conveyor", "p50 ms") if read else None, 50.0, 1.0,
            at_least=False, unit="ms", limit=True)  # fmt: skip
    add("SQLite enqueue to start on an idle worker ≤ 10 ms (p50)",
        t.value("enqueue to start (idle worker)", "sqlite", IDLE_WORKER, "p50 ms"), 10.0, 1.0,
        at_least=False, unit="ms", limit=True)  # fmt: skip
    for backend in ("sqlite", "postgresql"):
        add(f"{NAMES[backend]} worker idle memory ≤ 60 MB (VmRSS)",
            t.value("idle memory (VmRSS)", backend, IDLE_WORKER, "MB"), 60.0, 1.0,
            at_least=False, unit="MB", limit=True)  # fmt: skip
    return out


def _claim(t: Table, backend: str, size: str) -> float | None:
    return t.value(f"claim+complete @{size}{COUNTING}", backend, "conveyor", "p50 ms")


def _fmt(value: float, unit: str) -> str:
    if unit == "jobs/s":
        return f"{value:,.0f} jobs/s"
    if unit == "MB":
        return f"{value:.1f} MB"
    if unit == "us":
        return f"{value:.1f} µs"
    return f"{value:.3f} ms"


def markdown(summaries: list[Summary], meta: dict[str, Any]) -> str:
    t = Table(summaries)
    m = meta["machine"]
    pg = meta.get("postgres")
    server = (f", PostgreSQL {pg['server_version']} (fsync={pg['fsync']}, "
              f"synchronous_commit={pg['synchronous_commit']})") if pg else ""  # fmt: skip
    lines = [f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory_mb']:,} MB, Python "
             f"{m['python']}, SQLite {m['sqlite']}{server}. Load average at start: "
             f"{m['load_at_start']}. Took {meta['elapsed_s']:.0f} s.",
             f"Command: `{meta['command']}`. Medians of {meta['scale']['runs']} run(s); "
             "+- is half the spread (max - min) over the median.", ""]  # fmt: skip
    maria = meta.get("mariadb")
    if maria:
        flush = maria["innodb_flush_log_at_trx_commit"]
        lines[0] += (f" MariaDB {maria['version']} (innodb_flush_log_at_trx_commit={flush},"
                     f" log_bin={maria['log_bin']}).")  # fmt: skip
    for backend in ("sqlite", "postgresql", "mariadb"):
        if not t.systems(backend):
            continue
        lines += [f"### {backend}", ""]
        main = main_table(t, backend)
        if len(main) > 2:
            lines += [*main, ""]
        procs = process_table(t, backend)
        if procs:
            lines += [*procs, ""]
        shares = floor_shares(t, backend)
        if shares:
            lines += [*shares, ""]
        p = paired_table(t, backend)
        if p:
            lines += [*p, ""]
        w = worker_table(t, backend)
        if w:
            lines += [*w, ""]
        b = backlog_table(t, backend)
        if b:
            lines += [*b, ""]
    goals = targets(t)
    if goals:
        lines += ["### Targets", "",
                  "Each speed target as a ratio to its reference, both from this run.",
                  "", "| target | measured | ratio | met |", "|---|---|---:|---|"]  # fmt: skip
        for g in goals:
            mark = "-" if g.holds is None else ("met" if g.holds else "**not met**")
            lines.append(f"| {g.what} | {g.measured} | {g.ratio} | {mark} |")
        lines.append("")
    if meta.get("problems"):
        lines += ["### Could not run", ""]
        lines += [f"- {k}: {v}" for k, v in meta["problems"].items()]
        lines.append("")
    return "\n".join(lines)
