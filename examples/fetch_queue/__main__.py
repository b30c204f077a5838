"""Three users ask for the same story at once; later askers get the cached result."""

from __future__ import annotations

import sys

from examples._common import parser, report, work_until_idle
from examples.fetch_queue import app as bot

GOOD = "https://fics.example/works/1"
BROKEN = "https://fics.example/works/404"


def main(argv: list[str] | None = None) -> int:
    args = parser(
        "fetch_queue", "A chat bot's fetch queue with dedupe and subscribers."
    ).parse_args(argv)
    bot.app.bind(args.db)
    replies = {}
    for user in ("ada", "grace", "linus"):
        replies[f"{user} asks for story 1"] = bot.request(GOOD, user)
    replies["ada asks for a broken link"] = bot.request(BROKEN, "ada")
    work_until_idle(bot.app, bot.QUEUE)
    replies["edsger asks for story 1 later"] = bot.request(GOOD, "edsger")
    replies["ada asks for the broken link again"] = bot.request(BROKEN, "ada")
    replies["ada asks to retry it"] = bot.request(BROKEN, "ada", retry_failed=True)
    work_until_idle(bot.app, bot.QUEUE)
    report(
        {
            "replies": replies,
            "site_fetches": dict(bot.fetches),
            "messages_sent": sorted(bot.inbox),
            "stats": bot.app.queue.stats(bot.QUEUE).to_dict(),
        },
        args.json,
    )
    bot.app.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
