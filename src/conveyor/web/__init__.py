"""The HTTP service: ``create_app(queue_or_url, tokens=..., limits=...)`` builds the
ASGI app that ``conveyor serve`` runs. Needs the ``server`` extra (FastAPI, uvicorn,
pydantic, prometheus_client)."""

from conveyor.web.app import create_app
from conveyor.web.auth import Role, parse_tokens, tokens_from_env
from conveyor.web.limits import Limits

__all__ = ["Limits", "Role", "create_app", "parse_tokens", "tokens_from_env"]
