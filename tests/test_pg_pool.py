"""The pool of a replica's PostgreSQL connections (storage/pg/connections.py, ADR 29): it hands out
the connection given back last, so a replica serving one call at a time keeps one server process
warm with the principal's partitions, and it prepares no statement, since each names one
principal's partitions and would be planned afresh anyway, then evicted with a round trip."""

from __future__ import annotations

from collections.abc import AsyncIterator

import psycopg
import pytest

from mcp_memory.config import PostgresSettings
from mcp_memory.core.models import Scope
from mcp_memory.storage.pg.connections import PgDatabase
from tests import pgcluster

pytestmark = pytest.mark.anyio


@pytest.fixture
async def database(migrated: pgcluster.Cluster) -> AsyncIterator[PgDatabase]:
    async with PgDatabase(PostgresSettings(dsn=migrated.dsn(), pool_min=3, pool_max=3)) as db:
        yield db


async def _pid(conn: psycopg.AsyncConnection) -> int:
    row = await (await conn.execute("SELECT pg_backend_pid()")).fetchone()
    assert row is not None
    return int(row[0])


async def test_the_pool_hands_out_the_connection_given_back_last(database: PgDatabase) -> None:
    async with database.pool.connection() as first, database.pool.connection() as second:
        given_back_first, given_back_last = await _pid(second), await _pid(first)  # second leaves the block first
    for _ in range(5):  # one call at a time: always the same server process, never the one idle longest
        async with database.pool.connection() as conn:
            assert await _pid(conn) == given_back_last
    async with database.pool.connection() as a, database.pool.connection() as b:
        assert {await _pid(a), await _pid(b)} == {given_back_last, given_back_first}


async def test_a_principal_s_statements_are_not_prepared_on_the_pool_s_connections(
    migrated: pgcluster.Cluster,
) -> None:
    alice = Scope("alice")
    async with PgDatabase(PostgresSettings(dsn=migrated.dsn(), pool_min=1, pool_max=1)) as database:
        for _ in range(8):  # past psycopg's threshold of five runs, on the one connection
            async with database.transaction(alice, write=False) as conn:
                await conn.execute_fetchall("SELECT count(*) FROM memories WHERE tier = ?", ["active"])
        async with database.pool.connection() as conn:
            row = await (await conn.execute("SELECT count(*) FROM pg_prepared_statements")).fetchone()
    assert row == (0,)
