"""The MCP server: the composed runtime with its MCP face, and the work a serving process runs
beside its requests. Serving stdio is here; the network transports and the inspector are in
``gateway``, which a stdio server never imports.
"""

from __future__ import annotations

import functools
import gc
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, fields
from typing import Any

import anyio
from anyio.abc import TaskGroup
from mcp.server.mcpserver import MCPServer

from mcp_memory import __version__, metrics
from mcp_memory.compose import Runtime, Store, open_runtime
from mcp_memory.config import Settings
from mcp_memory.core.models import Scope
from mcp_memory.mcp import client_log, table
from mcp_memory.mcp.face import Face
from mcp_memory.mcp.guards import principal_lease, prompt_argument_guard, unknown_argument_guard, unknown_name_guard
from mcp_memory.mcp.notify import ChangeWatcher, ResourceNotifier
from mcp_memory.mcp.stdio import run_stdio
from mcp_memory.mcp.wire_recall import hit_tokens
from mcp_memory.scope import ScopeResolver, record_request

INSTRUCTIONS = """mcp-memory gives you long-term memory across sessions and clients.
Call `recall` with the user's question before answering when earlier context may matter.
Call `remember` for facts, preferences, decisions and events worth keeping (not for small talk).
Use `forget` when the user asks you to delete something (dry run first)."""


@dataclass(frozen=True)
class Server(Runtime):
    """The runtime with its MCP face: the SDK's server, what its functions take, and the watcher
    that tells subscribers what other processes changed."""

    mcp: MCPServer[Any]
    face: Face
    watcher: ChangeWatcher


@asynccontextmanager
async def open_server(
    settings: Settings,
    *,
    transport: str = "stdio",
    clock: Callable[[], float] = time.time,
    warm: bool = True,
) -> AsyncIterator[Server]:
    """The runtime (``compose.open_runtime``) served over MCP; with ``warm``, the background work
    runs beside the requests until the server closes."""
    async with open_runtime(settings, hit_cost=hit_tokens, transport=transport, clock=clock) as runtime:
        runtime.embedder.start()  # in the background: the handshake never waits for the model
        tokens = transport != "stdio" and settings.http.auth == "tokens"
        scopes = ScopeResolver(settings.principal, settings.namespace, transport=transport, tokens=tokens)
        mcp, face = build_server(runtime, scopes)
        parts = {f.name: getattr(runtime, f.name) for f in fields(Runtime)}
        server = Server(
            **parts,
            mcp=mcp,
            face=face,
            watcher=ChangeWatcher(face.notifier, runtime.memory, runtime.tasks, runtime.store.at_rest),
        )
        _add_gauges(runtime.store)
        failure: BaseException | None = None
        stop = anyio.Event()
        async with anyio.create_task_group() as background:
            if warm:
                _start_background(server, background, stop, warm_index=not tokens)
            try:
                yield server
            except BaseException as exc:  # re-raised below, outside the task group, unwrapped
                failure = exc
            finally:
                stop.set()
            # Background work is not cancelled midway: a cancelled SQLite call would be answered by
            # its worker thread after the loop has gone. Closing waits for the warm-up and the pass.
        if failure is not None:
            raise failure


def build_server(runtime: Runtime, scopes: ScopeResolver) -> tuple[MCPServer[Any], Face]:
    """The SDK's server with our middlewares and every entry of the registration table."""
    notifier = ResourceNotifier(scopes)
    with _sdk_logging_left_alone():
        mcp: MCPServer[Any] = MCPServer(
            "mcp-memory",
            version=__version__,
            instructions=INSTRUCTIONS,
            log_level=runtime.settings.log_level,
            middleware=[record_request],
            subscriptions=notifier.bus,
        )
    notifier.install(mcp)
    mcp.middleware.append(unknown_name_guard(mcp))
    mcp.middleware.append(principal_lease(runtime.store, scopes))
    mcp.middleware.append(unknown_argument_guard(mcp))
    mcp.middleware.append(prompt_argument_guard(mcp))
    face = Face(
        runtime.memory,
        runtime.tasks,
        runtime.stats,
        runtime.browse,
        runtime.erasure,
        runtime.golden,
        scopes,
        notifier,
        runtime.memory_file.settled,
    )
    table.register(mcp, face)
    client_log.install(mcp)
    return mcp, face


def _start_background(server: Server, group: TaskGroup, stop: anyio.Event, *, warm_index: bool) -> None:
    settings = server.settings
    # A server loads the local principal's index ahead of the first call; one-shot commands
    # need not, and with tokens each principal's index loads on its first call.
    if warm_index:
        group.start_soon(server.memory.warm, Scope(settings.principal, settings.namespace))
    if settings.lifecycle.enabled:
        group.start_soon(server.scheduler.run, stop)
    # What other processes and the passes change reaches this process's subscribers.
    group.start_soon(server.watcher.run, stop)
    server.memory_file.expect_first_look()  # before any call can come: the first ones wait for it
    group.start_soon(server.memory_file.watch, stop)


def _add_gauges(store: Store) -> None:
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


_SDK_LOGGING = "configure_logging"  # the name MCPServer.__init__ calls in its module


@contextmanager
def _sdk_logging_left_alone() -> Iterator[None]:
    """MCPServer's constructor calls the SDK's ``configure_logging``, which imports rich (about 30 ms
    of a stdio start) to build a handler for ``logging.basicConfig``; basicConfig changes nothing
    while the root logger has a handler, as it has once ``logs.configure_logging`` ran. Then the
    call is skipped; without a handler it runs as the SDK wrote it."""
    if not logging.getLogger().handlers:
        yield
        return
    from mcp.server.mcpserver import server as sdk_server

    configure = getattr(sdk_server, _SDK_LOGGING)
    setattr(sdk_server, _SDK_LOGGING, _leave_logging)
    try:
        yield
    finally:
        setattr(sdk_server, _SDK_LOGGING, configure)


def _leave_logging(level: str) -> None:
    """The root logger already has our handler: logging.basicConfig would do nothing."""


def _pool_figure(store: Store, key: str) -> float:
    return float(store.pool_figures().get(key, 0))


def settle_heap() -> None:
    """Keep what start-up built (modules, schemas, the tools' models) out of the cyclic collector's
    full passes, which under load stalled every request for about 100 ms each second; what the
    requests create is still collected. No collection first: it took 50 ms of a stdio start before
    the handshake, to free about 330 objects of start-up's garbage that stay frozen instead."""
    gc.freeze()


async def serve_stdio(settings: Settings) -> None:
    async with open_server(settings, transport="stdio") as server:
        settle_heap()
        await run_stdio(server.mcp)
