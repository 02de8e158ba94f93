"""The Qdrant engine on PostgreSQL (ADR 18, ADR 19): the points follow each commit of a principal's
log although other principals take numbers from the same sequence, a log pruned past the points'
mark is copied whole, and forget_user leaves no point of the principal. Qdrant runs in
qdrant-client's local mode in a folder, one runtime at a time; what several replicas do together
is the behaviour suite's "postgres+qdrant"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcp_memory.config import Settings, load_settings
from mcp_memory.core.models import MemoryDraft, Scope
from mcp_memory.mcp.server import Server, open_server
from mcp_memory.services.erasure import ErasureService
from mcp_memory.services.memory import CallContext
from mcp_memory.storage import qdrant_follow as follow
from mcp_memory.storage.qdrant_search import QdrantVectorSearch
from tests import pgcluster
from tests.conftest import Clock
from tests.test_qdrant import points

pytestmark = pytest.mark.anyio

ALICE, BOB = Scope("alice"), Scope("bob")


@pytest.fixture
def cluster(migrated: pgcluster.Cluster) -> pgcluster.Cluster:
    return migrated


@pytest.fixture
def dsn(cluster: pgcluster.Cluster) -> str:
    return cluster.dsn()


def _settings(data_dir: Path, dsn: str, engine: str = "qdrant") -> Settings:
    vectors: dict[str, Any] = {"engine": engine}
    if engine == "qdrant":
        vectors["qdrant"] = {"path": str(data_dir.parent / "qdrant")}
    return load_settings(
        data_dir=data_dir, principal="alice", storage={"backend": "postgres", "postgres": {"dsn": dsn}}, vectors=vectors
    )


async def remember(rt: Server, scope: Scope, *texts: str) -> list[str]:
    result = await rt.memory.remember(scope, [MemoryDraft(content=t) for t in texts], CallContext())
    return [item.id for item in result.items if item.id]


async def ranked(rt: Server, scope: Scope, query: str) -> list[str]:
    return [hit.text for hit in (await rt.memory.recall(scope, query, k=5, reinforce=False)).hits]


async def test_a_write_after_another_principal_s_writes_sends_only_its_own_points(
    data_dir: Path, dsn: str, clock: Clock
) -> None:
    """Bob's writes take numbers of the one sequence between two of Alice's: her log has a gap that
    is no prune, and her next write must send its own point, not copy every point again."""
    async with open_server(_settings(data_dir, dsn), clock=clock) as rt:
        engine = rt.store.vectors
        assert isinstance(engine, QdrantVectorSearch)
        await remember(rt, ALICE, "The user drinks oolong tea without sugar", "The user lives in Berlin")
        await remember(rt, BOB, "Bob keeps bees", "Bob's bike is red")
        await remember(rt, ALICE, "The user's sister is called Mira")
        collection = await engine.sync(ALICE, 0)
        assert collection is not None
        conn: Any = await rt.store.reader(ALICE)  # PgReader answers aiosqlite's calls (ADR 20)
        key = await follow.key(conn, "alice")
        assert key is not None
        mark = await engine.points.mark(collection, key)
        assert mark is not None
        [(last,)] = await conn.execute_fetchall("SELECT MAX(n) FROM memories")
        assert mark.pending == (int(last),), "the write copied every point: a gap was read as a prune"
        assert mark.seq == await follow.head(conn)
        assert (await ranked(rt, ALICE, "who is the user's sister?"))[0] == "The user's sister is called Mira"
        assert "Bob keeps bees" not in await ranked(rt, ALICE, "who keeps bees?")
        assert rt.store.pool_figures().get("indexes", 0) == 0  # /metrics: no index held in this process


async def test_points_behind_a_pruned_log_are_copied_whole_and_forget_user_leaves_no_row_or_point(
    data_dir: Path, cluster: pgcluster.Cluster, dsn: str, clock: Clock
) -> None:
    async with open_server(_settings(data_dir, dsn), clock=clock) as rt:
        tea, _ = await remember(rt, ALICE, "The user drinks oolong tea without sugar", "The user lives in Berlin")
        [bees] = await remember(rt, BOB, "Bob keeps bees")
    async with open_server(_settings(data_dir, dsn, "exact"), clock=clock) as rt:  # a replica without Qdrant
        await rt.memory.forget(ALICE, ids=[tea], dry_run=False)
        await remember(rt, ALICE, "The user's sister is called Mira")
        await rt.store.lifecycle.prune_changes(ALICE, keep=1)  # the log no longer reaches the points' mark
    async with open_server(_settings(data_dir, dsn), clock=clock) as rt:
        assert "The user's sister is called Mira" in await ranked(rt, ALICE, "who is the user's sister?")
        assert "The user drinks oolong tea without sugar" not in await ranked(rt, ALICE, "what does the user drink?")
        erasure = ErasureService(rt.store, clock=clock)
        code = (await erasure.forget_user(ALICE)).confirmation_code
        assert code is not None
        await erasure.forget_user(ALICE, code)
        assert await ranked(rt, ALICE, "who is the user's sister?") == []
        assert await ranked(rt, BOB, "who keeps bees?") == ["Bob keeps bees"]
    held = [p.payload["id"] for p in await points(data_dir.parent / "qdrant") if p.payload and "id" in p.payload]
    assert held == [bees]
    # as the superuser, whom row-level security does not bind: no row of hers is left, Bob's is
    memories = "SELECT content FROM memories ORDER BY content"
    assert pgcluster.psql(cluster, memories) == "Bob keeps bees"
    assert pgcluster.psql(cluster, "SELECT COUNT(*) FROM vectors") == "1"
