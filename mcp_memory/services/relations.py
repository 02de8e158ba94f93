"""How a new memory relates to the close ones already stored: merge, supersede or conflict.

The texts are judged by ``rules.relation``; closeness is the embedding model's similarity, with
its own thresholds (or ``recall.duplicate_similarity`` when configured).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mcp_memory.embed.loader import Embedder
from mcp_memory.models import Criteria, Scope
from mcp_memory.services import rules
from mcp_memory.storage.sqlite import SqliteStore


async def relate(
    store: SqliteStore,
    embedder: Embedder,
    duplicate_similarity: float | None,
    scope: Scope,
    vector: np.ndarray[Any, Any],
    content: str,
    kind: str,
    batch: list[tuple[np.ndarray[Any, Any], str, str, str]],
    now: float,
    merge_into: str | None = None,
) -> tuple[str | None, list[str], list[str]]:
    """What a new memory is to the close ones already stored: (merge into, supersedes, conflicts with).

    Rules in ``rules.relation``: the same statement merges; a word-for-word denial or a stated
    change supersedes (history kept); a swapped preference or decision is kept and flagged.
    A restatement (``merge_into``, or a close equal found here) is the user's latest word
    too: what it replaces is superseded although the memory itself is not stored again.
    """
    model = await embedder.ready()
    duplicate = duplicate_similarity or model.duplicate_similarity
    related = min(model.related_similarity, duplicate)
    candidates: list[tuple[float, str, str, str]] = [
        (float(other @ vector), other_id, other_content, other_kind)
        for other, other_id, other_content, other_kind in batch
    ]
    hits = await store.dense_search(scope, vector, Criteria(namespace_only=True), 5, now)
    close = {n: score for n, score in hits if score >= related}
    if close:
        stored = await store.select_memories(scope, Criteria(namespace_only=True), now, ns=list(close))
        candidates.extend((close[r.rowid], r.id, r.content, r.kind) for r in stored)
    supersede: list[str] = []
    conflicts: list[str] = []
    for score, other_id, other_content, other_kind in sorted(candidates, key=lambda c: -c[0]):
        if other_kind != kind or score < related:
            continue
        if other_id == merge_into:
            continue
        relation = rules.relation(other_content, content, kind)
        if relation == "same" and score >= duplicate:
            merge_into = merge_into or other_id
            continue
        if relation in ("negation", "changed"):
            supersede.append(other_id)
        elif relation == "conflict":
            conflicts.append(other_id)
    if merge_into is not None:
        return merge_into, [i for i in supersede if i != merge_into], []
    return None, supersede, conflicts
