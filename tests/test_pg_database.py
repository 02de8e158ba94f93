"""`[storage]` settings, `mcp-memory database migrate | status` and `doctor` on the PostgreSQL backend,
against a throwaway cluster (tests/pgcluster.py) (issue 16, ADR 19)."""

from __future__ import annotations

import stat
from pathlib import Path

import anyio
import psycopg
import pytest

from mcp_memory.cli.command import main
from mcp_memory.compose import open_runtime
from mcp_memory.config import PostgresSettings, load_settings
from mcp_memory.core.errors import InvalidInputError, StorageError
from mcp_memory.core.models import MemoryDraft, Scope
from mcp_memory.mcp.wire_recall import hit_tokens
from mcp_memory.services.memory import CallContext
from mcp_memory.storage.pg import migrations
from mcp_memory.storage.pg.connections import PgDatabase
from tests import pgcluster


@pytest.fixture
def empty(pg_empty: pgcluster.Cluster, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pgcluster.Cluster:
    """A new, empty database, and the environment a team's server would have for it."""
    cluster = pg_empty
    monkeypatch.setenv("MCP_MEMORY_STORAGE__BACKEND", "postgres")
    monkeypatch.setenv("MCP_MEMORY_STORAGE__POSTGRES__DSN", cluster.dsn())
    monkeypatch.setenv("MCP_MEMORY_PG_OWNER_DSN", cluster.dsn(pgcluster.OWNER))
    monkeypatch.setenv("MCP_MEMORY_DATA_DIR", str(tmp_path / "data"))
    return cluster


def test_migrate_then_status_as_the_server_role(empty: pgcluster.Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["database", "status"]) == 1
    out = capsys.readouterr().out
    assert "database schema: PROBLEM: empty: run `mcp-memory database migrate`" in out
    assert "database role: bound by row-level security" in out

    assert main(["database", "migrate"]) == 0
    assert f"migrated from version 0 to version {migrations.SCHEMA_VERSION}" in capsys.readouterr().out
    assert main(["database", "migrate"]) == 0
    assert f"already at version {migrations.SCHEMA_VERSION}" in capsys.readouterr().out

    assert main(["database", "status"]) == 0
    out = capsys.readouterr().out
    assert ("database: PostgreSQL 18." if empty.variant == "pgvector" else "database: PostgreSQL 15.") in out
    assert f"database schema: version {migrations.SCHEMA_VERSION}, every table present" in out
    engine = "pgvector: the vectors are searched in PostgreSQL" if empty.variant == "pgvector" else "in-process"
    assert f"vector engine: {engine}" in out
    assert "PROBLEM" not in out


def test_a_superuser_dsn_and_a_missing_table_are_problems(
    empty: pgcluster.Cluster, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["database", "migrate"]) == 0
    pgcluster.psql(empty, "ALTER TABLE leases RENAME TO leases_gone", user=pgcluster.OWNER)
    assert main(["database", "status"]) == 1
    assert "tables are missing: leases" in capsys.readouterr().out
    monkeypatch.setenv("MCP_MEMORY_STORAGE__POSTGRES__DSN", empty.dsn("postgres"))
    assert main(["database", "status"]) == 1
    out = capsys.readouterr().out
    assert "database role: PROBLEM: role 'postgres' is a superuser, which row-level security does not bind" in out


def test_doctor_checks_the_database_then_the_store_on_it(
    empty: pgcluster.Cluster, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["doctor"]) == 1  # not migrated: the database line and the store say what to run
    out = capsys.readouterr().out
    assert "database schema: PROBLEM: empty: run `mcp-memory database migrate`" in out
    assert "store: FAILED: the PostgreSQL database has no schema: run `mcp-memory database migrate`" in out
    assert main(["database", "migrate"]) == 0
    capsys.readouterr()
    monkeypatch.setenv("MCP_MEMORY_PG_PASSWORD", "server-secret-51")  # loopback trusts: unused, never shown
    monkeypatch.setenv("MCP_MEMORY_PG_OWNER_DSN", empty.dsn(pgcluster.OWNER).replace("@", ":owner-secret-52@"))
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "secret-5" not in out
    assert f"database schema: version {migrations.SCHEMA_VERSION}, every table present" in out
    assert "embedding model:" in out
    assert "'postings': 0" in out  # the store's counts, read from PostgreSQL
    assert out.rstrip().endswith("status: OK")

    # The Qdrant engine beside it (ADR 18, ADR 19): doctor counts the points against the memories.
    monkeypatch.setenv("MCP_MEMORY_VECTORS__ENGINE", "qdrant")
    monkeypatch.setenv("MCP_MEMORY_VECTORS__QDRANT__PATH", str(tmp_path / "qdrant"))

    async def serve() -> None:
        settings = load_settings()
        async with open_runtime(settings, hit_cost=hit_tokens) as core:
            await core.memory.remember(
                Scope(settings.principal), [MemoryDraft(content="The user lives in Oslo")], CallContext()
            )

    anyio.run(serve)
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert ": 1 points for 1 memories, in step" in out
    assert out.rstrip().endswith("status: OK")


def test_unreachable_and_unmigrated_say_what_to_do(
    empty: pgcluster.Cluster, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MCP_MEMORY_STORAGE__POSTGRES__DSN", f"postgresql://mcp_server@127.0.0.1:{_closed_port()}/mcp")
    monkeypatch.setenv("MCP_MEMORY_PG_PASSWORD", "hunter2-not-logged")
    assert main(["database", "status"]) == 1
    out = capsys.readouterr().out
    assert "database: PROBLEM: cannot connect to PostgreSQL at 127.0.0.1:" in out
    assert "hunter2" not in out
    monkeypatch.delenv("MCP_MEMORY_PG_OWNER_DSN")
    assert main(["database", "migrate"]) == 2
    assert "MCP_MEMORY_PG_OWNER_DSN" in capsys.readouterr().err


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_storage_settings_refuse_a_password_in_the_file_and_a_backend_without_a_dsn() -> None:
    with pytest.raises(InvalidInputError, match="password_env") as refused:
        load_settings(storage={"postgres": {"dsn": "postgresql://mcp_server:s3cret@db/mcp"}})
    assert "s3cret" not in str(refused.value)
    for spelled in ("password=s3cret", "password = s3cret", "PASSWORD ='s3cret'"):
        with pytest.raises(InvalidInputError, match="password_env"):
            load_settings(storage={"postgres": {"dsn": f"host=db user=mcp_server {spelled} dbname=mcp"}})
    with pytest.raises(InvalidInputError, match=r"needs storage\.postgres\.dsn"):
        load_settings(storage={"backend": "postgres"})
    with pytest.raises(InvalidInputError, match="pool_min is larger than pool_max"):
        load_settings(storage={"postgres": {"pool_min": 5, "pool_max": 2}})
    fine = load_settings(storage={"postgres": {"dsn": "postgresql://mcp_server@db:5432/mcp?sslmode=require"}})
    assert fine.storage.backend == "sqlite"


def test_a_replica_s_loose_data_directory_is_made_owner_only(
    empty: pgcluster.Cluster, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL the data directory holds only the replica's own files (its log), and they are
    kept owner-only as on SQLite: doctor names a loose one, opening fixes it."""
    assert main(["database", "migrate"]) == 0
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    data.chmod(0o755)
    log = data / "server.log"
    log.write_text("a replica's log\n")
    log.chmod(0o644)
    monkeypatch.setenv("MCP_MEMORY_LOG_FILE", str(log))  # the log the settings name is ours
    capsys.readouterr()
    assert main(["doctor"]) == 1  # other users could read it until now: a problem, though fixed
    assert "permissions: now owner-only" in capsys.readouterr().out
    assert (stat.S_IMODE(data.stat().st_mode), stat.S_IMODE(log.stat().st_mode)) == (0o700, 0o600)
    assert main(["doctor"]) == 0
    assert f"permissions: mcp-memory's files in {data} are owner-only" in capsys.readouterr().out


@pytest.mark.anyio
async def test_a_deadlock_is_reported_as_a_rollback_not_as_a_lost_connection(pg_empty: pgcluster.Cluster) -> None:
    """Two principals' transactions that lock in opposite orders: PostgreSQL kills one with a
    deadlock (SQLSTATE 40P01, an OperationalError to psycopg), which is no connection failure."""
    async with await psycopg.AsyncConnection.connect(pg_empty.dsn(pgcluster.OWNER), autocommit=True) as owner:
        await migrations.migrate(owner, pgcluster.SERVER)
    failures: list[str] = []
    both = [anyio.Event(), anyio.Event()]

    async def lock(db: PgDatabase, who: int, first: int, second: int) -> None:
        try:
            async with db.transaction(Scope(f"p{who}"), write=False) as conn:
                await conn.conn.execute("SELECT pg_advisory_xact_lock(%s)", (first,))
                both[who].set()
                await both[1 - who].wait()
                await conn.conn.execute("SELECT pg_advisory_xact_lock(%s)", (second,))
        except StorageError as exc:
            failures.append(str(exc))

    async with PgDatabase(PostgresSettings(dsn=pg_empty.dsn(), pool_max=4)) as db:
        for who in (0, 1):  # each principal's partitions made first: making them locks the parents
            async with db.transaction(Scope(f"p{who}"), write=False):
                pass
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(lock, db, 0, 91, 92)
                tg.start_soon(lock, db, 1, 92, 91)
    assert len(failures) == 1, failures
    assert failures[0].startswith("PostgreSQL rolled the transaction back (deadlock detected")
    assert "make it again" in failures[0]
    assert "connection failed" not in failures[0]


@pytest.mark.anyio
async def test_a_statement_timeout_is_reported_as_a_cancel_not_as_a_lost_connection(
    pg_empty: pgcluster.Cluster,
) -> None:
    async with await psycopg.AsyncConnection.connect(pg_empty.dsn(pgcluster.OWNER), autocommit=True) as owner:
        await migrations.migrate(owner, pgcluster.SERVER)
    async with PgDatabase(PostgresSettings(dsn=pg_empty.dsn(), pool_max=2)) as db:

        async def slow() -> None:
            async with db.transaction(Scope("p0"), write=False) as conn:
                await conn.conn.execute("SET LOCAL statement_timeout = 50")
                await conn.conn.execute("SELECT pg_sleep(2)")

        with pytest.raises(StorageError) as raised:
            await slow()
        message = str(raised.value)
        assert message.startswith("PostgreSQL cancelled the statement (canceling statement due to statement timeout")
        assert "statement_timeout" in message
        async with db.transaction(Scope("p0"), write=False) as conn:  # the pool carries on
            assert await (await conn.conn.execute("SELECT 1")).fetchone() == (1,)


@pytest.mark.anyio
async def test_a_full_lock_table_and_a_lock_timeout_are_named_as_such(pg_empty: pgcluster.Cluster) -> None:
    """Two of the server's own limits reached for real: the shared lock table filled by one
    transaction (PostgreSQL's "out of shared memory", SQLSTATE 53200), and a lock waited for past
    lock_timeout (55P03). Neither is a lost connection, and the pool serves on after each."""
    async with await psycopg.AsyncConnection.connect(pg_empty.dsn(pgcluster.OWNER), autocommit=True) as owner:
        await migrations.migrate(owner, pgcluster.SERVER)
    async with PgDatabase(PostgresSettings(dsn=pg_empty.dsn(), pool_max=2)) as db:
        for who in ("p0", "p1"):  # partitions made first: two principals' first transactions queue on the parents
            async with db.transaction(Scope(who), write=False):
                pass

        async def flood() -> None:
            async with db.transaction(Scope("p0"), write=False) as conn:
                await conn.conn.execute("SELECT count(pg_advisory_xact_lock(n)) FROM generate_series(1, 1000000) AS n")

        with pytest.raises(StorageError) as raised:
            await flood()
        message = str(raised.value)
        assert message.startswith("PostgreSQL ran out of a resource (out of shared memory"), message
        assert "raise max_locks_per_transaction" in message
        assert "connection failed" not in message

        held = anyio.Event()
        release = anyio.Event()

        async def holder() -> None:
            async with db.transaction(Scope("p1"), write=False) as conn:
                await conn.conn.execute("SELECT pg_advisory_xact_lock(-7)")
                held.set()
                await release.wait()

        async def waiter() -> None:
            async with db.transaction(Scope("p0"), write=False) as conn:
                await conn.conn.execute("SET LOCAL lock_timeout = 100")
                await conn.conn.execute("SELECT pg_advisory_xact_lock(-7)")

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(holder)
                await held.wait()
                with pytest.raises(StorageError) as raised:
                    await waiter()
                release.set()
        message = str(raised.value)
        assert message.startswith(
            "PostgreSQL would not wait longer for a lock (canceling statement due to lock timeout"
        )
        assert "lock_timeout" in message
        assert "make it again" in message
        async with db.transaction(Scope("p0"), write=False) as conn:
            assert await (await conn.conn.execute("SELECT 1")).fetchone() == (1,)
