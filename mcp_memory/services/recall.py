"""How recall ranks what its two searches found and fits the best into the token budget.

MemoryService.recall runs the searches and reads the records; here are the steps after: the value
function per candidate, the newer side of a supersession first, packing hits into the budget, and
how a record goes out on the wire (``memory_out``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from datetime import datetime
from typing import Any

import anyio
import orjson

from mcp_memory.models import MemoryRecord, to_datetime
from mcp_memory.schemas import MemoryOut, Signals
from mcp_memory.services import scoring
from mcp_memory.text import estimate_tokens


async def concurrently(*calls: Awaitable[Any]) -> list[Any]:
    """Await all of ``calls`` at once; the first failure is raised as itself (not as a group)."""
    results: list[Any] = [None] * len(calls)
    errors: list[BaseException] = []

    async def run(i: int, call: Awaitable[Any]) -> None:
        try:
            results[i] = await call
        except Exception as exc:
            errors.append(exc)

    async with anyio.create_task_group() as tg:
        for i, call in enumerate(calls):
            tg.start_soon(run, i, call)
    if errors:
        raise errors[0]
    return results


def score(
    ranked: Sequence[int],
    records: Mapping[int, MemoryRecord],
    *,
    fused: Mapping[int, float],
    dense: Sequence[tuple[int, float]],
    keyword: Sequence[tuple[int, float]],
    dense_rank: Mapping[int, int],
    keyword_rank: Mapping[int, int],
    preset: str,
    half_life_hours: float,
    now: float,
) -> list[tuple[float, MemoryRecord, Signals]]:
    """The value of every candidate but the pinned ones (they come back apart): best first, the newer
    side of a supersession ahead of the older."""
    dense_score, keyword_score = dict(dense), dict(keyword)
    scored: list[tuple[float, MemoryRecord, Signals]] = []
    for n in ranked:
        record = records.get(n)
        if record is None or record.pinned:
            continue
        hours = (now - (record.last_accessed_at or record.created_at)) / 3600
        t = scoring.recency(hours, half_life_hours)
        f = scoring.frequency(record.access_count)
        v = scoring.value(preset, fused[n], t, f, record.importance)
        signals = Signals(
            dense=dense_score.get(n),
            dense_rank=dense_rank.get(n),
            keyword=keyword_score.get(n),
            keyword_rank=keyword_rank.get(n),
            relevance=round(fused[n], 6),
            recency=round(t, 6),
            frequency=f,
            importance=record.importance,
            value=round(v, 6),
        )
        scored.append((v, record, signals))
    scored.sort(key=lambda item: -item[0])
    scored = scoring.newer_side_first(scored)
    return scored


def fit_budget(
    scored: Sequence[tuple[float, MemoryRecord, Signals]], k: int, budget: int, explain: bool
) -> tuple[list[MemoryOut], int, int]:
    """The best ``k`` hits whose tokens fit the budget: (hits, tokens used, hits left out for the budget)."""
    hits: list[MemoryOut] = []
    used = 0
    omitted = 0
    for _, record, signals in scored:
        if len(hits) >= k:
            break
        hit = memory_out(record, signals if explain else None)
        if used + hit.tokens > budget:
            omitted += 1
            continue
        used += hit.tokens
        hits.append(hit)
    return hits, used, omitted


def memory_out(record: MemoryRecord, why: Signals | None = None) -> MemoryOut:
    """A record as the tools return it, with the tokens it costs a budget."""

    def dt(seconds: float) -> datetime:
        moment = to_datetime(seconds)
        assert moment is not None
        return moment

    out = MemoryOut(
        id=record.id,
        text=record.content,
        kind=record.kind,
        tags=record.tags,
        metadata=record.metadata,
        importance=record.importance,
        pinned=record.pinned,
        namespace=record.namespace,
        key=record.key,
        occurred_at=dt(record.occurred_at),
        created_at=dt(record.created_at),
        last_accessed_at=to_datetime(record.last_accessed_at),
        access_count=record.access_count,
        valid_from=dt(record.valid_from),
        valid_to=to_datetime(record.valid_to),
        superseded_by=record.superseded_by,
        expires_at=to_datetime(record.expires_at),
        tier=record.tier,
        level=record.level,
        language=record.language,
        session_key=record.session_key,
        task_id=record.task_id,
        client_name=record.provenance.client_name,
        transport=record.provenance.transport,
        occurrence_ids=record.occurrence_ids,
        conflicts_with=record.conflicts_with,
        source_ids=record.source_ids,
        tokens=0,
        why=why,
    )
    # What a budget counts: the hit as the caller receives it, every field included.
    out.tokens = estimate_tokens(orjson.dumps(out.model_dump(mode="json")).decode())
    return out
