"""The upkeep family on the wire: stats, forget_user and golden_queries, built from the services'
records (times as ISO 8601 UTC, the agent's instructions in the notes)."""

from __future__ import annotations

from typing import Any

from mcp_memory.core.models import GoldenCheckRow, GoldenRow, to_datetime
from mcp_memory.mcp.schemas import ForgetUserResult, GoldenQueriesResult, GoldenQueryOut, StatsResult
from mcp_memory.services.erasure import CODE_SECONDS, Erasure
from mcp_memory.services.golden import Measure
from mcp_memory.services.stats import Stats


def _iso(seconds: float | None) -> str | None:
    moment = to_datetime(seconds)
    return moment.isoformat() if moment is not None else None


def stats_result(stats: Stats) -> StatsResult:
    passed, failed, last = stats.fact_checks_passed, stats.fact_checks_failed, stats.last_golden_check
    return StatsResult(
        memory_switch=stats.off_reason or "on",
        principal_file=stats.principal_file,
        memories=stats.memories,
        events=stats.events,
        tables=stats.tables,
        vector_index_rows=stats.vector_index_rows,
        vector_engine=stats.vector_engine,
        embedding_model=stats.embedding_model,
        embedding_dimension=stats.embedding_dimension,
        models_loaded_in_process=stats.models_loaded,
        schedulers_running_in_process=stats.schedulers_running,
        process_id=stats.process_id,
        uptime_seconds=round(stats.uptime_seconds, 3),
        # times as ISO 8601 like every other time the tools return
        recent_passes=[
            {**p, "started_at": _iso(p.get("started_at")), "finished_at": _iso(p.get("finished_at"))}
            for p in stats.recent_passes
        ],
        pending=stats.pending,
        fact_check={
            "passed": passed,
            "failed": failed,
            "pass_rate": round(passed / (passed + failed), 3) if passed + failed else None,
        },
        llm=stats.llm_usage,
        golden={
            "queries": stats.golden_queries,
            "rollbacks": stats.golden_rollbacks,
            "last_check": None if last is None else _check(last, detail=False),
        },
    )


def _check(check: GoldenCheckRow, *, detail: bool) -> dict[str, Any]:
    """A golden check: when, recall@k before and after the pass, whether it was rolled back."""
    counted = {"queries": check.queries} if detail else {}
    return {
        "at": _iso(check.at),
        **counted,
        "recall_before": round(check.before, 4),
        "recall_after": round(check.after, 4),
        "rolled_back": check.rolled_back,
        **(check.detail if detail else {}),
    }


def forget_user_result(erasure: Erasure) -> ForgetUserResult:
    if not erasure.dry_run:
        note = (
            "every memory, occurrence, embedding, index entry, task, checkpoint and pin of this user was "
            f"deleted, {erasure.leaves}"
        )
    elif erasure.withdrawn:
        note = "the user declined: nothing was deleted, and no confirmation code is open"
    else:
        note = (
            "nothing was deleted. To delete ALL of this user's memories, tasks, checkpoints and pins, "
            "first confirm with the user, then call forget_user again with this confirmation_code "
            f"within {CODE_SECONDS // 60} minutes."
        )
    return ForgetUserResult(
        dry_run=erasure.dry_run,
        counts=erasure.counts,
        confirmation_code=erasure.confirmation_code,
        code_expires_at=to_datetime(erasure.code_expires_at),
        erased_at=to_datetime(erasure.erased_at),
        note=note,
    )


def golden_result(
    k: int, rows: list[GoldenRow], measure: Measure | None, checks: tuple[list[GoldenCheckRow], int]
) -> GoldenQueriesResult:
    """The golden queries (with ``measure``: every probe, the sampled ones too, and whether recall
    finds it now) and how the last checks went."""
    if measure is None:
        listed = [GoldenQueryOut(id=q.id, query=q.query, memory_id=q.memory_id, namespace=q.namespace) for q in rows]
    else:
        listed = [
            GoldenQueryOut(
                id=p.id, query=p.query, memory_id=p.memory_id, namespace=p.namespace, found=measure.found[p.id]
            )
            for p in measure.probes
        ]
    recent, rollbacks = checks
    return GoldenQueriesResult(
        queries=listed,
        k=k,
        recall_at_k=round(measure.recall, 4) if measure is not None else None,
        recent_checks=[_check(c, detail=True) for c in recent],
        rollbacks=rollbacks,
    )
