"""StatsService: counts and process facts for the stats tool and the memory://stats resource."""

from __future__ import annotations

import os
import time
from typing import Any

from mcp_memory.core.models import Scope, to_datetime
from mcp_memory.core.schemas import StatsResult
from mcp_memory.embed.loader import models_loaded
from mcp_memory.llm.client import LlmClient
from mcp_memory.metrics import Process
from mcp_memory.services import summarize
from mcp_memory.services.control_ports import PassControl
from mcp_memory.services.facts import FACT_KINDS
from mcp_memory.services.ports import MemoryStore
from mcp_memory.services.switch import SwitchState, off_reason


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

    async def stats(self, scope: Scope) -> StatsResult:
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
        passes = [_pass_out(p) for p in await self.control.recent(5)]
        return StatsResult(
            memory_switch=await off_reason(self.switch, scope) or "on",
            principal_file=str(path if self.full_paths else path.name),
            memories=await self.counts.tier_counts(scope),
            events=await self.counts.event_counts(scope),
            tables=await self.counts.visible_counts(scope),
            # the index holds every namespace of the principal: shown to a principal-wide caller only
            vector_index_rows=self.store.vectors.size(scope) if scope.namespace is None else None,
            vector_engine=self.store.vectors.name,
            embedding_model=model_id,
            embedding_dimension=dim,
            models_loaded_in_process=models_loaded(),
            schedulers_running_in_process=Process.schedulers_running,
            process_id=os.getpid(),
            uptime_seconds=round(time.monotonic() - self.started, 3),
            recent_passes=passes,
            pending=pending,
            fact_check={
                "passed": passed,
                "failed": failed,
                "pass_rate": round(passed / (passed + failed), 3) if passed + failed else None,
            },
            llm=await self.llm.usage(scope.principal) if self.llm is not None else None,
            golden=await self._golden(scope),
        )

    async def _golden(self, scope: Scope) -> dict[str, Any]:
        recent, rollbacks = await self.store.golden.checks(scope)
        last = recent[0] if recent else None
        return {
            "queries": len(await self.store.golden.queries(scope)),
            "rollbacks": rollbacks,
            "last_check": None
            if last is None
            else {
                "at": _iso(last.at),
                "recall_before": round(last.before, 4),
                "recall_after": round(last.after, 4),
                "rolled_back": last.rolled_back,
            },
        }


def _pass_out(recorded: dict[str, Any]) -> dict[str, Any]:
    """A pass as stats shows it: no holder, no per-principal details, times as ISO 8601 like every
    other time the tools return."""
    out = {k: v for k, v in recorded.items() if k not in ("details", "holder")}
    for key in ("started_at", "finished_at"):
        out[key] = _iso(out.get(key))
    return out


def _iso(seconds: float | None) -> str | None:
    moment = to_datetime(seconds)
    return moment.isoformat() if moment is not None else None
