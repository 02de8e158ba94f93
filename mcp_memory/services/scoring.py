"""The value function of recall and the one retention curve shared with decay.

V = a*R + b*T + c*F + d*P
R relevance (the fused retrieval score mapped to 0..1), T recency, F access frequency, P importance
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar, cast

from mcp_memory.core.models import Centring, DenseHits, MemoryRecord
from mcp_memory.core.text import CJK_LANGUAGES, has_cjk

if TYPE_CHECKING:
    from mcp_memory.core.models import Vector
    from mcp_memory.embed.languages import LanguageMeans

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


# The relevance floor (ADR 10): a memory whose fused evidence is not above the scope's ordinary
# (dense at its mean, no rare word shared) is padding, not an answer. Below a handful of memories a
# mean and a spread say nothing, so small scopes are not floored.
RELEVANCE_FLOOR = 0.0
# Recall follows links from this many of its first hits (ADR 10).
LINK_SEEDS = 3
FLOOR_MIN_MEMORIES = 5


@dataclass(frozen=True, slots=True)
class Fusion:
    """Score-aware fusion of the dense and the keyword side (ADR 10).

    Dense evidence is how many standard deviations a memory's similarity stands above the ordinary
    similarity in the scope: what every memory shares ("The user ...", the language of a store in
    one language) moves the mean, not the distance from it. Keyword evidence is the BM25 score in
    units of one term found in a single memory (the IDF of such a term is about log N), so a word
    that nearly every memory contains brings almost nothing, however many memories it matches;
    ``keyword_weight`` says how many standard deviations one such term is worth.
    """

    keyword_weight: float

    def fuse(self, dense: DenseHits, keyword: Sequence[tuple[str, float]]) -> dict[str, float]:
        scores = {n: dense.z(similarity) for n, similarity in dense.hits}
        for n, evidence in keyword_evidence(dense, keyword).items():
            scores[n] = scores.get(n, unseen(dense)) + self.keyword_weight * evidence
        return scores


# Another form of a word is half the evidence of the word itself (services/keywords.py): the same
# root, often another role ("organize" and "organization" share a stem), and Snowball joins some
# words that are not one ("universe", "university"). Chosen before the dev runs, not tuned on them.
STEM_WEIGHT = 0.5


# A script's mean in a store is shrunk towards the parallel corpus's with the weight of this many
# memories: a store with two Chinese memories is not centred on those two alone.
CENTRING_PRIOR_WEIGHT = 8.0


def centring(means: LanguageMeans | None, question_script: int, query: Vector) -> Centring | None:
    """What takes the language out of the dense search in a store that mixes scripts (ADR 10): the
    question without its script's mean, and the passages' means to shrink each store's towards."""
    import numpy as np

    if means is None:
        return None
    shifted = query - means.query[question_script]
    norm = float(np.linalg.norm(shifted))
    if norm < 1e-6:
        return None
    return Centring(query=shifted / norm, prior=means.passage, prior_weight=CENTRING_PRIOR_WEIGHT)


def unseen(dense: DenseHits) -> float:
    """The dense evidence of a memory the dense side did not return: at most its last hit's."""
    return dense.z(dense.hits[-1][1]) if dense.hits else 0.0


def keyword_evidence(dense: DenseHits, keyword: Sequence[tuple[str, float]]) -> dict[str, float]:
    """BM25 in units of one word found in a single memory of the store (its IDF is about log N)."""
    unit = math.log(max(dense.population, dense.visible, len(keyword)) + 1)
    return {n: max(bm25, 0.0) / unit for n, bm25 in keyword}


# The Chinese candidates' mean keyword evidence, lent to the English ones, is shrunk towards what
# every one of them got with the weight of this many memories, as a script's mean is shrunk in
# centring: a few memories' average is mostly theirs, not the store's.
BLIND_PRIOR_WEIGHT = CENTRING_PRIOR_WEIGHT


def keyword_blind(
    fused: dict[str, float],
    records: Mapping[str, MemoryRecord],
    dense: DenseHits,
    keyword: Sequence[tuple[str, float]],
    terms: Sequence[str],
    weight: float,
) -> None:
    """A Chinese question whose words are all Chinese cannot match an English memory on the
    keyword side, so the English candidates' lack of keyword evidence says nothing about them: they
    get the keyword evidence the Chinese candidates have on average (those without a match count 0),
    in ``fused``. Without it, in a store that mixes scripts, any Chinese memory that shares a word
    (or a bigram that is half of one) with the question outranks the English answer the dense side
    found (ADR 10, amended). A Chinese candidate's evidence is what the question's common words give
    every one of them ("用户", which an English memory holds in meaning: "the user"), the least any
    got, plus what its rarer words give it, which an average of a few memories overstates: the
    average is shrunk towards that least with the weight of ``BLIND_PRIOR_WEIGHT`` memories, and
    towards 0 when there is one Chinese candidate (nothing shows what is common). Unshrunk, a store's
    one Chinese memory lent every English memory its own evidence, and when it answered, a
    preference sharing nothing with the question came first (a review's 4-memory store)."""
    if not terms or not all(has_cjk(t) for t in terms):
        return
    evidence = keyword_evidence(dense, keyword)
    # a memory's script as the vector index reads it: its stored language
    cjk = [m for m, r in records.items() if r.language in CJK_LANGUAGES]
    latin = [m for m, r in records.items() if r.language not in CJK_LANGUAGES and m in fused]
    if not cjk or not latin:
        return
    found = [evidence.get(m, 0.0) for m in cjk]
    common = min(found) if len(found) > 1 else 0.0
    mean = (sum(found) + BLIND_PRIOR_WEIGHT * common) / (len(found) + BLIND_PRIOR_WEIGHT)
    for m in latin:
        fused[m] += weight * mean


def relevance(fused: float) -> float:
    """R in 0..1 for the value function: 0.5 two standard deviations above the ordinary, 0.88 at four."""
    return 1.0 / (1.0 + math.exp(-(fused - 2.0)))


# How far behind the best candidate's fused evidence the boosts still count in full: one rare word
# shared with the question (recall.keyword_weight's 2 standard deviations). Each further such step
# costs them a factor e.
BOOST_REACH = 2.0


def closeness(fused: float, best: float) -> float:
    """How much of the recency, frequency and importance boosts a candidate keeps: all of them
    within one rare word's worth (BOOST_REACH) of the best candidate's evidence, e^-1 at two, e^-2
    at three (all of them when there is no best to measure from: ``best`` of -inf, a scope too
    small for a spread)."""
    return math.exp(-max(best - fused - BOOST_REACH, 0.0) / BOOST_REACH)


def value(
    preset: str,
    relevance: float,
    recency_: float,
    frequency_: float,
    importance: float,
    closeness_: float = 1.0,
    *,
    time_asked: bool = False,
) -> float:
    """V = a*R + (b*T + c*F + d*P) * closeness: the boosts reorder memories about as relevant as the
    best one, and do not lift one far behind it (R saturates, so they would decide alone: ADR 10).
    When the question names a time, T is closeness to that time, evidence like R: it counts in full."""
    a, b, c, d = PRESETS[preset]
    timely = b * recency_ if time_asked else b * recency_ * closeness_
    return a * relevance + timely + (c * frequency_ + d * importance) * closeness_


def stated_at(record: MemoryRecord) -> float:
    """When the user last said it: its newest occurrence, and never before it was stored."""
    return max(record.last_seen_at or record.created_at, record.created_at)


def newer_side_first(scored: list[_Hit]) -> list[_Hit]:
    """Of memories flagged as conflicting, or replaced by one another, the one stated last ranks above the others.

    A conflict the rules could not judge keeps both sides; the user's latest word is the better
    guess until someone confirms, so an older side may not outrank it on score alone. The group
    keeps the places its members earned, and their values; inside them, the last stated comes
    first and takes the best place's value, so that scores still fall down the list.
    """
    if not any(hit[1].conflicts_with or hit[1].superseded_by for hit in scored):
        return scored
    present = {hit[1].id: i for i, hit in enumerate(scored)}
    group = list(range(len(scored)))  # union-find over the hits, joined by conflict flags and replacements

    def root(i: int) -> int:
        while group[i] != i:
            group[i] = group[group[i]]
            i = group[i]
        return i

    for i, hit in enumerate(scored):
        # a replaced memory (returned with include_superseded) sits with what replaced it, which was said later
        for other in [*hit[1].conflicts_with, *filter(None, [hit[1].superseded_by])]:
            if other in present:
                group[root(present[other])] = root(i)
    places: dict[int, list[int]] = {}
    for i in range(len(scored)):
        places.setdefault(root(i), []).append(i)
    order = list(scored)
    for slots in places.values():
        members = sorted((scored[i] for i in slots), key=lambda hit: (bool(hit[1].superseded_by), -stated_at(hit[1])))
        for slot, member in zip(slots, members, strict=True):
            order[slot] = cast(_Hit, (scored[slot][0], *member[1:]))
    return order
