"""The memory family on the wire: the tools' arguments as the services' commands and filters, and
the services' records as remember's, forget's, pin's and the browsing tools' results (the notes
to the agent included)."""

from __future__ import annotations

from dataclasses import asdict

from mcp_memory.core.caution import caution, reveal
from mcp_memory.core.models import (
    MemoryDraft,
    MemoryFilter,
    MemoryHistory,
    MemoryRecord,
    MemorySort,
    Page,
    at,
    to_datetime,
)
from mcp_memory.core.recalled import Detail
from mcp_memory.mcp.schemas import (
    CorrectResult,
    EventOut,
    ForgetFilter,
    ForgetItem,
    ForgetResult,
    LinkOut,
    ListedMemory,
    ListFilters,
    MemoryDetail,
    MemoryInput,
    MemoryPage,
    OccurrenceDetail,
    PinResult,
    RecallFilters,
    RememberItem,
    RememberResult,
    VersionOut,
)
from mcp_memory.mcp.wire_recall import memory_out
from mcp_memory.services.browse import Correction
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


# ----- browsing and correcting -------------------------------------------------------------


def _listed(record: MemoryRecord) -> ListedMemory:
    flag = caution(record.content)
    return ListedMemory(
        id=record.id,
        text=reveal(record.content) if flag else record.content,
        caution=flag,
        kind=record.kind,
        tags=record.tags,
        importance=record.importance,
        pinned=record.pinned,
        namespace=record.namespace,
        occurred_at=at(record.occurred_at),
        last_used_at=to_datetime(record.last_accessed_at),
        tier=record.tier,
        level=record.level,
        superseded_by=record.superseded_by,
        expires_at=to_datetime(record.expires_at),
        conflicts_with=record.conflicts_with or None,
    )


def _version(record: MemoryRecord) -> VersionOut:
    return VersionOut(
        id=record.id,
        text=record.content,
        kind=record.kind,
        valid_from=at(record.valid_from),
        valid_to=to_datetime(record.valid_to),
        superseded_by=record.superseded_by,
    )


def _detail(record: MemoryRecord, history: MemoryHistory) -> MemoryDetail:
    current: str | None = record.id
    if record.superseded_by is not None:
        last = history.newer[-1] if history.newer else None
        current = last.id if last is not None and last.superseded_by is None else None
    return MemoryDetail(
        memory=memory_out(record),
        current_id=current,
        replaces=[_version(r) for r in history.older],
        replaced_by=[_version(r) for r in history.newer],
        occurrences=[
            OccurrenceDetail(
                id=o.id,
                occurred_at=at(o.occurred_at),
                recorded_at=at(o.created_at),
                session_key=o.session_key,
                client_name=o.provenance.client_name,
                transport=o.provenance.transport,
                metadata=o.metadata,
            )
            for o in history.occurrences
        ],
        summarized_in=history.summarized_in,
        links=[LinkOut(id=target, via=via) for via, target in history.links],
        events=[EventOut(at=at(when), event=event, detail=detail) for when, event, detail in history.events],
    )


def memory_page(page: Page[MemoryRecord], sort: MemorySort, descending: bool, detail: Detail = "lean") -> MemoryPage:
    return MemoryPage(
        memories=[memory_out(r) if detail == "full" else _listed(r) for r in page.items],
        sort=sort,
        descending=descending,
        next_cursor=page.next_cursor,
    )


def memory_detail(found: tuple[MemoryRecord, MemoryHistory]) -> MemoryDetail:
    return _detail(*found)


def correct_result(done: Correction) -> CorrectResult:
    if done.merged:
        note = f"the corrected text is already memory {done.id!r}: {done.replaces!r} now points to it"
        return CorrectResult(id=done.id, replaces=done.replaces, outcome="merged", changed=done.changed, note=note)
    return CorrectResult(id=done.id, replaces=done.replaces, outcome="corrected", changed=done.changed)
