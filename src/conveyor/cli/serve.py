"""``conveyor serve``: the HTTP API, the dashboard and /metrics in one process."""

from __future__ import annotations

from typing import Annotated

import typer

from conveyor.cli.base import PANEL_RUN, DbOption, app, usage

LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")
HOST_HELP = "Address to listen on. Anything but loopback needs tokens ($CONVEYOR_TOKENS)."


@app.command(rich_help_panel=PANEL_RUN)
def serve(
    db: DbOption = None,
    host: Annotated[str, typer.Option(help=HOST_HELP)] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on.")] = 8000,
    log_level: Annotated[
        str, typer.Option(help="uvicorn log level: critical, error, warning, info, debug.")
    ] = "info",
) -> None:
    """Serve the HTTP API (OpenAPI at /docs), the dashboard at / and /metrics.

    Bearer tokens come from $CONVEYOR_TOKENS ("admin:secret1,worker:secret2,reader:…")
    or the file named by $CONVEYOR_TOKENS_FILE (one role:token a line)."""
    if log_level.lower() not in LOG_LEVELS:
        raise usage(f"--log-level: expected one of {', '.join(LOG_LEVELS)}, got {log_level!r}")
    # Imported here: the server's dependencies are an extra, and slow to import.
    import uvicorn

    from conveyor.web.app import check_bind_address, create_app
    from conveyor.web.auth import tokens_from_env

    tokens = tokens_from_env()
    check_bind_address(host, tokens)
    web_app = create_app(db, tokens=tokens)
    queue = web_app.state.conveyor.queue
    auth = f"{len(tokens)} token(s)" if tokens else "no tokens: loopback only"
    typer.echo(f"conveyor: serving {queue.url} on http://{host}:{port} ({auth})", err=True)
    uvicorn.run(web_app, host=host, port=port, log_level=log_level.lower())
