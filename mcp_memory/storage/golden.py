"""Golden queries: the person's queries with the memory each must find, and the record of every
check a lifecycle pass made against them (storage side of services/golden.py).

Works through the store's connections and transactions like LifecycleStore, so a memory put back
by a rollback lands in the change log the other processes replay.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import orjson

from mcp_memory.core.models import GoldenCheckRow, GoldenRow, MemoryRecord, Scope
from mcp_memory.storage import events
from mcp_memory.storage.rows import MEMORY_COLUMNS, fts_match, row_to_record, rows_in

if TYPE_CHECKING:  # the store builds this one around itself
    from mcp_memory.storage.records import RecordStore

CHECKS_KEPT = 200  # the last checks of a principal; older ones are pruned as new ones are recorded


class GoldenStore:
    """The golden queries' role (``services.ports.GoldenRows``, where each method's contract is) over a
    record store's connections, for both backends."""

    def __init__(self, store: RecordStore) -> None:
        self.store = store

    async def add(self, scope: Scope, row: GoldenRow) -> None:
        async with self.store.transaction(scope) as conn:
            await conn.execute(
                "INSERT INTO golden_queries(id, namespace, query, memory_id, created_at) VALUES (?, ?, ?, ?, ?)",
                (row.id, row.namespace, row.query, row.memory_id, row.created_at),
            )

    async def remove(self, scope: Scope, golden_id: str) -> bool:
        async with self.store.transaction(scope) as conn:
            cursor = await conn.execute(
                "DELETE FROM golden_queries WHERE id = ? AND (namespace IS ? OR ? IS NULL)",
                (golden_id, scope.namespace, scope.namespace),
            )
            return bool(cursor.rowcount > 0)

    async def queries(self, scope: Scope) -> list[GoldenRow]:
        conn = await self.store.reader(scope)
        rows = await conn.execute_fetchall(
            "SELECT id, namespace, query, memory_id, created_at FROM golden_queries "
            "WHERE namespace IS ? OR ? IS NULL ORDER BY created_at, id",
            (scope.namespace, scope.namespace),
        )
        return [GoldenRow(str(i), ns, str(q), str(m), float(at)) for i, ns, q, m, at in rows]

    async def candidates(self, scope: Scope, min_importance: float, limit: int) -> list[MemoryRecord]:
        conn = await self.store.reader(scope)
        rows = await conn.execute_fetchall(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE level = 0 AND tier = 'active' AND superseded_by IS NULL "
            "AND (pinned = 1 OR importance >= ?) ORDER BY pinned DESC, importance DESC, n DESC LIMIT ?",
            (min_importance, limit),
        )
        return [row_to_record(r) for r in rows]

    async def document_counts(self, scope: Scope, terms: Sequence[str]) -> dict[str, int]:
        conn = await self.store.reader(scope)
        counts: dict[str, int] = {}
        for term in dict.fromkeys(terms):
            rows = await conn.execute_fetchall(
                "SELECT COUNT(*) FROM memories_fts WHERE memories_fts MATCH ?", (fts_match([term]),)
            )
            counts[term] = int(next(iter(rows))[0])
        return counts

    async def accepted(self, scope: Scope, memory_id: str) -> list[MemoryRecord]:
        conn = await self.store.reader(scope)
        found: dict[str, MemoryRecord] = {}
        frontier = [memory_id]
        while frontier:
            rows = await rows_in(conn, f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id IN ({{marks}})", frontier)
            holders = await rows_in(
                conn, "SELECT summary_id FROM summary_sources WHERE source_id IN ({marks})", frontier
            )
            records = [row_to_record(r) for r in rows]
            found.update((r.id, r) for r in records)
            following = [r.superseded_by for r in records if r.superseded_by] + [str(h[0]) for h in holders]
            frontier = [i for i in dict.fromkeys(following) if i not in found]
        return list(found.values())

    async def record_check(self, scope: Scope, check: GoldenCheckRow) -> None:
        async with self.store.transaction(scope) as conn:
            await conn.execute(
                "INSERT INTO golden_checks(at, queries, before, after, rolled_back, detail) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    check.at,
                    check.queries,
                    check.before,
                    check.after,
                    int(check.rolled_back),
                    orjson.dumps(check.detail).decode(),
                ),
            )
            await conn.execute(  # numbers may have gaps (PostgreSQL): keep the last rows, not a range
                "DELETE FROM golden_checks WHERE n <= (SELECT n FROM golden_checks ORDER BY n DESC LIMIT 1 OFFSET ?)",
                (CHECKS_KEPT,),
            )

    async def checks(self, scope: Scope) -> tuple[list[GoldenCheckRow], int]:
        conn = await self.store.reader(scope)
        rows = await conn.execute_fetchall(
            "SELECT at, queries, before, after, rolled_back, detail FROM golden_checks ORDER BY n DESC LIMIT 3"
        )
        total = await conn.execute_fetchall("SELECT COUNT(*) FROM golden_checks WHERE rolled_back = 1")
        recent = [
            GoldenCheckRow(float(at), int(q), float(b), float(a), bool(rb), orjson.loads(d))
            for at, q, b, a, rb, d in rows
        ]
        return recent, int(next(iter(total))[0])

    async def unarchive(self, scope: Scope, ids: Sequence[str], reason: str) -> int:
        if not ids:
            return 0
        async with self.store.transaction(scope) as conn:
            rows = await rows_in(conn, "SELECT n, id FROM memories WHERE id IN ({marks}) AND tier = 'archived'", ids)
            ns = [int(r[0]) for r in rows]
            await rows_in(conn, "UPDATE memories SET tier = 'active' WHERE n IN ({marks})", ns)
            await conn.executemany("INSERT INTO changes(memory_n, op) VALUES (?, 'put')", [(n,) for n in ns])
            await events.record(conn, [str(r[1]) for r in rows], "restored", time.time(), rule=reason)
        return len(ns)
