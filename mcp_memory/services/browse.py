"""BrowseService: list memories page by page, read one with its whole history, correct one.

A correction is a new version written through `remember`'s own path (redaction, limits, the
second model, the pin cap), superseding the memory it corrects: nothing is edited in place, so
the history `get_memory` tells is complete. Every read keeps to the caller's scope; an id from
another principal or namespace is "not found", the same answer as an id that never existed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime

from mcp_memory.core.errors import InvalidInputError, NotFoundError
from mcp_memory.core.models import (
    Criteria,
    MemoryDraft,
    MemoryFilter,
    MemoryHistory,
    MemoryRecord,
    MemorySort,
    Page,
    Scope,
    at,
    to_datetime,
)
from mcp_memory.services import inputs
from mcp_memory.services.checks import text_field
from mcp_memory.services.intake import CallContext
from mcp_memory.services.memory import MemoryService
from mcp_memory.services.ports import MemoryStore
from mcp_memory.services.switch import refuse_if_off
from mcp_memory.services.task_views import from_cursor, to_cursor

MAX_PAGE = 200
MAX_LEVEL = 3
_EVERY_STATE = Criteria(include_superseded=True, include_archived=True, include_expired=True)


@dataclass(frozen=True, slots=True)
class Correction:
    """A correction written: the memory that holds now (the new version, or, ``merged``, the stored
    memory whose text it already was), the one it replaces, and the fields that changed."""

    id: str
    replaces: str
    merged: bool
    changed: list[str]


def list_criteria(scope: Scope, filters: MemoryFilter | None) -> Criteria:
    """A list's filters as storage criteria: recall's, and the pin, level and conflict flags."""
    criteria = inputs.recall_criteria(scope, filters)
    if filters is None:
        return criteria
    if filters.level is not None and not 0 <= filters.level <= MAX_LEVEL:
        raise InvalidInputError("filters.level", f"must be between 0 and {MAX_LEVEL}")
    return replace(criteria, pinned=filters.pinned, level=filters.level, conflicted=filters.conflicts)


class BrowseService:
    def __init__(self, store: MemoryStore, memory: MemoryService, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.memory = memory
        self.clock = clock

    async def list_memories(
        self,
        scope: Scope,
        filters: MemoryFilter | None = None,
        *,
        sort: MemorySort = "time",
        descending: bool = True,
        cursor: str | None = None,
        limit: int = 20,
    ) -> Page[MemoryRecord]:
        """A page of the memories the filters keep, in ``sort`` order; ``next_cursor`` pages on."""
        await refuse_if_off(self.memory.switch, scope, "nothing was read")
        if not 1 <= limit <= MAX_PAGE:
            raise InvalidInputError("limit", f"must be between 1 and {MAX_PAGE}")
        after = from_cursor(cursor)
        if after is not None:
            if not (isinstance(after, list) and len(after) == 4 and after[:2] == [sort, descending]):
                raise InvalidInputError(
                    "cursor", "belongs to another listing (sort or order changed); omit it to start over"
                )
            after = (float(after[2]), int(after[3]))
        records = await self.store.browse.page(
            scope, list_criteria(scope, filters), sort=sort, descending=descending, after=after, limit=limit + 1
        )
        page = records[:limit]
        more = None
        if len(records) > limit:
            last = page[-1]
            more = to_cursor([sort, descending, _sort_value(last, sort), last.written])
        return Page(page, more)

    async def get_memory(self, scope: Scope, memory_id: str) -> tuple[MemoryRecord, MemoryHistory]:
        """One memory in any state (current, replaced, archived, expired) with its history."""
        text_field("id", memory_id)
        await refuse_if_off(self.memory.switch, scope, "nothing was read")
        found = await self.store.select_memories(scope, replace(_EVERY_STATE, ids=(memory_id,)), self.clock())
        if not found:
            # A principal-wide caller learns when and how its memory went (events name no namespace).
            went = await self.store.browse.gone(scope, memory_id) if scope.namespace is None else None
            if went is not None:
                when = to_datetime(went[0])
                raise NotFoundError(
                    "memory",
                    memory_id,
                    f"it was {went[1]} on {when:%Y-%m-%d %H:%M} UTC; only that record of it remains",
                )
            raise NotFoundError("memory", memory_id, "recall and list_memories give the ids of your memories")
        return found[0], await self.store.browse.history(scope, found[0])

    async def correct_memory(
        self,
        scope: Scope,
        memory_id: str,
        ctx: CallContext,
        *,
        text: str | None = None,
        kind: str | None = None,
        tags: list[str] | None = None,
        importance: float | None = None,
    ) -> Correction:
        """Write a corrected version of a current memory that supersedes it (history kept)."""
        text_field("id", memory_id)
        record = await self._current(scope, memory_id)
        if text is None and kind is None and tags is None and importance is None:
            raise InvalidInputError("text", "give at least one of text, kind, tags or importance to change")
        if importance is not None and not 0.0 <= importance <= 1.0:
            raise InvalidInputError("importance", "must be between 0 and 1")
        if text is not None and not text.strip():
            raise InvalidInputError("text", "is empty; give the corrected text, or forget the memory instead")
        item = _corrected(record, text, kind, tags, importance, self.clock())
        changed = [
            name
            for name, new, old in (
                ("text", item.content, record.content),
                ("kind", item.kind, record.kind),
                ("tags", sorted(set(item.tags)), record.tags),
                ("importance", item.importance, record.importance),
            )
            if new != old
        ]
        if not changed:
            raise InvalidInputError(
                "id", f"the correction changes nothing: {memory_id!r} already has that text, kind, tags and importance"
            )
        # The new version lives where the old one did (a principal-wide memory stays principal-wide).
        result = await self.memory.remember(Scope(scope.principal, record.namespace), [item], ctx)
        outcome = result.items[0]
        if outcome.outcome == "rejected" or outcome.id is None:
            raise InvalidInputError("text", f"was not stored: {outcome.reason}")
        return Correction(outcome.id, memory_id, outcome.outcome == "merged", changed)

    async def receipts(self, scope: Scope, limit: int = 50) -> list[tuple[str, datetime, str]]:
        """What went (memory id, when, how: forgotten, expired, evicted, undone), newest first; for
        principal-wide callers only (the records name no namespace)."""
        if scope.namespace is not None:
            return []
        return [(i, at(when), how) for i, when, how in await self.store.browse.receipts(scope, limit)]

    async def settle_conflict(self, scope: Scope, first: str, second: str, keep: str) -> str:
        """A person's verdict on a flagged pair: ``keep`` one id (the other is superseded by it,
        history kept) or "both" (the flag is lifted). Returns what was applied."""
        await refuse_if_off(self.memory.switch, scope, "nothing was changed")
        records = {r.id: r for r in [await self._current(scope, first), await self._current(scope, second)]}
        if second not in (records[first].conflicts_with or []):
            raise InvalidInputError("id", f"{first!r} and {second!r} are not flagged as contradicting each other")
        if keep == "both":
            applied = await self.store.lifecycle.settle_conflict(scope, first, second, "both_true", self.clock())
        elif keep in records:
            dropped = second if keep == first else first
            if records[dropped].pinned:
                raise InvalidInputError("keep", f"{dropped!r} is pinned: unpin it first, then keep {keep!r}")
            applied = await self.store.lifecycle.settle_conflict(scope, dropped, keep, "replaces", self.clock())
        else:
            raise InvalidInputError("keep", f"must be {first!r}, {second!r} or 'both', not {keep!r}")
        if applied is None:
            raise InvalidInputError("id", "the pair changed while you looked (one side was replaced or forgotten)")
        return applied

    async def _current(self, scope: Scope, memory_id: str) -> MemoryRecord:
        found = await self.store.select_memories(scope, Criteria(ids=(memory_id,)), self.clock())
        if not found:
            await self.memory.why_not_current(scope, memory_id, self.clock())
        record = found[0]
        if record.level > 0:
            raise InvalidInputError(
                "id",
                f"{memory_id!r} is a summary (level {record.level}), written by the lifecycle from other memories: "
                "undo_summary it and correct the memories it held",
            )
        return record


def _sort_value(record: MemoryRecord, sort: MemorySort) -> float:
    """A record's value of the sort key, as storage orders by it."""
    if sort == "last_used":
        return record.last_accessed_at if record.last_accessed_at is not None else record.created_at
    return {"time": record.occurred_at, "created": record.created_at, "importance": record.importance}[sort]


def _corrected(
    record: MemoryRecord,
    text: str | None,
    kind: str | None,
    tags: list[str] | None,
    importance: float | None,
    now: float,
) -> MemoryDraft:
    """The new version: the changed fields, and everything else as the memory had it."""
    ttl = max(1, math.ceil(record.expires_at - now)) if record.expires_at is not None else None
    return MemoryDraft(
        content=text if text is not None else record.content,
        kind=kind if kind is not None else record.kind,
        importance=importance if importance is not None else record.importance,
        tags=tags if tags is not None else record.tags,
        metadata=record.metadata,
        occurred_at=to_datetime(record.occurred_at),
        task_id=record.task_id,
        session_id=record.session_key,
        ttl_seconds=ttl,
        supersedes=[] if record.key is not None else [record.id],  # a keyed memory is replaced by its key
        key=record.key,
        pinned=record.pinned,
    )
