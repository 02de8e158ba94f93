"""Two OS processes, one data directory, one principal: Claude Desktop and Cursor side by side.

Each child process opens its own runtime (store, index, embedder) and talks to it through an
in-process MCP client; the parent drives them over pipes, asserts that their write phases
overlapped in time, then makes them hand memories to each other.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import secrets
import sqlite3
import sys
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client

from mcp_memory.config import load_settings
from mcp_memory.core.errors import StorageError
from mcp_memory.core.models import MemoryDraft, Scope
from mcp_memory.mcp.recall_schemas import MemoryOut
from mcp_memory.mcp.server import open_server
from mcp_memory.mcp.wire_recall import recall_result
from mcp_memory.services.memory import CallContext
from mcp_memory.storage.pool import principal_file
from mcp_memory.storage.sqlite import SqliteStore
from tests.conftest import call, row_counts

pytestmark = pytest.mark.slow

PRINCIPAL = "shared-user"
WRITES = 300  # each process, one remember a call; the phases overlap (asserted)
START_TIMEOUT = 90.0
PHASE_TIMEOUT = 150.0
STEP_TIMEOUT = 30.0


@dataclass(frozen=True)
class WriteReport:
    name: str
    first_write: float
    last_write: float
    stored: int
    merged: int
    rejected: int


def note(name: str, i: int) -> str:
    # Identifier-like tokens (alpha-0042) keep any two notes from merging as near-duplicates.
    return f"{name}-{i:04d} cache shard {name}-s{i % 17:02d} holds build {name}-b{i * 7 + 3:05d}"


async def _serve(data_dir: Path, name: str, start: Barrier, conn: Connection) -> None:
    settings = load_settings(data_dir=data_dir, principal=PRINCIPAL)
    async with open_server(settings) as runtime, Client(runtime.mcp, mode="legacy") as client:
        await call(client, "recall", {"query": "warm up the model", "reinforce": False})
        await anyio.to_thread.run_sync(start.wait, START_TIMEOUT)
        stored = merged = rejected = 0
        first = time.time()
        for i in range(WRITES):
            result = await call(client, "remember", {"content": note(name, i)})
            stored, merged, rejected = (
                stored + result["stored"],
                merged + result["merged"],
                rejected + result["rejected"],
            )
        last = time.time()
        conn.send(("ok", WriteReport(name, first, last, stored, merged, rejected)))
        while True:
            command, arg = await anyio.to_thread.run_sync(conn.recv)
            if command == "stop":
                return
            if command == "remember":
                result = await call(client, "remember", {"content": arg})
                conn.send(("ok", result["items"][0]))
            elif command == "recall":
                result = await call(client, "recall", {"query": arg, "explain": True, "reinforce": False})
                conn.send(("ok", [(h["text"], h["signals"].get("dense_rank")) for h in result["hits"]]))
            elif command == "forget":
                result = await call(client, "forget", {"ids": [arg], "dry_run": False})
                conn.send(("ok", result["deleted"]))


def child_main(data_dir: str, name: str, start: Barrier, conn: Connection) -> None:
    """Entry point of a spawned child: errors travel back to the parent as text."""
    try:
        anyio.run(_serve, Path(data_dir), name, start, conn)
    except BaseException:
        conn.send(("error", traceback.format_exc()))
        raise


def receive(conn: Connection, timeout: float) -> Any:
    if not conn.poll(timeout):
        raise AssertionError(f"no answer from the child within {timeout} s")
    status, value = conn.recv()
    assert status == "ok", value
    return value


def ask(conn: Connection, command: str, arg: str) -> Any:
    conn.send((command, arg))
    return receive(conn, STEP_TIMEOUT)


def test_two_processes_share_one_data_directory_without_losing_writes(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(2)
    names = ("alpha", "bravo")
    conns: dict[str, Connection] = {}
    procs: list[BaseProcess] = []
    try:
        for name in names:
            parent_end, child_end = ctx.Pipe()
            proc = ctx.Process(target=child_main, args=(str(data_dir), name, start, child_end), daemon=True)
            proc.start()
            conns[name] = parent_end
            procs.append(proc)
        reports: dict[str, WriteReport] = {name: receive(conns[name], PHASE_TIMEOUT) for name in names}
        alpha, bravo = reports["alpha"], reports["bravo"]

        # The write phases overlapped: each began before the other ended.
        assert max(alpha.first_write, bravo.first_write) < min(alpha.last_write, bravo.last_write), reports

        # Nothing was lost or doubled: every stored outcome is one row, and every index agrees.
        for report in reports.values():
            assert report.stored + report.merged + report.rejected == WRITES
            assert report.rejected == 0
        stored = alpha.stored + bravo.stored
        assert stored == 2 * WRITES  # distinct identifiers: no two notes may merge
        counts = row_counts(data_dir, PRINCIPAL)
        assert counts["memories"] == stored, (counts, reports)
        assert counts["vectors"] == counts["memories_fts"] == stored
        assert counts["occurrences"] == alpha.stored + alpha.merged + bravo.stored + bravo.merged

        # A live handshake: each process recalls, through its own vector index, what the other just wrote.
        written: dict[str, tuple[str, str]] = {}
        for writer, reader in (("alpha", "bravo"), ("bravo", "alpha")):
            token = f"zq{secrets.token_hex(5)}"
            text = f"Handshake {token} from {writer}: the staging lights turn green at 17:45"
            item = ask(conns[writer], "remember", text)
            assert item["outcome"] == "stored"
            hits = dict(ask(conns[reader], "recall", f"handshake {token} staging lights"))
            assert text in hits, f"{reader} did not see what {writer} wrote: {hits}"
            assert hits[text] is not None, f"{reader}'s vector index never caught up with {writer}'s write"
            written[writer] = (item["id"], text)

        # And each stops returning what the other forgot.
        for forgetter, reader in (("alpha", "bravo"), ("bravo", "alpha")):
            ident, text = written[forgetter]
            assert ask(conns[forgetter], "forget", ident) == 1
            hits = dict(ask(conns[reader], "recall", f"{text}"))
            assert text not in hits, f"{reader} still returns what {forgetter} forgot"
        assert row_counts(data_dir, PRINCIPAL)["memories"] == stored
    finally:
        for conn in conns.values():
            with contextlib.suppress(OSError):
                conn.send(("stop", ""))
        for child in procs:
            child.join(timeout=20)
            if child.is_alive():
                child.kill()
                child.join(timeout=5)
    assert [child.exitcode for child in procs] == [0, 0]


@pytest.mark.anyio
async def test_a_write_cancelled_while_waiting_for_the_lock_leaves_no_open_transaction(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path / "data", principal="alice", busy_timeout_ms=5_000)
    async with open_server(settings) as runtime:
        scope = Scope("alice")
        stored = await runtime.memory.remember(scope, [MemoryDraft(content="A memory to touch")], CallContext())
        other = sqlite3.connect(principal_file(tmp_path / "data", "alice"), isolation_level=None, timeout=5)
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        released = anyio.Event()

        async def release_later() -> None:
            await anyio.sleep(0.5)
            other.execute("ROLLBACK")
            released.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(release_later)
            with anyio.move_on_after(0.1):  # the client cancels while the write waits for the lock
                await runtime.store.reinforce(scope, [str(stored.items[0].id)], 0.0)
        other.close()
        assert released.is_set()
        assert isinstance(runtime.store, SqliteStore)
        writer = (await runtime.store.principal_db(scope)).writer
        assert not writer.in_transaction
        again = await runtime.memory.remember(
            scope, [MemoryDraft(content="Writes still work afterwards")], CallContext()
        )
        assert again.stored == 1


_HOLD_THE_WRITE_LOCK = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("ROLLBACK")
"""


@pytest.mark.anyio
async def test_recall_does_not_wait_for_another_processs_write_transaction(tmp_path: Path) -> None:
    """Reinforcement waits in memory, so a recall answers while another process holds the write lock."""
    data_dir = tmp_path / "data"
    # A short busy timeout: a recall that needed the lock would fail at once instead of waiting.
    settings = load_settings(data_dir=data_dir, principal="alice", busy_timeout_ms=300)
    async with open_server(settings) as runtime:
        await runtime.memory.remember(
            Scope("alice"), [MemoryDraft(content="The staging cluster is called blue-falcon")], CallContext()
        )
        # Another process, in the middle of a write until it reads a line.
        argv = [sys.executable, "-c", _HOLD_THE_WRITE_LOCK, str(principal_file(data_dir, "alice"))]
        async with await anyio.open_process(argv) as holder:
            assert holder.stdout is not None
            assert holder.stdin is not None
            assert (await holder.stdout.receive()).strip() == b"locked"
            with pytest.raises(StorageError, match="busy"):  # positive control: writes do wait, and give up
                await runtime.memory.remember(
                    Scope("alice"), [MemoryDraft(content="The prod cluster is called red-heron")], CallContext()
                )
            for _ in range(3):
                result = recall_result(
                    await runtime.memory.recall(Scope("alice"), "staging cluster name", detail="full")
                )
            hit = result.hits[0]
            assert isinstance(hit, MemoryOut)  # detail="full"
            assert hit.text == "The staging cluster is called blue-falcon"
            assert hit.access_count == 2  # this process's own reinforcement shows at once
            await holder.stdin.send(b"done\n")
            await holder.wait()
    conn = sqlite3.connect(principal_file(data_dir, "alice"))
    try:
        counts = conn.execute("SELECT access_count FROM memories").fetchall()
    finally:
        conn.close()
    assert counts == [(3,)]  # written at close, once the lock was free
