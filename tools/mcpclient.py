"""A real MCP stdio client for the benchmarks: it spawns `mcp-memory serve` and talks to it over stdio.

Every figure the tools print goes through this module, so what is measured is what a client such
as Claude Desktop sees: process start, the JSON-RPC framing, the tool schema validation and the
structured result.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

REPO = Path(__file__).resolve().parent.parent
SERVER_BIN = REPO / ".venv" / "bin" / "mcp-memory"
SHARED_DATA = REPO.parent / "shared" / "data"

Launcher = Literal["direct", "readme"]


class ToolCallError(RuntimeError):
    """The server answered a tool call with ``is_error``; the message is the server's text."""


@dataclass(frozen=True)
class ServerSpec:
    """How to start one server: the launcher and the store it serves (passed as MCP_MEMORY_* variables)."""

    data_dir: Path
    principal: str = "bench"
    launcher: Launcher = "direct"
    log_file: Path | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
    # Another checkout's package (an earlier release, for a same-run baseline), run with this venv.
    source: Path | None = None

    def parameters(self) -> StdioServerParameters:
        env = {
            "OMP_NUM_THREADS": "1",
            "MCP_MEMORY_DATA_DIR": str(self.data_dir),
            "MCP_MEMORY_PRINCIPAL": self.principal,
            "MCP_MEMORY_LOG_LEVEL": "WARNING",
            **self.extra_env,
        }
        if self.source is not None:
            env["PYTHONPATH"] = str(self.source)
            python = str(SERVER_BIN.parent / "python")
            return StdioServerParameters(command=python, args=["-m", "mcp_memory", "serve"], env=env, cwd=self.source)
        # This checkout's code, not the package the shared venv has installed (another worktree's):
        # the entry point's own path comes first otherwise.
        env["PYTHONPATH"] = str(REPO)
        if self.launcher == "readme":
            # The README's exact command, run from the clone: `sh tools/serve.sh`.
            return StdioServerParameters(command="sh", args=["tools/serve.sh"], env=env, cwd=REPO)
        return StdioServerParameters(command=str(SERVER_BIN), args=["serve"], env=env, cwd=REPO)


def checkout(ref: str, into: Path) -> Path:
    """The package of ``ref`` (``git archive``), to serve with this checkout's venv."""
    into.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "archive", ref, "mcp_memory", "prompts"], cwd=REPO, capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


class MemoryClient:
    """The three tools, called through a connected MCP client; errors become ToolCallError."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await self.client.call_tool(name, arguments)
        if result.is_error:
            text = " ".join(getattr(part, "text", "") for part in result.content)
            raise ToolCallError(f"{name} failed: {text}")
        content: dict[str, Any] | None = result.structured_content
        if content is None:
            raise ToolCallError(f"{name} returned no structured content")
        return content

    async def list_tools(self) -> list[str]:
        listing = await self.client.list_tools()
        return [tool.name for tool in listing.tools]

    async def remember(self, items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """One ``remember`` call with ``memories=[...]``; the per-item results, in request order."""
        result = await self.call("remember", {"memories": list(items)})
        items_out: list[dict[str, Any]] = result["items"]
        return sorted(items_out, key=lambda item: int(item["index"]))

    async def remember_one(self, content: str, **fields: Any) -> dict[str, Any]:
        result = await self.call("remember", {"content": content, **fields})
        first: dict[str, Any] = result["items"][0]
        return first

    async def recall(
        self,
        query: str,
        *,
        k: int = 10,
        budget_tokens: int = 32_000,
        explain: bool = False,
        filters: dict[str, Any] | None = None,
        floor: bool | None = None,
    ) -> dict[str, Any]:
        """Recall without reinforcement, so scores never depend on the order of the questions."""
        arguments: dict[str, Any] = {
            "query": query,
            "k": k,
            "budget_tokens": budget_tokens,
            "reinforce": False,
            "explain": explain,
        }
        if filters is not None:
            arguments["filters"] = filters
        if floor is not None:
            arguments["floor"] = floor
        return await self.call("recall", arguments)


@asynccontextmanager
async def open_server(spec: ServerSpec) -> AsyncIterator[MemoryClient]:
    """Spawn the server, run the legacy initialize handshake, and stop the process on exit."""
    spec.data_dir.mkdir(parents=True, exist_ok=True)
    log_path = spec.log_file or spec.data_dir / "server.log"
    with log_path.open("a", encoding="utf-8") as errlog:
        async with Client(stdio_client(spec.parameters(), errlog=errlog), mode="legacy") as client:
            yield MemoryClient(client)


def server_env(pairs: Sequence[str]) -> dict[str, str]:
    """``--server-env`` options (MCP_MEMORY_NAME=VALUE) as the variables a server gets."""
    env: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.startswith("MCP_MEMORY_"):
            raise SystemExit(f"--server-env wants MCP_MEMORY_NAME=VALUE, got {pair!r}")
        env[name] = value
    return env


def server_pid() -> int:
    """The pid of the one `mcp-memory serve` child of this process (found through /proc)."""
    me = os.getpid()
    found: list[tuple[float, int]] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == me and "mcp-memory" in cmdline and "serve" in cmdline:
            found.append((float(fields[19]), int(entry.name)))
    if not found:
        raise RuntimeError("no `mcp-memory serve` child process found")
    return max(found)[1]


def memory_status(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM (peak) of a process, in MiB, from /proc/<pid>/status."""
    out: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) / 1024
    return out


class Stopwatch:
    """perf_counter in seconds, as a context manager: ``with Stopwatch() as sw: ...; sw.seconds``."""

    def __init__(self) -> None:
        self.started = 0.0
        self.seconds = 0.0

    def __enter__(self) -> Stopwatch:
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.started
