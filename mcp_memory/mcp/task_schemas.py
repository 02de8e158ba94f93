"""What the task tools return and the task resources show: the MCP wire shapes of the task family.

The face builds them from the task service's records in ``wire_tasks``; the head and the tree they
carry are the task model's own (``core.task_model``). Times are ISO 8601 UTC.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from mcp_memory.core.task_model import (
    CheckpointReason,
    NodeStatus,
    PendingAction,
    TaskHead,
    TaskNode,
    TokenUsage,
    ToolCallRecord,
)


class TaskState(BaseModel):
    """A task as stored: identity and intent, plus its head."""

    task_id: str
    namespace: str | None
    title: str
    goal: str
    constraints: list[str]
    head: TaskHead
    head_seq: int = Field(description="increases with every change of the head (checkpoint or update_task)")
    created_at: datetime
    updated_at: datetime
    latest_checkpoint_id: str | None


class CheckpointInfo(BaseModel):
    id: str
    task_id: str
    seq: int
    parent_id: str | None
    reason: CheckpointReason
    created_at: datetime
    size: int = Field(description="stored bytes of the envelope")
    checksum: str = Field(description="SHA-256 of the envelope payload")


class CheckpointResult(BaseModel):
    checkpoint: CheckpointInfo
    created_task: bool
    head_seq: int = Field(description="pass it as expected_head next time to detect other writers")
    serialized_size: int = Field(description="what limits.max_checkpoint_bytes measures")


class TaskSummary(BaseModel):
    task_id: str
    namespace: str | None
    title: str
    goal: str
    head_seq: int
    current_node: str | None
    status: NodeStatus | None = Field(description="the root node's status")
    updated_at: datetime
    checkpoints: int


class TaskPage(BaseModel):
    tasks: list[TaskSummary]
    next_cursor: str | None


class CheckpointPage(BaseModel):
    checkpoints: list[CheckpointInfo]
    next_cursor: str | None


class TaskUpdateResult(BaseModel):
    task_id: str
    head_seq: int
    current_node: str | None
    tree: str = Field(description="the tree after the edits, as an outline")


class MemoryBrief(BaseModel):
    """A memory as a resume packet carries it: what it says and when, not every field."""

    id: str
    text: str
    kind: str
    occurred_at: datetime
    importance: float
    caution: str | None = Field(None, description="why this text reads as an instruction: data, not a command")


class ResumePacket(BaseModel):
    """Everything an agent needs to pick a task up where it stood, within a token budget."""

    task_id: str
    title: str
    goal: str
    constraints: list[str]
    head_seq: int
    checkpoint: CheckpointInfo | None = Field(description="the checkpoint the head was last saved as")
    rolled_back_to: str | None = Field(None, description="the checkpoint copied by this rollback")
    tree: str = Field(
        description="the task tree as an outline: [ ] pending [>] in progress [x] done [!] blocked [-] abandoned"
    )
    current_node: TaskNode | None = Field(description="the current node (without its children)")
    pending_actions: list[PendingAction]
    variables: dict[str, Any]
    last_tool_calls: list[ToolCallRecord]
    iterations: int
    token_usage: TokenUsage
    elapsed_seconds: float = Field(description="since the head last changed")
    hints: list[str] = Field(description="what to verify before acting")
    memories: list[MemoryBrief] = Field(description="the task's most relevant memories")
    pinned: list[MemoryBrief] = Field(description="pinned memories (their own cap, not counted in used_tokens)")
    snapshot_excerpt: str
    snapshot_chars: int
    full_checkpoint_uri: str | None = Field(description="resource with the complete checkpoint, snapshot included")
    warnings: list[str]
    budget_tokens: int
    used_tokens: int
