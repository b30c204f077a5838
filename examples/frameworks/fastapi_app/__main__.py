"""``python -m examples.frameworks.fastapi_app [--port 8000]``: serve the application."""

from __future__ import annotations

import argparse
import sys

import uvicorn

from conveyor.config import database_url
from conveyor.errors import ConfigurationError
from examples.frameworks.fastapi_app.db import check

parser = argparse.ArgumentParser(prog="python -m examples.frameworks.fastapi_app")
parser.add_argument("--host", default="127.0.0.1")
parser.add_argument("--port", type=int, default=8000)
args = parser.parse_args()
if not database_url().startswith("sqlite:"):
    try:  # a database that cannot be used is one line, not a server retrying it forever
        check(database_url())
    except ConfigurationError as exc:
        sys.exit(f"error: {exc}")
uvicorn.run("examples.frameworks.fastapi_app.app:app", host=args.host, port=args.port)
