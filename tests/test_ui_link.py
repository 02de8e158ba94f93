"""`mcp-memory ui --no-browser` prints its one-time sign-in link alone on stdout, to be piped (to a
browser, a clipboard, `ssh` port forwarding notes), while its log and the link's note stay on stderr."""

from __future__ import annotations

import os
import re
import select
import subprocess
import time
from pathlib import Path

import httpx2
import pytest

from mcp_memory.cli import main
from tests.netserver import REPO, SERVER_BIN, local_store, server_env

LINK = re.compile(r"http://127\.0\.0\.1:\d+/ui/login\?once=\S+")


def _first_line(process: subprocess.Popen[str], seconds: float) -> str:
    """The first line the process writes on stdout, or '' when none comes in time."""
    assert process.stdout is not None
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and process.poll() is None:
        ready, _, _ = select.select([process.stdout], [], [], 0.1)
        if ready:
            return process.stdout.readline()
    return ""


def test_ui_prints_the_one_time_link_alone_on_stdout_and_its_note_on_stderr(tmp_path: Path) -> None:
    errors = tmp_path / "stderr.log"
    local_store(tmp_path / "data")
    env = {**server_env(tmp_path / "data"), "PYTHONPATH": str(REPO)}  # this checkout's code
    with errors.open("w") as sink:
        process = subprocess.Popen(
            [str(SERVER_BIN), "ui", "--no-browser", "--ui-port", "0"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=sink,
            text=True,
        )
    try:
        line = _first_line(process, 60)
        assert LINK.fullmatch(line.rstrip("\n")), (line, errors.read_text())
        signed_in = httpx2.get(line.strip(), follow_redirects=False)
        assert signed_in.status_code in (302, 303), signed_in.text[:300]  # the link opens a session
        told = errors.read_text()
        assert "a one-time sign-in link, good for 10 minutes, is on stdout" in told
        assert "serving inspector on http://127.0.0.1:" in told  # the log stays on stderr
        assert "once=" not in told
    finally:
        process.terminate()
        process.wait(20)
        assert process.stdout is not None
        process.stdout.close()
    assert os.path.exists(tmp_path / "data")  # positive control: the inspector served a store


def test_ui_refuses_a_data_dir_that_holds_no_store_and_makes_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`serve` makes a store on its first run; `ui` reads one, so a mistyped --data-dir is named with
    the fix rather than served as a new, empty store."""
    typo = tmp_path / "mcp-memroy"
    assert main(["--data-dir", str(typo), "--principal", "local-owner", "ui", "--no-browser"]) == 2
    err = capsys.readouterr().err
    assert f"{str(typo)!r} does not exist: `ui` has no store to work on; check --data-dir" in err
    assert "`mcp-memory serve` makes a store on its first run" in err
    assert not typo.exists()
    typo.mkdir()  # a folder that exists but holds no store
    assert main(["--data-dir", str(typo), "--principal", "local-owner", "ui", "--no-browser"]) == 2
    assert f"{str(typo)!r} holds no store for `ui` to show; check --data-dir" in capsys.readouterr().err
    assert list(typo.iterdir()) == []
