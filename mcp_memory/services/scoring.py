"""The value function of recall and the one retention curve shared with decay.

V = a*R + b*T + c*F + d*P
R relevance (fused retrieval score, normalised), T recency, F access frequency, P importance
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypeVar

from mcp_memory.models import MemoryRecord

_Hit = TypeVar("_Hit", bound=tuple[float, MemoryRecord, object])

PRESETS: dict[str, tuple[float, float, float, float]] = {
    "assistant": (0.4, 0.2, 0.1, 0.3),
    "chat": (0.3, 0.4, 0.2, 0.1),
    "medical": (0.3, 0.1, 0.1, 0.5),
}


def retention(hours: float, strength_hours: float) -> float:
    """exp(-t / S): how much of a memory is left after ``hours`` at strength ``S`` (hours)."""
    return math.exp(-max(hours, 0.0) / strength_hours)


def recency(hours: float, half_life_hours: float) -> float:
    """T: the retention curve with the strength that halves it every ``half_life_hours``."""
    return retention(hours, half_life_hours / math.log(2))


def frequency(access_count: int) -> float:
    return min(access_count / 10.0, 1.0)


@dataclass(frozen=True, slots=True)
class Fusion:
    dense_weight: float
    keyword_weight: float
    rrf_k: float

    def fuse(self, dense: dict[int, int], keyword: dict[int, int]) -> dict[int, float]:
        """Weighted reciprocal-rank fusion, normalised so the best possible score is 1."""
        best = (self.dense_weight + self.keyword_weight) / (self.rrf_k + 1)
        if best <= 0:
            return {}
        scores: dict[int, float] = {}
        for n, rank in dense.items():
            scores[n] = self.dense_weight / (self.rrf_k + rank)
        for n, rank in keyword.items():
            scores[n] = scores.get(n, 0.0) + self.keyword_weight / (self.rrf_k + rank)
        return {n: s / best for n, s in scores.items()}


def value(preset: str, relevance: float, recency_: float, frequency_: float, importance: float) -> float:
    a, b, c, d = PRESETS[preset]
    return a * relevance + b * recency_ + c * frequency_ + d * importance


def stated_at(record: MemoryRecord) -> float:
    """When the user last said it: its newest occurrence, and never before it was stored."""
    return max(record.last_seen_at or record.created_at, record.created_at)


def newer_side_first(scored: list[_Hit]) -> list[_Hit]:
    """Of memories flagged as conflicting, the one stated last ranks above the others.

    A conflict the rules could not judge keeps both sides; the user's latest word is the better
    guess until someone confirms, so an older side may not outrank it on score alone. The group
    keeps the places its members earned; inside them, the last stated comes first.
    """
    if not any(hit[1].conflicts_with for hit in scored):
        return scored
    present = {hit[1].id: i for i, hit in enumerate(scored)}
    group = list(range(len(scored)))  # union-find over the hits, joined by conflict flags

    def root(i: int) -> int:
        while group[i] != i:
            group[i] = group[group[i]]
            i = group[i]
        return i

    for i, hit in enumerate(scored):
        for other in hit[1].conflicts_with:
            if other in present:
                group[root(present[other])] = root(i)
    places: dict[int, list[int]] = {}
    for i in range(len(scored)):
        places.setdefault(root(i), []).append(i)
    order = list(scored)
    for slots in places.values():
        members = sorted((scored[i] for i in slots), key=lambda hit: -stated_at(hit[1]))
        for slot, member in zip(slots, members, strict=True):
            order[slot] = member
    return order
