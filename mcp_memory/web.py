"""The HTTP face of the server: one gateway in front of the SDK's SSE or streamable HTTP app.

The gateway, in order, for every HTTP request:

1. serves `GET /health` (no token, no data), `GET /metrics` (Prometheus text, no principal
   names) and the protected-resource metadata (RFC 9728, ADR 8);
2. checks the Host and Origin headers (DNS rebinding) with the SDK's own validator;
3. verifies the bearer token against the token store (hashes only) and answers 401 with
   `WWW-Authenticate` naming the metadata when it is missing, unknown, revoked or expired;
4. attaches the token's identity to the request, where `scope.py` reads the principal and the
   namespace for every tool, resource, prompt and subscription;
5. checks a POST's body (application/json, within the body limit, one JSON-RPC message) and
   answers a bad one with a JSON-RPC error, alike on SSE and HTTP;
6. counts and times the request and logs one line with a request id, through the redactor.

The SDK's apps behind it bring the transports, both protocol generations and the binding of a
session to the identity that opened it.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

import orjson
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp_types import INVALID_REQUEST, PARSE_ERROR
from starlette.authentication import AuthCredentials
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_memory import __version__, metrics
from mcp_memory.config import HttpSettings, Limits
from mcp_memory.jwt_auth import JwtVerifier, looks_like_jwt
from mcp_memory.models import Scope as MemoryScope
from mcp_memory.scope import REQUEST_ID_KEY
from mcp_memory.storage.tokens import TokenStore

log = logging.getLogger("mcp_memory.http")
# The id of the request the gateway is handling, for log lines written in the gateway's own task
# (handlers of a stateful session run in the session's task and read it from the request instead).
GATEWAY_REQUEST_ID: ContextVar[str | None] = ContextVar("mcp_memory_gateway_request_id", default=None)

METADATA_PATH = "/.well-known/oauth-protected-resource"
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
LOOPBACK_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]"]
WILDCARD_HOSTS = ("0.0.0.0", "::")
LOOPBACK_ORIGINS = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]


def _with_any_port(names: list[str]) -> list[str]:
    """A name given without a port matches it on any port too ("memory.example.com" and
    "memory.example.com:*"), which is what a user listing a hostname means."""
    out: list[str] = []
    for name in names:
        out.append(name)
        bare = name.split("://", 1)[-1]
        if bare.endswith("]") or not re.search(r":(\d+|\*)$", bare):  # no port given ([::1] has none)
            out.append(f"{name}:*")
    return out


def transport_security(http: HttpSettings) -> TransportSecuritySettings:
    """Loopback names always; the bound host and the configured names besides."""
    hosts = list(LOOPBACK_HOSTS)
    if http.host not in (*WILDCARD_HOSTS, "127.0.0.1", "localhost", "::1"):
        hosts += [http.host, f"{http.host}:*"]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts + _with_any_port(list(http.allowed_hosts)),
        allowed_origins=LOOPBACK_ORIGINS + _with_any_port(list(http.allowed_origins)),
    )


def mcp_app(mcp: MCPServer[Any], transport: str, http: HttpSettings, limits: Limits) -> ASGIApp:
    """The SDK's app for the transport, with our body limit and Host/Origin rules."""
    security = transport_security(http)
    if transport == "sse":
        return mcp.sse_app(
            sse_path=http.sse_path,
            message_path=http.message_path,
            max_request_body_size=limits.max_http_body_bytes,
            transport_security=security,
            host=http.host,
        )
    return mcp.streamable_http_app(
        streamable_http_path=http.path,
        json_response=http.json_response,
        stateless_http=http.stateless,
        max_request_body_size=limits.max_http_body_bytes,
        session_idle_timeout=None if http.stateless else http.session_idle_seconds,
        transport_security=security,
        host=http.host,
    )


def identity_user(scope: MemoryScope, client_id: str, expires_at: float | None) -> AuthenticatedUser:
    """The request's user as the SDK expects it: it binds each session to `client_id`."""
    token = AccessToken(
        token=client_id,  # the id, never the secret: nothing after the gateway holds a token
        client_id=client_id,
        scopes=[],
        expires_at=None if expires_at is None else int(expires_at),
        subject=scope.principal,
        claims={"principal": scope.principal, "namespace": scope.namespace},
    )
    return AuthenticatedUser(token)


# The routes that carry MCP: streamable HTTP, the SSE stream and the SSE transport's messages.
MCP_ROUTES = frozenset({"mcp", "sse", "messages"})


class Gateway:
    def __init__(
        self,
        app: ASGIApp,
        *,
        transport: str,
        http: HttpSettings,
        limits: Limits,
        tokens: TokenStore | None,
        local: MemoryScope | None,
        model_ready: Callable[[], bool],
        jwt: JwtVerifier | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if (tokens is None and jwt is None) == (local is None):
            raise ValueError("give token verification (store, JWT or both) or one local principal, not both")
        self.app = app
        self.transport = transport
        self.http = http
        self.limits = limits
        self.tokens = tokens
        self.jwt = jwt
        self.local = local
        self.model_ready = model_ready
        self.clock = clock
        self.security = TransportSecurityMiddleware(transport_security(http))
        self.resource_path = http.sse_path if transport == "sse" else http.path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan: the SDK's session manager starts and stops there
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        headers = dict(scope.get("headers") or [])
        given = headers.get(b"x-request-id", b"").decode("latin-1")
        request_id = given if _REQUEST_ID.match(given) else uuid.uuid4().hex[:16]
        scope[REQUEST_ID_KEY] = request_id  # the tool handlers' log lines carry it (server.py)
        token = GATEWAY_REQUEST_ID.set(request_id)
        status = [0]

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
                message = {**message, "headers": [*message.get("headers", []), (b"x-request-id", request_id.encode())]}
            await send(message)

        route = self._route(scope["path"])
        principal = "-"
        try:
            principal = await self._handle(route, scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - started
            metrics.HTTP_REQUESTS.inc(route=route, status=str(status[0]))
            metrics.HTTP_SECONDS.observe(elapsed, route=route)
            log.info(
                "%s %s -> %s in %.1f ms (principal %s)",
                scope.get("method"),
                route,
                status[0],
                elapsed * 1000,
                principal,
                extra={"http": {"method": scope.get("method"), "route": route, "status": status[0]}},
            )
            GATEWAY_REQUEST_ID.reset(token)

    def _route(self, path: str) -> str:
        if path == "/health":
            return "health"
        if path == "/metrics":
            return "metrics"
        if path == METADATA_PATH or path.startswith(METADATA_PATH + "/"):
            return "metadata"
        if path == self.http.path:
            return "mcp"
        if path == self.http.sse_path:
            return "sse"
        if path.startswith(self.http.message_path):
            return "messages"  # the SSE transport's POSTs
        return "other"

    async def _handle(self, route: str, scope: Scope, receive: Receive, send: Send) -> str:
        method = scope.get("method", "GET")
        if route == "health" and method in ("GET", "HEAD"):
            await _json(send, 200, {"status": "ok", "version": __version__, "model_ready": self.model_ready()})
            return "-"
        if route == "metrics" and method in ("GET", "HEAD"):
            await _respond(send, 200, metrics.render().encode(), b"text/plain; version=0.0.4; charset=utf-8")
            return "-"
        if route == "metadata" and method in ("GET", "HEAD"):
            await _json(send, 200, self._metadata(scope))
            return "-"
        if route not in MCP_ROUTES:
            where = self.http.sse_path if self.transport == "sse" else self.http.path
            problem = f"no such path; this server speaks {self.transport} at {where} (and answers /health, /metrics)"
            await _json(send, 404, {"error": "not_found", "error_description": problem})
            return "-"
        refusal = await self.security.validate_request(Request(scope), is_post=False)
        if refusal is not None:
            await self._refuse_origin(scope, send, refusal.status_code)
            return "-"
        identity = await self._authenticate(scope)
        if identity is None:
            await self._unauthorized(scope, send)
            return "-"
        user, credentials = identity
        scope["user"], scope["auth"] = user, credentials
        if method == "POST":
            checked = await self._checked_body(scope, receive, send)
            if checked is None:
                return str(user.access_token.subject)
            receive = checked
        await self.app(scope, receive, send)
        return str(user.access_token.subject)

    async def _checked_body(self, scope: Scope, receive: Receive, send: Send) -> Receive | None:
        """The body replayed to the SDK, or None once a bad one has been answered.

        The SDK answers these cases unevenly: over HTTP an object that is no JSON-RPC message gets
        -32602 and a pydantic dump, over SSE every case gets a line of plain text. One JSON-RPC
        error for both, naming what to fix.
        """
        headers = dict(scope.get("headers") or [])
        kind = headers.get(b"content-type", b"").decode("latin-1").split(";")[0].strip().lower()
        if kind != "application/json":
            await _rpc_error(send, 415, INVALID_REQUEST, f"Content-Type must be application/json, not {kind!r}")
            return None
        limit = self.limits.max_http_body_bytes
        declared = headers.get(b"content-length", b"")
        chunks: list[bytes] = []
        size = int(declared) if declared.isdigit() else 0  # a declared excess is refused unread
        received = 0
        more = size <= limit
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunks.append(message.get("body", b""))
            received += len(chunks[-1])
            size = max(size, received)
            more = message.get("more_body", False) and size <= limit
        if size > limit:
            problem = f"the body exceeds limits.max_http_body_bytes = {limit} bytes; send less per request"
            await _rpc_error(send, 413, INVALID_REQUEST, problem)
            return None
        body = b"".join(chunks)
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            await _rpc_error(send, 400, PARSE_ERROR, f"Parse error: the body is not JSON ({exc})")
            return None
        if not _is_jsonrpc(parsed):
            problem = (
                'Invalid Request: send one JSON-RPC 2.0 message, an object with "jsonrpc": "2.0" and a "method" '
                '(or the "result" or "error" for an "id"); batches are not accepted'
            )
            await _rpc_error(send, 400, INVALID_REQUEST, problem)
            return None
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        return replay

    async def _refuse_origin(self, scope: Scope, send: Send, status: int) -> None:
        headers = dict(scope.get("headers") or [])
        if status == 421:
            host = headers.get(b"host", b"").decode("latin-1")
            problem = (
                f"Host {host!r} is not served here (DNS-rebinding protection): add it to http.allowed_hosts "
                "(a name matches any port; 'name:8765' one port)"
            )
            await _json(send, 421, {"error": "misdirected_request", "error_description": problem})
        elif status == 403:
            origin = headers.get(b"origin", b"").decode("latin-1")
            problem = f"Origin {origin!r} may not call this server: add it to http.allowed_origins to allow it"
            await _json(send, 403, {"error": "forbidden_origin", "error_description": problem})
        else:
            await _json(send, status, {"error": "bad_request", "error_description": "the request headers were refused"})

    async def _authenticate(self, scope: Scope) -> tuple[AuthenticatedUser, AuthCredentials] | None:
        if self.local is not None:
            return identity_user(self.local, "local", None), AuthCredentials([])
        token = _bearer(scope)
        if token is None:
            return None
        if self.jwt is not None and looks_like_jwt(token):
            found = await self.jwt.verify(token)
            if found is None:
                return None
            return identity_user(found.scope, found.subject_id, found.expires_at), AuthCredentials([])
        if self.tokens is None:
            return None
        started = time.perf_counter()
        record = await self.tokens.verify(token, self.clock())
        metrics.AUTH_SECONDS.observe(time.perf_counter() - started)
        if record is None:
            return None
        user = identity_user(MemoryScope(record.principal, record.namespace), record.id, record.expires_at)
        return user, AuthCredentials([])

    def _base_url(self, scope: Scope) -> str:
        if self.http.public_url:
            return self.http.public_url.rstrip("/")
        host = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1") or f"{self.http.host}"
        return f"{scope.get('scheme', 'http')}://{host}"

    def _metadata(self, scope: Scope) -> dict[str, Any]:
        # Tokens from `mcp-memory token create` come from no OAuth flow: unless an external JWT
        # issuer is configured, no authorization server is named, so a client asks its user for a
        # token instead of starting OAuth (ADR 8).
        metadata: dict[str, Any] = {
            "resource": self._base_url(scope) + self.resource_path,
            "bearer_methods_supported": ["header"],
            "resource_name": "mcp-memory",
        }
        if self.jwt is not None and self.http.jwt.issuer:
            metadata["authorization_servers"] = [self.http.jwt.issuer]
        return metadata

    async def _unauthorized(self, scope: Scope, send: Send) -> None:
        given = _bearer(scope) is not None
        description = (
            "this server does not accept the bearer token (unknown, revoked or expired); "
            "ask for one made with `mcp-memory token create`, or a JWT from the configured issuer"
            if given
            else "send Authorization: Bearer <token> (create one with `mcp-memory token create`)"
        )
        metadata = self._base_url(scope) + METADATA_PATH + self.resource_path
        challenge = f'Bearer realm="mcp-memory", resource_metadata="{metadata}"'
        if given:
            challenge += f', error="invalid_token", error_description="{description}"'
        await _json(
            send,
            401,
            {"error": "invalid_token" if given else "unauthorized", "error_description": description},
            [(b"www-authenticate", challenge.encode())],
        )


def _is_jsonrpc(message: Any) -> bool:
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return False
    return isinstance(message.get("method"), str) or ("id" in message and ("result" in message or "error" in message))


async def _rpc_error(send: Send, status: int, code: int, message: str) -> None:
    await _json(send, status, {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}})


def _bearer(scope: Scope) -> str | None:
    raw: bytes = dict(scope.get("headers") or []).get(b"authorization", b"")
    value = raw.decode("latin-1").strip()
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


async def _json(send: Send, status: int, body: Any, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    await _respond(send, status, orjson.dumps(body), b"application/json", extra)


async def _respond(
    send: Send, status: int, body: bytes, content_type: bytes, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode()), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
