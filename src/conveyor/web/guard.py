"""The gate every request passes before a route sees it, and the headers every answer
leaves with.

``Guard`` checks, from the request's head alone (no body has been read yet):

0. The head frames the body one way: ``Content-Length`` or ``Transfer-Encoding``, not
   both (400: two readers of the stream could disagree on where the body ends).
1. On a server without tokens, the ``Host`` names loopback (``127.0.0.1``,
   ``localhost``, ``[::1]``, any port): a page whose DNS name was rebound to
   127.0.0.1 cannot talk to it.
2. A request that changes something (any method but GET and HEAD) comes from no other
   site: an ``Origin`` other than the server's own, or ``Sec-Fetch-Site`` saying
   ``cross-site`` or ``same-site``, is refused; and it carries
   ``Content-Type: application/json`` or an ``Authorization`` header, neither of which
   a plain HTML form (or a ``no-cors`` fetch) can send.
3. The bearer token, when the route needs one: unknown tokens get 401 and count
   against the caller's address (``TokenBackoff``); a role short of the route's gets
   403. The role found is left in the scope for the route. A right token does not
   clear the address's record.
4. A request for a route that needs no token, or for no route: a path that is only
   a trailing slash off a route is redirected (307, to a relative ``Location``); a
   body announced for such a path is refused (413 for a route, 404 for none), since
   nothing would read it.

A refusal lets the connection drop a body up to ``DISCARDED_BODY_BYTES`` (never
buffered or parsed), so the client gets the answer; a larger one closes the connection.

``SecurityHeaders`` adds the content security policy and its companions to every
response, errors included."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from conveyor.web.auth import MISSING_TOKEN, ROLE_KEY, WRONG_TOKEN, Role, Tokens, forbidden
from conveyor.web.backoff import TokenBackoff
from conveyor.web.envelope import shown_path
from conveyor.web.limits import header, is_json, refuse
from conveyor.web.router import RouteRole, needed_role

SAFE_METHODS = frozenset({"GET", "HEAD"})
# A refused request's body up to this size (half the default largest body a route takes) is
# read by the connection and dropped (never buffered or parsed), so the client gets the
# answer rather than a reset; past it the connection closes.
DISCARDED_BODY_BYTES = 512 * 1024
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
_SECURITY_HEADERS = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
]
_REPLACED = {name for name, _ in _SECURITY_HEADERS}
# The same, for an answer given before the app (``refuse(headers=...)``).
SECURITY_HEADERS = {name.decode(): value.decode() for name, value in _SECURITY_HEADERS}
_CROSS_SITE = frozenset({"cross-site", "same-site"})


class SecurityHeaders:
    """Adds the security headers to every HTTP response; answers from ``/api`` and
    ``/metrics`` are also never cached (they hold jobs and counts)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        private = path.startswith(("/api/", "/metrics"))

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", ()) if k not in _REPLACED]
                kept += _SECURITY_HEADERS
                if private:
                    kept = [(k, v) for k, v in kept if k != b"cache-control"]
                    kept.append((b"cache-control", b"no-store"))
                message = {**message, "headers": kept}
            await send(message)

        await self.app(scope, receive, send_with_headers)


class HeadAsGet:
    """A HEAD request runs as a GET, and its answer goes out without the body (the
    headers, ``Content-Length`` included, are those of the GET)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "HEAD":
            await self.app(scope, receive, send)
            return

        async def send_head(message: Message) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, send_head)


class Guard:
    """See the module's documentation. ``tokens``: reads the server's tokens (the same
    ones the routes check, so replacing them takes effect here too). ``roles``: the role
    each route of the API needs (``Router.roles``), known before the route runs."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        tokens: Callable[[], Tokens],
        roles: Sequence[RouteRole],
        backoff: TokenBackoff,
        routes: Callable[[], Sequence[BaseRoute]] | None = None,
    ) -> None:
        self.app = app
        self._tokens = tokens
        self.roles = roles
        self.backoff = backoff
        self._routes = routes

    @property
    def tokens(self) -> Tokens:
        return self._tokens()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if (
            header(scope, b"transfer-encoding") is not None
            and header(scope, b"content-length") is not None
        ):
            message = "a request may carry Content-Length or Transfer-Encoding, not both"
            await refuse(send, 400, "bad_request", message, drained=False)
            return
        body = announces_body(scope)
        # A refusal lets the connection read a small body to its end and throw it away
        # (the client, still sending, would otherwise see the connection reset instead of
        # the answer); past that, it answers at once and closes the connection.
        keep = not body or _declared_length(scope) <= DISCARDED_BODY_BYTES
        if not self.tokens.enabled:
            host = header(scope, b"host")
            if not loopback_host(host):
                shown = "none" if host is None else repr(host[:100])
                message = (
                    "Host: a server without tokens answers only to 127.0.0.1, localhost or "
                    f"[::1], got {shown}"
                )
                await refuse(send, 403, "forbidden_host", message, drained=keep)
                return
        method = str(scope["method"]).upper()
        changing = method not in SAFE_METHODS
        if changing:
            refusal = _cross_site(scope)
            if refusal is not None:
                await refuse(send, 403, "cross_site", refusal, drained=keep)
                return
        needed = needed_role(self.roles, method, _route_path(scope))
        if needed is None and not await self._public(scope, send, method, body, keep):
            return
        if not self.tokens.enabled:
            scope[ROLE_KEY] = Role.ADMIN
        elif needed is not None and not await self._authorized(scope, send, needed, keep):
            return
        if changing and not is_json(scope) and header(scope, b"authorization") is None:
            message = (
                f"{method} needs Content-Type: application/json (even without a body) "
                "or an Authorization header"
            )
            await refuse(send, 415, "unsupported_media_type", message, drained=keep)
            return
        await self.app(scope, receive, send)

    async def _public(self, scope: Scope, send: Send, method: str, body: bool, keep: bool) -> bool:
        """A request for a route that needs no token (or for no route at all): redirected
        when only a trailing slash is wrong (to a relative URL, whatever ``Host`` says),
        refused at once when it announces a body, which no such route reads."""
        if self._routes is None:
            return True
        path = _route_path(scope)
        if _matches(self._routes(), scope, path) is Match.NONE:
            other = path[:-1] if path.endswith("/") else path + "/"
            if other and _matches(self._routes(), scope, other) is not Match.NONE:
                root = str(scope.get("root_path", "")).rstrip("/")
                location = "/" + (root + other).lstrip("/")  # never "//host": not a path
                query = scope.get("query_string", b"")
                if query:
                    location += "?" + query.decode("latin-1")
                await refuse(send, 307, "redirect", f"see {location}", drained=keep,
                             headers={"Location": location})  # fmt: skip
                return False
            if body:
                message = f"no route matches {method} {shown_path(path)}"
                await refuse(send, 404, "not_found", message, drained=keep)
                return False
            return True
        if body:
            message = f"{method} {shown_path(path)} takes no request body"
            await refuse(send, 413, "payload_too_large", message, drained=keep)
            return False
        return True

    async def _authorized(self, scope: Scope, send: Send, needed: Role, keep: bool) -> bool:
        client = _client(scope)
        wait = self.backoff.locked_for(client)
        if wait > 0:
            seconds = max(1, round(wait + 0.5))
            message = f"too many wrong tokens from this address; try again in {seconds} s"
            await refuse(send, 429, "too_many_failures", message, drained=keep,
                         headers={"Retry-After": str(seconds)})  # fmt: skip
            return False
        token = bearer_token(scope)
        if token is None:
            await refuse(send, 401, "unauthorized", MISSING_TOKEN, drained=keep,
                         headers=_CHALLENGE)  # fmt: skip
            return False
        role = self.tokens.role_for(token)
        if role is None:
            self.backoff.failed(client)
            await refuse(send, 401, "unauthorized", WRONG_TOKEN, drained=keep,
                         headers=_CHALLENGE)  # fmt: skip
            return False
        # A right token does not clear the address's record: a caller holding one token
        # could otherwise guess at others without end, sending it between guesses.
        if not role.allows(needed):
            await refuse(send, 403, "forbidden", forbidden(needed, role), drained=keep)
            return False
        scope[ROLE_KEY] = role
        return True


_CHALLENGE = {"WWW-Authenticate": "Bearer"}


def _route_path(scope: Scope) -> str:
    """The path as the app's routes see it (without the prefix it is mounted under)."""
    path = str(scope.get("path", ""))
    root = str(scope.get("root_path", ""))
    return path[len(root) :] if root and path.startswith(root) else path


def bearer_token(scope: Scope) -> str | None:
    value = header(scope, b"authorization")
    if value is None:
        return None
    scheme, _, token = value.partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def announces_body(scope: Scope) -> bool:
    """Whether the request's head says a body follows."""
    if header(scope, b"transfer-encoding") is not None:
        return True
    length = header(scope, b"content-length")
    return length is not None and length != "0"


def _declared_length(scope: Scope) -> int:
    """The body's declared length; a chunked body (of no declared length) counts as
    longer than any bound."""
    if header(scope, b"transfer-encoding") is not None:
        return 1 << 62
    text = header(scope, b"content-length") or "0"
    return int(text) if text.isdigit() and len(text) < 19 else 1 << 62


def _matches(routes: Sequence[BaseRoute], scope: Scope, path: str) -> Match:
    """How well the app's routes match ``path`` (any method: PARTIAL)."""
    probe = {**scope, "path": path, "root_path": ""}
    best = Match.NONE
    for route in routes:
        match, _ = route.matches(probe)
        if match is Match.FULL:
            return match
        if match is Match.PARTIAL:
            best = match
    return best


def _client(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "?"


def loopback_host(host: str | None) -> bool:
    """Whether a ``Host`` header names a loopback address (any port)."""
    if not host:
        return False
    name = host.strip().lower()
    if name.startswith("["):
        name = name[1 : name.find("]")] if "]" in name else ""
    elif name.count(":") == 1:
        name = name.partition(":")[0]
    if name in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _cross_site(scope: Scope) -> str | None:
    """Why a changing request comes from another site, or None."""
    fetch_site = (header(scope, b"sec-fetch-site") or "").lower()
    if fetch_site in _CROSS_SITE:
        return f"a {fetch_site} request may not change anything (Sec-Fetch-Site)"
    origin = header(scope, b"origin")
    if origin is None:
        return None
    host = (header(scope, b"host") or "").lower()
    refusal = "a request from another origin may not change anything (Origin)"
    try:
        parts = urlsplit(origin.lower())
    except ValueError:
        return refusal
    if parts.scheme not in ("http", "https") or parts.netloc != host:
        return refusal  # "null" too: a sandboxed page, a file, a redirect across sites
    return None
