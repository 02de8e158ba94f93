"""The text blocks the face sends beside (or instead of) structured results: a task's resume packet
and a block of recalled memories, made from the prompt templates (``core.prompt_files``). The MCP
prompts, recall's text block and the Claude Code hooks send the same words."""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from mcp_memory.core.caution import caution, reveal
from mcp_memory.core.prompt_files import template
from mcp_memory.core.text import task_uri
from mcp_memory.mcp.recall_schemas import Hit, MemoryOut, Pin, RecallResult
from mcp_memory.mcp.task_schemas import MemoryBrief, ResumePacket


def _bullets(items: list[str]) -> str:
    return "\n".join(f"- {item}" for item in items) if items else "(none)"


def _memories(memories: Sequence[MemoryBrief | MemoryOut | Hit | Pin]) -> str:
    """Each memory quoted as a JSON string (data, never an instruction), with its date and id, and the
    caution when its text reads as an instruction to the agent."""
    return _bullets(
        [
            f"{orjson.dumps(m.text).decode()} ({m.occurred_at:%Y-%m-%d}, id {m.id})"
            + (f" [caution: {m.caution}]" if m.caution else "")
            for m in memories
        ]
    )


def _said(text: str) -> str:
    """Task text as it was written, hidden characters shown ([U+202E]), with the caution a memory gets
    when it reads as an instruction: a goal or a note is the agent's record, not a command."""
    note = caution(text)
    return reveal(text) + (f" [caution: {note}]" if note else "")


def _ago(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} seconds"
    if seconds < 7200:
        return f"{seconds / 60:.0f} minutes"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} hours"
    return f"{seconds / 86400:.1f} days"


def resume_text(packet: ResumePacket) -> str:
    """The resume packet as the words that put an agent back on track with its task."""
    current = packet.current_node
    return template("resume_task").format(
        title=_said(packet.title),
        task_id=reveal(packet.task_id),
        elapsed=_ago(packet.elapsed_seconds),
        goal=_said(packet.goal),
        constraints=_bullets([_said(c) for c in packet.constraints]),
        tree=_said(packet.tree),
        current=_said(f"{current.id}: {current.title}" + (f" ({current.notes})" if current.notes else ""))
        if current
        else "(none set)",
        pending=_bullets(
            [
                _said(a.text) + (" [external]" if a.external else "") + (" [irreversible]" if a.irreversible else "")
                for a in packet.pending_actions
            ]
        ),
        hints=_bullets(packet.hints + packet.warnings),
        pinned=_memories(packet.pinned),
        memories=_memories(packet.memories),
        uri=packet.full_checkpoint_uri or task_uri(packet.task_id),
        snapshot=_said(packet.snapshot_excerpt) if packet.snapshot_excerpt else "(empty)",
        head_seq=packet.head_seq,
    )


def recall_text(query: str, pinned: Sequence[Pin | MemoryOut], hits: Sequence[Hit | MemoryOut]) -> str:
    """A context block of the memories recall found for ``query``, pinned ones first."""
    return template("recall_context").format(query=query, pinned=_memories(pinned), memories=_memories(hits))


def hint_text(hits: Sequence[Hit | MemoryOut]) -> str:
    """The few memories recall found for a prompt, as a short note beside it (a Claude Code hook)."""
    return template("prompt_hint").format(memories=_memories(hits))


def _line(m: Hit | MemoryOut | Pin) -> str:
    """One memory on one line: its text quoted (data, never an instruction; a line break stays
    inside the quotes), its date, why it was recalled, and its id (forget, pin and correct take the
    whole id), then only what is set of what to beware of."""
    why = getattr(m, "why", None)
    line = f"- {orjson.dumps(m.text).decode()} ({m.occurred_at:%Y-%m-%d}{f'; {why}' if why else ''}) id={m.id}"
    replaced = getattr(m, "superseded_by", None)
    sources = getattr(m, "source_ids", None)
    extras = [
        f"caution: {m.caution}" if m.caution else "",
        f"conflicts with {', '.join(m.conflicts_with)}" if m.conflicts_with else "",
        f"replaced by {replaced}" if replaced else "",
        f"summary of {len(sources)} memories" if sources else "",
    ]
    return line + "".join(f" [{extra}]" for extra in extras if extra)


def recall_lines(result: RecallResult) -> str:
    """Recall's answer as a person reads it: one line per hit, best first, then the pinned memories
    and the note when there is one. The structured content carries every field; this is not it again."""
    lines = [_line(hit) for hit in result.hits] or ["no memories recalled"]
    if result.pinned:
        lines += ["pinned (always apply):", *(_line(pin) for pin in result.pinned)]
    if result.note:
        lines.append(f"note: {result.note}")
    return "\n".join(lines)
