"""``GET /api/whoami``: the role a request's token grants, so a client (the console)
shows only what that role may do."""

from __future__ import annotations

from typing import Annotated, Any

from conveyor.web.auth import Role, require
from conveyor.web.router import Router, route
from conveyor.web.state import State

router = Router(tags=["operations"])


@route(router, "whoami")
def whoami(state: State, role: Annotated[Role, require(Role.READER)]) -> dict[str, Any]:
    return {"role": role, "auth": state.tokens.enabled}
