"""The memory pages: search (the real recall, with each hit's reasons and signals) and browse
(filters, pages), one memory with its history, and the corrections a person makes: correct,
pin or unpin, forget (the dry-run list first), undo a summary, settle a flagged conflict."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from mcp_memory.core.errors import InvalidInputError
from mcp_memory.core.models import MemoryFilter, Provenance
from mcp_memory.inspector.auth import Visitor
from mcp_memory.inspector.base import ROOT, Inspector, form_text, html, notice_of, page, redirect
from mcp_memory.mcp.recall_schemas import MemoryOut
from mcp_memory.mcp.schemas import ListedMemory
from mcp_memory.mcp.wire_memory import forget_result, memory_detail, memory_page
from mcp_memory.mcp.wire_recall import recall_result
from mcp_memory.services.intake import CallContext

FILTERS = ("kind", "tag", "namespace", "level", "pinned", "conflicts", "after", "before", "states")
CONTEXT = CallContext(Provenance(client_name="mcp-memory inspector", client_version=None, transport="http"))


def _day(text: str | None, field: str, end: bool = False) -> datetime | None:
    if not text:
        return None
    try:
        day = datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC)
        return day + timedelta(days=1) if end else day
    except (ValueError, OverflowError):
        raise InvalidInputError(field, f"must be a date from 0001-01-01 to 9999-12-30, not {text[:20]!r}") from None


def _filters(query: dict[str, str]) -> MemoryFilter:
    """The browse filters from the form's fields (empty fields filter nothing)."""
    given = {name: value.strip() for name, value in query.items() if name in FILTERS and value.strip()}
    states = given.get("states", "")
    level = given.get("level")
    if level is not None and level not in ("0", "1", "2", "3"):
        raise InvalidInputError("level", f"must be 0, 1, 2 or 3, not {level[:20]!r}")
    fields: dict[str, Any] = {
        "kinds": [given["kind"]] if "kind" in given else None,
        "tags": [given["tag"]] if "tag" in given else None,
        "namespace": given.get("namespace"),
        "level": None if level is None else int(level),
        "pinned": {"true": True, "false": False}.get(given.get("pinned", "")),
        "conflicts": True if given.get("conflicts") == "true" else None,
        "occurred_after": _day(given.get("after"), "after"),
        "occurred_before": _day(given.get("before"), "before", end=True),
        "include_superseded": states in ("all", "superseded"),
        "include_archived": states in ("all", "archived"),
        "include_expired": states == "all",
    }
    return MemoryFilter(**{k: v for k, v in fields.items() if v is not None})


@page
async def memories(request: Request, visitor: Visitor, inspector: Inspector) -> Response:
    query = dict(request.query_params)
    words = query.get("q", "").strip()
    filters = _filters(query)
    hits: list[Any] = []
    pinned: list[MemoryOut] = []
    listed: list[ListedMemory | MemoryOut] = []
    note = next_cursor = None
    if words:
        found = recall_result(
            await inspector.memory.recall(
                visitor.scope,
                words,
                k=20,
                budget_tokens=inspector.memory.limits.max_recall_budget_tokens,
                filters=filters,
                explain=True,
                reinforce=False,
                detail="full",
            )
        )
        hits = [h for h in found.hits if isinstance(h, MemoryOut) and _kept(h, filters)]
        pinned = [p for p in found.pinned if isinstance(p, MemoryOut) and _kept(p, filters)]  # recall gives them apart
        if found.below_floor:
            note = f"{found.below_floor} more were left out as no closer to the question than any memory."
    else:
        found_page = await inspector.browse.list_memories(
            visitor.scope, filters, cursor=query.get("cursor") or None, limit=50
        )
        listing = memory_page(found_page, "time", True)
        listed, next_cursor = listing.memories, listing.next_cursor
    return html(
        "memories.html",
        visitor=visitor,
        q=words,
        query=query,
        hits=hits,
        pinned=pinned,
        listed=listed,
        note=note,
        next_cursor=next_cursor,
        notice=notice_of(request, visitor),
    )


def _kept(hit: MemoryOut, filters: MemoryFilter) -> bool:
    """What recall's own filters cannot narrow: pinned, level and flagged conflicts."""
    return (
        (filters.pinned is None or hit.pinned == filters.pinned)
        and (filters.level is None or hit.level == filters.level)
        and (not filters.conflicts or bool(hit.conflicts_with))
    )


@page
async def memory(request: Request, visitor: Visitor, inspector: Inspector) -> Response:
    detail = memory_detail(await inspector.browse.get_memory(visitor.scope, request.path_params["memory_id"]))
    return html("memory.html", visitor=visitor, detail=detail, notice=notice_of(request, visitor))


@page
async def correct(request: Request, visitor: Visitor, inspector: Inspector) -> Response:
    memory_id = request.path_params["memory_id"]
    form = await request.form()
    before = memory_detail(await inspector.browse.get_memory(visitor.scope, memory_id)).memory
    text, kind = str(form.get("text", "")), str(form.get("kind", "")).strip()
    given = str(form.get("tags", ""))
    # The field shows the tags joined by ", ": sent back as shown, they are unchanged, whatever a tag holds.
    same = given.strip() == ", ".join(before.tags).strip()
    tags = sorted(before.tags) if same else sorted({t.strip() for t in given.split(",") if t.strip()})
    importance = _number(str(form.get("importance") or before.importance))
    changes: dict[str, Any] = {
        "text": text if text.strip() != before.text.strip() else None,
        "kind": kind if kind and kind != before.kind else None,
        "tags": tags if tags != sorted(before.tags) else None,
        "importance": importance if importance != before.importance else None,
    }
    if all(value is None for value in changes.values()):
        return redirect(f"{ROOT}/memories/{memory_id}", "Nothing to correct: the form came back as shown.", visitor)
    result = await inspector.browse.correct_memory(visitor.scope, memory_id, CONTEXT, **changes)
    changed = ", ".join(result.changed)
    said = f"Corrected ({changed}); the earlier version is kept in history."
    return redirect(f"{ROOT}/memories/{result.id}", said, visitor)


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InvalidInputError("importance", f"must be a number from 0 to 1, not {text[:20]!r}") from None


@page
async def pin(request: Request, visitor: Visitor, inspector: Inspector) -> Response:
    memory_id = request.path_params["memory_id"]
    pinned = await form_text(request, "pinned") == "yes"
    await inspector.memory.pin(visitor.scope, memory_id, pinned)
    return redirect(f"{ROOT}/memories/{memory_id}", "Pinned." if pinned else "Unpinned.", visitor)


@page
async def forget(request: Request, visitor: Visitor, inspector: Inspector) -> Response:
    memory_id = request.path_params["memory_id"]
    confirmed = await form_text(request, "confirm") == "yes"
    # A memory goes with the versions it replaced: an earlier wording must not stay behind.
    detail = memory_detail(await inspector.browse.get_memory(visitor.scope, memory_id))
    ids = [memory_id, *(v.id for v in detail.replaces)]
    result = await inspector.memory.forget(visitor.scope, ids=ids, dry_run=not confirmed)
    if not confirmed:
        return html("forget.html", visitor=visitor, memory_id=memory_id, result=forget_result(result))
    said = f"Forgotten: {result.deleted} deleted from every table and index; only a dated record without text remains."
    return redirect(f"{ROOT}/memories", said, visitor)


@page
async def undo_summary(request: Request, visitor: Visitor, inspector: Inspector) -> Response:
    memory_id = request.path_params["memory_id"]
    restored = await inspector.memory.undo_summary(visitor.scope, memory_id)
    return redirect(f"{ROOT}/memories", f"Summary undone: {len(restored)} memories are back in recall.", visitor)


@page
async def conflicts(request: Request, visitor: Visitor, inspector: Inspector) -> Response:
    flagged = memory_page(
        await inspector.browse.list_memories(visitor.scope, MemoryFilter(conflicts=True), limit=200), "time", True
    )
    by_id = {m.id: m for m in flagged.memories}
    pairs, seen = [], set()
    for first in flagged.memories:
        for other in first.conflicts_with or []:
            key = tuple(sorted((first.id, other)))
            if key in seen or other not in by_id:
                continue
            seen.add(key)
            pairs.append((by_id[key[0]], by_id[key[1]]))
    return html("conflicts.html", visitor=visitor, pairs=pairs, notice=notice_of(request, visitor))


@page
async def settle(request: Request, visitor: Visitor, inspector: Inspector) -> Response:
    first, second, keep = [await form_text(request, name) for name in ("first", "second", "keep")]
    applied = await inspector.browse.settle_conflict(visitor.scope, first, second, keep)
    said = "Both are kept as true." if applied == "both_true" else "The other one is replaced; history is kept."
    return redirect(f"{ROOT}/conflicts", said, visitor)


ROUTES = [
    Route("/memories", memories),
    Route("/memories/{memory_id}", memory),
    Route("/memories/{memory_id}/correct", correct, methods=["POST"]),
    Route("/memories/{memory_id}/pin", pin, methods=["POST"]),
    Route("/memories/{memory_id}/forget", forget, methods=["POST"]),
    Route("/memories/{memory_id}/undo-summary", undo_summary, methods=["POST"]),
    Route("/conflicts", conflicts),
    Route("/conflicts/settle", settle, methods=["POST"]),
]
