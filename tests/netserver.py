"""Real network servers for tests: `mcp-memory serve --transport sse|http` as a subprocess.

The server binds port 0 and announces its address on stderr; clients are the SDK's own, over
real sockets, in either protocol generation.
"""

from __future__ import annotations

import functools
import os
import re
import resource
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import orjson
from mcp.client import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

REPO = Path(__file__).resolve().parent.parent
SERVER_BIN = REPO / ".venv" / "bin" / "mcp-memory"
_ANNOUNCE = re.compile(r"serving (\w+) on (http://[^\s\"]+)")


@dataclass
class NetServer:
    transport: str  # sse or http
    url: str  # the MCP endpoint (…/sse or …/mcp)
    process: subprocess.Popen[bytes]
    stderr_path: Path

    @property
    def base(self) -> str:
        return self.url.rsplit("/", 1)[0]

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM, as a service manager would; the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def server_env(data_dir: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_MEMORY_")}
    env.update(
        {
            "OMP_NUM_THREADS": "1",
            "MCP_MEMORY_DATA_DIR": str(data_dir),
            "MCP_MEMORY_PRINCIPAL": "local-owner",
            "MCP_MEMORY_LOG_LEVEL": "INFO",
        }
    )
    env.update(forced_model())
    env.update(extra or {})
    return env


def local_store(data_dir: Path) -> None:
    """The local owner's store (server_env's principal) with one memory, as a client's first session
    leaves it: what `mcp-memory ui` needs to show."""
    import anyio

    from mcp_memory.config import load_settings
    from mcp_memory.core.models import MemoryDraft, Scope
    from mcp_memory.mcp.server import open_server
    from mcp_memory.services.memory import CallContext

    async def run() -> None:
        async with open_server(load_settings(data_dir=data_dir, principal="local-owner"), warm=False) as runtime:
            drafts = [MemoryDraft(content="The user's cat is named Biscuit")]
            await runtime.memory.remember(Scope("local-owner"), drafts, CallContext())

    with ThreadPoolExecutor(1) as pool:  # a loop of its own, whatever runs in this thread (playwright's)
        pool.submit(anyio.run, run).result()


def forced_model() -> dict[str, str]:
    """The embedding provider CI's second run forces, for every server a test starts: two servers
    on one data directory must embed with the same model."""
    name = "MCP_MEMORY_EMBEDDING__PROVIDER"
    return {name: os.environ[name]} if name in os.environ else {}


def cli(data_dir: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run one `mcp-memory` command to completion (token create, list, revoke, ...); ``env`` as the
    server's (another storage backend)."""
    return subprocess.run(
        [str(SERVER_BIN), *args], env=server_env(data_dir, env), capture_output=True, text=True, timeout=60, check=False
    )


def create_token(data_dir: Path, principal: str, *extra: str, env: dict[str, str] | None = None) -> str:
    done = cli(data_dir, "token", "create", "--principal", principal, *extra, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def token_id(data_dir: Path, principal: str, env: dict[str, str] | None = None) -> str:
    """The id (for `token revoke`) of the principal's one live token."""
    rows = [line.split("\t") for line in cli(data_dir, "token", "list", env=env).stdout.splitlines()[1:]]
    (found,) = [row[0] for row in rows if row[1] == principal and row[3] == "live"]
    return found


def revoke(data_dir: Path, principal: str, env: dict[str, str] | None = None) -> None:
    done = cli(data_dir, "token", "revoke", token_id(data_dir, principal, env), env=env)
    assert done.returncode == 0, done.stderr


@contextmanager
def running(
    data_dir: Path,
    transport: str,
    *flags: str,
    env: dict[str, str] | None = None,
    startup_timeout: float = 60.0,
    nofile: int | None = None,
) -> Iterator[NetServer]:
    """A server on a free port; stopped with SIGTERM on exit. ``nofile``: its `ulimit -n` (soft and
    hard, as the shell's `ulimit -n` sets them)."""
    stderr_path = data_dir.parent / f"server-{transport}-{time.monotonic_ns()}.log"
    data_dir.mkdir(parents=True, exist_ok=True)
    with stderr_path.open("wb") as sink:
        process = subprocess.Popen(
            [str(SERVER_BIN), "serve", "--transport", transport, "--port", "0", *flags],
            env=server_env(data_dir, env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=sink,
            preexec_fn=None if nofile is None else functools.partial(_limit_files, nofile),
        )
    server = None
    try:
        deadline = time.monotonic() + startup_timeout
        while server is None:
            text = stderr_path.read_text(errors="replace")
            if (found := _ANNOUNCE.search(text)) is not None:
                server = NetServer(found.group(1), found.group(2), process, stderr_path)
            elif process.poll() is not None:
                raise AssertionError(f"server exited with {process.returncode}:\n{text}")
            elif time.monotonic() > deadline:
                raise AssertionError(f"server did not start in {startup_timeout} s:\n{text}")
            else:
                time.sleep(0.05)
        yield server
    finally:
        if server is not None:
            server.stop()
        elif process.poll() is None:
            process.kill()
            process.wait()


def _limit_files(nofile: int) -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))


@asynccontextmanager
async def connect(
    server: NetServer, token: str | None, mode: str, headers: dict[str, str] | None = None, **client: Any
) -> AsyncIterator[Client]:
    """The SDK client on the server's transport, in the given protocol generation (``client``: more
    Client arguments, such as a message handler)."""
    sent = dict(headers or {})
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    if server.transport == "sse":
        async with Client(sse_client(server.url, headers=sent), mode=mode, **client) as connected:
            yield connected
        return
    async with (
        create_mcp_http_client(headers=sent) as http,
        Client(streamable_http_client(server.url, http_client=http), mode=mode, **client) as connected,
    ):
        yield connected


def post(
    server: NetServer, body: bytes | Iterator[bytes], headers: dict[str, str], path: str | None = None
) -> httpx2.Response:
    """One raw HTTP POST, for what no well-behaved client would send (an iterator is sent chunked)."""
    url = server.base + path if path else server.url
    with httpx2.Client(timeout=30) as http:
        return http.post(url, content=body, headers=headers)


JSON_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def rpc(method: str, params: dict[str, Any] | None = None, ident: int | None = 1) -> bytes:
    """One JSON-RPC message; a notification when `ident` is None."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    if ident is not None:
        message["id"] = ident
    return orjson.dumps(message)


INITIALIZE = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}


def initialize(server: NetServer, token: str) -> dict[str, str]:
    """A raw streamable HTTP session: initialize and initialized; the headers that continue it."""
    params = INITIALIZE
    headers = {**JSON_HEADERS, "authorization": f"Bearer {token}"}
    opened = post(server, rpc("initialize", params), headers)
    assert opened.status_code == 200, opened.text
    if session := opened.headers.get("mcp-session-id"):
        headers["mcp-session-id"] = session
    assert post(server, rpc("notifications/initialized", ident=None), headers).status_code == 202
    return headers


def answer(response: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC message of a response sent as JSON or as one server-sent event."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
        assert len(data) == 1, response.text
        found: dict[str, Any] = orjson.loads(data[0])
        return found
    parsed: dict[str, Any] = response.json()
    return parsed


@dataclass
class SseSession:
    """A raw SSE session: POST to `path` with `headers`; the answers arrive on the open stream."""

    path: str  # /messages/?session_id=...
    headers: dict[str, str]
    lines: AsyncIterator[str]

    async def next_message(self) -> dict[str, Any]:
        async for line in self.lines:
            if line.startswith("data:"):
                message: dict[str, Any] = orjson.loads(line[5:])
                return message
        raise AssertionError("the event stream ended")


@asynccontextmanager
async def sse_session(server: NetServer, token: str) -> AsyncIterator[SseSession]:
    """Open the event stream, learn the message endpoint, initialize."""
    auth = {"authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(timeout=30) as http, http.stream("GET", server.url, headers=auth) as stream:
        lines = stream.aiter_lines()
        endpoint = ""
        async for line in lines:
            if line.startswith("data:"):
                endpoint = line[5:].strip()
                break
        session = SseSession(endpoint, {**JSON_HEADERS, **auth}, lines)
        assert post(server, rpc("initialize", INITIALIZE), session.headers, endpoint).status_code == 202
        assert "result" in await session.next_message()
        assert post(server, rpc("notifications/initialized", ident=None), session.headers, endpoint).status_code == 202
        yield session


def get(server: NetServer, path: str, headers: dict[str, str] | None = None) -> httpx2.Response:
    with httpx2.Client(timeout=30) as http:
        return http.get(server.base + path, headers=headers or {})
