"""What to verify before acting on a resumed task: the hints of the resume packet (ADR 6).

The face packs the packet into its token budget (``mcp/wire_tasks.py``).
"""

from __future__ import annotations

from mcp_memory.core.task_model import TaskHead
from mcp_memory.services import task_tree

LONG_PAUSE_SECONDS = 24 * 3600


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
                out.append(f"Node {node.id!r} is blocked: {node.blocked_reason}.")
    if head.current_node is None and head.tree is not None:
        out.append("No current node is set: pick the next pending node and set it with update_task.")
    return out
