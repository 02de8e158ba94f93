"""The only code that turns a transport identity into a Scope.

On stdio (and on a network transport told to serve one local principal) the principal is the
configured local principal (default: the OS user name) and the namespace comes from config. On
SSE and HTTP with tokens, the HTTP gateway verifies the request's bearer token and attaches
its identity to the request; the principal and namespace are read from there, per request.
Neither ever comes from a tool argument or from the client's declared name, which is recorded
as provenance only.

Every MCP entry point (tools, resources, resource templates, prompts) asks this module for the
Scope. A middleware records each request's context in a context variable, so handlers that the
SDK calls without a Context (static resources) resolve the caller the same way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.context import ServerRequestContext

from mcp_memory.core.errors import AccessDeniedError
from mcp_memory.core.models import Provenance, Scope

_request: ContextVar[ServerRequestContext[Any, Any] | None] = ContextVar("mcp_memory_request", default=None)


async def record_request(ctx: ServerRequestContext[Any, Any], call_next: Callable[[Any], Awaitable[Any]]) -> Any:
    """Server middleware: make the current request's context available to every handler."""
    token = _request.set(ctx)
    try:
        return await call_next(ctx)
    finally:
        _request.reset(token)


REQUEST_ID_KEY = "mcp_memory.request_id"  # where the HTTP gateway leaves each request's id
# The id of the request the gateway's middlewares are handling, for log lines written in their own
# task (handlers of a stateful session run in the session's task and read it from the request
# instead). Here, not in ``http``, so the log handler needs nothing of the HTTP stack.
GATEWAY_REQUEST_ID: ContextVar[str | None] = ContextVar("mcp_memory_gateway_request_id", default=None)


def _http_scope() -> dict[str, Any]:
    """The ASGI scope of the HTTP request being handled ({} on stdio)."""
    request = _request.get()
    http = getattr(request, "request", None) if request is not None else None
    found = getattr(http, "scope", None)
    return found if isinstance(found, dict) else {}


def current_request_id() -> str | None:
    """The id the HTTP gateway gave the request being handled (None on stdio)."""
    value = _http_scope().get(REQUEST_ID_KEY)
    return value if isinstance(value, str) else None


def request_identity() -> Scope | None:
    """The Scope the HTTP gateway attached to the current request, if any."""
    user = _http_scope().get("user")
    if not isinstance(user, AuthenticatedUser):
        return None
    claims = user.access_token.claims or {}
    principal, namespace = claims.get("principal"), claims.get("namespace")
    if not isinstance(principal, str):
        return None
    return Scope(principal=principal, namespace=namespace if isinstance(namespace, str) else None)


@dataclass(frozen=True)
class ScopeResolver:
    principal: str
    namespace: str | None
    transport: str = "stdio"
    tokens: bool = False  # identity comes from each request's verified token, never from config

    def scope(self, ctx: Any = None) -> Scope:
        if not self.tokens:
            return Scope(principal=self.principal, namespace=self.namespace)
        identity = request_identity()
        if identity is None:  # the gateway admits no request without one; this is the second lock
            raise AccessDeniedError("this request carries no verified token; send Authorization: Bearer <token>")
        return identity

    def provenance(self, ctx: Any = None) -> Provenance:
        request = _request.get()
        name = version = None
        params = getattr(request.session, "client_params", None) if request is not None else None
        info = getattr(params, "client_info", None)
        if info is not None:
            name, version = info.name, info.version
        return Provenance(client_name=name, client_version=version, transport=self.transport)
