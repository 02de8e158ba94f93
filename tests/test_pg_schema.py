"""The PostgreSQL schema on a throwaway cluster (tests/pgcluster.py): migrations, and row-level
security as the second wall behind the queries' own filters (issue 16, ADR 19).

These tests hold the backend's foundation to what ADR 19 promises.
"""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import anyio
import psycopg
import pytest

from mcp_memory.core.errors import SchemaVersionError
from mcp_memory.storage.pg import migrations
from tests import pgcluster

pytestmark = pytest.mark.anyio

ALICE = hashlib.sha256(b"alice").hexdigest()[:32]
BOB = hashlib.sha256(b"bob").hexdigest()[:32]
CANARY = "canary-7f3a-the-passport-ends-in-4471"


@pytest.fixture
async def schema(pg_empty: pgcluster.Cluster) -> pgcluster.Cluster:
    """The schema migrated afresh."""
    cluster = pg_empty
    async with await psycopg.AsyncConnection.connect(cluster.dsn(pgcluster.OWNER), autocommit=True) as owner:
        assert await migrations.migrate(owner, pgcluster.SERVER) == migrations.SCHEMA_VERSION
    return cluster


async def _server(cluster: pgcluster.Cluster) -> psycopg.AsyncConnection:
    return await psycopg.AsyncConnection.connect(cluster.dsn(pgcluster.SERVER))


async def _as(conn: psycopg.AsyncConnection, key: str, statement: str, params: tuple[str, ...] = ()) -> None:
    """One statement in a transaction bound to principal ``key``."""
    async with conn.transaction():
        await migrations.as_principal(conn, key)
        await conn.execute(statement, params)


async def _remember(conn: psycopg.AsyncConnection, key: str, text: str) -> None:
    """One memory of principal ``key``, in a transaction bound to it (as the backend will write)."""
    async with conn.transaction():
        await migrations.as_principal(conn, key)
        await conn.execute("SELECT mcp_open_principal(%s, %s)", (key, "someone"))
        await conn.execute(
            "INSERT INTO memories (principal, id, kind, content, importance, occurred_at, created_at, valid_from, "
            "language, content_hash) VALUES (%s, %s, 'fact', %s, 0.5, 0, 0, 0, 'en', %s)",
            (key, hashlib.sha256(text.encode()).hexdigest()[:26], text, hashlib.sha256(text.encode()).hexdigest()),
        )


async def test_a_query_that_forgot_its_principal_sees_only_the_bound_one(schema: pgcluster.Cluster) -> None:
    async with await _server(schema) as conn:
        await _remember(conn, ALICE, "Alice prefers window seats")
        await _remember(conn, BOB, "Bob prefers aisle seats")
        async with conn.transaction():
            await migrations.as_principal(conn, ALICE)
            rows = await (await conn.execute("SELECT content FROM memories")).fetchall()  # no WHERE at all
            assert rows == [("Alice prefers window seats",)]
        async with conn.transaction():  # bound to nobody: nothing
            assert await (await conn.execute("SELECT count(*) FROM memories")).fetchone() == (0,)


async def test_a_write_for_another_principal_is_refused(schema: pgcluster.Cluster) -> None:
    async with await _server(schema) as conn:
        await _remember(conn, BOB, "Bob prefers aisle seats")
        planted = (
            "INSERT INTO memories (principal, id, kind, content, importance, occurred_at, created_at, "
            "valid_from, language, content_hash) VALUES (%s, 'x', 'fact', 'planted', 0.5, 0, 0, 0, 'en', 'h')"
        )
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            await _as(conn, ALICE, planted, (BOB,))
        with pytest.raises(psycopg.errors.RaiseException, match="own principal"):
            await _as(conn, ALICE, "SELECT mcp_drop_principal(%s)", (BOB,))
        async with conn.transaction():  # a partition named outright is walled as the parent is
            await migrations.as_principal(conn, ALICE)
            assert await (await conn.execute(f"SELECT count(*) FROM memories_{BOB}")).fetchone() == (0,)
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            await _as(conn, ALICE, planted.replace("INTO memories ", f"INTO memories_{BOB} "), (BOB,))
        with pytest.raises(psycopg.errors.CheckViolation, match="partition constraint"):  # the default is Alice
            await _as(conn, ALICE, f"INSERT INTO meta_{BOB} (key, value) VALUES ('k', 'v')")


async def test_dropping_a_principal_leaves_none_of_its_text_in_the_cluster_files(schema: pgcluster.Cluster) -> None:
    async with await _server(schema) as conn:
        await _remember(conn, ALICE, f"Alice's note {CANARY}")
        await _remember(conn, BOB, "Bob prefers aisle seats")
    pgcluster.psql(schema, "CHECKPOINT")
    assert _holding(schema.data / "base", CANARY), "the canary reached the table files"
    async with await _server(schema) as conn, conn.transaction():
        await migrations.as_principal(conn, ALICE)
        await conn.execute("SELECT mcp_drop_principal(%s)", (ALICE,))
    pgcluster.psql(schema, "CHECKPOINT")
    assert _holding(schema.data / "base", CANARY) == []  # the WAL (pg_wal) still has it until recycled
    async with await _server(schema) as conn, conn.transaction():
        await migrations.as_principal(conn, BOB)
        assert await (await conn.execute("SELECT content FROM memories")).fetchall() == [("Bob prefers aisle seats",)]


def _holding(folder: Path, text: str) -> list[Path]:
    needle = text.encode()
    return [p for p in folder.rglob("*") if p.is_file() and needle in p.read_bytes()]


async def test_the_server_role_is_checked_and_a_newer_schema_refused(schema: pgcluster.Cluster) -> None:
    async with await _server(schema) as conn:
        assert await migrations.role_problems(conn) == []
    async with await psycopg.AsyncConnection.connect(schema.dsn("postgres")) as superuser:
        problems = await migrations.role_problems(superuser)
        assert any("superuser" in p for p in problems), problems
    pgcluster.psql(schema, "UPDATE schema_version SET version = 99, min_code = 99", user=pgcluster.OWNER)
    async with await psycopg.AsyncConnection.connect(schema.dsn(pgcluster.OWNER), autocommit=True) as owner:
        with pytest.raises(SchemaVersionError, match="upgrade mcp-memory"):
            await migrations.migrate(owner, pgcluster.SERVER)


async def test_every_per_principal_table_has_the_wall_and_the_server_owns_none(schema: pgcluster.Cluster) -> None:
    async with await _server(schema) as conn:
        row = await (await conn.execute("SELECT mcp_principal_tables()")).fetchone()
        assert row is not None
        tables = row[0]
        assert {"memories", "postings", "vectors", "changes", "tasks", "checkpoints", "memory_events"} <= set(tables)
        rows = await (
            await conn.execute(
                "SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity, pg_get_userbyid(c.relowner), "
                "EXISTS (SELECT 1 FROM pg_policy p WHERE p.polrelid = c.oid AND p.polname = 'own_principal') "
                "FROM pg_class c WHERE c.relname = ANY(%s) AND c.relnamespace = 'public'::regnamespace",
                (tables,),
            )
        ).fetchall()
    assert sorted(r[0] for r in rows) == sorted(tables)
    for name, enabled, forced, owner, policy in rows:
        assert (enabled, forced, policy) == (True, True, True), name
        assert owner == pgcluster.OWNER, name


async def test_a_new_principal_and_a_forget_do_not_wait_for_another_principals_transaction(
    schema: pgcluster.Cluster,
) -> None:
    """Partitions are attached and emptied without taking the parent tables whole: a transaction
    left open by one principal holds up neither another's first write nor another's erasure. Its
    queries name their principal, as the store's do, so the planner locks only that partition."""
    carol = hashlib.sha256(b"carol").hexdigest()[:32]
    async with await _server(schema) as busy, await _server(schema) as other:
        await _remember(busy, ALICE, "Alice prefers window seats")
        await _remember(other, BOB, "Bob prefers aisle seats")
        async with busy.transaction():  # open, reading and writing, for the whole check
            await migrations.as_principal(busy, ALICE)
            await busy.execute("SELECT count(*) FROM memories WHERE principal = %s", (ALICE,))
            await busy.execute("UPDATE memories SET access_count = access_count + 1 WHERE principal = %s", (ALICE,))
            await other.execute("SET lock_timeout = '2s'")
            await _remember(other, carol, "Carol prefers the front row")
            await _as(other, BOB, "SELECT mcp_drop_principal(%s)", (BOB,))
        async with other.transaction():
            await migrations.as_principal(other, carol)
            assert await (await other.execute("SELECT content FROM memories")).fetchall() == [
                ("Carol prefers the front row",)
            ]
        async with other.transaction():
            await migrations.as_principal(other, BOB)
            assert await (await other.execute("SELECT count(*) FROM memories")).fetchone() == (0,)
        await _remember(other, BOB, "Bob is back")  # a forgotten principal starts again, empty


async def test_a_second_opener_waiting_for_the_first_changes_nothing_and_deadlocks_with_no_one(
    schema: pgcluster.Cluster,
) -> None:
    """Two replicas open a new principal at once; a third transaction of that principal is already
    reading its partitions when the second opener gets its turn (a review's reproduction)."""
    key = hashlib.sha256(b"dora").hexdigest()[:32]
    with anyio.fail_after(20):  # a deadlock fails the test rather than hanging it
        await _second_opener(schema, key)


async def _second_opener(schema: pgcluster.Cluster, key: str) -> None:
    async with await _server(schema) as first, await _server(schema) as second, await _server(schema) as reader:
        for conn in (first, second, reader):
            await migrations.as_principal(conn, key)
        await first.execute("SELECT mcp_open_principal(%s, 'dora')", (key,))  # not committed yet
        waiting = asyncio.create_task(second.execute("SELECT mcp_open_principal(%s, 'dora')", (key,)))
        await asyncio.sleep(0.3)
        await first.commit()
        await migrations.as_principal(reader, key)
        await reader.execute(f"SELECT count(*) FROM memories_{key}")
        await asyncio.sleep(0.3)
        await reader.execute(f"SELECT count(*) FROM meta_{key}")  # deadlocked here before
        await waiting
        await second.commit()
        await reader.commit()


async def test_the_server_role_holds_the_least_it_needs(schema: pgcluster.Cluster) -> None:
    """What a leaked server credential can do, held to the list ADR 22 gives: read and write rows
    (each principal's behind the wall, once it names the principal), nothing of the schema itself."""
    async with await _server(schema) as conn:
        await _remember(conn, ALICE, "a first memory, so a principal's partitions exist")
        role = await (
            await conn.execute(
                "SELECT rolsuper, rolbypassrls, rolcreaterole, rolcreatedb, rolreplication FROM pg_roles "
                "WHERE rolname = current_user"
            )
        ).fetchone()
        assert role == (False, False, False, False, False)
        database = await (
            await conn.execute(
                "SELECT has_database_privilege(current_database(), 'CREATE'), "
                "has_database_privilege(current_database(), 'TEMPORARY'), "
                "has_schema_privilege('public', 'CREATE')"
            )
        ).fetchone()
        assert database == (False, False, False)
        tables = await (
            await conn.execute(
                "SELECT c.relname, pg_get_userbyid(c.relowner), "
                "has_table_privilege(c.oid, 'SELECT'), has_table_privilege(c.oid, 'INSERT'), "
                "has_table_privilege(c.oid, 'TRUNCATE'), has_table_privilege(c.oid, 'REFERENCES'), "
                "has_table_privilege(c.oid, 'TRIGGER') "
                "FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p')"
            )
        ).fetchall()
        functions = await (
            await conn.execute(
                "SELECT p.proname FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace "
                "AND p.prosecdef AND has_function_privilege(p.oid, 'EXECUTE')"
            )
        ).fetchall()
    read_only = {"deployment", "principals", "schema_version"}
    assert {name for name, *_ in tables} >= read_only | {f"memories_{ALICE}"}
    for name, owner, select, insert, truncate, references, trigger in tables:
        assert owner == pgcluster.OWNER, name
        assert select, name  # everything it may read, it reads through the wall
        assert insert == (name not in read_only), name
        assert (truncate, references, trigger) == (False, False, False), name
    # the owner's doors, each for the transaction's own principal only: its partitions made and
    # emptied, and with pgvector (ADR 25) the HNSW index of its vectors built
    doors = {"mcp_drop_principal", "mcp_open_principal"}
    assert doors <= {name for (name,) in functions} <= doors | {"mcp_vector_index"}


async def test_a_vector_carries_its_memorys_script_whichever_is_written_first(schema: pgcluster.Cluster) -> None:
    """Schema 5: `vectors.cjk`, which the per-script HNSW indexes are partial on (ADR 25), follows
    the memory's language: written after its memory, before it (a move between backends copies
    tables in its own order), and when the language changes."""
    memory = (
        "INSERT INTO memories (principal, n, id, kind, content, importance, occurred_at, created_at, valid_from, "
        "language, content_hash) VALUES (%s, %s, %s, 'fact', 'text', 0.5, 0, 0, 0, %s, %s)"
    )
    async with await _server(schema) as conn:
        await _remember(conn, ALICE, "a first memory, so the principal's partitions exist")
        async with conn.transaction():
            await migrations.as_principal(conn, ALICE)
            await conn.execute("INSERT INTO vectors (memory_n, vec) VALUES (101, '[1,0,0]')")  # before its memory
            for n, language in ((101, "zh"), (102, "en"), (103, "ja")):
                await conn.execute(memory, (ALICE, n, f"m{n}", language, f"h{n}"))
            await conn.execute("INSERT INTO vectors (memory_n, vec) VALUES (102, '[0,1,0]'), (103, '[0,0,1]')")
            read = "SELECT memory_n, cjk FROM vectors WHERE memory_n > 100 ORDER BY memory_n"
            assert await (await conn.execute(read)).fetchall() == [(101, True), (102, False), (103, True)]
            await conn.execute("UPDATE memories SET language = 'en' WHERE n = 103")
            await conn.execute("UPDATE memories SET language = 'ko' WHERE n = 102")
            assert await (await conn.execute(read)).fetchall() == [(101, True), (102, True), (103, False)]


async def test_a_vector_carries_its_memorys_visibility_after_the_migration_and_whichever_is_written_first(
    pg_empty: pgcluster.Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Schema 7: the figures the pgvector search filters on (ADR 25, sixth pass) follow the memory:
    filled by the migration for the vectors written before it, taken by a vector written after its
    memory or before it (a move between backends copies tables in its own order), and moved when
    the memory's namespace, tier, supersession or expiry changes."""
    memory = (
        "INSERT INTO memories (principal, n, id, kind, content, importance, occurred_at, created_at, valid_from, "
        "language, content_hash, namespace, tier, superseded_by, expires_at) "
        "VALUES (%s, %s, %s, 'fact', 'text', 0.5, 0, 0, 0, 'en', %s, %s, %s, %s, %s)"
    )
    figures = [  # (n, namespace, tier, superseded_by, expires_at)
        (201, None, "active", None, None),
        (202, "work", "active", None, None),
        (203, None, "archived", None, None),
        (204, None, "active", "m201", None),
        (205, "home", "active", None, 1234.5),
    ]
    expected = [(n, ns, tier == "active" and by is None, exp) for n, ns, tier, by, exp in figures]
    read = "SELECT memory_n, namespace, live, expires_at FROM vectors WHERE memory_n > 200 ORDER BY memory_n"

    async def write(conn: psycopg.AsyncConnection, vectors_first: bool) -> None:
        async with conn.transaction():
            await migrations.as_principal(conn, ALICE)
            vectors = "INSERT INTO vectors (memory_n, vec) VALUES " + ", ".join(f"({f[0]}, '[1,0,0]')" for f in figures)
            if vectors_first:
                await conn.execute(vectors)
            for n, ns, tier, by, exp in figures:
                await conn.execute(memory, (ALICE, n, f"m{n}", f"h{n}", ns, tier, by, exp))
            if not vectors_first:
                await conn.execute(vectors)

    monkeypatch.setattr(migrations, "SCHEMA_VERSION", 6)
    async with await psycopg.AsyncConnection.connect(pg_empty.dsn(pgcluster.OWNER), autocommit=True) as owner:
        await migrations.migrate(owner, pgcluster.SERVER)
        monkeypatch.undo()
        async with await _server(pg_empty) as conn:
            await _remember(conn, ALICE, "a first memory, so the principal's partitions exist")
            await write(conn, vectors_first=False)  # under schema 6: the vectors carry nothing yet
        assert await migrations.migrate(owner, pgcluster.SERVER) == 7
    async with await _server(pg_empty) as conn:
        async with conn.transaction():
            await migrations.as_principal(conn, ALICE)
            assert await (await conn.execute(read)).fetchall() == expected
            await conn.execute("DELETE FROM vectors WHERE memory_n > 200")
            await conn.execute("DELETE FROM memories WHERE n > 200")
        for vectors_first in (True, False):
            await write(conn, vectors_first)
            async with conn.transaction():
                await migrations.as_principal(conn, ALICE)
                assert await (await conn.execute(read)).fetchall() == expected, vectors_first
                await conn.execute("DELETE FROM vectors WHERE memory_n > 200")
                await conn.execute("DELETE FROM memories WHERE n > 200")
        await write(conn, vectors_first=False)
        async with conn.transaction():
            await migrations.as_principal(conn, ALICE)
            await conn.execute("UPDATE memories SET namespace = 'work', expires_at = 99.0 WHERE n = 201")
            await conn.execute("UPDATE memories SET tier = 'active' WHERE n = 203")
            await conn.execute("UPDATE memories SET superseded_by = NULL WHERE n = 204")
            await conn.execute(
                "UPDATE memories SET tier = 'archived', namespace = NULL, expires_at = NULL WHERE n = 205"
            )
            await conn.execute(
                "UPDATE memories SET importance = 0.9, access_count = 3 WHERE n = 202"
            )  # no figure moves
            assert await (await conn.execute(read)).fetchall() == [
                (201, "work", True, 99.0),
                (202, "work", True, None),
                (203, None, True, None),
                (204, None, True, None),
                (205, None, False, None),
            ]


async def test_a_vector_finds_its_memory_by_key_however_small_the_partition_was_when_the_session_began(
    schema: pgcluster.Cluster,
) -> None:
    """Schema 6: the script trigger's look-up of a vector's memory is planned for the partition as it
    is. A session that wrote its first vectors into a nearly empty partition kept PL/pgSQL's generic
    plan made then, which read every memory of the partition for each vector (through an index on the
    principal alone): filling 10,000 memories spent 15 s in the trigger."""
    memories = (
        "INSERT INTO memories (principal, n, id, kind, content, importance, occurred_at, created_at, valid_from, "
        "language, content_hash) SELECT %s, n, 'm' || n, 'fact', 'text', 0.5, n, 0, 0, 'en', 'h' || n "
        "FROM generate_series(%s::bigint, %s::bigint) n"
    )
    vectors = "INSERT INTO vectors (memory_n, vec) SELECT n, '[1,0,0]' FROM generate_series(%s::bigint, %s::bigint) n"
    read = "SELECT coalesce(idx_tup_fetch, 0) + seq_tup_read FROM pg_stat_xact_user_tables WHERE relname = %s"
    async with await _server(schema) as conn:
        await _remember(conn, ALICE, "a first memory, so the principal's partitions exist")
        async with conn.transaction():
            await migrations.as_principal(conn, ALICE)
            for n in range(101, 111):  # a vector at a time, past the five runs that settle a plan
                await conn.execute(memories, (ALICE, n, n))
                await conn.execute(vectors, (n, n))
            await conn.execute(memories, (ALICE, 1_001, 3_000))
            [(before,)] = await (await conn.execute(read, (f"memories_{ALICE}",))).fetchall()
            await conn.execute(vectors, (1_001, 3_000))
            [(after,)] = await (await conn.execute(read, (f"memories_{ALICE}",))).fetchall()
    assert after - before <= 2 * 2_000  # one memory read per vector; the kept plan read about 2,000,000


@pytest.mark.pg_variant("pgvector")
async def test_a_partitions_graphs_being_built_by_one_replica_are_not_built_again_by_another(
    schema: pgcluster.Cluster,
) -> None:
    """mcp_vector_index (ADR 25) while another transaction builds the same partition's graphs returns
    at once without them: a second build beside the first would cost the same again and then wait
    for the first's commit, to fail on the index's name."""
    index = f"vectors_{ALICE}_hnsw_3_cjk"
    async with await _server(schema) as first, await _server(schema) as second:
        await _remember(first, ALICE, "a first memory, so the principal's partitions exist")
        async with first.transaction():
            await migrations.as_principal(first, ALICE)
            await first.execute("SELECT mcp_vector_index(%s, 3)", (ALICE,))  # built, not yet committed
            async with second.transaction():
                await migrations.as_principal(second, ALICE)
                with anyio.fail_after(10):
                    await second.execute("SELECT mcp_vector_index(%s, 3)", (ALICE,))
                made = await (await second.execute("SELECT to_regclass(%s)", (index,))).fetchone()
                assert made == (None,)
        async with second.transaction():
            await migrations.as_principal(second, ALICE)
            made = await (await second.execute("SELECT to_regclass(%s)::text", (index,))).fetchone()
            assert made == (index,)


@pytest.mark.pg_variant("pgvector")
async def test_a_partitions_graph_is_built_in_memory_whatever_the_sessions_maintenance_work_mem(
    schema: pgcluster.Cluster,
) -> None:
    """mcp_vector_index sizes maintenance_work_mem for the graph it builds: one that no longer fits
    is built on disk, tuple by tuple (60,000 vectors of 384 dimensions took twice as long)."""
    memories = (
        "INSERT INTO memories (principal, n, id, kind, content, importance, occurred_at, created_at, valid_from, "
        "language, content_hash) SELECT %s, n, 'm' || n, 'fact', 'text', 0.5, n, 0, 0, 'en', 'h' || n "
        "FROM generate_series(1001, 6000) n"
    )
    vectors = (
        "INSERT INTO vectors (memory_n, vec) SELECT n, format('[%s,%s,%s]', random(), random(), random())::vector "
        "FROM generate_series(1001, 6000) n"
    )
    notices: list[str] = []
    async with await _server(schema) as conn:
        await _remember(conn, ALICE, "a first memory, so the principal's partitions exist")
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        async with conn.transaction():
            await migrations.as_principal(conn, ALICE)
            await conn.execute(memories, (ALICE,))
            await conn.execute(vectors)
            await conn.execute("SET LOCAL maintenance_work_mem = '1MB'")  # the least PostgreSQL takes
            await conn.execute("SELECT mcp_vector_index(%s, 3)", (ALICE,))
            graphs = await (
                await conn.execute("SELECT to_regclass(%s)::text", (f"vectors_{ALICE}_hnsw_3_cjk",))
            ).fetchone()
            left = await (await conn.execute("SELECT current_setting('maintenance_work_mem')")).fetchone()
    assert graphs == (f"vectors_{ALICE}_hnsw_3_cjk",)
    assert not [n for n in notices if "maintenance_work_mem" in n]
    assert left == ("1MB",)  # the session's own setting is the session's again after the build
