"""Recall's answer on the wire: the domain hits and pinned records (``core/recalled.py``) as the
recall tool's shapes (``recall_schemas.py``), and ``hit_tokens``, the measure of a hit as it is sent
that recall's budget counts with (the entry points hand it to ``MemoryService``)."""

from __future__ import annotations

from dataclasses import asdict

import orjson
from pydantic import BaseModel

from mcp_memory.core import recalled
from mcp_memory.core.caution import caution, reveal
from mcp_memory.core.models import MemoryRecord, at, to_datetime
from mcp_memory.core.recalled import Detail, Recalled, Recollection
from mcp_memory.core.text import estimate_tokens
from mcp_memory.mcp.recall_schemas import Hit, MemoryOut, Pin, RecallResult, Signals


def recall_result(answer: Recollection) -> RecallResult:
    return RecallResult(
        query=answer.query,
        hits=[hit_out(h, answer.detail) for h in answer.hits],
        pinned=pins_as(answer.detail, answer.pinned),
        preset=answer.preset,
        budget_tokens=answer.budget_tokens,
        used_tokens=answer.used_tokens,
        omitted_for_budget=answer.omitted_for_budget,
        below_floor=answer.below_floor,
        note=answer.note,
        strength=answer.strength,
    )


def hit_tokens(hit: Recalled, detail: Detail) -> int:
    """The tokens ``hit`` costs a budget: the hit as it is sent, compact JSON without unset fields. A
    whole record carries its own count, so it is measured with the count last measured in it."""
    return wire_tokens(hit_out(hit, detail))


def hit_out(hit: Recalled, detail: Detail) -> Hit | MemoryOut:
    if detail == "full":
        out = memory_out(hit.record)
        update = {
            "score": hit.score,
            "why": hit.why,
            "strong": hit.strength == "strong",
            "signals": _signals(hit.signals),
        }
        return out.model_copy(update={**update, "tokens": hit.tokens or out.tokens})
    record = hit.record
    flag = caution(record.content)
    return Hit(
        id=record.id,
        text=reveal(record.content) if flag else record.content,
        caution=flag,
        kind=record.kind,
        occurred_at=at(int(record.occurred_at)),
        score=hit.score,
        why=hit.why,
        strong=hit.strength == "strong",
        conflicts_with=record.conflicts_with or None,
        superseded_by=record.superseded_by,
        source_ids=record.source_ids or None,
        signals=_signals(hit.signals),
    )


def pins_as(detail: Detail, pins: list[MemoryRecord]) -> list[Pin | MemoryOut]:
    """The pinned memories recall returns: the rule and what to beware of, or (``full``) the records."""
    whole = [memory_out(p) for p in pins]
    if detail == "full":
        return list(whole)
    return [
        Pin(
            id=p.id,
            text=p.text,
            kind=p.kind,
            occurred_at=p.occurred_at.replace(microsecond=0),
            conflicts_with=p.conflicts_with or None,
            caution=p.caution,
        )
        for p in whole
    ]


def wire_tokens(model: BaseModel) -> int:
    """The tokens of ``model`` as the tools send it: compact JSON, unset fields left out."""
    return estimate_tokens(orjson.dumps(model.model_dump(mode="json", exclude_none=True)).decode())


def _signals(signals: recalled.Signals | None) -> Signals | None:
    return None if signals is None else Signals(**asdict(signals))


def memory_out(record: MemoryRecord) -> MemoryOut:
    """A record as the tools return it, with the tokens it costs a budget."""
    flag = caution(record.content)
    out = MemoryOut(
        id=record.id,
        text=reveal(record.content) if flag else record.content,
        caution=flag,
        kind=record.kind,
        tags=record.tags,
        metadata=record.metadata,
        importance=record.importance,
        pinned=record.pinned,
        namespace=record.namespace,
        key=record.key,
        occurred_at=at(record.occurred_at),
        created_at=at(record.created_at),
        last_accessed_at=to_datetime(record.last_accessed_at),
        access_count=record.access_count,
        valid_from=at(record.valid_from),
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
    )
    # What a budget counts: the hit as the caller receives it, every field included.
    out.tokens = estimate_tokens(orjson.dumps(out.model_dump(mode="json")).decode())
    return out
