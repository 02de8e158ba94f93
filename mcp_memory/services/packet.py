"""What to verify before acting on a resumed task: the hints of the resume packet (ADR 6).

The face packs the packet into its token budget (``mcp/wire_tasks.py``).
"""

from __future__ import annotations

from mcp_memory.core.task_model import TaskHead, TaskNode
from mcp_memory.core.text import one_line
from mcp_memory.services import task_tree

LONG_PAUSE_SECONDS = 24 * 3600
FINISHED = ("done", "abandoned")


def hints(head: TaskHead, elapsed: float) -> list[str]:
    out: list[str] = []
    if elapsed >= LONG_PAUSE_SECONDS:
        days = elapsed / 86400
        out.append(
            f"The task was paused {days:.1f} days ago: check that the files, branches, prices and answers "
            "the plan depends on are still as recorded before acting."
        )
    for action in head.pending_actions:
        if action.external:
            out.append(f"Pending external action {action.text!r}: verify whether it already happened before doing it.")
        if action.irreversible:
            out.append(f"Pending action {action.text!r} is irreversible: confirm with the user before doing it.")
    if head.tree is not None:
        for node, _ in task_tree.walk(head.tree):
            if node.status == "blocked":
                out.append(f"Node {node.id!r} is blocked: {one_line(node.blocked_reason or '')}.")
    if head.tree is not None:
        out.extend(_next_step(head.tree, head.current_node))
    return out


def _next_step(tree: TaskNode, current: str | None) -> list[str]:
    """What the plan says to do next when the head does not: the root's steps all finished while
    the root is not, or no current node, or a current node already finished; nothing to pick when
    the root itself is finished (the task is over: no pending node to set)."""
    if tree.status in FINISHED:
        return [f"The task is over: its root {tree.id!r} is {tree.status}. Do nothing more for it unless asked."]
    below = [node for node, parent in task_tree.walk(tree) if parent is not None]
    if below and all(node.status in FINISHED for node in below):
        return [
            f"Every step under {tree.id!r} is done or abandoned but {tree.id!r} is {tree.status}: "
            "set it to done with update_task, or add the steps still to do."
        ]
    if current is None:
        return ["No current node is set: pick the next pending node and set it with update_task."]
    found = task_tree.find(tree, current)
    if found is not None and found[0].status in FINISHED:
        return [f"The current node {current!r} is {found[0].status}: set the next pending node with update_task."]
    return []
