"""SqliteStore: the system of record, one SQLite file per principal.

Isolation is structural: a Scope selects the principal's file, and every query inside it also
filters by the scope's namespace. Several processes may share a data directory: every write is
one ``BEGIN IMMEDIATE`` transaction that also appends to the ``changes`` log, and before a read
each process checks ``PRAGMA data_version`` and replays the log into its vector index, so
process B answers with what process A wrote (or forgot) a moment ago.

SqliteStore opens the files and transactions and answers the reads; one open file and its vector
index is a ``principal.PrincipalDb``, the SQL of writes is in ``writes``, and the row helpers the
stores share are in ``rows``.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import aiosqlite
import anyio
from anyio.abc import TaskGroup

from mcp_memory.errors import ModelMismatchError, StorageError
from mcp_memory.models import (
    Applied,
    Criteria,
    Link,
    MemoryRecord,
    Merge,
    NewMemory,
    RecordOrder,
    Scope,
    Vector,
)
from mcp_memory.storage import links, second, writes
from mcp_memory.storage.browse import BrowseStore
from mcp_memory.storage.counts import CountStore
from mcp_memory.storage.golden import GoldenStore
from mcp_memory.storage.lifecycle import LifecycleStore
from mcp_memory.storage.pool import PoolLimits, PrincipalPool, principal_file
from mcp_memory.storage.principal import PrincipalDb
from mcp_memory.storage.rows import (
    MEMORY_COLUMNS,
    attach_occurrences,
    blob,
    fts_match,
    live_by_hash,
    replaced_by_hash,
    row_to_record,
    rows_of,
    visible_clause,
)
from mcp_memory.storage.schema import private_dir, tighten
from mcp_memory.storage.vector_search import ExactVectorSearch

if TYPE_CHECKING:  # an optional engine (the qdrant extra)
    from mcp_memory.storage.qdrant_search import QdrantVectorSearch

    SqliteVectors = ExactVectorSearch | QdrantVectorSearch

log = logging.getLogger(__name__)

# Recall's reinforcement waits in memory at most this long before it is written (and at close):
# reads never take the write lock, and a crash loses at most these seconds of access counts.
REINFORCE_FLUSH_SECONDS = 2.0


_ORDERS: dict[str, str] = {
    "stored": "m.n",
    "importance": "m.importance DESC, m.n",
    "occurred": "m.occurred_at, m.n",
}
# The same orders in Python, for a read of more ids than one IN list holds.
_ORDER_KEYS: dict[str, Callable[[MemoryRecord], tuple[float, ...]]] = {
    "stored": lambda r: (r.rowid,),
    "importance": lambda r: (-r.importance, r.rowid),
    "occurred": lambda r: (r.occurred_at, r.rowid),
}
IN_LIST = 500  # ids per IN list (SQLite's limit on variables can be as low as 999)


class SqliteStore:
    def __init__(
        self,
        data_dir: Path,
        busy_timeout_ms: int = 10_000,
        pool: PoolLimits | None = None,
        vectors: Callable[[SqliteStore], SqliteVectors] = ExactVectorSearch,
    ) -> None:
        self.data_dir = data_dir
        self.busy_timeout_ms = busy_timeout_ms
        self.pool = PrincipalPool(data_dir, busy_timeout_ms, pool or PoolLimits(), self._flush_principal)
        self.lifecycle = LifecycleStore(self)  # the lifecycle passes' reads and writes, on these files
        self.counts = CountStore(self)  # what stats and receipts count
        self.browse = BrowseStore(self)  # paging through memories and their history
        self.golden = GoldenStore(self)  # the queries that guard the passes, and their checks
        self.vectors = vectors(self)  # the dense side of recall: each principal's exact index, or Qdrant
        self._group: TaskGroup | None = None

    async def __aenter__(self) -> SqliteStore:
        try:
            await anyio.to_thread.run_sync(private_dir, self.data_dir)
            await anyio.to_thread.run_sync(tighten, self.data_dir)
        except OSError as exc:
            raise StorageError(
                f"cannot create the data directory {str(self.data_dir)!r}: {exc.strerror or exc}; "
                "set data_dir (or --data-dir) to a writable folder"
            ) from None
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        self._group.start_soon(self._flush_every, REINFORCE_FLUSH_SECONDS)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._group is not None:
            self._group.cancel_scope.cancel()
            await self._group.__aexit__(None, None, None)
            self._group = None
        with anyio.CancelScope(shield=True):
            await self.flush_reinforcement()
        await self.pool.close()
        await self.vectors.close()

    # ----- opening -------------------------------------------------------------------------

    def path_for(self, scope: Scope) -> Path:
        return principal_file(self.data_dir, scope.principal)

    async def principal_db(self, scope: Scope) -> PrincipalDb:
        """The principal's open file (opened on first use, kept by the pool)."""
        return await self.pool.get(scope.principal)

    def lease(self, principal: str, holder: object | None = None) -> AbstractAsyncContextManager[None]:
        """Keep ``principal``'s file open while a call runs and while ``holder`` (its session) lives."""
        return self.pool.lease(principal, holder)

    def release(self, principal: str, holder: object) -> None:
        self.pool.release(principal, holder)

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

    # ----- model metadata ------------------------------------------------------------------

    async def check_model(self, scope: Scope, model_id: str, dim: int) -> None:
        """Record the embedding model on first use; refuse vectors from another model."""
        db = await self.principal_db(scope)
        rows = await db.reader.execute_fetchall("SELECT key, value FROM meta WHERE key IN ('embed_model', 'embed_dim')")
        meta = {str(k): str(v) for k, v in rows}
        if "embed_model" not in meta:
            async with self.transaction(scope) as conn:
                await conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('embed_model', ?)", (model_id,))
                await conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('embed_dim', ?)", (str(dim),))
            return await self.check_model(scope, model_id, dim)
        if meta["embed_model"] != model_id or int(meta["embed_dim"]) != dim:
            raise ModelMismatchError(
                f"the store at {str(db.path)!r} was built with embedding model {meta['embed_model']} "
                f"(dimension {meta['embed_dim']}), but the configured model is {model_id} (dimension {dim}). "
                "Run `mcp-memory reindex` to re-embed every memory with the configured model, "
                "or configure the original model again."
            )

    async def stored_model(self, scope: Scope) -> tuple[str | None, int | None]:
        db = await self.principal_db(scope)
        rows = await db.reader.execute_fetchall("SELECT key, value FROM meta WHERE key IN ('embed_model', 'embed_dim')")
        meta = {str(k): str(v) for k, v in rows}
        dim = meta.get("embed_dim")
        return meta.get("embed_model"), int(dim) if dim else None

    # ----- reads ---------------------------------------------------------------------------

    async def links(self, scope: Scope, sources: Sequence[str], population: int) -> list[Link]:
        """The memories linked to ``sources`` (shared rare entities, session neighbours); recall reads
        the targets through ``select_memories``, so what a scope may not see never comes back."""
        db = await self.principal_db(scope)
        return await links.links(db.reader, sources, population)

    async def second_vectors(self, scope: Scope, ids: Sequence[str], model_id: str) -> dict[str, Vector]:
        """The second model's vectors of memories ``ids`` (ADR 14); those without one are absent."""
        return await second.read((await self.principal_db(scope)).reader, ids, model_id)

    async def put_second_vectors(
        self, scope: Scope, model_id: str, vectors: Sequence[tuple[str, Vector]], *, first: bool = False
    ) -> int:
        """Second vectors of stored memories, by id (reindex, the pass); a ``first`` chunk drops every earlier one."""
        async with self.transaction(scope) as conn:
            if first:
                await second.start_over(conn, model_id)
            return await second.put(conn, model_id, vectors)

    async def eligible(self, scope: Scope, criteria: Criteria, now: float) -> list[int]:
        db = await self.principal_db(scope)
        where, params = visible_clause(scope, criteria, now)
        rows = await db.reader.execute_fetchall(f"SELECT m.n FROM memories m WHERE {where}", params)
        return [int(r[0]) for r in rows]

    async def keyword_search(
        self, scope: Scope, terms: Sequence[str], criteria: Criteria, limit: int, now: float
    ) -> list[tuple[str, float]]:
        """Top ``limit`` (memory id, bm25) where a larger score is better."""
        if not terms:
            return []
        db = await self.principal_db(scope)
        where, params = visible_clause(scope, criteria, now)
        sql = (
            "SELECT m.id, bm25(memories_fts) AS score FROM memories_fts "
            "JOIN memories m ON m.n = memories_fts.rowid "
            f"WHERE memories_fts MATCH ? AND {where} ORDER BY score LIMIT ?"
        )
        try:
            rows = await db.reader.execute_fetchall(sql, [fts_match(terms), *params, limit])
        except sqlite3.OperationalError as exc:
            raise StorageError(f"keyword search failed: {exc}") from exc
        return [(str(r[0]), -float(r[1])) for r in rows]

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
        if among is not None and len(among) > IN_LIST:
            records = [
                record
                for start in range(0, len(among), IN_LIST)
                for record in await self.select_memories(scope, criteria, now, among=among[start : start + IN_LIST])
            ]
            records.sort(key=_ORDER_KEYS[order])
            return records if limit is None else records[:limit]
        db = await self.principal_db(scope)
        where, params = visible_clause(scope, criteria, now)
        if among is not None:
            if not among:
                return []
            where += f" AND m.id IN ({','.join('?' * len(among))})"
            params.extend(among)
        sql = f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE {where} ORDER BY {_ORDERS[order]}"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        records = [row_to_record(r) for r in await db.reader.execute_fetchall(sql, params)]
        await attach_occurrences(db.reader, records)
        db.overlay(records)
        return records

    async def find_by_hash(self, scope: Scope, hashes: Sequence[str], now: float) -> dict[str, str]:
        """content hash -> id of a live memory in exactly the scope's namespace."""
        return await live_by_hash((await self.principal_db(scope)).reader, scope, hashes, now) if hashes else {}

    async def replaced_by_hash(self, scope: Scope, hashes: Sequence[str], now: float) -> dict[str, str]:
        """content hash -> the live memory that replaced the latest copy of that text (following
        replacements of replacements), for texts no live memory says now."""
        return await replaced_by_hash((await self.principal_db(scope)).reader, scope, hashes, now) if hashes else {}

    async def change_mark(self, scope: Scope) -> int:
        """The last entry of the principal's change log: it moves with every write of any process."""
        rows = await (await self.principal_db(scope)).reader.execute_fetchall(
            "SELECT COALESCE(MAX(seq), 0) FROM changes"
        )
        return int(next(iter(rows))[0])

    async def count(self, scope: Scope) -> dict[str, int]:
        db = await self.principal_db(scope)
        counts: dict[str, int] = {}
        for table in ("memories", "occurrences", "vectors", "memory_tags", "memories_fts", "changes"):
            rows = await db.reader.execute_fetchall(f"SELECT COUNT(*) FROM {table}")
            counts[table] = int(next(iter(rows))[0])
        return counts

    # ----- writes --------------------------------------------------------------------------

    async def apply(self, scope: Scope, inserts: Sequence[NewMemory], merges: Sequence[Merge]) -> Applied:
        """Insert new memories and record merged occurrences in one transaction.

        Returns what each insert superseded and which inserts merged into a live copy instead.
        Raises NotFoundError, writing nothing, when a ``supersedes`` id is not in the scope.
        """
        now = time.time()
        async with self.transaction(scope) as conn:
            return await writes.apply(conn, scope, inserts, merges, now)

    async def set_pinned(self, scope: Scope, memory_id: str, pinned: bool) -> None:
        async with self.transaction(scope) as conn:
            for n in (await rows_of(conn, [memory_id])).values():
                await conn.execute("UPDATE memories SET pinned = ? WHERE n = ?", (int(pinned), n))
                # Every write to a memory moves the change log, a pin too: watchers read pins only then.
                await conn.execute("INSERT INTO changes(memory_n, op) VALUES (?, 'put')", (n,))

    async def reinforce(self, scope: Scope, ids: Sequence[str], now: float) -> None:
        """Recall strengthens what it returns (access count, last access) without taking the write
        lock: the counts wait in memory and are written in batches (ADR 11)."""
        (await self.principal_db(scope)).reinforced(ids, now)

    async def flush_reinforcement(self, scope: Scope | None = None) -> None:
        """Write the buffered reinforcement of one principal (or of every open one) now."""
        principals = [scope.principal] if scope is not None else self.pool.principals()
        for principal in principals:
            db = self.pool.get_open(principal)
            if db is None or not db.pending:
                continue
            db.flushing, db.pending = db.pending, {}
            try:
                async with self.transaction(Scope(principal)) as conn:
                    await conn.executemany(
                        "UPDATE memories SET access_count = access_count + ?, "
                        "last_accessed_at = MAX(COALESCE(last_accessed_at, 0), ?) WHERE id = ?",
                        [(count, last, ident) for ident, (count, last) in db.flushing.items()],
                    )
            except StorageError as exc:  # busy: the counts go back and wait for the next flush
                log.warning("reinforcement of %d memories not written yet: %s", len(db.flushing), exc)
                db.reinforce_again(db.flushing)
            finally:
                db.flushing = {}

    async def _flush_principal(self, principal: str) -> None:
        await self.flush_reinforcement(Scope(principal))

    async def _flush_every(self, seconds: float) -> None:
        """Background upkeep: buffered reinforcement written, idle principals closed."""
        while True:
            await anyio.sleep(seconds)
            try:
                await self.flush_reinforcement()
                await self.pool.close_idle()
            except Exception:  # never let the upkeep die: the next round retries
                log.exception("store upkeep failed")

    async def delete(self, scope: Scope, ids: Sequence[str], **how: Any) -> tuple[int, bool]:
        """Delete memories everywhere and leave no recoverable text (FTS rewrite, WAL truncate); ``how``
        as ``writes.delete`` takes it (unpinned_only, derived, event). Returns the count and whether
        the WAL was emptied now (else at a later commit)."""
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
        """Delete everything the principal has and keep only a content-free record that it happened.

        Rows go with secure_delete on, the keyword index is rebuilt empty, the file is vacuumed (no
        free page keeps old bytes), the WAL is emptied, and migration backups of the file are removed.
        Other processes see the deletions through the change log. Returns the counts per table.
        """
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
        try:  # last: the file is scrubbed whatever the engine says
            counts["vector_points"] = await self.vectors.erase(scope)
        except StorageError as exc:
            log.error(
                "forget_user: the vector engine kept some points (`mcp-memory reindex --check` removes them): %s", exc
            )
        return counts

    async def replace_vectors(self, scope: Scope, vectors: Sequence[tuple[str, Vector]]) -> None:
        async with self.transaction(scope) as conn:
            rows = await rows_of(conn, [ident for ident, _ in vectors])
            found = [(rows[ident], v) for ident, v in vectors if ident in rows]
            await conn.executemany("UPDATE vectors SET vec = ? WHERE memory_n = ?", [(blob(v), n) for n, v in found])
            await conn.executemany("INSERT INTO changes(memory_n, op) VALUES (?, 'put')", [(n,) for n, _ in found])

    async def set_model(self, scope: Scope, model_id: str, dim: int) -> None:
        async with self.transaction(scope) as conn:
            await conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('embed_model', ?)", (model_id,))
            await conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('embed_dim', ?)", (str(dim),))
        await self.vectors.model_changed(scope)

    async def all_ids(self, scope: Scope) -> list[tuple[str, str]]:
        """(id, text) of every memory of the principal (all namespaces), as stored, for reindex."""
        db = await self.principal_db(scope)
        rows = await db.reader.execute_fetchall("SELECT id, content FROM memories ORDER BY n")
        return [(str(ident), str(c)) for ident, c in rows]

    async def export_rows(self, scope: Scope) -> list[MemoryRecord]:
        db = await self.principal_db(scope)
        records = [
            row_to_record(r) for r in await db.reader.execute_fetchall(f"SELECT {MEMORY_COLUMNS} FROM memories m")
        ]
        await attach_occurrences(db.reader, records)
        return records

    async def existing_ids(self, scope: Scope, ids: Sequence[str]) -> set[str]:
        db = await self.principal_db(scope)
        found: set[str] = set()
        for start in range(0, len(ids), 500):
            chunk = list(ids[start : start + 500])
            rows = await db.reader.execute_fetchall(
                f"SELECT id FROM memories WHERE id IN ({','.join('?' * len(chunk))})", chunk
            )
            found.update(str(r[0]) for r in rows)
        return found
