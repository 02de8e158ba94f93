"""The vocabulary of mcp-memory: scopes, memory records, tool inputs and results.

Tool results are pydantic models (the MCP structured output); records that move between
services and storage are plain dataclasses. Times on the wire are ISO 8601 UTC; in storage
they are POSIX seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


@dataclass(frozen=True, slots=True)
class Scope:
    """Who is asking: the principal (from the transport, never from an argument) and a namespace.

    A read in namespace N sees N plus the principal-wide memories (namespace None); writes go
    to the scope's namespace.
    """

    principal: str
    namespace: str | None = None


@dataclass(frozen=True, slots=True)
class Provenance:
    client_name: str | None = None
    client_version: str | None = None
    transport: str | None = None


Tier = Literal["active", "archived"]
Outcome = Literal["stored", "merged", "rejected"]
KNOWN_KINDS = ("fact", "preference", "decision", "event", "observation", "instruction", "goal", "note")


@dataclass(slots=True)
class MemoryRecord:
    """One row of the memories table, as services see it."""

    id: str
    namespace: str | None
    kind: str
    content: str
    key: str | None
    tags: list[str]
    metadata: dict[str, Any]
    importance: float
    pinned: bool
    occurred_at: float
    created_at: float
    last_accessed_at: float | None
    access_count: int
    valid_from: float
    valid_to: float | None
    superseded_by: str | None
    expires_at: float | None
    tier: Tier
    level: int
    language: str
    session_key: str | None
    task_id: str | None
    provenance: Provenance
    content_hash: str
    occurrence_ids: list[str] = field(default_factory=list)
    conflicts_with: list[str] = field(default_factory=list)
    source_ids: list[str] = field(default_factory=list)
    last_seen_at: float | None = None  # when it was last stated: its newest occurrence
    rowid: int = 0


@dataclass(frozen=True, slots=True)
class NewOccurrence:
    id: str
    session_key: str | None
    occurred_at: float
    metadata: dict[str, Any]
    provenance: Provenance


def to_datetime(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


def to_seconds(moment: datetime) -> float:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


# ----- tool inputs -------------------------------------------------------------------------


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MemoryInput(_Input):
    """One memory to remember."""

    content: str = Field(description="The text to remember, in the user's language.")
    kind: str = Field(
        "fact",
        description="fact, preference, decision, event, observation, instruction, goal, note, or your own word",
    )
    importance: float | None = Field(
        None,
        description="0..1; estimated from the text when absent (decisions, ids, 'remember this' raise it)",
    )
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict, description="client JSON kept with the memory")
    occurred_at: datetime | None = Field(None, description="when it happened (ISO 8601); default now")
    task_id: str | None = None
    session_id: str | None = Field(None, description="your session id; else the server derives one")
    ttl_seconds: int | None = Field(None, description="forget after this many seconds")
    supersedes: list[str] = Field(default_factory=list, description="ids this memory replaces (history kept)")
    key: str | None = Field(None, description="a later memory with the same key supersedes this one")
    pinned: bool = Field(False, description="always return it with recall and resume (goals, rules, identity)")


class RecallFilters(_Input):
    kinds: list[str] | None = None
    tags: list[str] | None = Field(None, description="memories carrying any of these tags")
    occurred_after: datetime | None = None
    occurred_before: datetime | None = None
    task_id: str | None = None
    namespace: str | None = Field(
        None, description="narrow to this namespace (only the caller's own namespace or principal-wide)"
    )
    include_superseded: bool = False
    include_archived: bool = False
    include_expired: bool = False


class ForgetFilter(_Input):
    tags: list[str] | None = None
    kinds: list[str] | None = None
    occurred_after: datetime | None = None
    occurred_before: datetime | None = None
    task_id: str | None = None


# ----- tool results ------------------------------------------------------------------------


class RememberItem(BaseModel):
    index: int = Field(description="position in the request")
    outcome: Outcome
    id: str | None = Field(None, description="the stored memory, or the one it merged into")
    reason: str | None = None
    superseded: list[str] = Field(default_factory=list)
    conflicts_with: list[str] = Field(
        default_factory=list, description="stored memories this one may contradict: ask the user which holds"
    )


class RememberResult(BaseModel):
    items: list[RememberItem]
    stored: int
    merged: int
    rejected: int


class Signals(BaseModel):
    """Why a memory was recalled: every signal of the value function."""

    dense: float | None = Field(None, description="cosine similarity to the question")
    dense_rank: int | None = None
    keyword: float | None = Field(None, description="BM25 score (higher is better)")
    keyword_rank: int | None = None
    relevance: float = Field(description="fused retrieval score, normalised to 0..1 (R)")
    recency: float = Field(description="T")
    frequency: float = Field(description="F")
    importance: float = Field(description="P")
    value: float = Field(description="a*R + b*T + c*F + d*P")


class OccurrenceOut(BaseModel):
    id: str
    session_key: str | None
    occurred_at: datetime


class MemoryOut(BaseModel):
    id: str
    text: str
    kind: str
    tags: list[str]
    metadata: dict[str, Any]
    importance: float
    pinned: bool
    namespace: str | None
    key: str | None
    occurred_at: datetime
    created_at: datetime
    last_accessed_at: datetime | None
    access_count: int
    valid_from: datetime
    valid_to: datetime | None
    superseded_by: str | None
    expires_at: datetime | None
    tier: Tier
    level: int
    language: str
    session_key: str | None
    task_id: str | None
    client_name: str | None
    transport: str | None
    occurrence_ids: list[str]
    conflicts_with: list[str] = Field(
        default_factory=list, description="memories this one may contradict (unconfirmed): ask the user"
    )
    source_ids: list[str] = Field(
        default_factory=list, description="for a summary (level 1+): the memories it summarizes (archived)"
    )
    tokens: int = Field(description="estimated tokens of this hit as JSON: what recall's budget counts")
    why: Signals | None = None


class RecallResult(BaseModel):
    query: str
    hits: list[MemoryOut]
    pinned: list[MemoryOut] = Field(description="pinned memories; they do not count against k")
    preset: str
    budget_tokens: int
    used_tokens: int = Field(description="estimated tokens of this whole packet as JSON, pinned memories aside")
    omitted_for_budget: int = Field(description="relevant hits left out because the budget was used")


class PinResult(BaseModel):
    id: str
    pinned: bool
    pinned_tokens: int = Field(description="tokens of all pinned memories visible here")
    cap_tokens: int


class ForgetUserResult(BaseModel):
    dry_run: bool
    counts: dict[str, int] = Field(description="what would be (or was) deleted, per table")
    confirmation_code: str | None = Field(None, description="dry run: pass it back to delete; single use")
    code_expires_at: datetime | None = None
    erased_at: datetime | None = None
    note: str


class UndoSummaryResult(BaseModel):
    summary_id: str
    restored: list[str] = Field(description="the source memories back in the active tier")


class StatsResult(BaseModel):
    """What this server holds for the caller and how the process is doing."""

    principal_file: str
    memories: dict[str, int] = Field(description="visible memories by tier, level and state")
    tables: dict[str, int] = Field(description="the principal's rows per table, every namespace")
    vector_index_rows: int | None = Field(description="rows in this process's index (None until loaded)")
    embedding_model: str | None
    embedding_dimension: int | None
    models_loaded_in_process: int
    schedulers_running_in_process: int = Field(
        description="lifecycle schedulers this process runs: 1 however many clients are connected"
    )
    process_id: int
    uptime_seconds: float
    recent_passes: list[dict[str, Any]] = Field(
        default_factory=list, description="the last lifecycle passes on this data directory, newest first"
    )
    pending: dict[str, int] = Field(
        default_factory=dict, description="work the passes have left: flagged conflicts, memories to read for facts"
    )
    fact_check: dict[str, Any] = Field(
        default_factory=dict,
        description="summaries that passed the fact check and were kept, those rolled back, the pass rate",
    )
    llm: dict[str, Any] | None = Field(
        None, description="this principal's LLM use today against its budget; None when no LLM is configured"
    )


class ForgetItem(BaseModel):
    id: str
    kind: str
    preview: str
    occurred_at: datetime


class ForgetResult(BaseModel):
    dry_run: bool
    matched: int
    deleted: int
    items: list[ForgetItem]
    note: str


@dataclass(frozen=True, slots=True)
class Criteria:
    """Which memories a read or a forget applies to (storage's form of the tool filters)."""

    ids: tuple[str, ...] | None = None
    kinds: tuple[str, ...] | None = None
    tags: tuple[str, ...] | None = None
    occurred_after: float | None = None
    occurred_before: float | None = None
    task_id: str | None = None
    pinned: bool | None = None
    namespace_only: bool = False
    include_superseded: bool = False
    include_archived: bool = False
    include_expired: bool = False

    @property
    def narrows(self) -> bool:
        """True when the criteria go beyond what the vector index can mask by itself."""
        return any(
            v is not None
            for v in (
                self.ids,
                self.kinds,
                self.tags,
                self.occurred_after,
                self.occurred_before,
                self.task_id,
                self.pinned,
            )
        )


@dataclass(frozen=True, slots=True)
class NewMemory:
    """A memory to insert, with its vector, first occurrence and what it supersedes."""

    record: MemoryRecord
    vector: bytes
    segmented: str
    occurrence: NewOccurrence
    supersedes: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()
    summarizes: tuple[str, ...] = ()  # a summary's sources: linked, and moved to the archive tier
    inferred_supersedes: tuple[str, ...] = ()  # replaced by the rules: skipped if already gone
    more_occurrences: tuple[NewOccurrence, ...] = ()  # a consolidated fact carries its sources' occurrences


@dataclass(frozen=True, slots=True)
class Merge:
    """An occurrence of an existing memory (a duplicate that was not stored again)."""

    target_id: str
    occurrence: NewOccurrence
    seen_at: float | None = None  # a restatement is a use: the memory's last access moves here
    supersedes: tuple[str, ...] = ()  # what the restatement replaces (rules; skipped if already gone)


# ----- tasks (ADR 6) -------------------------------------------------------------------------

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
    external: bool = Field(False, description="acts outside the agent (email, payment, deploy)")
    irreversible: bool = False
    cost: float | None = Field(None, description="estimated cost in the caller's unit")


class ToolCallRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    result: str | None = Field(None, description="a short summary of the outcome")
    at: datetime | None = None


class TokenUsage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input: int = Field(0, ge=0)
    output: int = Field(0, ge=0)


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
    iterations: int = Field(0, ge=0)


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
    position: int | None = Field(None, ge=0, description="add/move: index among the parent's children (default: last)")
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
