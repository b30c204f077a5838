"""The pipeline's own data, in the queue's database: books, their pages (the uploaded
image, its OCR text and status), the guidelines extracted per page and the subtopics
finalization names. Page writes are upserts keyed by page, so a page processed twice (a
resumed job) leaves one result, not two."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from examples._db import AppDatabase, Tx

TABLES = {
    "sqlite": """
CREATE TABLE IF NOT EXISTS books (
    book_id TEXT PRIMARY KEY, title TEXT NOT NULL, created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS pages (
    book_id TEXT NOT NULL REFERENCES books (book_id), page_num INTEGER NOT NULL,
    filename TEXT NOT NULL, image BLOB NOT NULL, text TEXT, ocr_status TEXT NOT NULL,
    ocr_error TEXT, error_type TEXT, status TEXT NOT NULL, uploaded_at TEXT NOT NULL,
    PRIMARY KEY (book_id, page_num)
);
CREATE TABLE IF NOT EXISTS guidelines (
    book_id TEXT NOT NULL, page_num INTEGER NOT NULL, topic TEXT NOT NULL,
    written_at TEXT NOT NULL, PRIMARY KEY (book_id, page_num)
);
CREATE TABLE IF NOT EXISTS subtopics (
    book_id TEXT NOT NULL, topic TEXT NOT NULL, final_name TEXT,
    PRIMARY KEY (book_id, topic)
);
CREATE TABLE IF NOT EXISTS job_heartbeats (
    job_id TEXT PRIMARY KEY, heartbeat_at TEXT NOT NULL
)""",
}
TABLES["postgresql"] = TABLES["sqlite"].replace("BLOB", "BYTEA")
# MySQL indexes text of a bounded length only.
TABLES["mysql"] = """
CREATE TABLE IF NOT EXISTS books (
    book_id VARCHAR(64) PRIMARY KEY, title TEXT NOT NULL, created_at VARCHAR(40) NOT NULL
) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
CREATE TABLE IF NOT EXISTS pages (
    book_id VARCHAR(64) NOT NULL, page_num INTEGER NOT NULL,
    filename TEXT NOT NULL, image LONGBLOB NOT NULL, text LONGTEXT, ocr_status TEXT NOT NULL,
    ocr_error TEXT, error_type TEXT, status TEXT NOT NULL, uploaded_at VARCHAR(40) NOT NULL,
    PRIMARY KEY (book_id, page_num),
    FOREIGN KEY (book_id) REFERENCES books (book_id)
) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
CREATE TABLE IF NOT EXISTS guidelines (
    book_id VARCHAR(64) NOT NULL, page_num INTEGER NOT NULL, topic VARCHAR(500) NOT NULL,
    written_at VARCHAR(40) NOT NULL, PRIMARY KEY (book_id, page_num)
) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
CREATE TABLE IF NOT EXISTS subtopics (
    book_id VARCHAR(64) NOT NULL, topic VARCHAR(500) NOT NULL, final_name TEXT,
    PRIMARY KEY (book_id, topic)
) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
CREATE TABLE IF NOT EXISTS job_heartbeats (
    job_id VARCHAR(32) PRIMARY KEY, heartbeat_at VARCHAR(40) NOT NULL
) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"""

PAGE_FIELDS = (
    "page_num, filename, status, ocr_status, ocr_error, error_type, uploaded_at,"
    " text IS NOT NULL AS has_text"
)


def now() -> str:
    return datetime.now(UTC).isoformat()


class Store:
    def __init__(self, db: AppDatabase) -> None:
        self.db = db
        db.create(sqlite=TABLES["sqlite"], postgresql=TABLES["postgresql"], mysql=TABLES["mysql"])
        self._lock_book = (
            "SELECT book_id FROM books WHERE book_id = :book FOR UPDATE"
            if db.dialect in ("postgresql", "mysql")
            else "SELECT book_id FROM books WHERE book_id = :book"  # BEGIN IMMEDIATE locks
        )

    # -- books ----------------------------------------------------------------------------
    def add_book(self, title: str) -> str:
        book_id = str(uuid.uuid4())
        with self.db.transaction() as tx:
            tx.execute(
                "INSERT INTO books (book_id, title, created_at) VALUES (:id, :title, :now)",
                {"id": book_id, "title": title, "now": now()},
            )
        return book_id

    def book(self, book_id: str) -> dict[str, Any] | None:
        with self.db.transaction(write=False) as tx:
            return tx.one("SELECT * FROM books WHERE book_id = :book", {"book": book_id})

    def lock_book(self, tx: Tx, book_id: str) -> bool:
        """Hold the book until ``tx`` ends (page numbers are handed out under it)."""
        return tx.one(self._lock_book, {"book": book_id}) is not None

    # -- pages ----------------------------------------------------------------------------
    def add_pages(
        self, tx: Tx, book_id: str, files: list[tuple[str, bytes]], **fields: Any
    ) -> list[int]:
        """Append pages (under the book's lock); returns their numbers."""
        row = tx.one(
            "SELECT max(page_num) AS n FROM pages WHERE book_id = :book", {"book": book_id}
        )
        first = int(row["n"] or 0) + 1 if row else 1
        numbers = []
        for offset, (filename, data) in enumerate(files):
            values = {"text": None, "ocr_status": "pending", "ocr_error": None,
                      "error_type": None} | fields  # fmt: skip
            tx.execute(
                "INSERT INTO pages (book_id, page_num, filename, image, text, ocr_status,"
                " ocr_error, error_type, status, uploaded_at) VALUES (:book, :num, :filename,"
                " :image, :text, :ocr_status, :ocr_error, :error_type, 'pending_review', :now)",
                {"book": book_id, "num": first + offset, "filename": filename, "image": data,
                 "now": now(), **values},
            )  # fmt: skip
            numbers.append(first + offset)
        return numbers

    def page_count(self, book_id: str, tx: Tx | None = None) -> int:
        query = "SELECT count(*) AS n FROM pages WHERE book_id = :book"
        if tx is not None:
            row = tx.one(query, {"book": book_id})
        else:
            with self.db.transaction(write=False) as own:
                row = own.one(query, {"book": book_id})
        return int(row["n"]) if row else 0

    def pages(self, book_id: str) -> list[dict[str, Any]]:
        with self.db.transaction(write=False) as tx:
            rows = tx.all(
                f"SELECT {PAGE_FIELDS} FROM pages WHERE book_id = :book ORDER BY page_num",
                {"book": book_id},
            )
        return [r | {"has_text": bool(r["has_text"])} for r in rows]

    def page(self, book_id: str, page_num: int) -> dict[str, Any] | None:
        with self.db.transaction(write=False) as tx:
            row = tx.one(
                "SELECT * FROM pages WHERE book_id = :book AND page_num = :num",
                {"book": book_id, "num": page_num},
            )
        if row is not None:
            row["image"] = bytes(row["image"])
        return row

    def set_ocr(
        self,
        book_id: str,
        page_num: int,
        status: str,
        *,
        text: str | None = None,
        error: str | None = None,
        error_type: str | None = None,
    ) -> None:
        with self.db.transaction() as tx:
            tx.execute(
                "UPDATE pages SET ocr_status = :status, text = coalesce(:text, text),"
                " ocr_error = :error, error_type = :kind WHERE book_id = :book AND page_num = :num",
                {"status": status, "text": text, "error": error, "kind": error_type,
                 "book": book_id, "num": page_num},
            )  # fmt: skip

    def settle_interrupted_ocr(self, book_id: str) -> int:
        """Pages an OCR run left ``processing`` when it stopped (its job is over) go back
        to ``pending``: resuming OCRs them. Returns how many. (Read first: a poll that
        finds none writes nothing.) A page another transaction holds is being written by
        a worker, or by one stopped while it wrote: nothing is settled then, after a
        moment's wait, and a later poll does it; the poll itself never hangs on it."""
        with self.db.transaction(write=False) as tx:
            left = tx.one(
                "SELECT page_num FROM pages WHERE book_id = :book AND ocr_status = 'processing'"
                " LIMIT 1",
                {"book": book_id},
            )
        if left is None:
            return 0
        settled = self.db.briefly(
            lambda tx: tx.execute(
                "UPDATE pages SET ocr_status = 'pending'"
                " WHERE book_id = :book AND ocr_status = 'processing'",
                {"book": book_id},
            )
        )
        return settled or 0

    # -- the jobs' last heartbeats -------------------------------------------------------
    def beat(self, job_id: int, at: str, *, wait: bool = True) -> bool:
        """Record a job's latest heartbeat (kept after its lease is recovered, when
        conveyor clears the job's own ``heartbeat_at``). Never moves backwards.

        ``wait=False`` (a poll's stale check) gives up after a moment when another
        transaction holds the job's row, and returns False: the worker is recording a
        beat itself, or was stopped (SIGSTOP) while it did, and a poll must not hang
        behind a stopped process. On SQLite the whole write waits, as every writer does."""

        def record(tx: Tx) -> bool:
            upsert = (
                " ON DUPLICATE KEY UPDATE"
                " heartbeat_at = greatest(heartbeat_at, VALUES(heartbeat_at))"
                if tx.dialect == "mysql"
                else " ON CONFLICT (job_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at"
                " WHERE job_heartbeats.heartbeat_at < excluded.heartbeat_at"
            )
            tx.execute(
                "INSERT INTO job_heartbeats (job_id, heartbeat_at) VALUES (:job, :at)" + upsert,
                {"job": str(job_id), "at": at},
            )
            return True

        if wait:
            with self.db.transaction() as tx:
                return record(tx)
        return self.db.briefly(record) is not None

    def last_beat(self, job_id: int) -> str | None:
        with self.db.transaction(write=False) as tx:
            row = tx.one(
                "SELECT heartbeat_at FROM job_heartbeats WHERE job_id = :job", {"job": str(job_id)}
            )
        return None if row is None else str(row["heartbeat_at"])

    # -- guidelines and subtopics --------------------------------------------------------
    def write_guideline(self, book_id: str, page_num: int, topic: str) -> bool:
        """Upsert the page's guideline; True when the topic is new to the book."""
        with self.db.transaction() as tx:
            seen = tx.one(
                "SELECT 1 AS seen FROM guidelines WHERE book_id = :book AND topic = :topic"
                " AND page_num <> :num LIMIT 1",
                {"book": book_id, "topic": topic, "num": page_num},
            )
            upsert = (
                " ON DUPLICATE KEY UPDATE topic = VALUES(topic), written_at = VALUES(written_at)"
                if tx.dialect == "mysql"
                else " ON CONFLICT (book_id, page_num)"
                " DO UPDATE SET topic = excluded.topic, written_at = excluded.written_at"
            )
            tx.execute(
                "INSERT INTO guidelines (book_id, page_num, topic, written_at)"
                " VALUES (:book, :num, :topic, :now)" + upsert,
                {"book": book_id, "num": page_num, "topic": topic, "now": now()},
            )
        return seen is None

    def guidelines(self, book_id: str) -> list[dict[str, Any]]:
        with self.db.transaction(write=False) as tx:
            return tx.all(
                "SELECT page_num, topic, written_at FROM guidelines WHERE book_id = :book"
                " ORDER BY page_num",
                {"book": book_id},
            )

    def topics(self, book_id: str) -> list[str]:
        with self.db.transaction(write=False) as tx:
            rows = tx.all(
                "SELECT DISTINCT topic FROM guidelines WHERE book_id = :book ORDER BY topic",
                {"book": book_id},
            )
        return [r["topic"] for r in rows]

    def name_subtopic(self, book_id: str, topic: str, final_name: str) -> None:
        with self.db.transaction() as tx:
            upsert = (
                " ON DUPLICATE KEY UPDATE final_name = VALUES(final_name)"
                if tx.dialect == "mysql"
                else " ON CONFLICT (book_id, topic) DO UPDATE SET final_name = excluded.final_name"
            )
            tx.execute(
                "INSERT INTO subtopics (book_id, topic, final_name) VALUES (:book, :topic, :name)"
                + upsert,
                {"book": book_id, "topic": topic, "name": final_name},
            )
