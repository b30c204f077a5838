"""``/docs``: Swagger UI over the server's own OpenAPI document, from files shipped in
the package (``static/docs``), so it works offline and under the content security
policy: the page has no inline script or style, and its one script of ours,
``init.js``, is a file."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from starlette.staticfiles import StaticFiles

ASSETS = Path(__file__).parent / "static" / "docs"

# Relative URLs: the page works wherever the app is mounted.
PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>conveyor API</title>
<link rel="stylesheet" href="docs/assets/swagger-ui/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="docs/assets/swagger-ui/swagger-ui-bundle.js"></script>
<script src="docs/assets/init.js"></script>
</body>
</html>
"""


def install(app: FastAPI) -> None:
    """Serve the page at ``/docs`` and its files under ``/docs/assets``."""
    app.mount("/docs/assets", StaticFiles(directory=ASSETS), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return HTMLResponse(PAGE)
