"""A soak run: a steady stream of jobs enqueued over HTTP and drained by worker
processes, for a long time, watching what should stay flat.

    python -m benchmarks.soak --db sqlite:///soak.db --rate half --retention 300 \
        --duration 3600 --every 60

Starts ``conveyor serve`` and ``--workers`` ``conveyor worker`` processes on the URL,
enqueues ``--rate`` jobs a second through the server (in one batch request per tick), and
every ``--every`` seconds
records: the workers' and the server's resident memory (RSS), the p99 of a claim (a
probe claims one job of a queue of its own twice a second and times the call), the
database's size on disk, the backlog and the jobs completed. ``--rate half`` first
measures the maximum for ``--calibrate`` seconds (enqueueing as fast as the server takes
batches while the workers drain; the rate the jobs complete) and then soaks at half of
it. ``--retention SECONDS`` stores a policy keeping completed and failed jobs that long,
which the workers apply while the load runs; with it, the maximum is measured with
finished jobs kept 0 s, so that the pruning a steady state does (as many rows deleted as
arrive) is inside the figure rather than starting only when the first jobs expire. On
a PostgreSQL server whose autovacuum is off, the soak runs ``VACUUM`` on conveyor's
tables after every sample, as autovacuum would. Writes a CSV and a chart
(PNG with matplotlib when it is installed, else an SVG drawn here) and prints a
summary. Nothing is asserted: these are figures to read."""

from __future__ import annotations

import argparse
import csv
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx

import conveyor

REPO = Path(__file__).resolve().parents[1]
APP = "benchmarks.worker_app:app"
TASK, QUEUE = "bench.noop", "bench"
PROBE_QUEUE = "soak-probe"
COLUMNS = ["elapsed_s", "worker_rss_mb", "server_rss_mb", "claim_p99_ms", "claim_p50_ms",
           "db_size_mb", "backlog", "completed", "enqueued", "enqueue_errors"]  # fmt: skip


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_mb(pid: int) -> float:
    """A process's resident memory (Linux /proc), in MB; 0 if it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def postgres_target(url: str) -> tuple[str, str]:
    """A PostgreSQL queue URL as libpq's connection string (without conveyor's own
    ``schema`` option) and the schema it names."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    schema = query.pop("schema", "public")
    return urlunsplit(parts._replace(query=urlencode(query))), schema


def database_size_mb(url: str) -> float:
    """The space the queue takes: the SQLite file with its WAL, or the conveyor tables
    (with their indexes and TOAST) on PostgreSQL and MySQL."""
    if url.startswith("sqlite"):
        path = url.split("///", 1)[1].split("?", 1)[0]
        return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p)) / 1e6
    if url.startswith("postgres"):
        import psycopg

        conninfo, schema = postgres_target(url)
        with psycopg.connect(conninfo) as conn:
            row = conn.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = %s AND c.relkind = 'r' AND c.relname LIKE 'conveyor%%'",
                (schema,),
            ).fetchone()
        return float(row[0] if row else 0) / 1e6
    import pymysql

    from conveyor.drivers.mysql.dialect import Server

    conn = pymysql.connect(**Server.from_url(url).connect_kwargs(10.0))
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT coalesce(sum(data_length + index_length), 0)"
                " FROM information_schema.tables WHERE table_schema = DATABASE()"
                " AND table_name LIKE 'conveyor%%'"
            )
            row = cur.fetchone()
    finally:
        conn.close()
    return float(row[0] if row else 0) / 1e6


def vacuum_postgres(url: str) -> None:
    """``VACUUM`` conveyor's busiest tables, as autovacuum would: for a server whose
    autovacuum is off, where dead rows would otherwise pile up for the whole run."""
    import psycopg

    conninfo, schema = postgres_target(url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        for table in ("conveyor_jobs", "conveyor_count_deltas"):
            conn.execute(f'VACUUM "{schema}".{table}')


def autovacuum_off(url: str) -> bool:
    import psycopg

    with psycopg.connect(postgres_target(url)[0]) as conn:
        row = conn.execute("SHOW autovacuum").fetchone()
    return bool(row and row[0] == "off")


def _percentile(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]


@dataclass
class Probe:
    """Times a claim twice a second, on a queue of its own, for as long as it runs."""

    url: str
    samples: list[float] = field(default_factory=list)
    errors: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        q = conveyor.connect(self.url, migrate=False)
        try:
            while not self._stop.wait(0.5):
                try:
                    q.enqueue("soak.probe", queue=PROBE_QUEUE)
                    started = time.perf_counter()
                    claim = q.claim(PROBE_QUEUE, limit=1, lease=30)
                    took = time.perf_counter() - started
                    for job in claim.jobs:
                        q.complete(job.id, claim.id)
                    self.samples.append(took * 1000)
                except conveyor.ConveyorError:
                    self.errors += 1
        finally:
            q.close()

    def take(self) -> list[float]:
        taken, self.samples = self.samples, []
        return taken

    def stop(self) -> None:
        self._stop.set()


BATCH = 1000  # jobs in one enqueue request at most


def calibrate(http: httpx.Client, q: conveyor.Queue, seconds: float) -> float:
    """The most jobs a second the set-up enqueues and completes together: batches sent
    as fast as the server answers while the workers drain, for ``seconds``; the rate
    measured from the jobs that left the backlog (not from the completed count, which
    pruning lowers); the backlog left is drained before the soak."""

    def backlog() -> int:
        stats = q.stats(queue=QUEUE)
        return stats.pending + stats.running

    sent = 0
    before = backlog()
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        if q.stats(queue=QUEUE).pending > 20 * BATCH:  # enough waiting: let the drain catch up
            time.sleep(0.05)
            continue
        answer = http.post("/api/jobs/batch", json=_batch(sent, BATCH))
        sent += BATCH if answer.status_code == 201 else 0
    took = time.monotonic() - started
    measured = (sent - (backlog() - before)) / took
    deadline = time.monotonic() + 120
    while q.stats(queue=QUEUE).pending and time.monotonic() < deadline:
        time.sleep(0.5)
    return measured


def _batch(first: int, n: int) -> dict[str, object]:
    jobs = [{"task": TASK, "payload": {"i": first + i}} for i in range(n)]
    return {"queue": QUEUE, "jobs": jobs, "ids_only": True}


def soak(url: str, *, rate: float | None, duration: float, every: float, workers: int,
         concurrency: int, out: Path, retention: float | None = None,
         calibration: float = 60.0) -> tuple[list[dict[str, float]], float]:  # fmt: skip
    """The samples, and the rate the run held (``rate``, or half the one measured)."""
    q = conveyor.connect(url)
    vacuum = url.startswith("postgres") and autovacuum_off(url)
    if vacuum:
        print("this server's autovacuum is off: the soak vacuums after every sample", flush=True)

    def keep(seconds: float) -> None:
        for status in ("completed", "failed"):
            for queue in (QUEUE, PROBE_QUEUE):
                q.set_retention(status, seconds, queue=queue)

    if retention is not None:
        keep(0 if rate is None else retention)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVEYOR_")}
    logs = out.with_suffix(".logs")
    logs.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    procs: list[subprocess.Popen[bytes]] = []

    def spawn(name: str, *args: str) -> subprocess.Popen[bytes]:
        with open(logs / f"{name}.log", "ab") as log:
            proc = subprocess.Popen([sys.executable, "-m", "conveyor", *args], cwd=REPO,
                                    env=env, stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
        procs.append(proc)
        return proc

    server = spawn("serve", "serve", "--db", url, "--port", str(port), "--log-level", "warning")
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.2)
    worker_procs = [spawn(f"worker-{n}", "worker", "--app", APP, "--db", url,
                          "--concurrency", str(concurrency)) for n in range(workers)]  # fmt: skip
    probe = Probe(url)
    probing = threading.Thread(target=probe.run, daemon=True)
    probing.start()
    rows: list[dict[str, float]] = []
    enqueued = errors = 0
    try:
        with httpx.Client(base_url=base, timeout=30) as http:
            if rate is None:
                maximum = calibrate(http, q, calibration)
                rate = maximum / 2
                if retention is not None:
                    keep(retention)
                print(f"measured maximum {maximum:,.0f} jobs/s; soaking at {rate:,.0f}", flush=True)
            started = time.monotonic()
            next_sample = started + every
            while (now := time.monotonic()) - started < duration:
                due = int((now - started) * rate)
                if enqueued + errors < due:  # one request a turn: samples stay on time
                    n = min(BATCH, due - enqueued - errors)
                    answer = http.post("/api/jobs/batch", json=_batch(enqueued, n))
                    if answer.status_code == 201:
                        enqueued += n
                    else:
                        errors += n
                if now >= next_sample:
                    rows.append(_sample(q, url, now - started, worker_procs, server, probe,
                                        enqueued, errors))  # fmt: skip
                    print(_line(rows[-1]), flush=True)
                    if vacuum:
                        vacuum_postgres(url)
                    next_sample += every
                time.sleep(min(0.05, max(0.0, next_sample - time.monotonic())))
            rows.append(_sample(q, url, time.monotonic() - started, worker_procs, server,
                                probe, enqueued, errors))  # the end of the run  # fmt: skip
            print(_line(rows[-1]), flush=True)
    finally:
        probe.stop()
        probing.join(5)
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        q.close()
    return rows, rate


def _sample(q: conveyor.Queue, url: str, elapsed: float, workers: list[subprocess.Popen[bytes]],
            server: subprocess.Popen[bytes], probe: Probe, enqueued: int, errors: int,
            ) -> dict[str, float]:  # fmt: skip
    stats = q.stats(queue=QUEUE)
    claims = probe.take()
    return {
        "elapsed_s": round(elapsed, 1),
        "worker_rss_mb": round(max(rss_mb(p.pid) for p in workers), 1),
        "server_rss_mb": round(rss_mb(server.pid), 1),
        "claim_p99_ms": round(_percentile(claims, 0.99), 2),
        "claim_p50_ms": round(_percentile(claims, 0.50), 2),
        "db_size_mb": round(database_size_mb(url), 2),
        "backlog": stats.pending + stats.running,
        "completed": stats.completed,
        "enqueued": enqueued,
        "enqueue_errors": errors,
    }


def _line(row: dict[str, float]) -> str:
    return (f"{row['elapsed_s']:>7.0f}s  worker {row['worker_rss_mb']:.0f} MB, server "
            f"{row['server_rss_mb']:.0f} MB, claim p99 {row['claim_p99_ms']:.1f} ms, db "
            f"{row['db_size_mb']:.1f} MB, backlog {row['backlog']:.0f}, completed "
            f"{row['completed']:.0f}")  # fmt: skip


def write_csv(rows: list[dict[str, float]], path: Path) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


PANELS = (("worker and server RSS (MB)", ("worker_rss_mb", "server_rss_mb")),
          ("claim p99 (ms)", ("claim_p99_ms",)),
          ("database size (MB)", ("db_size_mb",)),
          ("backlog (jobs)", ("backlog",)))  # fmt: skip
LINE_COLOURS = ("#2b6cb0", "#dd6b20")


def chart(rows: list[dict[str, float]], path: Path, title: str) -> Path:
    """The four panels as a PNG (matplotlib) or, without it, an SVG; the file written."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        target = path.with_suffix(".svg")
        target.write_text(svg_chart(rows, title))
        return target
    fig, axes = plt.subplots(2, 2, figsize=(10, 6))
    minutes = [r["elapsed_s"] / 60 for r in rows]
    for ax, (name, keys) in zip(axes.flat, PANELS, strict=True):
        for key, colour in zip(keys, LINE_COLOURS, strict=False):
            ax.plot(minutes, [r[key] for r in rows], color=colour, label=key)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("minutes", fontsize=8)
        ax.set_ylim(bottom=0)
        if len(keys) > 1:
            ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    target = path.with_suffix(".png")
    fig.savefig(target, dpi=110)
    plt.close(fig)
    return target


def svg_chart(rows: list[dict[str, float]], title: str) -> str:
    """Four small line charts in one SVG, drawn by hand."""
    width, height, pw, ph = 960, 560, 400, 200
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="sans-serif" font-size="11">',
             f'<rect width="{width}" height="{height}" fill="white"/>',
             f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="13">'
             f"{_esc(title)}</text>"]  # fmt: skip
    span = max((r["elapsed_s"] for r in rows), default=1.0) or 1.0
    for index, (name, keys) in enumerate(PANELS):
        x0 = 60 + (index % 2) * (pw + 60)
        y0 = 50 + (index // 2) * (ph + 60)
        top = max((r[k] for r in rows for k in keys), default=1.0) * 1.15 or 1.0
        parts.append(f'<text x="{x0}" y="{y0 - 8}" font-weight="bold">{_esc(name)}</text>')
        parts.append(
            f'<rect x="{x0}" y="{y0}" width="{pw}" height="{ph}" fill="none" stroke="#ccc"/>'
        )
        for tick in range(5):
            value = top * tick / 4
            y = y0 + ph - ph * tick / 4
            parts.append(
                f'<line x1="{x0}" x2="{x0 + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>'
            )
            parts.append(
                f'<text x="{x0 - 5}" y="{y + 4:.1f}" text-anchor="end">{_tick(value)}</text>'
            )
        for tick in range(5):
            x = x0 + pw * tick / 4
            at = span * tick / 4
            label = f"{at:.0f} s" if span < 120 else f"{at / 60:.3g} min"
            parts.append(f'<text x="{x:.1f}" y="{y0 + ph + 15}" text-anchor="middle">'
                         f"{label}</text>")  # fmt: skip
        for k, (key, colour) in enumerate(zip(keys, LINE_COLOURS, strict=False)):
            points = " ".join(f"{x0 + pw * r['elapsed_s'] / span:.1f},"
                              f"{y0 + ph - ph * r[key] / top:.1f}" for r in rows)  # fmt: skip
            parts.append(
                f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="1.8"/>'
            )
            if len(keys) > 1:  # a legend beside the panel's title
                parts.append(f'<text x="{x0 + pw - 110 * k}" y="{y0 - 8}" text-anchor="end" '
                             f'fill="{colour}">{_esc(key)}</text>')  # fmt: skip
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _tick(value: float) -> str:
    return f"{value:.0f}" if value >= 10 else f"{value:.1f}"


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def summary(rows: list[dict[str, float]]) -> str:
    if not rows:
        return "no samples"
    first, last = rows[0], rows[-1]
    peak_p99 = max(r["claim_p99_ms"] for r in rows)
    return (f"{last['elapsed_s'] / 60:.1f} min: {last['enqueued']:.0f} enqueued "
            f"({last['enqueue_errors']:.0f} refused), {last['completed']:.0f} completed, backlog "
            f"{last['backlog']:.0f}; worker RSS {first['worker_rss_mb']:.0f} -> "
            f"{last['worker_rss_mb']:.0f} MB, server RSS {first['server_rss_mb']:.0f} -> "
            f"{last['server_rss_mb']:.0f} MB; claim p99 {first['claim_p99_ms']:.1f} -> "
            f"{last['claim_p99_ms']:.1f} ms (peak {peak_p99:.1f}); database "
            f"{first['db_size_mb']:.1f} -> {last['db_size_mb']:.1f} MB")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", default="sqlite:///soak.db", help="database URL")
    parser.add_argument(
        "--rate", default="50", help="jobs enqueued a second, or 'half': half the measured maximum"
    )
    parser.add_argument(
        "--calibrate",
        type=float,
        default=None,
        help="seconds measuring the maximum, with --rate half "
        "(60, or 150 with --retention: two of the workers' prune passes)",
    )
    parser.add_argument(
        "--retention",
        type=float,
        default=None,
        metavar="SECONDS",
        help="keep completed and failed jobs this long (a stored policy)",
    )
    parser.add_argument("--duration", type=float, default=300, help="seconds")
    parser.add_argument("--every", type=float, default=60, help="seconds between samples")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--out", default="soak", help="file name stem for the CSV and chart")
    parser.add_argument("--title", default=None)
    parser.add_argument("--drop", action="store_true", help="drop conveyor's tables after")
    parser.add_argument("--redraw", metavar="CSV", help="only draw the chart of an earlier run")
    args = parser.parse_args()
    out = Path(args.out)
    if args.redraw:
        with open(args.redraw, newline="") as f:
            rows = [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]
        print(f"wrote {chart(rows, out, args.title or 'soak')}")
        return
    rate = None if args.rate == "half" else float(args.rate)
    calibration = args.calibrate or (60 if args.retention is None else 150)
    rows, held = soak(args.db, rate=rate, duration=args.duration, every=args.every,
                      workers=args.workers, concurrency=args.concurrency, out=out,
                      retention=args.retention, calibration=calibration)  # fmt: skip
    write_csv(rows, out.with_suffix(".csv"))
    kept = "" if args.retention is None else f", finished jobs kept {args.retention:g} s"
    title = args.title or f"soak: {held:,.0f} jobs/s for {args.duration / 60:g} min{kept}"
    drawn = chart(rows, out, title)
    print(summary(rows))
    print(f"wrote {out.with_suffix('.csv')} and {drawn}")
    if args.drop:
        q = conveyor.connect(args.db, migrate=False)
        q.drop_schema()
        q.close()


if __name__ == "__main__":
    main()
