"""The memory pages: search (the real recall, with each hit's reasons and signals) and browse
(filters, pages), one memory with its history, and the corrections a person makes: correct,
pin or unpin, forget (the dry-run list first), undo a summary, settle a flagged conflict."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from mcp_memory.errors import InvalidInputError
from mcp_memory.inspector.auth import Visitor
from mcp_memory.inspector.base import ROOT, Inspector, form_text, html, page, redirect
from mcp_memory.models import Provenance
from mcp_memory.schemas import ListedMemory, ListFilters, MemoryOut
from mcp_memory.services.intake import CallContext

FILTERS = ("kind", "tag", "namespace", "level", "pinned", "conflicts", "after", "before", "states")
CONTEXT = CallContext(Provenance(client_name="mcp-memory inspector", client_version=None, transport="http"))


def _day(text: str | None, field: str, end: bool = False) -> datetime | None:
    if not text:
        return None
    try:
        day = datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError:
        raise InvalidInputError(field, f"must be a date as YYYY-MM-DD, not {text[:20]!r}") from None
    return day + timedelta(days=1) if end else day


def _filters(query: dict[str, str]) -> ListFilters:
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
    return ListFilters(**{k: v for k, v in fields.items() if v is not None})


@page
async def memories(request: Request, visitor: Visitor, inspector: Inspector) -> Response:
    query = dict(request.query_params)
    words = query.get("q", "").strip()
    filters = _filters(query)
    hits: list[Any] = []
    listed: list[ListedMemory | MemoryOut] = []
    note = next_cursor = None
    if words:
        found = await inspector.memory.recall(
            visitor.scope, words, k=20, filters=filters, explain=True, reinforce=False
        )
        hits, note = found.hits, found.note
    else:
        listing = await inspector.browse.list_memories(
            visitor.scope, filters, cursor=query.get("cursor") or None, limit=50
        )
        listed, next_cursor = listing.memories, listing.next_cursor
    return html(
        "memories.html",
        visitor=visitor,
        q=words,
        query=query,
        hits=hits,
        listed=listed,
        note=note,
        next_cursor=next_cursor,
        notice=request.query_params.get("notice"),
    )


@page
async def memory(request: Request, visitor: Visitor, inspector: Inspector) -> Response:
    detail = await inspector.browse.get_memory(visitor.scope, request.path_params["memory_id"])
    return html("memory.html", visitor=visitor, detail=detail, notice=request.query_params.get("notice"))


@page
async def correct(request: Request, visitor: Visitor, inspector: Inspector) -> Response:
    memory_id = request.path_params["memory_id"]
    form = await request.form()
    before = (await inspector.browse.get_memory(visitor.scope, memory_id)).memory
    text, kind = str(form.get("text", "")), str(form.get("kind", "")).strip()
    tags = sorted({t.strip() for t in str(form.get("tags", "")).split(",") if t.strip()})
    importance = _number(str(form.get("importance") or before.importance))
    result = await inspector.browse.correct_memory(
        visitor.scope,
        memory_id,
        CONTEXT,
        text=text if text.strip() != before.text.strip() else None,
        kind=kind if kind and kind != before.kind else None,
        tags=tags if tags != sorted(before.tags) else None,
        importance=importance if importance != before.importance else None,
    )
    changed = ", ".join(result.changed)
    return redirect(f"{ROOT}/memories/{result.id}", f"Corrected ({changed}); the earlier version is kept in history.")


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
    return redirect(f"{ROOT}/memories/{memory_id}", "Pinned." if pinned else "Unpinned.")


@page
async def forget(request: Request, visitor: Visitor, inspector: Inspector) -> Response:
    memory_id = request.path_params["memory_id"]
    confirmed = await form_text(request, "confirm") == "yes"
    result = await inspector.memory.forget(visitor.scope, ids=[memory_id], dry_run=not confirmed)
    if not confirmed:
        return html("forget.html", visitor=visitor, memory_id=memory_id, result=result)
    return redirect(f"{ROOT}/memories", f"Forgotten: {result.deleted} memory deleted. {result.note}")


@page
async def undo_summary(request: Request, visitor: Visitor, inspector: Inspector) -> Response:
    memory_id = request.path_params["memory_id"]
    restored = await inspector.memory.undo_summary(visitor.scope, memory_id)
    return redirect(f"{ROOT}/memories", f"Summary undone: {len(restored)} memories are back in recall.")


@page
async def conflicts(request: Request, visitor: Visitor, inspector: Inspector) -> Response:
    flagged = await inspector.browse.list_memories(visitor.scope, ListFilters(conflicts=True), limit=200)
    by_id = {m.id: m for m in flagged.memories}
    pairs, seen = [], set()
    for first in flagged.memories:
        for other in first.conflicts_with or []:
            key = tuple(sorted((first.id, other)))
            if key in seen or other not in by_id:
                continue
            seen.add(key)
            pairs.append((by_id[key[0]], by_id[key[1]]))
    return html("conflicts.html", visitor=visitor, pairs=pairs, notice=request.query_params.get("notice"))


@page
async def settle(request: Request, visitor: Visitor, inspector: Inspector) -> Response:
    first, second, keep = [await form_text(request, name) for name in ("first", "second", "keep")]
    applied = await inspector.browse.settle_conflict(visitor.scope, first, second, keep)
    said = "Both are kept as true." if applied == "both_true" else "The other one is replaced; history is kept."
    return redirect(f"{ROOT}/conflicts", said)


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
