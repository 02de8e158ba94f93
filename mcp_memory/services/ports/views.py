"""The views' roles: what stats and receipts count, browsing, and the golden queries, reached as
``store.counts``, ``store.browse`` and ``store.golden``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from mcp_memory.core.models import Criteria, GoldenCheckRow, GoldenRow, MemoryHistory, MemoryRecord, Scope


class CountRows(Protocol):
    """What stats and deletion receipts count."""

    async def tier_counts(self, scope: Scope) -> dict[str, int]:
        """Memories visible in the scope by tier, level and state (superseded, expired, pinned)."""
        ...

    async def timeline(self, scope: Scope, days: int, now: float) -> list[tuple[int, str, int, int]]:
        """Current memories the scope sees written in the last ``days`` days: (days before ``now``,
        0 = today; tier; level; count)."""
        ...

    async def event_counts(self, scope: Scope) -> dict[str, int]:
        """The memories' events by kind, for a principal-wide caller (the event of a memory that is
        gone carries no namespace, so a namespaced caller gets none)."""
        ...

    async def visible_counts(self, scope: Scope) -> dict[str, int]:
        """The rows the scope sees, table by table."""
        ...

    async def principal_counts(self, scope: Scope) -> dict[str, int]:
        """What the principal has, table by table (every namespace): the erasure receipt."""
        ...

    async def pending(self, scope: Scope, max_failures: int) -> dict[str, int]:
        """Lifecycle work left in the scope, and how its summaries fared in the fact check."""
        ...


class BrowseRows(Protocol):
    """Paging through memories and telling one memory's history."""

    async def gone(self, scope: Scope, memory_id: str) -> tuple[float, str] | None:
        """When and how a memory id of the principal went (forgotten, expired, evicted, undone), from
        its one content-free event; None if it never existed or still does."""
        ...

    async def receipts(self, scope: Scope, limit: int) -> list[tuple[str, float, str]]:
        """The principal's latest records of memories gone (id, when, how), newest first."""
        ...

    async def page(
        self,
        scope: Scope,
        criteria: Criteria,
        *,
        sort: str,
        descending: bool,
        after: tuple[float, int] | None,
        limit: int,
    ) -> list[MemoryRecord]:
        """Up to ``limit`` memories ordered by ``sort`` (a name of ``SORT_KEYS``) then the order of
        writing, past ``after`` (the last one's sort value and ``written``)."""
        ...

    async def history(self, scope: Scope, record: MemoryRecord) -> MemoryHistory:
        """What the record replaced and what replaced it, its summaries, links and occurrences, as far
        as the scope sees."""
        ...


class GoldenRows(Protocol):
    """The golden queries that guard the lifecycle passes, and the record of their checks."""

    async def add(self, scope: Scope, row: GoldenRow) -> None:
        """Store a golden query in the scope's namespace."""
        ...

    async def remove(self, scope: Scope, golden_id: str) -> bool:
        """Delete one of the scope's queries (a namespaced caller reaches its namespace's only);
        whether it was there."""
        ...

    async def queries(self, scope: Scope) -> list[GoldenRow]:
        """The person's queries the scope sees (every namespace's for a principal-wide scope)."""
        ...

    async def candidates(self, scope: Scope, min_importance: float, limit: int) -> list[MemoryRecord]:
        """Current, active raw memories that are pinned or at least this important: pinned first."""
        ...

    async def document_counts(self, scope: Scope, terms: Sequence[str]) -> dict[str, int]:
        """How many stored memories (every tier) hold each keyword term."""
        ...

    async def accepted(self, scope: Scope, memory_id: str) -> list[MemoryRecord]:
        """What finds ``memory_id``: itself, what replaced it (supersession followed forward) and
        every summary, at any level, holding one of those."""
        ...

    async def record_check(self, scope: Scope, check: GoldenCheckRow) -> None:
        """Keep the outcome of one check of a pass against the golden queries."""
        ...

    async def checks(self, scope: Scope) -> tuple[list[GoldenCheckRow], int]:
        """The last checks kept, newest first, and how many of them rolled a pass back."""
        ...

    async def unarchive(self, scope: Scope, ids: Sequence[str], reason: str) -> int:
        """Archived memories back to the active tier (a pass rolled back); how many."""
        ...
