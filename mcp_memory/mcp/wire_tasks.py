"""The task family on the wire: the task service's records as the task tools' results and the
task resources' documents, and the resume packet packed into its token budget (what is measured is
the packet's JSON as sent)."""

from __future__ import annotations

from typing import Any

import orjson

from mcp_memory.core.envelope import Envelope
from mcp_memory.core.models import CheckpointRow, Page, to_datetime
from mcp_memory.core.task_model import Checkpointed, Resumption, Task, TaskHead, TaskNode, ToolCallRecord
from mcp_memory.core.text import checkpoint_uri, estimate_tokens
from mcp_memory.mcp.recall_schemas import MemoryOut
from mcp_memory.mcp.task_schemas import (
    CheckpointInfo,
    CheckpointPage,
    CheckpointResult,
    MemoryBrief,
    ResumePacket,
    TaskPage,
    TaskState,
    TaskSummary,
    TaskUpdateResult,
)
from mcp_memory.mcp.wire_recall import memory_out
from mcp_memory.services import task_tree

_OMITTED = "(omitted for the budget; see the full checkpoint)"


def checkpoint_info(row: CheckpointRow) -> CheckpointInfo:
    return CheckpointInfo(
        id=row.id,
        task_id=row.task_id,
        seq=row.seq,
        parent_id=row.parent_id,
        reason=row.reason,
        created_at=to_datetime(row.created_at),
        size=row.size,
        checksum=row.checksum,
    )


def checkpoint_result(saved: Checkpointed) -> CheckpointResult:
    return CheckpointResult(
        checkpoint=checkpoint_info(saved.checkpoint),
        created_task=saved.created_task,
        head_seq=saved.checkpoint.seq,
        serialized_size=saved.serialized_size,
    )


def task_state(task: Task) -> TaskState:
    row = task.row
    return TaskState(
        task_id=row.task_id,
        namespace=row.namespace,
        title=row.title,
        goal=row.goal,
        constraints=row.constraints,
        head=task.head,
        head_seq=row.head_seq,
        created_at=to_datetime(row.created_at),
        updated_at=to_datetime(row.updated_at),
        latest_checkpoint_id=row.latest_checkpoint_id,
    )


def task_summary(task: Task) -> TaskSummary:
    row, head = task.row, task.head
    return TaskSummary(
        task_id=row.task_id,
        namespace=row.namespace,
        title=row.title,
        goal=row.goal,
        head_seq=row.head_seq,
        current_node=head.current_node,
        status=head.tree.status if head.tree else None,
        updated_at=to_datetime(row.updated_at),
        checkpoints=row.checkpoints,
    )


def task_page(page: Page[Task]) -> TaskPage:
    return TaskPage(tasks=[task_summary(t) for t in page.items], next_cursor=page.next_cursor)


def checkpoint_page(page: Page[CheckpointRow]) -> CheckpointPage:
    return CheckpointPage(checkpoints=[checkpoint_info(r) for r in page.items], next_cursor=page.next_cursor)


def update_result(task: Task) -> TaskUpdateResult:
    head = task.head
    return TaskUpdateResult(
        task_id=task.row.task_id,
        head_seq=task.row.head_seq,
        current_node=head.current_node,
        tree=task_tree.outline(head.tree, head.current_node),
    )


def checkpoint_document(row: CheckpointRow, envelope: Envelope) -> dict[str, Any]:
    """The complete checkpoint as its resource shows it: its description, the structured part and
    the whole snapshot."""
    return {
        "checkpoint": checkpoint_info(row).model_dump(mode="json"),
        "format_version": envelope.format_version,
        **envelope.structured,
        "snapshot": envelope.snapshot,
    }


def _tokens(value: Any) -> int:
    text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
    return estimate_tokens(text)


def resume_packet(found: Resumption) -> ResumePacket:
    """The resume packet: always the goal, constraints, the current node, pending actions and hints;
    then, in order, as the budget allows: the tree (finished subtrees fold first), the task's
    memories, variables, the last tool calls, and an excerpt of the snapshot. Pinned memories have
    their own cap (limits.pinned_cap_tokens) and are not counted. The full checkpoint is a resource URI."""
    row, head, budget, warnings = found.task.row, found.task.head, found.budget, found.warnings
    current = _current(head)
    used = sum(_tokens(x) for x in (row.goal, row.constraints, found.hints, warnings))
    used += _tokens(current.model_dump(mode="json")) if current else 0
    used += _tokens([a.model_dump(mode="json") for a in head.pending_actions])
    tree_text = _tree(head, max(budget - used, 0))
    used += _tokens(tree_text)
    kept_memories = _briefs([memory_out(m.record) for m in found.memories], budget - used)
    used += sum(_tokens(b.model_dump(mode="json")) for b in kept_memories)

    variables = head.variables if _tokens(head.variables) <= budget - used else dict.fromkeys(head.variables, _OMITTED)
    if variables is not head.variables:
        warnings = [*warnings, "variables were too large for the budget: read the full checkpoint"]
    used += _tokens(variables)
    tool_calls = _recent_calls(head, budget - used)
    used += _tokens([c.model_dump(mode="json") for c in tool_calls])

    excerpt = _excerpt(head.snapshot, budget - used)
    used += _tokens(excerpt) if excerpt else 0

    latest = found.checkpoint
    packet = ResumePacket(
        task_id=row.task_id,
        title=row.title,
        goal=row.goal,
        constraints=row.constraints,
        head_seq=row.head_seq,
        checkpoint=checkpoint_info(latest) if latest else None,
        rolled_back_to=found.rolled_back_to,
        tree=tree_text,
        current_node=current,
        pending_actions=head.pending_actions,
        variables=variables,
        last_tool_calls=tool_calls,
        iterations=head.iterations,
        token_usage=head.token_usage,
        elapsed_seconds=round(found.elapsed, 3),
        hints=found.hints,
        memories=kept_memories,
        pinned=[_brief(memory_out(m)) for m in found.pinned],
        snapshot_excerpt=excerpt,
        snapshot_chars=len(head.snapshot),
        full_checkpoint_uri=checkpoint_uri(row.task_id, latest.id) if latest else None,
        warnings=warnings,
        budget_tokens=budget,
        used_tokens=used,
    )
    return _fit(packet, head, budget)


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


def _fit(packet: ResumePacket, head: TaskHead, budget: int) -> ResumePacket:
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
            packet.tree = task_tree.outline(head.tree, head.current_node, max_lines=lines)
        else:
            return _over_budget(packet, budget, total)
        total = _measure(packet)
    packet.used_tokens = total
    return packet


def _over_budget(packet: ResumePacket, budget: int, total: int) -> ResumePacket:
    """Nothing is left to cut and the packet is still over ``budget``: say so in a warning, with what
    takes the room, and count the warning too (used_tokens is the packet as sent)."""
    current = packet.current_node
    words = _tokens(
        [packet.title, packet.goal, packet.constraints, [a.text for a in packet.pending_actions]]
        + ([current.title, current.notes or ""] if current else [])
    )
    before, needed = packet.warnings, total  # without the warning: what a budget must hold for it to fit
    for _ in range(4):  # the warning names the total it is part of: measure until the figure holds
        packet.warnings = [
            *before,
            f"over the budget: this packet takes {total} tokens of the {budget} asked for, and nothing more can be cut "
            f"(the task's own words take about {words}; its ids, checkpoint, hints and fields the rest): "
            f"pass budget_tokens={needed} or more for it to fit",
        ]
        measured, total = total, _measure(packet)
        if measured == total:
            break
    packet.used_tokens = total
    return packet
