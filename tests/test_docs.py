"""The code blocks of README.md and docs/*.md that are marked runnable run, and succeed.

A fenced ``sh`` or ``python`` block preceded by an HTML comment ``<!-- run -->`` is run
in a fresh temporary directory (so the default ``sqlite:///conveyor.db`` is a fresh
database), with ``$CONVEYOR_DATABASE_URL`` unset and this checkout's ``conveyor`` first
on ``PATH``: shell blocks by ``bash -e -o pipefail``, Python blocks by this interpreter.
The marker takes options (docs/contributing.md describes them):

- ``continue``: run in the directory the previous marked block of the page left, with
  its files and database (a tutorial's next step);
- ``file=NAME``: write the block to ``NAME`` instead of running it (``tasks.py``);
- ``prelude="CODE"``: Python run before the block (the names a fragment assumes);
- ``before="COMMAND"``: a shell command run before the block (the state it reads).

A block that fails (a non-zero exit, an exception) fails the test with its output, so a
statement of the docs that is no longer true fails CI.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK_TIMEOUT_S = 180
LANGUAGES = {"sh": "sh", "bash": "sh", "python": "python"}
_MARKED = re.compile(
    r"^<!-- run(?::(?P<options>[^\n]*?))? -->\n```(?P<lang>\w+)[^\n]*\n(?P<body>.*?)^```",
    flags=re.DOTALL | re.MULTILINE,
)
_OPTIONS = {"continue", "file", "prelude", "before"}


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    body: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{self.page.name}:{self.line}"


def marked_blocks(page: Path) -> list[Block]:
    text = page.read_text()
    blocks = []
    for match in _MARKED.finditer(text):
        line = text.count("\n", 0, match.start()) + 2  # the line of the opening fence
        lang = LANGUAGES.get(match["lang"])
        if lang is None:
            raise AssertionError(f"{page.name}:{line}: cannot run a {match['lang']!r} block")
        options: dict[str, str] = {}
        for word in shlex.split(match["options"] or ""):
            key, _, value = word.partition("=")
            if key not in _OPTIONS:
                raise AssertionError(f"{page.name}:{line}: unknown run option {key!r}")
            options[key] = value
        blocks.append(Block(page, line, lang, match["body"], options))
    return blocks


def chains(page: Path) -> list[list[Block]]:
    """The page's marked blocks, grouped: each group shares one directory."""
    groups: list[list[Block]] = []
    for block in marked_blocks(page):
        if "continue" in block.options:
            assert groups, f"{block.name}: 'continue' needs a marked block before it"
            groups[-1].append(block)
        else:
            groups.append([block])
    return groups


ALL_CHAINS = [chain for page in PAGES for chain in chains(page)]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CONVEYOR_DATABASE_URL", "COLUMNS")}
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.update({"NO_COLOR": "1", "PYTHONUNBUFFERED": "1", "CONVEYOR_DEMO_PACE": "0"})
    return env


def _run(command: list[str], block: Block, cwd: Path) -> None:
    done = subprocess.run(
        command, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S
    )
    assert done.returncode == 0, (
        f"{block.name} ({block.lang}) exited {done.returncode}:\n{block.body}\n"
        f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    )


def run_block(block: Block, cwd: Path) -> None:
    if "before" in block.options:
        _run(["bash", "-e", "-o", "pipefail", "-c", block.options["before"]], block, cwd)
    if "file" in block.options:
        (cwd / block.options["file"]).write_text(block.body)
        return
    if block.lang == "sh":
        _run(["bash", "-e", "-o", "pipefail", "-c", block.body], block, cwd)
        return
    script = cwd / f"_block_{block.line}.py"
    script.write_text(block.options.get("prelude", "") + "\n" + block.body)
    _run([sys.executable, str(script)], block, cwd)


def test_enough_blocks_are_marked() -> None:
    marked = [block for chain in ALL_CHAINS for block in chain]
    assert len(marked) >= 12, [b.name for b in marked]
    assert {b.page.name for b in marked} >= {"README.md", "quickstart.md"}


@pytest.mark.parametrize("chain", ALL_CHAINS, ids=lambda chain: chain[0].name)
def test_marked_blocks_run(chain: list[Block], tmp_path: Path) -> None:
    for block in chain:
        run_block(block, tmp_path)


def test_a_false_block_fails(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- run -->\n```sh\nconveyor jobs --status nonsense\n```\n\n"
        "<!-- run: continue -->\n```python\nraise SystemExit(3)\n```\n"
    )
    [chain] = chains(page)
    assert [b.lang for b in chain] == ["sh", "python"]
    for block in chain:
        with pytest.raises(AssertionError, match="exited"):
            run_block(block, tmp_path)
