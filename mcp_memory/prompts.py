"""MCP prompts: resume_task and recall_context. Their text lives in the prompts/ folder."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.prompts.base import Message, UserMessage
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from mcp_memory.errors import MemoryServerError
from mcp_memory.schemas import Hit, MemoryOut
from mcp_memory.scope import ScopeResolver
from mcp_memory.services.memory import MemoryService
from mcp_memory.services.tasks import TaskService
from mcp_memory.task_schemas import MemoryBrief
from mcp_memory.templates import template


def _bullets(items: list[str]) -> str:
    return "\n".join(f"- {item}" for item in items) if items else "(none)"


def _memories(memories: Sequence[MemoryBrief | MemoryOut | Hit]) -> str:
    return _bullets([f"{m.text} ({m.occurred_at:%Y-%m-%d}, id {m.id})" for m in memories])


def _ago(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} seconds"
    if seconds < 7200:
        return f"{seconds / 60:.0f} minutes"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} hours"
    return f"{seconds / 86400:.1f} days"


def register_prompts(mcp: MCPServer[Any], memory: MemoryService, tasks: TaskService, scopes: ScopeResolver) -> None:
    @mcp.prompt(name="resume_task", description="The messages that put an agent back on track with a task")
    async def resume_task(task_id: str) -> list[Message]:
        try:
            packet = await tasks.resume(scopes.scope(), task_id)
        except MemoryServerError as exc:
            raise MCPError(INVALID_PARAMS, str(exc)) from None
        current = packet.current_node
        text = template("resume_task").format(
            title=packet.title,
            task_id=packet.task_id,
            elapsed=_ago(packet.elapsed_seconds),
            goal=packet.goal,
            constraints=_bullets(packet.constraints),
            tree=packet.tree,
            current=f"{current.id}: {current.title}" + (f" ({current.notes})" if current.notes else "")
            if current
            else "(none set)",
            pending=_bullets(
                [
                    a.text + (" [external]" if a.external else "") + (" [irreversible]" if a.irreversible else "")
                    for a in packet.pending_actions
                ]
            ),
            hints=_bullets(packet.hints + packet.warnings),
            pinned=_memories(packet.pinned),
            memories=_memories(packet.memories),
            uri=packet.full_checkpoint_uri or f"memory://tasks/{task_id}",
            snapshot=packet.snapshot_excerpt or "(empty)",
            head_seq=packet.head_seq,
        )
        return [UserMessage(text)]

    @mcp.prompt(name="recall_context", description="A context block of the memories that matter for a question")
    async def recall_context(query: str) -> list[Message]:
        try:
            result = await memory.recall(scopes.scope(), query, reinforce=False)
        except MemoryServerError as exc:
            raise MCPError(INVALID_PARAMS, str(exc)) from None
        text = template("recall_context").format(
            query=query, pinned=_memories(result.pinned), memories=_memories(result.hits)
        )
        return [UserMessage(text)]
