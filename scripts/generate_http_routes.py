"""Write the table of every route into docs/http.md, between its ``routes`` markers,
from the endpoint table (``conveyor.endpoints.markdown()``); a test checks it."""

from __future__ import annotations

from pathlib import Path

from conveyor.endpoints import markdown

START = "<!-- routes: generated from conveyor.endpoints.markdown() -->\n"
END = "<!-- /routes -->"


def main() -> None:
    page = Path(__file__).resolve().parent.parent / "docs" / "http.md"
    text = page.read_text(encoding="utf-8")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    page.write_text(head + START + markdown() + END + tail, encoding="utf-8")
    print(f"wrote {page}")


if __name__ == "__main__":
    main()
