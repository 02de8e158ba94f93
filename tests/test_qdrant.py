"""The Qdrant vector engine in qdrant-client's local mode, beside the SQLite record store (ADR 18).

Local mode is the client a server deployment uses, on a folder one process holds (or in memory);
the behaviour suite (test_backend_behaviour.py) runs every backend test on it too. These tests read
the points themselves: what a payload holds, what forget_user leaves, how points that lag behind
the record store are brought up, and how `reindex --check` repairs them.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from qdrant_client import AsyncQdrantClient
from qdrant_client import models as qm

from mcp_memory.cli import main
from mcp_memory.config import Settings, load_settings
from mcp_memory.errors import StorageError
from mcp_memory.models import Scope
from mcp_memory.schemas import MemoryInput
from mcp_memory.server import Runtime, open_runtime
from mcp_memory.services.erasure import ErasureService
from mcp_memory.services.memory import CallContext
from mcp_memory.storage.qdrant import principal_key
from tests.conftest import Clock

pytestmark = pytest.mark.anyio

ALICE = Scope("alice")
BOB = Scope("bob")
MIXED = [
    "The user drinks oolong tea without sugar",
    "The user lives in Berlin",
    "The user uses vim keybindings",
    "用户每天早上六点跑步",
    "用户的猫叫小米",
    "Deploys go out on Fridays after the review",
    "项目的数据库是 PostgreSQL 15",
    "The user's sister is called Mira",
]


def _settings(data_dir: Path, engine: str = "qdrant", *, second: bool = True, **qdrant: Any) -> Settings:
    vectors: dict[str, Any] = {"engine": engine}
    if engine == "qdrant":
        vectors["qdrant"] = qdrant or {"path": str(data_dir.parent / "qdrant")}
    return load_settings(data_dir=data_dir, principal="alice", vectors=vectors, recall={"second_opinion": second})


async def remember(rt: Runtime, scope: Scope, *texts: str) -> list[str]:
    result = await rt.memory.remember(scope, [MemoryInput(content=t) for t in texts], CallContext())
    return [item.id for item in result.items if item.id]


async def ranked(rt: Runtime, scope: Scope, query: str) -> list[str]:
    result = await rt.memory.recall(scope, query, k=5, reinforce=False)
    return [hit.text for hit in result.hits]


async def points(folder: Path) -> list[qm.Record]:
    """Every point of every collection in a local-mode folder (no runtime may hold it)."""
    client = AsyncQdrantClient(path=str(folder))
    try:
        out: list[qm.Record] = []
        for found in (await client.get_collections()).collections:
            records, _ = await client.scroll(found.name, limit=10_000, with_payload=True, with_vectors=False)
            out.extend(records)
        return out
    finally:
        await client.close()


@pytest.fixture
async def qrt(data_dir: Path, clock: Clock) -> AsyncIterator[Runtime]:
    async with open_runtime(_settings(data_dir), clock=clock) as runtime:
        yield runtime


async def test_points_hold_ids_and_filters_never_text_or_the_principal_s_name(data_dir: Path, clock: Clock) -> None:
    async with open_runtime(_settings(data_dir), clock=clock) as rt:
        ids = await remember(rt, ALICE, *MIXED[:3])
        [scoped] = await remember(rt, Scope("alice", "work"), "The staging host is stage-7")
    held = [p for p in await points(data_dir.parent / "qdrant") if "id" in (p.payload or {})]
    assert sorted(p.payload["id"] for p in held if p.payload) == sorted([*ids, scoped])
    for point in held:
        payload = point.payload or {}
        assert set(payload) == {"p", "id", "n", "ns", "live", "exp", "cjk"}
        assert payload["p"] == principal_key("alice") != "alice"
        assert not any(isinstance(v, str) and ("user" in v or "stage-7" in v) for v in payload.values())
    assert {(p.payload or {})["ns"] for p in held} == {"", "work"}


async def test_the_engine_ranks_a_small_mixed_store_as_the_exact_index_does(data_dir: Path, clock: Clock) -> None:
    """Under 256 points the sample is every point and the candidates are every point: the same hits.
    (Without the second opinion, whose vectors arrive in the background whatever the engine.)"""
    async with open_runtime(_settings(data_dir, "exact", second=False), clock=clock) as rt:
        await remember(rt, ALICE, *MIXED)
        questions = ["what does the user drink?", "用户的猫叫什么？", "which database does the project use?", "跑步"]
        exact = [await ranked(rt, ALICE, q) for q in questions]
    async with open_runtime(_settings(data_dir, second=False), clock=clock) as rt:
        assert [await ranked(rt, ALICE, q) for q in questions] == exact
    assert exact[0][0] == MIXED[0]
    assert exact[1][0] == MIXED[4]


async def test_forget_user_leaves_no_point_of_the_principal(data_dir: Path, clock: Clock) -> None:
    async with open_runtime(_settings(data_dir), clock=clock) as rt:
        await remember(rt, ALICE, "Alice prefers window seats", "Alice's passport ends in 4471")
        await remember(rt, Scope("alice", "work"), "Alice's badge number is 88")
        [kept] = await remember(rt, BOB, "Bob prefers aisle seats")
        erasure = ErasureService(rt.store, clock=clock)
        code = (await erasure.forget_user(ALICE)).confirmation_code
        assert code is not None
        await erasure.forget_user(ALICE, code)
        assert await ranked(rt, ALICE, "which seats?") == []
        assert await ranked(rt, BOB, "which seats?") == ["Bob prefers aisle seats"]
    left = await points(data_dir.parent / "qdrant")
    assert not [p for p in left if (p.payload or {}).get("p") == principal_key("alice")]
    assert [p.payload["id"] for p in left if p.payload and "id" in p.payload] == [kept]


async def test_a_write_the_engine_refuses_stores_nothing(data_dir: Path, clock: Clock) -> None:
    with socket.socket() as s:  # a port nothing listens on: Qdrant is down
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = _settings(data_dir, url=f"http://127.0.0.1:{port}", timeout_seconds=1)
    async with open_runtime(down, clock=clock) as rt:
        with pytest.raises(StorageError, match=r"Qdrant.*vectors\.qdrant\.url"):
            await remember(rt, ALICE, "The user drinks oolong tea without sugar")
    async with open_runtime(_settings(data_dir, "exact"), clock=clock) as rt:
        assert (await rt.store.count(ALICE))["memories"] == 0


async def test_points_behind_the_record_store_are_brought_up_from_its_log(data_dir: Path, clock: Clock) -> None:
    async with open_runtime(_settings(data_dir, "exact"), clock=clock) as rt:
        tea, _ = await remember(rt, ALICE, *MIXED[:2])
    async with open_runtime(_settings(data_dir), clock=clock) as rt:  # Qdrant starts empty: the log replays
        assert (await ranked(rt, ALICE, "what does the user drink?"))[0] == MIXED[0]
    async with open_runtime(_settings(data_dir, "exact"), clock=clock) as rt:  # written while "exact"
        await rt.memory.forget(ALICE, ids=[tea], dry_run=False)
        await remember(rt, ALICE, "The user's sister is called Mira")
        await rt.store.lifecycle.prune_changes(ALICE, keep=0)  # the log no longer reaches the points' mark
    async with open_runtime(_settings(data_dir), clock=clock) as rt:
        assert "The user's sister is called Mira" in await ranked(rt, ALICE, "who is the user's sister?")
        assert MIXED[0] not in await ranked(rt, ALICE, "what does the user drink?")
    held = {p.payload["id"] for p in await points(data_dir.parent / "qdrant") if p.payload and "id" in p.payload}
    assert tea not in held
    assert len(held) == 2


def test_reindex_check_writes_missing_points_and_removes_orphans(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = data_dir.parent / "qdrant"

    async def seed() -> list[str]:
        async with open_runtime(_settings(data_dir)) as rt:
            return await remember(rt, ALICE, *MIXED[:3])

    async def damage(lost: str) -> None:
        client = AsyncQdrantClient(path=str(folder))
        try:
            [name] = [c.name for c in (await client.get_collections()).collections if not c.name.endswith("marks")]
            gone = qm.Filter(must=[qm.FieldCondition(key="id", match=qm.MatchValue(value=lost))])
            await client.delete(name, points_selector=qm.FilterSelector(filter=gone), wait=True)
            [record] = (await client.scroll(name, limit=1, with_vectors=True))[0]
            payload = {**(record.payload or {}), "id": "01JGHOST0000000000000000000", "n": 999}
            ghost = qm.PointStruct(id=str(uuid.uuid4()), vector=record.vector or [], payload=payload)
            await client.upsert(name, [ghost], wait=True)
        finally:
            await client.close()

    ids = anyio.run(seed)
    anyio.run(damage, ids[0])
    env = ["--data-dir", str(data_dir), "--principal", "alice"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MCP_MEMORY_VECTORS__ENGINE", "qdrant")
        mp.setenv("MCP_MEMORY_VECTORS__QDRANT__PATH", str(folder))
        assert main([*env, "reindex", "--check"]) == 0
        assert "wrote 1 missing point(s), removed 1 orphan(s)" in capsys.readouterr().err
        assert main([*env, "doctor"]) == 0
        assert "points for 3 memories, in step" in capsys.readouterr().out
    held = anyio.run(points, folder)
    assert sorted(p.payload["id"] for p in held if p.payload and "id" in p.payload) == sorted(ids)


# qdrant-client leaves its lock file open when it refuses a held folder (the process is exiting then).
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning", "ignore::ResourceWarning")
async def test_a_local_folder_serves_one_process_and_says_so(qrt: Runtime, data_dir: Path, clock: Clock) -> None:
    with pytest.raises(StorageError, match=r"in use by another process.*vectors\.qdrant\.url"):
        async with open_runtime(_settings(data_dir), clock=clock):
            pass
