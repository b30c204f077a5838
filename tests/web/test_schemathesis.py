"""schemathesis against the live OpenAPI document of a real server, with the admin,
worker and reader tokens: no 5xx, every response as documented (status, content type,
headers, body schema), schema-violating requests refused, methods and auth enforced.

Left out: ``positive_data_acceptance``. A request of the documented shape can rightly
be refused: a claim id that no longer holds the job (409), an unknown job (404), text
the database cannot store such as NUL characters inside a payload (422).

``CONVEYOR_FUZZ_EXAMPLES`` raises the examples per operation for a longer local run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conveyor.web import Limits, create_app
from tests.conftest import drop_schema, fresh_url
from tests.web.conftest import TOKEN_OF, TOKENS, live_server

EXAMPLES = int(os.environ.get("CONVEYOR_FUZZ_EXAMPLES", "8"))
SEED = 20240601
CHECKS_LEFT_OUT = "positive_data_acceptance"
# 413 and 415 are refusals too (schemathesis' default list lacks them).
CONFIG = """
[checks.negative_data_rejection]
expected-statuses = ["400", "401", "403", "404", "405", "409", "413", "415", "422"]
"""
# Every role on SQLite; the admin (who reaches every operation) on PostgreSQL and MySQL too. The
# coverage phase (boundary values of every parameter, the slowest) runs for the admin;
# the other roles meet most of the same code behind their token and get the fuzzing and
# stateful phases.
RUNS = [
    ("sqlite", "admin"),
    ("sqlite", "worker"),
    ("sqlite", "reader"),
    ("postgresql", "admin"),
    ("mysql", "admin"),
]
PHASES = {"admin": "coverage,fuzzing,stateful", "worker": "fuzzing,stateful",
          "reader": "fuzzing,stateful"}  # fmt: skip


def _schemathesis() -> Path:
    script = Path(sys.executable).with_name("schemathesis")
    if not script.exists():
        pytest.fail("schemathesis is not installed: pip install -e '.[dev]'")
    return script


@pytest.mark.slow
@pytest.mark.timeout(660)  # the coverage phase alone takes minutes on a busy machine
@pytest.mark.parametrize(("backend", "role"), RUNS)
def test_schemathesis_finds_nothing(backend: str, role: str, tmp_path: Path) -> None:
    url, schema = fresh_url(backend, tmp_path)
    # Long polls are capped at 2 s so a fuzzed wait never outlasts a request timeout.
    app = create_app(url, tokens=TOKENS, limits=Limits(max_wait_seconds=2))
    # The fuzzer offers wrong tokens on purpose (does auth hold?), all from one address:
    # the back-off would soon answer 429 to everything it sends. It is tested on its own
    # (test_guard.py, test_hardening.py); here it allows any number of wrong tokens.
    app.state.conveyor.backoff.free = 10**9
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG)
    try:
        with live_server(app) as base:
            command = [
                str(_schemathesis()), "--no-color", "--config-file", str(config),
                "run", f"{base}/openapi.json",
                "--header", f"Authorization: Bearer {TOKEN_OF[role]}",
                "--checks", "all", "--exclude-checks", CHECKS_LEFT_OUT,
                "--phases", PHASES[role],
                "--max-examples", str(EXAMPLES), "--seed", str(SEED),
                "--request-timeout", "20", "--output-truncate", "true",
            ]  # fmt: skip
            run = subprocess.run(
                command, cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False
            )
    finally:
        if schema:
            drop_schema(schema)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
