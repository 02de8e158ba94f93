"""The real thing: `mcp-memory serve` as a subprocess, spoken to over stdio in both protocol generations.

Every item the server writes to stdout is recorded: a log line or a stray print there would corrupt
the protocol for clients stricter than this SDK (which logs and skips a non-JSON line).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest
from mcp.client import Client
from mcp.client._transport import ReadStream, TransportStreams
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.message import SessionMessage

from mcp_memory.mcp.stdio import ForwardingReadStream
from mcp_memory.storage.pool import principal_file
from tests.conftest import call, call_error, hit_texts
from tests.readme_configs import readme_client_configs

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

BIN = Path(sys.executable).parent
SERVER = BIN / "mcp-memory"
REPO = Path(__file__).resolve().parents[1]
PRINCIPAL = "stdio-user"


class TappedReadStream(ForwardingReadStream):
    """The client's read stream, recording every item parsed from the server's stdout."""

    def __init__(self, inner: ReadStream[SessionMessage | Exception], seen: list[SessionMessage | Exception]) -> None:
        super().__init__(inner)
        self._seen = seen

    async def receive(self) -> SessionMessage | Exception:
        item = await self._inner.receive()
        self._seen.append(item)
        return item


@dataclass
class StdioServer:
    """One `mcp-memory serve` subprocess: its data directory, captured stderr and stdout items."""

    data_dir: Path
    stderr_path: Path
    stdout_items: list[SessionMessage | Exception] = field(default_factory=list)

    @property
    def db_file(self) -> Path:
        return principal_file(self.data_dir, PRINCIPAL)

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def stray_stdout(self) -> list[Exception]:
        return [item for item in self.stdout_items if isinstance(item, Exception)]


def server_params(
    data_dir: Path, config: Path, env: dict[str, str] | None = None, command: Sequence[str] | None = None
) -> StdioServerParameters:
    argv = [*(command or [str(SERVER)]), "--data-dir", str(data_dir), "--principal", PRINCIPAL, "serve"]
    # An empty config file: a config.toml in the developer's home must not change the test. The
    # client passes on only a few variables: PYTHONPATH makes the server run this checkout's code,
    # not whichever the environment's entry point was installed from (another worktree's).
    base = {"MCP_MEMORY_CONFIG": str(config), "PYTHONPATH": str(REPO)}
    return StdioServerParameters(command=argv[0], args=argv[1:], env={**base, **(env or {})})


@asynccontextmanager
async def spawn_server(
    tmp_path: Path,
    mode: str,
    *,
    env: dict[str, str] | None = None,
    command: Sequence[str] | None = None,
    data_dir: Path | None = None,
    run: int = 0,
) -> AsyncIterator[tuple[Client, StdioServer]]:
    """Start `mcp-memory serve` with stderr captured to a file; stop it (stdin closed) on exit."""
    config = tmp_path / "empty-config.toml"
    config.touch()
    server = StdioServer(data_dir or tmp_path / "data", tmp_path / f"stderr-{run}.log")
    params = server_params(server.data_dir, config, env, command)

    @asynccontextmanager
    async def transport() -> AsyncIterator[TransportStreams]:
        with server.stderr_path.open("w", encoding="utf-8") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                yield TappedReadStream(read, server.stdout_items), write

    with anyio.fail_after(60):
        async with Client(transport(), mode=mode) as client:
            yield client, server


async def test_the_tools_are_listed_over_stdio(tmp_path: Path, mode: str) -> None:
    async with spawn_server(tmp_path, mode) as (client, server):
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert {"remember", "recall", "forget"} <= set(tools)
        assert tools["recall"].annotations is not None
        assert tools["recall"].annotations.read_only_hint is True
        assert tools["forget"].annotations is not None
        assert tools["forget"].annotations.destructive_hint is True
        assert tools["remember"].input_schema["properties"]["content"]
    assert server.stray_stdout() == []


async def test_remember_recall_and_forget_work_over_stdio_and_survive_a_restart(tmp_path: Path, mode: str) -> None:
    async with spawn_server(tmp_path, mode) as (client, server):
        kept = await call(client, "remember", {"content": "The release train leaves every second Tuesday"})
        gone = await call(client, "remember", {"content": "The old build server is called jenkins-legacy-07"})
        assert kept["stored"] == gone["stored"] == 1
        result = await call(client, "recall", {"query": "when does the release train leave?", "k": 1, "detail": "full"})
        assert hit_texts(result) == ["The release train leaves every second Tuesday"]
        assert result["hits"][0]["transport"] == "stdio"
        gone_id = gone["items"][0]["id"]
        dry = await call(client, "forget", {"ids": [gone_id]})
        assert (dry["matched"], dry["deleted"]) == (1, 0)
        assert "jenkins-legacy-07" in hit_texts(await call(client, "recall", {"query": "jenkins-legacy-07"}))[0]
        real = await call(client, "forget", {"ids": [gone_id], "dry_run": False})
        assert real["deleted"] == 1
        assert not any("jenkins" in t for t in hit_texts(await call(client, "recall", {"query": "jenkins-legacy-07"})))
    assert server.stray_stdout() == []
    assert server.db_file.exists()

    async with spawn_server(tmp_path, mode, data_dir=server.data_dir, run=1) as (client, again):
        after = hit_texts(await call(client, "recall", {"query": "release train build server jenkins"}))
        assert after == ["The release train leaves every second Tuesday"]
    assert again.stray_stdout() == []


async def test_a_bad_call_is_an_is_error_result_and_the_session_goes_on(tmp_path: Path, mode: str) -> None:
    async with spawn_server(tmp_path, mode) as (client, server):
        missing = "01M8KXZZZZZZZZZZZZZZZZZZZZ"
        assert missing in await call_error(client, "forget", {"ids": [missing], "dry_run": False})
        assert "content" in await call_error(client, "remember", {})
        assert "limits.max_k" in await call_error(client, "recall", {"query": "anything", "k": 0})
        assert "kind" in await call_error(client, "remember", {"content": "A fine memory", "kind": "Not A Kind!"})
        stored = await call(client, "remember", {"content": "The session still works after errors"})
        assert stored["stored"] == 1
    assert server.stray_stdout() == []


async def test_stdout_carries_only_the_protocol_and_logs_go_to_stderr(tmp_path: Path, mode: str) -> None:
    async with spawn_server(tmp_path, mode, env={"MCP_MEMORY_LOG_LEVEL": "DEBUG"}) as (client, server):
        await client.list_tools()
        await call(client, "remember", {"content": "Logs of this call must reach stderr, never stdout"})
        await call(client, "recall", {"query": "where do logs go"})
        await call_error(client, "forget", {"filters": {}, "dry_run": False})
    assert server.stdout_items, "the tap saw no protocol traffic"
    assert server.stray_stdout() == []
    errors = server.stderr()
    assert "remember: 1 stored, 0 merged, 0 rejected" in errors
    assert " DEBUG " in errors
    assert " INFO mcp_memory.embed.loader: embedding model " in errors


async def test_the_stdout_check_catches_a_stray_line(tmp_path: Path, mode: str) -> None:
    """Positive control: a server that prints one line of chatter before serving is caught."""
    chatty = [
        str(BIN / "python"),
        "-c",
        "import sys; print('starting mcp-memory...', flush=True); from mcp_memory.cli import main; sys.exit(main())",
    ]
    async with spawn_server(tmp_path, mode, command=chatty) as (client, server):
        await client.list_tools()
    stray = server.stray_stdout()
    assert len(stray) == 1
    assert "input_value='starting mcp-memory...'" in str(stray[0])


def _readme_configs() -> list[list[str]]:
    """The `args` of every client configuration in docs/clients.md that starts our server over stdio."""
    return [
        [str(a) for a in server.get("args", [])]
        for config in readme_client_configs()
        if not config.remote  # the network ones run in test_inspector.py, against a real HTTP server
        for server in config.servers().values()
        if str(server.get("command", "")).endswith("/.venv/bin/mcp-memory")
    ]


@pytest.mark.slow
@pytest.mark.parametrize("args", _readme_configs(), ids=lambda a: " ".join(a))
async def test_every_readme_client_configuration_starts_a_working_server(
    tmp_path: Path, mode: str, args: list[str]
) -> None:
    assert len(_readme_configs()) >= 3  # Claude Desktop, Cursor, Continue
    config = tmp_path / "empty-config.toml"
    config.touch()
    # The documented arguments exactly, with the data directory added after them (flags go anywhere).
    params = StdioServerParameters(
        command=str(SERVER),
        args=[*args, "--data-dir", str(tmp_path / "data"), "--principal", PRINCIPAL],
        env={"MCP_MEMORY_CONFIG": str(config)},
    )
    with anyio.fail_after(60):
        async with Client(params, mode=mode) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert {"remember", "recall", "checkpoint", "resume"} <= tools
            await call(client, "remember", {"content": "The README configuration works"})


# Ours that only the network transports and the inspector use, and what they bring. uvicorn and
# sse_starlette are not listed: the SDK's own `mcp.server.lowlevel` imports them for any server.
HTTP_ONLY = (
    "mcp_memory.http",  # the whole package: the gateway, its middlewares, JWT, the bridge
    "mcp_memory.inspector",
    "jinja2",
    "jwt",
    "rich",  # the SDK's default log handler, which our handler makes redundant
)


def _imported(trace: str) -> set[str]:
    """Every module named in a `python -X importtime` trace (lines `import time: self | cum | name`)."""
    return {
        line.rsplit("|", 1)[1].strip() for line in trace.splitlines() if line.startswith("import time:") and "|" in line
    }


async def test_a_stdio_server_never_imports_the_http_stack_or_the_inspector(tmp_path: Path, mode: str) -> None:
    traced = [str(BIN / "python"), "-X", "importtime", "-m", "mcp_memory"]
    async with spawn_server(tmp_path, mode, command=traced) as (client, server):
        await client.list_tools()
        await call(client, "remember", {"content": "The stdio server stays off the HTTP stack"})
        await call(client, "recall", {"query": "which stack does the stdio server use?"})
    imported = _imported(server.stderr())
    assert {"mcp_memory.mcp.server", "mcp_memory.mcp.stdio", "mcp_memory.mcp.table"} <= imported  # the trace is read
    assert sorted(name for name in imported if _http_only(name)) == []


def _http_only(module: str) -> bool:
    return any(module == name or module.startswith(f"{name}.") for name in HTTP_ONLY)
