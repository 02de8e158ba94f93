"""Server middleware: a request for a tool, prompt or resource the server does not have is refused
as invalid params (-32602), naming what was asked for and the method that lists what there is.

The MCP specification makes an unknown tool a protocol error (-32602), not a tool result; the SDK
answers it with a result marked ``is_error``. An unknown prompt reaches the SDK's dispatcher as a
``ValueError``: the client hears error code 0 (or "Internal server error") and the server logs two
tracebacks at ERROR for the caller's typo. An unknown resource already gets -32602 from the SDK,
in words ("Unknown resource: ...") that do not say where the valid ones are listed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mcp.server.context import ServerMiddleware, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from pydantic import BaseModel

Handler = Callable[[ServerRequestContext[Any, Any]], Awaitable[BaseModel | dict[str, Any] | None]]

# The SDK's own words for a URI no resource or template matches (resource_manager.py).
_SDK_UNKNOWN_RESOURCE = "Unknown resource: "


def unknown_name_guard(mcp: MCPServer[Any]) -> ServerMiddleware[Any]:
    """Refuses `tools/call` and `prompts/get` for names the server does not have, and rewords the
    SDK's refusal of an unknown resource URI; every refusal is -32602 and names the list method."""
    names: dict[str, frozenset[str]] = {}

    async def known(kind: str) -> frozenset[str]:
        # Every tool and prompt is registered before the first request (server.open_runtime).
        if kind not in names:
            listed = await (mcp.list_tools() if kind == "tool" else mcp.list_prompts())
            names[kind] = frozenset(item.name for item in listed)
        return names[kind]

    async def guard(ctx: ServerRequestContext[Any, Any], call_next: Handler) -> BaseModel | dict[str, Any] | None:
        params = ctx.params if isinstance(ctx.params, Mapping) else {}
        kind = {"tools/call": "tool", "prompts/get": "prompt"}.get(ctx.method)
        if kind is not None and isinstance(name := params.get("name"), str) and name not in await known(kind):
            raise MCPError(INVALID_PARAMS, f"no {kind} named {name!r}; {kind}s/list shows the {kind}s")
        if ctx.method != "resources/read":
            return await call_next(ctx)
        try:
            return await call_next(ctx)
        except MCPError as exc:
            if exc.error.code != INVALID_PARAMS or not exc.error.message.startswith(_SDK_UNKNOWN_RESOURCE):
                raise
            uri = str(params.get("uri"))
            problem = f"no resource at {uri!r}; resources/list and resources/templates/list show the resources"
            raise MCPError(INVALID_PARAMS, problem, exc.error.data) from None

    return guard
