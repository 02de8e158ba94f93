"""The composition root: reads settings, builds every resource once per process, owns them.

The store, the embedder and the services outlive every MCP connection; the SDK's per-connection
lifespan is not used to own anything (on SSE it runs once per connection). Serving stdio is here;
the network transports and the inspector are in ``gateway``, which a stdio server never imports.
"""

from __future__ import annotations

import functools
import gc
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, closing, contextmanager
from dataclasses import dataclass
from typing import Any

import anyio
from mcp.server.context import ServerMiddleware, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError

from mcp_memory import __version__, client_log, descriptors, metrics
from mcp_memory.assembly import Store, open_core
from mcp_memory.browse_tools import register_browse_tools
from mcp_memory.completions import register_completions
from mcp_memory.config import Settings
from mcp_memory.embed.loader import Embedder
from mcp_memory.erasure_tool import register_erasure_tool
from mcp_memory.errors import MemoryServerError, OutOfFilesError
from mcp_memory.golden_tool import register_golden_tool
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
from mcp_memory.tools import (
    register_stats_tool,
    register_summary_tool,
    register_task_tools,
    register_tools,
    unknown_argument_guard,
)
from mcp_memory.unknown_names import unknown_name_guard

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
        with _sdk_logging_left_alone():
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
            lambda: store.vectors.total(),  # the engine is chosen as the store opens (ADR 23)
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


_NO_DATA = frozenset({"initialize", "ping", "tools/list", "prompts/list", "resources/templates/list"})


def principal_lease(store: Store, scopes: ScopeResolver) -> ServerMiddleware[Any]:
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
