"""A library of 1,000 books, three sync clients over HTTP, one of which crashes, and an
admin who resets its claim."""

from __future__ import annotations

import socket
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import uvicorn

from conveyor.client import RemoteQueue
from examples._common import parser, report
from examples.metadata_sync.app import QUEUE, Library, web_app
from examples.metadata_sync.client import run_client

TOKENS = {"admin-token": "admin", "client-token": "worker"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main(argv: list[str] | None = None) -> int:
    p = parser("metadata_sync", "Batch-claiming sync clients with admin resets, over HTTP.")
    p.add_argument("--books", type=int, default=1000)
    p.add_argument("--file", help="the library's SQLite file (default: a temporary one)")
    args = p.parse_args(argv)
    folder = tempfile.mkdtemp()
    library = Library(args.file or str(Path(folder) / "library.db"))
    for n in range(args.books):
        library.add_book(f"Book {n}")
    rolled_back = library.add_book("Never Saved", fail_after_insert=True)

    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(web_app(library, TOKENS), host="127.0.0.1", port=port, log_level="warning")
    )
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.02)
    url = f"http://127.0.0.1:{port}"

    lookups: Counter[int] = Counter()
    crashed = run_client(url, "client-token", "laptop", lookups, stop_after=1)
    with RemoteQueue(f"{url}/queue", "admin-token") as admin:
        stuck = admin.stats(QUEUE).running
        reset = admin.release(crashed) if crashed else 0  # DELETE /api/claims/{claim_id}
        older = admin.reset_claims(60 * 60)  # POST /api/claims/reset?older_than_minutes=60
    clients = [
        threading.Thread(target=run_client, args=(url, "client-token", f"host-{i}", lookups))
        for i in range(3)
    ]
    for t in clients:
        t.start()
    for t in clients:
        t.join()
    cleanup = httpx.post(f"{url}/admin/cleanup").json()
    with RemoteQueue(f"{url}/queue", "admin-token") as admin:
        stats = admin.stats(QUEUE)
        denied = httpx.post(
            f"{url}/queue/api/claims/reset?older_than_minutes=1",
            headers={"Authorization": "Bearer client-token"},
        ).status_code
    server.should_exit = True
    report(
        {
            "books": args.books,
            "rolled_back_insert_queued": rolled_back is not None,
            "stuck_after_crash": stuck,
            "reset_by_claim_id": reset,
            "reset_older_than_60min": older,
            "books_without_external_id": library.missing(),
            "looked_up_more_than_once": sum(1 for n in lookups.values() if n > 1),
            "cleanup": cleanup,
            "queue": stats,
            "client_may_reset_claims": denied != 403,
        },
        args.json,
    )
    library.q.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
