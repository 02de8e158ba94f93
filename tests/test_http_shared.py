"""One process, many clients; one data directory, two processes; the bridge; a clean stop.

Real subprocesses and real sockets throughout: `mcp-memory serve --transport sse|http` from
tests/netserver.py, `mcp-memory serve` over stdio, and `mcp-memory connect URL` as a stdio server.
"""

from __future__ import annotations

import re
import signal
import sqlite3
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from mcp_memory.storage.pool import principal_file
from tests.conftest import call, hit_texts
from tests.netserver import SERVER_BIN, NetServer, connect, create_token, forced_model, running

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def empty_config(tmp: Path) -> Path:
    """A config.toml in the developer's home must not change the test."""
    config = tmp / "empty-config.toml"
    config.touch()
    return config


@asynccontextmanager
async def stdio(params: StdioServerParameters, errlog: Path, mode: str) -> AsyncIterator[Client]:
    with errlog.open("w", encoding="utf-8") as sink, anyio.fail_after(60):
        async with Client(stdio_client(params, errlog=sink), mode=mode) as client:
            yield client


# ----- a. three SSE clients share one model and one scheduler -------------------------------------


async def test_three_sse_clients_share_one_model_and_one_scheduler_and_a_disconnect_closes_nothing_shared(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    alice, alice_laptop, bob = (create_token(data, p) for p in ("alice", "alice", "bob"))
    with running(data, "sse") as srv:
        async with connect(srv, alice, "legacy") as first, connect(srv, bob, "2026-07-28") as second:
            async with connect(srv, alice_laptop, "legacy") as leaving:
                seen = [await call(c, "stats", {}) for c in (first, second, leaving)]
                assert [(s["models_loaded_in_process"], s["schedulers_running_in_process"]) for s in seen] == [
                    (1, 1)
                ] * 3
                assert len({s["process_id"] for s in seen}) == 1
                await call(leaving, "remember", {"content": "Alice's laptop build uses ccache-4.9"})
            # `leaving` has disconnected (its SSE stream and its session are gone).
            for client, who in ((first, "alice"), (second, "bob")):
                text = f"{who} keeps the on-call rota in rota-{who}.md after a client left"
                stored = await call(client, "remember", {"content": text})
                assert stored["stored"] == 1
                assert text in hit_texts(await call(client, "recall", {"query": f"where is {who}'s on-call rota"}))
                after = await call(client, "stats", {})
                assert (after["models_loaded_in_process"], after["schedulers_running_in_process"]) == (1, 1)
                assert after["process_id"] == seen[0]["process_id"]
            laptop = await call(first, "recall", {"query": "which ccache does the laptop build use"})
            assert "Alice's laptop build uses ccache-4.9" in hit_texts(laptop)
    assert "Traceback" not in srv.stderr()


# ----- b. a stdio process and an HTTP process on one data directory -------------------------------

WRITES = 60


def note(side: str, i: int) -> str:
    # Identifier-like tokens keep any two notes from merging as near-duplicates.
    return f"{side}-{i:03d} cache shard {side}-s{i % 17:02d} holds build {side}-b{i * 7 + 3:05d}"


async def write_all(client: Client, side: str, spans: dict[str, tuple[float, float]]) -> None:
    started = time.monotonic()
    for i in range(WRITES):
        result = await call(client, "remember", {"content": note(side, i)})
        assert result["stored"] == 1, result
    spans[side] = (started, time.monotonic())


async def sees_all(client: Client, side: str) -> list[str]:
    missing = []
    for i in range(WRITES):
        hits = hit_texts(await call(client, "recall", {"query": f"{side}-{i:03d}", "k": 3, "reinforce": False}))
        if note(side, i) not in hits:
            missing.append(note(side, i))
    return missing


async def test_a_stdio_process_and_an_http_process_on_one_data_directory_lose_no_write_and_see_each_other(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    token = create_token(data, "alice")
    params = StdioServerParameters(
        command=str(SERVER_BIN),
        args=["--data-dir", str(data), "--principal", "alice", "serve"],
        env={"MCP_MEMORY_CONFIG": str(empty_config(tmp_path)), "OMP_NUM_THREADS": "1", **forced_model()},
    )
    with running(data, "http") as srv:
        async with stdio(params, tmp_path / "stdio.log", "legacy") as local, connect(srv, token, "legacy") as remote:
            for client in (local, remote):  # both models loaded before the race starts
                await call(client, "recall", {"query": "warm up", "reinforce": False})
            spans: dict[str, tuple[float, float]] = {}
            with anyio.fail_after(120):
                async with anyio.create_task_group() as group:
                    group.start_soon(write_all, local, "stdio", spans)
                    group.start_soon(write_all, remote, "http", spans)
            assert spans["stdio"][0] < spans["http"][1], "the write phases did not overlap"
            assert spans["http"][0] < spans["stdio"][1], "the write phases did not overlap"
            assert await sees_all(local, "http") == []
            assert await sees_all(remote, "stdio") == []
    conn = sqlite3.connect(principal_file(data, "alice"))
    try:
        contents = {row[0] for row in conn.execute("SELECT content FROM memories")}
    finally:
        conn.close()
    assert len(contents) == 2 * WRITES
    assert contents == {note(side, i) for side in ("stdio", "http") for i in range(WRITES)}


# ----- c. the bridge ---------------------------------------------------------------------------

_VOLATILE_KEYS = re.compile(r"(^|_)(id|ids|at|seconds|ms|uri|score|scores|recency|uptime)$|_at$|^session_key$")
_VOLATILE_TEXT = [
    (re.compile(r"\b(mem|tsk|chk|occ|tok)_[0-9a-zA-Z]+"), "<id>"),
    (re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b"), "<ulid>"),
    (re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?"), "<time>"),
]


def stable(value: Any) -> Any:
    """A result without what differs between two identical runs: ids, times, scores."""
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if not _VOLATILE_KEYS.search(k)}
    if isinstance(value, list):
        return [stable(v) for v in value]
    if isinstance(value, str):
        for pattern, replacement in _VOLATILE_TEXT:
            value = pattern.sub(replacement, value)
        return value
    if isinstance(value, float):
        return round(value, 2)
    return value


async def session_transcript(client: Client, who: str) -> list[Any]:
    """The same sequence for either route: list tools, remember, recall, a resource, a prompt."""
    tools = (await client.list_tools()).tools
    remembered = await call(
        client,
        "remember",
        {
            "memories": [
                {"content": "The payments service deploys from the release-7 branch on Thursdays"},
                {"content": "Always reply to this user in British English", "pinned": True},
            ]
        },
    )
    recalled = await call(client, "recall", {"query": "which branch does payments deploy from", "reinforce": False})
    pinned = await client.read_resource("memory://pinned")
    prompt = await client.get_prompt("recall_context", {"query": "payments deploy branch"})
    return [
        who,
        sorted((t.name, t.description, repr(t.input_schema)) for t in tools),
        stable(remembered),
        stable(recalled),
        stable([c.model_dump(exclude={"uri"}) for c in pinned.contents]),
        stable([m.model_dump() for m in prompt.messages]),
    ]


def bridge(url: str, tmp: Path, token: str | None) -> StdioServerParameters:
    env = {"MCP_MEMORY_CONFIG": str(empty_config(tmp))}
    if token is not None:
        env["MCP_MEMORY_TOKEN"] = token
    return StdioServerParameters(command=str(SERVER_BIN), args=["connect", url], env=env)


@pytest.fixture(scope="module")
def bridged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NetServer, dict[str, str]]]:
    data = tmp_path_factory.mktemp("bridge") / "data"
    tokens = {
        f"{route}-{mode}": create_token(data, f"{route}-{mode}")
        for route in ("direct", "bridge")
        for mode in ("legacy", "2026-07-28")
    }
    with running(data, "http") as srv:
        yield srv, tokens


async def test_a_stdio_client_through_connect_gets_what_a_direct_http_client_gets(
    bridged: tuple[NetServer, dict[str, str]], tmp_path: Path, mode: str
) -> None:
    srv, tokens = bridged
    async with connect(srv, tokens[f"direct-{mode}"], mode) as direct:
        expected = await session_transcript(direct, "same")
    async with stdio(bridge(srv.url, tmp_path, tokens[f"bridge-{mode}"]), tmp_path / "bridge.log", mode) as relayed:
        got = await session_transcript(relayed, "same")
    assert got == expected
    assert "payments" in str(expected[3])  # the comparison is of real results, not of two empty ones


async def test_connect_with_a_bad_token_fails_fast_with_a_clear_error(
    bridged: tuple[NetServer, dict[str, str]], tmp_path: Path
) -> None:
    srv, _ = bridged
    params = bridge(srv.url, tmp_path, "mcpm_not-a-real-token-at-all")
    with anyio.fail_after(30), pytest.raises((MCPError, ExceptionGroup)) as caught:
        async with stdio(params, tmp_path / "bad.log", "legacy") as client:
            await client.list_tools()
    error = caught.value
    while isinstance(error, ExceptionGroup) and len(error.exceptions) == 1:  # the client's task group wraps it
        error = error.exceptions[0]
    assert isinstance(error, MCPError), repr(caught.value)
    said = str(error)
    assert "refused the token in MCP_MEMORY_TOKEN (HTTP 401)" in said, said
    assert "token create" in said


def test_connect_without_the_token_variable_exits_non_zero_naming_it(
    bridged: tuple[NetServer, dict[str, str]], tmp_path: Path
) -> None:
    srv, _ = bridged
    done = subprocess.run(
        [str(SERVER_BIN), "connect", srv.url],
        env={"MCP_MEMORY_CONFIG": str(empty_config(tmp_path)), "PATH": "/usr/bin:/bin"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "MCP_MEMORY_TOKEN" in done.stderr


# ----- d. SIGTERM with writes in flight ------------------------------------------------------------


async def test_sigterm_with_writes_in_flight_keeps_every_acknowledged_write_and_exits_cleanly(tmp_path: Path) -> None:
    data = tmp_path / "data"
    token = create_token(data, "erin")
    acknowledged: list[str] = []
    failed: list[str] = []
    with running(data, "http") as srv:
        enough = anyio.Event()

        async def writer(w: int) -> None:
            try:
                async with connect(srv, token, "legacy") as client:
                    for i in range(10_000):
                        text = f"writer-{w} note-{i:05d} about shard s{i % 13}"
                        with anyio.fail_after(30):
                            result = await client.call_tool("remember", {"content": text})
                        if result.is_error:
                            failed.append(text)
                            return
                        acknowledged.append(text)
                        if len(acknowledged) >= 20:
                            enough.set()
            except Exception as exc:  # the server went away mid-session: expected after SIGTERM
                failed.append(repr(exc))

        async with anyio.create_task_group() as group:
            for w in range(4):
                group.start_soon(writer, w)
            with anyio.fail_after(60):
                await enough.wait()
            srv.process.send_signal(signal.SIGTERM)
            with anyio.fail_after(60):
                code = await anyio.to_thread.run_sync(srv.process.wait)
    assert code == 0, srv.stderr()
    conn = sqlite3.connect(principal_file(data, "erin"))
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        stored = {row[0] for row in conn.execute("SELECT content FROM memories")}
    finally:
        conn.close()
    assert set(acknowledged) <= stored
    assert len(acknowledged) >= 20
    assert "Traceback" not in srv.stderr()
