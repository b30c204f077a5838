"""The book pipeline's admin API and page: bulk page upload with background OCR,
guideline extraction and finalization as background jobs, progress polling, resume after
a failure, and a page with a progress bar.

Every job is a conveyor job (see ``jobs``); this module turns requests into them and
them into responses. Uploaded pages and the job that will OCR them are written in one
transaction, so a refused job (409) leaves no pages behind."""

from __future__ import annotations

import html
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import FastAPI, Request, Response
from fastapi import Path as PathParam
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, HTMLResponse
from pydantic import BaseModel, Field
from starlette.datastructures import UploadFile
from starlette.types import ASGIApp

import conveyor
from examples._common import declare_retention
from examples._db import AppDatabase, Tx
from examples._web import ApiError, BodyLimit, NoNul, Workers, install_errors
from examples.book_pipeline.jobs import (
    EXTRACTION_GROUP,
    QUEUE,
    TASKS,
    Settings,
    StandIns,
    job_status,
    pages_left,
    register,
    with_retries,
    worker_options,
)
from examples.book_pipeline.store import Store

STATIC = Path(__file__).resolve().parent / "static"
MAX_BULK_FILES = 200
MAX_PAGES_PER_BOOK = 500
MAX_PAGE_BYTES = 10 * 1024 * 1024
MAX_REQUEST_BYTES = 256 * 1024 * 1024
IMAGE_TYPES = {".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp"}
# The admin page runs only the scripts served here: no inline code, no other origin.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
# A book's jobs are its record: the admin page shows the newest of each type, and resuming
# starts after the failed job's checkpoint. They are kept for ever, whatever a default
# policy of the database says (a book has a handful of jobs): pruning one would show an
# older job as the newest, or make a resume start again from page 1. No keys are retired:
# a book runs many jobs with its key, one after another.
RETENTION: dict[str, timedelta | None] = {"completed": None, "failed": None, "cancelled": None}
JobType = Literal["ocr_batch", "extraction", "finalization"]
BookId = Annotated[str, PathParam(min_length=1, max_length=64), NoNul]


class Pipeline:
    """The store, the queue and the stand-ins, in one database."""

    def __init__(self, url: str, settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
        self.q = conveyor.connect(url)
        declare_retention(self.q, QUEUE, RETENTION, retire_keys=False)
        self.db = AppDatabase(url)
        self.store = Store(self.db)
        self.stand_ins = StandIns(self.settings)
        self.app = conveyor.App(self.q)
        register(self.app, self.store, self.stand_ins, self.settings)
        # One job running at a time across every worker, as the design recommends: OCR,
        # extraction and finalization of different books wait for each other.
        self.q.set_limits(QUEUE, max_running=1)

    def close(self) -> None:
        self.db.close()
        self.q.close()

    def book_or_404(self, book_id: str) -> dict[str, Any]:
        book = self.store.book(book_id)
        if book is None:
            raise ApiError(404, f"Book not found: {book_id}")
        return book

    def start(self, kind: str, book_id: str, *, conn: Any = None, **payload: Any) -> conveyor.Job:
        """Enqueue a job for the book; ``DuplicateJob`` if one is pending or running (the
        database's unique index decides, whoever asks at the same moment)."""
        return self.q.enqueue(
            TASKS[kind], {"book_id": book_id, **payload}, queue=QUEUE, key=book_id,
            on_active="raise", max_attempts=1,
            group=EXTRACTION_GROUP if kind == "extraction" else None, conn=conn,
        )  # fmt: skip

    def busy(self, book_id: str, exc: conveyor.DuplicateJob) -> ApiError:
        """The 409 for a book whose job is active (read after any transaction ended)."""
        active = self.q.get(exc.job_id) if exc.job_id is not None else None
        if active is None or active.is_final:  # it ended in between: asking again will do
            return ApiError(409, f"another job was active for book {book_id}", code="job_active")
        kind = active.task.removeprefix("book_pipeline.")
        message = f"{kind} job {active.id} is already {active.status} for book {book_id}"
        return ApiError(409, message, code="job_active")

    def latest(self, book_id: str, kind: str | None = None) -> conveyor.Job | None:
        """The book's newest job (of ``kind``). Reading it is the stale check: a running
        job whose heartbeat stopped has its lease expired, and is failed as it is read."""
        self.check_running(book_id)
        return self.q.latest(book_id, queue=QUEUE, task=None if kind is None else TASKS[kind])

    def check_running(self, book_id: str) -> None:
        """The book's running job, if any: its heartbeat recorded (recovering an expired
        lease clears the job's own), then read again — which fails it if its lease
        expired. With no job running, pages an interrupted OCR left ``processing`` go
        back to ``pending``."""
        running = self.q.jobs(queue=QUEUE, key=book_id, status="running", limit=1)
        for job in running:
            if job.heartbeat_at is not None:
                self.store.beat(
                    job.id, job.heartbeat_at.isoformat(timespec="microseconds"), wait=False
                )
            now = self.q.get(job.id)
            if now is not None and not now.is_final:
                return
        self.store.settle_interrupted_ocr(book_id)

    def status(self, job: conveyor.Job) -> dict[str, Any]:
        """The job as ``JobStatusResponse``, with its last heartbeat even once cleared."""
        beat = self.store.last_beat(job.id) if job.heartbeat_at is None else None
        return job_status(job, beat)

    # -- pages --------------------------------------------------------------------------
    def upload(self, book_id: str, files: list[tuple[str, bytes]]) -> dict[str, Any]:

        def add(tx: Tx) -> tuple[list[int], conveyor.Job]:  # the pages and their job, or neither
            if not self.store.lock_book(tx, book_id):
                raise ApiError(404, f"Book not found: {book_id}")
            if self.store.page_count(book_id, tx) + len(files) > MAX_PAGES_PER_BOOK:
                raise ApiError(400, f"a book has at most {MAX_PAGES_PER_BOOK} pages")
            numbers = self.store.add_pages(tx, book_id, files)
            job = self.start(
                "ocr_batch", book_id, pages=numbers, total_items=len(numbers), conn=tx.conn
            )
            return numbers, job

        try:
            numbers, job = self.db.retried(add)
        except conveyor.DuplicateJob as exc:
            raise self.busy(book_id, exc) from None
        return {
            "job_id": str(job.id),
            "pages_uploaded": numbers,
            "total_pages": len(numbers),
            "status": "processing",
            "message": f"Uploaded {len(numbers)} raw images. OCR processing in background.",
        }

    def ocr_now(self, book_id: str, page: int, image: bytes) -> dict[str, Any]:
        text, problem = with_retries(
            lambda: self.stand_ins.ocr(book_id, page, image), self.settings, lambda: False
        )
        if problem is None:
            return {"ocr_status": "completed", "text": text}
        return {"ocr_status": "failed", "error": problem["error"],
                "error_type": problem["error_type"]}  # fmt: skip

    def upload_one(self, book_id: str, filename: str, image: bytes) -> dict[str, Any]:
        self.book_or_404(book_id)
        self._refuse_during_ocr(book_id, "uploading single pages")
        result = self.ocr_now(book_id, 0, image)  # inline OCR, as before bulk upload
        with self.db.transaction() as tx:
            if not self.store.lock_book(tx, book_id):
                raise ApiError(404, f"Book not found: {book_id}")
            if self.store.page_count(book_id, tx) >= MAX_PAGES_PER_BOOK:
                raise ApiError(400, f"a book has at most {MAX_PAGES_PER_BOOK} pages")
            [number] = self.store.add_pages(
                tx, book_id, [(filename, image)], text=result.get("text"),
                ocr_status=result["ocr_status"], ocr_error=result.get("error"),
                error_type=result.get("error_type"),
            )  # fmt: skip
        return next(p for p in self.store.pages(book_id) if p["page_num"] == number)

    def retry_ocr(self, book_id: str, page_num: int) -> dict[str, Any]:
        self.book_or_404(book_id)
        page = self.store.page(book_id, page_num)
        if page is None:
            raise ApiError(404, f"Page {page_num} not found in book {book_id}")
        self._refuse_during_ocr(book_id, "retrying a page")
        if page["ocr_status"] == "completed":
            raise ApiError(409, f"page {page_num} already has its OCR text")
        result = self.ocr_now(book_id, page_num, page["image"])
        text, error, kind = result.get("text"), result.get("error"), result.get("error_type")
        self.store.set_ocr(
            book_id, page_num, result["ocr_status"], text=text, error=error, error_type=kind
        )
        out = {"page_num": page_num, "ocr_status": result["ocr_status"]}
        if text is not None:
            return out | {"ocr_text": text}
        return out | {"ocr_error": error, "error_type": kind}

    def resume_ocr(self, book_id: str) -> dict[str, Any]:
        """A new OCR job for the pages the book's last OCR job did not finish, after its
        checkpoint (an interrupted run: its in-flight page is read again)."""
        self.book_or_404(book_id)
        last = self.latest(book_id, "ocr_batch")
        if last is None:
            raise ApiError(400, "No OCR job to resume for this book")
        left = pages_left(last) if last.status != conveyor.Status.COMPLETED else []
        if not left:
            return {"job_id": None, "status": "already_complete",
                    "message": "All pages already processed"}  # fmt: skip
        checkpoint = last.progress.checkpoint
        after = checkpoint if isinstance(checkpoint, int) else last.payload.get("resumed_after")
        try:
            job = self.start(
                "ocr_batch", book_id, pages=left, total_items=len(left), resumed_after=after
            )
        except conveyor.DuplicateJob as exc:
            raise self.busy(book_id, exc) from None
        return {
            "job_id": str(job.id),
            "status": "started",
            "start_page": left[0],
            "total_pages": len(left),
            "message": f"OCR resumed from page {left[0]} ({len(left)} pages)",
        }

    def _refuse_during_ocr(self, book_id: str, doing: str) -> None:
        active = self.latest(book_id, "ocr_batch")
        if active is not None and active.status in ("pending", "running"):
            raise ApiError(
                409,
                f"Bulk OCR job in progress. Wait for completion before {doing}.",
                code="job_active",
            )

    # -- extraction and finalization ----------------------------------------------------
    def generate(
        self, book_id: str, start_page: int | None, end_page: int | None, resume: bool
    ) -> dict[str, Any]:
        self.book_or_404(book_id)
        total_pages = self.store.page_count(book_id)
        if total_pages == 0:
            raise ApiError(400, "No pages uploaded for this book")
        start = start_page or 1
        end = min(end_page or total_pages, total_pages)
        if resume:
            latest = self.latest(book_id, "extraction")
            last = job_status(latest)["last_completed_item"] if latest else None
            if last:
                start = last + 1
                if start > end:
                    return {"job_id": None, "status": "already_complete",
                            "message": "All pages already processed"}  # fmt: skip
        if start > end:
            raise ApiError(400, f"start_page {start} is after end_page {end}")
        total = end - start + 1
        try:
            job = self.start(
                "extraction", book_id, start_page=start, end_page=end, total_items=total
            )
        except conveyor.DuplicateJob as exc:
            raise self.busy(book_id, exc) from None
        return {
            "job_id": str(job.id),
            "status": "started",
            "start_page": start,
            "end_page": end,
            "total_pages": total,
            "message": f"Guideline generation started for pages {start}-{end}",
        }

    def finalize(self, book_id: str) -> dict[str, Any]:
        self.book_or_404(book_id)
        try:
            job = self.start("finalization", book_id, total_items=len(self.store.topics(book_id)))
        except conveyor.DuplicateJob as exc:
            raise self.busy(book_id, exc) from None
        return {"job_id": str(job.id)}


# -- the HTTP layer -----------------------------------------------------------------------
class NewBook(BaseModel):
    title: Annotated[str, Field(min_length=1, max_length=500), NoNul]


class GenerateGuidelinesRequest(BaseModel):
    start_page: int | None = Field(1, ge=1, le=MAX_PAGES_PER_BOOK)
    end_page: int | None = Field(None, ge=1, le=MAX_PAGES_PER_BOOK)
    auto_sync_to_db: bool = False
    resume: bool = False


async def _images(request: Request, field: str, most: int) -> list[tuple[str, bytes]]:
    """The uploaded files of ``field``: checked, sorted by file name, read."""
    form = await request.form(max_files=most + 1, max_fields=10)
    uploads = [f for f in form.getlist(field) if isinstance(f, UploadFile)]
    if not uploads:
        raise ApiError(400, f"No images provided (multipart field {field!r})")
    if len(uploads) > most:
        raise ApiError(400, f"Max {most} files per upload, got more")
    files = []
    for upload in sorted(uploads, key=lambda u: u.filename or ""):
        name = os.path.basename(upload.filename or "")[:255]
        if "\x00" in name:
            raise ApiError(400, "file name: the NUL character is not allowed")
        if Path(name).suffix.lower() not in IMAGE_TYPES:
            raise ApiError(
                400, f"{name or 'a file'}: expected an image ({', '.join(sorted(IMAGE_TYPES))})"
            )
        if not upload.size or upload.size > MAX_PAGE_BYTES:
            raise ApiError(400, f"{name}: expected 1 byte to {MAX_PAGE_BYTES // 2**20} MB")
        files.append((name, await upload.read()))
    await form.close()
    return files


def create_api(pipeline: Pipeline, *, workers: int = 2) -> ASGIApp:
    runner = Workers(pipeline.app, concurrency=workers, **worker_options(pipeline.settings))

    @asynccontextmanager
    async def lifespan(api: FastAPI) -> AsyncIterator[None]:
        runner.start()
        yield
        runner.stop()

    api = FastAPI(title="book pipeline", lifespan=lifespan)
    install_errors(api, "detail")  # the original API's errors: {"detail": "..."}
    page_html = (STATIC / "book.html").read_text()

    @api.post("/admin/books", status_code=201)
    def add_book(body: NewBook) -> dict[str, str]:
        return {"book_id": pipeline.store.add_book(body.title.strip() or "Untitled")}

    @api.get("/admin/books/{book_id}", response_class=HTMLResponse)
    def book_page(book_id: BookId) -> HTMLResponse:
        book = pipeline.book_or_404(book_id)
        body = (
            page_html.replace("{{book_id}}", html.escape(book_id))
            .replace("{{title}}", html.escape(book["title"]))
            .replace("{{poll_ms}}", str(pipeline.settings.poll_ms))
        )
        return HTMLResponse(body, headers={"Content-Security-Policy": CSP})

    @api.get("/admin/books/{book_id}/pages")
    def pages(book_id: BookId) -> dict[str, Any]:
        pipeline.book_or_404(book_id)
        pipeline.check_running(book_id)
        return {"book_id": book_id, "pages": pipeline.store.pages(book_id)}

    @api.post("/admin/books/{book_id}/pages/bulk")
    async def bulk_upload(book_id: BookId, request: Request) -> dict[str, Any]:
        if await run_in_threadpool(pipeline.store.book, book_id) is None:
            raise ApiError(404, f"Book not found: {book_id}")
        files = await _images(request, "images", MAX_BULK_FILES)
        return await run_in_threadpool(pipeline.upload, book_id, files)

    @api.post("/admin/books/{book_id}/pages", status_code=201)
    async def upload_page(book_id: BookId, request: Request) -> dict[str, Any]:
        if await run_in_threadpool(pipeline.store.book, book_id) is None:
            raise ApiError(404, f"Book not found: {book_id}")
        [(name, image)] = await _images(request, "image", 1)
        return await run_in_threadpool(pipeline.upload_one, book_id, name, image)

    @api.post("/admin/books/{book_id}/pages/{page_num}/retry-ocr")
    def retry_ocr(
        book_id: BookId, page_num: Annotated[int, PathParam(ge=1, le=MAX_PAGES_PER_BOOK)]
    ) -> dict[str, Any]:
        return pipeline.retry_ocr(book_id, page_num)

    @api.post("/admin/books/{book_id}/pages/resume-ocr")
    def resume_ocr(book_id: BookId) -> dict[str, Any]:
        return pipeline.resume_ocr(book_id)

    @api.post("/admin/books/{book_id}/generate-guidelines")
    def generate(book_id: BookId, body: GenerateGuidelinesRequest) -> dict[str, Any]:
        return pipeline.generate(book_id, body.start_page, body.end_page, body.resume)

    @api.post("/admin/books/{book_id}/finalize")
    def finalize(book_id: BookId) -> dict[str, Any]:
        return pipeline.finalize(book_id)

    @api.get("/admin/books/{book_id}/jobs/latest")
    def latest_job(book_id: BookId, job_type: JobType | None = None) -> dict[str, Any] | None:
        job = pipeline.latest(book_id, job_type)
        return None if job is None else pipeline.status(job)

    @api.get("/admin/books/{book_id}/jobs/{job_id}")
    def get_job(
        book_id: BookId, job_id: Annotated[str, PathParam(max_length=20)]
    ) -> dict[str, Any]:
        job = pipeline.q.get(int(job_id)) if job_id.isdigit() and int(job_id) < 2**63 else None
        if job is None or job.queue != QUEUE or job.payload.get("book_id") != book_id:
            raise ApiError(404, "Job not found")
        return pipeline.status(job)

    @api.get("/static/{name}", include_in_schema=False)
    def static(name: str) -> FileResponse:
        if name not in ("book.js", "book.css"):
            raise ApiError(404, f"no file {name!r}")
        return FileResponse(STATIC / name, headers={"Cache-Control": "no-cache"})

    @api.get("/healthz", include_in_schema=False)
    def healthz() -> Response:
        return Response("ok", media_type="text/plain")

    return BodyLimit(api, MAX_REQUEST_BYTES, "detail")
