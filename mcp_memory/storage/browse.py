"""BrowseStore: the reads that page through a principal's memories and tell one memory's history.

Every read keeps to the caller's scope through ``visible_clause``, the history's too: a chain
that runs through another namespace's memory shows only the links the caller may see.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import orjson

from mcp_memory.core.models import Criteria, MemoryHistory, MemoryRecord, Provenance, Scope, StoredOccurrence
from mcp_memory.storage import events, links
from mcp_memory.storage.rows import MEMORY_COLUMNS, attach_occurrences, row_to_record, visible_clause

if TYPE_CHECKING:  # the store builds this one around itself
    from mcp_memory.storage.records import RecordStore

# What a page may be sorted by: the name the tools take -> the column (every one a REAL).
SORT_KEYS = {
    "time": "m.occurred_at",
    "created": "m.created_at",
    "importance": "m.importance",
    "last_used": "COALESCE(m.last_accessed_at, m.created_at)",
}
# A history goes this many versions back and forward at most: a chain longer than that is a loop of
# corrections nobody reads whole.
HISTORY_DEPTH = 50
_EVERYTHING = Criteria(include_superseded=True, include_archived=True, include_expired=True)


class BrowseStore:
    """The browse role (``services.ports.BrowseRows``, where each method's contract is) over a record
    store's connections, for both backends."""

    def __init__(self, store: RecordStore) -> None:
        self.store = store

    async def gone(self, scope: Scope, memory_id: str) -> tuple[float, str] | None:
        logged = await events.read(await self.store.reader(scope), memory_id)
        last = logged[-1] if logged else None
        return (last[0], last[1]) if last is not None and last[1] in events.TERMINAL else None

    async def receipts(self, scope: Scope, limit: int) -> list[tuple[str, float, str]]:
        rows = await (await self.store.reader(scope)).execute_fetchall(
            f"SELECT memory_id, at, event FROM memory_events WHERE event IN ({','.join('?' * len(events.TERMINAL))}) "
            "ORDER BY at DESC, n DESC LIMIT ?",
            (*sorted(events.TERMINAL), limit),
        )
        return [(str(i), float(at), str(event)) for i, at, event in rows]

    async def page(
        self,
        scope: Scope,
        criteria: Criteria,
        *,
        sort: str,
        descending: bool,
        after: tuple[float, int] | None,
        limit: int,
    ) -> list[MemoryRecord]:
        key = SORT_KEYS[sort]
        if sort == "last_used":  # recall's uses waiting in memory count in the order too
            await self.store.flush_reinforcement(scope)
        where, params = visible_clause(scope, criteria, time.time())
        direction, past = ("DESC", "<") if descending else ("ASC", ">")
        if after is not None:
            where += f" AND ({key} {past} ? OR ({key} = ? AND m.n {past} ?))"
            params.extend((after[0], after[0], after[1]))
        conn = await self.store.reader(scope)
        rows = await conn.execute_fetchall(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE {where} ORDER BY {key} {direction}, m.n {direction} "
            "LIMIT ?",
            [*params, limit],
        )
        records = [row_to_record(r) for r in rows]
        await attach_occurrences(conn, records)
        return records

    async def history(self, scope: Scope, record: MemoryRecord) -> MemoryHistory:
        conn = await self.store.reader(scope)
        older = await conn.execute_fetchall(
            "WITH RECURSIVE older(id, depth) AS ("
            " SELECT id, 1 FROM memories WHERE superseded_by = ?"
            " UNION SELECT m.id, o.depth + 1 FROM memories m JOIN older o ON m.superseded_by = o.id"
            f" WHERE o.depth < {HISTORY_DEPTH}) SELECT id FROM older",
            (record.id,),
        )
        newer = await conn.execute_fetchall(
            "WITH RECURSIVE newer(id, depth) AS ("
            " SELECT superseded_by, 1 FROM memories WHERE n = ? AND superseded_by IS NOT NULL"
            " UNION SELECT m.superseded_by, w.depth + 1 FROM memories m JOIN newer w ON m.id = w.id"
            f" WHERE m.superseded_by IS NOT NULL AND w.depth < {HISTORY_DEPTH}) SELECT id, depth FROM newer",
            (record.written,),
        )
        depth = {str(i): int(d) for i, d in newer}
        holders = await conn.execute_fetchall(
            "SELECT summary_id FROM summary_sources WHERE source_id = ? ORDER BY summary_id", (record.id,)
        )
        return MemoryHistory(
            older=sorted(
                await self._visible(scope, [str(r[0]) for r in older]), key=lambda r: (r.valid_from, r.written)
            ),
            newer=sorted(await self._visible(scope, list(depth)), key=lambda r: depth[r.id]),
            summarized_in=[i.id for i in await self._visible(scope, [str(r[0]) for r in holders])],
            links=await self._links(scope, record),
            occurrences=await self._occurrences(scope, record.written),
            events=await events.read(conn, record.id),
        )

    async def _visible(self, scope: Scope, ids: Sequence[str]) -> list[MemoryRecord]:
        if not ids:
            return []
        return await self.store.select_memories(scope, replace(_EVERYTHING, ids=tuple(ids)), time.time())

    async def _links(self, scope: Scope, record: MemoryRecord) -> list[tuple[str, str]]:
        """The memories recall would follow from this one (the same rule recall uses), that the scope sees."""
        conn = await self.store.reader(scope)
        population = int(next(iter(await conn.execute_fetchall("SELECT COUNT(*) FROM memories")))[0])
        found = await links.links(conn, [record.id], population)
        if not found:
            return []
        seen = await self.store.select_memories(scope, Criteria(), time.time(), among=[link.target for link in found])
        visible = {r.id for r in seen}
        via: dict[str, str] = {}  # a memory reached both ways is named by the entity (listed first)
        for link in found:
            if link.target in visible:
                via.setdefault(link.target, link.via or "session")
        return [(how, target) for target, how in via.items()]

    async def _occurrences(self, scope: Scope, n: int) -> list[StoredOccurrence]:
        conn = await self.store.reader(scope)
        rows = await conn.execute_fetchall(
            "SELECT id, session_key, occurred_at, created_at, metadata, client_name, transport FROM occurrences "
            "WHERE memory_n = ? ORDER BY occurred_at, id",
            (n,),
        )
        return [
            StoredOccurrence(
                id=str(i),
                session_key=session,
                occurred_at=float(at),
                created_at=float(created),
                metadata=orjson.loads(metadata),
                provenance=Provenance(client_name=client, transport=transport),
            )
            for i, session, at, created, metadata, client, transport in rows
        ]
