"""PostgresStore: the system of record on PostgreSQL (ADR 19), running the storage code SQLite runs
(ADR 20), and its in-process vector engine.

What is the same as SQLite's comes from ``RecordStore`` and the shared storage classes (counts,
browse, golden queries, lifecycle). What differs is here: the keyword index's query (BM25 over
postings), reinforcement, forget, forget_user (the principal's partitions truncated, ADR 19), and
the vector engine, which follows the change log by its head, its epoch (a forget_user starts the
log again) and how far a pass pruned it, since PostgreSQL's sequences leave gaps. A database whose
vectors are kept in pgvector is searched there instead (pg/vector_search.py, ADR 25): the store
picks the engine as its pool opens, from the layout it finds.

Replicas hear of each other's writes through the log at their next read, not by NOTIFY (ADR 19).
The Qdrant engine (ADR 18) follows this store as it follows SQLite: ``transaction`` lets it write
a commit's points first, and ``commit_mark`` tells it when to look at the log. The shared tables are
pg/shared.py's.
"""

from __future__ import annotations

import functools
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio
from psycopg import sql

from mcp_memory.config import PostgresSettings
from mcp_memory.core.models import Criteria, MemoryRecord, Scope
from mcp_memory.storage import writes
from mcp_memory.storage.browse import BrowseStore
from mcp_memory.storage.counts import CountStore
from mcp_memory.storage.golden import GoldenStore
from mcp_memory.storage.lifecycle import PRUNED_MARK, LifecycleStore
from mcp_memory.storage.permissions import secure_data_dir
from mcp_memory.storage.pg import keyword
from mcp_memory.storage.pg.connections import PgDatabase, PgReader
from mcp_memory.storage.pg.dialect import PgConn
from mcp_memory.storage.pg.vector_search import PgVectorSearch
from mcp_memory.storage.principal import index_columns, index_rows
from mcp_memory.storage.records import RecordStore
from mcp_memory.storage.reinforcement import Reinforcement
from mcp_memory.storage.rows import rows_of, visible_clause
from mcp_memory.storage.vector_search import InProcessSearch
from mcp_memory.storage.vectors import VectorIndex

log = logging.getLogger(__name__)

EPOCH = "changes_epoch"  # meta: a new value each time forget_user starts the change log again
_MARK = (
    "SELECT (SELECT COALESCE(MAX(seq), 0) FROM changes), (SELECT value FROM meta WHERE key = ?), "
    "(SELECT value FROM meta WHERE key = ?)",
    (EPOCH, PRUNED_MARK),
)


class PostgresStore(RecordStore):
    erasure_leaves = (
        "its partitions truncated; only a content-free record of the deletion remains in the tables, while "
        "PostgreSQL's write-ahead log keeps what was written until its segments are recycled, and the "
        "operator's archive and backups for their retention"
    )
    COUNTED_TABLES = ("memories", "occurrences", "vectors", "memory_tags", "postings", "changes")
    GAPLESS_LOG = False  # one sequence numbers every principal's log

    def __init__(
        self,
        settings: PostgresSettings,
        index_budget_bytes: int = 1 << 30,
        vectors: Callable[[PostgresStore], Any] | None = None,
        data_dir: Path | None = None,
        own_files: Sequence[Path] = (),
    ) -> None:
        self.database = PgDatabase(settings)
        self.data_dir = data_dir  # the replica's own files (its log): kept owner-only
        self.own_files = tuple(own_files)
        self.lifecycle = LifecycleStore(self)  # the shared classes ask reader and transaction
        self.counts = CountStore(self)
        self.browse = BrowseStore(self)
        self.golden = GoldenStore(self)
        # recall's dense side: in PostgreSQL (pgvector, ADR 25) or, without it, each principal's exact
        # index in this process, chosen as the pool opens; or Qdrant (ADR 18)
        self._chosen = vectors is not None
        self.vectors: Any = vectors(self) if vectors is not None else PgIndexSearch(self, index_budget_bytes)
        self._reinforcement: dict[str, Reinforcement] = {}  # per principal

    async def __aenter__(self) -> PostgresStore:
        if self.data_dir is not None:
            secure = functools.partial(secure_data_dir, self.data_dir, create=False, own=self.own_files)
            await anyio.to_thread.run_sync(secure)
        await self.database.open()
        if not self._chosen and self.database.vector_oid is not None:
            self.vectors = PgVectorSearch(self)
        self._chosen = True
        await self._start_upkeep()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._stop_upkeep()
        try:
            await self.vectors.close()  # Qdrant's client (a local folder is held until then)
        finally:
            await self.database.close()

    # ----- connections ---------------------------------------------------------------------

    async def reader(self, scope: Scope) -> PgReader:
        return await self.database.reader(scope)

    @asynccontextmanager
    async def transaction(self, scope: Scope) -> AsyncIterator[PgConn]:
        """A write transaction of the principal; an engine outside the database (Qdrant) writes the
        points of what it changed before the commit, as on SQLite (ADR 18)."""
        try:
            async with self.database.transaction(scope) as conn:
                began = await self.vectors.began(conn)
                yield conn
                with anyio.CancelScope(shield=True):
                    await self.vectors.writing(scope, conn, began)
        except BaseException:
            self.vectors.abandoned(scope)
            raise

    def one_transaction(self, scope: Scope, *, write: bool = False) -> AbstractAsyncContextManager[None]:
        """One call (recall, remember, checkpoint, resume) in one transaction of the principal, its
        freshness check read as it opens (connections.PgDatabase.call); ``write``: the call always
        writes, and takes the write lock as it opens."""
        return self.database.call(scope, write=write, prefetch=() if write else (_MARK,))

    async def commit_mark(self, scope: Scope) -> tuple[object, tuple[Any, ...]]:
        """What moves whenever anyone commits to the principal's rows, in one query: the change
        log's head, its epoch (forget_user starts a new one) and how far a pass pruned it."""
        conn = await self.reader(scope)
        [(head, epoch, pruned)] = await conn.execute_fetchall(*_MARK)
        return self.database, (int(head), epoch, None if pruned is None else int(pruned))

    def describe(self, scope: Scope) -> str:
        return f"the PostgreSQL store of principal {scope.principal!r}"

    def path_for(self, scope: Scope) -> Path:
        """Where the principal's rows are: its partitions' key (there is no file)."""
        return Path("postgresql") / self.database.key(scope.principal)

    def at_rest(self, scope: Scope, now: float) -> None:
        """A database cannot say without a query that nothing moved: a look always reads."""
        return None

    @asynccontextmanager
    async def _held(self) -> AsyncIterator[None]:
        yield

    def lease(self, principal: str) -> AbstractAsyncContextManager[None]:
        """Nothing to keep open: the pool's connections serve every principal."""
        return self._held()

    def pool_figures(self) -> dict[str, int]:
        figures = {"connections": int(self.database.pool.get_stats().get("pool_size", 0))}
        if isinstance(engine := self.vectors, PgIndexSearch):  # Qdrant holds no index in this process
            indexes = [held.index for held in engine.held.values() if held.index is not None]
            figures |= {
                "indexes": len(indexes),
                "index_bytes": sum(index.nbytes for index in indexes),
                "evicted_indexes": engine.evicted,
            }
        return figures

    async def known_principals(self) -> list[str]:
        """Every principal with rows (for the scheduler)."""
        async with self.database.pool.connection() as conn:
            rows = await (await conn.execute("SELECT name FROM principals ORDER BY name")).fetchall()
        return [str(r[0]) for r in rows]

    # ----- reads ---------------------------------------------------------------------------

    async def keyword_search(
        self, scope: Scope, terms: Sequence[str], criteria: Criteria, limit: int, now: float
    ) -> list[tuple[str, float]]:
        """Top ``limit`` (memory id, BM25) where a larger score is better, as FTS5 scores them."""
        return (await self.keyword_searches(scope, [terms], criteria, limit, now))[0]

    async def keyword_searches(
        self, scope: Scope, asked: Sequence[Sequence[str]], criteria: Criteria, limit: int, now: float
    ) -> list[list[tuple[str, float]]]:
        """Those the transaction (a call's) has not read yet are sent in one round trip."""
        if not any(asked):
            return [[] for _ in asked]
        where, params = visible_clause(scope, criteria, now)
        keys = [("keyword", tuple(terms), limit, where) for terms in asked]
        async with self.database.transaction(scope, write=False) as conn:
            wanted = [key for key in dict.fromkeys(keys) if conn.reads.get(key, params) is None]
            visible, named = conn.fragment(where, params)
            found = await keyword.searches(
                conn.conn, conn.key, [key[1] for key in wanted], limit, sql.SQL(visible), named
            )
            for key, rows in zip(wanted, found, strict=True):
                conn.reads.keep(key, params, rows)
            answers = [conn.reads.get(key, params) or [] for key in keys]
        return [[(str(ident), float(score)) for ident, score in rows] for rows in answers]

    # ----- writes --------------------------------------------------------------------------

    async def reinforce(self, scope: Scope, ids: Sequence[str], now: float) -> None:
        self._reinforcement.setdefault(scope.principal, Reinforcement()).reinforced(ids, now)

    async def flush_reinforcement(self, scope: Scope | None = None) -> None:
        principals = [scope.principal] if scope is not None else list(self._reinforcement)
        for principal in principals:
            if (waiting := self._reinforcement.get(principal)) is not None:
                await waiting.flush(self.database.transaction(Scope(principal), write=False))

    async def _overlay(self, scope: Scope, records: list[MemoryRecord]) -> None:
        if (waiting := self._reinforcement.get(scope.principal)) is not None:
            waiting.overlay(records)

    async def delete(self, scope: Scope, ids: Sequence[str], **how: Any) -> tuple[int, bool]:
        """``how`` as ``writes.delete`` takes it. The rows' old versions stay in their pages until VACUUM
        reuses them; only forget_user empties files."""
        if not ids:
            return 0, True
        async with self.transaction(scope) as conn:
            deleted = await writes.delete(conn, sorted((await rows_of(conn, ids)).values()), **how)  # type: ignore[arg-type]
        return deleted, True

    async def erase_principal(self, scope: Scope, now: float) -> dict[str, int]:
        """Delete everything the principal has (the receipt is written with the counts), then
        truncate its partitions, so no old version of a row stays in a page. Other replicas see a
        new epoch of the change log and read their index again."""
        async with self.database.transaction(scope, erasing=True) as conn:
            counts = await writes.erase_principal(conn, now)  # type: ignore[arg-type]
            await conn.conn.execute("SELECT mcp_drop_principal(%s)", (conn.key,))
            await conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (EPOCH, secrets.token_hex(8)))
        counts["vector_points"] = await self.erase_points(scope)
        return counts


@dataclass
class _Held:
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    index: VectorIndex | None = None
    last_seq: int = 0
    epoch: str | None = None
    used: float = 0.0  # time.monotonic() of the last search


class PgIndexSearch(InProcessSearch):
    """Each principal's vectors in one matrix in this process, read from PostgreSQL in one query and
    kept up through the change log before every search (one query when nothing moved)."""

    def __init__(self, store: PostgresStore, budget_bytes: int) -> None:
        super().__init__(store)
        self.store = store
        self.held: dict[str, _Held] = {}
        self.budget_bytes = budget_bytes  # pool.index_budget_mb: every principal's index together
        self.evicted = 0

    async def _synced(self, scope: Scope, dim: int) -> tuple[anyio.Lock, VectorIndex]:
        conn = await self.store.reader(scope)
        _, (head, epoch, pruned) = await self.store.commit_mark(scope)
        held = self.held.setdefault(scope.principal, _Held())
        async with held.lock:
            stale = held.index is None or held.index.dim != dim or held.epoch != epoch
            if stale or (pruned is not None and pruned > held.last_seq):
                index = VectorIndex(dim)
                index.load(await index_columns(conn, dim))  # type: ignore[arg-type]
                held.index, held.last_seq, held.epoch = index, head, epoch
                self._trim(keep=held)
            elif head > held.last_seq:
                await self._replay(conn, held)
            held.used = time.monotonic()
            assert held.index is not None
            return held.lock, held.index

    def _trim(self, keep: _Held) -> None:
        """Drop other principals' indexes, least recently used first, while all of them together
        hold more than the budget; each is read again at its next search."""
        loaded = [h for h in self.held.values() if h.index is not None]
        total = sum(h.index.nbytes for h in loaded if h.index is not None)
        for held in sorted(loaded, key=lambda h: h.used):
            if total <= self.budget_bytes:
                break
            if held is keep or held.lock.locked() or held.index is None:
                continue
            total -= held.index.nbytes
            held.index = None
            self.evicted += 1

    async def _replay(self, conn: PgReader, held: _Held) -> None:
        """The rows the log names past ``held.last_seq``, read again (numbers may have gaps here).
        The prune mark is read in the same statement: a pass that pruned the log after the head
        was read would otherwise take entries away unseen."""
        assert held.index is not None
        rows = await conn.execute_fetchall(
            "SELECT c.seq, c.memory_n, (SELECT value FROM meta WHERE key = ?) FROM changes c "
            "WHERE c.seq > ? UNION ALL SELECT NULL, NULL, (SELECT value FROM meta WHERE key = ?) ORDER BY 1",
            (PRUNED_MARK, held.last_seq, PRUNED_MARK),
        )
        pruned = rows[-1][2]
        if pruned is not None and int(pruned) > held.last_seq:
            held.index = VectorIndex(held.index.dim)
            held.index.load(await index_columns(conn, held.index.dim))  # type: ignore[arg-type]
            held.last_seq = max([held.last_seq, int(pruned), *(int(r[0]) for r in rows if r[0] is not None)])
            return
        changed = [r for r in rows if r[0] is not None]
        if not changed:
            return
        touched = sorted({int(r[1]) for r in changed})
        found = await index_rows(conn, touched)  # type: ignore[arg-type]
        held.index.upsert(found)
        present = {row.n for row in found}
        held.index.remove([n for n in touched if n not in present])
        held.last_seq = int(changed[-1][0])

    async def model_changed(self, scope: Scope) -> None:
        self.held.pop(scope.principal, None)  # read again from the new vectors on next use

    async def erase(self, scope: Scope) -> int:
        self.held.pop(scope.principal, None)
        return 0

    async def health(self, scope: Scope) -> tuple[bool, str]:
        return True, "exact, in this process (read from PostgreSQL)"

    def size(self, scope: Scope) -> int | None:
        held = self.held.get(scope.principal)
        return len(held.index) if held is not None and held.index is not None else None

    def total(self) -> int:
        return sum(len(held.index) for held in self.held.values() if held.index is not None)
