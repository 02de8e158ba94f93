"""What recall found, in domain terms: each hit is a stored record with its score, its reason, its
strength and (asked to explain) the signals of the ranking; the answer adds the pinned records and
what the budget and the floor left out.

The face maps these to the recall tool's wire shapes (``mcp/recall_schemas.py``,
``mcp/wire_recall.py``). The budget still counts each hit as it is sent: the service measures a hit
with the ``HitCost`` it was built with, and the entry points hand it the face's measure
(``wire_recall.hit_tokens``), so services never see a wire shape (ADR 23).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from mcp_memory.core.caution import caution, reveal
from mcp_memory.core.models import MemoryRecord

# How strongly a recalled memory (or recall's answer) bears on the question (services/strength.py).
Strength = Literal["strong", "weak"]

# Lean hits (recall's default) or whole records.
Detail = Literal["lean", "full"]


@dataclass(frozen=True, slots=True)
class Signals:
    """Why a memory was recalled: every signal of the value function (the wire shape says each)."""

    relevance: float
    recency: float
    frequency: float
    importance: float
    value: float
    dense: float | None = None
    dense_z: float | None = None
    dense_rank: int | None = None
    keyword: float | None = None
    keyword_evidence: float | None = None
    keyword_rank: int | None = None
    second_opinion: float | None = None
    fused: float = 0.0
    understanding: float | None = None
    understood: str | None = None
    evidence: float | None = None


@dataclass(frozen=True, slots=True)
class Recalled:
    """One hit: the record, its value (0..1), why in words, its strength, the signals when explained,
    and the tokens it costs the budget as last measured (0 before)."""

    record: MemoryRecord
    score: float
    why: str
    strength: Strength
    signals: Signals | None = None
    tokens: int = 0

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def text(self) -> str:
        """The text as the agent receives it: hidden characters shown when it reads as an instruction."""
        content = self.record.content
        return reveal(content) if caution(content) else content


# The tokens a hit costs a budget, sent lean or whole: what the caller receives, measured by the face.
HitCost = Callable[[Recalled, Detail], int]


@dataclass(frozen=True, slots=True)
class Recollection:
    """Recall's answer: the question (redacted), the hits best first and the pinned records (which
    do not count against k or the budget), and what the budget and the floor did."""

    query: str
    hits: list[Recalled]
    pinned: list[MemoryRecord]
    detail: Detail
    preset: str
    budget_tokens: int
    used_tokens: int
    omitted_for_budget: int
    note: str | None = None
    below_floor: int = 0
    strength: Strength = "weak"
