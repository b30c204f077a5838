"""``python -m examples.book_pipeline [serve]``: the command line (``cli``), once the
packages of the ``examples`` extra are known to be installed."""

from __future__ import annotations

import importlib
import sys

# What the pipeline needs beyond conveyor: the server extra's web stack, and multipart
# uploads. Each as (the module to import, the package that provides it).
NEEDED = (
    ("fastapi", "fastapi"),
    ("uvicorn", "uvicorn"),
    ("httpx", "httpx"),
    ("python_multipart", "python-multipart"),
)


def missing_packages() -> list[str]:
    missing = []
    for module, package in NEEDED:
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(package)
    return missing


def main(argv: list[str] | None = None) -> int:
    missing = missing_packages()
    if missing:
        print(
            f"error: the book pipeline needs the examples extra (missing: {', '.join(missing)});"
            " install it with: pip install -e '.[examples]'",
            file=sys.stderr,
        )
        return 2
    from examples.book_pipeline.cli import main as run

    return run(argv)


if __name__ == "__main__":
    sys.exit(main())
