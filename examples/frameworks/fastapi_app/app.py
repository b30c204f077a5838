"""The FastAPI application (``app``). Its database: ``$CONVEYOR_DATABASE_URL``, read
when it starts; its tables and the queue's live there together."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException
from pydantic import BaseModel, Field

from conveyor.aio import AsyncQueue
from conveyor.integrations.fastapi import Conveyor
from examples.frameworks.fastapi_app.db import Database, Duplicate
from examples.frameworks.fastapi_app.tasks import welcome

conveyor_ = Conveyor()  # tokens for /queue: $CONVEYOR_TOKENS (none: open, for localhost)
database = Database()
Queue = Annotated[AsyncQueue, Depends(conveyor_)]


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    async with conveyor_.lifespan(app):
        await database.open()
        try:
            yield
        finally:
            await database.close()


app = FastAPI(title="signups", lifespan=lifespan)
app.mount("/queue", conveyor_.api())  # the HTTP API, and the dashboard at /queue/


class SignupIn(BaseModel):
    email: str = Field(min_length=3, max_length=200, pattern=r"^[^@\s]+@[^@\s]+$")


@app.post("/signups", status_code=201)
async def signup(body: SignupIn, queue: Queue) -> dict[str, Any]:
    """The welcome email is enqueued in the signup's own transaction: if the insert that
    follows is refused (the email has signed up already), the job is rolled back too."""
    try:
        async with database.transaction() as tx:
            job = await queue.enqueue(welcome.name, {"email": body.email}, conn=tx.conn)
            signup_id = await tx.insert_signup(body.email, job.id)
    except Duplicate:
        raise HTTPException(409, f"{body.email} has signed up already") from None
    return {"id": signup_id, "welcome_job": job.id}


@app.get("/signups/{signup_id}")
async def show(signup_id: int, queue: Queue) -> dict[str, Any]:
    async with database.transaction(write=False) as tx:
        found = await tx.signup(signup_id)
    if found is None:
        raise HTTPException(404, f"no signup {signup_id}")
    email, job_id = found
    job = await queue.get(job_id)
    return {"id": signup_id, "email": email, "welcome": job.status if job else "pruned"}
