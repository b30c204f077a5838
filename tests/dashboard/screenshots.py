"""The console's screenshots in docs/img: a seeded database (``tests.dashboard.seed``),
a real server, Debian's headless Chromium; light and dark, 1280x800 and 390x844.

    python -m tests.dashboard.screenshots [--out docs/img]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

import conveyor
from conveyor.web import create_app
from tests.dashboard.browser import ARGS, CHROMIUM, live_server
from tests.dashboard.seed import seed

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


def shots(book: int, workflow: int) -> list[tuple[str, str, dict[str, int], str, str]]:
    """(file name, page, viewport, colour scheme, what shows the page is ready; a file
    name ending in ``-panel.png`` is that element alone)."""
    overview = 'tr[data-queue="mail"]'
    return [
        ("dashboard-overview.png", "", DESKTOP, "light", overview),
        ("dashboard-overview-dark.png", "", DESKTOP, "dark", overview),
        ("dashboard-overview-phone.png", "", PHONE, "light", overview),
        ("dashboard-overview-phone-dark.png", "", PHONE, "dark", overview),
        ("dashboard-jobs.png", "jobs?queue=mail", DESKTOP, "light", "table.jobs tbody tr"),
        ("dashboard-jobs-dark.png", "jobs?queue=mail", DESKTOP, "dark", "table.jobs tbody tr"),
        ("dashboard-jobs-phone.png", "jobs?status=failed", PHONE, "light", "table.jobs tbody tr"),
        ("dashboard-job.png", f"jobs/{book}", DESKTOP, "light", ".progress-text"),
        ("dashboard-job-dark.png", f"jobs/{book}", DESKTOP, "dark", ".progress-text"),
        ("dashboard-workflows.png", "workflows", DESKTOP, "light", "table.workflows tbody tr"),
        ("dashboard-workflow.png", f"workflows/{workflow}", DESKTOP, "light", "svg.dag .node"),
        (
            "dashboard-workflow-dark.png",
            f"workflows/{workflow}",
            DESKTOP,
            "dark",
            "svg.dag .node",
        ),
        ("dashboard-workers.png", "workers", DESKTOP, "light", "table.running-now tbody th"),
        ("dashboard-scheduled.png", "scheduled", DESKTOP, "light", "table.deferred tbody tr"),
        (
            "dashboard-week-panel.png",
            "?range=week",
            DESKTOP,
            "light",
            "section[aria-labelledby=throughput-title]",
        ),
        ("dashboard-tasks-panel.png", "", DESKTOP, "light", "section[aria-labelledby=tasks-title]"),
        (
            "dashboard-payload.png",
            "jobs?payload=team%3Dops",
            DESKTOP,
            "light",
            "table.jobs tbody tr",
        ),
    ]


def take(out: Path) -> list[Path]:
    from playwright.sync_api import sync_playwright

    written = []
    with tempfile.TemporaryDirectory() as tmp:
        q = conveyor.connect(f"sqlite:///{tmp}/console.db")
        ids = seed(q)
        with live_server(create_app(q, tokens={})) as url, sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            for name, path, viewport, scheme, ready in shots(ids["book"], ids["workflow"]):
                context = browser.new_context(viewport=viewport, color_scheme=scheme)
                page: Any = context.new_page()
                page.goto(f"{url}/{path}")
                page.locator(ready).first.wait_for()
                page.wait_for_timeout(300)  # the chart and ages settle
                target = out / name
                if name.endswith("-panel.png"):
                    page.locator(ready).first.screenshot(path=str(target))
                else:
                    page.screenshot(path=str(target))
                written.append(target)
                context.close()
            browser.close()
        q.close()
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(Path(__file__).resolve().parents[2] / "docs" / "img"))
    out = Path(parser.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)
    for path in take(out):
        print(path)


if __name__ == "__main__":
    main()
