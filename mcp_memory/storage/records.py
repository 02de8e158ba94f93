"""The reads and writes of memory records that both backends run (ADR 20).

``RecordStore`` holds what SqliteStore and PostgresStore do alike: the SQL of the storage
modules (``writes``, ``rows``, ``links``, ``second``), run over the backend's ``reader(scope)``
and ``transaction(scope)``. On SQLite those are the principal's file connections; on PostgreSQL,
``PgConn`` translates the same statements (``storage/pg/dialect.py``). What differs, each backend
keeps: opening, the keyword index's query, reinforcement, erasure, and the vector engine.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import TYPE_CHECKING, Any, ClassVar

import anyio
from anyio.abc import TaskGroup

from mcp_memory.core.errors import ModelMismatchError, StorageError
from mcp_memory.core.models import Applied, Criteria, Link, MemoryRecord, Merge, NewMemory, RecordOrder, Scope
from mcp_memory.storage import links, second, writes
from mcp_memory.storage.reinforcement import REINFORCE_FLUSH_SECONDS
from mcp_memory.storage.rows import (
    MEMORY_COLUMNS,
    attach_occurrences,
    blob,
    live_by_hash,
    replaced_by_hash,
    row_to_record,
    rows_of,
    visible_clause,
)

if TYPE_CHECKING:
    from mcp_memory.core.models import Vector

log = logging.getLogger(__name__)

_ORDERS: dict[str, str] = {
    "stored": "m.n",
    "importance": "m.importance DESC, m.n",
    "occurred": "m.occurred_at, m.n",
}
# The same orders in Python, for a read of more ids than one IN list holds.
_ORDER_KEYS: dict[str, Callable[[MemoryRecord], tuple[float, ...]]] = {
    "stored": lambda r: (r.written,),
    "importance": lambda r: (-r.importance, r.written),
    "occurred": lambda r: (r.occurred_at, r.written),
}
IN_LIST = 500  # ids per IN list (SQLite's limit on variables can be as low as 999)


class RecordStore:
    """What both record stores share of ``services.ports.MemoryStore`` (the roles ``MemoryRows``,
    ``MemorySearch`` and ``StoreControl``, where each method's contract is) over a backend's
    connections. A backend's own docstring says only what is particular to it."""

    # What `count` reports (doctor, stats): the tables that grow with the memories.
    COUNTED_TABLES: tuple[str, ...] = ("memories", "occurrences", "vectors", "memory_tags", "changes")
    GAPLESS_LOG: ClassVar[bool]  # whether the change log's numbers have gaps only where a prune cut it
    vectors: Any  # the backend's vector engine (services.ports.VectorSearch, plus model_changed)

    async def reader(self, scope: Scope) -> Any:
        """A connection for reads that sees committed data (aiosqlite's calls, or PgConn's)."""
        raise NotImplementedError

    def transaction(self, scope: Scope) -> AbstractAsyncContextManager[Any]:
        """One write transaction of the scope's principal."""
        raise NotImplementedError

    def describe(self, scope: Scope) -> str:
        """Where the principal's store is, for a message."""
        raise NotImplementedError

    def one_transaction(self, scope: Scope, *, write: bool = False) -> AbstractAsyncContextManager[None]:
        """By default nothing: SQLite's connections are the principal's file's already."""
        return nullcontext()

    async def known_principals(self) -> list[str]:
        raise NotImplementedError

    async def flush_reinforcement(self, scope: Scope | None = None) -> None:
        """Write what recall's reinforcement left waiting (before a read of access counts)."""
        raise NotImplementedError

    async def commit_mark(self, scope: Scope) -> tuple[object, tuple[Any, ...]]:
        """What moves whenever anyone commits to the principal's rows (an engine outside the store
        compares it to know when to look at the change log): an anchor held weakly, and a value."""
        raise NotImplementedError

    async def erase_points(self, scope: Scope) -> int:
        """forget_user, last: the vector engine's points of the principal, after its rows are gone
        whatever the engine says (points it kept are orphans that `reindex --check` removes)."""
        try:
            return int(await self.vectors.erase(scope))
        except StorageError as exc:
            log.error(
                "forget_user: the vector engine kept some points (`mcp-memory reindex --check` removes them): %s", exc
            )
            return 0

    # ----- upkeep: recall's reinforcement written in the background (ADR 11) ----------------

    _group: TaskGroup | None = None

    async def _start_upkeep(self) -> None:
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        self._group.start_soon(self._upkeep_every, REINFORCE_FLUSH_SECONDS)

    def in_background(self, call: Callable[..., Coroutine[Any, Any, None]], *args: object) -> bool:
        """``call(*args)`` started beside the upkeep (ended with the store); False when the store is
        not open. ``call`` reports its own failures."""
        if self._group is None:
            return False
        self._group.start_soon(call, *args)
        return True

    async def _stop_upkeep(self) -> None:
        """The background upkeep stopped, then what waits written (shielded: at close, always)."""
        if self._group is not None:
            self._group.cancel_scope.cancel()
            await self._group.__aexit__(None, None, None)
            self._group = None
        with anyio.CancelScope(shield=True):
            await self.flush_reinforcement()

    async def _upkeep(self) -> None:
        """One round of background upkeep."""
        await self.flush_reinforcement()

    async def _upkeep_every(self, seconds: float) -> None:
        while True:
            await anyio.sleep(seconds)
            try:
                await self._upkeep()
            except Exception:  # never let the upkeep die: the next round retries
                log.exception("store upkeep failed")

    async def _overlay(self, scope: Scope, records: list[MemoryRecord]) -> None:
        """Records just read, with what the backend holds of them that is not written yet."""

    # ----- model metadata ------------------------------------------------------------------

    async def check_model(self, scope: Scope, model_id: str, dim: int) -> None:
        conn = await self.reader(scope)
        rows = await conn.execute_fetchall("SELECT key, value FROM meta WHERE key IN ('embed_model', 'embed_dim')")
        meta = {str(k): str(v) for k, v in rows}
        if "embed_model" not in meta:
            async with self.transaction(scope) as conn:
                await conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('embed_model', ?)", (model_id,))
                await conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('embed_dim', ?)", (str(dim),))
            return await self.check_model(scope, model_id, dim)
        if meta["embed_model"] != model_id or int(meta["embed_dim"]) != dim:
            raise ModelMismatchError(
                f"{self.describe(scope)} was built with embedding model {meta['embed_model']} "
                f"(dimension {meta['embed_dim']}), but the configured model is {model_id} (dimension {dim}). "
                "Run `mcp-memory reindex` to re-embed every memory with the configured model, "
                "or configure the original model again."
            )

    async def stored_model(self, scope: Scope) -> tuple[str | None, int | None]:
        conn = await self.reader(scope)
        rows = await conn.execute_fetchall("SELECT key, value FROM meta WHERE key IN ('embed_model', 'embed_dim')")
        meta = {str(k): str(v) for k, v in rows}
        dim = meta.get("embed_dim")
        return meta.get("embed_model"), int(dim) if dim else None

    async def links(self, scope: Scope, sources: Sequence[str], population: int) -> list[Link]:
        conn = await self.reader(scope)
        return await links.links(conn, sources, population)

    async def replies(self, scope: Scope, ids: Sequence[str]) -> dict[str, str]:
        return await links.following(await self.reader(scope), ids)

    async def second_vectors(self, scope: Scope, ids: Sequence[str], model_id: str) -> dict[str, Vector]:
        return await second.read(await self.reader(scope), ids, model_id)

    async def put_second_vectors(
        self, scope: Scope, model_id: str, vectors: Sequence[tuple[str, Vector]], *, first: bool = False
    ) -> int:
        async with self.transaction(scope) as conn:
            if first:
                await second.start_over(conn, model_id)
            return await second.put(conn, model_id, vectors)

    async def eligible(self, scope: Scope, criteria: Criteria, now: float) -> list[int]:
        conn = await self.reader(scope)
        where, params = visible_clause(scope, criteria, now)
        rows = await conn.execute_fetchall(f"SELECT m.n FROM memories m WHERE {where}", params)
        return [int(r[0]) for r in rows]

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
        conn = await self.reader(scope)
        where, params = visible_clause(scope, criteria, now)
        if among is not None:
            if not among:
                return []
            where += f" AND m.id IN ({','.join('?' * len(among))})"
            params.extend(among)
        sql = f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE {where} ORDER BY {_ORDERS[order]}"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        records = [row_to_record(r) for r in await conn.execute_fetchall(sql, params)]
        await attach_occurrences(conn, records)
        await self._overlay(scope, records)
        return records

    async def find_by_hash(self, scope: Scope, hashes: Sequence[str], now: float) -> dict[str, str]:
        return await live_by_hash(await self.reader(scope), scope, hashes, now) if hashes else {}

    async def replaced_by_hash(self, scope: Scope, hashes: Sequence[str], now: float) -> dict[str, str]:
        return await replaced_by_hash(await self.reader(scope), scope, hashes, now) if hashes else {}

    async def change_mark(self, scope: Scope) -> int:
        """The last entry of the principal's change log: it moves with every write of any process."""
        conn = await self.reader(scope)
        rows = await conn.execute_fetchall("SELECT COALESCE(MAX(seq), 0) FROM changes")
        return int(next(iter(rows))[0])

    async def count(self, scope: Scope) -> dict[str, int]:
        conn = await self.reader(scope)
        counts: dict[str, int] = {}
        for table in self.COUNTED_TABLES:
            rows = await conn.execute_fetchall(f"SELECT COUNT(*) FROM {table}")
            counts[table] = int(next(iter(rows))[0])
        return counts

    # ----- writes ----------------------------------------------------------------------------

    async def apply(self, scope: Scope, inserts: Sequence[NewMemory], merges: Sequence[Merge]) -> Applied:
        now = time.time()
        async with self.transaction(scope) as conn:
            return await writes.apply(conn, scope, inserts, merges, now)

    async def set_pinned(self, scope: Scope, memory_id: str, pinned: bool) -> None:
        async with self.transaction(scope) as conn:
            for n in (await rows_of(conn, [memory_id])).values():
                await conn.execute("UPDATE memories SET pinned = ? WHERE n = ?", (int(pinned), n))
                # Every write to a memory moves the change log, a pin too: watchers read pins only then.
                await conn.execute("INSERT INTO changes(memory_n, op) VALUES (?, 'put')", (n,))

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
        conn = await self.reader(scope)
        rows = await conn.execute_fetchall("SELECT id, content FROM memories ORDER BY n")
        return [(str(ident), str(c)) for ident, c in rows]

    async def export_rows(self, scope: Scope) -> list[MemoryRecord]:
        conn = await self.reader(scope)
        records = [
            row_to_record(r)
            for r in await conn.execute_fetchall(f"SELECT {MEMORY_COLUMNS} FROM memories m ORDER BY m.n")
        ]
        await attach_occurrences(conn, records, every_flag=True)
        return records

    async def existing_ids(self, scope: Scope, ids: Sequence[str]) -> set[str]:
        conn = await self.reader(scope)
        found: set[str] = set()
        for start in range(0, len(ids), 500):
            chunk = list(ids[start : start + 500])
            rows = await conn.execute_fetchall(
                f"SELECT id FROM memories WHERE id IN ({','.join('?' * len(chunk))})", chunk
            )
            found.update(str(r[0]) for r in rows)
        return found
