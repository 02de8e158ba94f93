"""Why a memory id does not name a current memory: the error that says what it became and what to do."""

from __future__ import annotations

from typing import NoReturn

from mcp_memory.core.errors import InvalidInputError, NotFoundError
from mcp_memory.core.models import Criteria, Scope
from mcp_memory.services.ports import MemoryStore


async def why_not_current(store: MemoryStore, scope: Scope, memory_id: str, now: float) -> NoReturn:
    """The error for a memory that exists but is not current: what it became and what to do."""
    everything = Criteria(ids=(memory_id,), include_superseded=True, include_archived=True, include_expired=True)
    found = await store.select_memories(scope, everything, now)
    if not found:
        raise NotFoundError("memory", memory_id, "recall and list_memories give the ids of your memories")
    record = found[0]
    if record.superseded_by is not None:
        raise InvalidInputError("id", f"{memory_id!r} was replaced by {record.superseded_by!r}; use that one")
    if record.expires_at is not None and record.expires_at <= now:
        raise InvalidInputError("id", f"{memory_id!r} has expired (its time to live ran out); remember it again")
    holders = await store.lifecycle.summaries_holding(scope, memory_id)
    if holders:
        raise InvalidInputError(
            "id",
            f"{memory_id!r} is archived inside summary {holders[0]!r}; pin the summary, or undo_summary it first",
        )
    raise InvalidInputError("id", f"{memory_id!r} is archived (it faded); recall it with include_archived")
