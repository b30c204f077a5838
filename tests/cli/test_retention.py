"""conveyor retention set / list / clear, on every database; mistakes are one line."""

from __future__ import annotations

import pytest

import conveyor
from tests.cli.conftest import Cli, assert_one_line_error


def test_set_list_and_clear(cli: Cli, db_url: str) -> None:
    conveyor.connect(db_url).close()  # migrated
    out = cli("retention", "set", "-s", "completed", "--keep", "7d", "--db", db_url)
    assert out.code == 0 and "kept 7d" in out.stdout
    policy = cli(
        "retention", "set", "-s", "failed", "--keep", "forever", "-q", "books", "-t", "sync",
        "--retire-keys", "--archive", "task:archive", "--json", "--db", db_url,
    ).json()  # fmt: skip
    assert (policy["keep_seconds"], policy["queue"], policy["task"]) == (None, "books", "sync")
    assert policy["retire_keys"] is True and policy["archive"] == "task:archive"
    listed = cli("retention", "list", "--json", "--db", db_url).json()["policies"]
    assert [(p["status"], p["queue"]) for p in listed] == [("completed", None), ("failed", "books")]
    table = cli("retention", "list", "--db", db_url).stdout
    assert "for ever" in table and "retired" in table
    cleared = cli("retention", "clear", "-q", "books", "-t", "sync", "--json", "--db", db_url)
    assert cleared.json() == {"count": 1}
    assert len(cli("retention", "list", "--json", "--db", db_url).json()["policies"]) == 1


@pytest.mark.parametrize(
    ("args", "contains"),
    [
        (("set", "-s", "pending", "--keep", "1d"), "status: expected one of completed"),
        (("set", "-s", "completed", "--keep", "soon"), "--keep"),
        (("set", "-s", "completed"), "needs --status and --keep"),
        (("set", "-s", "completed", "--keep", "1d", "--archive", "s3:x"), "archive"),
        (("set", "-s", "completed", "--keep", "1d", "-q", "a\tb"), "queue"),
        (("list", "-s", "completed"), "takes no --status"),
        (("clear", "--keep", "1d"), "takes no --keep"),
        (("clear", "-s", "running"), "status"),
        (("prune-all",), "ACTION"),
    ],
)
def test_mistakes_are_one_line(
    cli: Cli, sqlite_url: str, args: tuple[str, ...], contains: str
) -> None:
    conveyor.connect(sqlite_url).close()
    assert_one_line_error(cli("retention", *args, "--db", sqlite_url), code=2, contains=contains)
