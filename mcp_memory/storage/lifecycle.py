"""LifecycleStore: the rows the lifecycle passes read and write, in the principals' files.

Decay candidates, the archive tier, compression candidates and lineage, compression failures, and
the counts `stats` reports. Like TaskStore it works through SqliteStore's connections and
transactions, so every change still lands in the change log the other processes replay.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass

import aiosqlite
import anyio
import numpy as np
import orjson

from mcp_memory.models import Criteria, MemoryRecord, NewOccurrence, Provenance, Scope
from mcp_memory.storage.sqlite import MEMORY_COLUMNS, SqliteStore, row_to_record, visible_clause


@dataclass(frozen=True, slots=True)
class TaskSummaryRow:
    """What a task summary (L3) needs of a task's record."""

    task_id: str
    namespace: str | None
    title: str
    goal: str
    head: bytes
    updated_at: float


class LifecycleStore:
    def __init__(self, store: SqliteStore) -> None:
        self.store = store

    async def known_principals(self) -> list[str]:
        """Every principal with a file in the data directory (for the scheduler)."""

        def read() -> list[str]:
            names = []
            for path in sorted((self.store.data_dir / "principals").glob("*.db")):
                conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=self.store.busy_timeout_ms / 1000)
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

    async def decay_rows(self, scope: Scope) -> list[tuple[int, float, int, float]]:
        """(n, importance, access_count, last access or creation) of every active, unpinned memory."""
        conn = await self.store.reader(scope)
        rows = await conn.execute_fetchall(
            "SELECT n, importance, access_count, COALESCE(last_accessed_at, created_at) FROM memories "
            "WHERE tier = 'active' AND pinned = 0"
        )
        return [(int(r[0]), float(r[1]), int(r[2]), float(r[3])) for r in rows]

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
        but those that resisted compression and those of ``keep_kinds`` (facts the user holds,
        consolidated rather than summarized)."""
        conn = await self.store.reader(scope)
        kept = ",".join("?" * len(keep_kinds)) or "''"
        task = "AND m.task_id = ? " if task_id is not None else ""
        rows = await conn.execute_fetchall(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.tier = 'active' AND m.pinned = 0 "
            f"AND m.level IN ({','.join('?' * len(levels))}) {task}"
            "AND m.superseded_by IS NULL AND m.expires_at IS NULL AND m.key IS NULL AND m.id NOT IN "
            "(SELECT memory_id FROM compression_failures WHERE failures >= ?) "
            f"AND m.kind NOT IN ({kept}) ORDER BY m.occurred_at, m.n",
            (*levels, *([task_id] if task_id is not None else []), max_failures, *keep_kinds),
        )
        return [row_to_record(r) for r in rows]

    async def tasks_with_memories(self, scope: Scope, idle_since: float) -> list[TaskSummaryRow]:
        """Every task not updated since ``idle_since`` that still has active, unpinned memories
        below L3 (a finished one is summarized as a whole)."""
        conn = await self.store.reader(scope)
        rows = await conn.execute_fetchall(
            "SELECT t.task_id, t.namespace, t.title, t.goal, t.head, t.updated_at FROM tasks t "
            "WHERE t.updated_at <= ? AND EXISTS (SELECT 1 FROM memories m WHERE m.task_id = t.task_id "
            "AND m.tier = 'active' AND m.pinned = 0 AND m.level < 3) ORDER BY t.updated_at, t.task_id",
            (idle_since,),
        )
        return [TaskSummaryRow(str(r[0]), r[1], str(r[2]), str(r[3]), bytes(r[4]), float(r[5])) for r in rows]

    async def consolidation_candidates(self, scope: Scope, kinds: Sequence[str], limit: int) -> list[MemoryRecord]:
        """Active, unpinned, current raw memories of ``kinds`` in every namespace, with their conflicts."""
        conn = await self.store.reader(scope)
        rows = await conn.execute_fetchall(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.tier = 'active' AND m.pinned = 0 AND m.level = 0 "
            "AND m.superseded_by IS NULL AND m.expires_at IS NULL AND m.key IS NULL "
            f"AND m.kind IN ({','.join('?' * len(kinds))}) ORDER BY m.n DESC LIMIT ?",
            (*kinds, limit),
        )
        records = {r.id: r for r in map(row_to_record, rows)}
        ids = list(records)
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            for memory_id, other_id in await conn.execute_fetchall(
                f"SELECT memory_id, other_id FROM conflicts WHERE memory_id IN ({','.join('?' * len(chunk))})", chunk
            ):
                records[str(memory_id)].conflicts_with.append(str(other_id))
        return list(records.values())

    async def vectors(self, scope: Scope, ns: Sequence[int]) -> dict[int, np.ndarray]:
        """The stored vectors of memories ``ns``."""
        conn = await self.store.reader(scope)
        found: dict[int, np.ndarray] = {}
        for start in range(0, len(ns), 500):
            chunk = list(ns[start : start + 500])
            rows = await conn.execute_fetchall(
                f"SELECT memory_n, vec FROM vectors WHERE memory_n IN ({','.join('?' * len(chunk))})", chunk
            )
            found.update((int(n), np.frombuffer(vec, dtype=np.float32)) for n, vec in rows)
        return found

    async def occurrences(self, scope: Scope, ns: Sequence[int]) -> dict[int, list[NewOccurrence]]:
        """Every occurrence of memories ``ns``, oldest first, as they would be written again."""
        conn = await self.store.reader(scope)
        found: dict[int, list[NewOccurrence]] = {}
        for start in range(0, len(ns), 500):
            chunk = list(ns[start : start + 500])
            rows = await conn.execute_fetchall(
                "SELECT memory_n, id, session_key, occurred_at, metadata, client_name, transport FROM occurrences "
                f"WHERE memory_n IN ({','.join('?' * len(chunk))}) ORDER BY occurred_at, id",
                chunk,
            )
            for n, occ_id, session, occurred, metadata, client, transport in rows:
                found.setdefault(int(n), []).append(
                    NewOccurrence(
                        id=str(occ_id),
                        session_key=session,
                        occurred_at=float(occurred),
                        metadata=orjson.loads(metadata),
                        provenance=Provenance(client_name=client, transport=transport),
                    )
                )
        return found

    async def record_compression_failure(self, scope: Scope, ids: Sequence[str]) -> None:
        async with self.store.transaction(scope) as conn:
            await conn.executemany(
                "INSERT INTO compression_failures(memory_id, failures) VALUES (?, 1) "
                "ON CONFLICT(memory_id) DO UPDATE SET failures = failures + 1",
                [(i,) for i in ids],
            )

    async def summaries_of(self, scope: Scope, source_ids: Sequence[str]) -> list[str]:
        """The summaries built from any of ``source_ids``, and those built from them (an L2 over the
        L1 of a source), highest first: undone in this order, each returns its sources to the tier
        the next one takes apart."""
        conn = await self.store.reader(scope)
        return await _ancestors(conn, source_ids)

    async def undo_summary(self, scope: Scope, summary_id: str, resist: int = 0) -> list[str]:
        """Put a summary's sources back in the active tier and delete the summary; returns the sources.

        With ``resist`` the sources are marked as having failed compression that often, so an
        undone summary is not simply made again by the next pass.
        """
        async with self.store.transaction(scope) as conn:
            # A summary that is itself summarized (an L1 under an L2) comes back first, so nothing
            # is left built from what this one held.
            for above in await _ancestors(conn, [summary_id]):
                await _undo(conn, above, 0)
            return await _undo(conn, summary_id, resist)

    async def archive(self, scope: Scope, ns: Sequence[int]) -> int:
        """Move memories to the archive tier (kept, out of default recall)."""
        archived = 0
        async with self.store.transaction(scope) as conn:
            for start in range(0, len(ns), 500):
                chunk = list(ns[start : start + 500])
                marks = ",".join("?" * len(chunk))
                cursor = await conn.execute(
                    f"UPDATE memories SET tier = 'archived' WHERE n IN ({marks}) AND pinned = 0", chunk
                )
                archived += cursor.rowcount
                await conn.executemany("INSERT INTO changes(memory_n, op) VALUES (?, 'put')", [(n,) for n in chunk])
        return archived

    async def tier_counts(self, scope: Scope) -> dict[str, int]:
        """Memories visible in the scope by tier, level and state (superseded, expired, pinned)."""
        conn = await self.store.reader(scope)
        where, params = visible_clause(
            scope, Criteria(include_superseded=True, include_archived=True, include_expired=True), time.time()
        )
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

    async def principal_counts(self, scope: Scope) -> dict[str, int]:
        """What the principal has, table by table (every namespace)."""
        conn = await self.store.reader(scope)
        counts: dict[str, int] = {}
        for table in ("memories", "occurrences", "vectors", "memory_tags", "tasks", "checkpoints"):
            counts[table] = int(next(iter(await conn.execute_fetchall(f"SELECT COUNT(*) FROM {table}")))[0])
        counts["pinned"] = int(
            next(iter(await conn.execute_fetchall("SELECT COUNT(*) FROM memories WHERE pinned = 1")))[0]
        )
        return counts


async def _ancestors(conn: aiosqlite.Connection, ids: Sequence[str]) -> list[str]:
    """Every summary built from ``ids``, directly or through other summaries, highest level first."""
    found: list[str] = []
    frontier = list(dict.fromkeys(ids))
    while frontier:
        above: list[str] = []
        for start in range(0, len(frontier), 500):
            chunk = frontier[start : start + 500]
            rows = await conn.execute_fetchall(
                f"SELECT DISTINCT summary_id FROM summary_sources WHERE source_id IN ({','.join('?' * len(chunk))})",
                chunk,
            )
            above.extend(str(r[0]) for r in rows if str(r[0]) not in found)
        above = list(dict.fromkeys(above))
        found.extend(above)
        frontier = above
    return found[::-1]


async def _undo(conn: aiosqlite.Connection, summary_id: str, resist: int) -> list[str]:
    """Inside a transaction: the summary's sources back to the active tier, the summary deleted."""
    sources = [
        str(r[0])
        for r in await conn.execute_fetchall(
            "SELECT source_id FROM summary_sources WHERE summary_id = ?", (summary_id,)
        )
    ]
    if sources:
        marks = ",".join("?" * len(sources))
        await conn.execute(f"UPDATE memories SET tier = 'active' WHERE id IN ({marks})", sources)
        await conn.execute(
            f"INSERT INTO changes(memory_n, op) SELECT n, 'put' FROM memories WHERE id IN ({marks})", sources
        )
        if resist:
            await conn.executemany(
                "INSERT INTO compression_failures(memory_id, failures) VALUES (?, ?) "
                "ON CONFLICT(memory_id) DO UPDATE SET failures = MAX(failures, excluded.failures)",
                [(source, resist) for source in sources],
            )
    await conn.execute("DELETE FROM summary_sources WHERE summary_id = ?", (summary_id,))
    for (n,) in list(await conn.execute_fetchall("SELECT n FROM memories WHERE id = ?", (summary_id,))):
        await conn.execute("DELETE FROM memories_fts WHERE rowid = ?", (n,))
        await conn.execute("DELETE FROM memories WHERE n = ?", (n,))
        await conn.execute("INSERT INTO changes(memory_n, op) VALUES (?, 'del')", (n,))
    return sources
