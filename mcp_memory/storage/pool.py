"""PrincipalPool: the principals one process keeps open, within bounds.

Each open principal holds a file's two connections (two threads), a few descriptors and its vector
index. The pool opens a principal on first use, keeps it while a call runs on it, and closes the
least recently used idle ones when there are too many or they sat idle too long; vector indexes are
dropped first when all of them together pass a byte budget. An MCP session holds nothing: clients
keep sessions open for hours, and a thousand idle sessions must not pin a thousand files (ADR 21).
"""

from __future__ import annotations

import hashlib
import logging
import re
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import aiosqlite
import anyio

from mcp_memory.core.errors import OutOfFilesError, StorageError
from mcp_memory.descriptors import exhausted, out_of_files_message
from mcp_memory.storage.permissions import PRINCIPALS
from mcp_memory.storage.principal import PrincipalDb
from mcp_memory.storage.schema import migrate

log = logging.getLogger(__name__)


def principal_file(data_dir: Path, principal: str) -> Path:
    """A file name no principal string can steer outside the data directory."""
    slug = re.sub(r"[^a-z0-9_-]+", "_", principal.lower())[:40].strip("_") or "p"
    digest = hashlib.sha256(principal.encode("utf-8")).hexdigest()[:16]
    return data_dir / PRINCIPALS / f"{slug}-{digest}.db"


# A file written this recently may be written again within the file system's clock tick (which
# can be coarser than a millisecond) without its description changing: it is not at rest yet.
REST_SECONDS = 2.0

FileState = tuple[tuple[int, int, int] | None, ...]


def at_rest(path: Path, now: float) -> FileState | None:
    """The principal's database and write-ahead log as the file system describes them (inode,
    size, modification time; None for a file not there), without opening either, when neither was
    written in the last ``REST_SECONDS``; else None. Any write after an at-rest description changes
    it: every commit writes the log and every checkpoint the database."""
    states: list[tuple[int, int, int] | None] = []
    for file in (path, path.with_name(path.name + "-wal")):
        try:
            st = file.stat()
        except FileNotFoundError:
            states.append(None)
            continue
        if st.st_size == 0 and file != path:
            # an empty log holds nothing: it is made when a connection opens and removed when the
            # last one closes, which are no writes (a checkpoint that empties it writes the database)
            states.append(None)
            continue
        if st.st_mtime > now - REST_SECONDS:
            return None
        states.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(states)


@dataclass(frozen=True)
class PoolLimits:
    """How many principals one process keeps open (their files, threads and vector indexes)."""

    max_open: int = 64
    idle_seconds: float = 600.0
    index_budget_bytes: int = 1 << 30


class PrincipalPool:
    def __init__(
        self,
        data_dir: Path,
        busy_timeout_ms: int,
        limits: PoolLimits,
        before_close: Callable[[str], Awaitable[None]],
        *,
        durability: str = "normal",
    ) -> None:
        """``before_close(principal)`` runs before a principal is closed (its buffered writes go out).
        ``durability``: SQLite's ``synchronous`` in WAL mode. NORMAL loses no commit when the process
        is killed, but the last commits may roll back on power loss or an OS crash; FULL syncs the WAL
        at every commit and survives those too, at a cost in write rate (README, "Durability")."""
        if durability not in ("normal", "full"):
            raise ValueError(f"durability must be 'normal' or 'full', not {durability!r}")
        self.synchronous = durability.upper()
        self.data_dir = data_dir
        self.busy_timeout_ms = busy_timeout_ms
        self.limits = limits
        self.evictions = {"files": 0, "indexes": 0}
        self._before_close = before_close
        self._dbs: dict[str, PrincipalDb] = {}
        self._lock = anyio.Lock()

    def get_open(self, principal: str) -> PrincipalDb | None:
        return self._dbs.get(principal)

    def open_dbs(self) -> list[PrincipalDb]:
        return list(self._dbs.values())

    def principals(self) -> list[str]:
        return list(self._dbs)

    async def get(self, principal: str) -> PrincipalDb:
        """The principal's open file, opened (and migrated) on first use."""
        db = self._dbs.get(principal)
        if db is not None:
            db.last_used = time.monotonic()
            return db
        async with self._lock:
            db = self._dbs.get(principal)
            if db is None:
                await self._make_room(self.limits.max_open - 1)
                path = principal_file(self.data_dir, principal)
                db = await self._open_making_room(path)
                self._dbs[principal] = db
                # The file name is a hash: the scheduler reads the principal back from here.
                await db.writer.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('principal', ?)", (principal,))
        return db

    async def _open_making_room(self, path: Path) -> PrincipalDb:
        """Open ``path``; out of descriptors, close every idle principal and try once more, and if
        that is not enough either, say so as a state to retry (OutOfFilesError), not a broken file."""
        try:
            return await self._open(path)
        except StorageError as exc:
            if not exhausted(exc):
                raise
            log.warning("out of descriptors with %d principal file(s) open; closing the idle ones", len(self._dbs))
            await self._make_room(0)
        try:
            return await self._open(path)
        except StorageError as exc:
            if exhausted(exc):
                raise OutOfFilesError(out_of_files_message()) from None
            raise

    async def _connect(self, path: Path) -> aiosqlite.Connection:
        conn = await aiosqlite.connect(path, isolation_level=None, timeout=self.busy_timeout_ms / 1000)
        for pragma in (
            f"PRAGMA busy_timeout = {self.busy_timeout_ms}",
            f"PRAGMA synchronous = {self.synchronous}",
            "PRAGMA foreign_keys = ON",
            "PRAGMA secure_delete = ON",
        ):
            await conn.execute(pragma)
        return conn

    async def _open(self, path: Path) -> PrincipalDb:
        await anyio.to_thread.run_sync(migrate, path, self.busy_timeout_ms)
        reader: aiosqlite.Connection | None = None
        try:
            reader = await self._connect(path)
            return PrincipalDb(path, reader, await self._connect(path), self.busy_timeout_ms)
        except sqlite3.Error as exc:
            if reader is not None:
                await reader.close()
            raise StorageError(f"cannot open data file {str(path)!r}: {exc}") from exc

    @asynccontextmanager
    async def lease(self, principal: str) -> AsyncIterator[None]:
        """Keep ``principal``'s file open while a call runs: the pool never closes one in use."""
        db = await self.get(principal)
        db.users += 1
        try:
            yield
        finally:
            db.users -= 1
            db.last_used = time.monotonic()

    async def close_idle(self) -> None:
        """Close every unheld principal unused for ``idle_seconds`` (and any beyond ``max_open``)."""
        async with self._lock:
            await self._make_room(self.limits.max_open, idle_seconds=self.limits.idle_seconds)

    async def _make_room(self, keep: int, idle_seconds: float | None = None) -> None:
        """Close unheld principals, least recently used first, until at most ``keep`` are open (or,
        with ``idle_seconds``, every unheld one unused that long). Called under the lock."""
        now = time.monotonic()
        idle = sorted((db.last_used, principal) for principal, db in self._dbs.items() if db.evictable)
        for last_used, principal in idle:
            if idle_seconds is not None:
                if now - last_used < idle_seconds:
                    break
            elif len(self._dbs) <= keep:
                break
            db = self._dbs[principal]
            if not db.evictable:
                continue  # taken while an earlier one closed
            await self._before_close(principal)
            if not db.evictable or db.reinforcement.pending:
                continue
            del self._dbs[principal]
            self.evictions["files"] += 1  # counted as it leaves the figures' open files, not after its close
            await db.close()

    def trim_indexes(self, keep: PrincipalDb) -> None:
        """Drop the vector indexes of unheld principals, least recently used first, while all of them
        together hold more than the budget; each reloads on its next recall."""
        loaded = [db for db in self._dbs.values() if db.index is not None]
        total = sum(db.index.nbytes for db in loaded if db.index is not None)
        for db in sorted(loaded, key=lambda d: d.last_used):
            if total <= self.limits.index_budget_bytes:
                break
            if db is keep or db.users or db.index_lock.locked() or db.index is None:
                continue
            total -= db.index.nbytes
            db.index = None
            self.evictions["indexes"] += 1

    def figures(self) -> dict[str, int]:
        """Open principal files, vector indexes held and their bytes, and evictions so far."""
        indexes = [db.index for db in self._dbs.values() if db.index is not None]
        return {
            "open_principals": len(self._dbs),
            "indexes": len(indexes),
            "index_bytes": sum(index.nbytes for index in indexes),
            "evicted_files": self.evictions["files"],
            "evicted_indexes": self.evictions["indexes"],
        }

    async def close(self) -> None:
        dbs, self._dbs = list(self._dbs.values()), {}
        for db in dbs:
            await db.close()
