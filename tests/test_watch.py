"""Subscribers hear of changes made elsewhere: a pin by another process on the same data directory,
and a summary written by `mcp-memory maintain`, reach this process's subscribers from the store."""

from __future__ import annotations

import subprocess
import sys
import time
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import anyio
import orjson
import pytest
from mcp.client import Client

from mcp_memory.config import Settings, load_settings
from mcp_memory.core.models import MemoryDraft, Scope
from mcp_memory.mcp.server import Server, open_server
from mcp_memory.services.memory import CallContext
from mcp_memory.storage.pool import REST_SECONDS
from mcp_memory.storage.sqlite import SqliteStore
from tests.conftest import BILLING_SESSION, Heard, subscribed

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
ALICE = Scope("alice")


def _updates(runtime: Server, mode: str, uri: str) -> AbstractAsyncContextManager[tuple[Client, Heard]]:
    return subscribed(lambda handler: Client(runtime.mcp, mode=mode, message_handler=handler), mode, [uri])


async def test_a_pin_made_by_another_process_reaches_this_ones_subscriber(
    runtime: Server, settings: Settings, mode: str
) -> None:
    async with _updates(runtime, mode, "memory://pinned") as (_, heard):
        await runtime.watcher.look("alice")  # what this process knows before the other one writes
        async with open_server(settings, warm=False) as other:  # its own store, connections and index
            stored = await other.memory.remember(ALICE, [MemoryDraft(content="Use metric units")], CallContext())
            assert heard.uris == []  # a memory that is not pinned changes no pinned resource
            await other.memory.pin(ALICE, str(stored.items[0].id), True)
        await heard.wait_for("memory://pinned")


async def test_a_summary_written_by_maintain_reaches_a_stats_subscriber(
    runtime: Server, settings: Settings, mode: str
) -> None:
    items = [MemoryDraft(content=t, importance=0.5, session_id="s1") for t in BILLING_SESSION]
    await runtime.memory.remember(ALICE, items, CallContext())
    async with _updates(runtime, mode, "memory://stats") as (_, heard):
        await runtime.watcher.look("alice")
        argv = [sys.executable, "-m", "mcp_memory", "--data-dir", str(settings.data_dir), "--principal", "alice"]
        done = await anyio.run_process([*argv, "maintain", "--as-of", "+30d"], stderr=subprocess.DEVNULL)
        assert orjson.loads(done.stdout)["summaries"] == 1  # the positive control: the pass wrote one
        await heard.wait_for("memory://stats")


async def test_a_subscriber_of_a_principal_at_rest_keeps_none_of_its_files_open(data_dir: Path, mode: str) -> None:
    """ADR 21: sessions hold nothing, subscribed ones included. The watcher looks at a principal whose
    files have not moved without opening them (its clock set ahead, the files are at rest at once); a
    write from another process moves them, and the subscriber hears of it."""
    settings = load_settings(data_dir=data_dir, principal="alice", pool={"idle_seconds": 0.01})
    async with open_server(settings, warm=False) as runtime, _updates(runtime, mode, "memory://pinned") as (_, heard):
        assert isinstance(runtime.memory.store, SqliteStore)
        pool = runtime.memory.store.pool
        runtime.watcher.clock = lambda: time.time() + 2 * REST_SECONDS
        await runtime.memory.remember(ALICE, [MemoryDraft(content="Use metric units")], CallContext())
        opened = []
        for _ in range(4):
            await anyio.sleep(0.05)  # past idle_seconds
            await pool.close_idle()
            await runtime.watcher.look("alice")
            opened.append(pool.get_open("alice") is not None)
        # closing wrote the log into the database: one more look reads, then the files are at rest
        assert opened[-2:] == [False, False], opened
        assert heard.uris == []
        async with open_server(settings, warm=False) as other:
            stored = await other.memory.remember(ALICE, [MemoryDraft(content="Answer in French")], CallContext())
            await other.memory.pin(ALICE, str(stored.items[0].id), True)
        await runtime.watcher.look("alice")
        await heard.wait_for("memory://pinned")
        assert pool.get_open("alice") is not None  # the look read what moved
