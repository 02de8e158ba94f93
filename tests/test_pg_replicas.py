"""Two `mcp-memory serve --transport http` replicas on one PostgreSQL database, each with a data
directory of its own (as on two machines), reached by the SDK's client over real sockets: a token
minted once opens both, a memory written through one is recalled through the other, and a replica
killed (SIGKILL) in the middle of a batch's transaction leaves none of the batch (ADR 19)."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import psycopg
import pytest

from mcp_memory.config import load_settings
from mcp_memory.storage.pg import migrations
from mcp_memory.storage.tokens import TokenStore
from tests import pgcluster
from tests.conftest import call, hit_texts
from tests.netserver import connect, running

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

BATCH = 60


async def _prepare(cluster: pgcluster.Cluster, data_dir: Path) -> str:
    async with await psycopg.AsyncConnection.connect(cluster.dsn(pgcluster.OWNER), autocommit=True) as owner:
        await migrations.migrate(owner, pgcluster.SERVER)
    settings = load_settings(data_dir=data_dir, storage={"backend": "postgres", "postgres": {"dsn": cluster.dsn()}})
    tokens = TokenStore.for_settings(settings)
    try:
        token, _ = await tokens.create("alice", None, "two replicas", time.time(), None)
    finally:
        tokens.close()
    return token


async def _memories(admin: psycopg.AsyncConnection, name: str) -> int:
    """Alice's memories as the superuser counts them (above row-level security)."""
    row = await (
        await admin.execute(
            "SELECT count(*) FROM memories m JOIN principals p ON p.principal = m.principal WHERE p.name = %s", (name,)
        )
    ).fetchone()
    return int(row[0]) if row else 0


async def _batch_in_flight(admin: psycopg.AsyncConnection, seconds: float) -> bool:
    """Whether a replica's transaction is writing memories (seen within ``seconds``)."""
    with anyio.move_on_after(seconds):
        while True:
            found = await (
                await admin.execute(
                    "SELECT 1 FROM pg_stat_activity WHERE application_name = 'mcp-memory' "
                    "AND backend_xid IS NOT NULL AND state <> 'idle'"
                )
            ).fetchall()
            if found:
                return True
            await anyio.sleep(0.005)
    return False


async def test_two_replicas_share_a_token_and_memories_and_a_killed_batch_leaves_nothing(
    pg_empty: pgcluster.Cluster, tmp_path: Path
) -> None:
    token = await _prepare(pg_empty, tmp_path / "mint")
    env = {"MCP_MEMORY_STORAGE__BACKEND": "postgres", "MCP_MEMORY_STORAGE__POSTGRES__DSN": pg_empty.dsn()}
    texts = [f"Inventory note {i}: shelf {i % 17} holds {i * 3} boxes of part {i:04d}" for i in range(BATCH)]
    with (
        running(tmp_path / "a", "http", env={**env, "MCP_MEMORY_LIMITS__MAX_BATCH": str(BATCH)}) as a,
        running(tmp_path / "b", "http", env=env) as b,
    ):
        async with connect(a, token, "legacy") as alice_a, connect(b, token, "legacy") as alice_b:
            await call(alice_a, "remember", {"content": "The deploy freeze starts on Friday at noon"})
            found = await call(alice_b, "recall", {"query": "when does the deploy freeze start?", "detail": "full"})
            assert hit_texts(found) == ["The deploy freeze starts on Friday at noon"]

        async with await psycopg.AsyncConnection.connect(pg_empty.dsn("postgres"), autocommit=True) as admin:
            assert await _memories(admin, "alice") == 1

            async def batch() -> None:
                async with connect(a, token, "legacy") as alice:
                    await call(alice, "remember", {"memories": [{"content": t} for t in texts]})

            async with anyio.create_task_group() as group:
                group.start_soon(batch)
                caught = await _batch_in_flight(admin, 120)
                a.process.kill()  # SIGKILL: no handler runs, the connection just drops
                group.cancel_scope.cancel()
            a.process.wait()
            assert caught, "the batch's transaction was never seen: the kill proved nothing"
            # committed whole just before the kill, or rolled back whole when the connection dropped
            assert await _memories(admin, "alice") in (1, 1 + BATCH)

        async with connect(b, token, "legacy") as alice_b:  # the survivor writes on
            await call(alice_b, "remember", {"content": "Replica B still takes writes"})
            assert "Replica B still takes writes" in hit_texts(
                await call(alice_b, "recall", {"query": "which replica takes writes?", "detail": "full"})
            )
