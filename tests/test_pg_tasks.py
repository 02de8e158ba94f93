"""Tasks and checkpoints on PostgreSQL: storage/tasks.py's TaskStore, unchanged, over PostgresStore's
transactions and reads (ADR 20), on a throwaway cluster."""

from __future__ import annotations

from collections.abc import AsyncIterator

import psycopg
import pytest

from mcp_memory.config import PostgresSettings
from mcp_memory.core.errors import ConflictError, StaleHeadError
from mcp_memory.core.models import CheckpointRow, Scope, TaskRow
from mcp_memory.storage.pg import migrations
from mcp_memory.storage.pg.store import PostgresStore
from mcp_memory.storage.tasks import TaskStore
from tests import pgcluster

pytestmark = pytest.mark.anyio


@pytest.fixture
async def tasks(pg_empty: pgcluster.Cluster) -> AsyncIterator[TaskStore]:
    async with await psycopg.AsyncConnection.connect(pg_empty.dsn(pgcluster.OWNER), autocommit=True) as owner:
        await migrations.migrate(owner, pgcluster.SERVER)
    async with PostgresStore(PostgresSettings(dsn=pg_empty.dsn(), pool_min=1, pool_max=4)) as db:
        yield TaskStore(db)


def _task(task_id: str, seq: int, namespace: str | None = None, at: float = 1_000.0) -> TaskRow:
    return TaskRow(task_id, namespace, "Migrate billing", "Move billing to PostgreSQL 16", ["no downtime"],
                   f"head {seq}".encode(), seq, 1_000.0, at + seq, f"cp{seq}")  # fmt: skip


def _checkpoint(task_id: str, seq: int) -> CheckpointRow:
    return CheckpointRow(f"cp{seq}", task_id, seq, f"cp{seq - 1}" if seq > 1 else None, "step", 1_000.0 + seq, 9,
                         "sum", b"\x00\x01envelope")  # fmt: skip


async def test_a_task_is_saved_resumed_and_a_stale_head_refused(tasks: TaskStore) -> None:
    alice = Scope("alice")
    await tasks.save(alice, _task("migrate", 1), None, [_checkpoint("migrate", 1)])
    await tasks.save(alice, _task("migrate", 2), 1, [_checkpoint("migrate", 2)])
    with pytest.raises(StaleHeadError):
        await tasks.save(alice, _task("migrate", 3), 1, [_checkpoint("migrate", 3)])
    with pytest.raises(StaleHeadError):
        await tasks.save(alice, _task("migrate", 3), None)  # it exists: a create is stale
    got = await tasks.get(alice, "migrate")
    assert got is not None
    assert (got.head, got.head_seq, got.constraints, got.latest_checkpoint_id) == (b"head 2", 2, ["no downtime"], "cp2")
    assert [c.seq for c in await tasks.list_checkpoints(alice, "migrate", None, 10)] == [2, 1]
    assert [c.seq for c in await tasks.list_checkpoints(alice, "migrate", 2, 10)] == [1]
    one = await tasks.checkpoint(alice, "migrate", "cp1")
    assert one is not None
    assert one.envelope == b"\x00\x01envelope"
    assert await tasks.heads(alice) == {"migrate": 2}


async def test_tasks_stay_with_their_principal_and_namespace(tasks: TaskStore) -> None:
    alice, bob = Scope("alice"), Scope("bob")
    await tasks.save(alice, _task("migrate", 1), None)
    assert await tasks.get(bob, "migrate") is None
    assert await tasks.heads(bob) == {}
    await tasks.save(bob, _task("migrate", 1, at=2_000.0), None)  # Bob's own task of the same id
    assert (await tasks.heads(alice), await tasks.heads(bob)) == ({"migrate": 1}, {"migrate": 1})
    home, work = Scope("alice", "home"), Scope("alice", "work")
    await tasks.save(home, _task("chores", 1, "home", at=3_000.0), None)
    with pytest.raises(ConflictError):  # another namespace's task id is not taken over
        await tasks.save(work, _task("chores", 1, "work"), None)
    assert await tasks.get(work, "chores") is None
    listed = await tasks.list_tasks(home, None, 10)
    assert [t.task_id for t in listed] == ["chores", "migrate"]  # newest first; principal-wide ones too
