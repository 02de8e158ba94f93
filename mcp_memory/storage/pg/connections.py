"""A principal's reads and transactions on PostgreSQL, as the shared storage code takes them: what
``SqliteStore.reader`` and ``SqliteStore.transaction`` give, over a pool (ADR 19, ADR 20).

Every transaction is bound to one principal (``mcp.principal``) and its statements name that
principal's partitions (``dialect.PgConn``). A principal's partitions are made at its first read
or write, by the owner's function. A read outside a transaction runs each statement in a
transaction of its own, as SQLite's reader connection sees each statement's committed state.
"""

from __future__ import annotations

import hashlib
import time
import weakref
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import psycopg
from psycopg_pool import AsyncConnectionPool

from mcp_memory.config import PostgresSettings
from mcp_memory.core.errors import StorageError
from mcp_memory.core.models import Scope
from mcp_memory.storage.pg import database, migrations, vector_layout
from mcp_memory.storage.pg.dialect import PgConn, PgCursor
from mcp_memory.storage.pg.transactions import CURRENT, Call, CountedConnection, RoundTrips, begin, finish

IDLE_CHECK_SECONDS = 2.0  # a pooled connection unused this long is checked before it is handed out


def principal_key(deployment: str, principal: str) -> str:
    """The principal as every table holds it: a digest of the deployment's id with the name."""
    return hashlib.sha256(f"{deployment}\0{principal}".encode()).hexdigest()[:32]


class WarmFirstPool(AsyncConnectionPool[CountedConnection]):
    """The pool, handing out the connection given back last, at once (ADR 29).

    psycopg_pool hands out the connection given back first, and with a ``reset`` callback it takes
    each one back on a worker task, after the caller has moved on: a call that followed another at
    once found its connection not yet back and took the next. Every connection then served every
    principal in turn, each server process loading the partitions' catalog entries again. Given
    back at once and handed out last-in first-out, a replica serving one call at a time keeps using
    one connection while the others idle until the pool closes them (``max_idle``). When each was
    given back (``given_back``) is noted here instead of in a ``reset`` callback.

    Statements are not prepared (``prepare_threshold`` None): each names its principal's partitions
    (dialect.py), so psycopg prepared one at its sixth run in a principal's burst of calls, which
    the server still planned afresh (custom plans for a prepared statement's first five runs), and
    evicted it with a DEALLOCATE round trip once a hundred principals' statements had passed."""

    def __init__(self, *args: Any, given_back: weakref.WeakKeyDictionary[Any, float], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.given_back = given_back

    async def putconn(self, conn: CountedConnection) -> None:
        self.given_back[conn] = time.monotonic()
        await super().putconn(conn)

    async def _get_ready_connection(self, timeout: float | None) -> CountedConnection | None:  # noqa: ASYNC109 (psycopg_pool's)
        self._pool.rotate(1)  # the last given back first: psycopg_pool takes from the left
        return await super()._get_ready_connection(timeout)


class PgDatabase:
    """The pool, the deployment's id, and each principal's transactions and reads."""

    def __init__(self, settings: PostgresSettings) -> None:
        self.settings = settings
        self._pool: WarmFirstPool | None = None
        self.round_trips = RoundTrips()  # what a test, `stats` and the benchmark read
        self._deployment = ""
        self.opened: set[str] = set()  # principals whose partitions exist
        self.vector_oid: int | None = None  # pgvector's type when the vectors are kept in it (ADR 25)
        # when each pooled connection was last given back (weak: the pool drops broken ones)
        self._last_used: weakref.WeakKeyDictionary[psycopg.AsyncConnection, float] = weakref.WeakKeyDictionary()

    async def open(self) -> None:
        parts = database.server_parts(self.settings)
        pool = WarmFirstPool(
            "",
            connection_class=CountedConnection,
            # every transaction says BEGIN itself (transactions.py); nothing is prepared (WarmFirstPool)
            kwargs=parts | {"autocommit": True, "prepare_threshold": None},
            min_size=self.settings.pool_min,
            max_size=self.settings.pool_max,
            open=False,
            check=self._check,
            configure=self._configure,
            given_back=self._last_used,
        )
        try:
            await pool.open(wait=True, timeout=15)
        except psycopg.OperationalError as exc:  # the pool's own timeout error derives from it
            await pool.close()
            raise StorageError(f"cannot open the PostgreSQL pool ({database.where(parts)}): {exc}") from exc
        self._pool = pool
        async with pool.connection() as conn:
            version, min_code = await migrations.schema_state(conn)
            if version == 0:
                raise StorageError("the PostgreSQL database has no schema: run `mcp-memory database migrate`")
            migrations.check_code(version, min_code)
            row = await (await conn.execute("SELECT id FROM deployment")).fetchone()
            self.vector_oid = conn.vector_oid
        if row is None:
            raise StorageError("the PostgreSQL database has no deployment id: run `mcp-memory database migrate`")
        self._deployment = str(row[0])

    async def _configure(self, conn: CountedConnection) -> None:
        """A new connection: pgvector's values read and written as the storage code's bytes when
        the vectors are kept in it (vector_layout.py), then its round trips counted."""
        await vector_layout.prepare(conn)
        conn.tally = self.round_trips

    async def _check(self, conn: psycopg.AsyncConnection) -> None:
        """Before a connection idle for a while is handed out, one empty query: a connection the
        server ended (a restart, a failover) is then replaced, not failed in a call. A connection in
        steady use is not checked (the check costs a round trip, about 5 ms of a recall's 30)."""
        if time.monotonic() - self._last_used.get(conn, 0.0) > IDLE_CHECK_SECONDS:
            await AsyncConnectionPool.check_connection(conn)

    async def close(self) -> None:
        if self._pool is not None:
            with anyio.CancelScope(shield=True):
                await self._pool.close()
            self._pool = None

    async def __aenter__(self) -> PgDatabase:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def pool(self) -> WarmFirstPool:
        if self._pool is None:
            raise StorageError("the PostgreSQL pool is not open")
        return self._pool

    def key(self, principal: str) -> str:
        return principal_key(self._deployment, principal)

    @asynccontextmanager
    async def transaction(self, scope: Scope, *, write: bool = True, erasing: bool = False) -> AsyncIterator[PgConn]:
        """One transaction bound to the scope's principal; committed when the block ends, rolled
        back when it raises. Inside a call of the same principal (``call``) it is the call's.

        Two advisory locks of the principal, taken with the binding as the transaction opens:
        - every transaction holds the *erase* lock shared, and forget_user (``erasing``) holds it
          alone: it truncates the principal's partitions one after another, and a reader that had
          locked one of them and waited for another would deadlock with it;
        - a writing one holds the *write* lock to its commit, so a principal's writes commit in the
          order they number the change log (a sequence hands out numbers before commit: without it,
          a reader could pass a number whose write commits later) and, as SQLite's file lock does,
          one at a time. Other principals are not held up.
        """
        call = CURRENT.get()
        try:
            if call is not None and call.serves(self, scope) and not erasing:
                async with call.block(write) as conn:
                    yield conn
                return
            async with self.pool.connection() as held:
                conn = await begin(self, held, scope, write=write, erasing=erasing)
                try:
                    yield conn
                except BaseException:
                    await finish(held, commit=False)
                    raise
                await finish(held, commit=True)
        except psycopg.OperationalError as exc:  # nothing was committed
            raise StorageError(operational_failure(exc)) from exc
        self.opened.add(self.key(scope.principal))

    @asynccontextmanager
    async def call(
        self, scope: Scope, *, write: bool = False, prefetch: Sequence[tuple[str, Sequence[Any]]] = ()
    ) -> AsyncIterator[None]:
        """One call's transaction (transactions.py): every transaction of the principal asked for
        inside the block is this one; ``write`` takes the write lock as it opens (a call that always
        writes), ``prefetch`` reads as it opens. A call inside a call of the same principal (resume's
        recall) is the outer one's."""
        outer = CURRENT.get()
        if outer is not None and outer.serves(self, scope):
            yield
            return
        try:
            async with self.pool.connection() as held:
                call = Call(self, scope, held, write=write, prefetch=prefetch)
                token = CURRENT.set(call)
                try:
                    yield
                except BaseException:
                    await call.end(commit=False)
                    raise
                finally:
                    CURRENT.reset(token)
                await call.end(commit=True)
        except psycopg.OperationalError as exc:
            raise StorageError(operational_failure(exc)) from exc

    async def reader(self, scope: Scope) -> PgReader:
        return PgReader(self, scope)


class PgReader:
    """The principal's reads: each statement in a transaction of its own."""

    def __init__(self, database: PgDatabase, scope: Scope) -> None:
        self._database = database
        self._scope = scope

    async def execute(self, statement: str, params: Sequence[Any] = ()) -> PgCursor:
        async with self._database.transaction(self._scope, write=False) as conn:
            return await conn.execute(statement, params)

    async def execute_fetchall(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return await (await self.execute(statement, params)).fetchall()

    async def read_together(self, reads: Sequence[tuple[str, Sequence[Any]]]) -> list[list[tuple[Any, ...]]]:
        async with self._database.transaction(self._scope, write=False) as conn:
            return await conn.read_together(reads)


def operational_failure(exc: psycopg.OperationalError) -> str:
    """What an operational error from PostgreSQL means to the caller, by its SQLSTATE: the server
    short of a resource or past one of its limits, a transaction it rolled back, a statement it
    cancelled, a lock it would not wait for, the server going down, or the connection lost. In each
    case nothing of the call was committed."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    state = exc.sqlstate or ""
    again = "the call did not complete: make it again"
    repeats = ", and if it repeats raise the role's"
    if state.startswith("53"):  # insufficient resources: out of memory, of shared memory (locks), disk full
        fix = "raise max_locks_per_transaction" if "shared memory" in first else "see the server's log"
        return f"PostgreSQL ran out of a resource ({first}); {again}, and if it repeats {fix}"
    if state.startswith("54"):  # program limit exceeded: a statement too complex, a row too large
        return f"PostgreSQL refused the statement as past one of its limits ({first}); the call did not complete"
    if state.startswith("40"):  # a deadlock or a serialization failure
        return f"PostgreSQL rolled the transaction back ({first}); {again}"
    if state == "57014":  # a statement timeout, or a cancel from the server's administrator
        return f"PostgreSQL cancelled the statement ({first}); {again}{repeats} statement_timeout"
    if state == "55P03":  # lock_timeout, or NOWAIT
        return f"PostgreSQL would not wait longer for a lock ({first}); {again}{repeats} lock_timeout"
    if state in {"57P01", "57P02", "57P03"}:  # shut down by its administrator, crashed, not yet accepting
        return f"the PostgreSQL server is shutting down or starting ({first}); {again} in a moment"
    if state.startswith("58"):  # an I/O error of the server
        return f"the PostgreSQL server failed ({first}); {again}, and if it repeats see the server's log"
    return f"the PostgreSQL connection failed ({first}); {again}"
