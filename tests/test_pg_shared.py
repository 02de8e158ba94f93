"""What replicas share lives in PostgreSQL (ADR 19): tokens, pass leases and records, the switch
state, the LLM ledger and inspector sessions. Two replicas are two sets of control objects on two
data directories (two hosts' disks) and one throwaway cluster; neither directory gains a control
file."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import TypeVar

import anyio
import psycopg
import pytest

from mcp_memory.config import PostgresSettings, Settings, load_settings
from mcp_memory.core.errors import StorageError
from mcp_memory.core.models import EVERYWHERE, Scope
from mcp_memory.storage.control import ControlFile, ControlStore
from mcp_memory.storage.forget_codes import ForgetCodes
from mcp_memory.storage.llm_usage import LlmLedger
from mcp_memory.storage.pg import connections, shared
from mcp_memory.storage.pg.dialect import translate_shared
from mcp_memory.storage.pg.store import PostgresStore
from mcp_memory.storage.switch import SwitchFile
from mcp_memory.storage.tokens import TokenStore
from mcp_memory.storage.ui_sessions import UiSessionStore
from tests import pgcluster

pytestmark = pytest.mark.anyio

F = TypeVar("F", bound=ControlFile)


class Replicas:
    """Settings of two replicas on one database, and the control objects opened for them."""

    def __init__(self, cluster: pgcluster.Cluster, root: Path) -> None:
        self.settings = [
            load_settings(data_dir=root / name, storage={"backend": "postgres", "postgres": {"dsn": cluster.dsn()}})
            for name in ("a", "b")
        ]
        self.stack = ExitStack()

    def both(self, kind: type[F]) -> tuple[F, F]:
        a, b = (kind.for_settings(s) for s in self.settings)
        self.stack.callback(a.close)
        self.stack.callback(b.close)
        return a, b


@pytest.fixture
def replicas(migrated: pgcluster.Cluster, tmp_path: Path) -> Iterator[Replicas]:
    two = Replicas(migrated, tmp_path)
    with two.stack:
        yield two
    assert not [p for s in two.settings if s.data_dir.exists() for p in s.data_dir.rglob("control.db*")]


async def test_a_token_made_on_one_replica_opens_the_other_and_a_revoke_closes_both(replicas: Replicas) -> None:
    a, b = replicas.both(TokenStore)
    token, record = await a.create("alice", "work", "laptop", 1_000.0, 5_000.0)
    found = await b.verify(token, 1_001.0)
    assert found is not None
    assert (found.id, found.principal, found.namespace) == (record.id, "alice", "work")
    assert await b.verify(token, 5_001.0) is None  # expired
    assert await b.count_live(1_001.0) == 1
    await b.revoke(record.id, 1_002.0)
    assert await a.verify(token, 1_003.0) is None
    assert not await a.alive(record.id, 1_003.0)
    assert [t.revoked_at for t in await a.list()] == [1_002.0]


async def test_one_replica_at_a_time_holds_a_pass_lease_and_takes_it_over_when_it_lapses(
    replicas: Replicas,
) -> None:
    a, b = replicas.both(ControlStore)
    assert await a.acquire("consolidate", "replica-a", 1_000.0, 60.0)
    assert not await b.acquire("consolidate", "replica-b", 1_030.0, 60.0)
    assert await a.acquire("consolidate", "replica-a", 1_030.0, 60.0)  # renewed while the pass runs
    assert not await b.acquire("consolidate", "replica-b", 1_080.0, 60.0)
    assert await b.acquire("consolidate", "replica-b", 1_091.0, 60.0)  # A stopped renewing: B takes it
    assert await a.holder("consolidate") == ("replica-b", 1_151.0)
    await b.record("consolidate", "replica-b", 1_091.0, 1_095.0, "ok", {"merged": 3, "note": "100% done"})
    await b.release("consolidate", "replica-b")
    assert await a.holder("consolidate") is None
    [done] = await a.recent()
    assert (done["holder"], done["outcome"], done["details"]) == ("replica-b", "ok", {"merged": 3, "note": "100% done"})


async def test_the_last_llm_call_of_a_budget_goes_to_one_replica_only(replicas: Replicas) -> None:
    a, b = replicas.both(LlmLedger)
    granted: list[bool] = []

    async def ask(ledger: LlmLedger) -> None:
        granted.extend([await ledger.reserve("alice", 20_000, 7, 1_000) for _ in range(6)])

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask, a)
        tg.start_soon(ask, b)
    assert granted.count(True) == 7
    await b.charge("alice", 20_000, tokens=1_500, failures=1)
    assert await a.used("alice", 20_000) == (7, 1_500, 1)
    assert not await a.reserve("alice", 20_000, 100, 1_000)  # the tokens are spent too
    assert await a.used("bob", 20_000) == (0, 0, 0)


async def test_memory_switched_off_through_one_replica_is_off_on_the_other(replicas: Replicas) -> None:
    a, b = replicas.both(SwitchFile)
    await b.seed(EVERYWHERE, "on", 900.0)
    await a.set("alice", "off", 1_000.0)
    await b.seed("alice", "on", 1_001.0)  # the config's state never overrides a recorded one
    assert await b.off_for(Scope("alice", "work")) == [("alice", 1_000.0)]
    assert await b.off_within("alice")
    assert await b.off_for(Scope("bob")) == []
    assert [row[:2] for row in await b.all()] == [("*", "on"), ("alice", "off")]


async def test_an_inspector_session_opened_on_one_replica_serves_on_the_other_until_its_user_is_forgotten(
    replicas: Replicas,
) -> None:
    a, b = replicas.both(UiSessionStore)
    session_id, record = await a.open("alice", None, "tok_1", 1_000.0, 2_000.0)
    found = await b.find(session_id, 1_500.0)
    assert found is not None
    assert (found.principal, found.csrf) == ("alice", record.csrf)
    assert await b.find(session_id, 2_001.0) is None
    other, _ = await a.open("bob", None, "tok_2", 1_000.0, 2_000.0)
    await b.close_principal("alice")
    assert await a.find(session_id, 1_500.0) is None
    assert await a.find(other, 1_500.0) is not None


def test_shared_statements_keep_their_own_keys_and_literals() -> None:
    upsert = translate_shared(
        "INSERT INTO llm_usage(principal_hash, day, calls) VALUES (?, ?, 1) "
        "ON CONFLICT(principal_hash, day) DO UPDATE SET calls = calls + 1"
    )
    assert upsert == (
        "INSERT INTO llm_usage(principal_hash, day, calls) VALUES (%s, %s, 1) "
        "ON CONFLICT(principal_hash, day) DO UPDATE SET calls = llm_usage.calls + 1"
    )
    ignored = translate_shared("INSERT OR IGNORE INTO switches(target, state) VALUES (?, '100%')")
    assert ignored == "INSERT INTO switches(target, state) VALUES (%s, '100%%') ON CONFLICT DO NOTHING"


async def test_a_database_that_is_down_is_named_and_the_next_call_connects_again(
    replicas: Replicas, migrated: pgcluster.Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    down: Settings = load_settings(
        data_dir=tmp_path / "c",
        storage={"backend": "postgres", "postgres": {"dsn": "postgresql://mcp_server@127.0.0.1:1/mcp"}},
    )
    tokens = TokenStore.for_settings(down)
    with pytest.raises(StorageError, match=r"shared tables on PostgreSQL at 127\.0\.0\.1:1/mcp"):
        await tokens.count_live(0.0)
    tokens.close()
    a, _ = replicas.both(TokenStore)
    assert await a.count_live(0.0) == 0
    assert a.shared is not None
    await _terminate(migrated)
    with pytest.raises(StorageError):  # cut while in use: said once
        await a.count_live(0.0)
    assert await a.count_live(0.0) == 0  # and made again
    monkeypatch.setattr(shared, "IDLE_CHECK_SECONDS", 0.0)  # as after a few idle seconds
    monkeypatch.setattr(connections, "IDLE_CHECK_SECONDS", 0.0)
    await _terminate(migrated)
    assert await a.count_live(0.0) == 0  # an idle connection is checked first: the restart costs nothing
    async with PostgresStore(PostgresSettings(dsn=migrated.dsn(), pool_min=2, pool_max=2)) as store:
        assert await store.known_principals() == []
        await _terminate(migrated)
        assert await store.known_principals() == []  # the pool replaces what the server ended


async def test_a_token_check_queues_behind_no_other_call_of_its_store_and_outlives_a_restart(
    replicas: Replicas, migrated: pgcluster.Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every HTTP request checks its token: on PostgreSQL the lookup is a read on the event loop's
    own connection, not queued behind the store's other calls on their worker thread (ADR 28)."""
    a, b = replicas.both(TokenStore)
    token, _ = await a.create("alice", None, None, 1_000.0, None)
    async with b._lock:  # another call of b's in progress (a listing, a revoke)
        with anyio.fail_after(10):
            found = await b.verify(token, 1_001.0)
    assert found is not None
    assert found.principal == "alice"
    await _terminate(migrated)
    with pytest.raises(StorageError, match="shared tables on PostgreSQL"):  # cut while in use: said once
        await b.verify(token, 1_002.0)
    assert await b.verify(token, 1_002.0) is not None  # and made again
    monkeypatch.setattr(shared, "IDLE_CHECK_SECONDS", 0.0)
    await _terminate(migrated)
    assert await b.verify(token, 1_003.0) is not None  # an idle connection is checked first


async def test_a_switch_check_queues_behind_no_other_call_of_its_store(replicas: Replicas) -> None:
    """Every recall and remember reads the kill switch: on PostgreSQL on the event loop's own
    connection, as the token check does, not behind the store's lock and a worker thread."""
    a, b = replicas.both(SwitchFile)
    await a.set("alice", "off", 1_000.0)
    async with b._lock:  # another call of b's in progress (a `switch` command's write, a listing)
        with anyio.fail_after(10):
            assert await b.off_for(Scope("alice")) == [("alice", 1_000.0)]
            assert await b.off_within("alice")
            assert not await b.off_within("bob")


async def _terminate(cluster: pgcluster.Cluster) -> None:
    """End every connection of the server's role, as a database restart or a failover does."""
    async with await psycopg.AsyncConnection.connect(cluster.dsn("postgres"), autocommit=True) as admin:
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (pgcluster.SERVER,)
        )


async def test_a_forget_code_given_on_one_replica_is_taken_once_on_the_other(replicas: Replicas) -> None:
    a, b = replicas.both(ForgetCodes)
    await a.issue("alice", "abc123-def456", 1_300.0)
    assert not await b.take("bob", "abc123-def456", 1_000.0)
    assert await b.take("alice", "abc123-def456", 1_000.0)
    assert not await a.take("alice", "abc123-def456", 1_000.0)  # used
    await a.issue("alice", "abc123-def456", 1_300.0)
    assert not await b.take("alice", "000000-000000", 1_000.0)
    assert not await a.take("alice", "abc123-def456", 1_000.0)  # the wrong guess voided it
    await a.issue("alice", "abc123-def456", 1_300.0)
    assert not await b.take("alice", "abc123-def456", 1_301.0)  # expired
