"""Which memories state the same fact, and the one memory each group becomes: the consolidation pass's steps.

Two memories are one statement when they are close (cosine at the model's "related" level) and
``rules.same_facts`` holds (ADR 5). Only the memories new since the last pass are compared, each
with every memory of its namespace and kind, in blocks so memory stays bounded.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from mcp_memory.core.ids import new_id
from mcp_memory.core.models import SCHEDULER, MemoryRecord, NewMemory, NewOccurrence
from mcp_memory.core.text import segment_for_index
from mcp_memory.services import rules

if TYPE_CHECKING:
    from mcp_memory.core.models import Vector

# New memories per matrix product: 256 x (all of one kind) floats at a time.
COMPARE_BLOCK = 256


def same_fact_groups(
    records: list[MemoryRecord], vectors: dict[str, Vector], fresh: set[str], related: float
) -> list[list[MemoryRecord]]:
    """Groups of two or more ``records`` that state one fact, each joined through a new memory
    (its id in ``fresh``); ``vectors`` by id."""
    import numpy as np

    group = list(range(len(records)))

    def root(i: int) -> int:
        while group[i] != i:
            group[i] = group[group[i]]
            i = group[i]
        return i

    by_bucket: dict[tuple[str | None, str], list[int]] = {}
    for i, record in enumerate(records):
        by_bucket.setdefault((record.namespace, record.kind), []).append(i)
    for bucket in by_bucket.values():
        new = [i for i in bucket if records[i].id in fresh]
        if len(bucket) < 2 or not new:
            continue
        everything = np.stack([vectors[records[i].id] for i in bucket])
        for start in range(0, len(new), COMPARE_BLOCK):
            block = new[start : start + COMPARE_BLOCK]
            similar = np.stack([vectors[records[i].id] for i in block]) @ everything.T
            for a, b in np.argwhere(similar >= related):
                i, j = block[a], bucket[b]
                if i != j and root(i) != root(j) and rules.same_facts(records[i].content, records[j].content):
                    group[root(j)] = root(i)
    groups: dict[int, list[MemoryRecord]] = {}
    for i, record in enumerate(records):
        groups.setdefault(root(i), []).append(record)
    return [members for members in groups.values() if len(members) > 1]


def consolidated_fact(
    members: list[MemoryRecord],
    occurrences: dict[str, list[NewOccurrence]],
    vectors: dict[str, Vector],
    now: float,
) -> NewMemory:
    """The one memory a group of ``members`` stating the same fact becomes: the latest said wording,
    every occurrence of every source, the sources summarized under it."""
    import numpy as np

    copies = sorted(
        (replace(o, id=new_id()) for m in members for o in occurrences.get(m.id, [])),
        key=lambda o: o.occurred_at,
    )
    said = {m.id: max((o.occurred_at for o in occurrences.get(m.id, [])), default=0) for m in members}
    last = max(members, key=lambda m: (said[m.id], m.written))
    ids = {m.id for m in members}
    record = MemoryRecord(
        id=new_id(),
        namespace=last.namespace,
        kind=last.kind,
        content=last.content,
        key=None,
        tags=sorted({t for m in members for t in m.tags}),
        metadata={**last.metadata, "consolidated_from": len(members)},
        importance=max(m.importance for m in members),
        pinned=False,
        occurred_at=min(m.occurred_at for m in members),
        created_at=now,
        # the fact is as fresh and as used as its sources were, not new
        last_accessed_at=max(m.last_accessed_at or m.created_at for m in members),
        access_count=sum(m.access_count for m in members),
        valid_from=min(m.valid_from for m in members),
        valid_to=None,
        superseded_by=None,
        expires_at=None,
        tier="active",
        level=1,
        language=last.language,
        session_key=last.session_key,
        task_id=last.task_id,
        provenance=SCHEDULER,
        content_hash=last.content_hash,
    )
    return NewMemory(
        record=record,
        vector=np.asarray(vectors[last.id], np.float32),
        segmented=segment_for_index(last.content),
        occurrence=copies[0],
        more_occurrences=tuple(copies[1:]),
        summarizes=tuple(m.id for m in members),
        conflicts=tuple(sorted({c for m in members for c in m.conflicts_with} - ids)),
    )
