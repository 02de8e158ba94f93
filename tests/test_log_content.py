"""No log line carries what a person stored or asked, at any level, DEBUG included.

Each test remembers and recalls a canary word through a real MCP client with the server at DEBUG,
then reads every log output for it. The in-process test also listens with a handler of no policy:
it hears the canary (the libraries do log it), so the policy is what keeps it out.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from mcp.client import Client

from mcp_memory.config import load_settings
from mcp_memory.logs import configure_logging
from mcp_memory.mcp.server import open_server
from tests.conftest import MODES, call, call_error, hit_texts
from tests.netserver import connect, running
from tests.test_stdio import spawn_server

pytestmark = pytest.mark.anyio

CANARY = "quokkaparsnip4817"


class Heard(logging.Handler):
    """Every record, formatted with no filter: what the log would say without the policy."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.name}: {record.getMessage()}")


async def _remember_and_recall(client: Client) -> None:
    stored = await call(client, "remember", {"content": f"The spare key code is {CANARY}", "tags": [CANARY]})
    assert stored["stored"] == 1
    assert CANARY in hit_texts(await call(client, "recall", {"query": f"what is {CANARY}?", "k": 1}))[0]
    await call_error(client, "remember", {"content": f"Also {CANARY}", "kind": f"Not {CANARY}!"})


def _without_canary(text: str) -> None:
    assert CANARY not in text.lower()


async def test_the_log_at_debug_holds_no_memory_text_nor_query(tmp_path: Path) -> None:
    log_file = tmp_path / "server.log"
    settings = load_settings(data_dir=tmp_path / "data", principal="alice", log_level="DEBUG", log_file=log_file)
    configure_logging(settings)
    heard = Heard()
    logging.getLogger().addHandler(heard)
    async with open_server(settings, warm=False) as runtime, Client(runtime.mcp, mode=MODES[-1]) as client:
        await _remember_and_recall(client)
    logging.getLogger("tests.probe").debug("probe %d", 1)
    written = log_file.read_text(encoding="utf-8")
    assert any(CANARY in line for line in heard.lines if line.startswith("aiosqlite"))  # positive control
    assert "DEBUG tests.probe: probe 1" in written  # DEBUG lines do reach the file
    assert "remember: 1 stored" in written
    _without_canary(written)


@pytest.mark.slow
async def test_a_stdio_server_at_debug_logs_no_memory_text_nor_query(tmp_path: Path, mode: str) -> None:
    log_file = tmp_path / "logs" / "server.log"
    env = {"MCP_MEMORY_LOG_LEVEL": "DEBUG", "MCP_MEMORY_LOG_FILE": str(log_file)}
    async with spawn_server(tmp_path, mode, env=env) as (client, server):
        await _remember_and_recall(client)
    written = log_file.read_text(encoding="utf-8")
    assert " DEBUG " in written
    assert "remember: 1 stored" in written  # positive control: this run's own code logged here
    _without_canary(written)
    _without_canary(server.stderr())


@pytest.mark.slow
async def test_an_sse_server_at_debug_logs_no_memory_text_nor_query(tmp_path: Path, mode: str) -> None:
    """SSE is where the SDK logs each JSON-RPC message whole, as received and as sent."""
    with running(tmp_path / "data", "sse", "--no-auth", env={"MCP_MEMORY_LOG_LEVEL": "DEBUG"}) as server:
        async with connect(server, None, mode) as client:
            await _remember_and_recall(client)
    written = server.stderr()  # the server stopped: every line it wrote, its shutdown's included
    assert '"level":"DEBUG"' in written
    assert "remember: 1 stored" in written
    _without_canary(written)
