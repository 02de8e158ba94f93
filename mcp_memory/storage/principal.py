"""PrincipalDb: one principal's open file and the vector index derived from it.

A writer and a reader connection, the locks that order them, and the in-process index, which
follows the file by replaying the ``changes`` log, only when ``PRAGMA data_version`` says a
connection committed since the last look. SqliteStore opens
one per principal and runs every query through it.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiosqlite
import anyio

from mcp_memory.storage.reinforcement import Reinforcement

if TYPE_CHECKING:  # the index and numpy load with the first search, not before the handshake
    from mcp_memory.storage.vectors import IndexColumns, IndexRow, VectorIndex

log = logging.getLogger(__name__)

# What the vector index holds of a memory: row number, id, vector, namespace, live, expiry, script.
_INDEX_ROWS = (
    "SELECT m.n, m.id, v.vec, m.namespace, (m.tier = 'active' AND m.superseded_by IS NULL), m.expires_at, "
    "m.language IN ('zh', 'ja', 'ko') FROM memories m JOIN vectors v ON v.memory_n = m.n"
)


class PrincipalDb:
    """One principal's file: a writer and a reader connection, and the derived vector index."""

    def __init__(
        self, path: Path, reader: aiosqlite.Connection, writer: aiosqlite.Connection, busy_timeout_ms: int
    ) -> None:
        self.path = path
        self.busy_timeout_ms = busy_timeout_ms
        self.reader = reader
        self.writer = writer
        self.write_lock = anyio.Lock()
        self.index_lock = anyio.Lock()
        self.index: VectorIndex | None = None
        self.last_seq = 0
        self.data_version = -1
        # A forget whose WAL could not be emptied (another process was reading): retried after each commit.
        self.scrub_pending = False
        # The pool (SqliteStore) closes a file no call holds, least recently used first.
        self.users = 0
        self.last_used = time.monotonic()
        self.reinforcement = Reinforcement()  # recall's uses not written yet

    @property
    def evictable(self) -> bool:
        """Nothing holds it: no call in flight, no transaction, no index load."""
        return not (self.users or self.write_lock.locked() or self.index_lock.locked())

    async def close(self) -> None:
        await self.reader.close()
        await self.writer.close()

    async def catch_up(self) -> None:
        """Replay the change log into the in-process index (cheap when nothing moved)."""
        async with self.index_lock:
            if self.index is not None:
                self.index, self.last_seq = await replay_changes(self.reader, self.index, self.last_seq)

    async def index_rows(self, ns: Sequence[int]) -> list[IndexRow]:
        """The index rows of the memories ``ns`` (a replay of the change log)."""
        return await index_rows(self.reader, ns)

    async def index_columns(self, dim: int) -> IndexColumns:
        """Every row of the index, read as columns: one buffer of vectors, not an object per row."""
        return await index_columns(self.reader, dim)

    async def sync(self, dim: int) -> VectorIndex:
        """The principal's index, loaded on first use and caught up with other processes."""
        from mcp_memory.storage.vectors import VectorIndex

        version_rows = await self.reader.execute_fetchall("PRAGMA data_version")
        version = int(next(iter(version_rows))[0])
        if self.index is None:
            async with self.index_lock:
                if self.index is None:
                    seq_rows = await self.reader.execute_fetchall("SELECT COALESCE(MAX(seq), 0) FROM changes")
                    last_seq = int(next(iter(seq_rows))[0])
                    started = time.perf_counter()
                    index = VectorIndex(dim)
                    index.load(await self.index_columns(dim))
                    took = time.perf_counter() - started
                    # A crowd reloads small indexes all day: only a load a person would notice is news.
                    level = logging.INFO if took >= 0.25 else logging.DEBUG
                    log.log(level, "vector index of %d memories loaded in %.2f s", len(index), took)
                    self.last_seq, self.index, self.data_version = last_seq, index, version
        if version != self.data_version:  # some connection committed since: replay the change log
            await self.catch_up()
            self.data_version = version  # read before the replay, so a commit during it is seen next time
        assert self.index is not None
        return self.index

    async def truncate_wal(self, attempts: int) -> bool:
        """PRAGMA wal_checkpoint(TRUNCATE) without waiting on readers; True when the WAL was emptied."""
        await self.writer.execute("PRAGMA busy_timeout = 0")
        try:
            for attempt in range(attempts):
                rows = await self.writer.execute_fetchall("PRAGMA wal_checkpoint(TRUNCATE)")
                if int(next(iter(rows))[0]) == 0:
                    return True
                if attempt + 1 < attempts:
                    await anyio.sleep(0.02 * (attempt + 1))
            return False
        finally:
            await self.writer.execute(f"PRAGMA busy_timeout = {self.busy_timeout_ms}")


async def replay_changes(conn: aiosqlite.Connection, index: VectorIndex, last_seq: int) -> tuple[VectorIndex, int]:
    """The index brought up to the change log's head: the rows changed since ``last_seq`` read
    again, or every row when the log no longer reaches back that far (pruned). SQLite numbers the
    log without gaps (AUTOINCREMENT, rolled back with its transaction), so a gap means pruning.
    Returns the index (a new one after a full read) and the log position it reached."""
    from mcp_memory.storage.vectors import VectorIndex

    rows = list(
        await conn.execute_fetchall("SELECT seq, memory_n FROM changes WHERE seq > ? ORDER BY seq", (last_seq,))
    )
    if not rows:
        return index, last_seq
    if int(rows[0][0]) > last_seq + 1:
        fresh = VectorIndex(index.dim)
        fresh.load(await index_columns(conn, index.dim))
        return fresh, int(rows[-1][0])
    touched = sorted({int(r[1]) for r in rows})
    found = await index_rows(conn, touched)
    index.upsert(found)
    present = {row.n for row in found}
    index.remove([n for n in touched if n not in present])
    return index, int(rows[-1][0])


async def index_rows(conn: aiosqlite.Connection, ns: Sequence[int]) -> list[IndexRow]:
    """The index rows of the memories ``ns`` (a replay of the change log)."""
    import numpy as np

    from mcp_memory.storage.vectors import IndexRow

    rows: list[Any] = []
    for start in range(0, len(ns), 500):
        chunk = ns[start : start + 500]
        rows.extend(
            await conn.execute_fetchall(f"{_INDEX_ROWS} WHERE m.n IN ({','.join('?' * len(chunk))})", tuple(chunk))
        )
    return [
        IndexRow(
            n=int(r[0]),
            id=str(r[1]),
            vector=np.frombuffer(r[2], dtype=np.float32),
            namespace=r[3],
            live=bool(r[4]),
            expires_at=r[5],
            cjk=bool(r[6]),
        )
        for r in rows
    ]


async def index_columns(conn: aiosqlite.Connection, dim: int) -> IndexColumns:
    """Every row of the index, read as columns: one buffer of vectors, not an object per row."""
    import numpy as np

    from mcp_memory.storage.vectors import IndexColumns

    # 100k rows arrive as 700k objects at once: a full pass of the cyclic collector over the
    # whole heap in the middle of it once doubled the load. Nothing here makes a cycle.
    collecting = gc.isenabled()
    gc.disable()
    try:
        rows = list(await conn.execute_fetchall(_INDEX_ROWS))
        ns, ids, vecs, namespaces, live, expires, cjk = zip(*rows, strict=True) if rows else ((),) * 7
        return IndexColumns(
            ns=np.array(ns, dtype=np.int64),
            ids=list(ids),
            # One writable buffer the index adopts as its matrix.
            vectors=np.frombuffer(bytearray().join(vecs), dtype=np.float32).reshape(len(rows), dim),
            namespaces=list(namespaces),
            live=np.array(live, dtype=bool),
            expires=np.array([np.inf if e is None else e for e in expires], dtype=np.float64),
            cjk=np.array(cjk, dtype=bool),
        )
    finally:
        if collecting:
            gc.enable()
