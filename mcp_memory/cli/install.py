"""`mcp-memory install CLIENT` and `mcp-memory uninstall CLIENT`: this server in (or out of) an MCP
client's own configuration file, at the place the client documents for the user's operating system
(mcp_memory/install/clients.py says which file and where each format comes from).

Installing merges one entry named --name (default "memory") into the file: other servers and
settings stay, JSONC comments stay (the edit touches only our entry's text), and a second run
changes nothing. The entry starts this very installation: the absolute path of the `mcp-memory`
command being run (or the one beside this Python), with ``serve`` and the --data-dir / --namespace
given. An existing file is copied to ``FILE.bak-<time>`` before it changes, and replaced atomically.
Uninstalling from a file that holds nothing else (the one install created) removes the file.
Every file is read and checked before any is written: an invalid one is named, with the fix, and
nothing changes. --dry-run prints the change as a unified diff and writes nothing.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mcp_memory.core.errors import InvalidInputError

if TYPE_CHECKING:
    from mcp_memory.install.clients import Client, Places

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from mcp_memory.install.clients import CLIENTS

    names = ", ".join(CLIENTS)
    for verb, what in (("install", "add this server to"), ("uninstall", "remove this server from")):
        parser = sub.add_parser(verb, help=f"{what} an MCP client's configuration ({names})")
        parser.add_argument("client", metavar="CLIENT", help=names)
        parser.add_argument(
            "--client-config", type=Path, metavar="PATH", help="this file instead of the client's default one"
        )
        parser.add_argument("--name", default="memory", help="the server's name in the client (default: memory)")
        parser.add_argument("--dry-run", action="store_true", help="print the change as a diff; write nothing")
        parser.add_argument(
            "--hooks", action="store_true", help="claude-code: the hooks in ~/.claude/settings.json too"
        )
        parser.add_argument("--hooks-config", type=Path, metavar="PATH", help="that settings file instead")
        if verb == "install":  # SUPPRESS: given before the command name, the global option still counts
            default = argparse.SUPPRESS
            parser.add_argument("--data-dir", type=Path, default=default, help="the data directory the entry serves")
            parser.add_argument("--namespace", default=default, help="the namespace the entry writes to")


@dataclass(frozen=True)
class Change:
    what: str  # "server 'memory'", "hooks"
    path: Path
    old: str | None  # None: no file
    new: str | None  # None: no file afterwards


def run(args: argparse.Namespace) -> int:
    import platform  # here, like the rest: every `mcp-memory` start (a hook's too) imports this module

    from mcp_memory.install.clients import CLIENTS, Places

    client = CLIENTS.get(args.client)
    if client is None:
        import difflib

        near = difflib.get_close_matches(args.client.lower(), CLIENTS, n=1)
        meant = f" (did you mean {near[0]!r}?)" if near else ""
        raise InvalidInputError(
            "client", f"{args.client!r} is not a client this command knows{meant}; use one of: {', '.join(CLIENTS)}"
        )
    if not _NAME.fullmatch(args.name):
        raise InvalidInputError("--name", f"{args.name!r} is not a server name; use letters, digits, '-', '_' or '.'")
    if (args.hooks or args.hooks_config) and client.name != "claude-code":
        raise InvalidInputError("--hooks", f"hooks are Claude Code's; {client.name} has none (drop --hooks)")
    # The clients' own variables (not this server's settings, which config.py alone reads).
    moved = {name: os.environ[name] for name in ("APPDATA", "XDG_CONFIG_HOME", "CODEX_HOME") if os.environ.get(name)}
    places = Places(platform.system(), Path.home(), moved)
    changes = _changes(args, client, places)
    for change in changes:
        _apply(change, args.command, args.dry_run)
    if args.dry_run:
        _err("dry run: nothing was written")
    elif any(change.old != change.new for change in changes):
        _err(f"restart {client.title} (or reload its MCP servers) to pick the change up")
    return 0


def _changes(args: argparse.Namespace, client: Client, places: Places) -> list[Change]:
    import platform

    from mcp_memory.install import claude_hooks, documents
    from mcp_memory.install.clients import claude_code_settings

    name = args.name
    path = Path(args.client_config or client.location(places, name)).expanduser()
    changes: list[Change] = []
    extra = _serve_flags(args)
    if args.command == "install":
        entry = client.entry(executable(), ["serve", *extra])
        changes.append(
            _plan(f"server {name!r}", path, lambda old: documents.install_text(client, old, path, name, entry))
        )
    else:
        changes.append(_plan(f"server {name!r}", path, lambda old: documents.uninstall_text(client, old, path, name)))
    hooks_path = Path(args.hooks_config or claude_code_settings(places)).expanduser()
    if args.hooks and args.command == "install":
        lines = claude_hooks.commands(executable(), extra, platform.system() == "Windows")
        changes.append(_plan("hooks", hooks_path, lambda old: claude_hooks.install_hooks(old, hooks_path, lines)))
    elif args.hooks:
        changes.append(_plan("hooks", hooks_path, lambda old: claude_hooks.uninstall_hooks(old, hooks_path)))
    elif client.name == "claude-code" and args.command == "uninstall" and hooks_path.is_file():
        from mcp_memory.install.files import read_text

        if claude_hooks.has_ours(read_text(hooks_path)):
            _err(f"note: the mcp-memory hooks in {hooks_path} stay; add --hooks to remove them too")
    return changes


def _serve_flags(args: argparse.Namespace) -> list[str]:
    flags: list[str] = []
    data_dir = getattr(args, "data_dir", None) if args.command == "install" else None
    if data_dir is not None:  # absolute: the client starts the server from a directory of its own
        flags += ["--data-dir", str(Path(data_dir).expanduser().resolve())]
    namespace = getattr(args, "namespace", None) if args.command == "install" else None
    if namespace is not None:
        flags += ["--namespace", namespace]
    return flags


def _plan(what: str, path: Path, edit: Callable[[str | None], str | None]) -> Change:
    from mcp_memory.install.files import read_text, target

    path = target(path)
    old = read_text(path)
    return Change(what, path, old, edit(old))


def _apply(change: Change, verb: str, dry_run: bool) -> None:
    from mcp_memory.install.files import backup, missing_folders, note_made, remove_made, write_atomic

    folder = change.path.parent
    if change.old == change.new:
        state = "already installed in" if verb == "install" else "not in"
        _err(f"{change.what}: {state} {change.path}; nothing to change")
        if change.new is None and not dry_run:  # the file went some other way: the folders still may
            _removed(remove_made(folder))
        return
    if dry_run:
        sys.stdout.write(diff(change))
        return
    made = missing_folders(folder) if change.new is not None else []
    try:
        # A file that goes held our entry and nothing else (documents.uninstall_text): no copy to keep.
        copy = backup(change.path) if change.old is not None and change.new is not None else None
        if change.new is None:
            change.path.unlink()
        else:
            write_atomic(change.path, change.new)
            if made:  # so uninstall can remove what it leaves empty, and nothing the user made
                note_made(folder, made)
    except OSError as exc:
        raise InvalidInputError(
            str(change.path), f"cannot be written ({exc.strerror or exc}); check the folder's permissions"
        ) from None
    done = {"install": "installed into", "uninstall": "removed from"}[verb]
    gone = " (the file held nothing else and is gone)" if change.new is None else ""
    _err(f"{change.what}: {done} {change.path}{gone}" + (f"; previous file kept as {copy}" if copy else ""))
    if change.new is None:
        _removed(remove_made(folder))


def _removed(folders: list[Path]) -> None:
    if folders:
        _err(f"removed the now empty folder(s) install had created: {', '.join(map(str, folders))}")


def diff(change: Change) -> str:
    """The change as a unified diff (what --dry-run prints)."""
    import difflib

    before = (change.old or "").splitlines(keepends=True)
    after = (change.new or "").splitlines(keepends=True)
    old_name = str(change.path) if change.old is not None else "/dev/null"
    new_name = str(change.path) if change.new is not None else "/dev/null"
    lines = difflib.unified_diff(before, after, old_name, new_name)
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def executable() -> str:
    """The absolute path of the `mcp-memory` command clients should start: the one being run, else
    the one beside this Python (the venv's bin or Scripts), else the one on PATH."""
    import shutil

    name = "mcp-memory.exe" if os.name == "nt" else "mcp-memory"
    candidates = [Path(sys.argv[0])] if Path(sys.argv[0]).name in (name, "mcp-memory") else []
    candidates.append(Path(sys.executable).parent / name)
    on_path = shutil.which("mcp-memory")
    if on_path:
        candidates.append(Path(on_path))
    for candidate in candidates:
        if candidate.is_file():
            return os.path.abspath(candidate)
    raise InvalidInputError(
        "mcp-memory",
        "the command was not found beside this Python nor on PATH; install it first (README: "
        "'Install it as a command'), then run `mcp-memory install` with that command",
    )


def _err(text: str) -> None:
    sys.stderr.write(text + "\n")
