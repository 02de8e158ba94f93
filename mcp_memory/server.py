"""The composition root: reads settings, builds every resource once per process, owns them.

The store, the embedder and the services outlive every MCP connection; the SDK's per-connection
lifespan is not used to own anything (on SSE it runs once per connection).
"""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import signal
import socket
import sys
import threading
import time
import webbrowser
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, closing, contextmanager
from dataclasses import dataclass
from typing import Any

import anyio
from mcp.server.context import ServerMiddleware, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from starlette.types import ASGIApp, Receive, Send
from starlette.types import Scope as ASGIScope

from mcp_memory import __version__, client_log, descriptors, metrics
from mcp_memory.assembly import Store, open_core
from mcp_memory.browse_tools import register_browse_tools
from mcp_memory.completions import register_completions
from mcp_memory.config import HttpSettings, Settings
from mcp_memory.embed.loader import Embedder
from mcp_memory.erasure_tool import register_erasure_tool
from mcp_memory.errors import InvalidInputError, MemoryServerError, OutOfFilesError
from mcp_memory.golden_tool import register_golden_tool
from mcp_memory.inspector.app import inspector_app
from mcp_memory.inspector.auth import SignedIn, SignIn
from mcp_memory.inspector.base import Inspector
from mcp_memory.jwt_auth import JwtVerifier
from mcp_memory.models import Scope
from mcp_memory.prompts import prompt_argument_guard, register_prompts
from mcp_memory.resources import ChangeWatcher, ResourceNotifier, register_resources
from mcp_memory.scheduler import Scheduler
from mcp_memory.scope import ScopeResolver, record_request
from mcp_memory.services.browse import BrowseService
from mcp_memory.services.erasure import ErasureService
from mcp_memory.services.facts import FactService
from mcp_memory.services.golden import GoldenService
from mcp_memory.services.lifecycle import LifecycleService
from mcp_memory.services.memory import MemoryService
from mcp_memory.services.memory_file import MemoryFile
from mcp_memory.services.stats import StatsService
from mcp_memory.services.tasks import TaskService
from mcp_memory.stdio import run_stdio
from mcp_memory.storage.control import ControlStore
from mcp_memory.storage.forget_codes import ForgetCodes
from mcp_memory.storage.tokens import TokenStore
from mcp_memory.storage.ui_sessions import UiSessionStore
from mcp_memory.tools import (
    register_stats_tool,
    register_summary_tool,
    register_task_tools,
    register_tools,
    unknown_argument_guard,
)
from mcp_memory.unknown_names import unknown_name_guard
from mcp_memory.web import WILDCARD_HOSTS, Identify, http_app, mcp_app
from mcp_memory.web_capacity import Capacity

log = logging.getLogger(__name__)

INSTRUCTIONS = """mcp-memory gives you long-term memory across sessions and clients.
Call `recall` with the user's question before answering when earlier context may matter.
Call `remember` for facts, preferences, decisions and events worth keeping (not for small talk).
Use `forget` when the user asks you to delete something (dry run first)."""


@dataclass
class Runtime:
    settings: Settings
    store: Store
    embedder: Embedder
    memory: MemoryService
    tasks: TaskService
    scheduler: Scheduler
    mcp: MCPServer[Any]
    watcher: ChangeWatcher
    memory_file: MemoryFile
    browse: BrowseService
    stats: StatsService
    erasure: ErasureService


@asynccontextmanager
async def open_runtime(
    settings: Settings,
    *,
    transport: str = "stdio",
    clock: Callable[[], float] = time.time,
    warm: bool = True,
) -> AsyncIterator[Runtime]:
    """Everything one process serves with, opened once and closed in reverse order."""
    async with AsyncExitStack() as stack:
        core = await stack.enter_async_context(open_core(settings, clock))
        store, embedder, llm, memory, tasks = core.store, core.embedder, core.llm, core.memory, core.tasks
        embedder.start()  # in the background: the handshake never waits for the model
        tokens = transport != "stdio" and settings.http.auth == "tokens"
        scopes = ScopeResolver(settings.principal, settings.namespace, transport=transport, tokens=tokens)
        notifier = ResourceNotifier(scopes)
        mcp: MCPServer[Any] = MCPServer(
            "mcp-memory",
            version=__version__,
            instructions=INSTRUCTIONS,
            log_level=settings.log_level,
            middleware=[record_request],
            subscriptions=notifier.bus,
        )
        notifier.install(mcp)
        mcp.middleware.append(unknown_name_guard(mcp))
        mcp.middleware.append(principal_lease(store, scopes))
        mcp.middleware.append(unknown_argument_guard(mcp))
        mcp.middleware.append(prompt_argument_guard(mcp))
        register_tools(mcp, memory, scopes, notifier)
        register_task_tools(mcp, tasks, memory, scopes, notifier)
        codes = stack.enter_context(closing(ForgetCodes.for_settings(settings)))
        erasure = ErasureService(store, clock=clock, codes=codes)
        register_erasure_tool(mcp, erasure, scopes, notifier)
        control = stack.enter_context(closing(ControlStore.for_settings(settings)))
        stats = StatsService(store, control, full_paths=transport == "stdio", llm=llm, switch=memory.switch)
        register_stats_tool(mcp, stats, scopes)
        register_summary_tool(mcp, memory, scopes)
        browse = BrowseService(store, memory, clock=clock)
        register_browse_tools(mcp, browse, scopes, notifier)
        register_resources(mcp, memory, tasks, stats, scopes)
        register_prompts(mcp, memory, tasks, scopes)
        register_completions(mcp, tasks, scopes)
        client_log.install(mcp)
        golden = GoldenService(store, memory, settings.lifecycle, clock=clock)
        register_golden_tool(mcp, golden, scopes)
        scheduler = Scheduler(
            store,
            control,
            LifecycleService(store, embedder, settings.lifecycle, llm=llm),
            settings.lifecycle,
            clock=clock,
            facts=FactService(store, memory, llm),
            switch=memory.switch,
            golden=golden,
        )
        assert settings.memory_file is not None  # load_settings puts it beside the config
        runtime = Runtime(
            settings,
            store,
            embedder,
            memory,
            tasks,
            scheduler,
            mcp,
            ChangeWatcher(notifier, memory, tasks),
            MemoryFile(memory, settings.memory_file, Scope(settings.principal), settings.limits, control),
            browse,
            stats,
            erasure,
        )
        metrics.add_gauge(
            "mcp_memory_memories_indexed",
            "Memories in the vector indexes of the principals this process has served.",
            store.vectors.total,
        )
        for key, help_text in (
            ("open_principals", "Principal files this process holds open (bounded by pool.max_open)."),
            ("index_bytes", "Bytes of the vector indexes held (bounded by pool.index_budget_mb)."),
            ("evicted_files", "Principal files the pool has closed since start (they reopen on use)."),
            ("evicted_indexes", "Vector indexes the pool has dropped since start (they reload on use)."),
        ):
            metrics.add_gauge(f"mcp_memory_pool_{key}", help_text, functools.partial(_pool_figure, store, key))
        failure: BaseException | None = None
        stop = anyio.Event()
        async with anyio.create_task_group() as background:
            # A server loads the local principal's index ahead of the first call; one-shot commands
            # need not, and with tokens each principal's index loads on its first call.
            if warm and not tokens:
                background.start_soon(memory.warm, Scope(settings.principal, settings.namespace))
            if warm and settings.lifecycle.enabled:
                background.start_soon(scheduler.run, stop)
            if warm:  # what other processes and the passes change reaches this process's subscribers
                background.start_soon(runtime.watcher.run, stop)
                background.start_soon(runtime.memory_file.watch, stop)
            try:
                yield runtime
            except BaseException as exc:  # re-raised below, outside the task group, unwrapped
                failure = exc
            finally:
                stop.set()
            # Background work is not cancelled midway: a cancelled SQLite call would be answered by
            # its worker thread after the loop has gone. Closing waits for the warm-up and the pass.
        if failure is not None:
            raise failure


def _pool_figure(store: Store, key: str) -> float:
    return float(store.pool_figures().get(key, 0))


_NO_DATA = frozenset({"initialize", "ping", "tools/list", "prompts/list", "resources/templates/list"})


def principal_lease(store: Store, scopes: ScopeResolver) -> ServerMiddleware[Any]:
    """Server middleware: the caller's principal stays open while its request runs, and no longer:
    an idle MCP session holds no file (ADR 21). Out of descriptors, the request gets a JSON-RPC
    error that says to retry and what the operator raises, and the server goes on."""

    async def lease(ctx: ServerRequestContext[Any, Any], call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        if ctx.method in _NO_DATA:
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


def settle_heap() -> None:
    """Keep what start-up built (modules, schemas, the tools' models) out of the cyclic collector's
    full passes, which under load stalled every request for about 100 ms each second; what the
    requests create is still collected."""
    gc.collect()
    gc.freeze()


async def serve_stdio(settings: Settings) -> None:
    async with open_runtime(settings, transport="stdio") as runtime:
        settle_heap()
        await run_stdio(runtime.mcp)


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
    through a one-time link printed on stderr (and opened in the browser)."""
    http = settings.http.model_copy(update={"host": "127.0.0.1", "port": settings.ui.port, "auth": "none"})
    settings = settings.model_copy(update={"http": http, "ui": settings.ui.model_copy(update={"enabled": True})})
    listener = _listen(http)
    try:
        await _serve_gateway(settings, "http", None, None, listener, ui_only=True, open_browser=open_browser)
    finally:
        listener.close()


def _inspector(
    runtime: Runtime, identify: Identify, tokens: TokenStore | None, local: Scope | None, sessions: UiSessionStore
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
    async with open_runtime(settings, transport=transport) as runtime, AsyncExitStack() as stack:
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
    principal, the inspector's one-time sign-in link goes to stderr only, never to a log file."""
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
    """A one-time sign-in link goes to the terminal (stderr) only, never to a log file."""
    sys.stderr.write(f"mcp-memory inspector: open {link} (a one-time link, good for 10 minutes)\n")
    sys.stderr.flush()
