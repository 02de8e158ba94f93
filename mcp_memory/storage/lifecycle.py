"""LifecycleStore: the rows the lifecycle passes read and write, in the principals' files.

Decay candidates, the archive tier, compression candidates and lineage, compression failures, and
the counts `stats` reports. Like TaskStore it works through SqliteStore's connections and
transactions, so every change still lands in the change log the other processes replay.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence

import anyio
import numpy as np
import orjson

from mcp_memory.models import Criteria, MemoryRecord, NewOccurrence, Provenance, Scope
from mcp_memory.storage.rows import MEMORY_COLUMNS, row_to_record, visible_clause
from mcp_memory.storage.sqlite import SqliteStore


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
        self, scope: Scope, max_failures: int, keep_kinds: Sequence[str] = ()
    ) -> list[MemoryRecord]:
        """Active, unpinned raw (L0) memories of every namespace, but those that resisted compression
        and those of ``keep_kinds`` (facts the user holds, consolidated rather than summarized)."""
        conn = await self.store.reader(scope)
        kept = ",".join("?" * len(keep_kinds)) or "''"
        rows = await conn.execute_fetchall(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.tier = 'active' AND m.pinned = 0 AND m.level = 0 "
            "AND m.superseded_by IS NULL AND m.expires_at IS NULL AND m.key IS NULL AND m.id NOT IN "
            "(SELECT memory_id FROM compression_failures WHERE failures >= ?) "
            f"AND m.kind NOT IN ({kept}) ORDER BY m.occurred_at, m.n",
            (max_failures, *keep_kinds),
        )
        return [row_to_record(r) for r in rows]

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
        """The summaries built from any of ``source_ids``."""
        if not source_ids:
            return []
        conn = await self.store.reader(scope)
        rows = await conn.execute_fetchall(
            f"SELECT DISTINCT summary_id FROM summary_sources WHERE source_id IN ({','.join('?' * len(source_ids))})",
            list(source_ids),
        )
        return [str(r[0]) for r in rows]

    async def undo_summary(self, scope: Scope, summary_id: str, resist: int = 0) -> list[str]:
        """Put a summary's sources back in the active tier and delete the summary; returns the sources.

        With ``resist`` the sources are marked as having failed compression that often, so an
        undone summary is not simply made again by the next pass.
        """
        async with self.store.transaction(scope) as conn:
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
            rows = list(await conn.execute_fetchall("SELECT n FROM memories WHERE id = ?", (summary_id,)))
            for (n,) in rows:
                await conn.execute("DELETE FROM memories_fts WHERE rowid = ?", (n,))
                await conn.execute("DELETE FROM memories WHERE n = ?", (n,))
                await conn.execute("INSERT INTO changes(memory_n, op) VALUES (?, 'del')", (n,))
        return sources

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
