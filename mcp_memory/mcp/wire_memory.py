"""The memory family on the wire: the tools' arguments as the services' commands and filters, and
the services' records as remember's, forget's and pin's results (the notes to the agent included)."""

from __future__ import annotations

from dataclasses import asdict

from mcp_memory.core.models import MemoryDraft, MemoryFilter, to_datetime
from mcp_memory.core.schemas import (
    ForgetFilter,
    ForgetItem,
    ForgetResult,
    ListFilters,
    MemoryInput,
    PinResult,
    RecallFilters,
    RememberItem,
    RememberResult,
)
from mcp_memory.services.intake import Remembered
from mcp_memory.services.memory import Forgotten


def draft(item: MemoryInput) -> MemoryDraft:
    """One memory of remember's arguments, as the service takes it."""
    return MemoryDraft(**item.model_dump())


def memory_filter(filters: RecallFilters | ForgetFilter | ListFilters | None) -> MemoryFilter | None:
    """Recall's, forget's or a listing's filters, as the services take them."""
    return None if filters is None else MemoryFilter(**filters.model_dump())


def remember_result(done: Remembered) -> RememberResult:
    return RememberResult(
        items=[RememberItem(**asdict(item)) for item in done.items],
        stored=done.stored,
        merged=done.merged,
        rejected=done.rejected,
    )


def pin_result(memory_id: str, pinned: bool, pinned_tokens: int, cap_tokens: int) -> PinResult:
    return PinResult(id=memory_id, pinned=pinned, pinned_tokens=pinned_tokens, cap_tokens=cap_tokens)


def forget_result(done: Forgotten) -> ForgetResult:
    records = done.records
    items = [
        ForgetItem(id=r.id, kind=r.kind, preview=r.content[:80], occurred_at=to_datetime(r.occurred_at))
        for r in records
    ]
    summaries = sum(r.level > 0 for r in records)
    # Forgetting a summary forgets its wording, not what it summarized: say so.
    held = (
        f" {summaries} of them are summaries: the memories they hold come back to recall (their ids are in"
        " source_ids); forget those too to remove that text."
        if summaries
        else ""
    )
    if done.dry_run:
        note = f"dry run: nothing was deleted; call again with dry_run=false to delete these.{held}"
        return ForgetResult(dry_run=True, matched=len(records), deleted=0, items=items, note=note)
    note = "deleted from every table and index; freed pages zeroed and the write-ahead log emptied"
    if not done.scrubbed:
        note = (
            "deleted from every table and index; another process is reading the store, so the write-ahead "
            "log keeps old pages until it lets go: they are wiped at a later write"
        )
    return ForgetResult(dry_run=False, matched=len(records), deleted=done.deleted, items=items, note=note + "." + held)
