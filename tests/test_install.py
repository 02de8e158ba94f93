"""The built wheel, installed into a fresh virtual environment, serves from any directory.

This is what `pipx install` and `uv tool install` do with a clone or a git URL: build the wheel,
put it in a venv of its own, and run its `mcp-memory` command. Neither tool is on this machine;
pip does the same two steps here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from tests.conftest import call, hit_texts
from tests.readme_configs import REPO

pytestmark = [pytest.mark.slow, pytest.mark.anyio]


def _run(*argv: str | Path, cwd: Path | None = None) -> str:
    done = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=600, cwd=cwd, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


async def test_the_wheel_installs_into_a_fresh_venv_and_serves_from_another_directory(tmp_path: Path) -> None:
    dist, venv, elsewhere = tmp_path / "dist", tmp_path / "venv", tmp_path / "elsewhere"
    elsewhere.mkdir()
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", dist, REPO)
    (wheel,) = dist.glob("mcp_memory_store-*.whl")
    _run(sys.executable, "-m", "venv", venv)
    _run(venv / "bin" / "python", "-m", "pip", "install", "--quiet", wheel)
    where = _run(venv / "bin" / "python", "-c", "import mcp_memory; print(mcp_memory.__file__)", cwd=elsewhere)
    assert Path(where.strip()).is_relative_to(venv)  # the installed copy, not the clone
    params = StdioServerParameters(
        command=str(venv / "bin" / "mcp-memory"),
        args=["serve", "--data-dir", str(tmp_path / "data"), "--principal", "pipx-user"],
        env={"MCP_MEMORY_CONFIG": str(tmp_path / "none.toml")},
        cwd=str(elsewhere),
    )
    (tmp_path / "none.toml").touch()
    with anyio.fail_after(120):
        async with Client(params) as client:
            await call(client, "remember", {"content": "The installed wheel keeps memories too"})
            assert hit_texts(await call(client, "recall", {"query": "installed wheel"})) == [
                "The installed wheel keeps memories too"
            ]
            prompt = await client.get_prompt("recall_context", {"query": "installed wheel"})  # templates shipped
            assert "The installed wheel keeps memories too" in str(prompt.messages[0].content)
