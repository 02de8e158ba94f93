"""The records services and storage exchange: scopes, memory rows, criteria, inserts and merges.

These are plain dataclasses; the task model is in ``task_model``, and what the tools take and
return is the MCP face's (``mcp/``), built from these. Times on the wire are ISO 8601 UTC; in
storage they are POSIX seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeAlias, TypeVar

if TYPE_CHECKING:  # numpy loads with the model, off the path to the handshake: annotations only here
    import numpy as np
    import numpy.typing as npt

    # One embedding (or a matrix of them, one per row), unit length.
    Vector: TypeAlias = npt.NDArray[np.float32]


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


# What the lifecycle passes write (summaries, facts) carries this: the passes tell their own
# products from the users' memories by it.
SCHEDULER = Provenance(client_name="mcp-memory", transport="scheduler")

Tier = Literal["active", "archived"]
Outcome = Literal["stored", "merged", "rejected"]  # what became of one memory of a remember call
MemorySort = Literal["time", "created", "importance", "last_used"]  # how a listing orders memories
RecordOrder = Literal["stored", "importance", "occurred"]  # how select_memories orders what it finds
# The event left of a memory that is gone (its only one, without content): the deletion receipts.
GONE_EVENTS = ("evicted", "expired", "forgotten", "undone")
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
    # The store's order of writing (grows with each stored memory): an order for watermarks and
    # cursors, never a way to name a memory; ids do that across the seam (ADR 13).
    written: int = 0


@dataclass(frozen=True, slots=True)
class StoredOccurrence:
    """One time a memory was stated, as stored."""

    id: str
    session_key: str | None
    occurred_at: float
    created_at: float
    metadata: dict[str, Any]
    provenance: Provenance


@dataclass(frozen=True, slots=True)
class MemoryHistory:
    """What a memory replaced (every version back, oldest first), what replaced it (in order), the
    summaries that hold it, the memories recall follows from it, and every time it was stated."""

    older: list[MemoryRecord]
    newer: list[MemoryRecord]
    summarized_in: list[str]
    links: list[tuple[str, str]]  # (how: the shared entity or "session", the linked memory's id)
    occurrences: list[StoredOccurrence]
    events: list[tuple[float, str, dict[str, Any]]] = field(default_factory=list)  # (when, what, detail), in order


@dataclass(frozen=True, slots=True)
class GoldenRow:
    """A person's golden query: recall of ``query`` must find ``memory_id`` (or what holds it now)."""

    id: str
    namespace: str | None
    query: str
    memory_id: str
    created_at: float


@dataclass(frozen=True, slots=True)
class GoldenCheckRow:
    """One check of the golden queries around a lifecycle pass: recall@k before and after."""

    at: float
    queries: int
    before: float
    after: float
    rolled_back: bool
    detail: dict[str, Any]


@dataclass(frozen=True, slots=True)
class NewOccurrence:
    id: str
    session_key: str | None
    occurred_at: float
    metadata: dict[str, Any]
    provenance: Provenance


def to_datetime(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


def at(seconds: float) -> datetime:
    """A moment that is always set (``to_datetime`` of a time that cannot be missing)."""
    return datetime.fromtimestamp(seconds, UTC)


def to_seconds(moment: datetime) -> float:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


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
    level: int | None = None
    conflicted: bool | None = None  # flagged as contradicting another memory (or not)
    keys: tuple[str, ...] | None = None  # memories stored with one of these keys
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
                self.level,
                self.conflicted,
                self.keys,
            )
        )


@dataclass(frozen=True, slots=True)
class NewMemory:
    """A memory to insert, with its vector, first occurrence and what it supersedes."""

    record: MemoryRecord
    vector: Vector
    segmented: str
    occurrence: NewOccurrence
    supersedes: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()
    summarizes: tuple[str, ...] = ()  # a summary's sources: linked, and moved to the archive tier
    inferred_supersedes: tuple[str, ...] = ()  # replaced by the rules: skipped if already gone
    more_occurrences: tuple[NewOccurrence, ...] = ()  # a consolidated fact carries its sources' occurrences
    second: SecondVector | None = None  # the second model's vector, when one is configured (ADR 14)


@dataclass(frozen=True, slots=True)
class SecondVector:
    """A memory's vector from the second model recall asks (ADR 14), with the model's id."""

    model_id: str
    vector: Vector


@dataclass(frozen=True, slots=True)
class Applied:
    """What a write did: per inserted id, the ids it superseded; per insert that found its text
    already live (stored meanwhile by another process), the id it merged into instead."""

    superseded: dict[str, list[str]]
    merged: dict[str, str]


@dataclass(frozen=True, slots=True)
class Merge:
    """An occurrence of an existing memory (a duplicate that was not stored again)."""

    target_id: str
    occurrence: NewOccurrence
    seen_at: float | None = None  # a restatement is a use: the memory's last access moves here
    supersedes: tuple[str, ...] = ()  # what the restatement replaces (rules; skipped if already gone)
    # When the restatement expires (None: never). A memory lives as long as its longest-lived
    # statement: said once for an hour and once for good, it is kept for good.
    expires_at: float | None = None


@dataclass(frozen=True, slots=True)
class Centring:
    """How to take the language out of a search in a mixed store: the question already moved off its
    script's mean (``query``), and each script's mean passage from a parallel corpus (``prior``), which
    the store's own mean is shrunk towards with the weight of ``prior_weight`` memories."""

    query: Vector
    prior: tuple[Vector, Vector]  # Latin, CJK
    prior_weight: float


@dataclass(frozen=True, slots=True)
class DenseHits:
    """The best memories (by id) with their similarity, and the spread of similarity over every
    visible one: what lets recall say how far above the ordinary a hit stands."""

    hits: list[tuple[str, float]]
    mean: float
    std: float
    visible: int
    population: int = 0  # every row of the index, the number a keyword index's statistics count too
    centred: bool = False  # similarity was measured with each script's mean taken out (a mixed store)
    # a centred search's plain cosine of the question and its first hits, where it measured them too
    cosines: dict[str, float] = field(default_factory=dict)

    def z(self, similarity: float) -> float:
        """How many standard deviations ``similarity`` stands above the visible rows' mean."""
        return (similarity - self.mean) / (self.std if self.std > 1e-9 else 1.0)


@dataclass(frozen=True, slots=True)
class Link:
    source: str  # the memory recall reached first (its id)
    target: str
    via: str  # the shared entity, or "" for a session neighbour


@dataclass(frozen=True, slots=True)
class TaskSummaryRow:
    """What a task summary (L3) needs of a task's record."""

    task_id: str
    namespace: str | None
    title: str
    goal: str
    head: bytes
    updated_at: float


# ----- the kill switch: what a switch row covers -------------------------------------------

EVERYWHERE = "*"
SWITCH_SEPARATOR = "\x1f"  # control characters never occur in a principal or namespace name


def switch_target(principal: str | None, namespace: str | None) -> str:
    """What a switch covers: the whole data directory, a principal, or one of its namespaces."""
    if principal is None:
        return EVERYWHERE
    return principal if namespace is None else f"{principal}{SWITCH_SEPARATOR}{namespace}"


def switch_targets(scope: Scope) -> list[str]:
    """Every switch that covers ``scope``: memory is off there when any of them is off."""
    return [EVERYWHERE, scope.principal, *([switch_target(scope.principal, scope.namespace)] * bool(scope.namespace))]


def describe_switch(target: str) -> str:
    if target == EVERYWHERE:
        return "every principal of the store"
    principal, _, namespace = target.partition(SWITCH_SEPARATOR)
    return f"namespace {namespace!r} of {principal!r}" if namespace else f"principal {principal!r}"


@dataclass(frozen=True, slots=True)
class TaskRow:
    task_id: str
    namespace: str | None
    title: str
    goal: str
    constraints: list[str]
    head: bytes
    head_seq: int
    created_at: float
    updated_at: float
    latest_checkpoint_id: str | None
    checkpoints: int = 0


@dataclass(frozen=True, slots=True)
class CheckpointRow:
    id: str
    task_id: str
    seq: int
    parent_id: str | None
    reason: str
    created_at: float
    size: int
    checksum: str
    envelope: bytes | None = None


_Item = TypeVar("_Item")


@dataclass(frozen=True, slots=True)
class Page(Generic[_Item]):
    """One page of a listing, and the cursor that continues it (None on the last page)."""

    items: list[_Item]
    next_cursor: str | None


# ----- what callers give: a memory to remember, and the filters of recall, forget and lists --------


@dataclass(frozen=True, slots=True)
class MemoryDraft:
    """One memory as a caller gives it to remember (the remember tool, an import, the memory file, a
    hook, a fact the LLM read), before intake checks and redacts it."""

    content: str
    kind: str = "fact"
    importance: float | None = None  # estimated from the text when absent
    tags: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    occurred_at: datetime | None = None  # default: now
    task_id: str | None = None
    session_id: str | None = None  # else the server derives one
    ttl_seconds: int | None = None
    supersedes: list[str] = field(default_factory=list)
    key: str | None = None  # a later memory with the same key supersedes this one
    pinned: bool = False


@dataclass(frozen=True, slots=True)
class MemoryFilter:
    """What recall, forget and a listing narrow by; None is "any". The namespace may only narrow to
    the caller's own (``services.inputs.recall_criteria`` says so)."""

    kinds: list[str] | None = None
    tags: list[str] | None = None  # memories carrying any of them
    occurred_after: datetime | None = None
    occurred_before: datetime | None = None
    task_id: str | None = None
    namespace: str | None = None
    include_superseded: bool = False
    include_archived: bool = False
    include_expired: bool = False
    pinned: bool | None = None  # lists only, as the three below
    level: int | None = None
    conflicts: bool | None = None
