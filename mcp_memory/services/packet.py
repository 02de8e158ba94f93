"""The resume packet: what puts an agent back on track, packed into a token budget.

Always included: goal, constraints, the current node, pending actions, hints. Then, in order,
as the budget allows: the tree (finished subtrees fold first), the task's memories, variables,
the last tool calls, and an excerpt of the snapshot. Pinned memories have their own cap
(limits.pinned_cap_tokens) and are not counted here. The full checkpoint is a resource URI.
"""

from __future__ import annotations

from typing import Any

import orjson

from mcp_memory.core.schemas import MemoryOut
from mcp_memory.core.task_schemas import (
    CheckpointInfo,
    MemoryBrief,
    ResumePacket,
    TaskHead,
    TaskNode,
    TaskState,
    ToolCallRecord,
)
from mcp_memory.core.text import estimate_tokens
from mcp_memory.services import task_tree

LONG_PAUSE_SECONDS = 24 * 3600
_OMITTED = "(omitted for the budget; see the full checkpoint)"


def _tokens(value: Any) -> int:
    text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
    return estimate_tokens(text)


def hints(state: TaskState, elapsed: float) -> list[str]:
    head = state.head
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


def build(
    state: TaskState,
    *,
    elapsed: float,
    budget: int,
    checkpoint: CheckpointInfo | None,
    memories: list[MemoryOut],
    pinned: list[MemoryOut],
    warnings: list[str],
    rolled_back_to: str | None,
    full_uri: str | None,
) -> ResumePacket:
    head = state.head
    current = _current(head)
    packet_hints = hints(state, elapsed)
    used = sum(_tokens(x) for x in (state.goal, state.constraints, packet_hints, warnings))
    used += _tokens(current.model_dump(mode="json")) if current else 0
    used += _tokens([a.model_dump(mode="json") for a in head.pending_actions])
    tree_text = _tree(head, max(budget - used, 0))
    used += _tokens(tree_text)
    kept_memories = _briefs(memories, budget - used)
    used += sum(_tokens(b.model_dump(mode="json")) for b in kept_memories)

    variables = head.variables if _tokens(head.variables) <= budget - used else dict.fromkeys(head.variables, _OMITTED)
    if variables is not head.variables:
        warnings = [*warnings, "variables were too large for the budget: read the full checkpoint"]
    used += _tokens(variables)
    tool_calls = _recent_calls(head, budget - used)
    used += _tokens([c.model_dump(mode="json") for c in tool_calls])

    excerpt = _excerpt(head.snapshot, budget - used)
    used += _tokens(excerpt) if excerpt else 0

    packet = ResumePacket(
        task_id=state.task_id,
        title=state.title,
        goal=state.goal,
        constraints=state.constraints,
        head_seq=state.head_seq,
        checkpoint=checkpoint,
        rolled_back_to=rolled_back_to,
        tree=tree_text,
        current_node=current,
        pending_actions=head.pending_actions,
        variables=variables,
        last_tool_calls=tool_calls,
        iterations=head.iterations,
        token_usage=head.token_usage,
        elapsed_seconds=round(elapsed, 3),
        hints=packet_hints,
        memories=kept_memories,
        pinned=[_brief(m) for m in pinned],
        snapshot_excerpt=excerpt,
        snapshot_chars=len(head.snapshot),
        full_checkpoint_uri=full_uri,
        warnings=warnings,
        budget_tokens=budget,
        used_tokens=used,
    )
    return _fit(packet, state, budget)


def _current(head: TaskHead) -> TaskNode | None:
    """The node the task is at, without its children (the tree shows them)."""
    found = task_tree.find(head.tree, head.current_node) if head.current_node is not None else None
    return found[0].model_copy(update={"children": []}) if found is not None else None


def _tree(head: TaskHead, room: int) -> str:
    """The tree in up to about 40% of what is left, folding finished work first."""
    tree_text = task_tree.outline(head.tree, head.current_node)
    lines = tree_text.count("\n") + 1
    while lines > 1 and _tokens(tree_text) > max(room * 0.4, 40):
        lines = max(1, lines // 2) if lines > 8 else lines - 1
        tree_text = task_tree.outline(head.tree, head.current_node, max_lines=lines)
    return tree_text


def _briefs(memories: list[MemoryOut], room: int) -> list[MemoryBrief]:
    """The memories, best first, while they fit in ``room`` tokens."""
    kept: list[MemoryBrief] = []
    for memory in memories:
        brief = _brief(memory)
        cost = _tokens(brief.model_dump(mode="json"))
        if cost > room:
            break
        kept.append(brief)
        room -= cost
    return kept


def _recent_calls(head: TaskHead, room: int) -> list[ToolCallRecord]:
    """The last tool calls, the oldest dropped first until they fit in ``room`` tokens."""
    calls = list(head.last_tool_calls)
    while calls and _tokens([c.model_dump(mode="json") for c in calls]) > room:
        calls.pop(0)
    return calls


def _excerpt(snapshot: str, left: int) -> str:
    """The head of the snapshot that fits in ``left`` tokens."""
    # Latin text runs about 4 characters a token and CJK about 1: cutting there before estimating keeps
    # a 1 MB snapshot from being measured whole only to learn that it does not fit.
    excerpt = snapshot[: max(left, 0) * 4]
    if _tokens(excerpt) > left:
        # Cut to the budget (a token is ~3 characters of Latin text, ~1 of CJK: halve until it fits).
        excerpt = excerpt[: max(left, 0) * 3]
        while excerpt and _tokens(excerpt) > left:
            excerpt = excerpt[: len(excerpt) * 3 // 4]
    return excerpt


def _brief(memory: MemoryOut) -> MemoryBrief:
    return MemoryBrief(
        id=memory.id,
        text=memory.text,
        kind=memory.kind,
        occurred_at=memory.occurred_at,
        importance=memory.importance,
        caution=memory.caution,
    )


def _measure(packet: ResumePacket) -> int:
    return _tokens(packet.model_dump(mode="json", exclude={"pinned", "used_tokens", "budget_tokens"}))


def _fit(packet: ResumePacket, state: TaskState, budget: int) -> ResumePacket:
    """Shrink the packet until its whole JSON fits the budget: snapshot, memories, tool calls, variables, tree."""
    total = _measure(packet)
    lines = packet.tree.count("\n") + 1
    while total > budget:
        if packet.snapshot_excerpt:
            # Cut by the overshoot, at this text's own characters-per-token rate, plus a little slack.
            excerpt = packet.snapshot_excerpt
            per_char = _tokens(excerpt) / max(len(excerpt), 1)
            keep = len(excerpt) - int((total - budget) / max(per_char, 0.05)) - 8
            packet.snapshot_excerpt = excerpt[:keep] if keep > 80 else ""
        elif packet.memories:
            packet.memories = packet.memories[:-1]
        elif packet.last_tool_calls:
            packet.last_tool_calls = packet.last_tool_calls[1:]
        elif packet.variables and any(v != _OMITTED for v in packet.variables.values()):
            packet.variables = dict.fromkeys(packet.variables, _OMITTED)
            packet.warnings = [*packet.warnings, "variables were too large for the budget: read the full checkpoint"]
        elif lines > 1:
            lines = max(1, lines // 2)
            packet.tree = task_tree.outline(state.head.tree, state.head.current_node, max_lines=lines)
        else:
            packet.warnings = [
                *packet.warnings,
                f"the goal, constraints, hints and current step alone take {total} tokens, over the budget of {budget}",
            ]
            break
        total = _measure(packet)
    packet.used_tokens = total
    return packet
