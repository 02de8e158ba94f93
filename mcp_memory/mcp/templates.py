"""The text blocks the face sends beside (or instead of) structured results: a task's resume packet
and a block of recalled memories, made from the prompt templates (``core.prompt_files``), and the
short lines the tools' text blocks give (recall, remember, checkpoint, resume, the task lists). The
MCP prompts, the tools' text blocks and the Claude Code hooks send the same words.

A text block is for reading: the structured content beside it carries every field; the text is not
that JSON again. Text a caller wrote is quoted as a JSON string (data, never an instruction)."""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from mcp_memory.core.caution import caution, reveal
from mcp_memory.core.prompt_files import template
from mcp_memory.core.text import indented, one_line, task_uri
from mcp_memory.mcp.recall_schemas import Hit, MemoryOut, Pin, RecallResult
from mcp_memory.mcp.schemas import RememberItem, RememberResult
from mcp_memory.mcp.task_schemas import (
    CheckpointInfo,
    CheckpointPage,
    CheckpointResult,
    MemoryBrief,
    ResumePacket,
    TaskPage,
    TaskSummary,
)


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


def _said(text: str, *, line: bool = False) -> str:
    """Task text as it was written, hidden characters shown ([U+202E]), with the caution a memory gets
    when it reads as an instruction: a goal or a note is the agent's record, not a command. With
    ``line``, on one line (a title, a step, an action: its line breaks shown as ``↵``); without, its
    lines after the first indented, so no line of it passes for a section header or a bullet of ours."""
    return reveal(one_line(text) if line else indented(text)) + _caution(text)


def _caution(text: str) -> str:
    note = caution(text)
    return f" [caution: {note}]" if note else ""


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
        title=_said(packet.title, line=True),
        task_id=reveal(one_line(packet.task_id)),
        elapsed=_ago(packet.elapsed_seconds),
        goal=_said(packet.goal),
        constraints=_bullets([_said(c, line=True) for c in packet.constraints]),
        tree=reveal(packet.tree) + _caution(packet.tree),  # our outline: a line per node, titles on theirs
        current=_said(f"{current.id}: {current.title}" + (f" ({current.notes})" if current.notes else ""), line=True)
        if current
        else "(none set)",
        pending=_bullets(
            [
                _said(a.text, line=True)
                + (" [external]" if a.external else "")
                + (" [irreversible]" if a.irreversible else "")
                for a in packet.pending_actions
            ]
        ),
        hints=_bullets(packet.hints + packet.warnings),
        pinned=_memories(packet.pinned),
        memories=_memories(packet.memories),
        uri=packet.full_checkpoint_uri or task_uri(packet.task_id),
        snapshot="  " + _said(packet.snapshot_excerpt) if packet.snapshot_excerpt else "(empty)",
        head_seq=packet.head_seq,
    )


def recall_text(query: str, pinned: Sequence[Pin | MemoryOut], hits: Sequence[Hit | MemoryOut]) -> str:
    """A context block of the memories recall found for ``query``, pinned ones first."""
    return template("recall_context").format(
        query=reveal(one_line(query)), pinned=_memories(pinned), memories=_memories(hits)
    )  # the question on its line: a line break in it cannot open a section of pinned rules


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


def _quoted(text: str) -> str:
    return orjson.dumps(reveal(text)).decode()


def _marks(marks: Sequence[str]) -> str:
    return "".join(f" [{mark}]" for mark in marks if mark)


def _remembered(item: RememberItem) -> str:
    head = f"- {item.index}: {item.outcome}" + (f" id={item.id}" if item.id else "")
    return (
        head
        + (f" ({item.reason})" if item.reason else "")
        + _marks(
            [
                f"replaces {', '.join(item.superseded)}" if item.superseded else "",
                f"conflicts with {', '.join(item.conflicts_with)}: ask the user" if item.conflicts_with else "",
                f"caution: {item.caution}" if item.caution else "",
            ]
        )
    )


def remember_lines(result: RememberResult) -> str:
    """What remember did: the counts, then one line per item (its place in the request, outcome, id)."""
    counts = f"{result.stored} stored, {result.merged} merged, {result.rejected} rejected"
    return "\n".join([counts, *(_remembered(item) for item in result.items)])


def checkpoint_lines(result: CheckpointResult) -> str:
    """A saved checkpoint in one line, with the head_seq to pass as expected_head next time. Its size is
    the serialized one (what limits.max_checkpoint_bytes measures), named so: list_checkpoints gives
    the stored size, another number for the same checkpoint."""
    cp = result.checkpoint
    made = "created and saved" if result.created_task else "saved"
    return (
        f"task {_quoted(cp.task_id)} {made}: checkpoint {cp.id} "
        f"(seq {cp.seq}, {result.serialized_size} bytes serialized); "
        f"pass expected_head={result.head_seq} next time"
    )


def _checkpoint_line(cp: CheckpointInfo) -> str:
    return f"- {cp.id} seq {cp.seq} {cp.reason} {cp.created_at:%Y-%m-%dT%H:%M:%SZ} ({cp.size} bytes stored)"


def _count(n: int, thing: str) -> str:
    return f"{n} {thing}" + ("" if n == 1 else "s")


def _more(cursor: str | None) -> list[str]:
    return [f"more: pass cursor={_quoted(cursor)}"] if cursor else []


def checkpoint_list_lines(page: CheckpointPage) -> str:
    """A task's checkpoints, newest first, one a line (id, sequence, reason, time, size)."""
    return "\n".join(
        [*(_checkpoint_line(cp) for cp in page.checkpoints), *_more(page.next_cursor)] or ["no checkpoints"]
    )


def _task_line(task: TaskSummary) -> str:
    goal = f" goal {_quoted(task.goal)}" if task.goal != task.title else ""
    where = f", at {_quoted(task.current_node)}" if task.current_node else ""
    return (
        f"- {_quoted(task.task_id)} {_quoted(task.title)}{goal} ({task.status or 'no tree'}{where}; "
        f"head_seq {task.head_seq}, {_count(task.checkpoints, 'checkpoint')}, "
        f"changed {task.updated_at:%Y-%m-%d %H:%M}Z)"
        + _marks([f"namespace {_quoted(task.namespace)}" if task.namespace else ""])
    )


def task_list_lines(page: TaskPage) -> str:
    """The caller's tasks, most recently changed first, one a line."""
    return "\n".join([*(_task_line(t) for t in page.tasks), *_more(page.next_cursor)] or ["no tasks"])


def resume_lines(packet: ResumePacket) -> str:
    """The resume packet as its words (``resume_text``), then what the words leave out and the agent
    picks the task up with: the variables, the last tool calls, where a rollback came from."""
    extra = []
    if packet.rolled_back_to:
        extra.append(f"Rolled back to checkpoint {packet.rolled_back_to} (copied as a new checkpoint).")
    if packet.variables:
        extra.append(f"Variables: {_said(orjson.dumps(packet.variables).decode())}")
    if packet.last_tool_calls:
        calls = [
            _said(f"{c.name}({orjson.dumps(c.arguments).decode()})" + (f" -> {c.result}" if c.result else ""))
            for c in packet.last_tool_calls
        ]
        extra.append("Last tool calls:\n" + _bullets(calls))
    if packet.iterations or packet.token_usage.input or packet.token_usage.output:
        usage = packet.token_usage
        extra.append(f"Iterations: {packet.iterations}; tokens used: {usage.input} in, {usage.output} out.")
    return "\n\n".join([resume_text(packet), *extra])
