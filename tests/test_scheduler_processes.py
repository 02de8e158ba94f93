"""Two OS processes contend for a lifecycle pass: one runs it; if it dies, the other takes over."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp.client import Client

from mcp_memory.config import load_settings
from mcp_memory.mcp.server import open_server
from mcp_memory.storage.pool import principal_file
from tests.conftest import Clock, call

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
HOUR = 3600.0
SESSIONS = 60

# The child runs one pass at a fixed "now" 400 hours ahead, when every session is compressible.
CHILD = """
import sys, anyio
from pathlib import Path
from mcp_memory.config import load_settings
from mcp_memory.mcp.server import open_server

async def main() -> None:
    settings = load_settings(data_dir=Path(sys.argv[1]), principal="alice")
    async with open_server(settings, warm=False) as runtime:
        await runtime.scheduler.run_once(float(sys.argv[2]))

anyio.run(main)
"""


def _lease_holder(data_dir: Path) -> str | None:
    path = data_dir / "control.db"
    if not path.exists():
        return None
    conn = sqlite3.connect(path, timeout=5)
    try:
        row = conn.execute("SELECT holder FROM leases WHERE name = 'decay'").fetchone()
    except sqlite3.OperationalError:
        return None
    finally:
        conn.close()
    return None if row is None else str(row[0])


def _summaries(data_dir: Path) -> int:
    conn = sqlite3.connect(principal_file(data_dir, "alice"), timeout=5)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM memories WHERE level = 1").fetchone()[0])
    finally:
        conn.close()


def _invariants(data_dir: Path, group: int) -> tuple[int, int]:
    """Every summary has its whole session (``group`` memories) archived, and every archived memory
    belongs to a summary."""
    conn = sqlite3.connect(principal_file(data_dir, "alice"))
    try:
        summaries = conn.execute("SELECT id FROM memories WHERE level = 1").fetchall()
        for (summary_id,) in summaries:
            sources = conn.execute(
                "SELECT m.tier FROM summary_sources s JOIN memories m ON m.id = s.source_id WHERE s.summary_id = ?",
                (summary_id,),
            ).fetchall()
            assert len(sources) == group, summary_id
            assert {t for (t,) in sources} == {"archived"}
        orphans = conn.execute(
            "SELECT COUNT(*) FROM memories WHERE tier = 'archived' "
            "AND id NOT IN (SELECT source_id FROM summary_sources)"
        ).fetchone()[0]
        assert orphans == 0
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        archived = conn.execute("SELECT COUNT(*) FROM memories WHERE tier = 'archived'").fetchone()[0]
        return len(summaries), int(archived)
    finally:
        conn.close()


async def test_a_pass_killed_midway_leaves_whole_groups_and_another_process_takes_over(
    data_dir: Path, clock: Clock
) -> None:
    settings = load_settings(data_dir=data_dir, principal="alice", lifecycle={"lease_seconds": 60})
    async with open_server(settings, clock=clock) as runtime, Client(runtime.mcp, mode="legacy") as client:
        sizes: set[int] = set()
        for s in range(SESSIONS):
            stored = await call(
                client,
                "remember",
                {
                    "memories": [  # one decision, restated: a summary a third of its size keeps it whole
                        {"content": text, "session_id": f"s{s}"}
                        for text in (
                            f"Session {s} decided to rename build target target-{s:03d}.",
                            f"Agreed in session {s}: build target target-{s:03d} is the new name.",
                            f"Reminder from session {s}: rename the build target to target-{s:03d}.",
                            f"Once more for session {s}: the build target is renamed to target-{s:03d}.",
                        )
                    ]
                },
            )
            sizes.add(len({item["id"] for item in stored["items"]}))  # a restatement may merge
        (group,) = sizes
        now = clock() + 400 * HOUR
        child = await anyio.open_process(
            [sys.executable, "-c", CHILD, str(data_dir), str(now)],
            env={**os.environ, "MCP_MEMORY_LIFECYCLE__LEASE_SECONDS": "60"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            with anyio.fail_after(60):
                while _lease_holder(data_dir) is None:
                    assert child.returncode is None, "the child finished before it was seen holding the lease"
                    await anyio.sleep(0.005)
            holder = _lease_holder(data_dir)
            with anyio.fail_after(60):  # kill it as soon as it has written a first group, mid-pass
                while _summaries(data_dir) == 0:
                    assert child.returncode is None, "the child finished before it wrote a group"
                    await anyio.sleep(0.002)
            child.send_signal(signal.SIGKILL)
            with anyio.fail_after(10):
                await child.wait()
        finally:
            if child.returncode is None:
                child.kill()
                await child.wait()
        assert _lease_holder(data_dir) == holder  # the dead holder never released
        summaries_before, _ = _invariants(data_dir, group)
        assert 0 < summaries_before < 50  # killed mid-pass: some groups written, whole, and not all

        skipped = await runtime.scheduler.run_once(now)
        assert skipped["outcome"] == "skipped"
        taken = await runtime.scheduler.run_once(now + 61)
        assert taken["outcome"] == "done"
        summaries_after, archived = _invariants(data_dir, group)
        assert summaries_after >= summaries_before
        assert archived == group * summaries_after
