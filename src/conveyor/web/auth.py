"""Bearer tokens and roles.

Each token grants one role; roles nest: ``admin`` can do what a ``worker`` can, and a
``worker`` what a ``reader`` can. Tokens come from ``create_app(tokens=...)``, else from
``$CONVEYOR_TOKENS`` (``"admin:adm-secret-1,worker:wrk-secret-1"``) or the file named by
``$CONVEYOR_TOKENS_FILE`` (one ``role:token`` a line, ``#`` comments). With no tokens at
all, every request is an admin: only for a server bound to loopback.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Callable, Mapping
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from conveyor.errors import ConfigurationError

ENV_TOKENS = "CONVEYOR_TOKENS"
ENV_TOKENS_FILE = "CONVEYOR_TOKENS_FILE"
MIN_TOKEN_LENGTH = 8


class Role(StrEnum):
    READER = "reader"
    WORKER = "worker"
    ADMIN = "admin"

    @property
    def rank(self) -> int:
        return _RANKS[self]

    def allows(self, needed: Role) -> bool:
        return self.rank >= needed.rank


_RANKS = {Role.READER: 0, Role.WORKER: 1, Role.ADMIN: 2}


class AuthError(Exception):
    """A request without the credentials its route needs (401 or 403)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


class Tokens:
    """The configured tokens. ``role_for`` compares the offered token with every known
    one in constant time, so timing tells nothing about how much of it matched."""

    def __init__(self, tokens: Mapping[str, Role | str]) -> None:
        self._tokens: list[tuple[bytes, Role]] = []
        for token, role in tokens.items():
            self._tokens.append((_check_token(token), _role(role)))

    @property
    def enabled(self) -> bool:
        return bool(self._tokens)

    def role_for(self, offered: str | None) -> Role | None:
        if not self._tokens:
            return Role.ADMIN
        if not offered:
            return None
        candidate = offered.encode("utf-8", "surrogateescape")
        found: Role | None = None
        for secret, role in self._tokens:
            if hmac.compare_digest(candidate, secret):
                found = role  # keep looping: the time spent must not depend on the match
        return found


def parse_tokens(text: str, *, source: str = ENV_TOKENS) -> dict[str, Role]:
    """``"admin:adm-secret-1,worker:wrk-secret-1"`` (commas or newlines) -> ``{token: role}``."""
    tokens: dict[str, Role] = {}
    for raw in text.replace("\n", ",").split(","):
        entry = raw.strip()
        if not entry or entry.startswith("#"):
            continue
        role, sep, token = entry.partition(":")
        if not sep:
            raise ConfigurationError(f"{source}: expected role:token entries, got {role!r}")
        tokens[token.strip()] = _role(role.strip(), source)
    for token in tokens:
        _check_token(token, source)
    return tokens


def tokens_from_env(environ: Mapping[str, str] | None = None) -> dict[str, Role]:
    env = os.environ if environ is None else environ
    tokens: dict[str, Role] = {}
    if env.get(ENV_TOKENS_FILE):
        path = Path(env[ENV_TOKENS_FILE])
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigurationError(f"{ENV_TOKENS_FILE}: cannot read {path}: {exc}") from None
        tokens.update(parse_tokens(text, source=str(path)))
    if env.get(ENV_TOKENS):
        tokens.update(parse_tokens(env[ENV_TOKENS]))
    return tokens


def _role(value: Role | str, source: str = "tokens") -> Role:
    try:
        return Role(value)
    except ValueError:
        roles = ", ".join(r.value for r in Role)
        raise ConfigurationError(f"{source}: expected a role ({roles}), got {value!r}") from None


def _check_token(token: str, source: str = "tokens") -> bytes:
    if not isinstance(token, str) or len(token) < MIN_TOKEN_LENGTH:
        raise ConfigurationError(
            f"{source}: tokens must be at least {MIN_TOKEN_LENGTH} characters long"
        )
    if any(c.isspace() or ord(c) < 32 for c in token):
        raise ConfigurationError(f"{source}: tokens may not contain spaces or control characters")
    return token.encode("utf-8")


_bearer = HTTPBearer(
    auto_error=False,
    description="A token granting the admin, worker or reader role.",
)
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


ROLE_KEY = "conveyor.role"  # where the guard leaves the caller's role, in the ASGI scope


def require(needed: Role) -> Any:
    """A route dependency: the request's token must grant ``needed`` (or more).

    The guard middleware (``conveyor.web.guard``) already checked the token and the
    role before the body was read; this repeats the check for an app mounted without
    it, and puts the bearer scheme in the OpenAPI document."""

    async def check(request: Request, credentials: Credentials) -> Role:
        role: Role | None = request.scope.get(ROLE_KEY)
        if role is None:
            tokens: Tokens = request.app.state.conveyor.tokens
            role = tokens.role_for(credentials.credentials if credentials else None)
        if role is None:
            if credentials is None:
                raise AuthError(401, "unauthorized", MISSING_TOKEN)
            raise AuthError(401, "unauthorized", WRONG_TOKEN)
        if not role.allows(needed):
            raise AuthError(403, "forbidden", forbidden(needed, role))
        return role

    check.needed = needed  # type: ignore[attr-defined]  # read by the guard
    dependency: Callable[..., Any] = check
    return Depends(dependency)


async def _caller(request: Request) -> Role:
    """The role of the request's token (an admin's when the server has no tokens)."""
    role: Role | None = request.scope.get(ROLE_KEY)
    if role is None:
        tokens: Tokens = request.app.state.conveyor.tokens
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        role = tokens.role_for(token.strip() if scheme.lower() == "bearer" else None)
    return role or Role.READER


Caller = Annotated[Role, Depends(_caller)]
MISSING_TOKEN = "expected a header Authorization: Bearer <token>"
WRONG_TOKEN = "the bearer token is not valid"


def forbidden(needed: Role, role: Role) -> str:
    return f"this route needs the {needed} role; the token grants {role}"
