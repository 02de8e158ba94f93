"""LifecycleStore: the rows the lifecycle passes read and write, in the principals' files.

Decay candidates, the archive tier, compression candidates and lineage, compression failures, and
the counts `stats` reports. Like TaskStore it works through the store's connections and
transactions, so every change still lands in the change log the other processes replay.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import aiosqlite
import orjson

from mcp_memory.core.models import SCHEDULER, MemoryRecord, NewOccurrence, Provenance, Scope, TaskSummaryRow
from mcp_memory.storage import events, second, writes
from mcp_memory.storage.counts import fact_check_key
from mcp_memory.storage.rows import MEMORY_COLUMNS, attach_occurrences, row_to_record, rows_in, rows_of

if TYPE_CHECKING:  # the store builds this one around itself
    import numpy as np

    from mcp_memory.storage.records import RecordStore


PRUNED_MARK = "changes_pruned_upto"  # meta: the change log was pruned up to here


class LifecycleStore:
    """The lifecycle role (``services.ports.LifecycleRows``, where each method's contract is) over a
    record store's connections, for both backends."""

    def __init__(self, store: RecordStore) -> None:
        self.store = store

    async def known_principals(self) -> list[str]:
        return await self.store.known_principals()

    async def expired(self, scope: Scope, now: float) -> list[str]:
        conn = await self.store.reader(scope)
        rows = await conn.execute_fetchall(
            "SELECT id FROM memories WHERE expires_at IS NOT NULL AND expires_at <= ? ORDER BY n", (now,)
        )
        return [str(r[0]) for r in rows]

    async def prune_changes(self, scope: Scope, keep: int) -> int:
        """How far it was pruned is kept in ``meta``; on SQLite the gap in the numbers tells it too, while
        PostgreSQL's numbers have gaps of their own."""
        async with self.store.transaction(scope) as conn:
            rows = await conn.execute_fetchall("SELECT seq FROM changes ORDER BY seq DESC LIMIT 1 OFFSET ?", (keep,))
            if not rows:
                return 0
            upto = int(next(iter(rows))[0])
            cursor = await conn.execute("DELETE FROM changes WHERE seq <= ?", (upto,))
            await conn.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES ('changes_pruned_upto', ?)", (str(upto),)
            )
            return int(cursor.rowcount or 0)

    async def without_second_vector(self, scope: Scope, limit: int, model_id: str) -> list[tuple[str, str]]:
        return await second.missing(await self.store.reader(scope), limit, model_id)

    async def decay_rows(self, scope: Scope) -> list[tuple[str, float, int, float]]:
        await self.store.flush_reinforcement(scope)  # decay reads the counts: recall's go first
        conn = await self.store.reader(scope)
        rows = await conn.execute_fetchall(
            "SELECT id, importance, access_count, COALESCE(last_accessed_at, created_at) FROM memories "
            "WHERE tier = 'active' AND pinned = 0 ORDER BY n"
        )
        return [(str(r[0]), float(r[1]), int(r[2]), float(r[3])) for r in rows]

    async def compression_candidates(
        self,
        scope: Scope,
        max_failures: int,
        keep_kinds: Sequence[str] = (),
        *,
        levels: Sequence[int] = (0,),
        task_id: str | None = None,
    ) -> list[MemoryRecord]:
        conn = await self.store.reader(scope)
        kept = ",".join("?" * len(keep_kinds)) or "''"
        task = "AND m.task_id = ? " if task_id is not None else ""
        rows = await conn.execute_fetchall(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.tier = 'active' AND m.pinned = 0 "
            f"AND m.level IN ({','.join('?' * len(levels))}) {task}"
            "AND m.superseded_by IS NULL AND m.expires_at IS NULL AND m.key IS NULL AND m.id NOT IN "
            "(SELECT memory_id FROM compression_failures WHERE failures >= ?) "
            # a fact extracted by the scheduler (level 0, its transport) is kept as a fact of its own
            "AND NOT (m.level = 0 AND COALESCE(m.transport, '') = ?) "
            f"AND m.kind NOT IN ({kept}) ORDER BY m.occurred_at, m.n",
            (*levels, *([task_id] if task_id is not None else []), max_failures, SCHEDULER.transport, *keep_kinds),
        )
        return [row_to_record(r) for r in rows]

    async def tasks_with_memories(self, scope: Scope, idle_since: float) -> list[TaskSummaryRow]:
        conn = await self.store.reader(scope)
        rows = await conn.execute_fetchall(
            "SELECT t.task_id, t.namespace, t.title, t.goal, t.head, t.updated_at FROM tasks t "
            "WHERE t.updated_at <= ? AND EXISTS (SELECT 1 FROM memories m WHERE m.task_id = t.task_id "
            "AND m.tier = 'active' AND m.pinned = 0 AND m.level < 3) ORDER BY t.updated_at, t.task_id",
            (idle_since,),
        )
        return [TaskSummaryRow(str(r[0]), r[1], str(r[2]), str(r[3]), bytes(r[4]), float(r[5])) for r in rows]

    async def consolidation_candidates(
        self, scope: Scope, kinds: Sequence[str], *, after: int = 0, limit: int = -1
    ) -> list[MemoryRecord]:
        conn = await self.store.reader(scope)
        rows = await conn.execute_fetchall(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.tier = 'active' AND m.pinned = 0 AND m.level = 0 "
            "AND m.superseded_by IS NULL AND m.expires_at IS NULL AND m.key IS NULL AND m.n > ? "
            f"AND m.kind IN ({','.join('?' * len(kinds))}) ORDER BY m.n LIMIT ?",
            (after, *kinds, limit),
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

    async def consolidation_mark(self, scope: Scope) -> int:
        return await self._meta_int(await self.store.reader(scope), "consolidated_upto")

    async def mark_consolidated(self, scope: Scope, upto: int) -> None:
        async with self.store.transaction(scope) as conn:
            await conn.execute(
                "INSERT INTO meta(key, value) VALUES ('consolidated_upto', ?) "
                "ON CONFLICT(key) DO UPDATE SET value = MAX(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER))",
                (str(upto),),
            )

    async def vectors(self, scope: Scope, ids: Sequence[str]) -> dict[str, np.ndarray]:
        import numpy as np

        rows = await rows_in(
            await self.store.reader(scope),
            "SELECT m.id, v.vec FROM vectors v JOIN memories m ON m.n = v.memory_n WHERE m.id IN ({marks})",
            ids,
        )
        return {str(ident): np.frombuffer(vec, dtype=np.float32) for ident, vec in rows}

    async def occurrences(self, scope: Scope, ids: Sequence[str]) -> dict[str, list[NewOccurrence]]:
        conn = await self.store.reader(scope)
        found: dict[str, list[NewOccurrence]] = {}
        for start in range(0, len(ids), 500):
            chunk = list(ids[start : start + 500])
            rows = await conn.execute_fetchall(
                "SELECT m.id, o.id, o.session_key, o.occurred_at, o.metadata, o.client_name, o.transport "
                "FROM occurrences o JOIN memories m ON m.n = o.memory_n "
                f"WHERE m.id IN ({','.join('?' * len(chunk))}) ORDER BY o.occurred_at, o.id",
                chunk,
            )
            for memory_id, occ_id, session, occurred, metadata, client, transport in rows:
                found.setdefault(str(memory_id), []).append(
                    NewOccurrence(
                        id=str(occ_id),
                        session_key=session,
                        occurred_at=float(occurred),
                        metadata=orjson.loads(metadata),
                        provenance=Provenance(client_name=client, transport=transport),
                    )
                )
        return found

    async def unjudged_conflicts(self, scope: Scope, limit: int) -> list[tuple[MemoryRecord, MemoryRecord]]:
        conn = await self.store.reader(scope)
        rows = await conn.execute_fetchall(
            "SELECT c.memory_id, c.other_id FROM conflicts c JOIN memories a ON a.id = c.memory_id "
            "JOIN memories b ON b.id = c.other_id WHERE c.memory_id < c.other_id AND c.judged_at IS NULL "
            "AND a.superseded_by IS NULL AND b.superseded_by IS NULL AND a.tier = 'active' AND b.tier = 'active' "
            "ORDER BY c.created_at, c.memory_id LIMIT ?",
            (limit,),
        )
        pairs = [(str(a), str(b)) for a, b in rows]
        ids = sorted({i for pair in pairs for i in pair})
        if not ids:
            return []
        found = await conn.execute_fetchall(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id IN ({','.join('?' * len(ids))})", ids
        )
        records = {r.id: r for r in map(row_to_record, found)}
        await attach_occurrences(conn, list(records.values()))  # last_seen_at: when each was said last
        return [(records[a], records[b]) for a, b in pairs if a in records and b in records]

    async def settle_conflict(self, scope: Scope, older: str, newer: str, verdict: str, now: float) -> str | None:
        async with self.store.transaction(scope) as conn:
            live = await conn.execute_fetchall(
                "SELECT COUNT(*), COALESCE(SUM(pinned), 0) FROM memories WHERE id IN (?, ?) "
                "AND superseded_by IS NULL AND tier = 'active'",
                (older, newer),
            )
            count, pinned = next(iter(live))
            if int(count) != 2:
                return None
            if pinned and verdict == "replaces":
                verdict = "unsure"  # a pinned memory is the user's rule: only the user replaces it
            pair = "(memory_id = ? AND other_id = ?) OR (memory_id = ? AND other_id = ?)"
            if verdict in ("replaces", "both_true"):
                await conn.execute(f"DELETE FROM conflicts WHERE {pair}", (older, newer, newer, older))
            else:
                await conn.execute(
                    f"UPDATE conflicts SET judged_at = ? WHERE {pair}", (now, older, newer, newer, older)
                )
            if verdict == "replaces":
                await conn.execute(
                    "UPDATE memories SET valid_to = ?, superseded_by = ? WHERE id = ? AND superseded_by IS NULL",
                    (now, newer, older),
                )
                await events.record(conn, [older], "superseded", now, by=newer, rule="judged")
            elif verdict == "both_true":
                await events.record(conn, [older], "unflagged", now, other=newer)
                await events.record(conn, [newer], "unflagged", now, other=older)
            await conn.execute(
                "INSERT INTO changes(memory_n, op) SELECT n, 'put' FROM memories WHERE id IN (?, ?)", (older, newer)
            )
        return verdict

    async def judgement_failed(self, scope: Scope, older: str, newer: str, now: float, give_up_after: int) -> bool:
        pair = "(memory_id = ? AND other_id = ?) OR (memory_id = ? AND other_id = ?)"
        async with self.store.transaction(scope) as conn:
            await conn.execute(
                f"UPDATE conflicts SET judge_failures = judge_failures + 1 WHERE {pair}", (older, newer, newer, older)
            )
            cursor = await conn.execute(
                f"UPDATE conflicts SET judged_at = ? WHERE ({pair}) AND judge_failures >= ?",
                (now, older, newer, newer, older, give_up_after),
            )
            return bool(cursor.rowcount > 0)

    async def extraction_failed(self, scope: Scope, namespace: str | None) -> int:
        key = f"extract_failures:{namespace or ''}"
        async with self.store.transaction(scope) as conn:
            await conn.execute(
                "INSERT INTO meta(key, value) VALUES (?, '1') "
                "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1",
                (key,),
            )
            return await self._meta_int(conn, key)

    async def extraction_namespaces(self, scope: Scope) -> list[str | None]:
        conn = await self.store.reader(scope)
        rows = await conn.execute_fetchall("SELECT DISTINCT namespace FROM memories WHERE level = 0")
        return sorted((r[0] for r in rows), key=lambda n: (n is not None, n or ""))

    async def extraction_batch(
        self, scope: Scope, namespace: str | None, skip_kinds: Sequence[str], limit: int
    ) -> list[MemoryRecord]:
        conn = await self.store.reader(scope)
        mark = await self._meta_int(conn, _mark_key(namespace))
        where, params = _unread(namespace, mark, skip_kinds)
        rows = await conn.execute_fetchall(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE {where} ORDER BY m.n LIMIT ?", (*params, limit)
        )
        return [row_to_record(r) for r in rows]

    async def mark_extracted(self, scope: Scope, namespace: str | None, upto: int) -> None:
        async with self.store.transaction(scope) as conn:
            await conn.execute("DELETE FROM meta WHERE key = ?", (f"extract_failures:{namespace or ''}",))
            await conn.execute(
                "INSERT INTO meta(key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = MAX(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER))",
                (_mark_key(namespace), str(upto)),
            )

    async def unread_for_facts(self, scope: Scope, skip_kinds: Sequence[str]) -> int:
        conn = await self.store.reader(scope)
        total = 0
        for namespace in await self.extraction_namespaces(scope):
            if namespace is not None and namespace != scope.namespace:
                continue
            where, params = _unread(namespace, await self._meta_int(conn, _mark_key(namespace)), skip_kinds)
            total += int(
                next(iter(await conn.execute_fetchall(f"SELECT COUNT(*) FROM memories m WHERE {where}", params)))[0]
            )
        return total

    @staticmethod
    async def _meta_int(conn: aiosqlite.Connection, key: str) -> int:
        rows = list(await conn.execute_fetchall("SELECT value FROM meta WHERE key = ?", (key,)))
        return int(rows[0][0]) if rows else 0

    async def link_sources(self, scope: Scope, derived_id: str, source_ids: Sequence[str]) -> bool:
        async with self.store.transaction(scope) as conn:
            marks = ",".join("?" * len(source_ids))
            found = await conn.execute_fetchall(f"SELECT COUNT(*) FROM memories WHERE id IN ({marks})", source_ids)
            if int(next(iter(found))[0]) != len(set(source_ids)):
                return False
            await conn.executemany(
                "INSERT OR IGNORE INTO summary_sources(summary_id, source_id) VALUES (?, ?)",
                [(derived_id, source) for source in source_ids],
            )
        return True

    async def record_compression_failure(self, scope: Scope, ids: Sequence[str]) -> None:
        async with self.store.transaction(scope) as conn:
            await conn.executemany(
                "INSERT INTO compression_failures(memory_id, failures) VALUES (?, 1) "
                "ON CONFLICT(memory_id) DO UPDATE SET failures = failures + 1",
                [(i,) for i in ids],
            )

    async def compression_failures(self, scope: Scope) -> dict[str, int]:
        conn = await self.store.reader(scope)
        rows = await conn.execute_fetchall(
            "SELECT f.memory_id, f.failures FROM compression_failures f JOIN memories m ON m.id = f.memory_id"
        )
        return {str(i): int(f) for i, f in rows}

    async def restore_lineage(
        self,
        scope: Scope,
        sources: Sequence[tuple[str, str]],
        conflicts: Sequence[tuple[str, str]],
        failures: Sequence[tuple[str, int]],
    ) -> None:
        async with self.store.transaction(scope) as conn:
            await conn.executemany(
                "INSERT OR IGNORE INTO summary_sources(summary_id, source_id) "
                "SELECT s.id, o.id FROM memories s, memories o WHERE s.id = ? AND o.id = ?",
                sources,
            )
            # Flagged when the newer side was stored: its creation time is the flag's.
            await conn.executemany(
                "INSERT OR IGNORE INTO conflicts(memory_id, other_id, created_at) "
                "SELECT a.id, b.id, MAX(a.created_at, b.created_at) FROM memories a, memories b "
                "WHERE a.id = ? AND b.id = ?",
                [pair for a, b in conflicts for pair in ((a, b), (b, a))],
            )
            await conn.executemany(
                "INSERT INTO compression_failures(memory_id, failures) SELECT id, ? FROM memories WHERE id = ? "
                "ON CONFLICT(memory_id) DO UPDATE SET failures = MAX(failures, excluded.failures)",
                [(count, memory_id) for memory_id, count in failures],
            )

    async def summaries_holding(self, scope: Scope, memory_id: str) -> list[str]:
        conn = await self.store.reader(scope)
        rows = await conn.execute_fetchall(
            "SELECT summary_id FROM summary_sources WHERE source_id = ? ORDER BY summary_id", (memory_id,)
        )
        return [str(r[0]) for r in rows]

    async def task_summaries(self, scope: Scope, task_id: str) -> list[str]:
        conn = await self.store.reader(scope)
        rows = await conn.execute_fetchall("SELECT id FROM memories WHERE task_id = ? AND level = 3", (task_id,))
        return [str(r[0]) for r in rows]

    async def undo_summary(self, scope: Scope, summary_id: str, resist: int = 0) -> list[str]:
        async with self.store.transaction(scope) as conn:
            # A summary that is itself summarized (an L1 under an L2) comes back first, so nothing
            # is left built from what this one held.
            for above in await writes.ancestors(conn, [summary_id]):
                await writes.undo(conn, above, 0)
            return await writes.undo(conn, summary_id, resist)

    async def archive(self, scope: Scope, faded: dict[str, tuple[float, float]]) -> list[str]:
        archived: list[str] = []
        async with self.store.transaction(scope) as conn:
            ns = sorted((await rows_of(conn, list(faded))).values())
            for start in range(0, len(ns), 500):
                chunk = ns[start : start + 500]
                marks = ",".join("?" * len(chunk))
                fading = await conn.execute_fetchall(
                    f"SELECT n, id FROM memories WHERE n IN ({marks}) AND pinned = 0 AND tier = 'active'", chunk
                )
                for _, memory_id in fading:
                    retention, threshold = faded[str(memory_id)]
                    detail = {"retention": round(retention, 4), "threshold": threshold}
                    await events.record(conn, [str(memory_id)], "archived", time.time(), **detail)
                await conn.execute(f"UPDATE memories SET tier = 'archived' WHERE n IN ({marks}) AND pinned = 0", chunk)
                archived.extend(str(r[1]) for r in fading)
                await conn.executemany("INSERT INTO changes(memory_n, op) VALUES (?, 'put')", [(n,) for n in chunk])
        return archived

    async def count_fact_check(self, scope: Scope, namespace: str | None, passed: bool) -> None:
        async with self.store.transaction(scope) as conn:
            await conn.execute(
                "INSERT INTO meta(key, value) VALUES (?, '1') "
                "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1",
                (fact_check_key(namespace, passed),),
            )


def _mark_key(namespace: str | None) -> str:
    return f"extracted_upto:{namespace or ''}" if namespace is not None else "extracted_upto"


def _unread(namespace: str | None, mark: int, skip_kinds: Sequence[str]) -> tuple[str, list[Any]]:
    """The memories of ``namespace`` the fact extraction has still to read, as a WHERE clause."""
    skipped = ",".join("?" * len(skip_kinds)) or "''"
    return (
        "m.n > ? AND m.level = 0 AND m.namespace IS ? AND m.superseded_by IS NULL AND m.expires_at IS NULL "
        f"AND COALESCE(m.transport, '') != ? AND m.kind NOT IN ({skipped})",
        [mark, namespace, SCHEDULER.transport, *skip_kinds],
    )
