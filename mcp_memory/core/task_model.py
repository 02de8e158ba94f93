"""The task model (ADR 6): the tree, the head a checkpoint copies, the edits update_task applies,
and what the task service returns.

The head is what the durable envelope stores (its JSON is the checkpoint format), so it is a
pydantic model that validates what it reads back; the checkpoint and update_task tools take the same
fields, by design. What a call returns is plain dataclasses of the stored records: the MCP face
(``mcp/wire_tasks.py``) turns them into the tools' results.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mcp_memory.core.models import CheckpointRow, MemoryRecord, TaskRow
from mcp_memory.core.numbers import Bool, Float, Int
from mcp_memory.core.recalled import Recalled

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


@dataclass(frozen=True, slots=True)
class Task:
    """A task as stored: its row (identity, intent, counters) and its head."""

    row: TaskRow
    head: TaskHead


@dataclass(frozen=True, slots=True)
class Checkpointed:
    """What a checkpoint saved: the immutable copy (its seq is the new head_seq), whether the call
    created the task, and the size the checkpoint limit measured."""

    checkpoint: CheckpointRow
    created_task: bool
    serialized_size: int


@dataclass(frozen=True, slots=True)
class Resumption:
    """What a resume found, before the face packs it into the token budget: the task (after the
    rollback, when there was one), the seconds since its head changed, what to verify first, its
    latest checkpoint, its memories best first and the pinned ones."""

    task: Task
    elapsed: float
    budget: int
    hints: list[str]
    checkpoint: CheckpointRow | None
    memories: list[Recalled]
    pinned: list[MemoryRecord]
    warnings: list[str]
    rolled_back_to: str | None
