"""Subscribers hear of changes made elsewhere: a pin by another process on the same data directory,
and a summary written by `mcp-memory maintain`, reach this process's subscribers from the store."""

from __future__ import annotations

import subprocess
import sys
from contextlib import AbstractAsyncContextManager

import anyio
import orjson
import pytest
from mcp.client import Client

from mcp_memory.config import Settings
from mcp_memory.mcp.server import Server, open_server
from mcp_memory.models import Scope
from mcp_memory.schemas import MemoryInput
from mcp_memory.services.memory import CallContext
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
            stored = await other.memory.remember(ALICE, [MemoryInput(content="Use metric units")], CallContext())
            assert heard.uris == []  # a memory that is not pinned changes no pinned resource
            await other.memory.pin(ALICE, str(stored.items[0].id), True)
        await heard.wait_for("memory://pinned")


async def test_a_summary_written_by_maintain_reaches_a_stats_subscriber(
    runtime: Server, settings: Settings, mode: str
) -> None:
    items = [MemoryInput(content=t, importance=0.5, session_id="s1") for t in BILLING_SESSION]
    await runtime.memory.remember(ALICE, items, CallContext())
    async with _updates(runtime, mode, "memory://stats") as (_, heard):
        await runtime.watcher.look("alice")
        argv = [sys.executable, "-m", "mcp_memory", "--data-dir", str(settings.data_dir), "--principal", "alice"]
        done = await anyio.run_process([*argv, "maintain", "--as-of", "+30d"], stderr=subprocess.DEVNULL)
        assert orjson.loads(done.stdout)["summaries"] == 1  # the positive control: the pass wrote one
        await heard.wait_for("memory://stats")
