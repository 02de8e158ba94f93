"""Reading and replacing a client's configuration file: a backup first, then an atomic swap that keeps
the file's mode, so a crash or a full disk leaves the old file or the new one, never half of each."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path

import orjson

from mcp_memory.core.errors import InvalidInputError

MADE = ".mcp-memory-made"
"""The record, in a folder install created for a client's file, of the folders it created (docs/adr/0030)."""


def target(path: Path) -> Path:
    """The file to write: a symlinked configuration (a dotfiles checkout) is written where it points."""
    return path.resolve() if path.is_symlink() else path


def read_text(path: Path) -> str | None:
    """The file's text, None when it does not exist; InvalidInputError naming the file otherwise."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise InvalidInputError(str(path), "is a folder; give the configuration file itself") from None
    except UnicodeDecodeError:
        raise InvalidInputError(str(path), "is not UTF-8 text; fix it or move it aside") from None
    except OSError as exc:
        raise InvalidInputError(str(path), f"cannot be read ({exc.strerror or exc}); check its permissions") from None


def backup(path: Path, now: float | None = None) -> Path:
    """A copy of the file beside it, ``NAME.bak-YYYYmmdd-HHMMSS`` (mode and times kept)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    copy = path.with_name(f"{path.name}.bak-{stamp}")
    serial = 1
    while copy.exists():  # two runs within a second
        copy = path.with_name(f"{path.name}.bak-{stamp}-{serial}")
        serial += 1
    shutil.copy2(path, copy)
    return copy


def write_atomic(path: Path, text: str) -> None:
    """Replace (or create) the file with ``text``: a temporary file in the same folder, then a rename.
    An existing file's mode is kept; a new one is private (0600: client configurations hold tokens)."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = 0o600
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as sink:
            sink.write(text)
            sink.flush()
            os.fsync(sink.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def missing_folders(folder: Path) -> list[Path]:
    """The folders that do not exist yet on the way to ``folder``, highest first (``folder`` last)."""
    missing = [path for path in (folder, *folder.parents) if not path.exists()]
    return missing[::-1]


def note_made(folder: Path, made: list[Path]) -> None:
    """Record beside the file install wrote that it created ``made`` (absolute paths)."""
    write_atomic(folder / MADE, orjson.dumps({"created": [str(path) for path in made]}).decode() + "\n")


def remove_made(folder: Path) -> list[Path]:
    """After the file in ``folder`` went: the folders install recorded creating, removed deepest first
    while each is empty (the record aside), so a folder that holds anything else stays, and so does
    every folder above it. A record that is unreadable, or names a folder other than ``folder`` and
    those above it, removes nothing."""
    record = folder / MADE
    try:
        made = [Path(path) for path in orjson.loads(record.read_bytes())["created"]]
        if any(entry.name != MADE for entry in folder.iterdir()):
            return []
    except (OSError, ValueError, KeyError, TypeError):
        return []
    if not made or any(path != folder and path not in folder.parents for path in made):
        return []
    record.unlink()
    removed: list[Path] = []
    for path in sorted(made, key=lambda path: len(path.parts), reverse=True):
        try:
            path.rmdir()
        except OSError:  # not empty (or not ours to remove): it and those above it stay
            break
        removed.append(path)
    return removed
