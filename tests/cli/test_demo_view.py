"""The demo's live view, drawn from what is in the database."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

import conveyor
from conveyor.demo import progress, tasks


def test_the_snapshot_counts_the_demo_jobs_and_the_view_draws_them(q: conveyor.Queue) -> None:
    book = q.enqueue(tasks.read_book.name, {"book": "b-1", "pages": 10}, queue="demo.books")
    video = q.enqueue(tasks.generate_subtitles.name, {"video": "v"}, queue="demo.subtitles")
    other = q.enqueue("not.ours", queue="demo.subtitles")  # not a demo job id: not counted
    claim = q.claim("demo.books")
    q.progress(book.id, claim.id, total=10, completed=3, failed=1, checkpoint=4)
    second = q.claim("demo.subtitles")
    assert [j.id for j in second.jobs] == [video.id]
    q.fail(video.id, second.id, "RuntimeError: speech model busy\n\nTraceback …", delay=60)

    snap = progress.snapshot(q, [book.id, video.id])
    assert other.id not in {e.job_id for e in snap.errors}
    books, subtitles = snap.families["demo.books"], snap.families["demo.subtitles"]
    assert (books.total, books.running) == (1, 1)
    assert (subtitles.total, subtitles.waiting, subtitles.errors) == (1, 1, 1)
    assert not snap.done
    assert [(b.book, b.completed, b.failed) for b in snap.books] == [("b-1", 3, 1)]

    console = Console(record=True, width=120)
    console.print(progress.render(snap, header="demo", elapsed=3.0))
    text = console.export_text()
    assert "books being read" in text
    assert "page 4/10" in text
    assert "RuntimeError: speech model busy" in text
    assert "Traceback" not in text  # the first line of an error only
    assert "retry pending" in text
    assert "0/2 final" in text
    assert progress.line(snap).startswith("0/2 final")


def test_once_all_is_final_the_view_says_what_stays_up(q: conveyor.Queue) -> None:
    job = q.enqueue(tasks.read_book.name, {"book": "b-1", "pages": 1}, queue="demo.books")
    claim = q.claim("demo.books")
    q.complete(job.id, claim.id, None)
    snap = progress.snapshot(q, [job.id])
    assert snap.done

    def drawn(serving: bool) -> str:
        console = Console(record=True, width=120)
        console.print(progress.render(snap, header="demo", elapsed=1.0, serving=serving))
        return console.export_text()

    assert "the dashboard stays up" in drawn(True)
    without = drawn(False)
    assert "dashboard" not in without
    assert "all final" in without


def test_worker_warnings_reach_the_view_without_their_tracebacks(tmp_path: Path) -> None:
    from conveyor.demo import runner

    url = f"sqlite:///{tmp_path / 'demo.db'}"
    notes: list[str] = []

    def show(snap: progress.Snapshot, elapsed: float, where: str | None, seen: list[str]) -> None:
        notes.extend(seen)

    options = runner.Options(
        url=url, jobs=30, workers=1, concurrency=4, serve=False, port=0,
        exit_when_done=True, pace=0, seed=1,
    )  # fmt: skip
    with conveyor.connect(url) as q:
        outcome = runner.run(q, options, show=show, announce=lambda _: None)
    assert outcome.snapshot.done
    assert any("failed:" in note for note in notes), notes  # retries were announced
    assert all("\n" not in note and "Traceback" not in note for note in notes), notes
