"""How a new memory relates to the close ones already stored: merge, supersede or conflict.

The texts are judged by ``rules.relation``; closeness is the embedding model's similarity, with
its own thresholds (or ``recall.duplicate_similarity`` when configured).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mcp_memory.core.models import Criteria, Scope
from mcp_memory.services import rules
from mcp_memory.services.ports import MemoryStore

if TYPE_CHECKING:
    from mcp_memory.core.models import Vector

# Stored memories compared with each new one: the closest few decide.
NEIGHBOURS = 5


@dataclass(frozen=True, slots=True)
class Thresholds:
    duplicate: float  # this close and saying the same: one memory
    related: float  # this close: about the same subject (supersession, conflicts)

    @property
    def reach(self) -> float:
        """How close a stored memory must be for a statement that says it stopped ("no longer", "switched
        to", "不再") to replace it: halfway from ``related`` towards unrelated. Its own words carry the
        evidence and the rules make it name the old statement; the added words ("; switched to coffee")
        take it further from the old in meaning than a bare denial goes (0.87 against 0.93 with e5)."""
        return self.related - (1.0 - self.related) / 2

    @staticmethod
    def of(duplicate: float, related: float, configured: float | None) -> Thresholds:
        """The model's thresholds, or ``recall.duplicate_similarity`` when configured."""
        dup = configured or duplicate
        return Thresholds(dup, min(related, dup))


@dataclass(frozen=True, slots=True)
class Neighbour:
    score: float
    id: str
    content: str
    kind: str


@dataclass(frozen=True, slots=True)
class Relation:
    merge_into: str | None
    supersedes: list[str]
    conflicts: list[str]


async def stored_neighbours(
    store: MemoryStore, scope: Scope, vectors: Vector, related: float, now: float
) -> list[list[Neighbour]]:
    """Per row of ``vectors``, the live memories of the scope's own namespace at least ``related``
    close: one search and one read for the whole batch."""
    if not len(vectors):
        return []
    criteria = Criteria(namespace_only=True)
    rows = await store.vectors.neighbours(scope, vectors, criteria, NEIGHBOURS, now)
    close = {m for row in rows for m, score in row if score >= related}
    records = {r.id: r for r in await store.select_memories(scope, criteria, now, among=sorted(close))} if close else {}
    return [
        [
            Neighbour(score, m, records[m].content, records[m].kind)
            for m, score in row
            if score >= related and m in records
        ]
        for row in rows
    ]


def relate(
    content: str, kind: str, candidates: Iterable[Neighbour], thresholds: Thresholds, merge_into: str | None = None
) -> Relation:
    """What a new memory is to the close ones (stored, or earlier in its batch).

    Rules in ``rules.relation``: the same statement merges; a word-for-word denial or a stated
    change supersedes (history kept); a swapped preference or decision is kept and flagged.
    A restatement (``merge_into``, or a close equal found here) is the user's latest word
    too: what it replaces is superseded although the memory itself is not stored again.
    """
    supersede: list[str] = []
    conflicts: list[str] = []
    stopped = rules.says_stopped(content)
    for other in sorted(candidates, key=lambda c: -c.score):
        near = other.score >= thresholds.related
        if other.kind != kind or not (near or (stopped and other.score >= thresholds.reach)) or other.id == merge_into:
            continue
        relation = rules.relation(other.content, content, kind)
        if not near and relation != "changed":
            continue  # further than related only a stated change counts
        if relation == "same" and other.score >= thresholds.duplicate:
            merge_into = merge_into or other.id
        elif relation in ("negation", "changed"):
            supersede.append(other.id)
        elif relation == "conflict":
            conflicts.append(other.id)
    if merge_into is not None:
        return Relation(merge_into, [i for i in supersede if i != merge_into], [])
    return Relation(None, supersede, conflicts)
