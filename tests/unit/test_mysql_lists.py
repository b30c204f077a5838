"""List parameters written into MySQL statements (``dialect.bind``): ids as plain
numbers, everything else escaped by the connection."""

from __future__ import annotations

from typing import Any

from pymysql.converters import escape_item

from conveyor.drivers.mysql.dialect import bind


def _escape(value: Any) -> str:
    return str(escape_item(value, "utf8mb4"))


def test_a_list_of_ids_is_written_as_numbers() -> None:
    text, rest = bind(
        "WHERE id IN %(locked)s AND q = %(q)s", {"locked": (3, 1, 2), "q": "a"}, _escape
    )
    assert text == "WHERE id IN (3,1,2) AND q = %(q)s"
    assert rest == {"q": "a"}


def test_any_other_value_of_a_list_is_escaped_as_the_connection_escapes_it() -> None:
    values = (True, False, None, "it's", 1.5, -7, 2**63)
    text, _ = bind("IN %(v)s", {"v": values}, _escape)
    assert text == "IN (" + ",".join(_escape(v) for v in values) + ")"
    assert text.startswith("IN (1,0,NULL,'it\\'s',")  # booleans stay 1 and 0, not True


def test_a_list_of_pairs_and_a_percent_sign_survive_the_driver_formatting() -> None:
    text, _ = bind("IN %(pairs)s", {"pairs": ((1, "50%"), (2, "x"))}, _escape)
    assert text == "IN ((1,'50%%'),(2,'x'))"
