"""``GET /api/whoami``: the role a request's token grants, so a client (the console)
shows only what that role may do."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field

from conveyor.web.auth import Role, require
from conveyor.web.router import Router
from conveyor.web.routes.common import errors
from conveyor.web.state import State

router = Router(tags=["operations"])


class WhoamiOut(BaseModel):
    role: Role
    auth: bool = Field(description="whether the server asks for tokens (false: everyone is admin)")


@router.get(
    "/api/whoami",
    response_model=WhoamiOut,
    responses=errors(),
    summary="The role the request's token grants",
)
def whoami(state: State, role: Annotated[Role, require(Role.READER)]) -> dict[str, Any]:
    return {"role": role, "auth": state.tokens.enabled}
