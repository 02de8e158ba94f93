"""Completions (``completion/complete``) for the arguments of our prompts and resource templates.

A client autocompletes a task id for the ``resume_task`` prompt or ``memory://tasks/{task_id}``,
and a checkpoint id for ``memory://tasks/{task_id}/checkpoints/{checkpoint_id}`` once the task id
is chosen. Every value comes from the caller's own scope through TaskService, the same path the
resources read: no call completes another principal's ids, and an unknown task completes nothing.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp_types import Completion, CompletionArgument, CompletionContext, PromptReference, ResourceTemplateReference

from mcp_memory.errors import InvalidInputError, NotFoundError
from mcp_memory.scope import ScopeResolver
from mcp_memory.services.tasks import TaskService

# The protocol's ceiling on values in one answer.
MAX_VALUES = 100
TASK_TEMPLATES = frozenset(
    {
        "memory://tasks/{task_id}",
        "memory://tasks/{task_id}/checkpoints",
        "memory://tasks/{task_id}/checkpoints/{checkpoint_id}",
    }
)


def _matching(candidates: list[tuple[str, str]], partial: str) -> Completion:
    """The ids (most recent first) whose id starts with ``partial`` or whose label contains it."""
    wanted = partial.strip().lower()
    values = [i for i, label in candidates if i.lower().startswith(wanted) or wanted in label.lower()]
    return Completion(values=values[:MAX_VALUES], total=len(values), has_more=len(values) > MAX_VALUES)


def register_completions(mcp: MCPServer[Any], tasks: TaskService, scopes: ScopeResolver) -> None:
    async def task_ids(partial: str) -> Completion:
        page = await tasks.list_tasks(scopes.scope(), limit=200)
        return _matching([(t.task_id, t.title) for t in page.tasks], partial)

    async def checkpoint_ids(task_id: str | None, partial: str) -> Completion:
        if not task_id:
            return Completion(values=[])
        scope = scopes.scope()
        try:
            page = await tasks.list_checkpoints(scope, task_id, limit=200)
        except (NotFoundError, InvalidInputError):  # not a task of this caller's: nothing to reveal
            return Completion(values=[])
        return _matching([(c.id, c.reason) for c in page.checkpoints], partial)

    @mcp.completion()  # type: ignore[no-untyped-call, untyped-decorator]  # the SDK leaves it untyped
    async def complete(
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion | None:
        known = (context.arguments if context else None) or {}
        if isinstance(ref, PromptReference):
            return await task_ids(argument.value) if ref.name == "resume_task" and argument.name == "task_id" else None
        if ref.uri not in TASK_TEMPLATES:
            return None
        if argument.name == "task_id":
            return await task_ids(argument.value)
        if argument.name == "checkpoint_id":
            return await checkpoint_ids(known.get("task_id"), argument.value)
        return None
