"""The HTTP face of the server: ASGI middlewares in front of the SDK's SSE or streamable HTTP app,
each one job, outermost first (``http_app`` assembles them):

1. ``RequestLog`` names the request (X-Request-Id), counts and times it and logs one line with
   the request id, through the redactor;
2. ``PublicRoutes`` serves `GET /health` (no token, no data), `GET /metrics` (Prometheus text, no
   principal names) and the protected-resource metadata (RFC 9728, ADR 8), and 404 elsewhere;
3. ``HostCheck`` checks the Host and Origin headers (DNS rebinding) with the SDK's own validator;
   ``Inspector`` then hands every path under /ui/ to the web inspector, which signs its visitors
   in with its own session cookie (the inspector package);
4. ``Authenticate`` verifies the bearer token (``Identify``: token hashes, or a JWT) and attaches
   the identity to the request, where `scope.py` reads the principal and the namespace for every
   tool, resource, prompt and subscription; or answers 401 with `WWW-Authenticate` naming the
   metadata when it is missing, unknown, revoked or expired;
5. ``BodyCheck`` checks a POST's body (application/json, within the body limit, one JSON-RPC
   message) and answers a bad one with a JSON-RPC error, alike on SSE and HTTP.

The SDK's apps behind it bring the transports, both protocol generations and the binding of a
session to the identity that opened it.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable
from typing import Any

import orjson
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.authentication import AuthCredentials
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_memory import __version__, metrics
from mcp_memory.config import HttpSettings, Limits
from mcp_memory.core.models import Scope as MemoryScope
from mcp_memory.http.body import BodyCheck, read_within, replay
from mcp_memory.http.jwt_auth import JwtVerifier, looks_like_jwt
from mcp_memory.scope import GATEWAY_REQUEST_ID, REQUEST_ID_KEY
from mcp_memory.services.control_ports import TokenCheck

log = logging.getLogger("mcp_memory.http")

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
ROUTE_KEY = "mcp_memory.route"  # in the ASGI scope: the route RequestLog named for the request
INSPECTOR_ROOT = "/ui"


def http_app(
    app: ASGIApp,
    *,
    transport: str,
    http: HttpSettings,
    limits: Limits,
    identify: Identify,
    model_ready: Callable[[], bool],
    inspector: ASGIApp | None = None,
) -> ASGIApp:
    """The SDK's app behind the middlewares, outermost first, each one job (see the module's doc)."""
    app = BodyCheck(app, limits)
    app = Authenticate(app, identify, http, transport)
    if inspector is not None:
        app = Inspector(app, inspector)
    app = HostCheck(app, http)
    app = PublicRoutes(app, transport, http, model_ready, jwt_issuer=identify.jwt_issuer)
    return RequestLog(app, http)


def route_of(path: str, http: HttpSettings) -> str:
    if path == "/health":
        return "health"
    if path == "/metrics":
        return "metrics"
    if path == METADATA_PATH or path.startswith(METADATA_PATH + "/"):
        return "metadata"
    if path == INSPECTOR_ROOT or path.startswith(INSPECTOR_ROOT + "/"):
        return "ui"
    if path == http.path:
        return "mcp"
    if path == http.sse_path:
        return "sse"
    if path.startswith(http.message_path):
        return "messages"  # the SSE transport's POSTs
    return "other"


def resource_path(transport: str, http: HttpSettings) -> str:
    return http.sse_path if transport == "sse" else http.path


class RequestLog:
    """Names the request (an id of the caller's X-Request-Id or a new one, returned on the answer),
    counts and times it, and logs one line through the redactor."""

    def __init__(self, app: ASGIApp, http: HttpSettings) -> None:
        self.app = app
        self.http = http

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan: the SDK's session manager starts and stops there
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        given = dict(scope.get("headers") or []).get(b"x-request-id", b"").decode("latin-1")
        request_id = given if _REQUEST_ID.match(given) else uuid.uuid4().hex[:16]
        scope[REQUEST_ID_KEY] = request_id  # the tool handlers' log lines carry it (server.py)
        route = scope[ROUTE_KEY] = route_of(scope["path"], self.http)
        token = GATEWAY_REQUEST_ID.set(request_id)
        status = [0]

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
                message = {**message, "headers": [*message.get("headers", []), (b"x-request-id", request_id.encode())]}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - started
            metrics.HTTP_REQUESTS.inc(route=route, status=str(status[0]))
            metrics.HTTP_SECONDS.observe(elapsed, route=route)
            user = scope.get("user")
            principal = user.access_token.subject if isinstance(user, AuthenticatedUser) else "-"
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


class PublicRoutes:
    """Answers `/health`, `/metrics` and the protected-resource metadata (no token, no data), and 404
    for any path that carries no MCP; passes the MCP routes on."""

    def __init__(
        self,
        app: ASGIApp,
        transport: str,
        http: HttpSettings,
        model_ready: Callable[[], bool],
        jwt_issuer: str | None,
    ) -> None:
        self.app = app
        self.transport = transport
        self.http = http
        self.model_ready = model_ready
        self.jwt_issuer = jwt_issuer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = scope.get(ROUTE_KEY) if scope["type"] == "http" else None
        if route is None or route in MCP_ROUTES or route == "ui":
            await self.app(scope, receive, send)
            return
        method = scope.get("method", "GET")
        if route == "health" and method in ("GET", "HEAD"):
            await _json(send, 200, {"status": "ok", "version": __version__, "model_ready": self.model_ready()})
        elif route == "metrics" and method in ("GET", "HEAD"):
            await _respond(send, 200, metrics.render().encode(), b"text/plain; version=0.0.4; charset=utf-8")
        elif route == "metadata" and method in ("GET", "HEAD"):
            await _json(send, 200, self._metadata(scope))
        else:
            where = resource_path(self.transport, self.http)
            problem = f"no such path; this server speaks {self.transport} at {where} (and answers /health, /metrics)"
            await _json(send, 404, {"error": "not_found", "error_description": problem})

    def _metadata(self, scope: Scope) -> dict[str, Any]:
        # Tokens from `mcp-memory token create` come from no OAuth flow: unless an external JWT
        # issuer is configured, no authorization server is named, so a client asks its user for a
        # token instead of starting OAuth (ADR 8).
        metadata: dict[str, Any] = {
            "resource": base_url(scope, self.http) + resource_path(self.transport, self.http),
            "bearer_methods_supported": ["header"],
            "resource_name": "mcp-memory",
        }
        if self.jwt_issuer:
            metadata["authorization_servers"] = [self.jwt_issuer]
        return metadata


class HostCheck:
    """Refuses a Host or Origin the server does not serve (DNS rebinding), with the SDK's validator
    and an answer that names the setting to change."""

    def __init__(self, app: ASGIApp, http: HttpSettings) -> None:
        self.app = app
        self.security = TransportSecurityMiddleware(transport_security(http))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            checked = _without_same_origin(scope) if scope.get(ROUTE_KEY) == "ui" else scope
            refusal = await self.security.validate_request(Request(checked), is_post=False)
            if refusal is not None and refusal.status_code == 403 and _inspector_post(scope):
                await _refuse_foreign_form(send)  # no setting admits it: naming one would mislead
                return
            if refusal is not None:
                await _refuse_origin(scope, send, refusal.status_code)
                return
        await self.app(scope, receive, send)


def _same_origin(scope: Scope) -> bool | None:
    """Whether every Origin header names the page's own origin (None: the request sent none)."""
    headers = scope.get("headers") or []
    host = dict(headers).get(b"host", b"")
    origins = [v for k, v in headers if k == b"origin"]
    if not origins:
        return None
    return bool(host) and all(o in (b"http://" + host, b"https://" + host) for o in origins)


def _without_same_origin(scope: Scope) -> Scope:
    """The inspector's own forms post with an Origin equal to the page's: same-origin needs no
    entry in http.allowed_origins (the Host is still checked, and any other Origin)."""
    if _same_origin(scope):
        return {**scope, "headers": [(k, v) for k, v in scope.get("headers") or [] if k != b"origin"]}
    return scope


class Inspector:
    """Hands the paths under /ui/ to the web inspector (after the Host and Origin check), which
    admits its visitors by its own session cookie; every other path goes on to the MCP gate."""

    FORM_LIMIT = 256 * 1024  # a correction is at most limits.max_content_bytes; forms are small

    def __init__(self, app: ASGIApp, inspector: ASGIApp) -> None:
        self.app = app
        self.inspector = inspector

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get(ROUTE_KEY) != "ui":
            await self.app(scope, receive, send)
            return
        if scope["path"] == INSPECTOR_ROOT:
            await _respond(send, 308, b"", b"text/plain", [(b"location", INSPECTOR_ROOT.encode() + b"/")])
            return
        if scope.get("method") == "POST":
            # Its forms come from its own pages only: another origin (even loopback's) is refused.
            if _same_origin(scope) is False:
                await _refuse_foreign_form(send)
                return
            headers = dict(scope.get("headers") or [])
            body = await read_within(receive, headers.get(b"content-length", b""), self.FORM_LIMIT)
            if body is None:
                return
            if isinstance(body, int):
                problem = f"a form of the inspector is at most {body} bytes"
                await _json(send, 413, {"error": "too_large", "error_description": problem})
                return
            receive = replay(body, receive)
        await self.inspector(scope, receive, send)


class Identify:
    """Who a request is: the one local principal, or the owner of its bearer token (a token from
    `mcp-memory token create`, checked against the stored hashes, or a JWT from the issuer)."""

    def __init__(
        self,
        *,
        tokens: TokenCheck | None,
        local: MemoryScope | None,
        jwt: JwtVerifier | None = None,
        jwt_issuer: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if (tokens is None and jwt is None) == (local is None):
            raise ValueError("give token verification (store, JWT or both) or one local principal, not both")
        self.tokens = tokens
        self.local = local
        self.jwt = jwt
        self.jwt_issuer = jwt_issuer if jwt is not None else None
        self.clock = clock

    async def __call__(self, scope: Scope) -> AuthenticatedUser | None:
        if self.local is not None:
            return identity_user(self.local, "local", None)
        token = _bearer(scope)
        if token is None:
            return None
        if self.jwt is not None and looks_like_jwt(token):
            found = await self.jwt.verify(token)
            return None if found is None else identity_user(found.scope, found.subject_id, found.expires_at)
        if self.tokens is None:
            return None
        started = time.perf_counter()
        record = await self.tokens.verify(token, self.clock())
        metrics.AUTH_SECONDS.observe(time.perf_counter() - started)
        if record is None:
            return None
        return identity_user(MemoryScope(record.principal, record.namespace), record.id, record.expires_at)


class Authenticate:
    """Attaches the caller's identity to the request (`scope.py` reads the principal and namespace
    from it), or answers 401 with `WWW-Authenticate` naming the metadata."""

    def __init__(self, app: ASGIApp, identify: Identify, http: HttpSettings, transport: str) -> None:
        self.app = app
        self.identify = identify
        self.http = http
        self.transport = transport

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        user = await self.identify(scope)
        if user is None:
            await self._unauthorized(scope, send)
            return
        scope["user"], scope["auth"] = user, AuthCredentials([])
        await self.app(scope, receive, send)

    async def _unauthorized(self, scope: Scope, send: Send) -> None:
        given = _bearer(scope) is not None
        # Only the kinds of token this server takes: a JWT named to a user of `token create` alone misleads.
        kinds = [
            *(["one made with `mcp-memory token create`"] if self.identify.tokens is not None else []),
            *([f"a JWT from {self.identify.jwt_issuer or 'the configured issuer'}"] if self.identify.jwt else []),
        ]
        description = (
            f"this server does not accept the bearer token (unknown, revoked or expired); ask for {' or '.join(kinds)}"
            if given
            else f"send Authorization: Bearer <token> ({' or '.join(kinds)})"
        )
        metadata = base_url(scope, self.http) + METADATA_PATH + resource_path(self.transport, self.http)
        challenge = f'Bearer realm="mcp-memory", resource_metadata="{metadata}"'
        if given:
            challenge += f', error="invalid_token", error_description="{description}"'
        await _json(
            send,
            401,
            {"error": "invalid_token" if given else "unauthorized", "error_description": description},
            [(b"www-authenticate", challenge.encode())],
        )


def _inspector_post(scope: Scope) -> bool:
    return scope.get(ROUTE_KEY) == "ui" and scope.get("method") == "POST"


async def _refuse_foreign_form(send: Send) -> None:
    """A form posted to the inspector from another origin (CSRF): refused whatever http.allowed_origins holds."""
    problem = (
        "the inspector takes a form only from its own pages (another origin could post in your name): "
        f"open {INSPECTOR_ROOT}/ on this server and submit the form there"
    )
    await _json(send, 403, {"error": "forbidden_origin", "error_description": problem})


async def _refuse_origin(scope: Scope, send: Send, status: int) -> None:
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


def base_url(scope: Scope, http: HttpSettings) -> str:
    if http.public_url:
        return http.public_url.rstrip("/")
    host = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1") or f"{http.host}"
    return f"{scope.get('scheme', 'http')}://{host}"


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
