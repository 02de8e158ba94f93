"""StatsService: counts and process facts for the stats tool and the memory://stats resource."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from mcp_memory.core.models import GoldenCheckRow, Scope
from mcp_memory.embed.loader import models_loaded
from mcp_memory.llm.client import LlmClient
from mcp_memory.metrics import Process
from mcp_memory.services import summarize
from mcp_memory.services.control_ports import PassControl
from mcp_memory.services.facts import FACT_KINDS
from mcp_memory.services.ports import MemoryStore
from mcp_memory.services.switch import SwitchState, off_reason


@dataclass(frozen=True, slots=True)
class Stats:
    """What this server holds for the caller and how the process is doing (times in seconds)."""

    off_reason: str | None  # why memory is off for the caller (the kill switch); None when on
    principal_file: str  # the whole path, or only the file's name for a remote caller
    memories: dict[str, int]
    events: dict[str, int]
    tables: dict[str, int]
    vector_index_rows: int | None
    vector_engine: str
    embedding_model: str | None
    embedding_dimension: int | None
    models_loaded: int
    schedulers_running: int
    process_id: int
    uptime_seconds: float
    recent_passes: list[dict[str, Any]]  # without holder or per-principal details
    pending: dict[str, int]
    fact_checks_passed: int
    fact_checks_failed: int
    llm_usage: dict[str, Any] | None
    golden_queries: int
    golden_rollbacks: int
    last_golden_check: GoldenCheckRow | None


class StatsService:
    def __init__(
        self,
        store: MemoryStore,
        control: PassControl,
        *,
        full_paths: bool = True,
        llm: LlmClient | None = None,
        switch: SwitchState | None = None,
    ) -> None:
        self.llm = llm
        self.switch = switch
        # A remote client learns the file's name, not where the server keeps its data.
        self.full_paths = full_paths
        self.store = store
        self.rows = store.lifecycle
        self.counts = store.counts
        self.control = control
        self.started = time.monotonic()

    async def stats(self, scope: Scope) -> Stats:
        model_id, dim = await self.store.stored_model(scope)
        path = self.store.path_for(scope)
        pending = await self.counts.pending(scope, summarize.MAX_FAILURES)
        passed, failed = pending.pop("fact_check_passed"), pending.pop("fact_check_failed")
        if self.llm is None:  # nothing judges conflicts or reads memories for facts without an LLM
            del pending["conflicts_not_yet_judged"]
        else:
            pending["memories_not_yet_read_for_facts"] = await self.rows.unread_for_facts(scope, FACT_KINDS)
        # The passes run over every principal of the data directory: their times and outcomes are
        # shown, not their counts (those would tell one user what the others hold).
        passes = [{k: v for k, v in p.items() if k not in ("details", "holder")} for p in await self.control.recent(5)]
        recent, rollbacks = await self.store.golden.checks(scope)
        return Stats(
            off_reason=await off_reason(self.switch, scope),
            principal_file=str(path if self.full_paths else path.name),
            memories=await self.counts.tier_counts(scope),
            events=await self.counts.event_counts(scope),
            tables=await self.counts.visible_counts(scope),
            # the index holds every namespace of the principal: shown to a principal-wide caller only
            vector_index_rows=self.store.vectors.size(scope) if scope.namespace is None else None,
            vector_engine=self.store.vectors.name,
            embedding_model=model_id,
            embedding_dimension=dim,
            models_loaded=models_loaded(),
            schedulers_running=Process.schedulers_running,
            process_id=os.getpid(),
            uptime_seconds=time.monotonic() - self.started,
            recent_passes=passes,
            pending=pending,
            fact_checks_passed=passed,
            fact_checks_failed=failed,
            llm_usage=await self.llm.usage(scope.principal) if self.llm is not None else None,
            golden_queries=len(await self.store.golden.queries(scope)),
            golden_rollbacks=rollbacks,
            last_golden_check=recent[0] if recent else None,
        )
