"""A crowd on one server: idle sessions cost no descriptors, running out of them is a state the
server reports once and recovers from, and what the gateway cannot take is refused as retryable."""

from __future__ import annotations

import errno
import os
import resource
import socket
import subprocess
import time
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError
from starlette.types import Message, Receive, Send
from starlette.types import Scope as ASGIScope

from mcp_memory import descriptors
from mcp_memory.compose import embedder_config
from mcp_memory.config import load_settings
from mcp_memory.core.errors import OutOfFilesError
from mcp_memory.embed import languages
from mcp_memory.embed.loader import Embedder, shared_model
from mcp_memory.http.capacity import Capacity
from mcp_memory.mcp.server import Server, open_server
from mcp_memory.storage.sqlite import SqliteStore
from tests.conftest import call
from tests.netserver import INITIALIZE, JSON_HEADERS, SERVER_BIN, NetServer, post, rpc, running, server_env

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("limit", [64, 128, 256, 1024, 4096])
def test_the_descriptor_budget_keeps_the_pool_and_the_connections_within_the_limit(limit: int) -> None:
    share = descriptors.budget(64, limit)
    assert share.connections is not None
    assert share.principals >= 1
    if limit >= 128:  # below that the reserve alone is most of it
        assert share.principals * descriptors.FDS_PER_PRINCIPAL + share.connections + descriptors.FD_RESERVE <= limit
    assert share.principals <= 64  # never past pool.max_open
    assert descriptors.budget(64, None) == descriptors.Budget(None, 64, None)


async def _settled_count(runtime: Server) -> int:
    """The process's open descriptors once the model (and its second engine) stopped opening files:
    the same count twice, 0.3 s apart."""
    with anyio.fail_after(60):
        await runtime.memory.embedder.settled()
    last = None
    with anyio.fail_after(10):
        while (count := descriptors.open_count()) != last:
            last = count
            await anyio.sleep(0.3)
    assert count is not None
    return count


def _fill_to_one_left() -> list[int]:
    """Open /dev/null until no descriptor is left, then close one: exactly one left, too few for a
    principal's database (its file, WAL and shared memory), whichever numbers were free below the
    limit (CI saw a call answered when closed files left gaps)."""
    fillers: list[int] = []
    while True:
        try:
            fillers.append(os.open(os.devnull, os.O_RDONLY))
        except OSError as exc:
            if exc.errno != errno.EMFILE:
                raise
            break
    os.close(fillers.pop())
    return fillers


async def test_out_of_descriptors_a_call_is_told_to_retry_and_the_same_call_then_succeeds(data_dir: Path) -> None:
    settings = load_settings(data_dir=data_dir, principal="late")
    async with open_server(settings, warm=False) as runtime, Client(runtime.mcp, mode="legacy") as client:
        assert isinstance(runtime.store, SqliteStore)
        assert "late" not in runtime.store.open_principals()
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        count = await _settled_count(runtime)
        resource.setrlimit(resource.RLIMIT_NOFILE, (count, hard))
        fillers = _fill_to_one_left()  # the limit caps descriptor numbers: fill the gaps below it
        try:
            answered = await client.call_tool("remember", {"content": "The boiler was serviced in May"})
        except MCPError as exc:
            refused = exc
        else:
            pytest.fail(f"answered instead of refused: {answered.content}")
        finally:
            for each in fillers:
                os.close(each)
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        assert refused.error.code == descriptors.BUSY_CODE
        message = refused.error.message
        assert "no file descriptor left" in message
        assert "retry" in message
        assert "ulimit -n" in message
        assert await call(client, "remember", {"content": "The boiler was serviced in May"})
        found = await call(client, "recall", {"query": "boiler service", "reinforce": False})
        assert [h["text"] for h in found["hits"]] == ["The boiler was serviced in May"]


async def test_a_model_not_loaded_for_want_of_descriptors_loads_at_the_next_call(data_dir: Path) -> None:
    embedder = Embedder(embedder_config(load_settings(data_dir=data_dir)), twin=False)
    model = shared_model(embedder.config)  # the process's model, loaded once: only its means open a file now
    if not (languages.FOLDER / f"{model.name}.npz").is_file():
        pytest.skip(f"{model.name} ships no language means: loading it opens no file once loaded")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    count = descriptors.open_count()
    assert count is not None
    resource.setrlimit(resource.RLIMIT_NOFILE, (count, hard))
    fillers = _fill_to_one_left()
    fillers.append(os.open(os.devnull, os.O_RDONLY))  # and that one too
    try:
        with pytest.raises(OutOfFilesError, match="no file descriptor left"):
            await embedder.ready()
    finally:
        for each in fillers:
            os.close(each)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert await embedder.ready() is model
    assert await embedder.language_means() is not None


async def test_the_gateway_refuses_requests_past_its_share_with_503_and_retry_after() -> None:
    entered, release = anyio.Event(), anyio.Event()

    async def slow(scope: ASGIScope, receive: Receive, send: Send) -> None:
        entered.set()
        await release.wait()

    capacity = Capacity(slow, 1, clock=lambda: 0.0)  # a frozen clock: one report per interval
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def receive() -> Message:
        return {"type": "http.request", "body": b""}

    async with anyio.create_task_group() as group:
        group.start_soon(capacity, {"type": "http"}, receive, send)
        await entered.wait()
        for _ in range(3):
            await capacity({"type": "http"}, receive, send)
        release.set()
    starts = [m for m in sent if m["type"] == "http.response.start"]
    assert [m["status"] for m in starts] == [503, 503, 503]
    assert all((b"retry-after", b"2") in m["headers"] for m in starts)
    body = sent[1]["body"]
    assert isinstance(body, bytes)
    assert b"at capacity" in body
    assert b"-32003" in body
    assert capacity.refused == 3
    assert capacity.in_flight == 0


@pytest.mark.slow
def test_a_server_out_of_descriptors_logs_it_once_per_interval_and_recovers_by_itself(data_dir: Path) -> None:
    """asyncio's accept loop logged a line per waiting connection every second (860,073 lines in five
    minutes); now one line per interval, with a count, and the server answers again once the
    connections that held its descriptors close."""
    with running(data_dir, "http", "--no-auth", nofile=96) as server:
        host, port = server.base.removeprefix("http://").rsplit(":", 1)
        held: list[socket.socket] = []
        try:
            held.extend(socket.create_connection((host, int(port)), timeout=5) for _ in range(160))
            time.sleep(3)  # the accept loop retries once a second: three rounds of refusals
            log = server.stderr()
            assert 1 <= log.count("out of file descriptors") <= 2, log[-3000:]
            assert "socket.accept() out of system resource" not in log
            assert "ulimit -n 96)" in log
            assert "refused accept" in log
        finally:
            for each in held:
                each.close()
        deadline = time.monotonic() + 30
        while True:  # recovered by itself: nothing restarted it
            try:
                if httpx2.get(server.base + "/health", timeout=5).status_code == 200:
                    break
            except httpx2.HTTPError:
                pass
            assert time.monotonic() < deadline, server.stderr()[-3000:]
            time.sleep(0.2)
        headers = initialize_local(server)
        listed = post(server, rpc("tools/list", {}, ident=2), headers)
        assert listed.status_code == 200
        assert b'"recall"' in listed.content


def initialize_local(server: NetServer) -> dict[str, str]:
    """A raw streamable HTTP session on a --no-auth server; the headers that continue it."""
    opened = post(server, rpc("initialize", INITIALIZE), JSON_HEADERS)
    assert opened.status_code == 200, opened.text
    headers = {**JSON_HEADERS, "mcp-session-id": opened.headers["mcp-session-id"]}
    assert post(server, rpc("notifications/initialized", ident=None), headers).status_code == 202
    return headers


@pytest.mark.slow
def test_an_idle_session_expires_and_its_id_gets_404_so_the_client_initializes_again(data_dir: Path) -> None:
    env = {"MCP_MEMORY_HTTP__SESSION_IDLE_SECONDS": "1"}
    with running(data_dir, "http", "--no-auth", env=env) as server:
        headers = initialize_local(server)
        assert post(server, rpc("tools/list", {}, ident=2), headers).status_code == 200
        deadline = time.monotonic() + 20
        while (answered := post(server, rpc("tools/list", {}, ident=3), headers)).status_code == 200:
            assert time.monotonic() < deadline, "the idle session never expired"
            time.sleep(1.5)  # each request restarts the idle clock: wait past it between polls
        assert answered.status_code == 404
        again = initialize_local(server)
        assert post(server, rpc("tools/list", {}, ident=4), again).status_code == 200


@pytest.mark.slow
def test_doctor_reports_the_descriptor_limit_against_the_pool(data_dir: Path) -> None:
    done = subprocess.run(
        [str(SERVER_BIN), "doctor"],
        env=server_env(data_dir),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256)),
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("file descriptors:")]
    assert lines == [
        "file descriptors: ulimit -n 256: up to 12 principal files open at once, lowered from pool.max_open 64, "
        "96 client connections"
    ], done.stdout + done.stderr
