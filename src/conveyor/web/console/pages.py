"""The console's pages and files: one HTML shell for every page (the modules render
the page from the URL), and ``static/`` for the modules, the styles and the icon.

Every URL in the shell starts with the ASGI ``root_path``, so the console works where
the app is mounted (``/queue`` inside another app, or behind a proxy with
``--root-path``); the modules find the API relative to their own URL."""

from __future__ import annotations

import html
from pathlib import Path
from string import Template

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

import conveyor
from conveyor.web.routes.common import JobIdPath
from conveyor.web.routes.workflows import WorkflowIdPath

# Scripts, styles, fetches and images from this server only; no inline script or
# style, no framing, no <base>, forms posting nowhere else.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    # Revalidate every time (answered by a 304 when unchanged), so an upgrade is seen.
    "Cache-Control": "no-cache",
}
HERE = Path(__file__).parent
STATIC = HERE / "static"
ASSETS = "/console"
_SHELL = Template((HERE / "shell.html").read_text(encoding="utf-8"))

router = APIRouter(tags=["console"])


class ConsoleFiles(StaticFiles):
    """The static files, with the console's security and caching headers."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(HEADERS)
        return response


def install(app: FastAPI) -> None:
    """Add the console's pages and its files to ``app``."""
    app.include_router(router)
    app.mount(ASSETS, ConsoleFiles(directory=STATIC), name="console")


def shell(request: Request) -> HTMLResponse:
    root = html.escape(str(request.scope.get("root_path", "")).rstrip("/"), quote=True)
    page = _SHELL.substitute(
        root=root, assets=root + ASSETS, version=html.escape(conveyor.__version__)
    )
    return HTMLResponse(page, headers=HEADERS)


@router.get("/", response_class=HTMLResponse, summary="The console: overview")
def overview(request: Request) -> HTMLResponse:
    """The operator's console. The page needs no token; the data it shows comes from
    the API with the token its sign-in form keeps in the browser tab."""
    return shell(request)


@router.get("/jobs", response_class=HTMLResponse, include_in_schema=False)
def jobs(request: Request) -> HTMLResponse:
    return shell(request)


@router.get("/jobs/{job_id:int}", response_class=HTMLResponse, include_in_schema=False)
def job(request: Request, job_id: JobIdPath) -> HTMLResponse:
    return shell(request)


@router.get("/workflows", response_class=HTMLResponse, include_in_schema=False)
def workflows(request: Request) -> HTMLResponse:
    return shell(request)


@router.get("/workflows/{workflow_id:int}", response_class=HTMLResponse, include_in_schema=False)
def workflow(request: Request, workflow_id: WorkflowIdPath) -> HTMLResponse:
    return shell(request)


@router.get("/scheduled", response_class=HTMLResponse, include_in_schema=False)
def scheduled(request: Request) -> HTMLResponse:
    return shell(request)


@router.get("/workers", response_class=HTMLResponse, include_in_schema=False)
def workers(request: Request) -> HTMLResponse:
    return shell(request)


@router.get("/schedules", response_class=HTMLResponse, include_in_schema=False)
def schedules(request: Request) -> HTMLResponse:
    return shell(request)


@router.get("/retention", response_class=HTMLResponse, include_in_schema=False)
def retention(request: Request) -> HTMLResponse:
    return shell(request)
