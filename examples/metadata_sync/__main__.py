"""``python -m examples.metadata_sync [serve | client]``.

serve   the API (the sync clients are its workers: it runs none of its own)
client  a sync client: process batches until no book is left
(none)  the scripted demo: 1,000 books, a client that crashes holding a batch, an admin
        who resets its claim, three clients at once, and a cleanup
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from examples._common import report
from examples._web import add_demo_command, add_serve_options, background_server, serve
from examples.metadata_sync.app import Library, create_api
from examples.metadata_sync.client import run_client


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.metadata_sync", description=__doc__)
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    commands = parser.add_subparsers(dest="command")
    serving = commands.add_parser("serve", help="serve the API")
    add_serve_options(serving, "metadata_sync", workers=0)
    serving.add_argument(
        "--claim-lease-minutes",
        type=float,
        default=24 * 60,
        help="an unacknowledged batch returns to the queue after this long (default 1 day)",
    )
    client = commands.add_parser("client", help="run a sync client")
    client.add_argument("--url", required=True, help="the server, as http://host:port")
    client.add_argument("--token", help="the server's bearer token")
    client.add_argument("--state", type=Path, help="where to keep the batch across restarts")
    client.add_argument("--delay", type=float, default=0.0, help="seconds per catalogue lookup")
    for p in add_demo_command(parser, commands):
        p.add_argument("--books", type=int, default=1000)
    args = parser.parse_args(argv)
    if args.command == "serve":
        from datetime import timedelta

        library = Library(args.db, claim_lease=timedelta(minutes=args.claim_lease_minutes))
        try:
            return serve(create_api(library), args)
        finally:
            library.close()
    if args.command == "client":
        counts = run_client(
            args.url,
            token=args.token,
            state_file=args.state,
            delay=args.delay,
            on_book=lambda b: print(json.dumps(b), flush=True),
        )
        print(json.dumps({"done": counts}), flush=True)
        return 0
    return run_demo(args)


def run_demo(args: argparse.Namespace) -> int:
    url = args.db or f"sqlite:///{Path(tempfile.mkdtemp()) / 'library.db'}"
    library = Library(url)
    for n in range(args.books):
        library.add_book(f"Book {n}" if n % 97 else f"Unknown Book {n}")
    with background_server(create_api(library)) as base:
        looked_up: Counter[str] = Counter()

        def count(book: dict[str, Any]) -> None:
            looked_up[book["book"]] += 1

        # A client takes a batch and dies without acknowledging it: 100 books are stuck.
        run_client(base, stop_after_batches=0)
        first = httpx.get(f"{base}/api/missing/hardcover").json()  # ... and another one
        stuck = len(first["books"])
        released = httpx.delete(f"{base}/api/admin/hardcover-queue/claims/{first['processingId']}")
        reset_old = httpx.post(f"{base}/api/admin/hardcover-queue/reset", params={"olderThan": 0})
        clients = [
            threading.Thread(target=run_client, args=(base,), kwargs={"on_book": count})
            for _ in range(3)
        ]
        for t in clients:
            t.start()
        for t in clients:
            t.join()
        added = httpx.post(f"{base}/api/books", json={"title": "A Late Arrival"}).json()
        late = httpx.get(f"{base}/api/missing/hardcover").json()
        httpx.patch(f"{base}/api/books/{added['id']}", json={"hardcoverId": "hc-late"})
        after_patch = httpx.get(
            f"{base}/api/missing/hardcover", params={"previousProcessingId": late["processingId"]}
        ).json()
        cleanup = httpx.post(f"{base}/api/admin/hardcover-queue/cleanup").json()
    stats = library.q.stats("hardcover")
    with library.db.transaction(write=False) as tx:
        missing = tx.one("SELECT count(*) AS n FROM books WHERE hardcover_id IS NULL")
    report(
        {
            "books": args.books,
            "stuck_in_a_crashed_claim": stuck,
            "reset_by_processing_id": released.json()["resetCount"],
            "reset_older_than_0_min": reset_old.json()["resetCount"],
            "books_looked_up": len(looked_up),
            "looked_up_twice": sum(1 for n in looked_up.values() if n > 1),
            "without_a_match": missing["n"] if missing else None,
            "late_book_claimed": [b["title"] for b in late["books"]],
            "remaining_after_it_got_its_id": after_patch["remainingUnclaimed"],
            "cleanup": cleanup,
            "queue": stats,
        },
        args.json,
    )
    library.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
