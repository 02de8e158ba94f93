"""`mcp-memory import --from SOURCE PATH`: memories kept elsewhere, read in (a dry run by default)."""

from __future__ import annotations

import sys
from pathlib import Path

from mcp_memory.config import Settings
from mcp_memory.core.errors import InvalidInputError
from mcp_memory.core.models import MemoryDraft, Scope
from mcp_memory.services import foreign

MARKDOWN_SUFFIXES = (".md", ".markdown")


def read_source(source: str, path: Path, settings: Settings) -> tuple[list[MemoryDraft], int]:
    """The memories ``path`` holds in ``source``'s format, and how many of its entries were empty; a
    path that is not there, or not of that kind, is refused with what to give instead."""
    if source == "markdown":
        if not path.exists():
            raise InvalidInputError("path", f"{str(path)!r} does not exist; --from markdown reads a folder of notes")
        if not path.is_dir():
            raise InvalidInputError("path", f"{str(path)!r} is not a folder; --from markdown reads a folder of notes")
        return foreign.from_markdown(_notes(path), settings.limits), 0
    if str(path) == "-":
        data = sys.stdin.buffer.read()
    elif path.is_dir():
        raise InvalidInputError("path", f"{str(path)!r} is a folder; --from markdown reads a folder of notes")
    elif not path.is_file():
        raise InvalidInputError("path", f"{str(path)!r} does not exist")
    else:
        data = path.read_bytes()
    if source == "server-memory":
        return foreign.from_server_memory(data.splitlines(), settings.limits), 0
    return foreign.from_mem0(data, settings.limits)


def _notes(folder: Path) -> list[foreign.Note]:
    notes = []
    for file in sorted(folder.rglob("*")):
        hidden = any(part.startswith(".") for part in file.relative_to(folder).parts)
        if file.is_file() and file.suffix.lower() in MARKDOWN_SUFFIXES and not hidden:
            try:
                text = file.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                raise InvalidInputError("path", f"{str(file)!r} is not UTF-8 text") from None
            notes.append(foreign.Note(str(file.relative_to(folder)), text, file.stat().st_mtime))
    return notes


async def _bar(done: int, total: int, what: str) -> None:
    width = 30
    filled = width * done // max(total, 1)
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {what}")
    if done >= total:
        sys.stderr.write("\n")
    sys.stderr.flush()


async def run(settings: Settings, source: str, path: Path, apply: bool) -> int:
    from mcp_memory.compose import open_runtime
    from mcp_memory.mcp.wire_recall import hit_tokens

    items, empty = read_source(source, path, settings)
    async with open_runtime(settings, hit_cost=hit_tokens) as runtime:
        outcome = await foreign.bring_in(
            runtime.memory,
            Scope(settings.principal, settings.namespace),
            items,
            apply=apply,
            progress=_bar if sys.stderr.isatty() else None,
        )
    outcome.read += empty  # an empty entry is read and not worth keeping
    outcome.rejected += empty
    sys.stderr.write(report(source, outcome) + "\n")
    return 0


def report(source: str, outcome: foreign.Outcome) -> str:
    found = (
        f"{source}: {outcome.read} memories read; {outcome.new} new, {outcome.present} already stored, "
        f"{outcome.repeated} repeated in the source, {outcome.rejected} not worth keeping"
    )
    if not outcome.applied:
        return f"{found}. Dry run: nothing was written; add --apply to import the {outcome.new} new ones."
    reasons = sorted(set(outcome.reasons))
    why = f" ({'; '.join(reasons[:3])})" if reasons else ""
    return f"{found}{why}. Imported: {outcome.stored} stored, {outcome.merged} merged into a memory said the same way."
