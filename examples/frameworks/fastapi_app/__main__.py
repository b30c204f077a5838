"""``python -m examples.frameworks.fastapi_app [--port 8000]``: serve the application."""

from __future__ import annotations

import argparse

import uvicorn

parser = argparse.ArgumentParser(prog="python -m examples.frameworks.fastapi_app")
parser.add_argument("--host", default="127.0.0.1")
parser.add_argument("--port", type=int, default=8000)
args = parser.parse_args()
uvicorn.run("examples.frameworks.fastapi_app.app:app", host=args.host, port=args.port)
