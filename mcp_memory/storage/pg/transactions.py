"""A principal's transactions on one pooled connection, and the one transaction a call runs in.

A transaction opens in one round trip: ``BEGIN``, the principal's binding (``mcp.principal``,
local to the transaction) and its advisory locks go in one simple-protocol message, with any reads
the caller knows it will make (``prefetch``: recall's freshness check). The pooled connections are
in autocommit, so psycopg adds no ``BEGIN`` of its own, and every wait for the server is counted
(:class:`CountedConnection`): the figure tests and benchmarks hold the code to.

A *call* (``PgDatabase.call``: one recall, remember, checkpoint or resume) keeps one such
transaction in a context variable: each store method the call makes asks for a transaction, is
given the call's, and so reads in it under the same binding and locks. A write takes the write
lock in it and commits it at its end (as its own transaction did before, and for as long): what
the call reads after runs in the next transaction, which opens when it is first asked for. A
transaction that failed is rolled back at once; the call's next read opens another. The reads of a
transaction are kept until it writes or ends: the same statement with the same values is read once
(``PgConn``'s cache). Only the same principal of the same database shares a call's transaction;
another principal's reads open their own, bound to it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Generator, Sequence
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import anyio
import psycopg
from psycopg import pq, sql
from psycopg.abc import PQGen
from psycopg.rows import TupleRow

from mcp_memory.core.models import Scope
from mcp_memory.storage.pg.dialect import PgConn, Reads, rendered

RV = TypeVar("RV")


class Partitions(Protocol):
    """What a transaction needs of its database (``connections.PgDatabase``, which imports this
    module): each principal's key, and the principals whose partitions exist in this process's view."""

    opened: set[str]

    def key(self, principal: str) -> str: ...


# The first keys of a principal's advisory locks (pg_advisory_xact_lock(int, int)); the second is its key's hash.
WRITE_LOCK, ERASE_LOCK = 0x6D63, 0x6D64


class RoundTrips:
    """How many times the pool's connections waited on the server."""

    def __init__(self) -> None:
        self.count = 0


def _counted(gen: PQGen[RV], tally: RoundTrips) -> Generator[Any, Any, RV]:
    """``gen`` as psycopg runs it, counting one round trip if it waits on the server at all (a
    COMMIT with no transaction open sends nothing)."""
    try:
        waiting = next(gen)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    tally.count += 1
    while True:
        try:
            ready = yield waiting
        except BaseException as exc:
            try:
                waiting = gen.throw(exc)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            continue
        try:
            waiting = gen.send(ready)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


class CountedConnection(psycopg.AsyncConnection[TupleRow]):
    """A pooled connection that counts its round trips into its pool's :class:`RoundTrips`. Each
    exchange psycopg waits for is one (a statement, BEGIN, COMMIT); the Parse of a statement psycopg
    prepares after its fifth run shares the count of that run."""

    tally: RoundTrips | None = None
    vector_oid: int | None = None  # pgvector's type, when ``vectors.vec`` is one (vector_layout.py)

    async def wait(self, gen: PQGen[RV], interval: float = 0.1, timeout: float | None = None) -> RV:  # noqa: ASYNC109 (psycopg's)
        if self.tally is not None:
            gen = _counted(gen, self.tally)
        return await super().wait(gen, interval, timeout)


def opening(key: str, name: str | None, *, write: bool, erasing: bool) -> sql.Composed:
    """BEGIN and the principal's binding and locks (and its partitions' creation, at its first
    transaction in this process: ``name``), as one message of several statements."""
    erase = "pg_advisory_xact_lock" if erasing else "pg_advisory_xact_lock_shared"
    k = sql.Literal(key)
    locks = sql.SQL(", {}({}, hashtext({}))").format(sql.SQL(erase), sql.Literal(ERASE_LOCK), k)
    if write or erasing:
        locks += sql.SQL(", pg_advisory_xact_lock({}, hashtext({}))").format(sql.Literal(WRITE_LOCK), k)
    steps = [sql.SQL("BEGIN"), sql.SQL("SELECT set_config('mcp.principal', {}, true){}").format(k, locks)]
    if name is not None:
        steps.append(sql.SQL("SELECT mcp_open_principal({}, {})").format(k, sql.Literal(name)))
    return sql.SQL("; ").join(steps)


async def begin(
    database: Partitions,
    conn: CountedConnection,
    scope: Scope,
    *,
    write: bool = False,
    erasing: bool = False,
    prefetch: Sequence[tuple[str, Sequence[Any]]] = (),
) -> PgConn:
    """A transaction of the scope's principal open on ``conn``, in one round trip; its reads start
    with ``prefetch``'s (statements as the storage modules write them, with their values)."""
    key = database.key(scope.principal)
    first = None if key in database.opened else scope.principal
    statement = opening(key, first, write=write, erasing=erasing)
    reads = Reads()
    pg = PgConn(conn, key, reads)
    rendering = [rendered(pg, conn, text, values) for text, values in prefetch]
    if rendering:
        statement = sql.SQL("; ").join([statement, *(sql.SQL(text) for text in rendering)])
    try:
        cur = await conn.execute(statement)
        for _ in range(2 + (first is not None)):  # BEGIN, the binding, the partitions: then the reads
            cur.nextset()
        for text, values in prefetch:
            reads.keep(text, values, await cur.fetchall())
            cur.nextset()
    except BaseException:
        await finish(conn, commit=False)
        raise
    return pg


async def finish(conn: CountedConnection, *, commit: bool) -> None:
    """COMMIT or ROLLBACK; a rollback is shielded from cancellation, and one that fails leaves the
    connection for the pool to discard."""
    if commit:
        await conn.commit()
        return
    # a broken or busy connection: the pool closes it when it comes back
    with anyio.CancelScope(shield=True), contextlib.suppress(psycopg.Error):
        await conn.rollback()


@dataclass
class Call:
    """One call's transaction of one principal, on one held connection."""

    database: Partitions
    scope: Scope
    conn: CountedConnection
    write: bool = False  # take the write lock as the transaction opens (a call that always writes)
    prefetch: Sequence[tuple[str, Sequence[Any]]] = ()
    open: PgConn | None = None
    write_locked: bool = False
    lock: anyio.Lock = field(default_factory=anyio.Lock)  # held by a write, which ends the transaction
    opening: anyio.Lock = field(default_factory=anyio.Lock)

    def serves(self, database: Partitions, scope: Scope) -> bool:
        return database is self.database and scope.principal == self.scope.principal

    async def _open(self) -> PgConn:
        async with self.opening:  # the call's tasks share it: the first to ask opens it
            if self.open is None:
                self.open = await begin(self.database, self.conn, self.scope, write=self.write, prefetch=self.prefetch)
                self.database.opened.add(self.open.key)
                self.write_locked = self.write
            return self.open

    @asynccontextmanager
    async def block(self, write: bool) -> AsyncIterator[PgConn]:
        """The call's transaction for one store method; a write ends it: committed when the block
        ends (rolled back when it raises), as its own transaction would have been."""
        if write:
            async with self.lock:  # a write runs alone, and nothing reads the transaction it ends
                pg = await self._open()
                try:
                    if not self.write_locked:
                        await self.conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (WRITE_LOCK, pg.key))
                        self.write_locked = True
                    pg.reads.forget()
                    yield pg
                except BaseException:
                    await self.end(commit=False)
                    raise
                await self.end(commit=True)
                self.write = False  # what the call reads after needs no write lock
            return
        if self.lock.locked():  # a write is ending the transaction: read in the next one
            async with self.lock:
                pass
        pg = await self._open()
        try:
            yield pg
        except BaseException:
            if self.conn.pgconn.transaction_status == pq.TransactionStatus.INERROR:
                await self.end(commit=False)  # a failed statement: nothing was written since the last commit
            raise

    async def end(self, *, commit: bool) -> None:
        if self.open is not None:
            self.open = None
            await finish(self.conn, commit=commit)


CURRENT: ContextVar[Call | None] = ContextVar("mcp_memory_pg_call", default=None)
