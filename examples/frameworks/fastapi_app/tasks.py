"""The application's tasks, run by ``conveyor worker``."""

from __future__ import annotations

import conveyor

tasks = conveyor.App()


@tasks.task(name="signups.welcome")
def welcome(ctx: conveyor.Context, email: str) -> dict[str, str]:
    # A real application would call its mail service here.
    return {"sent_to": email}
