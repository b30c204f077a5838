"""One URL per story: the key a fetch is queued under.

Variants of a story's URL that people paste (``HTTP://Fics.Example/works/1/``,
``…/works/1?utm_source=chat#chapter-2``) normalise to the same string, so they share one
job. Anything that is not a public http(s) URL is refused before anything is queued.
Every step is linear in the URL's length, which is capped."""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MAX_URL = 2048
# Parameters that say where a link was shared, not what it points at.
TRACKING = frozenset(
    {"fbclid", "gclid", "dclid", "msclkid", "mc_cid", "mc_eid", "igshid", "ref", "ref_src",
     "si"}
)  # fmt: skip
_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
_CONTROL = re.compile(r"[\x00-\x20\x7f]")


class InvalidUrl(ValueError):
    pass


def normalise(raw: str) -> str:
    """The canonical form of a story URL, or ``InvalidUrl`` saying what is wrong."""
    if len(raw) > MAX_URL:
        raise InvalidUrl(f"fic_url: expected at most {MAX_URL} characters, got {len(raw)}")
    text = raw.strip()
    if _CONTROL.search(text):
        raise InvalidUrl("fic_url: spaces and control characters are not allowed")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise InvalidUrl(f"fic_url: {exc}") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise InvalidUrl(f"fic_url: expected an http or https URL, got {text[:80]!r}")
    if parts.username is not None or parts.password is not None:
        raise InvalidUrl("fic_url: credentials in a URL are not allowed")
    host = _host(parts.hostname or "")
    # The scheme: a story is the same story over http and https.
    netloc = host if port in (None, 80, 443) else f"{host}:{port}"
    path = parts.path.rstrip("/")
    query = urlencode(
        sorted(
            (k, v)
            for k, v in parse_qsl(parts.query, keep_blank_values=True)
            if k.lower() not in TRACKING and not k.lower().startswith("utm_")
        )
    )
    return urlunsplit(("https", netloc, path, query, ""))


def _host(hostname: str) -> str:
    if not hostname:
        raise InvalidUrl("fic_url: expected a host name")
    try:
        ipaddress.ip_address(hostname.strip("[]"))
    except ValueError:
        pass
    else:
        raise InvalidUrl("fic_url: expected a site's host name, not an IP address")
    try:
        host = hostname.encode("idna").decode("ascii").lower().rstrip(".")
    except UnicodeError:
        raise InvalidUrl(f"fic_url: {hostname[:80]!r} is not a valid host name") from None
    labels = host.split(".")
    if len(labels) < 2 or len(host) > 253 or not all(_LABEL.fullmatch(lb) for lb in labels):
        raise InvalidUrl(f"fic_url: {hostname[:80]!r} is not a public host name")
    return host
