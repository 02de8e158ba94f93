"""The principal pool: files no call holds are closed, and reopen with nothing lost."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest
from mcp.client import Client

from mcp_memory.config import load_settings
from mcp_memory.core.models import MemoryDraft, Scope
from mcp_memory.mcp.server import Server, open_server
from mcp_memory.services.memory import CallContext
from mcp_memory.storage.sqlite import SqliteStore
from tests.conftest import call

pytestmark = pytest.mark.anyio


def _open_files() -> int:
    return len(os.listdir("/proc/self/fd"))


async def _remember(runtime: Server, principal: str, text: str) -> None:
    await runtime.memory.remember(Scope(principal), [MemoryDraft(content=text)], CallContext())


async def _recall(runtime: Server, principal: str, query: str) -> list[str]:
    result = await runtime.memory.recall(Scope(principal), query, reinforce=False)
    return [h.text for h in result.hits]


async def test_principals_past_the_limit_are_closed_and_reopen_with_nothing_lost(data_dir: Path) -> None:
    settings = load_settings(data_dir=data_dir, principal="p0", pool={"max_open": 3})
    async with open_server(settings) as runtime:
        store = runtime.store
        before = _open_files()
        for i in range(12):
            await _remember(runtime, f"p{i}", f"Principal {i} keeps the spare key in drawer {i}")
            assert store.pool_figures()["open_principals"] <= 3
        figures = store.pool_figures()
        assert figures["evicted_files"] >= 9
        assert _open_files() - before <= 3 * 8  # a handful of descriptors per open principal, not per principal
        for i in range(12):  # every one reopens transparently, everything it had still there
            assert await _recall(runtime, f"p{i}", "where is the spare key") == [
                f"Principal {i} keeps the spare key in drawer {i}"
            ]
        assert store.pool_figures()["open_principals"] <= 3


async def test_an_idle_session_holds_no_principal_file_and_its_next_call_reopens_it(data_dir: Path) -> None:
    """Clients keep sessions open for hours: between its calls a session pins nothing, so a crowd of
    idle sessions cannot exhaust the descriptors (issue 34)."""
    settings = load_settings(data_dir=data_dir, principal="alice", pool={"max_open": 1})
    async with open_server(settings) as runtime:
        assert isinstance(runtime.store, SqliteStore)  # the pool of files is SQLite's
        async with Client(runtime.mcp, mode="legacy") as alice:
            await call(alice, "remember", {"content": "Alice's locker is number 42"})
            assert "alice" in runtime.store.open_principals()  # positive control: her call opened it
            for i in range(3):  # others come and go while alice's session stays open, idle
                await _remember(runtime, f"other{i}", f"Other {i} parks on level {i}")
                assert runtime.store.open_principals() == [f"other{i}"]
            found = await call(alice, "recall", {"query": "locker number", "reinforce": False})
            assert [h["text"] for h in found["hits"]] == ["Alice's locker is number 42"]
            assert runtime.store.open_principals() == ["alice"]
        assert runtime.store.pool_figures()["evicted_files"] >= 4


async def test_full_durability_syncs_every_commit_and_normal_is_the_default(data_dir: Path) -> None:
    for durability, expected in (("normal", 1), ("full", 2)):  # SQLite's codes for NORMAL and FULL
        settings = load_settings(data_dir=data_dir / durability, principal="p0", storage={"durability": durability})
        async with open_server(settings, warm=False) as runtime:
            await _remember(runtime, "p0", "The spare key is in drawer 3")
            assert isinstance(runtime.store, SqliteStore)
            db = await runtime.store.principal_db(Scope("p0"))
            for conn in (db.reader, db.writer):
                rows = list(await conn.execute_fetchall("PRAGMA synchronous"))
                assert rows[0][0] == expected
    assert load_settings(data_dir=data_dir).storage.durability == "normal"


async def test_idle_principals_are_closed_and_vector_indexes_kept_within_budget(data_dir: Path) -> None:
    settings = load_settings(
        data_dir=data_dir, principal="p0", pool={"idle_seconds": 0.5, "index_budget_mb": 1, "max_open": 50}
    )
    async with open_server(settings) as runtime:
        for i in range(4):
            await _remember(runtime, f"p{i}", f"Principal {i} keeps the spare key in drawer {i}")
            await _recall(runtime, f"p{i}", "spare key")  # loads each index
        assert runtime.store.pool_figures()["indexes"] >= 1
        with anyio.fail_after(15):
            while runtime.store.pool_figures()["open_principals"]:  # noqa: ASYNC110 -- polling the pool's own clock
                await anyio.sleep(0.2)
        assert runtime.store.pool_figures()["evicted_files"] >= 4
        assert await _recall(runtime, "p2", "spare key") == ["Principal 2 keeps the spare key in drawer 2"]
