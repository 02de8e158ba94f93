"""Which paths in the data directory are mcp-memory's own, and keeping those owner-only.

Memories are private: the files and folders this server writes are 0600 and 0700, born so or
tightened when an older version left them loose. A data directory may also be a folder the person
already uses (a project, a synced folder): whatever else is in it keeps the mode its owner gave it,
since a chmod would break it (a script loses its execute bit, a shared README stops being shared).
Such paths are named once in a warning instead.

The layout this knows: ``control.db`` (control tables: tokens, browser sessions, forget codes,
leases), ``principals/`` with one ``*.db`` per principal and its migration backups ``*.bak.db``,
each SQLite file with its ``-wal``, ``-shm`` and ``-journal`` companions, and files the settings
put there (the log file).
"""

from __future__ import annotations

import logging
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from mcp_memory.config import Settings
from mcp_memory.core.errors import StorageError

log = logging.getLogger(__name__)

CONTROL_FILE = "control.db"
PRINCIPALS = "principals"
COMPANIONS = ("-wal", "-shm", "-journal")
_SHOWN = 3  # foreign paths a warning names before "and N more"


def sqlite_files(path: Path) -> tuple[Path, ...]:
    """A SQLite file and the companions SQLite may create beside it."""
    return (path, *(path.with_name(path.name + suffix) for suffix in COMPANIONS))


def _database_name(name: str) -> bool:
    return name.endswith(".db") or any(name.endswith(".db" + suffix) for suffix in COMPANIONS)


_CONTROL_NAMES = frozenset(path.name for path in sqlite_files(Path(CONTROL_FILE)))


def settings_files(settings: Settings) -> tuple[Path, ...]:
    """Files outside the fixed layout that the settings make this server's: the log it writes."""
    return (settings.log_file,) if settings.log_file is not None else ()


def file_mode(path: Path) -> int | None:
    """The permission bits of ``path``, or None when it is gone: another process on the data
    directory removes its WAL, journal and temporary files while this one looks."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return None


def _loose(path: Path) -> bool:
    return bool((file_mode(path) or 0) & 0o077)


def _private(path: Path, mode: int) -> None:
    if _loose(path):
        try:
            path.chmod(mode)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StorageError(
                f"{str(path)!r} is open to other users and cannot be made private ({exc.strerror or exc}); "
                "run `chmod go-rwx` on it as its owner, or choose another data_dir"
            ) from None


def private_dir(path: Path) -> None:
    """Create a folder of the data (and missing parents) owner-only (0700): memories are private,
    and other local users may not even list the files. One that exists is left as it is: it may be
    the person's folder, and ``secure_data_dir`` decides about ours."""
    if path.exists():
        return
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)  # mkdir's mode is masked by the umask and ignored for the parents


def private_file(path: Path) -> None:
    """A data file and its companions, owner-only (0600). SQLite gives a new WAL the database's
    mode, so once the database is private its companions are born private too."""
    for each in sqlite_files(path):
        if each.exists() and not each.is_symlink():
            _private(each, 0o600)


@dataclass(frozen=True)
class Survey:
    """What a data directory holds: this server's paths and the others (not descended into)."""

    root: Path
    ours: list[Path]
    foreign: list[Path]

    def loose(self) -> list[Path]:
        """Our paths that other users may open, the directory itself included when it holds only
        ours (tightening it then takes nothing from anyone)."""
        found = [path for path in self.ours if _loose(path)]
        if not self.foreign and _loose(self.root):
            found.insert(0, self.root)
        return found

    def foreign_note(self) -> str | None:
        """One sentence naming the paths that are not ours, or None when there are none."""
        if not self.foreign:
            return None
        shown = ", ".join(_shown(self.root, path) for path in self.foreign[:_SHOWN])
        more = f" and {len(self.foreign) - _SHOWN} more" if len(self.foreign) > _SHOWN else ""
        note = (
            f"the data directory {self.root} holds {len(self.foreign)} path(s) that are not mcp-memory's "
            f"({shown}{more}): their permissions are left as they are"
        )
        if _loose(self.root):
            note += (
                f"; the directory itself stays open to other users ({file_mode(self.root) or 0:o}) for them, "
                "mcp-memory's own files in it are owner-only"
            )
        return note + "; give data_dir a folder of its own to keep memories apart from other files"


def _shown(root: Path, path: Path) -> str:
    name = str(path.relative_to(root))
    return name + "/" if path.is_dir() and not path.is_symlink() else name


def survey(root: Path, own: Iterable[Path] = ()) -> Survey:
    """Sort ``root``'s entries into ours and foreign. A foreign folder is named, never walked: a data
    directory placed in a large tree must not cost a walk of it at every start. A symbolic link is
    never ours: a chmod would follow it out of the directory. A file is judged by its name and not
    by being a file: another process removes its WAL and journal files while this one looks."""
    if not root.is_dir():
        return Survey(root, [], [])
    extra = {path for path in own if path.is_relative_to(root) and path != root}
    holders = {parent for path in extra for parent in path.parents if parent != root and parent.is_relative_to(root)}
    ours: list[Path] = []
    foreign: list[Path] = []
    for entry in sorted(root.iterdir()):
        if entry.is_symlink():
            foreign.append(entry)
        elif entry in extra or (entry.name in _CONTROL_NAMES and not entry.is_dir()):
            ours.append(entry)
        elif entry.name == PRINCIPALS and entry.is_dir():
            ours.append(entry)
            for inner in sorted(entry.iterdir()):
                mine = _database_name(inner.name) and not inner.is_dir() and not inner.is_symlink()
                (ours if mine or inner in extra else foreign).append(inner)
        elif entry not in holders:  # a folder that holds our log is the person's arrangement
            foreign.append(entry)
    deeper = [path for path in extra if path.parent != root and path.exists() and not path.is_symlink()]
    return Survey(root, ours + sorted(p for p in deeper if p not in ours), foreign)


def loose_paths(root: Path, own: Sequence[Path] = ()) -> list[Path]:
    """This server's paths under ``root`` (itself included when it holds nothing else) that users
    other than the owner may open."""
    return survey(root, own).loose()


def tighten(root: Path, own: Sequence[Path] = ()) -> int:
    """Make our paths owner-only (an older version left 0755 folders and 0644 files) and name, once,
    what is not ours; how many paths were loose. A path that cannot be changed is a StorageError
    that names it and the fix."""
    found = survey(root, own)
    loose = found.loose()
    for path in loose:
        _private(path, 0o700 if path.is_dir() else 0o600)
    if loose:
        log.warning(
            "made %d path(s) of mcp-memory in the data directory %s owner-only (0700 folders, 0600 files); "
            "other users could read them before",
            len(loose),
            root,
        )
    note = found.foreign_note()
    if note is not None:
        log.warning("%s", note)
    return len(loose)


def secure_data_dir(root: Path, *, create: bool, own: Sequence[Path] = ()) -> None:
    """At a store's opening: the data directory made (0700) if missing (``create``: SQLite keeps its
    files there) and, when it exists, our paths in it owner-only; an error names the fix."""
    try:
        if create:
            private_dir(root)
        if root.exists():
            tighten(root, own)
    except OSError as exc:
        raise StorageError(
            f"cannot create the data directory {str(root)!r}: {exc.strerror or exc}; "
            "set data_dir (or --data-dir) to a writable folder"
        ) from None
