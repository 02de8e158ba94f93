"""A stdio line the server cannot read gets a JSON-RPC error, and the session goes on.

Spoken in raw bytes to a real `mcp-memory serve` subprocess: an SDK client cannot send these
lines, which is the point (other clients, and people piping JSON by hand, can).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest

from mcp_memory.core.nesting import MAX_NESTING
from tests.conftest import deep_tree
from tests.test_stdio import PRINCIPAL, SERVER

pytestmark = pytest.mark.slow

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}


def _deep(levels: int) -> str:
    return "[" * levels + "]" * levels


DEEP_CHECKPOINT = orjson.dumps(
    {
        "jsonrpc": "2.0",
        "id": "deep",
        "method": "tools/call",
        "params": {"name": "checkpoint", "arguments": {"task_id": "t", "goal": "Climb", "tree": deep_tree(100)}},
    }
).decode()
TOO_DEEP = f"nesting deeper than {MAX_NESTING} levels"  # the words the HTTP body check uses

# (line as sent, the id the answer must carry, the JSON-RPC code, words of the message)
UNREADABLE: list[tuple[str, int | str | None, int, str]] = [
    (
        '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"recall","arguments":{"query":"a \\ud800 b"}}}',
        2,
        -32600,
        "hex escape",
    ),
    ('{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"x":' + _deep(400) + "}}", 3, -32600, TOO_DEEP),
    (DEEP_CHECKPOINT, "deep", -32600, TOO_DEEP),  # a tree 100 levels deep
    ('{"jsonrpc":"2.0","id":"four","method":"tools/list",', "four", -32600, "EOF"),  # cut short, id still readable
    ("{bad json", None, -32700, "JSON"),
    ('{"jsonrpc":"2.0","id":5,"method":7}', 5, -32600, "method"),
]


def _read(proc: subprocess.Popen[bytes]) -> dict[str, Any]:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, "the server closed stdout"
    message: dict[str, Any] = orjson.loads(line)
    return message


def test_every_unreadable_line_is_answered_and_the_session_goes_on(tmp_path: Path) -> None:
    config = tmp_path / "empty.toml"
    config.touch()
    argv = [str(SERVER), "--data-dir", str(tmp_path / "data"), "--principal", PRINCIPAL, "serve"]
    errlog = (tmp_path / "stderr.log").open("wb")
    path = {k: v for k, v in os.environ.items() if k == "PYTHONPATH"}  # the code under test (a worktree's)
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errlog,
        env={"MCP_MEMORY_CONFIG": str(config), **path},
    )
    assert proc.stdin is not None
    try:

        def send(line: str | bytes) -> None:
            assert proc.stdin is not None
            proc.stdin.write((line.encode() if isinstance(line, str) else line) + b"\n")
            proc.stdin.flush()

        send(orjson.dumps(INITIALIZE))
        assert _read(proc)["id"] == 1
        send(orjson.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        for line, ident, code, says in UNREADABLE:
            send(line)
            answer = _read(proc)  # a server that drops the line blocks here: the test times out
            assert answer["id"] == ident, (line[:60], answer)
            assert answer["error"]["code"] == code, (line[:60], answer)
            assert says in answer["error"]["message"], (line[:60], answer)
        send(orjson.dumps({"jsonrpc": "2.0", "id": 6, "method": "tools/list"}))
        listed = _read(proc)
        assert listed["id"] == 6
        assert any(tool["name"] == "recall" for tool in listed["result"]["tools"])
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()
        errlog.close()
    logged = (tmp_path / "stderr.log").read_text(encoding="utf-8")
    assert logged.count("answered an unreadable message") == len(UNREADABLE)
