"""The network transports: SSE and streamable HTTP behind the gateway, and the web inspector.

Only ``mcp-memory serve --transport sse|http`` and ``mcp-memory ui`` import this module, so a
stdio server never loads the HTTP stack of our own (the gateway, the inspector and its templates,
JWT verification); both serve the runtime of ``compose``, with the MCP face of ``mcp.server``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
import threading
import time
import webbrowser
from collections.abc import Iterator
from contextlib import AsyncExitStack, closing, contextmanager
from typing import Any

import anyio
from starlette.types import ASGIApp, Receive, Send
from starlette.types import Scope as ASGIScope

from mcp_memory import descriptors
from mcp_memory.config import HttpSettings, Settings
from mcp_memory.core.errors import InvalidInputError
from mcp_memory.core.models import Scope
from mcp_memory.http.capacity import Capacity
from mcp_memory.http.jwt_auth import JwtVerifier
from mcp_memory.http.middlewares import WILDCARD_HOSTS, Identify, http_app, mcp_app
from mcp_memory.inspector.app import inspector_app
from mcp_memory.inspector.auth import SignedIn, SignIn
from mcp_memory.inspector.base import Inspector
from mcp_memory.mcp.server import Server, open_server, settle_heap
from mcp_memory.storage.tokens import TokenStore
from mcp_memory.storage.ui_sessions import UiSessionStore

log = logging.getLogger(__name__)

LOOPBACK = ("127.0.0.1", "localhost", "::1")


async def serve_network(settings: Settings, transport: str) -> None:
    """SSE or streamable HTTP behind the gateway; one runtime serves every connection."""
    http = settings.http
    tokens: TokenStore | None = None
    jwt = JwtVerifier(http.jwt) if http.auth == "tokens" and http.jwt.jwks_url else None
    if http.auth == "tokens":
        tokens = TokenStore.for_settings(settings)
        if jwt is None and await tokens.count_live(time.time()) == 0:
            raise InvalidInputError(
                "http.auth",
                f"no live token in {tokens.place} and no JWT issuer, so no client could connect; create "
                "one with `mcp-memory token create --principal NAME`, set http.jwt.jwks_url, or serve one "
                "local principal with --no-auth",
            )
    if http.host in WILDCARD_HOSTS and not http.allowed_hosts:
        log.warning(
            "listening on %s but http.allowed_hosts is empty: only requests addressed to a loopback name get "
            'through (others get 421); list the names clients use, e.g. allowed_hosts = ["memory.example.com"]',
            http.host,
        )
    if http.auth == "none" and http.host not in LOOPBACK:
        log.warning(
            "serving %s on %s without tokens: every client acts as %r", transport, http.host, settings.principal
        )
    soft = descriptors.raise_soft_limit()
    log.info("%s", descriptors.budget(settings.pool.max_open, soft).describe(settings.pool.max_open))
    listener = _listen(http)
    try:
        await _serve_gateway(settings, transport, tokens, jwt, listener)
    finally:
        listener.close()
        if tokens is not None:
            tokens.close()


def _listen(http: HttpSettings) -> socket.socket:
    """The listening socket, bound before anything else opens, so a taken port is one clear line."""
    family = socket.AF_INET6 if ":" in http.host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((http.host, http.port))
    except OSError as exc:
        listener.close()
        raise InvalidInputError(
            "http.port",
            f"cannot listen on {http.host}:{http.port} ({exc.strerror or exc}); pick another port with --port "
            "(0 picks a free one), or stop what is listening there",
        ) from None
    return listener


async def serve_ui(settings: Settings, open_browser: bool = True) -> None:
    """`mcp-memory ui`: the web inspector alone, on loopback, for the local principal, entered
    through a one-time link printed on stdout (and opened in the browser)."""
    http = settings.http.model_copy(update={"host": "127.0.0.1", "port": settings.ui.port, "auth": "none"})
    settings = settings.model_copy(update={"http": http, "ui": settings.ui.model_copy(update={"enabled": True})})
    listener = _listen(http)
    try:
        await _serve_gateway(settings, "http", None, None, listener, ui_only=True, open_browser=open_browser)
    finally:
        listener.close()


def _inspector(
    runtime: Server, identify: Identify, tokens: TokenStore | None, local: Scope | None, sessions: UiSessionStore
) -> tuple[ASGIApp, SignIn]:
    """The inspector's app, its visitors signed in with the tokens MCP clients use (the same
    verification), or, for one local principal, with one-time links."""
    settings = runtime.settings

    async def verify(token: str) -> SignedIn | None:
        user = await identify({"type": "http", "headers": [(b"authorization", f"Bearer {token}".encode())]})
        if user is None:
            return None
        claims, held = user.access_token.claims or {}, user.access_token
        return SignedIn(str(claims["principal"]), claims.get("namespace"), held.client_id, held.expires_at)

    signin = SignIn(
        sessions,
        verify=None if local else verify,
        tokens=tokens,
        local=local,
        session_hours=settings.ui.session_hours,
        announce=_tell_link,
    )
    services = Inspector(
        runtime.memory,
        runtime.browse,
        runtime.tasks,
        runtime.stats,
        runtime.erasure,
        runtime.store.counts,
        signin,
        secure_cookie=(settings.http.public_url or "").startswith("https://"),
    )
    return inspector_app(services), signin


async def _serve_gateway(
    settings: Settings,
    transport: str,
    tokens: TokenStore | None,
    jwt: JwtVerifier | None,
    listener: socket.socket,
    *,
    ui_only: bool = False,
    open_browser: bool = False,
) -> None:
    import uvicorn

    http = settings.http
    async with open_server(settings, transport=transport) as runtime, AsyncExitStack() as stack:
        local = None if tokens else Scope(settings.principal, settings.namespace)
        identify = Identify(tokens=tokens, local=local, jwt=jwt, jwt_issuer=http.jwt.issuer)
        sessions = stack.enter_context(closing(UiSessionStore.for_settings(settings)))
        inspector, signin = (
            _inspector(runtime, identify, tokens, local, sessions) if settings.ui.enabled else (None, None)
        )
        app = http_app(
            _no_mcp if ui_only else mcp_app(runtime.mcp, transport, http, settings.limits),
            transport=transport,
            http=http,
            limits=settings.limits,
            identify=identify,
            model_ready=lambda: runtime.embedder.loaded,
            inspector=inspector,
        )
        # Out of descriptors, asyncio's accept loop would log a line per waiting connection each
        # second; the guard logs one per interval. The gateway keeps its requests within its share.
        asyncio.get_running_loop().set_exception_handler(descriptors.AcceptGuard())
        app = Capacity(app, descriptors.budget(settings.pool.max_open, descriptors.limits()[0]).connections)
        config = uvicorn.Config(
            app,
            host=http.host,
            port=http.port,
            log_config=None,  # our handler (stderr or file, through the redactor) stays in place
            access_log=False,  # the gateway logs each request once, with its request id
            timeout_graceful_shutdown=http.shutdown_grace_seconds,
            lifespan="on",
        )
        server = uvicorn.Server(config)
        settle_heap()
        with _sigterm_stops(server):
            async with anyio.create_task_group() as group:
                group.start_soon(_announce, server, "inspector" if ui_only else transport, http, signin, open_browser)
                await server.serve(sockets=[listener])
                group.cancel_scope.cancel()


async def _no_mcp(scope: ASGIScope, receive: Receive, send: Send) -> None:
    """`mcp-memory ui` serves no MCP: its only pages are the inspector's (and /health)."""
    if scope["type"] == "http":
        body = b'{"error":"not_found","error_description":"this is the inspector only: open /ui/"}'
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 404, "headers": headers})
        await send({"type": "http.response.body", "body": body})


@contextmanager
def _sigterm_stops(server: Any) -> Iterator[None]:
    """SIGTERM is a service manager's ordinary stop, and a clean stop exits 0.

    uvicorn shuts down gracefully on SIGTERM and then raises the signal again into the handler
    that was there before its own, which by default ends the process with -15. The handler put
    here instead asks uvicorn to stop (which also covers a SIGTERM before uvicorn's is in place).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, lambda _sig, _frame: setattr(server, "should_exit", True))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


async def _announce(
    server: Any, transport: str, http: HttpSettings, signin: SignIn | None = None, open_browser: bool = False
) -> None:
    """One log line with the bound address (port 0 picks one), for people and tests: written at any
    log level, in the log's own format (a JSON line on the network transports). For one local
    principal, the inspector's one-time sign-in link goes to stdout (``_tell_link``), never to a log file."""
    while not server.started:  # noqa: ASYNC110 -- uvicorn exposes a flag, not an event
        await anyio.sleep(0.02)
    host, port = server.servers[0].sockets[0].getsockname()[:2]
    path = {"sse": http.sse_path, "inspector": "/ui/"}.get(transport, http.path)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}{path}"
    log.handle(log.makeRecord(log.name, logging.INFO, __file__, 0, "serving %s on %s", (transport, url), None))
    link = signin.new_link(f"http://{shown}:{port}/ui") if signin is not None else None
    if link is not None and open_browser:
        await anyio.to_thread.run_sync(webbrowser.open, link)


def _tell_link(link: str) -> None:
    """A one-time sign-in link goes to stdout alone, a line of its own to pipe (`mcp-memory ui
    --no-browser | ...`), its note to stderr with the logs; never to a log file. Once stdout is
    gone (a pipe read the first link and closed), later links are told on stderr."""
    note = "mcp-memory inspector: a one-time sign-in link, good for 10 minutes, is on stdout"
    try:
        sys.stdout.write(link + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second failure at exit
        note = f"mcp-memory inspector: open {link} (a one-time link, good for 10 minutes)"
    sys.stderr.write(note + "\n")
    sys.stderr.flush()
