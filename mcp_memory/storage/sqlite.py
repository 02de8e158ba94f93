"""SqliteStore: the system of record, one SQLite file per principal.

Isolation is structural: a Scope selects the principal's file, and every query inside it also
filters by the scope's namespace. Several processes may share a data directory: every write is
one ``BEGIN IMMEDIATE`` transaction that also appends to the ``changes`` log, and before a read
each process checks ``PRAGMA data_version`` and replays the log into its vector index, so
process B answers with what process A wrote (or forgot) a moment ago.
"""

from __future__ import annotations

import functools
import hashlib
import re
import sqlite3
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

import aiosqlite
import anyio
import numpy as np
import orjson

from mcp_memory.errors import ConflictError, ModelMismatchError, NotFoundError, StorageError
from mcp_memory.models import Criteria, MemoryRecord, Merge, NewMemory, NewOccurrence, Provenance, Scope
from mcp_memory.storage.schema import migrate, private_dir
from mcp_memory.storage.vectors import IndexRow, Vector, VectorIndex

MEMORY_COLUMNS = (
    "n, id, namespace, kind, content, key, tags, metadata, importance, pinned, occurred_at, created_at, "
    "last_accessed_at, access_count, valid_from, valid_to, superseded_by, expires_at, tier, level, language, "
    "session_key, task_id, client_name, client_version, transport, content_hash"
)


def principal_file(data_dir: Path, principal: str) -> Path:
    """A file name no principal string can steer outside the data directory."""
    slug = re.sub(r"[^a-z0-9_-]+", "_", principal.lower())[:40].strip("_") or "p"
    digest = hashlib.sha256(principal.encode("utf-8")).hexdigest()[:16]
    return data_dir / "principals" / f"{slug}-{digest}.db"


def row_to_record(row: Sequence[Any]) -> MemoryRecord:
    return MemoryRecord(
        rowid=row[0],
        id=row[1],
        namespace=row[2],
        kind=row[3],
        content=row[4],
        key=row[5],
        tags=orjson.loads(row[6]),
        metadata=orjson.loads(row[7]),
        importance=row[8],
        pinned=bool(row[9]),
        occurred_at=row[10],
        created_at=row[11],
        last_accessed_at=row[12],
        access_count=row[13],
        valid_from=row[14],
        valid_to=row[15],
        superseded_by=row[16],
        expires_at=row[17],
        tier=row[18],
        level=row[19],
        language=row[20],
        session_key=row[21],
        task_id=row[22],
        provenance=Provenance(client_name=row[23], client_version=row[24], transport=row[25]),
        content_hash=row[26],
    )


def visible_clause(scope: Scope, criteria: Criteria, now: float, alias: str = "m") -> tuple[str, list[Any]]:
    """The WHERE clause that keeps a query inside the scope and the criteria."""
    clauses: list[str] = []
    params: list[Any] = []
    if criteria.namespace_only:
        clauses.append(f"{alias}.namespace IS ?")
        params.append(scope.namespace)
    elif scope.namespace is None:
        clauses.append(f"{alias}.namespace IS NULL")
    else:
        clauses.append(f"({alias}.namespace IS NULL OR {alias}.namespace = ?)")
        params.append(scope.namespace)
    if not criteria.include_superseded:
        clauses.append(f"{alias}.superseded_by IS NULL")
    if not criteria.include_archived:
        clauses.append(f"{alias}.tier = 'active'")
    if not criteria.include_expired:
        clauses.append(f"({alias}.expires_at IS NULL OR {alias}.expires_at > ?)")
        params.append(now)
    if criteria.ids is not None:
        clauses.append(f"{alias}.id IN ({','.join('?' * len(criteria.ids))})")
        params.extend(criteria.ids)
    if criteria.kinds:
        clauses.append(f"{alias}.kind IN ({','.join('?' * len(criteria.kinds))})")
        params.extend(criteria.kinds)
    if criteria.tags:
        marks = ",".join("?" * len(criteria.tags))
        clauses.append(f"{alias}.n IN (SELECT memory_n FROM memory_tags WHERE tag IN ({marks}))")
        params.extend(criteria.tags)
    if criteria.occurred_after is not None:
        clauses.append(f"{alias}.occurred_at >= ?")
        params.append(criteria.occurred_after)
    if criteria.occurred_before is not None:
        clauses.append(f"{alias}.occurred_at < ?")
        params.append(criteria.occurred_before)
    if criteria.task_id is not None:
        clauses.append(f"{alias}.task_id = ?")
        params.append(criteria.task_id)
    if criteria.pinned is not None:
        # A literal, so the partial index on pinned = 1 serves it.
        clauses.append(f"{alias}.pinned = {int(criteria.pinned)}")
    return " AND ".join(clauses), params


def fts_match(terms: Iterable[str]) -> str:
    """An FTS5 query that searches every term as a quoted phrase: no operator can slip through."""
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)


class _PrincipalDb:
    """One principal's file: a writer and a reader connection, and the derived vector index."""

    def __init__(self, path: Path, reader: aiosqlite.Connection, writer: aiosqlite.Connection) -> None:
        self.path = path
        self.reader = reader
        self.writer = writer
        self.write_lock = anyio.Lock()
        self.index_lock = anyio.Lock()
        self.index: VectorIndex | None = None
        self.last_seq = 0
        self.data_version = -1
        # A forget whose WAL could not be emptied (another process was reading): retried after each commit.
        self.scrub_pending = False

    async def close(self) -> None:
        await self.reader.close()
        await self.writer.close()


class SqliteStore:
    def __init__(self, data_dir: Path, busy_timeout_ms: int = 10_000) -> None:
        self.data_dir = data_dir
        self.busy_timeout_ms = busy_timeout_ms
        self._dbs: dict[str, _PrincipalDb] = {}
        self._open_lock = anyio.Lock()

    async def __aenter__(self) -> SqliteStore:
        try:
            await anyio.to_thread.run_sync(private_dir, self.data_dir)
        except OSError as exc:
            raise StorageError(
                f"cannot create the data directory {str(self.data_dir)!r}: {exc.strerror or exc}; "
                "set data_dir (or --data-dir) to a writable folder"
            ) from None
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        dbs, self._dbs = list(self._dbs.values()), {}
        for db in dbs:
            await db.close()

    # ----- opening -------------------------------------------------------------------------

    def path_for(self, scope: Scope) -> Path:
        return principal_file(self.data_dir, scope.principal)

    async def _connect(self, path: Path) -> aiosqlite.Connection:
        conn = await aiosqlite.connect(path, isolation_level=None, timeout=self.busy_timeout_ms / 1000)
        for pragma in (
            f"PRAGMA busy_timeout = {self.busy_timeout_ms}",
            "PRAGMA synchronous = NORMAL",
            "PRAGMA foreign_keys = ON",
            "PRAGMA secure_delete = ON",
        ):
            await conn.execute(pragma)
        return conn

    async def _db(self, scope: Scope) -> _PrincipalDb:
        db = self._dbs.get(scope.principal)
        if db is not None:
            return db
        async with self._open_lock:
            db = self._dbs.get(scope.principal)
            if db is None:
                path = self.path_for(scope)
                await anyio.to_thread.run_sync(migrate, path, self.busy_timeout_ms)
                try:
                    db = _PrincipalDb(path, await self._connect(path), await self._connect(path))
                except sqlite3.Error as exc:
                    raise StorageError(f"cannot open data file {str(path)!r}: {exc}") from exc
                self._dbs[scope.principal] = db
                # The file name is a hash: the scheduler reads the principal back from here.
                await db.writer.execute(
                    "INSERT OR IGNORE INTO meta(key, value) VALUES ('principal', ?)", (scope.principal,)
                )
        return db

    @asynccontextmanager
    async def transaction(self, scope: Scope) -> AsyncIterator[aiosqlite.Connection]:
        """One BEGIN IMMEDIATE transaction; the vector index catches up after the commit."""
        db = await self._db(scope)
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
                yield conn
            except BaseException:
                with anyio.CancelScope(shield=True):
                    if conn.in_transaction:
                        await conn.execute("ROLLBACK")
                raise
            try:
                with anyio.CancelScope(shield=True):
                    await conn.execute("COMMIT")
            except sqlite3.Error as exc:
                with anyio.CancelScope(shield=True):
                    if conn.in_transaction:
                        await conn.execute("ROLLBACK")
                raise StorageError(f"write failed: {exc}") from exc
            if db.scrub_pending:
                db.scrub_pending = not await self._truncate_wal(db, attempts=1)
        await self._catch_up(db)

    async def reader(self, scope: Scope) -> aiosqlite.Connection:
        """The principal's read connection (sees committed data only)."""
        return (await self._db(scope)).reader

    # ----- model metadata ------------------------------------------------------------------

    async def check_model(self, scope: Scope, model_id: str, dim: int) -> None:
        """Record the embedding model on first use; refuse vectors from another model."""
        db = await self._db(scope)
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
        db = await self._db(scope)
        rows = await db.reader.execute_fetchall("SELECT key, value FROM meta WHERE key IN ('embed_model', 'embed_dim')")
        meta = {str(k): str(v) for k, v in rows}
        dim = meta.get("embed_dim")
        return meta.get("embed_model"), int(dim) if dim else None

    # ----- the vector index ----------------------------------------------------------------

    async def _catch_up(self, db: _PrincipalDb) -> None:
        """Replay the change log into the in-process index (cheap when nothing moved)."""
        async with db.index_lock:
            if db.index is None:
                return
            rows = list(
                await db.reader.execute_fetchall(
                    "SELECT seq, memory_n FROM changes WHERE seq > ? ORDER BY seq", (db.last_seq,)
                )
            )
            if not rows:
                return
            touched = sorted({int(r[1]) for r in rows})
            found = await self._index_rows(db, touched)
            db.index.upsert(found)
            present = {row.n for row in found}
            db.index.remove([n for n in touched if n not in present])
            db.last_seq = int(rows[-1][0])

    async def _index_rows(self, db: _PrincipalDb, ns: Sequence[int] | None) -> list[IndexRow]:
        sql = (
            "SELECT m.n, v.vec, m.namespace, (m.tier = 'active' AND m.superseded_by IS NULL), m.expires_at "
            "FROM memories m JOIN vectors v ON v.memory_n = m.n"
        )
        rows: list[Any] = []
        if ns is None:
            rows = list(await db.reader.execute_fetchall(sql))
        else:
            for start in range(0, len(ns), 500):
                chunk = ns[start : start + 500]
                rows.extend(
                    await db.reader.execute_fetchall(f"{sql} WHERE m.n IN ({','.join('?' * len(chunk))})", tuple(chunk))
                )
        return [
            IndexRow(
                n=int(r[0]),
                vector=np.frombuffer(r[1], dtype=np.float32),
                namespace=r[2],
                live=bool(r[3]),
                expires_at=r[4],
            )
            for r in rows
        ]

    async def sync(self, scope: Scope, dim: int) -> VectorIndex:
        """The principal's index, loaded on first use and caught up with other processes."""
        db = await self._db(scope)
        version_rows = await db.reader.execute_fetchall("PRAGMA data_version")
        version = int(next(iter(version_rows))[0])
        if db.index is None:
            async with db.index_lock:
                if db.index is None:
                    seq_rows = await db.reader.execute_fetchall("SELECT COALESCE(MAX(seq), 0) FROM changes")
                    last_seq = int(next(iter(seq_rows))[0])
                    index = VectorIndex(dim)
                    index.upsert(await self._index_rows(db, None))
                    db.last_seq, db.index, db.data_version = last_seq, index, version
        if version != db.data_version:
            db.data_version = version
        await self._catch_up(db)
        assert db.index is not None
        return db.index

    async def dense_search(
        self, scope: Scope, query: Vector, criteria: Criteria, limit: int, now: float
    ) -> list[tuple[int, float]]:
        index = await self.sync(scope, query.shape[0])
        allow = None
        if criteria.narrows:
            allow = np.asarray(await self.eligible(scope, criteria, now), dtype=np.int64)
        run = functools.partial(
            index.search,
            query,
            namespace=scope.namespace,
            limit=limit,
            now=now,
            include_dead=criteria.include_superseded or criteria.include_archived,
            include_expired=criteria.include_expired,
            exact_namespace=criteria.namespace_only,
            allow=allow,
        )
        if len(index) > 20_000:  # a large scan must not stall the other clients on the event loop
            return await anyio.to_thread.run_sync(run)
        return run()

    # ----- reads ---------------------------------------------------------------------------

    async def eligible(self, scope: Scope, criteria: Criteria, now: float) -> list[int]:
        db = await self._db(scope)
        where, params = visible_clause(scope, criteria, now)
        rows = await db.reader.execute_fetchall(f"SELECT m.n FROM memories m WHERE {where}", params)
        return [int(r[0]) for r in rows]

    async def keyword_search(
        self, scope: Scope, terms: Sequence[str], criteria: Criteria, limit: int, now: float
    ) -> list[tuple[int, float]]:
        """Top ``limit`` (n, bm25) where a larger score is better."""
        if not terms:
            return []
        db = await self._db(scope)
        where, params = visible_clause(scope, criteria, now)
        sql = (
            "SELECT memories_fts.rowid, bm25(memories_fts) AS score FROM memories_fts "
            "JOIN memories m ON m.n = memories_fts.rowid "
            f"WHERE memories_fts MATCH ? AND {where} ORDER BY score LIMIT ?"
        )
        try:
            rows = await db.reader.execute_fetchall(sql, [fts_match(terms), *params, limit])
        except sqlite3.OperationalError as exc:
            raise StorageError(f"keyword search failed: {exc}") from exc
        return [(int(r[0]), -float(r[1])) for r in rows]

    async def select_memories(
        self,
        scope: Scope,
        criteria: Criteria,
        now: float,
        *,
        ns: Sequence[int] | None = None,
        limit: int | None = None,
        order: str = "m.n",
    ) -> list[MemoryRecord]:
        db = await self._db(scope)
        where, params = visible_clause(scope, criteria, now)
        if ns is not None:
            if not ns:
                return []
            where += f" AND m.n IN ({','.join('?' * len(ns))})"
            params.extend(ns)
        sql = f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE {where} ORDER BY {order}"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        records = [row_to_record(r) for r in await db.reader.execute_fetchall(sql, params)]
        await self._attach_occurrences(db, records)
        return records

    @staticmethod
    async def _rows_in(db: _PrincipalDb, sql: str, keys: Sequence[Any]) -> list[Any]:
        """Run ``sql`` (with a ``{marks}`` placeholder for an IN list) over ``keys`` in chunks."""
        rows: list[Any] = []
        for start in range(0, len(keys), 500):
            chunk = list(keys[start : start + 500])
            rows.extend(await db.reader.execute_fetchall(sql.format(marks=",".join("?" * len(chunk))), chunk))
        return rows

    async def _attach_occurrences(self, db: _PrincipalDb, records: list[MemoryRecord]) -> None:
        """Occurrence ids, conflicts and summary sources: what a record carries besides its row."""
        if not records:
            return
        by_n = {r.rowid: r for r in records}
        by_id = {r.id: r for r in records}
        for memory_n, occ_id, occurred_at in await self._rows_in(
            db,
            "SELECT memory_n, id, occurred_at FROM occurrences WHERE memory_n IN ({marks}) ORDER BY occurred_at, id",
            list(by_n),
        ):
            record = by_n[int(memory_n)]
            record.occurrence_ids.append(str(occ_id))
            record.last_seen_at = float(occurred_at)
        for memory_id, other_id in await self._rows_in(
            db, "SELECT memory_id, other_id FROM conflicts WHERE memory_id IN ({marks}) ORDER BY other_id", list(by_id)
        ):
            by_id[str(memory_id)].conflicts_with.append(str(other_id))
        for summary_id, source_id in await self._rows_in(
            db,
            "SELECT summary_id, source_id FROM summary_sources WHERE summary_id IN ({marks}) ORDER BY source_id",
            list(by_id),
        ):
            by_id[str(summary_id)].source_ids.append(str(source_id))

    async def find_by_hash(self, scope: Scope, hashes: Sequence[str], now: float) -> dict[str, str]:
        """content hash -> id of a live memory in exactly the scope's namespace."""
        if not hashes:
            return {}
        db = await self._db(scope)
        rows = await db.reader.execute_fetchall(
            f"SELECT content_hash, id FROM memories m WHERE content_hash IN ({','.join('?' * len(hashes))}) "
            "AND m.namespace IS ? AND m.superseded_by IS NULL AND m.tier = 'active' "
            "AND (m.expires_at IS NULL OR m.expires_at > ?)",
            [*hashes, scope.namespace, now],
        )
        return {str(h): str(i) for h, i in rows}

    async def count(self, scope: Scope) -> dict[str, int]:
        db = await self._db(scope)
        counts: dict[str, int] = {}
        for table in ("memories", "occurrences", "vectors", "memory_tags", "memories_fts", "changes"):
            rows = await db.reader.execute_fetchall(f"SELECT COUNT(*) FROM {table}")
            counts[table] = int(next(iter(rows))[0])
        return counts

    # ----- writes --------------------------------------------------------------------------

    async def apply(self, scope: Scope, inserts: Sequence[NewMemory], merges: Sequence[Merge]) -> dict[str, list[str]]:
        """Insert new memories and record merged occurrences in one transaction.

        Returns, per inserted id, the ids it superseded (by ``supersedes`` or by ``key``).
        Raises NotFoundError, writing nothing, when a ``supersedes`` id is not in the scope.
        """
        now = time.time()
        superseded: dict[str, list[str]] = {}
        where, params = visible_clause(scope, Criteria(include_expired=True, include_archived=True), now)
        async with self.transaction(scope) as conn:
            for item in inserts:
                rec = item.record
                cursor = await conn.execute(
                    "INSERT INTO memories (id, namespace, kind, content, key, tags, metadata, importance, pinned, "
                    "occurred_at, created_at, last_accessed_at, access_count, valid_from, valid_to, superseded_by, "
                    "expires_at, tier, level, language, session_key, task_id, client_name, client_version, "
                    "transport, content_hash) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (
                        rec.id,
                        rec.namespace,
                        rec.kind,
                        rec.content,
                        rec.key,
                        orjson.dumps(rec.tags).decode(),
                        orjson.dumps(rec.metadata).decode(),
                        rec.importance,
                        int(rec.pinned),
                        rec.occurred_at,
                        rec.created_at,
                        rec.last_accessed_at,
                        rec.access_count,
                        rec.valid_from,
                        rec.valid_to,
                        rec.superseded_by,
                        rec.expires_at,
                        rec.tier,
                        rec.level,
                        rec.language,
                        rec.session_key,
                        rec.task_id,
                        rec.provenance.client_name,
                        rec.provenance.client_version,
                        rec.provenance.transport,
                        rec.content_hash,
                    ),
                )
                n = cursor.lastrowid
                assert n is not None
                await conn.executemany(
                    "INSERT OR IGNORE INTO memory_tags(tag, memory_n) VALUES (?, ?)",
                    [(t, n) for t in rec.tags],
                )
                await conn.execute("INSERT INTO vectors(memory_n, vec) VALUES (?, ?)", (n, item.vector))
                await conn.execute("INSERT INTO memories_fts(rowid, body) VALUES (?, ?)", (n, item.segmented))
                for occurrence in (item.occurrence, *item.more_occurrences):
                    await self._insert_occurrence(conn, n, occurrence)
                await conn.execute("INSERT INTO changes(memory_n, op) VALUES (?, 'put')", (n,))
                await conn.executemany(
                    "INSERT OR IGNORE INTO conflicts(memory_id, other_id, created_at) VALUES (?, ?, ?)",
                    [(a, b, rec.created_at) for other in item.conflicts for a, b in ((rec.id, other), (other, rec.id))],
                )
                if item.summarizes:
                    marks = ",".join("?" * len(item.summarizes))
                    # The pass read its candidates earlier: a source forgotten, pinned, superseded or
                    # expired since then must not be summarized (nor its text brought back).
                    live = await conn.execute_fetchall(
                        f"SELECT COUNT(*) FROM memories WHERE id IN ({marks}) AND tier = 'active' AND pinned = 0 "
                        "AND level < ? AND superseded_by IS NULL AND (expires_at IS NULL OR expires_at > ?)",
                        [*item.summarizes, rec.level, rec.created_at],
                    )
                    if int(next(iter(live))[0]) != len(item.summarizes):
                        raise ConflictError("the memories to summarize changed since the pass read them")
                    await conn.executemany(
                        "INSERT OR IGNORE INTO summary_sources(summary_id, source_id) VALUES (?, ?)",
                        [(rec.id, source) for source in item.summarizes],
                    )
                    await conn.execute(
                        f"INSERT INTO changes(memory_n, op) SELECT n, 'put' FROM memories WHERE id IN ({marks})",
                        item.summarizes,
                    )
                    await conn.execute(f"UPDATE memories SET tier = 'archived' WHERE id IN ({marks})", item.summarizes)
                old: list[tuple[int, str]] = []
                if item.supersedes:
                    marks = ",".join("?" * len(item.supersedes))
                    found = await conn.execute_fetchall(
                        f"SELECT m.n, m.id FROM memories m WHERE m.id IN ({marks}) AND {where}",
                        [*item.supersedes, *params],
                    )
                    old.extend((int(r[0]), str(r[1])) for r in found)
                    missing = set(item.supersedes) - {i for _, i in old}
                    if missing:
                        raise NotFoundError("memory", sorted(missing)[0])
                if item.inferred_supersedes:
                    # Replaced by the rules, not named by the caller: one already gone or replaced is skipped.
                    marks = ",".join("?" * len(item.inferred_supersedes))
                    found = await conn.execute_fetchall(
                        f"SELECT m.n, m.id FROM memories m WHERE m.id IN ({marks}) AND m.superseded_by IS NULL "
                        f"AND {where}",
                        [*item.inferred_supersedes, *params],
                    )
                    old.extend((int(r[0]), str(r[1])) for r in found)
                if rec.key is not None:
                    found = await conn.execute_fetchall(
                        "SELECT n, id FROM memories WHERE key = ? AND namespace IS ? AND superseded_by IS NULL "
                        "AND n != ?",
                        (rec.key, rec.namespace, n),
                    )
                    old.extend((int(r[0]), str(r[1])) for r in found)
                for old_n, _ in old:
                    await conn.execute(
                        "UPDATE memories SET valid_to = ?, superseded_by = ? WHERE n = ? AND superseded_by IS NULL",
                        (rec.created_at, rec.id, old_n),
                    )
                    await conn.execute("INSERT INTO changes(memory_n, op) VALUES (?, 'put')", (old_n,))
                superseded[rec.id] = sorted({i for _, i in old})
            for merge in merges:
                rows = await conn.execute_fetchall("SELECT n FROM memories WHERE id = ?", (merge.target_id,))
                if rows:
                    target_n = int(next(iter(rows))[0])
                    await self._insert_occurrence(conn, target_n, merge.occurrence)
                    if merge.seen_at is not None:
                        await conn.execute(
                            "UPDATE memories SET last_accessed_at = MAX(COALESCE(last_accessed_at, created_at), ?) "
                            "WHERE n = ?",
                            (merge.seen_at, target_n),
                        )
                    if merge.supersedes:
                        marks = ",".join("?" * len(merge.supersedes))
                        found = await conn.execute_fetchall(
                            f"SELECT m.n, m.id FROM memories m WHERE m.id IN ({marks}) AND m.superseded_by IS NULL "
                            f"AND m.n != ? AND {where}",
                            [*merge.supersedes, target_n, *params],
                        )
                        for old_n, _ in found:
                            await conn.execute(
                                "UPDATE memories SET valid_to = ?, superseded_by = ? WHERE n = ?",
                                (merge.seen_at or now, merge.target_id, old_n),
                            )
                            await conn.execute("INSERT INTO changes(memory_n, op) VALUES (?, 'put')", (old_n,))
                        superseded[merge.target_id] = sorted(
                            {*superseded.get(merge.target_id, []), *(str(i) for _, i in found)}
                        )
        return superseded

    @staticmethod
    async def _insert_occurrence(conn: aiosqlite.Connection, n: int, occ: NewOccurrence) -> None:
        await conn.execute(
            "INSERT INTO occurrences(id, memory_n, session_key, occurred_at, created_at, metadata, client_name, "
            "transport) VALUES (?,?,?,?,?,?,?,?)",
            (
                occ.id,
                n,
                occ.session_key,
                occ.occurred_at,
                time.time(),
                orjson.dumps(occ.metadata).decode(),
                occ.provenance.client_name,
                occ.provenance.transport,
            ),
        )

    async def set_pinned(self, scope: Scope, n: int, pinned: bool) -> None:
        async with self.transaction(scope) as conn:
            await conn.execute("UPDATE memories SET pinned = ? WHERE n = ?", (int(pinned), n))

    async def reinforce(self, scope: Scope, ids: Sequence[str], now: float) -> None:
        """Recall strengthens what it returns: access count and last access."""
        if not ids:
            return
        async with self.transaction(scope) as conn:
            await conn.execute(
                "UPDATE memories SET access_count = access_count + 1, last_accessed_at = ? "
                f"WHERE id IN ({','.join('?' * len(ids))})",
                [now, *ids],
            )

    async def delete(self, scope: Scope, ns: Sequence[int], *, unpinned_only: bool = False) -> tuple[int, bool]:
        """Delete memories everywhere and leave no recoverable text (FTS rewrite, WAL truncate).

        Returns the count and whether the WAL was emptied now (else at a later commit).
        """
        if not ns:
            return 0, True
        deleted = 0
        async with self.transaction(scope) as conn:
            for start in range(0, len(ns), 500):
                chunk = list(ns[start : start + 500])
                marks = ",".join("?" * len(chunk))
                if unpinned_only:  # a pass read its rows earlier: a memory pinned since then stays
                    kept = await conn.execute_fetchall(
                        f"SELECT n FROM memories WHERE n IN ({marks}) AND pinned = 0", chunk
                    )
                    chunk = [int(r[0]) for r in kept]
                    if not chunk:
                        continue
                    marks = ",".join("?" * len(chunk))
                ids = f"(SELECT id FROM memories WHERE n IN ({marks}))"
                # The sources of a summary that goes return to the active tier; its lineage goes.
                await conn.execute(
                    "INSERT INTO changes(memory_n, op) SELECT n, 'put' FROM memories WHERE id IN "
                    f"(SELECT source_id FROM summary_sources WHERE summary_id IN {ids})",
                    chunk,
                )
                await conn.execute(
                    "UPDATE memories SET tier = 'active' WHERE id IN "
                    f"(SELECT source_id FROM summary_sources WHERE summary_id IN {ids})",
                    chunk,
                )
                for column in ("summary_id", "source_id"):
                    await conn.execute(f"DELETE FROM summary_sources WHERE {column} IN {ids}", chunk)
                await conn.execute(f"DELETE FROM memories_fts WHERE rowid IN ({marks})", chunk)
                for column in ("memory_id", "other_id"):
                    await conn.execute(
                        f"DELETE FROM conflicts WHERE {column} IN (SELECT id FROM memories WHERE n IN ({marks}))", chunk
                    )
                cursor = await conn.execute(f"DELETE FROM memories WHERE n IN ({marks})", chunk)
                deleted += cursor.rowcount
                await conn.executemany("INSERT INTO changes(memory_n, op) VALUES (?, 'del')", [(n,) for n in chunk])
        return deleted, await self.scrub(scope)

    async def scrub(self, scope: Scope) -> bool:
        """Rewrite the keyword index without deleted rows and empty the WAL; True when the WAL emptied.

        A reader in another process can keep old WAL frames alive; the checkpoint never waits for it
        (that would hold the write lock for the whole busy timeout). It is retried after later commits.
        """
        db = await self._db(scope)
        async with self.transaction(scope) as conn:
            # FTS5 keeps deleted tokens in old segments until they merge; 'optimize' rewrites them all.
            await conn.execute("INSERT INTO memories_fts(memories_fts) VALUES ('optimize')")
        async with db.write_lock:
            done = await self._truncate_wal(db, attempts=5)
            db.scrub_pending = not done
        # A migration backup holds the text as it was: forgetting means it goes too.
        async for backup in anyio.Path(db.path.parent).glob(f"{db.path.stem}.v*.bak.db"):
            await backup.unlink(missing_ok=True)
        return done

    async def _truncate_wal(self, db: _PrincipalDb, attempts: int) -> bool:
        """PRAGMA wal_checkpoint(TRUNCATE) without waiting on readers; True when the WAL was emptied."""
        await db.writer.execute("PRAGMA busy_timeout = 0")
        try:
            for attempt in range(attempts):
                rows = await db.writer.execute_fetchall("PRAGMA wal_checkpoint(TRUNCATE)")
                if int(next(iter(rows))[0]) == 0:
                    return True
                if attempt + 1 < attempts:
                    await anyio.sleep(0.02 * (attempt + 1))
            return False
        finally:
            await db.writer.execute(f"PRAGMA busy_timeout = {self.busy_timeout_ms}")

    async def erase_principal(self, scope: Scope, now: float) -> dict[str, int]:
        """Delete everything the principal has and keep only a content-free record that it happened.

        Rows go with secure_delete on, the keyword index is rebuilt empty, the file is vacuumed (no
        free page keeps old bytes), the WAL is emptied, and migration backups of the file are removed.
        Other processes see the deletions through the change log. Returns the counts per table.
        """
        db = await self._db(scope)
        counts: dict[str, int] = {}
        async with self.transaction(scope) as conn:
            for table in ("memories", "occurrences", "vectors", "memory_tags", "tasks", "checkpoints"):
                rows = await conn.execute_fetchall(f"SELECT COUNT(*) FROM {table}")
                counts[table] = int(next(iter(rows))[0])
            counts["pinned"] = int(
                next(iter(await conn.execute_fetchall("SELECT COUNT(*) FROM memories WHERE pinned = 1")))[0]
            )
            await conn.execute("INSERT INTO changes(memory_n, op) SELECT n, 'del' FROM memories")
            await conn.execute("DELETE FROM memories_fts")
            await conn.execute("DELETE FROM memories")
            await conn.execute("DELETE FROM checkpoints")
            await conn.execute("DELETE FROM tasks")
            await conn.execute("DELETE FROM conflicts")
            await conn.execute("DELETE FROM summary_sources")
            await conn.execute("DELETE FROM compression_failures")
            await conn.execute(
                "INSERT INTO erasures(erased_at, receipt) VALUES (?, ?)", (now, orjson.dumps(counts).decode())
            )
        async with self.transaction(scope) as conn:
            await conn.execute("INSERT INTO memories_fts(memories_fts) VALUES ('rebuild')")
        async with db.write_lock:
            await db.writer.execute("VACUUM")
            counts["wal_emptied"] = int(await self._truncate_wal(db, attempts=5))
            db.scrub_pending = not counts["wal_emptied"]
        folder = anyio.Path(db.path.parent)
        async for backup in folder.glob(f"{db.path.stem}.v*.bak.db"):
            await backup.unlink(missing_ok=True)
        return counts

    def indexed_total(self) -> int:
        """Memories in every vector index this process has loaded (for /metrics)."""
        return sum(len(db.index) for db in list(self._dbs.values()) if db.index is not None)

    def index_size(self, scope: Scope) -> int | None:
        db = self._dbs.get(scope.principal)
        return len(db.index) if db is not None and db.index is not None else None

    async def replace_vectors(self, scope: Scope, vectors: Sequence[tuple[int, bytes]]) -> None:
        async with self.transaction(scope) as conn:
            await conn.executemany("UPDATE vectors SET vec = ? WHERE memory_n = ?", [(v, n) for n, v in vectors])
            await conn.executemany("INSERT INTO changes(memory_n, op) VALUES (?, 'put')", [(n,) for n, _ in vectors])

    async def set_model(self, scope: Scope, model_id: str, dim: int) -> None:
        async with self.transaction(scope) as conn:
            await conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('embed_model', ?)", (model_id,))
            await conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('embed_dim', ?)", (str(dim),))
        db = await self._db(scope)
        async with db.index_lock:
            db.index = None  # rebuilt from the new vectors on next use

    async def all_ids(self, scope: Scope) -> list[tuple[int, str]]:
        """Every memory of the principal (all namespaces), for export and reindex."""
        db = await self._db(scope)
        rows = await db.reader.execute_fetchall("SELECT n, content FROM memories ORDER BY n")
        return [(int(n), str(c)) for n, c in rows]

    async def export_rows(self, scope: Scope) -> list[MemoryRecord]:
        db = await self._db(scope)
        records = [
            row_to_record(r) for r in await db.reader.execute_fetchall(f"SELECT {MEMORY_COLUMNS} FROM memories m")
        ]
        await self._attach_occurrences(db, records)
        return records

    async def existing_ids(self, scope: Scope, ids: Sequence[str]) -> set[str]:
        db = await self._db(scope)
        found: set[str] = set()
        for start in range(0, len(ids), 500):
            chunk = list(ids[start : start + 500])
            rows = await db.reader.execute_fetchall(
                f"SELECT id FROM memories WHERE id IN ({','.join('?' * len(chunk))})", chunk
            )
            found.update(str(r[0]) for r in rows)
        return found
