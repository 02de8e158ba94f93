"""The tables every replica shares, on PostgreSQL: tokens, leases and passes, the switch state, the
LLM ledger, inspector sessions and forget_user's confirmation codes.

The control-file classes (``storage/control.py`` and its kin) are written against a synchronous
sqlite3 connection on a worker thread. :class:`SharedDatabase` hands them :class:`SharedConn`
instead: one kept connection as the server's role, in autocommit, with each statement translated
by ``dialect.translate_shared``. SQLite's ``BEGIN IMMEDIATE`` (the check and the write of
``guarded_write`` as one) becomes a transaction that first takes an advisory lock, so two replicas
cannot both take the last LLM call of a budget or the same lease.

The bearer-token lookup every HTTP request makes is a point read answered on the event loop
instead (:meth:`SharedDatabase.read`, a kept async connection): through the worker thread and the
control object's lock, four concurrent clients queued 12-18 ms a request for it (ADR 28).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, TypeVar

import psycopg

from mcp_memory.config import PostgresSettings
from mcp_memory.core.errors import StorageError
from mcp_memory.storage.pg.database import server_parts, where
from mcp_memory.storage.pg.dialect import translate_shared

IDLE_CHECK_SECONDS = 5.0
CONTROL_LOCK = 0x6D63_7063  # the advisory lock every guarded write of the shared tables takes

T = TypeVar("T")


class SharedConn:
    """The part of a sqlite3 connection the control-file functions use, over psycopg."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn
        self._tx: Any = None

    def execute(self, statement: str, params: Sequence[Any] = ()) -> psycopg.Cursor[Any]:
        word = statement.strip().upper()
        if word == "BEGIN IMMEDIATE":
            cur = self.conn.execute("BEGIN")
            self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (CONTROL_LOCK,))
            return cur
        if word in ("COMMIT", "ROLLBACK"):
            return self.conn.execute(word)
        return self.conn.execute(translate_shared(statement), [int(p) if isinstance(p, bool) else p for p in params])

    def __enter__(self) -> SharedConn:  # sqlite3's ``with conn:`` is a transaction, not a close
        self._tx = self.conn.transaction()
        self._tx.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        tx, self._tx = self._tx, None
        tx.__exit__(kind, exc, tb)


class SharedDatabase:
    """One kept connection for a control-file object; calls come one at a time from its worker
    thread (the object's lock), and a connection that broke is made again at the next call."""

    def __init__(self, settings: PostgresSettings) -> None:
        self.settings = settings
        self._conn: psycopg.Connection | None = None
        self._lock = threading.Lock()
        self._used = 0.0
        self._parts: dict[str, Any] | None = None  # read at the first call (the DSN, the password's variable)
        self._reader: psycopg.AsyncConnection | None = None  # point reads on the event loop (``read``)
        self._reader_loop: asyncio.AbstractEventLoop | None = None
        self._reader_used = 0.0

    def run(self, fn: Callable[..., T], *args: Any) -> T:
        with self._lock:
            parts = self._parts = self._parts or server_parts(self.settings)
            try:
                return fn(SharedConn(self._connection(parts)), *args)
            except psycopg.Error as exc:
                if self._conn is not None and self._conn.broken:
                    self.close()
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise StorageError(f"the shared tables on PostgreSQL at {where(parts)}: {first}") from exc

    def _connection(self, parts: dict[str, Any]) -> psycopg.Connection:
        """The kept connection; one idle for a while is checked first (an empty query), so a
        database that restarted meanwhile costs a reconnection, not a failed call."""
        conn = self._conn
        if conn is not None and not conn.closed and time.monotonic() - self._used > IDLE_CHECK_SECONDS:
            try:
                conn.execute("")
            except psycopg.Error:
                self.close()
        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(autocommit=True, **parts)
        self._used = time.monotonic()
        return self._conn

    async def read(self, statement: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """The rows of one read statement (sqlite3's dialect, translated), on a connection kept for
        the event loop that asks: no worker thread and no queue behind ``run``'s lock. A connection
        idle for a while is checked first, and one that broke is made again at the next read."""
        parts = self._parts = self._parts or server_parts(self.settings)
        try:
            conn = await self._reading(parts)
            cursor = await conn.execute(translate_shared(statement), list(params))
            rows = await cursor.fetchall()
        except psycopg.Error as exc:
            if self._reader is not None and self._reader.broken:
                self._drop_reader()
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise StorageError(f"the shared tables on PostgreSQL at {where(parts)}: {first}") from exc
        self._reader_used = time.monotonic()
        return rows

    async def _reading(self, parts: dict[str, Any]) -> psycopg.AsyncConnection:
        loop = asyncio.get_running_loop()
        conn = self._reader
        if conn is not None and (conn.closed or self._reader_loop is not loop):
            self._drop_reader()  # a connection belongs to the loop that made it
        elif conn is not None and time.monotonic() - self._reader_used > IDLE_CHECK_SECONDS:
            try:
                await conn.execute("")
            except psycopg.Error:
                self._drop_reader()
        if self._reader is None:
            made = await psycopg.AsyncConnection.connect(autocommit=True, **parts)
            if self._reader is not None:  # another request made one while this one connected
                made.pgconn.finish()
            else:
                self._reader, self._reader_loop = made, loop
        return self._reader

    def _drop_reader(self) -> None:
        conn, self._reader, self._reader_loop = self._reader, None, None
        if conn is not None:
            conn.pgconn.finish()  # what AsyncConnection.close does, without needing the loop that made it

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
        self._drop_reader()
