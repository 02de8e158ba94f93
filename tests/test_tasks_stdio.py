"""Task state through real `mcp-memory serve` processes: restarts, a second process, SIGKILL, secrets, the limit.

Each test starts the server as a subprocess with stderr captured (tests/test_stdio.py) and speaks
MCP to it over stdio. What an agent relies on: a task checkpointed by one process resumes intact
in another; a checkpoint acknowledged before a crash is never lost or torn; secrets never reach
the data files or the logs; a checkpoint of exactly the size limit round-trips and one byte more
is refused without touching the stored state.
"""

from __future__ import annotations

import os
import random
import re
import secrets
import signal
import sqlite3
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError

from mcp_memory.core.envelope import MAGIC
from tests.conftest import call, call_error
from tests.test_secrets import data_files, random_part
from tests.test_stdio import BIN, SERVER, spawn_server

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

LIMIT = 1_048_576
TREE: dict[str, Any] = {
    "id": "root",
    "title": "Migrate billing to v2",
    "status": "in_progress",
    "blocked_reason": None,
    "notes": "owner: platform team",
    "children": [
        {
            "id": "schema",
            "title": "Write the schema migration",
            "status": "done",
            "blocked_reason": None,
            "notes": None,
            "children": [],
        },
        {
            "id": "staging",
            "title": "Deploy to staging",
            "status": "in_progress",
            "blocked_reason": None,
            "notes": "blue/green",
            "children": [
                {
                    "id": "smoke",
                    "title": "Run the smoke tests",
                    "status": "in_progress",
                    "blocked_reason": None,
                    "notes": None,
                    "children": [],
                },
                {
                    "id": "dns",
                    "title": "Switch DNS",
                    "status": "blocked",
                    "blocked_reason": "waiting for the DNS team",
                    "notes": None,
                    "children": [],
                },
            ],
        },
        {
            "id": "email",
            "title": "Email customers",
            "status": "pending",
            "blocked_reason": None,
            "notes": None,
            "children": [],
        },
    ],
}
VARIABLES: dict[str, Any] = {
    "branch": "release-2.0",
    "batch": 3,
    "ratio": 0.375,
    "done_batches": [1, 2, 3],
    "regions": {"eu": "migrated", "us": None, "中国": "待迁移"},
    "dry_run": False,
}

# Words the redactor leaves alone (no "key", "token", "bearer", "://"...), in three scripts and with emoji.
WORDS = (
    "ledger invoice shard batch customer rollout staging migrate verify schema replica cutover window "
    "rollback queue worker cache index report tenant region export archive retry backfill "
    "迁移 账单 客户 批次 验证 回滚 分片 报告 café naïve Zürich façade smörgåsbord 🙂 ✓ →"
).split()


def varied_text(seed: int, n_bytes: int) -> str:
    """Exactly ``n_bytes`` of UTF-8: lines of mixed-script words and numbers, reproducible from ``seed``."""
    rng = random.Random(seed)
    parts: list[str] = []
    size = 0
    while True:
        line = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 16))) + f" #{rng.randint(0, 10**6)}\n"
        if size + len(line.encode()) > n_bytes:
            break
        parts.append(line)
        size += len(line.encode())
    parts.append("." * (n_bytes - size))
    return "".join(parts)


def killable(pid_file: Path) -> list[str]:
    """`mcp-memory` through a shim that records its pid and then execs the server in place (same pid)."""
    shim = (
        "import os, pathlib, sys; pathlib.Path(sys.argv[1]).write_text(str(os.getpid())); "
        "os.execv(sys.argv[2], sys.argv[2:])"
    )
    return [str(BIN / "python"), "-c", shim, str(pid_file), str(SERVER)]


async def read_text(client: Client, uri: str) -> str:
    content = (await client.read_resource(uri)).contents[0]
    text = getattr(content, "text", None)
    assert isinstance(text, str), content
    return text


async def read_json(client: Client, uri: str) -> dict[str, Any]:
    value: dict[str, Any] = orjson.loads(await read_text(client, uri))
    return value


# ----- 1. one process checkpoints, another resumes ---------------------------------------------

SNAPSHOT_300K = 300_000


def assert_intact(packet: dict[str, Any], variables: dict[str, Any], current: str, snapshot: str) -> None:
    assert packet["warnings"] == []
    assert packet["goal"] == "Move every customer to billing v2 without downtime"
    assert packet["constraints"] == ["no downtime", "keep invoices identical"]
    assert packet["current_node"]["id"] == current
    assert f"{current}: " in packet["tree"]
    assert packet["tree"].count("<- current") == 1
    assert "[x] schema: Write the schema migration" in packet["tree"]
    assert "[!] dns: Switch DNS (blocked: waiting for the DNS team)" in packet["tree"]
    assert packet["variables"] == variables
    assert packet["snapshot_chars"] == len(snapshot)
    assert snapshot.startswith(packet["snapshot_excerpt"])


async def assert_full_state(
    client: Client, packet: dict[str, Any], variables: dict[str, Any], current: str, snapshot: str
) -> None:
    """The resume packet, the full checkpoint behind `full_checkpoint_uri` and the head resource agree."""
    assert_intact(packet, variables, current, snapshot)
    uri = packet["full_checkpoint_uri"]
    assert uri == f"memory://tasks/billing-v2/checkpoints/{packet['checkpoint']['id']}"
    full = await read_json(client, uri)
    assert full["checkpoint"] == packet["checkpoint"]
    assert full["head"]["tree"] == TREE
    assert full["head"]["current_node"] == current
    assert full["head"]["variables"] == variables
    assert full["snapshot"] == snapshot
    markdown = await read_text(client, "memory://tasks/billing-v2")
    assert f"- current node: {current}\n" in markdown
    fence = "`" * max([3, *(len(run) + 1 for run in re.findall("`+", snapshot))])  # longer than any inside
    assert markdown.endswith(f"## Snapshot\n\n{fence}text\n{snapshot}\n{fence}\n")
    assert orjson.loads(markdown.split("## Variables\n\n```json\n", 1)[1].split("\n```", 1)[0]) == variables


async def test_a_task_resumes_intact_in_a_fresh_process_and_in_a_concurrent_one(tmp_path: Path, mode: str) -> None:
    data_dir = tmp_path / "data"
    snapshot = varied_text(1, SNAPSHOT_300K)
    async with spawn_server(tmp_path, mode, data_dir=data_dir, run=0) as (first, _):
        saved = await call(
            first,
            "checkpoint",
            {
                "task_id": "billing-v2",
                "goal": "Move every customer to billing v2 without downtime",
                "constraints": ["no downtime", "keep invoices identical"],
                "tree": TREE,
                "current_node": "smoke",
                "variables": VARIABLES,
                "snapshot": snapshot,
                "reason": "phase_change",
            },
        )
    assert saved["created_task"] is True
    assert saved["serialized_size"] > SNAPSHOT_300K

    # The first process has exited: a freshly started one resumes the task.
    async with spawn_server(tmp_path, mode, data_dir=data_dir, run=1) as (fresh, _):
        packet = await call(fresh, "resume", {"task_id": "billing-v2"})
        assert packet["checkpoint"]["id"] == saved["checkpoint"]["id"]
        await assert_full_state(fresh, packet, VARIABLES, "smoke", snapshot)

        # A second process on the same data directory while the first is alive: it resumes the same
        # state, moves the cursor, and the first process sees the move.
        async with spawn_server(tmp_path, mode, data_dir=data_dir, run=2) as (other, _):
            packet = await call(other, "resume", {"task_id": "billing-v2"})
            await assert_full_state(other, packet, VARIABLES, "smoke", snapshot)
            moved_vars = {**VARIABLES, "batch": 4, "done_batches": [1, 2, 3, 4]}
            moved_snapshot = varied_text(2, SNAPSHOT_300K)
            moved = await call(
                other,
                "checkpoint",
                {
                    "task_id": "billing-v2",
                    "current_node": "email",
                    "variables": moved_vars,
                    "snapshot": moved_snapshot,
                    "expected_head": packet["head_seq"],
                    "reason": "node_completed",
                },
            )
            seen = await call(fresh, "resume", {"task_id": "billing-v2"})
            assert seen["head_seq"] == moved["head_seq"] == packet["head_seq"] + 1
            assert seen["checkpoint"]["id"] == moved["checkpoint"]["id"]
            await assert_full_state(fresh, seen, moved_vars, "email", moved_snapshot)
            # The first checkpoint is still there, whole, for a rollback.
            old = await read_json(other, f"memory://tasks/billing-v2/checkpoints/{saved['checkpoint']['id']}")
            assert old["snapshot"] == snapshot
            assert old["head"]["current_node"] == "smoke"


# ----- 2. SIGKILL during a burst of checkpoints ------------------------------------------------

BURST_SNAPSHOT = 24_000


@dataclass(frozen=True)
class Acknowledged:
    i: int
    id: str
    seq: int
    checksum: str


def burst_args(seed: int, i: int) -> dict[str, Any]:
    return {
        "task_id": "burst",
        "variables": {"i": i, "batch": f"batch-{i:05d}", "nonce": f"{seed:08x}-{i}"},
        "snapshot": varied_text(seed + i, BURST_SNAPSHOT),
        "iterations": i,
        "reason": "node_completed",
    }


async def test_every_acknowledged_checkpoint_survives_a_sigkill_mid_burst(tmp_path: Path, mode: str) -> None:
    seed = secrets.randbits(32)
    rng = random.Random(seed)
    arm_after = rng.randint(6, 30)  # acknowledged checkpoints before the kill is armed
    jitter = rng.uniform(0.0, 0.05)  # then a random point inside the following checkpoints' lives
    why = f"seed {seed}: kill armed after {arm_after} acknowledgements, {jitter * 1000:.1f} ms later"
    pid_file = tmp_path / "server.pid"
    sent: dict[int, dict[str, Any]] = {}
    acked: list[Acknowledged] = []
    armed = anyio.Event()
    lost: list[BaseException] = []

    async with spawn_server(tmp_path, mode, command=killable(pid_file), run=0) as (client, doomed):
        await call(client, "checkpoint", {"task_id": "burst", "goal": "survive a crash", "tree": TREE})
        pid = int(pid_file.read_text())

        async def burst() -> None:
            for i in range(1, 100_000):
                sent[i] = burst_args(seed, i)
                try:
                    result = await client.call_tool("checkpoint", sent[i])
                except MCPError as exc:  # the connection died with the server
                    lost.append(exc)
                    return
                assert not result.is_error, (why, result.content)
                content = result.structured_content
                assert content is not None
                acked.append(
                    Acknowledged(i, content["checkpoint"]["id"], content["head_seq"], content["checkpoint"]["checksum"])
                )
                if len(acked) == arm_after:
                    armed.set()

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(burst)
                await armed.wait()
                await anyio.sleep(jitter)  # not coordination: where the kill lands is meant to be random
                os.kill(pid, signal.SIGKILL)
    assert [str(e) for e in lost] == ["Connection closed"], why
    assert len(acked) >= arm_after
    assert "Traceback" not in doomed.stderr()

    async with spawn_server(tmp_path, mode, run=1) as (client, fresh):
        listing = (await call(client, "list_checkpoints", {"task_id": "burst", "limit": 200}))["checkpoints"]
        listed = {c["id"]: c for c in listing}
        for ack in acked:
            assert ack.id in listed, (why, ack)
            assert (listed[ack.id]["seq"], listed[ack.id]["checksum"]) == (ack.seq, ack.checksum), why
            full = await read_json(client, f"memory://tasks/burst/checkpoints/{ack.id}")
            assert full["checkpoint"]["checksum"] == ack.checksum, why
            assert full["head"]["variables"] == sent[ack.i]["variables"], why
            assert full["head"]["iterations"] == ack.i, why
            assert full["snapshot"] == sent[ack.i]["snapshot"], why
        packet = await call(client, "resume", {"task_id": "burst"})
        last = acked[-1]
        # The kill can land after SQLite committed a checkpoint but before its response reached
        # us: then the head is that one, one past the last acknowledged. A process kill does not
        # lose committed WAL frames (they are in the OS page cache, synchronous=NORMAL or not),
        # so the head is never older than the last acknowledgement.
        assert packet["head_seq"] in (last.seq, last.seq + 1), why
        pending = last.i + (packet["head_seq"] - last.seq)
        assert packet["variables"] == sent[pending]["variables"], why
        assert packet["iterations"] == pending, why
        assert packet["checkpoint"]["seq"] == packet["head_seq"], why
        assert [c["seq"] for c in listing] == list(range(packet["head_seq"], 0, -1)), why
        assert packet["warnings"] == [], why
    assert "corrupt" not in fresh.stderr().lower()
    conn = sqlite3.connect(fresh.db_file)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()


# ----- 3. secrets in every task field ---------------------------------------------------------


def readable(path: Path) -> list[bytes]:
    """A data file's bytes, and the inflated snapshot of every checkpoint envelope in it.

    Snapshots are stored zlib-compressed, so a search of the raw bytes alone could never find a
    secret in one. A small envelope lies whole inside one page of the file or of a WAL frame.
    """
    raw = path.read_bytes()
    found = [raw]
    start = raw.find(MAGIC)
    while start != -1:
        header_end = raw.find(b"\n", start + len(MAGIC))
        try:
            header = orjson.loads(raw[start + len(MAGIC) : header_end])
            body = header_end + 1 + int(header["structured_bytes"])
            found.append(zlib.decompressobj().decompress(raw[body : body + int(header["snapshot_bytes"])]))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, zlib.error):
            pass  # a torn copy (a reused page, an old WAL frame): its raw bytes are searched all the same
        start = raw.find(MAGIC, start + 1)
    return found


def files_revealing(data_dir: Path, needles: dict[str, str]) -> dict[str, list[str]]:
    """For each named needle, the data files whose bytes or inflated snapshots contain it."""
    found: dict[str, list[str]] = {}
    for path in sorted(p for p in data_dir.rglob("*") if p.is_file()):
        haystacks = readable(path)
        for name, needle in needles.items():
            if any(needle.encode() in h for h in haystacks):
                found.setdefault(name, []).append(path.name)
    return found


async def test_secrets_in_a_checkpoint_never_reach_the_data_files_or_the_logs(tmp_path: Path, mode: str) -> None:
    canaries = {
        "innocent-key": random_part(40),
        "api_key": random_part(32),
        "argument-bearer": random_part(32),
        "result-key": random_part(40),
        "snapshot-password": random_part(24),
        "goal-key": random_part(40),
        "error-key": random_part(40),
    }
    plain = f"zqplain{secrets.token_hex(6)}"  # not a secret: stored everywhere it was sent
    in_snapshot = f"zqsnap{secrets.token_hex(6)}"  # only in the snapshot: proves the search inflates it
    args: dict[str, Any] = {
        "task_id": "deploy",
        "goal": f"Deploy {plain} with the key sk-proj-{canaries['goal-key']}",
        "tree": {"id": "root", "title": "Deploy", "children": [{"id": "push", "title": "Push"}]},
        "current_node": "push",
        "variables": {
            "deploy_note": f"sk-proj-{canaries['innocent-key']}",
            "api_key": canaries["api_key"],
            "marker": plain,
        },
        "last_tool_calls": [
            {
                "name": "http",
                "arguments": {
                    "curl": f"curl -H 'Authorization: Bearer {canaries['argument-bearer']}' https://api.example.com",
                    "marker": plain,
                },
                "result": f"created the key sk-proj-{canaries['result-key']} for {plain}",
            }
        ],
        "snapshot": f"Working notes {in_snapshot}. Log in with password={canaries['snapshot-password']} then push.",
    }
    async with spawn_server(tmp_path, mode, env={"MCP_MEMORY_LOG_LEVEL": "DEBUG"}) as (client, server):
        await call(client, "checkpoint", args)
        await call(client, "checkpoint", {**args, "iterations": 2})
        packet = await call(client, "resume", {"task_id": "deploy"})
        full = await read_text(client, packet["full_checkpoint_uri"])
        # A failing call whose error message quotes a key and the plain marker (to the client only).
        failed = await call_error(client, "resume", {"task_id": f"{plain} sk-proj-{canaries['error-key']}"})
        assert plain in failed
        # A key inside a node id is refused outright, naming the field and quoting nothing.
        refused = await call_error(
            client, "checkpoint", {"task_id": "deploy", "current_node": f"{plain} sk-proj-{canaries['error-key']}"}
        )
        assert "current_node" in refused
        assert plain not in refused
        while_running = files_revealing(server.data_dir, {**canaries, "plain": plain, "in-snapshot": in_snapshot})
        assert {".db", "-wal", "-shm"} <= data_files(server.data_dir)  # the WAL is live and was searched
    after_exit = files_revealing(server.data_dir, {**canaries, "plain": plain, "in-snapshot": in_snapshot})
    stderr = server.stderr()

    # Positive controls: the searches find what is really there, the snapshot's marker included.
    for found in (while_running, after_exit):
        assert "plain" in found
        assert "in-snapshot" in found
    assert " DEBUG " in stderr  # the log was written, at its most talkative level
    assert plain not in stderr  # no log line carries what was stored or asked (logs.LIBRARY_FLOORS)

    assert {name: files for name, files in while_running.items() if name in canaries} == {}
    assert {name: files for name, files in after_exit.items() if name in canaries} == {}
    assert [name for name, secret in canaries.items() if secret in stderr] == []
    # What the server hands back is the redacted state, its shape intact.
    assert [name for name, secret in canaries.items() if secret in str(packet) or secret in full] == []
    assert packet["variables"]["marker"] == plain
    assert packet["variables"]["api_key"] == "[REDACTED:secret]"
    assert "Working notes" in packet["snapshot_excerpt"]


# ----- 4. the checkpoint size limit -----------------------------------------------------------


async def test_a_checkpoint_of_exactly_the_limit_round_trips_and_one_byte_more_changes_nothing(
    tmp_path: Path, mode: str
) -> None:
    async with spawn_server(tmp_path, mode) as (client, _):
        base = await call(
            client,
            "checkpoint",
            {"task_id": "big", "goal": "hold a big snapshot", "tree": TREE, "variables": VARIABLES, "snapshot": ""},
        )
        room = LIMIT - base["serialized_size"]
        snapshot = varied_text(4, room)
        assert len(snapshot.encode()) == room
        assert len(snapshot) < room  # multi-byte characters: the limit counts bytes, not characters
        fits = await call(client, "checkpoint", {"task_id": "big", "snapshot": snapshot})
        assert fits["serialized_size"] == LIMIT
        uri = f"memory://tasks/big/checkpoints/{fits['checkpoint']['id']}"
        full = await read_json(client, uri)
        assert full["snapshot"].encode() == snapshot.encode()
        assert full["head"]["variables"] == VARIABLES

        before = (
            await call(client, "list_checkpoints", {"task_id": "big"}),
            await read_text(client, "memory://tasks/big"),
            await read_text(client, uri),
        )
        message = await call_error(client, "checkpoint", {"task_id": "big", "snapshot": snapshot + "."})
        assert "limits.max_checkpoint_bytes = 1048576" in message
        assert f"{LIMIT + 1} bytes" in message
        after = (
            await call(client, "list_checkpoints", {"task_id": "big"}),
            await read_text(client, "memory://tasks/big"),
            await read_text(client, uri),
        )
        assert after == before
        packet = await call(client, "resume", {"task_id": "big"})
        assert packet["head_seq"] == fits["head_seq"]
        assert packet["snapshot_chars"] == len(snapshot)
        assert packet["checkpoint"]["id"] == fits["checkpoint"]["id"]
