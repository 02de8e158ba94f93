"""MCP prompts: resume_task and recall_context. Their text lives in the prompts/ folder."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mcp.server.context import ServerMiddleware, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.prompts.base import Message, UserMessage
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from pydantic import BaseModel

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


def prompt_argument_guard(mcp: MCPServer[Any]) -> ServerMiddleware[Any]:
    """Server middleware: a prompt asked with an argument it does not declare, or without one it
    requires, is refused by name.

    Without it the SDK passes the argument on to the prompt's function, whose TypeError reaches the
    client only as "Error rendering prompt", which says nothing of what to change; a missing one
    reaches the client as error code 0 and the log as two tracebacks.
    """
    declared: dict[str, list[str]] = {}
    required: dict[str, list[str]] = {}

    async def guard(
        ctx: ServerRequestContext[Any, Any],
        call_next: Callable[[ServerRequestContext[Any, Any]], Awaitable[BaseModel | dict[str, Any] | None]],
    ) -> BaseModel | dict[str, Any] | None:
        params = ctx.params if isinstance(ctx.params, Mapping) else None
        if ctx.method == "prompts/get" and params is not None:
            if not declared:
                for prompt in await mcp.list_prompts():
                    declared[prompt.name] = [a.name for a in prompt.arguments or ()]
                    required[prompt.name] = [a.name for a in prompt.arguments or () if a.required]
            name, arguments = str(params.get("name")), params.get("arguments") or {}
            takes = declared.get(name)
            if takes is None or not isinstance(arguments, Mapping):
                return await call_next(ctx)
            accepted = ", ".join(takes)
            if unknown := sorted(set(arguments) - set(takes)):
                named = ", ".join(map(repr, unknown))
                raise MCPError(INVALID_PARAMS, f"unknown argument(s) {named}; the prompt {name} takes {accepted}")
            if missing := [a for a in required[name] if a not in arguments]:
                named = ", ".join(map(repr, missing))
                raise MCPError(INVALID_PARAMS, f"missing argument(s) {named}; the prompt {name} takes {accepted}")
        return await call_next(ctx)

    return guard
