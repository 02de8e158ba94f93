"""The memories role: the records themselves, read and written one principal at a time."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from mcp_memory.core.models import Applied, Criteria, Link, MemoryRecord, Merge, NewMemory, RecordOrder, Scope


class MemoryRows(Protocol):
    """What recall reads and remember, pin and forget write: the memory records of one principal.

    Every method takes a ``Scope``: nothing outside the principal is read or written, and within it
    the namespace rule of ``storage.rows.visible_clause`` holds (ADR 13)."""

    async def select_memories(
        self,
        scope: Scope,
        criteria: Criteria,
        now: float,
        *,
        among: Sequence[str] | None = None,
        limit: int | None = None,
        order: RecordOrder = "stored",
    ) -> list[MemoryRecord]:
        """The memories the criteria keep (``among``: only those ids), in ``order``: as stored,
        most important first, or by when they happened; ties in the order they were stored."""
        ...

    async def find_by_hash(self, scope: Scope, hashes: Sequence[str], now: float) -> dict[str, str]:
        """content hash -> id of a live memory in exactly the scope's namespace."""
        ...

    async def replaced_by_hash(self, scope: Scope, hashes: Sequence[str], now: float) -> dict[str, str]:
        """content hash -> the live memory that replaced the latest copy of that text (following
        replacements of replacements), for texts no live memory says now."""
        ...

    async def links(self, scope: Scope, sources: Sequence[str], population: int) -> list[Link]:
        """The memories linked to ``sources`` (shared rare entities, session neighbours); recall reads
        the targets through ``select_memories``, so what a scope may not see never comes back."""
        ...

    async def replies(self, scope: Scope, ids: Sequence[str]) -> dict[str, str]:
        """The memory stored just after each of ``ids`` in its session (in a dialog, its reply), by
        id; read through ``select_memories`` as links are."""
        ...

    async def apply(self, scope: Scope, inserts: Sequence[NewMemory], merges: Sequence[Merge]) -> Applied:
        """Insert new memories and record merged occurrences in one transaction.

        Returns what each insert superseded and which inserts merged into a live copy instead.
        Raises NotFoundError, writing nothing, when a ``supersedes`` id is not in the scope."""
        ...

    async def set_pinned(self, scope: Scope, memory_id: str, pinned: bool) -> None:
        """Pin or unpin a stored memory; an id that is not stored changes nothing."""
        ...

    async def reinforce(self, scope: Scope, ids: Sequence[str], now: float) -> None:
        """Recall strengthens what it returns (access count, last access) without taking the write
        lock: the counts wait in memory and are written in batches (ADR 11)."""
        ...

    async def delete(
        self,
        scope: Scope,
        ids: Sequence[str],
        *,
        unpinned_only: bool = False,
        derived: bool = False,
        event: str = "forgotten",
    ) -> tuple[int, bool]:
        """Delete memories everywhere and leave no recoverable text where the backend can reach it
        (SQLite: the keyword index rewritten, the WAL emptied); with ``derived`` the facts extracted
        from them too (a user's forget). Each memory's event log becomes the one content-free
        ``event`` (forgotten, expired, evicted).

        Returns the count (ids not stored count nothing) and whether the old text is gone now (False:
        SQLite's WAL is emptied at a later commit)."""
        ...

    async def existing_ids(self, scope: Scope, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` are stored, in any namespace of the principal (an import's check)."""
        ...

    async def export_rows(self, scope: Scope) -> list[MemoryRecord]:
        """Every memory of the principal (all namespaces, every flag of its occurrences), as stored."""
        ...
