"""``conveyor serve``: the HTTP API, the dashboard and /metrics in one process."""

from __future__ import annotations

from typing import Annotated

import typer

from conveyor.cli.base import PANEL_RUN, DbOption, app, usage
from conveyor.config import database_url
from conveyor.errors import ConfigurationError

LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")
HOST_HELP = "Address to listen on. Anything but loopback needs tokens ($CONVEYOR_TOKENS)."
SERVER_EXTRA = "pip install 'conveyor[server]'"


@app.command(rich_help_panel=PANEL_RUN)
def serve(
    db: DbOption = None,
    host: Annotated[str, typer.Option(help=HOST_HELP)] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on.")] = 8000,
    log_level: Annotated[
        str, typer.Option(help="uvicorn log level: critical, error, warning, info, debug.")
    ] = "info",
    max_connections: Annotated[
        int,
        typer.Option(min=1, help="Connections and requests at once; past it, 503.", metavar="N"),
    ] = 1000,
    max_waits: Annotated[
        int,
        typer.Option(min=1, help="Long polls (/wait) at once; past it, 503.", metavar="N"),
    ] = 100,
    header_timeout: Annotated[
        float,
        typer.Option(min=0.1, help="Seconds a request's head may take to arrive.", metavar="S"),
    ] = 5.0,
    body_timeout: Annotated[
        float,
        typer.Option(min=0.1, help="Seconds a request's body may take to arrive.", metavar="S"),
    ] = 15.0,
    trusted_proxies: Annotated[
        str | None,
        typer.Option(
            help="Addresses or networks (comma-separated) of reverse proxies whose "
            "X-Forwarded-For names the client. Default: none; the client is the peer.",
            metavar="ADDRS",
        ),
    ] = None,
    rescue_interval: Annotated[
        float,
        typer.Option(
            min=0.1, help="Seconds between passes putting expired leases back.", metavar="S"
        ),
    ] = 10.0,
    idempotency_keep: Annotated[
        float,
        typer.Option(
            min=1.0,
            max=30 * 86400.0,
            help="Seconds the answer to a request with an Idempotency-Key is kept for "
            "replays (at most 30 days).",
            metavar="S",
        ),
    ] = 86400.0,
) -> None:
    """Serve the HTTP API (OpenAPI at /docs), the dashboard at / and /metrics.

    Bearer tokens come from $CONVEYOR_TOKENS
    ("admin:adm-secret-1,worker:wrk-secret-1,reader:rdr-secret-1"), or from the file
    named by $CONVEYOR_TOKENS_FILE (one role:token a line); each token is at least 8
    characters long. The server also puts back to pending the jobs whose
    lease expired (every --rescue-interval seconds), as workers do, and deletes the
    answers kept for Idempotency-Key requests once --idempotency-keep is over."""
    if log_level.lower() not in LOG_LEVELS:
        raise usage(f"--log-level: expected one of {', '.join(LOG_LEVELS)}, got {log_level!r}")
    try:  # the server's dependencies are an extra, and slow to import
        import uvicorn

        from conveyor.maintenance import PRUNE_KEYS_EVERY
        from conveyor.web.app import check_bind_address, create_app
        from conveyor.web.auth import tokens_from_env
        from conveyor.web.limits import Limits
        from conveyor.web.server import ServerLimits, config, url_host
    except ImportError as exc:
        missing = exc.name or "a dependency"
        raise ConfigurationError(
            f"conveyor serve needs the server extra ({missing} is not installed): {SERVER_EXTRA}"
        ) from None

    tokens = tokens_from_env()
    check_bind_address(host, tokens)
    _check_port_free(host, port)
    limits = Limits(
        max_waits=max_waits,
        body_timeout_seconds=body_timeout,
        idempotency_keep_seconds=idempotency_keep,
    )
    web_app = create_app(
        database_url(command_line=db),
        tokens=tokens,
        limits=limits,
        rescue_interval=rescue_interval,
        prune_interval=PRUNE_KEYS_EVERY,
        use_env=False,
    )
    queue = web_app.state.conveyor.queue
    auth = f"{len(tokens)} token(s)" if tokens else "no tokens: loopback only"
    bounds = ServerLimits(
        header_timeout=header_timeout,
        max_connections=max_connections,
        trusted_proxies=trusted_proxies,
    )
    where = f"http://{url_host(host)}:{port}"
    typer.echo(f"conveyor: serving {queue.url} on {where} ({auth})", err=True)
    server = uvicorn.Server(
        config(web_app, host=host, port=port, log_level=log_level.lower(), limits=bounds)
    )
    try:
        server.run()
    except SystemExit as exc:  # uvicorn exits 3 when it cannot start: exit as documented
        if exc.code in (None, 0):
            raise
        raise ConfigurationError(
            f"the server on http://{host}:{port} did not start (see the lines above)"
        ) from None


def _check_port_free(host: str, port: int) -> None:
    """A port already in use is one line and exit 1, like a database that cannot be
    opened, before the database is opened or the server's own error log is written."""
    import socket

    if port == 0:
        return
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host  # [::1]
    try:
        infos = socket.getaddrinfo(bare, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise ConfigurationError(f"--host {host}: cannot resolve it ({exc})") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server does
        try:
            probe.bind(address)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise ConfigurationError(
                f"cannot listen on {host}:{port}: {reason.lower()} (choose another --port)"
            ) from None
