"""The only code that turns a transport identity into a Scope.

On stdio the principal is the configured local principal (default: the OS user name) and the
namespace comes from config. Neither ever comes from a tool argument or from the client's
declared name, which is recorded as provenance only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp.server.mcpserver import Context

from mcp_memory.models import Provenance, Scope


@dataclass(frozen=True)
class ScopeResolver:
    principal: str
    namespace: str | None
    transport: str = "stdio"

    def scope(self, ctx: Context[Any, Any] | None) -> Scope:
        return Scope(principal=self.principal, namespace=self.namespace)

    def provenance(self, ctx: Context[Any, Any] | None) -> Provenance:
        name = version = None
        if ctx is not None:
            params = getattr(ctx.request_context.session, "client_params", None)
            info = getattr(params, "client_info", None)
            if info is not None:
                name, version = info.name, info.version
        return Provenance(client_name=name, client_version=version, transport=self.transport)
