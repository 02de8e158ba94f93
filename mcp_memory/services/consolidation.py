"""Which memories state the same fact: the grouping step of the consolidation pass.

Two memories are one statement when they are close (cosine at the model's "related" level) and
``rules.same_facts`` holds (ADR 5). Only the memories new since the last pass are compared, each
with every memory of its namespace and kind, in blocks so memory stays bounded.
"""

from __future__ import annotations

import numpy as np

from mcp_memory.core.models import MemoryRecord, Vector
from mcp_memory.services import rules

# New memories per matrix product: 256 x (all of one kind) floats at a time.
COMPARE_BLOCK = 256


def same_fact_groups(
    records: list[MemoryRecord], vectors: dict[str, Vector], fresh: set[str], related: float
) -> list[list[MemoryRecord]]:
    """Groups of two or more ``records`` that state one fact, each joined through a new memory
    (its id in ``fresh``); ``vectors`` by id."""
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
