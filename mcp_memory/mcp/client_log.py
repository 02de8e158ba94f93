"""MCP logging: what a call refused, told to the client that made it, at the level it asked for.

A client on a handshake protocol sets its level with ``logging/setLevel`` (kept per connection;
until then ``warning``); from protocol 2026-07-28 on a client opts in per request and the SDK filters.
Only the calling session hears of its own call, so no other principal's data can reach it, and
every message goes through the log filter's `scrub` first, as the tool's error does.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any, get_args

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types import EmptyResult, LoggingLevel, SetLevelRequestParams

from mcp_memory.logs import scrub

log = logging.getLogger(__name__)

LEVELS: tuple[LoggingLevel, ...] = get_args(LoggingLevel)
DEFAULT_LEVEL: LoggingLevel = "warning"
_LEVEL = "mcp_memory_log_level"


def _state(session: Any) -> dict[str, Any] | None:
    """The state of the MCP connection behind a request's session: each request gets a session
    object of its own, the connection lives as long as the client does (the SDK has no public
    accessor for it; server.py's lease reads it the same way)."""
    state = getattr(getattr(session, "_connection", None), "state", None)
    return state if isinstance(state, dict) else None


def install(mcp: MCPServer[Any]) -> None:
    """Answer ``logging/setLevel`` (which also makes the handshake declare logging)."""

    async def set_level(ctx: Any, params: SetLevelRequestParams) -> EmptyResult:
        state = _state(ctx.session)
        if state is not None:
            state[_LEVEL] = params.level
        return EmptyResult()

    # The SDK offers no public registration for this method; as in stdio.py, the low-level server.
    mcp._lowlevel_server.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)


def level_of(session: Any) -> LoggingLevel:
    state = _state(session)
    level: LoggingLevel = state.get(_LEVEL, DEFAULT_LEVEL) if state is not None else DEFAULT_LEVEL
    return level


async def tell(ctx: object, level: LoggingLevel, message: str, logger: str = "mcp-memory") -> None:
    """Send ``message`` to the session of the call ``ctx`` if it listens at ``level``; never raises."""
    if isinstance(ctx, Context):
        request = ctx.request_context
    elif isinstance(ctx, ServerRequestContext):  # a middleware's view of the call
        request = ctx
    else:
        return
    try:
        session = request.session
        if LEVELS.index(level) < LEVELS.index(level_of(session)):
            return
        with warnings.catch_warnings():  # the capability is deprecated from 2026-07-28 on, not gone
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            sending = session.send_log_message(
                level, scrub(message), logger=logger, related_request_id=request.request_id
            )
        await sending
    except Exception as exc:  # a client that went away must not turn a refusal into a crash
        log.debug("log notification not sent: %s", type(exc).__name__)  # its text may quote the message
