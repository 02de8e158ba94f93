"""Completions (``completion/complete``) for the arguments of our prompts and resource templates.

A client autocompletes a task id for the ``resume_task`` prompt or ``memory://tasks/{task_id}``,
and a checkpoint id for ``memory://tasks/{task_id}/checkpoints/{checkpoint_id}`` once the task id
is chosen. Every value comes from the caller's own scope through TaskService, the same path the
resources read: no call completes another principal's ids, and an unknown task completes nothing.
"""

from __future__ import annotations

from mcp_types import Completion, CompletionArgument, CompletionContext, PromptReference, ResourceTemplateReference

from mcp_memory.core.errors import InvalidInputError, NotFoundError
from mcp_memory.mcp.face import Face

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


async def task_ids(face: Face, partial: str) -> Completion:
    page = await face.tasks.list_tasks(face.scopes.scope(), limit=200)
    return _matching([(t.row.task_id, t.row.title) for t in page.items], partial)


async def checkpoint_ids(face: Face, task_id: str | None, partial: str) -> Completion:
    if not task_id:
        return Completion(values=[])
    try:
        page = await face.tasks.list_checkpoints(face.scopes.scope(), task_id, limit=200)
    except (NotFoundError, InvalidInputError):  # not a task of this caller's: nothing to reveal
        return Completion(values=[])
    return _matching([(c.id, c.reason) for c in page.items], partial)


async def complete(
    face: Face,
    ref: PromptReference | ResourceTemplateReference,
    argument: CompletionArgument,
    context: CompletionContext | None,
) -> Completion | None:
    known = (context.arguments if context else None) or {}
    if isinstance(ref, PromptReference):
        wanted = ref.name == "resume_task" and argument.name == "task_id"
        return await task_ids(face, argument.value) if wanted else None
    if ref.uri not in TASK_TEMPLATES:
        return None
    if argument.name == "task_id":
        return await task_ids(face, argument.value)
    if argument.name == "checkpoint_id":
        return await checkpoint_ids(face, known.get("task_id"), argument.value)
    return None
