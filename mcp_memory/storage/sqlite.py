"""SqliteStore: the system of record, one SQLite file per principal.

Isolation is structural: a Scope selects the principal's file, and every query inside it also
filters by the scope's namespace. Several processes may share a data directory: every write is
one ``BEGIN IMMEDIATE`` transaction that also appends to the ``changes`` log, and before a read
each process checks ``PRAGMA data_version`` and replays the log into its vector index, so
process B answers with what process A wrote (or forgot) a moment ago.

SqliteStore opens the files and transactions, searches the keyword index, buffers reinforcement
and erases; the record methods both backends share are ``records.RecordStore`` (ADR 20). One open
file and its vector index is a ``principal.PrincipalDb``, the SQL of writes is in ``writes``, and
the row helpers are in ``rows``.
"""

from __future__ import annotations

import functools
import logging
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeAlias

import aiosqlite
import anyio

from mcp_memory.core.errors import StorageError
from mcp_memory.core.models import (
    Criteria,
    MemoryRecord,
    Scope,
)
from mcp_memory.storage import writes
from mcp_memory.storage.browse import BrowseStore
from mcp_memory.storage.counts import CountStore
from mcp_memory.storage.golden import GoldenStore
from mcp_memory.storage.lifecycle import LifecycleStore
from mcp_memory.storage.permissions import secure_data_dir
from mcp_memory.storage.pool import FileState, PoolLimits, PrincipalPool, at_rest, principal_file
from mcp_memory.storage.principal import PrincipalDb
from mcp_memory.storage.records import RecordStore
from mcp_memory.storage.rows import fts_match, rows_of, visible_clause
from mcp_memory.storage.vector_search import InProcessSearch

if TYPE_CHECKING:  # an optional engine (the qdrant extra); the index loads with the first search
    from mcp_memory.storage.qdrant_search import QdrantVectorSearch
    from mcp_memory.storage.vectors import VectorIndex

    SqliteVectors: TypeAlias = "ExactVectorSearch | QdrantVectorSearch"  # the first is defined below

log = logging.getLogger(__name__)

KEYWORD_OVERFETCH = 4  # the keyword index's best this many times the wanted count, before the scope filters


class ExactVectorSearch(InProcessSearch):
    """The SQLite store's engine: each open file's index (``PrincipalDb``), loaded in one bulk read
    and caught up through ``PRAGMA data_version`` and the change log."""

    def __init__(self, store: SqliteStore) -> None:
        super().__init__(store)
        self.store = store

    async def model_changed(self, scope: Scope) -> None:
        db = await self.store.principal_db(scope)
        async with db.index_lock:
            db.index = None  # rebuilt from the new vectors on next use

    async def health(self, scope: Scope) -> tuple[bool, str]:
        return True, "exact, in this process (read from the data file)"

    async def _synced(self, scope: Scope, dim: int) -> tuple[anyio.Lock, VectorIndex]:
        db = await self.store.principal_db(scope)
        loaded = db.index is not None
        index = await db.sync(dim)
        if not loaded:
            self.store.pool.trim_indexes(keep=db)
        return db.index_lock, index

    def size(self, scope: Scope) -> int | None:
        db = self.store.pool.get_open(scope.principal)
        return len(db.index) if db is not None and db.index is not None else None

    def total(self) -> int:
        """Rows in every index this process holds (for /metrics)."""
        return sum(len(db.index) for db in self.store.pool.open_dbs() if db.index is not None)


class SqliteStore(RecordStore):
    erasure_leaves = (
        "the file rewritten and its write-ahead log emptied (at the next commit, when another process was "
        "reading); only a content-free record of the deletion remains"
    )
    COUNTED_TABLES = ("memories", "occurrences", "vectors", "memory_tags", "memories_fts", "changes")
    GAPLESS_LOG = True  # each file numbers its own change log: only a prune leaves a gap

    def __init__(
        self,
        data_dir: Path,
        busy_timeout_ms: int = 10_000,
        pool: PoolLimits | None = None,
        vectors: Callable[[SqliteStore], SqliteVectors] = ExactVectorSearch,
        own_files: Sequence[Path] = (),
        durability: str = "normal",
    ) -> None:
        self.data_dir = data_dir
        self.own_files = tuple(own_files)  # beyond the data's layout, files of ours (the log) kept private
        self.busy_timeout_ms = busy_timeout_ms
        self.pool = PrincipalPool(
            data_dir, busy_timeout_ms, pool or PoolLimits(), self._flush_principal, durability=durability
        )
        self.lifecycle = LifecycleStore(self)  # the lifecycle passes' reads and writes, on these files
        self.counts = CountStore(self)  # what stats and receipts count
        self.browse = BrowseStore(self)  # paging through memories and their history
        self.golden = GoldenStore(self)  # the queries that guard the passes, and their checks
        self.vectors = vectors(self)  # the dense side of recall: each principal's exact index, or Qdrant

    async def __aenter__(self) -> SqliteStore:
        secure = functools.partial(secure_data_dir, self.data_dir, create=True, own=self.own_files)
        await anyio.to_thread.run_sync(secure)
        await self._start_upkeep()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._stop_upkeep()
        await self.pool.close()
        await self.vectors.close()

    # ----- opening -------------------------------------------------------------------------

    def path_for(self, scope: Scope) -> Path:
        return principal_file(self.data_dir, scope.principal)

    def at_rest(self, scope: Scope, now: float) -> FileState | None:
        """The principal's files described without opening them, when at rest (``pool.at_rest``):
        equal descriptions mean nothing of the principal was written in between."""
        return at_rest(self.path_for(scope), now)

    async def principal_db(self, scope: Scope) -> PrincipalDb:
        """The principal's open file (opened on first use, kept by the pool)."""
        return await self.pool.get(scope.principal)

    def lease(self, principal: str) -> AbstractAsyncContextManager[None]:
        return self.pool.lease(principal)

    def open_principals(self) -> list[str]:
        return self.pool.principals()

    def pool_figures(self) -> dict[str, int]:
        return self.pool.figures()

    @asynccontextmanager
    async def transaction(self, scope: Scope) -> AsyncIterator[aiosqlite.Connection]:
        """One BEGIN IMMEDIATE transaction; the vector index catches up after the commit."""
        db = await self.principal_db(scope)
        async with db.write_lock:
            conn = db.writer
            # BEGIN, COMMIT and ROLLBACK are shielded: a cancelled caller (a client's cancel) must never
            # leave the writer inside an open transaction holding the file's write lock.
            try:
                with anyio.CancelScope(shield=True):
                    await conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                raise StorageError(f"the data file is busy (another process holds the write lock): {exc}") from exc
            try:
                began = await self.vectors.began(conn)
                yield conn
                with anyio.CancelScope(shield=True):  # an engine outside the file follows, then the commit
                    await self.vectors.writing(scope, conn, began)
            except BaseException:
                with anyio.CancelScope(shield=True):
                    if conn.in_transaction:
                        await conn.execute("ROLLBACK")
                self.vectors.abandoned(scope)
                raise
            try:
                with anyio.CancelScope(shield=True):
                    await conn.execute("COMMIT")
            except sqlite3.Error as exc:
                with anyio.CancelScope(shield=True):
                    if conn.in_transaction:
                        await conn.execute("ROLLBACK")
                self.vectors.abandoned(scope)
                raise StorageError(f"write failed: {exc}") from exc
            if db.scrub_pending:
                db.scrub_pending = not await db.truncate_wal(attempts=1)
        await db.catch_up()

    async def reader(self, scope: Scope) -> aiosqlite.Connection:
        """The principal's read connection (sees committed data only)."""
        return (await self.principal_db(scope)).reader

    async def commit_mark(self, scope: Scope) -> tuple[object, tuple[int, ...]]:
        """What moves whenever anyone commits to the principal's rows: the open file (a reopened
        one counts from 1 again) and its ``PRAGMA data_version``."""
        db = await self.principal_db(scope)
        rows = await db.reader.execute_fetchall("PRAGMA data_version")
        return db, (int(next(iter(rows))[0]),)

    async def known_principals(self) -> list[str]:
        """Every principal with a file in the data directory (for the scheduler)."""

        def read() -> list[str]:
            names = []
            for path in sorted((self.data_dir / "principals").glob("*.db")):
                conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=self.busy_timeout_ms / 1000)
                try:
                    row = conn.execute("SELECT value FROM meta WHERE key = 'principal'").fetchone()
                except sqlite3.Error:
                    row = None
                finally:
                    conn.close()
                if row is not None:
                    names.append(str(row[0]))
            return names

        return await anyio.to_thread.run_sync(read)

    def describe(self, scope: Scope) -> str:
        return f"the store at {str(self.path_for(scope))!r}"

    async def _overlay(self, scope: Scope, records: list[MemoryRecord]) -> None:
        (await self.principal_db(scope)).reinforcement.overlay(records)  # recall's uses not written yet

    # ----- reads ---------------------------------------------------------------------------

    async def keyword_search(
        self, scope: Scope, terms: Sequence[str], criteria: Criteria, limit: int, now: float
    ) -> list[tuple[str, float]]:
        """Top ``limit`` (memory id, bm25) where a larger score is better.

        The keyword index ranks first and the scope filters its best ``KEYWORD_OVERFETCH`` x ``limit``
        (joining every match to its row first cost 16 of 18 ms at 100k memories, where a common name
        matches thousands); when the filter leaves fewer than ``limit`` of a full list, the whole
        search runs again with the filter inside, so the answer is the same either way."""
        if not terms:
            return []
        db = await self.principal_db(scope)
        where, params = visible_clause(scope, criteria, now)
        match = fts_match(terms)
        first = limit * KEYWORD_OVERFETCH
        ranked = (  # each of the index's best, and whether the scope and criteria let it through
            f"SELECT m.id, f.score, ({where}) FROM (SELECT rowid, bm25(memories_fts) AS score FROM memories_fts "
            "WHERE memories_fts MATCH ? ORDER BY score LIMIT ?) AS f LEFT JOIN memories m ON m.n = f.rowid "
            "ORDER BY f.score"
        )
        whole = (
            "SELECT m.id, bm25(memories_fts) AS score FROM memories_fts "
            "JOIN memories m ON m.n = memories_fts.rowid "
            f"WHERE memories_fts MATCH ? AND {where} ORDER BY score LIMIT ?"
        )
        try:
            best = list(await db.reader.execute_fetchall(ranked, [*params, match, first]))
            rows = [r for r in best if r[2]][:limit]
            if len(rows) < limit and len(best) == first:  # the filter left too few of a full list
                rows = list(await db.reader.execute_fetchall(whole, [match, *params, limit]))
        except sqlite3.OperationalError as exc:
            raise StorageError(f"keyword search failed: {exc}") from exc
        return [(str(r[0]), -float(r[1])) for r in rows]

    async def keyword_searches(
        self, scope: Scope, asked: Sequence[Sequence[str]], criteria: Criteria, limit: int, now: float
    ) -> list[list[tuple[str, float]]]:
        """In turn: in this process there are no round trips to save."""
        return [await self.keyword_search(scope, terms, criteria, limit, now) for terms in asked]

    # ----- writes --------------------------------------------------------------------------

    async def reinforce(self, scope: Scope, ids: Sequence[str], now: float) -> None:
        (await self.principal_db(scope)).reinforcement.reinforced(ids, now)

    async def flush_reinforcement(self, scope: Scope | None = None) -> None:
        principals = [scope.principal] if scope is not None else self.pool.principals()
        for principal in principals:
            db = self.pool.get_open(principal)
            if db is not None:
                await db.reinforcement.flush(self.transaction(Scope(principal)))

    async def _flush_principal(self, principal: str) -> None:
        await self.flush_reinforcement(Scope(principal))

    async def _upkeep(self) -> None:
        """Buffered reinforcement written, idle principals closed."""
        await self.flush_reinforcement()
        await self.pool.close_idle()

    async def delete(self, scope: Scope, ids: Sequence[str], **how: Any) -> tuple[int, bool]:
        """``how`` as ``writes.delete`` takes it (unpinned_only, derived, event); then ``scrub`` rewrites
        the keyword index and empties the WAL."""
        if not ids:
            return 0, True
        async with self.transaction(scope) as conn:
            deleted = await writes.delete(conn, sorted((await rows_of(conn, ids)).values()), **how)
        return deleted, await self.scrub(scope)

    async def scrub(self, scope: Scope) -> bool:
        """Rewrite the keyword index without deleted rows and empty the WAL; True when the WAL emptied.

        A reader in another process can keep old WAL frames alive; the checkpoint never waits for it
        (that would hold the write lock for the whole busy timeout). It is retried after later commits.
        """
        db = await self.principal_db(scope)
        async with self.transaction(scope) as conn:
            # FTS5 keeps deleted tokens in old segments until they merge; 'optimize' rewrites them all.
            await conn.execute("INSERT INTO memories_fts(memories_fts) VALUES ('optimize')")
        async with db.write_lock:
            done = await db.truncate_wal(attempts=5)
            db.scrub_pending = not done
        # A migration backup holds the text as it was: forgetting means it goes too.
        async for backup in anyio.Path(db.path.parent).glob(f"{db.path.stem}.v*.bak.db"):
            await backup.unlink(missing_ok=True)
        return done

    async def erase_principal(self, scope: Scope, now: float) -> dict[str, int]:
        """Rows go with secure_delete on, the keyword index is rebuilt empty, the file is vacuumed (no free
        page keeps old bytes), the WAL is emptied, and migration backups of the file are removed."""
        db = await self.principal_db(scope)
        async with self.transaction(scope) as conn:
            counts = await writes.erase_principal(conn, now)
        async with self.transaction(scope) as conn:
            await conn.execute("INSERT INTO memories_fts(memories_fts) VALUES ('rebuild')")
        async with db.write_lock:
            await db.writer.execute("VACUUM")
            counts["wal_emptied"] = int(await db.truncate_wal(attempts=5))
            db.scrub_pending = not counts["wal_emptied"]
        folder = anyio.Path(db.path.parent)
        async for backup in folder.glob(f"{db.path.stem}.v*.bak.db"):
            await backup.unlink(missing_ok=True)
        counts["vector_points"] = await self.erase_points(scope)
        return counts
