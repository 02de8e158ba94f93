"""The server makes its own files owner-only and leaves everything else in the data directory alone.

A data directory may be a folder the person already uses: a chmod of their files would break them
(a script loses its execute bit), so theirs are only named, once, in a warning.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from mcp_memory.cli.command import main
from mcp_memory.config import Settings, load_settings
from mcp_memory.core.models import MemoryDraft, Scope
from mcp_memory.logs import configure_logging
from mcp_memory.mcp.server import open_server
from mcp_memory.services.memory import CallContext
from mcp_memory.storage.pool import principal_file

pytestmark = pytest.mark.anyio


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(autouse=True)
def _usual_umask() -> Iterator[None]:
    """The common 022: a file made without care is 0644, so privacy must be the code's doing."""
    before = os.umask(0o022)
    yield
    os.umask(before)


def _loosen(*paths: Path) -> None:
    for path in paths:
        path.chmod(0o755 if path.is_dir() else 0o644)


def _a_project(data_dir: Path) -> dict[Path, int]:
    """A folder the person already used, with a script, a README and a note; their modes."""
    (data_dir / "project" / "bin").mkdir(parents=True)
    files = {
        data_dir / "project" / "bin" / "tool.sh": 0o755,
        data_dir / "project" / "README": 0o644,
        data_dir / "notes.txt": 0o664,
    }
    for path, bits in files.items():
        path.write_text("#!/bin/sh\necho hi\n" if path.suffix == ".sh" else "theirs\n")
        path.chmod(bits)
    for folder in (data_dir, data_dir / "project", data_dir / "project" / "bin"):
        folder.chmod(0o755)
        files[folder] = 0o755
    return files


async def _serve_once(settings: Settings) -> Path:
    """Open the server's runtime as serving does, store a memory, close; the principal's file."""
    async with open_server(settings, warm=False) as runtime:
        await runtime.memory.remember(Scope("alice"), [MemoryDraft(content="Alice's cat is Miso")], CallContext())
    return principal_file(settings.data_dir, "alice")


def _ours_are_private(data_dir: Path, db: Path) -> None:
    ours = [data_dir / "control.db", data_dir / "principals", db, *db.parent.glob(db.name + "-*")]
    assert db.exists()  # positive control: the walk below sees the principal's file
    assert {path.name: mode(path) for path in ours if path.exists()} == {
        path.name: 0o700 if path.is_dir() else 0o600 for path in ours if path.exists()
    }


async def test_serving_a_data_dir_leaves_foreign_files_modes_alone(data_dir: Path) -> None:
    theirs = _a_project(data_dir)
    db = await _serve_once(load_settings(data_dir=data_dir, principal="alice"))
    assert {path: mode(path) for path in theirs} == theirs  # the data directory itself included
    assert os.access(data_dir / "project" / "bin" / "tool.sh", os.X_OK)
    _ours_are_private(data_dir, db)


async def test_a_data_dir_holding_foreign_files_warns_once_naming_them(
    data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _a_project(data_dir)
    for name in ("a.txt", "b.txt", "c.txt"):
        (data_dir / name).write_text("theirs\n")
    with caplog.at_level(logging.WARNING, logger="mcp_memory"):
        await _serve_once(load_settings(data_dir=data_dir, principal="alice"))
    named = [r.getMessage() for r in caplog.records if "not mcp-memory's" in r.getMessage()]
    assert len(named) == 1
    assert "5 path(s)" in named[0]
    assert "a.txt, b.txt, c.txt and 2 more" in named[0]  # sorted: notes.txt and project/ are left
    assert "stays open to other users (755)" in named[0]
    assert not [r for r in caplog.records if "owner-only (0700 folders" in r.getMessage()]  # ours were born so


async def test_an_older_versions_loose_files_are_tightened_and_foreign_ones_are_not(
    data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = load_settings(data_dir=data_dir, principal="alice")
    db = await _serve_once(settings)
    ours = [data_dir / "control.db", data_dir / "principals", db]
    _loosen(*ours)  # what an older version left
    theirs = _a_project(data_dir)
    with caplog.at_level(logging.WARNING, logger="mcp_memory"):
        await _serve_once(settings)
    _ours_are_private(data_dir, db)
    assert {path: mode(path) for path in theirs} == theirs
    tightened = [r.getMessage() for r in caplog.records if "owner-only (0700 folders" in r.getMessage()]
    assert len(tightened) == 1
    assert tightened[0].startswith("made 3 path(s) of mcp-memory")


async def test_a_loose_data_dir_of_only_our_files_is_tightened(data_dir: Path) -> None:
    settings = load_settings(data_dir=data_dir, principal="alice")
    await _serve_once(settings)
    _loosen(data_dir)
    await _serve_once(settings)
    assert mode(data_dir) == 0o700


async def test_our_files_are_born_private_the_log_among_them(data_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The log lies in a data directory that does not exist yet: logging makes both, owner-only,
    and the store counts the log as its own (no warning about foreign files)."""
    log_file = data_dir / "logs" / "server.log"
    settings = load_settings(data_dir=data_dir, principal="alice", log_file=log_file)
    configure_logging(settings)
    caplog.set_level(logging.WARNING, logger="mcp_memory")
    logging.getLogger().addHandler(caplog.handler)  # configure_logging replaced the root's handlers
    db = await _serve_once(settings)
    assert (mode(data_dir), mode(log_file.parent), mode(log_file)) == (0o700, 0o700, 0o600)
    _ours_are_private(data_dir, db)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_a_link_in_the_data_dir_is_not_followed(data_dir: Path, tmp_path: Path) -> None:
    """A chmod follows a symbolic link: one named like ours must not reach the file it points at."""
    (data_dir / "principals").mkdir(parents=True)
    outside = tmp_path / "shared.db"
    outside.write_text("someone else's\n")
    outside.chmod(0o644)
    (data_dir / "principals" / "old.db").symlink_to(outside)
    await _serve_once(load_settings(data_dir=data_dir, principal="alice"))
    assert mode(outside) == 0o644


def test_doctor_names_foreign_files_without_calling_them_a_problem(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    theirs = _a_project(data_dir)
    anyio.run(_serve_once, load_settings(data_dir=data_dir, principal="alice"))  # a store to check
    assert main(["--data-dir", str(data_dir), "--principal", "alice", "doctor"]) == 0
    out = capsys.readouterr().out
    assert "permissions: note: the data directory" in out
    assert "(notes.txt, project/)" in out
    assert "are owner-only" in out
    assert {path: mode(path) for path in theirs} == theirs
