"""MCP resources: pinned memory and the task trees, rendered for people and for programs.

memory://stats                                       what the server holds for you, JSON
memory://pinned                                      pinned memories, Markdown
memory://pinned.json                                 the same, JSON
memory://tasks                                       the caller's tasks, JSON (newest first)
memory://tasks/{task_id}                             the head, rendered readably (snapshot included)
memory://tasks/{task_id}/checkpoints                 the task's checkpoints, JSON
memory://tasks/{task_id}/checkpoints/{checkpoint_id} one full checkpoint, JSON

The SDK calls a static resource without a Context: the caller is resolved from the request the
``record_request`` middleware recorded (``ScopeResolver.scope()``).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from mcp_memory.core.text import one_line
from mcp_memory.mcp import wire_tasks
from mcp_memory.mcp.face import Face
from mcp_memory.mcp.recall_schemas import MemoryOut
from mcp_memory.mcp.task_schemas import TaskState
from mcp_memory.mcp.wire_recall import memory_out
from mcp_memory.mcp.wire_upkeep import stats_result
from mcp_memory.services import task_tree


def _fenced(text: str) -> str:
    """Free text (a goal, the snapshot) as written, in a code fence longer than any run of backticks
    in it: no line of it can pass for a heading or a list of the page's own ("## Pending actions")."""
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def _json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()


def pinned_markdown(pinned: list[MemoryOut]) -> str:
    if not pinned:
        return "# Pinned memory\n\nNothing is pinned. Pin goals, rules and identity with the `pin` tool.\n"
    lines = ["# Pinned memory", ""]
    lines += [
        f"- **{m.kind}**: {one_line(m.text)} _(id {m.id}, since {m.created_at:%Y-%m-%d}{_origin(m)})_"
        + (f" **[caution: {m.caution}]**" if m.caution else "")
        for m in pinned
    ]
    return "\n".join(lines) + "\n"


def _origin(memory: MemoryOut) -> str:
    """Where a pin from the memory file comes from: edit it there, not with the tools."""
    key = memory.key or ""
    if not key.startswith("file:"):
        return ""
    return "; from the memory file" + ("" if key.startswith("file:t-") else f", {{#{key[5:]}}}")


def task_markdown(state: TaskState) -> str:
    head = state.head
    parts = [
        f"# {one_line(state.title)}",
        "",
        f"- task id: `{state.task_id}`",
        f"- head: {state.head_seq}",
        f"- updated: {state.updated_at:%Y-%m-%d %H:%M:%S} UTC",
        f"- current node: {one_line(head.current_node or '(none)')}",
        "",
        "## Goal",
        "",
        _fenced(state.goal),
        "",
        "## Constraints",
        "",
        *([f"- {one_line(c)}" for c in state.constraints] or ["(none)"]),
        "",
        "## Tree",
        "",
        "```",
        task_tree.outline(head.tree, head.current_node),
        "```",
        "",
        "## Pending actions",
        "",
        *(
            [
                f"- {one_line(a.text)}"
                + (" (external)" if a.external else "")
                + (" (irreversible)" if a.irreversible else "")
                for a in head.pending_actions
            ]
            or ["(none)"]
        ),
        "",
        "## Variables",
        "",
        "```json",
        _json(head.variables),
        "```",
        "",
        "## Last tool calls",
        "",
        "```json",
        _json([c.model_dump(mode="json") for c in head.last_tool_calls]),
        "```",
        "",
        f"## Usage\n\n{head.iterations} iterations, {head.token_usage.input} input and "
        f"{head.token_usage.output} output tokens",
        "",
        "## Snapshot",
        "",
        _fenced(head.snapshot) if head.snapshot else "(empty)",
        "",
    ]
    return "\n".join(parts)


async def stats_json(face: Face) -> str:
    return _json(stats_result(await face.stats.stats(face.scopes.scope())).model_dump(mode="json"))


async def pinned_md(face: Face) -> str:
    return pinned_markdown([memory_out(m) for m in await face.memory.pinned(face.scopes.scope())])


async def pinned_json(face: Face) -> str:
    return _json([memory_out(m).model_dump(mode="json") for m in await face.memory.pinned(face.scopes.scope())])


async def task_list(face: Face) -> str:
    page = await face.tasks.list_tasks(face.scopes.scope(), limit=100)
    return _json(wire_tasks.task_page(page).model_dump(mode="json"))


async def task(face: Face, task_id: str) -> str:
    return task_markdown(wire_tasks.task_state(await face.tasks.state(face.scopes.scope(), task_id)))


async def checkpoint_list(face: Face, task_id: str) -> str:
    page = await face.tasks.list_checkpoints(face.scopes.scope(), task_id, limit=200)
    return _json(wire_tasks.checkpoint_page(page).model_dump(mode="json"))


async def checkpoint(face: Face, task_id: str, checkpoint_id: str) -> str:
    row, envelope = await face.tasks.read_checkpoint(face.scopes.scope(), task_id, checkpoint_id)
    return _json(wire_tasks.checkpoint_document(row, envelope))
