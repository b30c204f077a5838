"""``python -m examples.fetch_queue [serve]``.

serve   the bot's fetch API, with its workers in the same process
(none)  the scripted demo: three users ask for one story at once, a broken link, a flaky
        one, a user who cannot be messaged the first time, and a later cached answer
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from examples._common import report
from examples._web import add_demo_command, add_serve_options, background_server, serve
from examples.fetch_queue.app import FetchBot, Settings, create_api


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.fetch_queue", description=__doc__)
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    commands = parser.add_subparsers(dest="command")
    serving = commands.add_parser("serve", help="serve the API and run its workers")
    add_serve_options(serving, "fetch_queue")
    defaults = Settings()
    for flag, default, helps in (
        ("--cache-ttl", defaults.cache_ttl, "seconds a fetched result is reused (default 6 h)"),
        ("--retry-delay", defaults.retry_delay, "seconds before a failed fetch is tried again"),
        ("--slow-seconds", defaults.slow_seconds, "how long the stand-in site takes for /slow"),
        ("--redelivery-delay", defaults.redelivery_delay, "seconds before a message is resent"),
        ("--lease-seconds", defaults.lease, "a crashed fetch is recovered after this long"),
    ):
        serving.add_argument(flag, type=float, default=default, help=helps)
    add_demo_command(parser, commands)
    args = parser.parse_args(argv)
    if args.command == "serve":
        for name in ("cache_ttl", "retry_delay", "slow_seconds", "redelivery_delay"):
            if getattr(args, name) < 0:
                print(f"error: --{name.replace('_', '-')}: expected 0 or more", file=sys.stderr)
                return 2
        if not 1 <= args.lease_seconds <= 3600:
            print("error: --lease-seconds: expected 1 to 3600", file=sys.stderr)
            return 2
        settings = Settings(
            cache_ttl=args.cache_ttl,
            retry_delay=args.retry_delay,
            slow_seconds=args.slow_seconds,
            redelivery_delay=args.redelivery_delay,
            lease=args.lease_seconds,
        )
        bot = FetchBot(args.db, settings)
        try:
            return serve(create_api(bot, workers=args.workers), args)
        finally:
            bot.close()
    return run_demo(args)


def run_demo(args: argparse.Namespace) -> int:
    url = args.db or f"sqlite:///{Path(tempfile.mkdtemp()) / 'fetch_queue.db'}"
    settings = Settings(retry_delay=0.2, slow_seconds=0.5, redelivery_delay=0.2)
    bot = FetchBot(url, settings)
    with background_server(create_api(bot, workers=2)) as url:
        http = httpx.Client(base_url=url, timeout=30)

        def ask(url: str, user: str, **extra: Any) -> str:
            answer = http.post("/fetch", json={"fic_url": url, "requested_by": user, **extra})
            reply = answer.json()
            if "error" in reply and "status" not in reply:  # refused: {"error": {code, message}}
                return f"HTTP {answer.status_code}: {reply['error']['message']}"
            return f"{reply['status']}: {reply.get('error_message') or reply['message']}"

        story = "https://fics.example/works/1/slow"
        shouted = "HTTP://FICS.example/works/1/slow/"  # the same story
        broken = "https://fics.example/works/2/missing"
        replies = {
            "ada asks for a slow story": ask(story, "ada"),
            "grace asks for it with tracking": ask(story + "?utm_source=chat", "grace"),
            "flaky-linus asks for it over http": ask(shouted, "flaky-linus"),
            "ada asks for a broken link": ask(broken, "ada"),
            "grace asks for a flaky one": ask("https://fics.example/works/3/flaky", "grace"),
            "edsger asks for nonsense": ask("ftp://nowhere", "edsger"),
        }

        def all_told() -> bool:
            inbox = http.get("/users/flaky-linus/messages").json()["messages"]
            return (
                len(inbox) == 1 and len(http.get("/users/grace/messages").json()["messages"]) == 2
            )

        deadline = time.monotonic() + 30
        while not all_told() and time.monotonic() < deadline:
            time.sleep(0.1)
        replies["edsger asks for the story later"] = ask(story, "edsger")
        replies["ada asks for the broken link again"] = ask(broken, "ada")
        replies["ada asks to retry it"] = ask(broken, "ada", retry=True)
        inboxes = {
            user: [m["text"] for m in http.get(f"/users/{user}/messages").json()["messages"]]
            for user in ("ada", "grace", "flaky-linus", "edsger")
        }
    report({"replies": replies, "messages": inboxes, "stats": bot.q.stats("fetches")}, args.json)
    bot.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
