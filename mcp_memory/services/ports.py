"""What the services need from a backend, as protocols: the record store and its lifecycle rows.

The composition root (``compose.open_runtime``) builds a backend's objects and hands them to the
services, which never name a backend class. A backend is a module whose store satisfies
``MemoryStore`` (SQLite today: ``storage.sqlite.SqliteStore``); ADR 13 lists what each method
must guarantee.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Protocol

import numpy as np

from mcp_memory.core.models import (
    Applied,
    Centring,
    Criteria,
    DenseHits,
    GoldenCheckRow,
    GoldenRow,
    Link,
    MemoryHistory,
    MemoryRecord,
    Merge,
    NewMemory,
    NewOccurrence,
    RecordOrder,
    Scope,
    TaskSummaryRow,
    Vector,
)


class LifecycleRows(Protocol):
    """The reads and writes of the lifecycle passes (decay, compression, consolidation, facts)."""

    async def known_principals(self) -> list[str]:
        """Every principal with a file in the data directory (for the scheduler)."""
        ...

    async def expired(self, scope: Scope, now: float) -> list[str]:
        """Ids of every memory whose time to live has run out (every namespace, pinned too)."""
        ...

    async def prune_changes(self, scope: Scope, keep: int) -> int:
        """Drop all but the last ``keep`` entries of the change log; a process that had not read the
        dropped ones rebuilds its vector index from the file (PrincipalDb.catch_up)."""
        ...

    async def without_second_vector(self, scope: Scope, limit: int, model_id: str) -> list[tuple[str, str]]:
        """(id, text) of up to ``limit`` memories without the second model's vector, the newest first."""
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

    async def mark_consolidated(self, scope: Scope, upto: int) -> None: ...

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

    async def record_compression_failure(self, scope: Scope, ids: Sequence[str]) -> None: ...

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


class CountRows(Protocol):
    """What stats and deletion receipts count."""

    async def tier_counts(self, scope: Scope) -> dict[str, int]:
        """Memories visible in the scope by tier, level and state (superseded, expired, pinned)."""
        ...

    async def timeline(self, scope: Scope, days: int, now: float) -> list[tuple[int, str, int, int]]:
        """Current memories written in the last ``days`` days: (days ago, tier, level, count)."""
        ...

    async def event_counts(self, scope: Scope) -> dict[str, int]:
        """The memories' events by kind (principal-wide callers only)."""
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
        """When and how a memory that no longer exists went (its one content-free event), or None."""
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

    async def add(self, scope: Scope, row: GoldenRow) -> None: ...

    async def remove(self, scope: Scope, golden_id: str) -> bool:
        """Delete one of the scope's queries; whether it was there."""
        ...

    async def queries(self, scope: Scope) -> list[GoldenRow]:
        """The person's queries the scope sees (every namespace's for a principal-wide scope)."""
        ...

    async def candidates(self, scope: Scope, min_importance: float, limit: int) -> list[MemoryRecord]:
        """Current, active raw memories that are pinned or at least this important: pinned first."""
        ...

    async def document_counts(self, scope: Scope, terms: Sequence[str]) -> dict[str, int]:
        """How many stored memories hold each keyword term."""
        ...

    async def accepted(self, scope: Scope, memory_id: str) -> list[MemoryRecord]:
        """The memory, what replaced it and every summary holding one of those."""
        ...

    async def record_check(self, scope: Scope, check: GoldenCheckRow) -> None: ...

    async def checks(self, scope: Scope) -> tuple[list[GoldenCheckRow], int]:
        """The last checks, newest first, and how many rolled a pass back."""
        ...

    async def unarchive(self, scope: Scope, ids: Sequence[str], reason: str) -> int:
        """Archived memories back to the active tier; how many."""
        ...


class VectorSearch(Protocol):
    """The dense search over each principal's memory vectors (exact today; ADR 13)."""

    name: str  # where it runs: "in-process", "pgvector" (in PostgreSQL, ADR 25) or "qdrant"

    async def sync(self, scope: Scope, dim: int) -> object:
        """Load the principal's index if needed and catch it up with other processes."""
        ...

    async def ranking(
        self,
        scope: Scope,
        query: Vector,
        criteria: Criteria,
        limit: int,
        now: float,
        centring: Centring | None = None,
    ) -> DenseHits:
        """The closest memories to ``query`` the scope and criteria allow, best first."""
        ...

    async def neighbours(
        self, scope: Scope, queries: Vector, criteria: Criteria, limit: int, now: float
    ) -> list[list[tuple[str, float]]]:
        """Per row of ``queries``, the closest live memories (id, similarity) of the scope (its own namespace only when
        ``criteria.namespace_only``): one search for a whole batch of new memories."""
        ...

    async def scripts(self, scope: Scope, dim: int) -> tuple[bool, bool]:
        """Whether the principal's memories include Latin-script ones, and CJK ones."""
        ...

    def size(self, scope: Scope) -> int | None:
        """Rows in this process's index of the principal; None until it is loaded."""
        ...

    def total(self) -> int:
        """Rows in every index this process holds."""
        ...


class MemoryStore(Protocol):
    """The system of record for memories, with its vector search, one principal at a time."""

    @property
    def lifecycle(self) -> LifecycleRows: ...

    @property
    def counts(self) -> CountRows: ...

    @property
    def browse(self) -> BrowseRows: ...

    @property
    def golden(self) -> GoldenRows: ...

    @property
    def vectors(self) -> VectorSearch: ...

    erasure_leaves: str
    """What ``erase_principal`` leaves behind, in a clause for forget_user's receipt."""

    async def change_mark(self, scope: Scope) -> int:
        """A number that moves with every write of any process to the principal's memories."""
        ...

    def path_for(self, scope: Scope) -> Path: ...

    def at_rest(self, scope: Scope, now: float) -> Hashable | None:
        """A description of everything stored for the principal, read without opening it, when it
        has not been written for a moment; None while it may be moving, or where a backend cannot
        tell (PostgreSQL). Equal descriptions mean nothing was written in between."""
        ...

    def lease(self, principal: str) -> AbstractAsyncContextManager[None]:
        """Keep ``principal``'s file open while a call runs (a session between calls holds nothing)."""
        ...

    def pool_figures(self) -> dict[str, int]: ...

    def one_transaction(self, scope: Scope, *, write: bool = False) -> AbstractAsyncContextManager[None]:
        """The store calls made inside the block read (and write) in one transaction where the
        backend has them (PostgreSQL); ``write``: the call always writes."""
        ...

    async def check_model(self, scope: Scope, model_id: str, dim: int) -> None:
        """Record the embedding model on first use; refuse vectors from another model."""
        ...

    async def stored_model(self, scope: Scope) -> tuple[str | None, int | None]: ...

    async def links(self, scope: Scope, sources: Sequence[str], population: int) -> list[Link]:
        """The memories linked to ``sources`` (shared rare entities, session neighbours); recall reads
        the targets through ``select_memories``, so what a scope may not see never comes back."""
        ...

    async def replies(self, scope: Scope, ids: Sequence[str]) -> dict[str, str]:
        """The memory stored just after each of ``ids`` in its session (in a dialog, its reply), by id."""
        ...

    async def keyword_search(
        self, scope: Scope, terms: Sequence[str], criteria: Criteria, limit: int, now: float
    ) -> list[tuple[str, float]]:
        """Top ``limit`` (memory id, bm25) where a larger score is better."""
        ...

    async def keyword_searches(
        self, scope: Scope, asked: Sequence[Sequence[str]], criteria: Criteria, limit: int, now: float
    ) -> list[list[tuple[str, float]]]:
        """``keyword_search`` of each list of terms (recall's words as written and their stems), in
        one round trip where the store has round trips (PostgreSQL)."""
        ...

    async def second_vectors(self, scope: Scope, ids: Sequence[str], model_id: str) -> dict[str, Vector]:
        """The second model's vectors of memories ``ids`` (ADR 14); those without one are absent."""
        ...

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

    async def count(self, scope: Scope) -> dict[str, int]: ...

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

    async def flush_reinforcement(self, scope: Scope | None = None) -> None:
        """Write the buffered reinforcement of one principal (or of every open one) now."""
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
        """Delete memories everywhere and leave no recoverable text (FTS rewrite, WAL truncate);
        with ``derived`` the facts extracted from them too (a user's forget). Each memory's event
        log becomes the one content-free ``event`` (forgotten, expired, evicted).

        Returns the count (ids not stored count nothing) and whether the WAL was emptied now (else
        at a later commit)."""
        ...

    async def erase_principal(self, scope: Scope, now: float) -> dict[str, int]:
        """Delete everything the principal has and keep only a content-free record that it happened.

        Rows go with secure_delete on, the keyword index is rebuilt empty, the file is vacuumed (no
        free page keeps old bytes), the WAL is emptied, and migration backups of the file are removed.
        Other processes see the deletions through the change log. Returns the counts per table."""
        ...

    async def replace_vectors(self, scope: Scope, vectors: Sequence[tuple[str, Vector]]) -> None:
        """New vectors of stored memories, by id (reindex); ids not stored are skipped."""
        ...

    async def put_second_vectors(
        self, scope: Scope, model_id: str, vectors: Sequence[tuple[str, Vector]], *, first: bool = False
    ) -> int:
        """Second vectors of stored memories, by id (reindex, the pass); a ``first`` chunk drops every
        earlier one. Returns how many were stored: none when the file's are another model's, and
        ids not stored (forgotten meanwhile) are skipped."""
        ...

    async def set_model(self, scope: Scope, model_id: str, dim: int) -> None: ...

    async def all_ids(self, scope: Scope) -> list[tuple[str, str]]:
        """(id, text) of every memory of the principal (all namespaces), as stored, for reindex."""
        ...

    async def export_rows(self, scope: Scope) -> list[MemoryRecord]: ...

    async def existing_ids(self, scope: Scope, ids: Sequence[str]) -> set[str]: ...
