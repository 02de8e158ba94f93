"""Memories kept elsewhere, read into this server: the reference server-memory's knowledge graph,
mem0 exports and a folder of Markdown notes.

Each reader turns its source into `remember` inputs (pure functions of the text; the CLI reads the
files). `bring_in` then sends them through `remember`'s own path, so redaction, limits and the
duplicate rules apply as to any agent's memory. It is a dry run unless asked to write, and texts
already stored are counted and left alone, so running an import twice writes nothing the second
time. A source that cannot be read is refused with the line or file and what is wrong, before
anything is written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from mcp_memory.config import Limits
from mcp_memory.core.errors import InvalidInputError
from mcp_memory.core.models import MemoryDraft, Provenance, Scope
from mcp_memory.services import inputs, intake
from mcp_memory.services.intake import CallContext, Progress
from mcp_memory.services.memory import MemoryService

SOURCES = ("server-memory", "mem0", "markdown")
IMPORTER = Provenance(client_name="mcp-memory import", transport="cli")
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_KIND_WORD = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")


@dataclass
class Outcome:
    """What an import found and did: per memory read, new / already stored / rejected."""

    read: int = 0
    new: int = 0
    present: int = 0
    rejected: int = 0
    repeated: int = 0  # said again within the source: stored once
    stored: int = 0
    merged: int = 0
    applied: bool = False
    reasons: list[str] = field(default_factory=list)


def _tag(value: str, limits: Limits) -> str:
    return value.strip()[: limits.max_tag_chars]


def _spaced(name: str) -> str:
    return name.replace("_", " ").strip()


# ----- server-memory -----------------------------------------------------------------------


def from_server_memory(lines: Sequence[bytes], limits: Limits) -> list[MemoryDraft]:
    """The reference server's memory.jsonl: each observation of an entity becomes a memory that names
    it, each relation a memory naming both ends (recall links memories through the names they share);
    names and types are kept as tags and metadata."""
    items: list[MemoryDraft] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = orjson.loads(line)
            if not isinstance(row, dict):
                raise ValueError("is not a JSON object")
            items.extend(_graph_row(row, limits))
        except (orjson.JSONDecodeError, ValueError, TypeError) as exc:
            raise InvalidInputError(f"line {number}", f"is not a server-memory entity or relation: {exc}") from None
    return items


def _graph_row(row: dict[str, Any], limits: Limits) -> list[MemoryDraft]:
    kind = row.get("type")
    if kind == "entity":
        name, entity_type = _text(row, "name"), str(row.get("entityType") or "entity")
        observations = row.get("observations") or []
        if not isinstance(observations, list) or not all(isinstance(o, str) for o in observations):
            raise ValueError("observations must be a list of strings")
        meta = {"imported_from": "server-memory", "entity": name, "entity_type": entity_type}
        tags = [_tag(name, limits), _tag(entity_type, limits)]
        # "Name (type): ..." keeps the name a name: a bare "Name: " reads as a speaker, not a subject.
        texts = [f"{_spaced(name)} ({entity_type}): {o.strip()}" for o in observations if o.strip()]
        return [MemoryDraft(content=t, kind="observation", tags=tags, metadata=meta) for t in texts] or [
            MemoryDraft(content=f"{_spaced(name)} is a {entity_type}", tags=tags, metadata=meta)
        ]
    if kind == "relation":
        source, target, relation = _text(row, "from"), _text(row, "to"), _text(row, "relationType")
        meta = {"imported_from": "server-memory", "relation": relation, "from": source, "to": target}
        content = f"{_spaced(source)} {_spaced(relation)} {_spaced(target)}"
        return [MemoryDraft(content=content, tags=[_tag(source, limits), _tag(target, limits)], metadata=meta)]
    raise ValueError(f'"type" must be "entity" or "relation", not {kind!r}')


def _text(row: dict[str, Any], name: str) -> str:
    value = row.get(name)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f'"{name}" must be a non-empty string')
    return value.strip()


# ----- mem0 --------------------------------------------------------------------------------


def from_mem0(data: bytes, limits: Limits) -> tuple[list[MemoryDraft], int]:
    """A mem0 export: `get_all`'s {"results": [...]}, {"memories": [...]}, a JSON list, or JSON lines;
    each entry's `memory` is the text, `categories` become tags, `created_at` when it happened. Also
    how many entries hold an empty memory: nothing to keep, they are counted and skipped."""
    try:
        parsed: Any = orjson.loads(data)
    except orjson.JSONDecodeError:
        parsed = None
    if parsed is None:
        try:
            parsed = [orjson.loads(line) for line in data.splitlines() if line.strip()]
        except orjson.JSONDecodeError as exc:
            raise InvalidInputError("file", f"is neither JSON nor JSON lines: {exc}") from None
    if isinstance(parsed, dict):
        parsed = parsed.get("results", parsed.get("memories"))
    if not isinstance(parsed, list):
        raise InvalidInputError("file", 'is not a mem0 export: expected a list of memories, or {"results": [...]}')
    items = []
    empty = 0
    for number, entry in enumerate(parsed, start=1):
        text = entry.get("memory", entry.get("text")) if isinstance(entry, dict) else None
        if isinstance(text, str) and not text.strip():
            empty += 1
            continue
        try:
            items.append(_mem0_entry(entry, limits))
        except (ValueError, TypeError) as exc:
            raise InvalidInputError(f"memory {number}", f"is not a mem0 memory: {exc}") from None
    return items, empty


def _mem0_entry(entry: Any, limits: Limits) -> MemoryDraft:
    if not isinstance(entry, dict):
        raise ValueError("is not a JSON object")
    text = entry.get("memory", entry.get("text"))
    if not isinstance(text, str) or not text.strip():
        raise ValueError('"memory" must be a non-empty string')
    meta: dict[str, Any] = {"imported_from": "mem0"}
    for name in ("id", "user_id", "agent_id", "run_id"):
        if isinstance(entry.get(name), str):
            meta[f"mem0_{name}"] = entry[name]
    if isinstance(entry.get("metadata"), dict):
        meta.update({k: v for k, v in entry["metadata"].items() if k not in meta})
    categories = entry.get("categories") or []
    tags = [_tag(c, limits) for c in categories if isinstance(c, str) and c.strip()]
    when = entry.get("created_at") or entry.get("updated_at")
    return MemoryDraft(content=text, tags=tags, metadata=meta, occurred_at=_moment(when))


def _moment(value: Any, field: str = "created_at") -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{field} {value[:40]!r} is not an ISO 8601 time (such as 2026-03-01)") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


# ----- markdown ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Note:
    """One Markdown file: its path under the folder, its text, and when it was last changed."""

    path: str
    text: str
    modified: float


def from_markdown(notes: Iterable[Note], limits: Limits) -> list[MemoryDraft]:
    """One memory per section (a heading and the text under it), or per note without headings; the
    front matter is kept as metadata (its `tags` as tags, `kind` as the kind, `date` as the time)."""
    items: list[MemoryDraft] = []
    for note in notes:
        front, body = _front_matter(note.text)
        tags = [_tag(t, limits) for t in _as_list(front.get("tags")) if t.strip()]
        kind = str(front.get("kind", "note")).lower()
        try:
            when = _moment(front["date"], "date") if isinstance(front.get("date"), str) else None
        except ValueError as exc:
            raise InvalidInputError(note.path, f"front matter: {exc}") from None
        moment = when or datetime.fromtimestamp(note.modified, UTC)
        for heading, text in _sections(body):
            meta = {"imported_from": "markdown", "file": note.path, **front}
            if heading:
                meta["section"] = heading
            parts = _parts(f"{heading}: {text}" if heading else text, limits.max_content_bytes)
            kind = kind if _KIND_WORD.match(kind) else "note"
            items.extend(
                MemoryDraft(content=part, kind=kind, tags=tags, metadata=meta, occurred_at=moment) for part in parts
            )
    return items


def _front_matter(text: str) -> tuple[dict[str, Any], str]:
    """A leading `---` block of `key: value` lines (a value may be [a, b] or `- item` lines)."""
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---" or "---" not in (line.strip() for line in lines[1:]):
        return {}, text
    end = next(i for i, line in enumerate(lines[1:], start=1) if line.strip() == "---")
    front: dict[str, Any] = {}
    key = None
    for line in lines[1:end]:
        item = re.match(r"^\s*-\s+(.*)$", line)
        pair = re.match(r"^([A-Za-z_][\w-]*)\s*:\s*(.*)$", line)
        if item and key is not None:
            front[key] = [*_as_list(front.get(key)), item.group(1).strip().strip("\"'")]
        elif pair:
            key, value = pair.group(1), pair.group(2).strip()
            front[key] = _front_value(value) if value else []
    return front, "\n".join(lines[end + 1 :])


def _front_value(value: str) -> Any:
    if value.startswith("[") and value.endswith("]"):
        return [v.strip().strip("\"'") for v in value[1:-1].split(",") if v.strip()]
    return value.strip("\"'")


def _as_list(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    return [v.strip() for v in str(value).split(",")] if value else []


def _sections(body: str) -> list[tuple[str, str]]:
    """(heading, text) per section; text before the first heading has no heading. Fenced code is
    never a heading."""
    sections: list[tuple[str, list[str]]] = [("", [])]
    fenced = False
    for line in body.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        found = None if fenced else _HEADING.match(line)
        if found:
            sections.append((found.group(2).strip(), []))
        else:
            sections[-1][1].append(line)
    return [(h, "\n".join(t).strip()) for h, t in sections if "\n".join(t).strip()]


def _parts(text: str, limit: int) -> list[str]:
    """The text in pieces of at most ``limit`` UTF-8 bytes, cut between paragraphs where it can."""
    if len(text.encode()) <= limit:
        return [text]
    parts: list[str] = []
    current = ""
    for paragraph in re.split(r"\n\s*\n", text):
        joined = f"{current}\n\n{paragraph}" if current else paragraph
        if len(joined.encode()) <= limit:
            current = joined
            continue
        if current:
            parts.append(current)
        while len(paragraph.encode()) > limit:  # one paragraph over the limit: cut at a character
            cut = paragraph.encode()[:limit].decode(errors="ignore")
            parts.append(cut)
            paragraph = paragraph[len(cut) :]
        current = paragraph
    return [*parts, current] if current else parts


# ----- the write ---------------------------------------------------------------------------


async def bring_in(
    memory: MemoryService,
    scope: Scope,
    items: Sequence[MemoryDraft],
    *,
    apply: bool,
    progress: Progress | None = None,
) -> Outcome:
    """Count what is new, already stored or not worth keeping; with ``apply``, remember the new ones
    in batches (remember's own path). Every item is checked before anything is written."""
    for i, item in enumerate(items):
        inputs.check_memory(i, item, memory.limits)
    batch = intake.prepare(scope, items)
    outcome = Outcome(read=len(items), applied=apply)
    outcome.rejected = sum(r is not None for r in batch.results)
    present = await memory.store.find_by_hash(scope, [p.hash for p in batch.prepared], memory.clock())
    unique = {p.hash: p.item for p in reversed(batch.prepared) if p.hash not in present}  # the first of repeats
    fresh = [p.item for p in batch.prepared if p.hash in unique and unique[p.hash] is p.item]
    outcome.present = sum(p.hash in present for p in batch.prepared)
    outcome.repeated = len(batch.prepared) - outcome.present - len(fresh)
    outcome.new = len(fresh)
    if not apply:
        return outcome
    size = memory.limits.max_batch
    for start in range(0, len(fresh), size):
        result = await memory.remember(scope, fresh[start : start + size], CallContext(IMPORTER))
        outcome.stored += result.stored
        outcome.merged += result.merged
        outcome.rejected += result.rejected
        outcome.reasons.extend(r.reason for r in result.items if r.outcome == "rejected" and r.reason)
        if progress is not None:
            await progress(min(start + size, len(fresh)), len(fresh), "imported")
    return outcome
