"""The Flask recipe (examples/frameworks/flask_app): the Conveyor extension, a job
enqueued on the request's own connection, the ``flask conveyor`` commands; on SQLite,
PostgreSQL and MySQL (MariaDB)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from flask import Flask
from flask.testing import FlaskClient

import conveyor
from conveyor.errors import ConfigurationError
from conveyor.integrations.flask import Conveyor
from examples.frameworks.flask_app import create_app
from examples.frameworks.flask_app.db import get_db, run
from examples.frameworks.flask_app.extensions import conveyor_
from examples.frameworks.flask_app.tasks import catalogue


@pytest.fixture
def app(app_db_url: str) -> Iterator[Flask]:
    flask_app = create_app({"DATABASE_URL": app_db_url, "TESTING": True})
    # As a deployment would: the application's tables, then conveyor's.
    for command in (["init-db"], ["conveyor", "migrate"]):
        assert flask_app.test_cli_runner().invoke(args=command).exit_code == 0
    yield flask_app
    with flask_app.app_context():
        conveyor_.close()


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


def _queue(app: Flask) -> conveyor.Queue:
    with app.app_context():
        return conveyor_.queue


def test_a_book_and_its_catalogue_job_commit_together(app: Flask, client: FlaskClient) -> None:
    added = client.post("/books", json={"isbn": "978-0441013593", "title": "Dune"})
    assert added.status_code == 201
    job = _queue(app).get(added.json["catalogue_job"])  # type: ignore[index]
    assert job is not None
    assert (job.task, job.payload, job.status) == (
        "books.catalogue", {"isbn": "978-0441013593"}, "pending")  # fmt: skip


def test_a_refused_book_rolls_back_the_job_it_enqueued(app: Flask, client: FlaskClient) -> None:
    assert client.post("/books", json={"isbn": "1", "title": "Dune"}).status_code == 201
    queue = _queue(app)
    claim = queue.claim(catalogue.queue)
    queue.complete(claim.jobs[0].id, claim.id)  # the key's job is final: a new one is made
    refused = client.post("/books", json={"isbn": "1", "title": "Dune again"})
    assert refused.status_code == 409
    assert queue.stats().total == 1  # the second job went with the refused insert


def test_a_rolled_back_connection_takes_its_job_with_it(app: Flask) -> None:
    with app.app_context():
        conn = get_db()
        run("INSERT INTO books (isbn, title) VALUES (?, 'Emma')", ("2",))
        job = conveyor_.queue.enqueue(catalogue.name, {"isbn": "2"}, conn=conn)
        assert conveyor_.queue.get(job.id) is None  # not committed: not visible elsewhere
        conn.rollback()
        assert conveyor_.queue.stats().total == 0


def test_flask_conveyor_worker_runs_the_tasks_in_the_app_context(
    app: Flask, client: FlaskClient
) -> None:
    book = client.post("/books", json={"isbn": "3", "title": "Ulysses"}).json
    assert book is not None
    result = app.test_cli_runner().invoke(args=["conveyor", "worker", "--burst"])
    assert result.exit_code == 0, result.output
    assert "completed 1" in result.output
    shown = client.get(f"/books/{book['id']}").json
    assert shown is not None
    assert shown["catalogued"] is True and shown["catalogue_job"] == "completed"


def test_flask_conveyor_migrate_reports_the_schema(app: Flask) -> None:
    result = app.test_cli_runner().invoke(args=["conveyor", "migrate"])
    assert result.exit_code == 0
    assert "schema at version" in result.output
    assert _queue(app).schema_version() == _queue(app).latest_schema_version


def test_the_extension_explains_what_is_missing(tmp_path: object) -> None:
    bare = Flask("bare")
    with bare.app_context(), pytest.raises(ConfigurationError, match="init_app"):
        _ = Conveyor().queue
    no_tasks = Flask("no_tasks")
    no_tasks.config["CONVEYOR_DATABASE_URL"] = f"sqlite:///{tmp_path}/q.db"
    Conveyor(no_tasks)
    result = no_tasks.test_cli_runner().invoke(args=["conveyor", "worker", "--burst"])
    assert result.exit_code != 0
    assert "no tasks to run" in result.output
