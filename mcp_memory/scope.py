"""The only code that turns a transport identity into a Scope.

On stdio the principal is the configured local principal (default: the OS user name) and the
namespace comes from config. Neither ever comes from a tool argument or from the client's
declared name, which is recorded as provenance only.

Every MCP entry point (tools, resources, resource templates, prompts) asks this module for the
Scope. A middleware records each request's context in a context variable, so handlers that the
SDK calls without a Context (static resources) resolve the caller the same way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from mcp.server.context import ServerRequestContext

from mcp_memory.models import Provenance, Scope

_request: ContextVar[ServerRequestContext[Any, Any] | None] = ContextVar("mcp_memory_request", default=None)


async def record_request(ctx: ServerRequestContext[Any, Any], call_next: Callable[[Any], Awaitable[Any]]) -> Any:
    """Server middleware: make the current request's context available to every handler."""
    token = _request.set(ctx)
    try:
        return await call_next(ctx)
    finally:
        _request.reset(token)


@dataclass(frozen=True)
class ScopeResolver:
    principal: str
    namespace: str | None
    transport: str = "stdio"

    def scope(self, ctx: Any = None) -> Scope:
        return Scope(principal=self.principal, namespace=self.namespace)

    def provenance(self, ctx: Any = None) -> Provenance:
        request = _request.get()
        name = version = None
        params = getattr(request.session, "client_params", None) if request is not None else None
        info = getattr(params, "client_info", None)
        if info is not None:
            name, version = info.name, info.version
        return Provenance(client_name=name, client_version=version, transport=self.transport)
