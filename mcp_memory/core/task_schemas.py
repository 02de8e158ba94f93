"""The task model (ADR 6): the tree, the head a checkpoint copies, and what the task tools return.

A ``TaskHead`` is both a tool argument and what the durable envelope stores; the rest are the
task tools' results and the resume packet. Times are ISO 8601 UTC.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mcp_memory.core.schemas import Bool, Float, Int

NodeStatus = Literal["pending", "in_progress", "done", "blocked", "abandoned"]
CheckpointReason = Literal[
    "node_completed",
    "phase_change",
    "pause",
    "before_costly_action",
    "periodic",
    "manual",
    "rollback",
    "before_rollback",
    "before_compaction",
]


class TaskNode(BaseModel):
    """One node of a task tree; the tree is the nested ``children``."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="unique within the task")
    title: str
    status: NodeStatus = "pending"
    blocked_reason: str | None = None
    notes: str | None = None
    children: list[TaskNode] = Field(default_factory=list)


class PendingAction(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str
    external: Bool = Field(False, description="acts outside the agent (email, payment, deploy)")
    irreversible: Bool = False
    cost: Float | None = Field(None, description="estimated cost in the caller's unit")


class ToolCallRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    result: str | None = Field(None, description="a short summary of the outcome")
    at: datetime | None = None


class TokenUsage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input: Int = Field(0, ge=0)
    output: Int = Field(0, ge=0)


class TaskHead(BaseModel):
    """The live state of a task: what a checkpoint copies and a resume restores."""

    model_config = ConfigDict(extra="forbid")

    tree: TaskNode | None = None
    current_node: str | None = None
    variables: dict[str, Any] = Field(default_factory=dict)
    pending_actions: list[PendingAction] = Field(default_factory=list)
    last_tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    snapshot: str = Field("", description="working-memory snapshot, free text")
    token_usage: TokenUsage = Field(default_factory=TokenUsage)
    iterations: Int = Field(0, ge=0)


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


class TaskEdit(BaseModel):
    """One edit of a task tree; update_task applies a list of them all-or-nothing."""

    model_config = ConfigDict(extra="forbid")

    op: Literal["add", "move", "set", "set_current"]
    node_id: str | None = Field(None, description="the node to move, change or make current")
    parent_id: str | None = Field(None, description="add/move: the new parent; add without parent creates the root")
    position: Int | None = Field(None, ge=0, description="add/move: index among the parent's children (default: last)")
    node: TaskNode | None = Field(None, description="add: the new node (with any children)")
    status: NodeStatus | None = None
    title: str | None = None
    notes: str | None = None
    blocked_reason: str | None = None


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
