"""The memory tools: remember, recall, forget, pin, unpin, undo_summary, stats.

Each is arguments -> Scope -> service call -> pydantic result; the registration table (``table``)
turns our errors into ``is_error`` results and counts every call.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult
from pydantic import Field, ValidationError

from mcp_memory.core.errors import InvalidInputError
from mcp_memory.core.numbers import Bool, Float, Int
from mcp_memory.core.recalled import Detail
from mcp_memory.mcp import lines, wire_memory, wire_recall
from mcp_memory.mcp.face import Face, compact, problems, shown
from mcp_memory.mcp.notify import pin_uris
from mcp_memory.mcp.recall_schemas import RecallResult
from mcp_memory.mcp.schemas import (
    ForgetFilter,
    ForgetResult,
    MemoryInput,
    PinResult,
    RecallFilters,
    RememberResult,
    StatsResult,
    UndoSummaryResult,
)
from mcp_memory.mcp.templates import recall_lines, remember_lines
from mcp_memory.mcp.wire_upkeep import stats_result
from mcp_memory.metrics import REMEMBERED
from mcp_memory.services.memory import CallContext


def _doc(field: str) -> str:
    """The description a MemoryInput field carries, for the same parameter of the flat form."""
    return MemoryInput.model_fields[field].description or ""


REMEMBER_DOC = """Store one memory (content, kind, ...) or several (memories=[...]) for later recall.

Per item the result says stored, merged (an equivalent memory exists; this occurrence was
recorded on it) or rejected (with the reason, e.g. an acknowledgement such as "ok").
Give `key` to keep one current value of a fact (a later memory with the same key supersedes the
earlier, history kept) or `supersedes` with the ids it replaces. Secrets are redacted."""

RECALL_DOC = """Find the memories that matter for a question, within k and a token budget.

Hybrid search (meaning + keywords) ranked by relevance, recency, use and importance. Each hit
carries its id, text, when it happened, a score and why it was recalled, plus only what is not at
its default: kind (unless fact), strong=true, conflicts, replacements, summary sources. The text
block gives each hit one line (text, date, why, id). detail="full" returns whole records,
explain=true adds every signal's score (both as JSON in the text block too). Pinned memories
come back in `pinned` and do not count against k.
Recall strengthens what it returns unless reinforce=false. Quotes, brackets, * and AND/OR/NOT
in the question are searched as words."""

FORGET_DOC = """Delete memories by ids or by a filter (tags, kinds, time range, task).

A dry run by default: it lists what would go. Call again with dry_run=false to delete; the
text is then removed from every table and index and cannot be recovered."""

UNDO_SUMMARY_DOC = (
    "Undo a summary the lifecycle made (a hit with level >= 1 and source_ids): its sources come "
    "back to normal recall and the summary is deleted."
)

STATS_DOC = (
    "How much this server holds for you (memories by tier, level and state; tasks; checkpoints), "
    "whether memory is switched off, the memories' events, the lifecycle's pending work and last passes, "
    "the golden queries' last check and rollbacks, and how the process is doing (model, index size, uptime)."
)

PIN_DOC = (
    "Pin a memory (a goal, rule, identity or safety constraint): it then always comes back with "
    "recall and resume, in their `pinned` field, and is never compressed or decayed. Pins share a token cap."
)

UNPIN_DOC = "Unpin a memory: it goes back to being recalled by relevance only."


def _one_memory(**fields: Any) -> list[MemoryInput]:
    """The flat form of remember as a batch of one, its problems named field by field."""
    try:
        return [MemoryInput(**fields)]
    except ValidationError as exc:
        raise InvalidInputError("memories", problems("memories", exc)) from None


async def remember(
    face: Face,
    ctx: Context,
    content: Annotated[str | None, Field(description="the text of one memory")] = None,
    kind: Annotated[str, Field(description=_doc("kind"))] = "fact",
    importance: Annotated[Float | None, Field(description="0..1; estimated when absent")] = None,
    tags: Annotated[list[str] | None, Field(description="labels to filter by later")] = None,
    metadata: Annotated[dict[str, Any] | None, Field(description=_doc("metadata"))] = None,
    occurred_at: Annotated[datetime | None, Field(description="when it happened, ISO 8601")] = None,
    task_id: Annotated[str | None, Field(description="the task this memory belongs to")] = None,
    session_id: Annotated[str | None, Field(description=_doc("session_id"))] = None,
    ttl_seconds: Annotated[Int | None, Field(description=_doc("ttl_seconds"))] = None,
    supersedes: Annotated[list[str] | None, Field(description=_doc("supersedes"))] = None,
    key: Annotated[str | None, Field(description=_doc("key"))] = None,
    pinned: Annotated[Bool, Field(description="always return it with recall and resume")] = False,
    memories: Annotated[
        list[MemoryInput] | None,
        Field(description="several memories at once, each with the fields above (content required)"),
    ] = None,
) -> Annotated[CallToolResult, RememberResult]:
    if memories is not None and content is not None:
        raise InvalidInputError("memories", "give either content (one memory) or memories (a batch), not both")
    if memories is None and content is None:
        raise InvalidInputError("content", "is missing; give the text to remember (or memories=[...])")
    given = (
        list(memories)
        if memories is not None
        else _one_memory(
            content=content or "",
            kind=kind,
            importance=importance,
            tags=tags or [],
            metadata=metadata or {},
            occurred_at=occurred_at,
            task_id=task_id,
            session_id=session_id,
            ttl_seconds=ttl_seconds,
            supersedes=supersedes or [],
            key=key,
            pinned=pinned,
        )
    )
    items = [wire_memory.draft(item) for item in given]

    async def progress(done: int, total: int, what: str) -> None:
        await ctx.report_progress(done, total, f"{done} of {total} memories {what}")

    scopes = face.scopes
    done = await face.memory.remember(scopes.scope(ctx), items, CallContext(scopes.provenance(ctx), progress))
    for outcome in ("stored", "merged", "rejected"):
        REMEMBERED.inc(done.count(outcome), result=outcome)
    if any(item.pinned for item in items):
        await face.notifier.changed(pin_uris())
    result = wire_memory.remember_result(done)
    return shown(result, remember_lines(result))


async def recall(
    face: Face,
    ctx: Context,
    query: Annotated[str, Field(description="the question or topic, any language (limits.max_query_chars: 2000)")],
    k: Annotated[Int | None, Field(description="how many memories at most (default 10; limits.max_k: 50)")] = None,
    budget_tokens: Annotated[
        Int | None,
        Field(description="token budget for the hits, 200 to limits.max_recall_budget_tokens (32000); default 2000"),
    ] = None,
    filters: RecallFilters | None = None,
    explain: Bool = False,
    reinforce: Bool = True,
    preset: Annotated[str | None, Field(description="assistant (default), chat or medical")] = None,
    detail: Annotated[Detail, Field(description="lean hits (default) or full records")] = "lean",
    as_of: Annotated[
        datetime | None,
        Field(
            description='the moment "last week" or "yesterday" in the question count from (default now); '
            "its UTC offset says whose days they are (without one: a UTC time, in the days of the server's "
            "recall.timezone)"
        ),
    ] = None,
    floor: Annotated[
        Bool, Field(description="leave out memories no closer to the question than the ordinary (default true)")
    ] = True,
) -> Annotated[CallToolResult, RecallResult]:
    found = await face.memory.recall(
        face.scopes.scope(ctx),
        query,
        k=k,
        budget_tokens=budget_tokens,
        filters=wire_memory.memory_filter(filters),
        explain=explain,
        reinforce=reinforce,
        preset=preset,
        detail=detail,
        as_of=as_of,
        floor=floor,
    )
    result = wire_recall.recall_result(found)
    # Asked for whole records or every signal: the text block carries them too, as JSON.
    return compact(result, None if explain or detail == "full" else recall_lines(result))


async def forget(
    face: Face,
    ctx: Context,
    ids: list[str] | None = None,
    filters: Annotated[ForgetFilter | None, Field(description="tags, kinds, time range, task")] = None,
    dry_run: Bool = True,
) -> Annotated[CallToolResult, ForgetResult]:
    where = wire_memory.memory_filter(filters)
    done = await face.memory.forget(face.scopes.scope(ctx), ids=ids, where=where, dry_run=dry_run)
    if done.deleted:
        await face.notifier.changed(pin_uris())
    result = wire_memory.forget_result(done)
    return shown(result, lines.forget_lines(result))


async def pin(face: Face, ctx: Context, id: str) -> Annotated[CallToolResult, PinResult]:
    return await _pin(face, ctx, id, True)


async def unpin(face: Face, ctx: Context, id: str) -> Annotated[CallToolResult, PinResult]:
    return await _pin(face, ctx, id, False)


async def _pin(face: Face, ctx: Context, memory_id: str, pinned: bool) -> CallToolResult:
    total = await face.memory.pin(face.scopes.scope(ctx), memory_id, pinned)
    await face.notifier.changed(pin_uris())
    result = wire_memory.pin_result(memory_id, pinned, total, face.memory.limits.pinned_cap_tokens)
    return shown(result, lines.pin_lines(result))


async def undo_summary(face: Face, ctx: Context, id: str) -> UndoSummaryResult:
    restored = await face.memory.undo_summary(face.scopes.scope(ctx), id)
    return UndoSummaryResult(summary_id=id, restored=restored)


async def stats(face: Face, ctx: Context) -> Annotated[CallToolResult, StatsResult]:
    result = stats_result(await face.stats.stats(face.scopes.scope(ctx)))
    return shown(result, lines.stats_lines(result))
