"""CountStore: what `stats` and the erasure receipt count in a principal's file.

Counts for `stats` stay inside the caller's scope like every read: a connection bound to a
namespace counts its own namespace and the principal-wide rows, never another namespace's. The
erasure receipt counts the whole principal (it deletes the whole principal).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import aiosqlite

from mcp_memory.core.models import Criteria, Scope
from mcp_memory.storage import events
from mcp_memory.storage.rows import visible_clause

_EVERYTHING = Criteria(include_superseded=True, include_archived=True, include_expired=True)
_CURRENT = Criteria(include_archived=False, include_expired=True)


def fact_check_key(namespace: str | None, passed: bool) -> str:
    return f"fact_check_{'passed' if passed else 'failed'}:{namespace or ''}"


async def _one(conn: aiosqlite.Connection, sql: str, params: list[Any]) -> int:
    return int(next(iter(await conn.execute_fetchall(sql, params)))[0] or 0)


def _namespaces(scope: Scope) -> list[str | None]:
    """The namespaces the scope sees: its own and the principal-wide one."""
    return [None] if scope.namespace is None else [None, scope.namespace]


if TYPE_CHECKING:  # the store builds this one around itself
    from mcp_memory.storage.records import RecordStore


class CountStore:
    """The counts role (``services.ports.CountRows``, where each method's contract is) over a record
    store's connections, for both backends."""

    def __init__(self, store: RecordStore) -> None:
        self.store = store

    async def tier_counts(self, scope: Scope) -> dict[str, int]:
        conn = await self.store.reader(scope)
        where, params = visible_clause(scope, _EVERYTHING, time.time())
        rows = await conn.execute_fetchall(
            f"SELECT m.tier, m.level, m.superseded_by IS NOT NULL, m.pinned, COUNT(*) FROM memories m WHERE {where} "
            "GROUP BY 1, 2, 3, 4",
            params,
        )
        counts: dict[str, int] = {}
        for tier, level, superseded, pinned, count in rows:
            for key in (
                f"tier:{tier}",
                f"level:L{level}",
                "superseded" if superseded else "current",
                "pinned" if pinned else "unpinned",
            ):
                counts[key] = counts.get(key, 0) + int(count)
        return counts

    async def timeline(self, scope: Scope, days: int, now: float) -> list[tuple[int, str, int, int]]:
        conn = await self.store.reader(scope)
        where, params = visible_clause(scope, _EVERYTHING, now)
        rows = await conn.execute_fetchall(
            f"SELECT CAST((? - m.created_at) / 86400 AS INTEGER) AS ago, m.tier, m.level, COUNT(*) FROM memories m "
            f"WHERE {where} AND m.superseded_by IS NULL AND m.created_at > ? GROUP BY 1, 2, 3",
            [now, *params, now - days * 86_400],
        )
        return [(int(ago), str(tier), int(level), int(count)) for ago, tier, level, count in rows]

    async def event_counts(self, scope: Scope) -> dict[str, int]:
        if scope.namespace is not None:
            return {}
        return await events.counts(await self.store.reader(scope))

    async def visible_counts(self, scope: Scope) -> dict[str, int]:
        conn = await self.store.reader(scope)
        where, params = visible_clause(scope, _EVERYTHING, time.time())
        seen = f"SELECT m.n FROM memories m WHERE {where}"
        tasks = "t.namespace IS NULL" if scope.namespace is None else "(t.namespace IS NULL OR t.namespace = ?)"
        task_params = [] if scope.namespace is None else [scope.namespace]
        counts = {"memories": await _one(conn, f"SELECT COUNT(*) FROM memories m WHERE {where}", params)}
        for table in ("occurrences", "vectors", "memory_tags"):
            counts[table] = await _one(conn, f"SELECT COUNT(*) FROM {table} WHERE memory_n IN ({seen})", params)
        counts["tasks"] = await _one(conn, f"SELECT COUNT(*) FROM tasks t WHERE {tasks}", task_params)
        counts["checkpoints"] = await _one(
            conn,
            f"SELECT COUNT(*) FROM checkpoints WHERE task_id IN (SELECT t.task_id FROM tasks t WHERE {tasks})",
            task_params,
        )
        counts["pinned"] = await _one(conn, f"SELECT COUNT(*) FROM memories m WHERE {where} AND m.pinned = 1", params)
        return counts

    async def principal_counts(self, scope: Scope) -> dict[str, int]:
        conn = await self.store.reader(scope)
        counts: dict[str, int] = {}
        for table in ("memories", "occurrences", "vectors", "memory_tags", "tasks", "checkpoints"):
            counts[table] = await _one(conn, f"SELECT COUNT(*) FROM {table}", [])
        counts["pinned"] = await _one(conn, "SELECT COUNT(*) FROM memories WHERE pinned = 1", [])
        return counts

    async def pending(self, scope: Scope, max_failures: int) -> dict[str, int]:
        conn = await self.store.reader(scope)
        where_a, params_a = visible_clause(scope, _CURRENT, 0.0, alias="a")
        where_b, params_b = visible_clause(scope, _CURRENT, 0.0, alias="b")
        pairs = (
            "SELECT COUNT(*) FROM conflicts c JOIN memories a ON a.id = c.memory_id JOIN memories b ON "
            f"b.id = c.other_id WHERE c.memory_id < c.other_id AND {where_a} AND {where_b}"
        )
        where, params = visible_clause(scope, _EVERYTHING, 0.0)
        counts = {
            "conflicts_flagged": await _one(conn, pairs, [*params_a, *params_b]),
            "conflicts_not_yet_judged": await _one(conn, pairs + " AND c.judged_at IS NULL", [*params_a, *params_b]),
            "compression_resistant": await _one(
                conn,
                "SELECT COUNT(*) FROM compression_failures f JOIN memories m ON m.id = f.memory_id "
                f"WHERE f.failures >= ? AND {where}",
                [max_failures, *params],
            ),
        }
        for passed in (True, False):
            keys = [fact_check_key(n, passed) for n in _namespaces(scope)]
            counts[f"fact_check_{'passed' if passed else 'failed'}"] = await _one(
                conn,
                f"SELECT COALESCE(SUM(CAST(value AS INTEGER)), 0) FROM meta WHERE key IN ({','.join('?' * len(keys))})",
                keys,
            )
        return counts
