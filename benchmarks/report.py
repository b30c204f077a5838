"""Turn summaries into Markdown tables and the target ratios of issue 6."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from benchmarks.harness import Summary

CONVEYOR_DRAINS = ("conveyor", "conveyor (claim with ack)",
                   "conveyor worker, 1 process x 10 threads",
                   "conveyor worker, 4 processes x 10 threads",
                   "conveyor worker, 1 process x 100 threads",
                   "conveyor worker, 4 processes x 100 threads")  # fmt: skip
SQLITE_PEERS = ("huey", "persist-queue", "litequeue")
PG_PEERS = ("procrastinate", "pgqueuer")
PAIRED = "enqueue one, paired"


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
    lines = ["| system | enqueue one p50 / p99 (ms) | bulk enqueue (jobs/s) | drain (jobs/s) |",
             "|---|---:|---:|---:|"]  # fmt: skip
    for system in t.systems(backend):
        if system.startswith("conveyor worker"):
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


def worker_table(t: Table, backend: str) -> list[str]:
    rows = [(w, m) for (w, b, s, m) in t.by_key if b == backend and s.startswith("conveyor worker")]
    if not rows:
        return []
    lines = ["| worker runtime | figure |", "|---|---:|"]
    for (w, b, s, m), summary in t.by_key.items():
        if b == backend and s.startswith("conveyor worker"):
            digits = 0 if m == "jobs/s" else (1 if m == "MB" else 3)
            lines.append(f"| {s}: {w} | {_cell(summary, digits)} {m} |")
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
    holds: bool | None


def targets(t: Table) -> list[Target]:
    out: list[Target] = []

    def best_drain(backend: str) -> tuple[str, float] | None:
        found = [(s, t.value("drain", backend, s, "jobs/s")) for s in CONVEYOR_DRAINS]
        found = [(s, v) for s, v in found if v]
        return max(found, key=lambda x: x[1]) if found else None  # type: ignore[arg-type,return-value]

    def ratio_line(backend: str, base_system: str, goal: float, label: str) -> None:
        base = t.value("drain", backend, base_system, "jobs/s")
        if not base:
            return
        parts = []
        best = 0.0
        workers = [(s, t.value("drain", backend, s, "jobs/s")) for s in CONVEYOR_DRAINS[2:]]
        fastest_worker = max(((s, v) for s, v in workers if v), key=lambda x: x[1], default=None)
        shown = [*CONVEYOR_DRAINS[:2], *([fastest_worker[0]] if fastest_worker else [])]
        for s in shown:
            v = t.value("drain", backend, s, "jobs/s")
            if v:
                parts.append(f"{s}: {v / base:.2f}x")
                best = max(best, v / base)
        out.append(Target(label.format(base=f"{base:,.0f}"), "; ".join(parts) or "-",
                          best >= goal if parts else None))  # fmt: skip

    ratio_line("sqlite", "huey", 10, "SQLite drain ≥ 10x huey ({base} jobs/s)")
    ratio_line("sqlite", "floor", 0.5, "SQLite drain ≥ 50% of the plain-SQL floor ({base} jobs/s)")
    ratio_line(
        "sqlite",
        "floor (conveyor table)",
        0.5,
        "SQLite drain ≥ 50% of the floor on conveyor's table ({base} jobs/s)",
    )
    for tuned in (False, True):
        names = [p for p in t.systems("postgresql", "drain")
                 if p.startswith(PG_PEERS) and ("batch_size" in p) == tuned]  # fmt: skip
        pg_peers = [(p, v) for p in names if (v := t.value("drain", "postgresql", p, "jobs/s"))]
        if pg_peers:
            fastest = max(pg_peers, key=lambda x: x[1])
            how = "tuned" if tuned else "at its defaults"
            ratio_line("postgresql", fastest[0], 7, f"PostgreSQL drain ≥ 7x the fastest peer "
                       f"{how} ({fastest[0]}, {{base}} jobs/s)")  # fmt: skip
    lite = t.value("bulk enqueue", "sqlite", "litequeue", "jobs/s")
    mine = t.value("bulk enqueue", "sqlite", "conveyor", "jobs/s")
    if lite and mine:
        out.append(Target(f"bulk enqueue ≥ 2x litequeue ({lite:,.0f} jobs/s)",
                          f"{mine / lite:.2f}x", mine / lite >= 2))  # fmt: skip
    for backend in ("sqlite", "postgresql"):
        mine = t.value(PAIRED, backend, "conveyor", "p50 ms")
        for floor_name in ("floor", "floor (conveyor table)"):
            floor = t.value(PAIRED, backend, floor_name, "p50 ms")
            if floor and mine:
                where = "a bare table" if floor_name == "floor" else "conveyor's table"
                out.append(Target(f"{backend}: enqueue one within 10% of a plain durable commit "
                                  f"into {where} ({floor:.3f} ms p50, paired)",
                                  f"{mine / floor:.2f}x", mine / floor <= 1.10))  # fmt: skip
        small = [w for w in t.workloads(backend, "claim+complete @") if "counting" not in w]
        if len(small) >= 2:
            first, last = small[0], small[-1]
            a = t.value(first, backend, "conveyor", "p99 ms")
            b = t.value(last, backend, "conveyor", "p99 ms")
            if a and b:
                out.append(Target(f"{backend}: claim p99 {last.split('@')[1]} ≤ 1.5x "
                                  f"{first.split('@')[1]} ({a:.3f} ms)", f"{b / a:.2f}x",
                                  b / a <= 1.5))  # fmt: skip
    return out


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
    for backend in ("sqlite", "postgresql"):
        if not t.systems(backend):
            continue
        lines += [f"### {backend}", "", *main_table(t, backend), ""]
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
        lines += ["### Targets", "", "| target | measured | holds |", "|---|---|---|"]
        for g in goals:
            mark = "-" if g.holds is None else ("yes" if g.holds else "**no**")
            lines.append(f"| {g.what} | {g.measured} | {mark} |")
        lines.append("")
    if meta.get("problems"):
        lines += ["### Could not run", ""]
        lines += [f"- {k}: {v}" for k, v in meta["problems"].items()]
        lines.append("")
    return "\n".join(lines)
