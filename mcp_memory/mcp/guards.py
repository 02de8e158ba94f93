"""Server middlewares of the MCP face: requests for names or arguments the server does not have are
refused in words that say what to change, and a request holds its principal's file while it runs.

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
from mcp_types import INVALID_PARAMS, CallToolResult, TextContent
from pydantic import BaseModel, ValidationError

from mcp_memory import descriptors
from mcp_memory.core.errors import MemoryServerError, OutOfFilesError
from mcp_memory.logs import scrub
from mcp_memory.mcp import client_log
from mcp_memory.mcp.face import problems
from mcp_memory.scope import ScopeResolver
from mcp_memory.services.ports import StoreControl

Handler = Callable[[ServerRequestContext[Any, Any]], Awaitable[BaseModel | dict[str, Any] | None]]

# The SDK's own words for a URI no resource or template matches (resource_manager.py).
_SDK_UNKNOWN_RESOURCE = "Unknown resource: "


def unknown_name_guard(mcp: MCPServer[Any]) -> ServerMiddleware[Any]:
    """Refuses `tools/call` and `prompts/get` for names the server does not have, and rewords the
    SDK's refusal of an unknown resource URI; every refusal is -32602 and names the list method."""
    names: dict[str, frozenset[str]] = {}

    async def known(kind: str) -> frozenset[str]:
        # Every tool and prompt is registered before the first request (mcp.server.build_server).
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


def _argument_problem(mcp: MCPServer[Any], name: str, arguments: dict[str, Any]) -> str | None:
    """What is wrong with a tool call's arguments, field by field in plain words, or None. The SDK
    checks them too, but its answer is pydantic's whole report, with a link to pydantic's site."""
    # The SDK keeps each tool's argument model in its tool manager, which is not public API: if a
    # later SDK moves it, the SDK's own (wordier) validation answers instead.
    manager = getattr(mcp, "_tool_manager", None)
    tool = manager.get_tool(name) if manager is not None and hasattr(manager, "get_tool") else None
    metadata = getattr(tool, "fn_metadata", None)
    if metadata is None:
        return None
    try:
        metadata.validate_arguments(arguments)
    except ValidationError as exc:
        return problems("arguments", exc)
    return None


def unknown_argument_guard(mcp: MCPServer[Any]) -> ServerMiddleware[Any]:
    """Server middleware: a tool call with an argument the tool does not take is an error, not ignored.

    A model that writes `filter` for `filters` or `limit` for `k` must hear about it, or it will
    trust results its argument never shaped.
    """
    known: dict[str, frozenset[str]] = {}

    async def guard(
        ctx: ServerRequestContext[Any, Any],
        call_next: Callable[[ServerRequestContext[Any, Any]], Awaitable[BaseModel | dict[str, Any] | None]],
    ) -> BaseModel | dict[str, Any] | None:
        params = ctx.params if isinstance(ctx.params, Mapping) else None
        if ctx.method == "tools/call" and params is not None:
            if not known:
                for tool in await mcp.list_tools():
                    known[tool.name] = frozenset(tool.input_schema.get("properties", {}))
            name, arguments = params.get("name"), params.get("arguments") or {}
            allowed = known.get(str(name))
            unknown = sorted(set(arguments) - allowed) if allowed is not None and isinstance(arguments, Mapping) else []
            problem = None
            if unknown:
                takes = ", ".join(sorted(allowed or ()))
                problem = f"unknown argument(s) {', '.join(map(repr, unknown))}; {name} takes {takes}"
            elif allowed is not None and isinstance(arguments, Mapping):
                problem = _argument_problem(mcp, str(name), dict(arguments))
            if problem is not None:
                await client_log.tell(ctx, "warning", f"{name} refused: {problem}")
                text = scrub(f"Error executing tool {name}: {problem}")
                return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
        return await call_next(ctx)

    return guard


def prompt_argument_guard(mcp: MCPServer[Any]) -> ServerMiddleware[Any]:
    """Server middleware: a prompt asked with an argument it does not declare, or without one it
    requires, is refused by name.

    Without it the SDK passes the argument on to the prompt's function, whose TypeError reaches the
    client only as "Error rendering prompt", which says nothing of what to change; a missing one
    reaches the client as error code 0 and the log as two tracebacks.
    """
    declared: dict[str, list[str]] = {}
    required: dict[str, list[str]] = {}

    async def guard(
        ctx: ServerRequestContext[Any, Any],
        call_next: Callable[[ServerRequestContext[Any, Any]], Awaitable[BaseModel | dict[str, Any] | None]],
    ) -> BaseModel | dict[str, Any] | None:
        params = ctx.params if isinstance(ctx.params, Mapping) else None
        if ctx.method == "prompts/get" and params is not None:
            if not declared:
                for prompt in await mcp.list_prompts():
                    declared[prompt.name] = [a.name for a in prompt.arguments or ()]
                    required[prompt.name] = [a.name for a in prompt.arguments or () if a.required]
            name, arguments = str(params.get("name")), params.get("arguments") or {}
            takes = declared.get(name)
            if takes is None or not isinstance(arguments, Mapping):
                return await call_next(ctx)
            accepted = ", ".join(takes)
            if unknown := sorted(set(arguments) - set(takes)):
                named = ", ".join(map(repr, unknown))
                raise MCPError(INVALID_PARAMS, f"unknown argument(s) {named}; the prompt {name} takes {accepted}")
            if missing := [a for a in required[name] if a not in arguments]:
                named = ", ".join(map(repr, missing))
                raise MCPError(INVALID_PARAMS, f"missing argument(s) {named}; the prompt {name} takes {accepted}")
        return await call_next(ctx)

    return guard


# Requests that read no principal's data. `subscriptions/listen` (2026-07-28) stays open as long as
# its client listens, for hours: leased, it would hold the principal's files all that time.
_NO_DATA = frozenset(
    {"initialize", "ping", "tools/list", "prompts/list", "resources/templates/list", "subscriptions/listen"}
)


def principal_lease(store: StoreControl, scopes: ScopeResolver) -> ServerMiddleware[Any]:
    """Server middleware: the caller's principal stays open while its request runs, and no longer:
    an idle MCP session holds no file (ADR 21). Out of descriptors, the request gets a JSON-RPC
    error that says to retry and what the operator raises, and the server goes on."""

    async def lease(ctx: ServerRequestContext[Any, Any], call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        if ctx.method in _NO_DATA or ctx.method.startswith("notifications/"):
            return await call_next(ctx)
        try:
            principal = scopes.scope(ctx).principal
        except MemoryServerError:
            return await call_next(ctx)  # no identity: the handler refuses it with the reason
        try:
            async with store.lease(principal):
                return await call_next(ctx)
        except OutOfFilesError as exc:
            raise MCPError(descriptors.BUSY_CODE, str(exc), {"retry_after": exc.retry_after}) from None

    return lease
