"""ControlStore: the small control file beside the principals' files (scheduler leases and passes).

A lease lets one process of several sharing a data directory run a given pass; it expires, so
another process takes over when the holder dies. Every pass leaves a record of what it did.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

import anyio
import orjson

from mcp_memory.config import Settings
from mcp_memory.core.errors import OutOfFilesError, StorageError
from mcp_memory.descriptors import exhausted, out_of_files_message
from mcp_memory.storage.permissions import CONTROL_FILE, private_dir
from mcp_memory.storage.schema import connect_sync

_SCHEMA = """
CREATE TABLE IF NOT EXISTS leases (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    expires_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS passes (
    n INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    holder TEXT NOT NULL,
    started_at REAL NOT NULL,
    finished_at REAL NOT NULL,
    outcome TEXT NOT NULL,
    details TEXT NOT NULL
);
"""


def guarded_write(conn: sqlite3.Connection, allowed: Callable[[], bool], write: Callable[[], None]) -> bool:
    """``write`` if ``allowed()`` holds, both in one BEGIN IMMEDIATE transaction (no other process
    can change what was checked before the write lands); returns whether it wrote."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        if not allowed():
            conn.execute("ROLLBACK")
            return False
        write()
        conn.execute("COMMIT")
        return True
    except BaseException:
        conn.execute("ROLLBACK")
        raise


class SharedTables(Protocol):
    """Where the control tables live when the deployment has a database every replica reaches
    (``storage/pg/shared.py``): ``run`` calls a control function with a connection that answers
    its sqlite3 calls."""

    def run(self, fn: Callable[..., Any], *args: Any) -> Any: ...

    async def read(self, statement: str, params: Sequence[Any]) -> list[tuple[Any, ...]]: ...

    def close(self) -> None: ...


C = TypeVar("C", bound="ControlFile")


class ControlFile:
    """Synchronous SQLite on a worker thread: the control file is small and rarely written. With
    ``shared``, the same functions run on the deployment's database instead (ADR 19)."""

    schema = _SCHEMA

    def __init__(self, data_dir: Path, busy_timeout_ms: int = 10_000, shared: SharedTables | None = None) -> None:
        self.path = data_dir / CONTROL_FILE
        self.busy_timeout_ms = busy_timeout_ms
        self.shared = shared
        self._lock = anyio.Lock()
        self._reader: sqlite3.Connection | None = None

    @classmethod
    def for_settings(cls: type[C], settings: Settings) -> C:
        """The control tables the settings' backend keeps: the data directory's control file, or
        PostgreSQL's shared tables, which several replicas reach."""
        if settings.storage.backend != "postgres":
            return cls(settings.data_dir, settings.busy_timeout_ms)
        from mcp_memory.storage.pg.shared import SharedDatabase  # psycopg only where it is used

        return cls(settings.data_dir, settings.busy_timeout_ms, SharedDatabase(settings.storage.postgres))

    @property
    def place(self) -> str:
        """Where the tables are, for a message."""
        return "PostgreSQL's shared tables" if self.shared is not None else repr(str(self.path))

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        if self.shared is not None:
            self.shared.close()

    def _read_now(self, fn: Any, *args: Any) -> Any:
        """A read on one connection kept open, on the caller's thread, never waiting for a lock
        (busy timeout 0). In WAL mode each statement is a fresh read transaction that sees every
        commit made before it; ``fn`` must run its statements to their end (fetchall), so no
        snapshot outlives the read."""
        if self._reader is None:
            private_dir(self.path.parent)
            conn = connect_sync(self.path, 0)
            try:
                conn.executescript(self.schema)
            except BaseException:
                conn.close()
                raise
            self._reader = conn
        return fn(self._reader, *args)

    async def _read(self, fn: Any, *args: Any) -> Any:
        """A point read answered at once on the kept connection; when the file is busy or in trouble,
        the patient path on a worker thread (which says what is wrong). A shared database is read
        on the worker thread always: the network is never waited for on the event loop."""
        if self.shared is not None:
            return await self._call(fn, *args)
        try:
            return self._read_now(fn, *args)
        except (OSError, sqlite3.Error):
            self.close()
            return await self._call(fn, *args)

    async def _lookup(self, statement: str, *params: Any) -> tuple[Any, ...] | None:
        """The first row of a point read (``_select``)."""
        rows = await self._select(statement, *params)
        return rows[0] if rows else None

    async def _select(self, statement: str, *params: Any) -> list[tuple[Any, ...]]:
        """The rows of a small read every call makes (a token, the kill switch): on the kept
        connection (``_read``), or, on a shared database, on its connection for the event loop,
        not through a worker thread and this object's lock (ADR 28)."""
        if self.shared is not None:
            return [tuple(r) for r in await self.shared.read(statement, params)]

        def every(conn: sqlite3.Connection, *args: Any) -> list[tuple[Any, ...]]:
            found = conn.execute(statement, args).fetchall()  # run to its end: no snapshot outlives it
            return [tuple(r) for r in found]

        rows: list[tuple[Any, ...]] = await self._read(every, *params)
        return rows

    def _run(self, fn: Any, *args: Any) -> Any:
        if self.shared is not None:
            return self.shared.run(fn, *args)
        try:
            private_dir(self.path.parent)
            conn = connect_sync(self.path, self.busy_timeout_ms)
        except (OSError, sqlite3.Error) as exc:
            if exhausted(exc):  # a state the call is told to retry, not a broken file
                raise OutOfFilesError(out_of_files_message()) from None
            raise StorageError(f"cannot open the control file {str(self.path)!r}: {exc}") from exc
        try:
            conn.executescript(self.schema)
            return fn(conn, *args)
        except sqlite3.Error as exc:
            raise StorageError(f"control file {str(self.path)!r}: {exc}") from exc
        finally:
            conn.close()

    async def rows(self, table: str, columns: Sequence[str]) -> list[tuple[Any, ...]]:
        """Every row of one of this file's tables (``migrate`` copies them)."""

        def read(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
            return [tuple(r) for r in conn.execute(f"SELECT {', '.join(columns)} FROM {table}").fetchall()]

        found: list[tuple[Any, ...]] = await self._call(read)
        return found

    async def add_rows(self, table: str, columns: Sequence[str], rows: Sequence[tuple[Any, ...]]) -> int:
        """The rows whose key is not there yet; how many were added."""

        def write(conn: sqlite3.Connection) -> int:
            marks = ", ".join("?" * len(columns))
            added = 0
            with conn:
                for row in rows:
                    cursor = conn.execute(f"INSERT OR IGNORE INTO {table}({', '.join(columns)}) VALUES ({marks})", row)
                    added += max(cursor.rowcount, 0)
            return added

        return int(await self._call(write))

    async def _call(self, fn: Any, *args: Any) -> Any:
        async with self._lock:
            return await anyio.to_thread.run_sync(self._run, fn, *args)


class ControlStore(ControlFile):
    """Scheduler leases and the record of passes: ``services.control_ports.PassControl``, where each
    method's contract is."""

    @staticmethod
    def _acquire(conn: sqlite3.Connection, name: str, holder: str, now: float, seconds: float) -> bool:
        def free() -> bool:
            row = conn.execute("SELECT holder, expires_at FROM leases WHERE name = ?", (name,)).fetchone()
            return row is None or row[0] == holder or row[1] <= now

        def take() -> None:
            conn.execute(
                "INSERT INTO leases(name, holder, expires_at) VALUES (?, ?, ?) "
                "ON CONFLICT(name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at",
                (name, holder, now + seconds),
            )

        return guarded_write(conn, free, take)

    async def acquire(self, name: str, holder: str, now: float, seconds: float) -> bool:
        return bool(await self._call(self._acquire, name, holder, now, seconds))

    @staticmethod
    def _holder(conn: sqlite3.Connection, name: str) -> tuple[str, float] | None:
        row = conn.execute("SELECT holder, expires_at FROM leases WHERE name = ?", (name,)).fetchone()
        return None if row is None else (str(row[0]), float(row[1]))

    async def holder(self, name: str) -> tuple[str, float] | None:
        result: tuple[str, float] | None = await self._call(self._holder, name)
        return result

    @staticmethod
    def _release(conn: sqlite3.Connection, name: str, holder: str) -> None:
        conn.execute("DELETE FROM leases WHERE name = ? AND holder = ?", (name, holder))

    async def release(self, name: str, holder: str) -> None:
        await self._call(self._release, name, holder)

    @staticmethod
    def _record(conn: sqlite3.Connection, values: tuple[Any, ...]) -> None:
        conn.execute(
            "INSERT INTO passes(name, holder, started_at, finished_at, outcome, details) VALUES (?,?,?,?,?,?)", values
        )
        conn.execute("DELETE FROM passes WHERE n <= (SELECT MAX(n) - 1000 FROM passes)")  # keep the last 1000

    async def record(
        self, name: str, holder: str, started: float, finished: float, outcome: str, details: dict[str, Any]
    ) -> None:
        await self._call(self._record, (name, holder, started, finished, outcome, orjson.dumps(details).decode()))

    @staticmethod
    def _recent(conn: sqlite3.Connection, limit: int) -> list[dict[str, Any]]:
        rows = conn.execute(
            "SELECT name, holder, started_at, finished_at, outcome, details FROM passes ORDER BY n DESC LIMIT ?",
            (limit,),
        ).fetchall()
        return [
            {
                "name": r[0],
                "holder": r[1],
                "started_at": r[2],
                "finished_at": r[3],
                "outcome": r[4],
                "details": orjson.loads(r[5]),
            }
            for r in rows
        ]

    async def recent(self, limit: int = 10) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = await self._call(self._recent, limit)
        return result
