"""Encrypted payloads and results (the ``crypto`` extra: ``cryptography``'s Fernet).

A task that encrypts (``@app.task(encrypt=True)``, or every task of
``App(..., encrypt=True)``) has its payload sealed in the enqueuing process and its
result sealed in the worker, before either leaves for the database or a server. What is
stored is a JSON object with one member, ``{"$conveyor.encrypted": "<Fernet token>"}``:
the database, ``conveyor serve``, the console and the logs only ever see that.

A process *holds the keys* once it installed a keyring: ``App(..., encryption_keys=[...])``,
``App(..., encrypt=True)`` or a task with ``encrypt=True`` (the keys of
``$CONVEYOR_ENCRYPTION_KEYS``, comma-separated, when none were given), or ``use(keys)``.
In such a process every ``Job`` opens sealed values as it is made, so ``q.get(id).payload``,
``Job.result`` and the task's arguments are the plain values; elsewhere they stay sealed.

Several keys rotate: new values are sealed with the first, and any of them opens
(``MultiFernet``); ``conveyor reencrypt`` seals the stored values again with the first.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Protocol, TypeVar

from conveyor.errors import ConfigurationError


class _Readable(Protocol):
    """What ``redacted`` reads of a job (``conveyor.job.Job``, which imports this module)."""

    @property
    def payload(self) -> Any: ...

    @property
    def result(self) -> Any: ...


J = TypeVar("J", bound=_Readable)

MARKER = "$conveyor.encrypted"
ENV_KEYS = "CONVEYOR_ENCRYPTION_KEYS"
# Redaction without encryption: the payload member that lists its secret fields, and
# what readers see in their place.
REDACT = "$conveyor.redacted"
REDACTED = "[redacted]"


class Keyring:
    """Fernet keys: the first seals, any opens."""

    def __init__(self, keys: Sequence[str | bytes]) -> None:
        try:
            from cryptography.fernet import Fernet, MultiFernet
        except ImportError:  # pragma: no cover - the extra is installed in tests
            raise ConfigurationError(
                "encryption needs the cryptography package: pip install 'conveyor[crypto]'"
            ) from None
        if isinstance(keys, (str, bytes)) or not keys:
            raise ConfigurationError("encryption keys: expected a non-empty list of Fernet keys")
        fernets = []
        for index, key in enumerate(keys):
            try:
                fernets.append(Fernet(key.strip() if isinstance(key, (str, bytes)) else key))
            except (ValueError, TypeError):
                # The key itself never goes into a message.
                raise ConfigurationError(
                    f"encryption keys: key {index + 1} is not a Fernet key "
                    "(32 url-safe base64-encoded bytes)"
                ) from None
        self._fernet = MultiFernet(fernets)

    def seal(self, value: Any) -> dict[str, str]:
        """``value`` (JSON) sealed with the first key."""
        plain = json.dumps(value, separators=(",", ":")).encode()
        return {MARKER: self._fernet.encrypt(plain).decode("ascii")}

    def open(self, value: Any) -> Any:
        """The plain value of a sealed one (itself when no key opens it, or not sealed)."""
        if not sealed(value):
            return value
        from cryptography.fernet import InvalidToken

        try:
            plain = self._fernet.decrypt(value[MARKER].encode("ascii"))
        except (InvalidToken, UnicodeEncodeError, TypeError):
            return value
        return json.loads(plain)

    def rotate(self, value: Any) -> Any:
        """A sealed value sealed again with the first key (unchanged when no key opens
        it, or not sealed)."""
        if not sealed(value):
            return value
        from cryptography.fernet import InvalidToken

        try:
            token = self._fernet.rotate(value[MARKER].encode("ascii"))
        except (InvalidToken, UnicodeEncodeError, TypeError):
            return value
        return {MARKER: token.decode("ascii")}


keyring: Keyring | None = None
"""The keys this process holds (``use``), or None."""


def sealed(value: Any) -> bool:
    """Whether ``value`` is a sealed value."""
    return type(value) is dict and len(value) == 1 and MARKER in value


def use(keys: Sequence[str | bytes] | Keyring | None) -> Keyring | None:
    """Hold these keys from now on in this process (None: hold none)."""
    global keyring
    keyring = keys if isinstance(keys, Keyring) or keys is None else Keyring(keys)
    return keyring


def keys_from_env() -> list[str]:
    """The keys of ``$CONVEYOR_ENCRYPTION_KEYS`` (comma-separated), first the one that
    seals."""
    return [k.strip() for k in os.environ.get(ENV_KEYS, "").split(",") if k.strip()]


def required() -> Keyring:
    """The keys this process holds, else those of ``$CONVEYOR_ENCRYPTION_KEYS`` (then
    held from now on); ``ConfigurationError`` when there are none."""
    if keyring is not None:
        return keyring
    found = keys_from_env()
    if not found:
        raise ConfigurationError(
            f"encryption needs keys: set {ENV_KEYS} (comma-separated Fernet keys) or pass "
            "encryption_keys=[...] to the App"
        )
    held = use(found)
    assert held is not None
    return held


def reveal(value: Any) -> Any:
    """``value`` opened when it is sealed and this process holds a key that opens it."""
    if keyring is None or not sealed(value):
        return value
    return keyring.open(value)


def with_redaction(payload: Any, fields: Sequence[str]) -> Any:
    """The payload to store for a task with ``redact=fields``: the names listed under
    ``REDACT``, for readers to hide those members of the payload and of the result."""
    if not fields or type(payload) is not dict:
        return payload
    return {**payload, REDACT: list(fields)}


def without_redaction(payload: Any) -> Any:
    """The payload as the task takes it (the ``REDACT`` list left out)."""
    if type(payload) is dict and REDACT in payload:
        return {k: v for k, v in payload.items() if k != REDACT}
    return payload


def redacted(job: J) -> J:
    """``job`` as a reader sees it: the payload fields listed under ``REDACT``, and the
    result's top-level members of the same names, replaced by ``REDACTED``."""
    payload = job.payload
    if type(payload) is not dict or REDACT not in payload:
        return job
    names = {n for n in payload[REDACT] if isinstance(n, str)}
    hidden = {k: REDACTED if k in names else v for k, v in payload.items()}
    result = job.result
    if type(result) is dict:
        result = {k: REDACTED if k in names else v for k, v in result.items()}
    return replace(job, payload=hidden, result=result)  # type: ignore[type-var]


__all__ = [
    "ENV_KEYS",
    "MARKER",
    "REDACT",
    "REDACTED",
    "Keyring",
    "keyring",
    "keys_from_env",
    "redacted",
    "required",
    "reveal",
    "sealed",
    "use",
    "with_redaction",
    "without_redaction",
]
