"""The lifecycle role: the reads and writes of the background passes, reached as ``store.lifecycle``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from mcp_memory.core.models import MemoryRecord, NewOccurrence, Scope, TaskSummaryRow

if TYPE_CHECKING:
    import numpy as np


class LifecycleRows(Protocol):
    """The reads and writes of the lifecycle passes (decay, compression, consolidation, facts)."""

    async def known_principals(self) -> list[str]:
        """Every principal the store holds (for the scheduler)."""
        ...

    async def expired(self, scope: Scope, now: float) -> list[str]:
        """Ids of every memory whose time to live has run out (every namespace, pinned too)."""
        ...

    async def prune_changes(self, scope: Scope, keep: int) -> int:
        """Drop all but the last ``keep`` entries of the change log; a process that had not read the
        dropped ones reads its vector index again."""
        ...

    async def without_second_vector(self, scope: Scope, limit: int, model_id: str) -> list[tuple[str, str]]:
        """(id, text) of up to ``limit`` current memories without ``model_id``'s vector, the newest
        first; none when the store's second vectors are another model's."""
        ...

    async def decay_rows(self, scope: Scope) -> list[tuple[str, float, int, float]]:
        """(id, importance, access_count, last access or creation) of every active, unpinned memory."""
        ...

    async def compression_candidates(
        self,
        scope: Scope,
        max_failures: int,
        keep_kinds: Sequence[str] = (),
        *,
        levels: Sequence[int] = (0,),
        task_id: str | None = None,
    ) -> list[MemoryRecord]:
        """Active, unpinned memories of ``levels`` in every namespace (of one task with ``task_id``),
        but those that resisted compression, those of ``keep_kinds`` (facts the user holds,
        consolidated rather than summarized) and the facts the LLM extracted."""
        ...

    async def tasks_with_memories(self, scope: Scope, idle_since: float) -> list[TaskSummaryRow]:
        """Every task not updated since ``idle_since`` that still has active, unpinned memories
        below L3 (a finished one is summarized as a whole)."""
        ...

    async def consolidation_candidates(
        self, scope: Scope, kinds: Sequence[str], *, after: int = 0, limit: int = -1
    ) -> list[MemoryRecord]:
        """Active, unpinned, current raw memories of ``kinds`` in every namespace written after the
        order of writing ``after`` (a record's ``written``), oldest first (at most ``limit``; -1: all), with
        their conflicts."""
        ...

    async def consolidation_mark(self, scope: Scope) -> int:
        """The order of writing (a record's ``written``) up to which the consolidation has compared every memory
        with everything before it."""
        ...

    async def mark_consolidated(self, scope: Scope, upto: int) -> None:
        """The consolidation has compared every memory up to ``upto`` (``consolidation_mark``)."""
        ...

    async def vectors(self, scope: Scope, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored vectors of memories ``ids``."""
        ...

    async def occurrences(self, scope: Scope, ids: Sequence[str]) -> dict[str, list[NewOccurrence]]:
        """Every occurrence of memories ``ids``, oldest first, as they would be written again."""
        ...

    async def unjudged_conflicts(self, scope: Scope, limit: int) -> list[tuple[MemoryRecord, MemoryRecord]]:
        """Flagged pairs not yet put to the LLM whose both sides are current and active, oldest flag first."""
        ...

    async def settle_conflict(self, scope: Scope, older: str, newer: str, verdict: str, now: float) -> str | None:
        """Apply a judgement: "replaces" supersedes ``older`` by ``newer`` (history kept) and
        "both_true" lifts the flag; anything else marks the pair judged, still flagged. Returns the
        verdict applied ("replaces" becomes "unsure" when a side is pinned), or None when the pair
        changed since it was read (a side forgotten or replaced): nothing is written then."""
        ...

    async def judgement_failed(self, scope: Scope, older: str, newer: str, now: float, give_up_after: int) -> bool:
        """Count a failed judgement of the pair; at ``give_up_after`` it is marked judged (it stays
        flagged for the user). True when it was given up."""
        ...

    async def extraction_failed(self, scope: Scope, namespace: str | None) -> int:
        """Count a failed extraction of the namespace's next batch; returns the failures so far."""
        ...

    async def extraction_namespaces(self, scope: Scope) -> list[str | None]:
        """The namespaces that hold raw memories (each is read for facts on its own)."""
        ...

    async def extraction_batch(
        self, scope: Scope, namespace: str | None, skip_kinds: Sequence[str], limit: int
    ) -> list[MemoryRecord]:
        """Raw memories of one namespace written after its extraction mark (oldest first), but the
        scheduler's own, the superseded, the short-lived and those of ``skip_kinds`` (already facts)."""
        ...

    async def mark_extracted(self, scope: Scope, namespace: str | None, upto: int) -> None:
        """The namespace's memories up to ``upto`` are read (or given up on); its failures reset."""
        ...

    async def unread_for_facts(self, scope: Scope, skip_kinds: Sequence[str]) -> int:
        """Memories the extraction has still to read, in the namespaces the scope sees."""
        ...

    async def link_sources(self, scope: Scope, derived_id: str, source_ids: Sequence[str]) -> bool:
        """Record that ``derived_id`` was made from ``source_ids`` (not archived): forgetting a
        source then takes the derived memory with it, as it does a summary. False, writing
        nothing, when a source is gone (forgotten since the derived memory was made)."""
        ...

    async def record_compression_failure(self, scope: Scope, ids: Sequence[str]) -> None:
        """One more failed compression of each of ``ids`` (``compression_candidates`` skips those
        that failed ``max_failures`` times)."""
        ...

    async def compression_failures(self, scope: Scope) -> dict[str, int]:
        """memory id -> how often it failed compression, for every memory still stored (for export)."""
        ...

    async def restore_lineage(
        self,
        scope: Scope,
        sources: Sequence[tuple[str, str]],
        conflicts: Sequence[tuple[str, str]],
        failures: Sequence[tuple[str, int]],
    ) -> None:
        """Write back what an import read besides the rows: (summary, source) links, flagged conflicts
        (stored both ways) and compression failures, in one transaction.

        A row is written only when every memory it names is stored: one forgotten by another process
        since the import checked is not linked to. Nothing is removed; failures only grow."""
        ...

    async def summaries_holding(self, scope: Scope, memory_id: str) -> list[str]:
        """The summaries (or facts) built directly on ``memory_id``."""
        ...

    async def task_summaries(self, scope: Scope, task_id: str) -> list[str]:
        """The task summaries (L3) of ``task_id``, in every namespace of the principal."""
        ...

    async def undo_summary(self, scope: Scope, summary_id: str, resist: int = 0) -> list[str]:
        """Put a summary's sources back in the active tier and delete the summary; returns the sources.

        With ``resist`` the sources are marked as having failed compression that often, so an
        undone summary is not simply made again by the next pass."""
        ...

    async def archive(self, scope: Scope, faded: dict[str, tuple[float, float]]) -> list[str]:
        """Move memories (id -> retention, the threshold it fell under) to the archive tier (kept,
        out of default recall), each event naming both; returns the ids moved."""
        ...

    async def count_fact_check(self, scope: Scope, namespace: str | None, passed: bool) -> None:
        """One more summary in ``namespace`` that passed (or failed) the fact check, for `stats`."""
        ...
