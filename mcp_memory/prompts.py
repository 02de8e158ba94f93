"""MCP prompts: resume_task and recall_context. Their text lives in the prompts/ folder."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.prompts.base import Message, UserMessage
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from mcp_memory.errors import MemoryServerError
from mcp_memory.scope import ScopeResolver
from mcp_memory.services.memory import MemoryService
from mcp_memory.services.tasks import TaskService
from mcp_memory.templates import recall_text, resume_text


def register_prompts(mcp: MCPServer[Any], memory: MemoryService, tasks: TaskService, scopes: ScopeResolver) -> None:
    @mcp.prompt(name="resume_task", description="The messages that put an agent back on track with a task")
    async def resume_task(task_id: str) -> list[Message]:
        try:
            packet = await tasks.resume(scopes.scope(), task_id)
        except MemoryServerError as exc:
            raise MCPError(INVALID_PARAMS, str(exc)) from None
        text = resume_text(packet)
        return [UserMessage(text)]

    @mcp.prompt(name="recall_context", description="A context block of the memories that matter for a question")
    async def recall_context(query: str) -> list[Message]:
        try:
            result = await memory.recall(scopes.scope(), query, reinforce=False)
        except MemoryServerError as exc:
            raise MCPError(INVALID_PARAMS, str(exc)) from None
        text = recall_text(query, result.pinned, result.hits)
        return [UserMessage(text)]
