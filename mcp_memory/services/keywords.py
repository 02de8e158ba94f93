"""The keyword side of recall: the question's words as written and as their stems, in one ranking.

The index holds every English word twice, as written and as its stem (``text.segment_for_index``),
so two searches answer: one for the words as written, one for their stems. A memory gets the first
search's BM25 and half of whatever the second finds beyond it (``STEM_WEIGHT``). A memory that says
"games" therefore scores what it scored before stemming existed (its stem adds nothing the word did
not: a stem is in at least as many memories as any of its forms, so its IDF is no higher), and one
that says only "game" gets half of a match on the stem. Summing both searches instead would count
every memory that holds the word as written twice, and move the scale that ``keyword_weight``
is set in (ADR 10: searching inflections beside the word cost LoCoMo a point of R@5).
"""

from __future__ import annotations

from collections.abc import Sequence

from mcp_memory.core.models import Criteria, Scope
from mcp_memory.core.text import stem_terms
from mcp_memory.services.ports import MemorySearch
from mcp_memory.services.scoring import STEM_WEIGHT


async def keyword_ranking(
    store: MemorySearch, scope: Scope, terms: Sequence[str], criteria: Criteria, limit: int, now: float
) -> list[tuple[str, float]]:
    """Top ``limit`` (memory id, score) for the question's ``terms``: BM25 of the words as written
    plus ``STEM_WEIGHT`` of what their stems add (``with_word_forms``)."""
    written, stemmed = await store.keyword_searches(scope, [terms, stem_terms(terms)], criteria, limit, now)
    return with_word_forms(written, stemmed, limit)


def with_word_forms(
    written: Sequence[tuple[str, float]], stemmed: Sequence[tuple[str, float]], limit: int
) -> list[tuple[str, float]]:
    """Each memory's score as written, plus ``STEM_WEIGHT`` of its stems' score beyond that, best first."""
    exact = dict(written)
    scores = dict(exact)
    for memory, by_stem in stemmed:
        as_written = exact.get(memory, 0.0)
        scores[memory] = as_written + STEM_WEIGHT * max(by_stem - as_written, 0.0)
    return sorted(scores.items(), key=lambda item: -item[1])[:limit]
