"""The steps of `remember` that decide, without touching storage: prepare the batch, then classify
each item against what is stored and what came earlier in the batch.

`MemoryService.remember` runs them in order: ``prepare`` (redact, normalise, reject throwaways,
hash), the reads (stored copies by hash, one embedding call, one neighbour search for the batch),
``classify`` (merge, insert, supersede, conflict per item), then one write.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from mcp_memory.core.caution import caution
from mcp_memory.core.ids import new_id
from mcp_memory.core.models import (
    MemoryDraft,
    Merge,
    NewMemory,
    NewOccurrence,
    Outcome,
    Provenance,
    Scope,
    SecondVector,
    to_seconds,
)
from mcp_memory.core.text import normalize, segment_for_index
from mcp_memory.services import incoming, inputs, rules
from mcp_memory.services.relations import Neighbour, Thresholds, relate

if TYPE_CHECKING:
    from mcp_memory.core.models import Vector

MERGED_REASON = "the same memory is already stored; this occurrence was recorded"
# Said when a credential was taken out: an agent that is not told may count on recalling the secret later.
REDACTED_REASON = "a credential in the text was stored as [REDACTED:...]: the secret itself is not kept"


@dataclass(frozen=True, slots=True)
class ItemOutcome:
    """What became of one memory of a remember call (``index``: its position in the call): the
    memory stored, or the one it merged into, what it superseded and may contradict, and the caution
    when its text reads as an instruction to the agent."""

    index: int
    outcome: Outcome
    id: str | None = None
    reason: str | None = None
    superseded: list[str] = field(default_factory=list)
    conflicts_with: list[str] = field(default_factory=list)
    caution: str | None = None


@dataclass(frozen=True, slots=True)
class Remembered:
    """Every item's outcome, in the call's order, and how many were stored, merged and rejected."""

    items: list[ItemOutcome]

    def count(self, outcome: Outcome) -> int:
        return sum(item.outcome == outcome for item in self.items)

    @property
    def stored(self) -> int:
        return self.count("stored")

    @property
    def merged(self) -> int:
        return self.count("merged")

    @property
    def rejected(self) -> int:
        return self.count("rejected")


def content_hash(namespace: str | None, content: str) -> str:
    return hashlib.sha256(f"{namespace or ''}\x1f{content.lower()}".encode()).hexdigest()


# (done, total, what): how far a long call has come, for the client's progress notifications.
Progress = Callable[[int, int, str], Awaitable[None]]


@dataclass(frozen=True)
class CallContext:
    """What the transport gives a call besides the Scope: the caller's provenance, and where to
    report progress."""

    provenance: Provenance = field(default_factory=Provenance)
    # Told (done, total, what) as a long call advances: the client's progress notifications.
    progress: Progress | None = None


@dataclass(frozen=True, slots=True)
class Prepared:
    """One item worth keeping: its position in the call, its redacted text and that text's hash."""

    index: int
    item: MemoryDraft
    content: str
    hash: str
    redacted: bool = False  # the redaction took a credential out of the text, tags or metadata

    @property
    def plain(self) -> bool:
        """Only a memory that replaces nothing may merge into a duplicate."""
        return self.item.key is None and not self.item.supersedes


@dataclass
class Intake:
    results: list[ItemOutcome | None]  # rejected items already answered; the rest filled by classify
    prepared: list[Prepared]


def persisted(item: MemoryDraft) -> MemoryDraft:
    """The one redaction of what a remember stores (DESIGN §7): text, tags and metadata, before the
    text is hashed, embedded or compared, so no copy of a secret reaches the file, an index or a log."""
    return replace(
        item,
        content=incoming.redacted(item.content),
        tags=incoming.redacted_all(item.tags),
        metadata=incoming.redacted_value(item.metadata),
    )


def prepare(scope: Scope, items: Sequence[MemoryDraft]) -> Intake:
    """Redact and normalise every text, answer the throwaways, hash the rest."""
    results: list[ItemOutcome | None] = [None] * len(items)
    prepared: list[Prepared] = []
    for i, given in enumerate(items):
        item = persisted(given)
        content = normalize(item.content)
        if rules.is_throwaway(content):
            results[i] = ItemOutcome(
                index=i, outcome="rejected", reason="an acknowledgement carries nothing worth recalling"
            )
            continue
        prepared.append(Prepared(i, item, content, content_hash(scope.namespace, content), item != given))
    return Intake(results, prepared)


def to_embed(prepared: list[Prepared], existing: dict[str, str]) -> list[Prepared]:
    """The items whose vector classify needs: every one that may replace something, a restatement of
    a stored memory (it may replace what was said since), and the first of each new text."""
    seen: set[str] = set()  # new texts, plain, already taken once
    out: list[Prepared] = []
    for p in prepared:
        if not p.plain or p.hash in existing:
            out.append(p)
        elif p.hash not in seen:
            seen.add(p.hash)
            out.append(p)
    return out


@dataclass(frozen=True)
class Known:
    """What storage and the model said about the batch before anything is decided."""

    existing: dict[str, str]  # hash -> the live memory with that text
    restated: dict[str, str]  # hash -> what replaced the superseded memory with that text
    vectors: dict[int, Vector]  # item index -> its vector
    neighbours: dict[int, list[Neighbour]]  # item index -> stored memories close to it
    thresholds: Thresholds
    second: dict[int, SecondVector] = field(default_factory=dict)  # item index -> the second model's vector


@dataclass
class Plan:
    results: list[ItemOutcome | None]
    inserts: list[NewMemory] = field(default_factory=list)
    merges: list[Merge] = field(default_factory=list)
    # Decided earlier in the batch: what a later item must see.
    by_hash: dict[str, str] = field(default_factory=dict)
    inserted: list[tuple[Vector, str, str, str]] = field(default_factory=list)  # vector, id, content, kind
    replaced: set[str] = field(default_factory=set)


def classify(scope: Scope, intake: Intake, known: Known, provenance: Provenance, session: str, now: float) -> Plan:
    """Per item, in order: merge into a live copy (stored or earlier in the batch) or insert, with
    what it supersedes and what it conflicts with."""
    plan = Plan(list(intake.results))
    for p in intake.prepared:
        _classify_one(scope, p, known, plan, provenance, session, now)
    return plan


def _classify_one(
    scope: Scope, p: Prepared, known: Known, plan: Plan, provenance: Provenance, session: str, now: float
) -> None:
    item = p.item
    occurrence = NewOccurrence(
        id=new_id(),
        session_key=item.session_id or session,
        occurred_at=to_seconds(item.occurred_at) if item.occurred_at else now,
        metadata=item.metadata,  # redacted by prepare
        provenance=provenance,
    )
    target = None
    replaces: list[str] = []
    conflicts: list[str] = []
    if p.plain:
        target = known.existing.get(p.hash) or plan.by_hash.get(p.hash)
        if p.index in known.vectors:
            vector = known.vectors[p.index]
            earlier = [Neighbour(float(v @ vector), i, text, kind) for v, i, text, kind in plan.inserted]
            found = relate(
                p.content, item.kind, [*earlier, *known.neighbours.get(p.index, [])], known.thresholds, target
            )
            target, replaces, conflicts = target or found.merge_into, found.supersedes, found.conflicts
        if target is None and p.hash in known.restated and known.restated[p.hash] not in replaces:
            replaces = [*replaces, known.restated[p.hash]]
    if target is not None:
        _merge(p, target, replaces, occurrence, plan, now)
        return
    record = inputs.new_record(
        scope, item, p.content, p.hash, occurrence.occurred_at, now, occurrence.session_key, provenance
    )
    vector = known.vectors[p.index]
    plan.inserts.append(
        NewMemory(
            record=record,
            vector=vector.astype("float32"),
            segmented=segment_for_index(p.content),
            occurrence=occurrence,
            supersedes=tuple(item.supersedes),
            inferred_supersedes=tuple(r for r in replaces if r not in plan.replaced),
            conflicts=tuple(conflicts),
            second=known.second.get(p.index),
        )
    )
    plan.replaced.update(replaces)
    plan.by_hash[p.hash] = record.id
    plan.inserted.append((vector, record.id, p.content, item.kind))
    reason = REDACTED_REASON if p.redacted else None
    plan.results[p.index] = ItemOutcome(
        index=p.index,
        outcome="stored",
        id=record.id,
        reason=reason,
        conflicts_with=conflicts,
        caution=caution(p.content),
    )


def _merge(p: Prepared, target: str, replaces: list[str], occurrence: NewOccurrence, plan: Plan, now: float) -> None:
    plan.by_hash[p.hash] = target  # a repeat of this item later in the batch merges where it did
    fresh = tuple(r for r in replaces if r != target and r not in plan.replaced)
    plan.replaced.update(fresh)
    lasts = now + p.item.ttl_seconds if p.item.ttl_seconds else None
    plan.merges.append(Merge(target_id=target, occurrence=occurrence, seen_at=now, supersedes=fresh, expires_at=lasts))
    reason = f"{MERGED_REASON}; {REDACTED_REASON}" if p.redacted else MERGED_REASON
    plan.results[p.index] = ItemOutcome(
        index=p.index, outcome="merged", id=target, reason=reason, caution=caution(p.content)
    )
