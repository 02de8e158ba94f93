"""The argument checks of a checkpoint that the schema cannot make: identifiers the caller reuses
(task and node ids) hold no credential, texts are well formed, and a namespaced task has a namespace."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from mcp_memory.core.errors import InvalidInputError
from mcp_memory.core.models import Scope
from mcp_memory.core.task_model import TaskNode
from mcp_memory.services import task_tree
from mcp_memory.services.checks import identifier, text_field


def _refuse_secret_ids(changes: dict[str, Any]) -> None:
    """Node ids are reused by the caller as given: a credential in one is refused, not redacted."""
    current = changes.get("current_node")
    if isinstance(current, str):
        identifier("current_node", current)
    try:
        tree = TaskNode.model_validate(changes["tree"]) if isinstance(changes.get("tree"), dict) else None
    except ValidationError:
        return  # the merge names what is wrong with it
    for node, _ in task_tree.walk(tree) if tree is not None else ():
        identifier("tree", node.id)


_SAYS = {"title": "called", "goal": "for"}


def check_checkpoint(
    scope: Scope,
    task_id: str | None,
    title: str | None,
    goal: str | None,
    constraints: list[str] | None,
    changes: dict[str, Any],
    in_namespace: bool,
) -> None:
    if task_id is not None:
        identifier("task_id", task_id)
        if task_id in (".", ".."):
            raise InvalidInputError(
                "task_id", f"cannot be {task_id!r}: a URI reads it as a step of the path; choose another id"
            )
    for name, text in (("title", title), ("goal", goal)):
        if text is not None:
            text_field(name, text)
            if not text.strip():
                raise InvalidInputError(name, f"is blank; say what the task is {_SAYS[name]}, or leave {name} out")
    _refuse_secret_ids(changes)
    for i, item in enumerate(constraints or []):
        text_field(f"constraints[{i}]", item)
    if in_namespace and scope.namespace is None:
        raise InvalidInputError("namespaced", "this connection has no namespace to create the task in")
