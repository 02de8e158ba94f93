"""The task tools: checkpoint, resume, update_task, list_tasks, list_checkpoints."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult
from pydantic import BaseModel, Field

from mcp_memory.core.numbers import Bool, Int
from mcp_memory.core.task_model import CheckpointReason, PendingAction, TaskEdit, TaskNode, TokenUsage, ToolCallRecord
from mcp_memory.mcp import templates, wire_tasks
from mcp_memory.mcp.face import Face, shown
from mcp_memory.mcp.notify import task_uris
from mcp_memory.mcp.task_schemas import CheckpointPage, CheckpointResult, ResumePacket, TaskPage, TaskUpdateResult

CHECKPOINT_DOC = """Save a long task's state so it can be resumed exactly, later, from any session or client.

Creates the task on first use (give `goal`). Fields you pass replace those of the head; fields you
omit keep their value. Pass `expected_head` (the head_seq you last saw) to be told, instead of
silently forking, when another client moved the task meanwhile. Checkpoint after each finished
step, at phase changes, before a costly or irreversible action, and before pausing."""

RESUME_DOC = """Pick a task up where it stood: goal, constraints, the tree with statuses, the current node,
pending actions, time since the last change, what to verify first, the task's memories and the
pinned memories, within a token budget. Give `checkpoint_id` to roll back to that checkpoint (a
new checkpoint copies it; history is kept). The full checkpoint (snapshot included) is at
`full_checkpoint_uri`."""

UPDATE_TASK_DOC = (
    "Edit a task's tree all-or-nothing: add nodes, move them, set status/notes/title, set the "
    "current node. An unknown node, a cycle or a second root is an error and changes nothing."
)

LIST_TASKS_DOC = "List your tasks, most recently changed first; pass next_cursor to page on."

LIST_CHECKPOINTS_DOC = (
    "List a task's checkpoints (id, sequence, time, reason, size), newest first; pass next_cursor to page on."
)


def _as_json(value: Any) -> Any:
    """A given field as the head stores it: models (and lists of them) as JSON-ready values."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list) and value and isinstance(value[0], BaseModel):
        return [x.model_dump(mode="json") for x in value]
    return value


async def checkpoint(
    face: Face,
    ctx: Context,
    task_id: Annotated[str | None, Field(description="your id for the task; generated when absent")] = None,
    goal: Annotated[str | None, Field(description="what the task is for (required on creation)")] = None,
    title: str | None = None,
    constraints: list[str] | None = None,
    tree: Annotated[
        TaskNode | None, Field(description="the whole task tree: one root node, the steps in its children")
    ] = None,
    current_node: str | None = None,
    variables: dict[str, Any] | None = None,
    pending_actions: list[PendingAction] | None = None,
    last_tool_calls: list[ToolCallRecord] | None = None,
    snapshot: Annotated[str | None, Field(description="working-memory snapshot, free text")] = None,
    token_usage: TokenUsage | None = None,
    iterations: Int | None = None,
    reason: CheckpointReason = "manual",
    expected_head: Annotated[Int | None, Field(description="the head_seq you last saw")] = None,
    namespaced: Annotated[Bool, Field(description="create the task in this connection's namespace only")] = False,
) -> Annotated[CallToolResult, CheckpointResult]:
    given = {
        "tree": tree,
        "current_node": current_node,
        "variables": variables,
        "pending_actions": pending_actions,
        "last_tool_calls": last_tool_calls,
        "snapshot": snapshot,
        "token_usage": token_usage,
        "iterations": iterations,
    }
    saved = await face.tasks.checkpoint(
        face.scopes.scope(ctx),
        task_id,
        changes={k: _as_json(v) for k, v in given.items() if v is not None},
        title=title,
        goal=goal,
        constraints=constraints,
        reason=reason,
        expected_head=expected_head,
        in_namespace=namespaced,
    )
    await face.notifier.changed(task_uris(saved.checkpoint.task_id, checkpoint=True))
    result = wire_tasks.checkpoint_result(saved)
    return shown(result, templates.checkpoint_lines(result))


async def resume(
    face: Face,
    ctx: Context,
    task_id: str,
    checkpoint_id: Annotated[str | None, Field(description="roll back to this checkpoint")] = None,
    budget_tokens: Annotated[
        Int | None, Field(description="token budget, 200 to limits.max_recall_budget_tokens (32000); default 4000")
    ] = None,
) -> Annotated[CallToolResult, ResumePacket]:
    scope = face.scopes.scope(ctx)
    found = await face.tasks.resume(scope, task_id, checkpoint_id=checkpoint_id, budget_tokens=budget_tokens)
    if found.rolled_back_to is not None:
        await face.notifier.changed(task_uris(task_id, checkpoint=True))
    packet = wire_tasks.resume_packet(found)
    return shown(packet, templates.resume_lines(packet))


async def update_task(
    face: Face, ctx: Context, task_id: str, edits: list[TaskEdit], expected_head: Int | None = None
) -> TaskUpdateResult:
    task = await face.tasks.update_task(face.scopes.scope(ctx), task_id, edits, expected_head)
    await face.notifier.changed(task_uris(task_id, checkpoint=False))
    return wire_tasks.update_result(task)


async def list_tasks(
    face: Face, ctx: Context, cursor: str | None = None, limit: Int = 20
) -> Annotated[CallToolResult, TaskPage]:
    page = wire_tasks.task_page(await face.tasks.list_tasks(face.scopes.scope(ctx), cursor, limit))
    return shown(page, templates.task_list_lines(page))


async def list_checkpoints(
    face: Face, ctx: Context, task_id: str, cursor: str | None = None, limit: Int = 20
) -> Annotated[CallToolResult, CheckpointPage]:
    listed = await face.tasks.list_checkpoints(face.scopes.scope(ctx), task_id, cursor, limit)
    page = wire_tasks.checkpoint_page(listed)
    return shown(page, templates.checkpoint_list_lines(page))
