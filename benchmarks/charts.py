"""Bar charts of a run (matplotlib, headless). One PNG per figure family and backend."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display: write files only
import matplotlib.pyplot as plt

from benchmarks.harness import Summary
from benchmarks.report import Table

_MORE = "jobs/s, more is better"
_FAMILIES = (("drain, worker processes", "jobs/s", _MORE, True),
             ("drain", "jobs/s", _MORE, True), ("bulk enqueue", "jobs/s", _MORE, False),
             ("enqueue one", "p50 ms", "ms (p50), less is better", False))  # fmt: skip
COLOURS = {"conveyor": "#2b6cb0", "floor": "#718096"}


def _colour(system: str) -> str:
    if system.startswith("conveyor"):
        return COLOURS["conveyor"]
    if system.startswith("floor"):
        return COLOURS["floor"]
    return "#dd6b20"


def _bars(path: Path, title: str, unit: str, rows: list[tuple[str, float, float, float]],
          *, log: bool = False) -> Path:  # fmt: skip
    rows = sorted(rows, key=lambda r: r[1])
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(rows) + 1.4))
    names = [r[0] for r in rows]
    values = [r[1] for r in rows]
    errors = [[r[1] - r[2] for r in rows], [r[3] - r[1] for r in rows]]
    ax.barh(names, values, xerr=errors, color=[_colour(n) for n in names], capsize=3)
    for y, (v, top) in enumerate(zip(values, (r[3] for r in rows), strict=True)):
        ax.text(top, y, f"  {v:,.0f}" if v >= 100 else f"  {v:.2f}", va="center", fontsize=8)
    ax.set_xlabel(unit + (" (log scale)" if log else ""))
    if log:
        ax.set_xscale("log")
    ax.set_title(title)
    ax.margins(x=0.15)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _short(label: str) -> str:
    """ "1,001,040 completed retained" -> "1.0M completed retained"."""
    head, _, rest = label.partition(" ")
    digits = head.replace(",", "")
    if not digits.isdigit():
        return label
    n = int(digits)
    return f"{n / 1e6:.1f}M {rest}" if n >= 1_000_000 else f"{n // 1000}k {rest}"


def draw(summaries: list[Summary], folder: Path, suffix: str = "") -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    t = Table(summaries)
    out: list[Path] = []
    for backend in ("sqlite", "postgresql", "mariadb"):
        for workload, metric, unit, log in _FAMILIES:
            rows = []
            for system in t.systems(backend, workload):
                s = t.get(workload, backend, system, metric)
                if s is not None:
                    rows.append((system, s.median, s.low, s.high))
            if rows:
                slug = workload.replace(",", "").replace(" ", "-")
                name = f"{slug}-{backend}{suffix}.png"
                out.append(_bars(folder / name, f"{workload}, {backend}", unit, rows, log=log))
        backlog = [w for w in t.workloads(backend, "claim+complete") if "counting" not in w]
        if backlog:
            fig, ax = plt.subplots(figsize=(8, 3.6))
            labels = [_short(w.replace("claim+complete", "").strip(" ,@")) for w in backlog]
            for metric, colour in (("p50 ms", "#2b6cb0"), ("p99 ms", "#90cdf4")):
                values = [t.value(w, backend, "conveyor", metric) or 0 for w in backlog]
                ax.plot(labels, values, marker="o", color=colour, label=metric.split()[0])
            ax.set_ylabel("claim + complete one job, ms")
            ax.set_ylim(bottom=0)
            ax.set_title(f"claim latency against backlog, {backend}")
            ax.legend()
            fig.autofmt_xdate(rotation=15)
            fig.tight_layout()
            path = folder / f"backlog-{backend}{suffix}.png"
            fig.savefig(path, dpi=110)
            plt.close(fig)
            out.append(path)
    return out


def main() -> None:
    """Redraw the charts of a saved run (from the repository root):
    python -m benchmarks.charts benchmarks/results/latest.json"""
    import json
    import sys

    data = json.loads(Path(sys.argv[1]).read_text())
    summaries = [
        Summary(**{k: v for k, v in s.items() if k != "spread"}) for s in data["summaries"]
    ]
    folder = (
        Path(sys.argv[2]) if len(sys.argv) > 2 else Path(__file__).parent.parent / "docs" / "img"
    )
    for path in draw(summaries, folder):
        print(f"chart: {path}")


if __name__ == "__main__":
    main()
