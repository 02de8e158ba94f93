"""How strongly a recalled memory bears on the question: ``strong`` or ``weak``, on evidence measured
against something other than the store (issue 37, item 6).

Recall's ranking measures a memory against the store: so many standard deviations above the
ordinary memory's closeness to the question. That orders candidates, but it cannot say whether the
best of them answers anything: in a store that holds nothing on the question the best still stands
above the rest (ADR 10, the relevance floor). A hit's strength is judged on its own evidence instead:

- its closeness in meaning against the embedding model's background (``embed.background``): how many
  standard deviations the cosine of question and memory stands above that of unrelated texts in the
  same pair of scripts, where about one unrelated pair in a thousand reaches 3 with e5;
- the question's informative words it holds, ``keyword_weight`` background deviations for each word
  as rare in the store as a word found in one memory (the ranking's own unit, ADR 10).

A hit is strong when that evidence reaches ``STRONG_EVIDENCE`` (3: three deviations of meaning
alone, or one rare shared word and a meaning somewhat close) and, in a store large enough to have
an ordinary (``STORE_STATS_MIN``), it also stands ``STANDS_OUT`` deviations above the store's
ordinary in recall's fused evidence. Both are needed: memories an agent writes share a template with
the questions ("The user's ..."), which lifts an unrelated fact of such a store above unrelated
everyday texts (three deviations and more with e5), and the store's ordinary takes the template
out; the background, in turn, says when the best of a store is no more than the best of nothing.
A store too small for a spread of its own still has an ordinary of a kind: the median closeness of
its other memories, in the background's deviations. A hit of such a store must stand ``STANDS_OUT``
of those above it as well, so that a store of technical notes (a config path, a deploy key) is
not offered whole for any technical prompt, whose every pair stands three deviations above
everyday texts; a store of one memory has no other to compare with.
These are the hooks' rules for what goes beside a prompt (cli/hooks.py takes them from here), so what
recall calls strong is what a hook would offer unasked. A model the background table does not
know (an OpenAI-compatible endpoint) is judged by the store's spread alone.
The answer is strong when one of its hits is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from mcp_memory.config import RecallSettings
from mcp_memory.core.models import DenseHits, MemoryRecord, Scope
from mcp_memory.core.recalled import Detail, HitCost, Recalled, Signals, Strength
from mcp_memory.core.text import looks_like_identifier_query, script
from mcp_memory.embed.background import background_z
from mcp_memory.embed.loader import Embedder
from mcp_memory.services.ports import MemoryStore
from mcp_memory.services.recall import Scored

if TYPE_CHECKING:
    pass

STRONG_EVIDENCE = 3.0
STANDS_OUT = 2.0  # one rare word's worth above the store's ordinary (recall.keyword_weight)
STORE_STATS_MIN = 10  # of n memories the best stands at most sqrt(n - 1) deviations above their mean


def evidence(
    signals: Signals, similarity: float | None, model_id: str, scripts: tuple[int, int], word_weight: float
) -> float:
    """A hit's own evidence in background standard deviations: closeness in meaning (``similarity``,
    the model's cosine of question and memory) plus ``word_weight`` for each rare word shared."""
    meaning = background_z(model_id, *scripts, similarity) if similarity is not None else None
    if meaning is None:  # no background for this model: the store's spread is all there is
        meaning = signals.dense_z or 0.0
    return meaning + word_weight * (signals.keyword_evidence or 0.0)


async def with_strength(
    store: MemoryStore,
    embedder: Embedder,
    scope: Scope,
    question: str,
    dense: DenseHits,
    scored: Sequence[Scored],
    hits: list[Recalled],
    config: RecallSettings,
    cost: tuple[HitCost, Detail],
    records: Mapping[str, MemoryRecord],
) -> tuple[list[Recalled], int]:
    """``hits`` with their strength (and, asked to explain, the evidence it was judged on), and the
    tokens they now cost, as ``cost`` measures them (no more than ``fit_budget`` counted: it counted
    each hit as strong). ``records``: the candidates recall read, whose texts give a small store's
    ordinary its scripts."""
    if not hits:
        return hits, 0
    signals = {record.id: s for _, record, s in scored}
    small = dense.visible < STORE_STATS_MIN  # every memory is a candidate: the others give an ordinary
    wanted = [h.id for h in hits] + ([m for m, _ in dense.hits] if small else [])
    similarity = await _similarities(store, embedder, scope, question, dense, list(dict.fromkeys(wanted)))
    model_id = (await embedder.ready()).model_id
    identifier = looks_like_identifier_query(question)
    weight = config.identifier_keyword_weight if identifier else config.keyword_weight
    asked = script(question)
    ordinary = _small_store_ordinary(similarity, records, model_id, asked) if small else {}
    measure, detail = cost
    out: list[Recalled] = []
    for hit in hits:
        own = evidence(signals[hit.id], similarity.get(hit.id), model_id, (asked, script(hit.text)), weight)
        judged = replace(hit, strength=strength(own, signals[hit.id].fused, dense.visible, ordinary.get(hit.id)))
        if hit.signals is not None:
            judged = replace(judged, signals=replace(hit.signals, evidence=round(own, 3)))
        out.append(replace(judged, tokens=measure(judged, detail)))
    return out, sum(hit.tokens for hit in out)


def margin(own_evidence: float, fused: float, visible: int, ordinary: float | None = None) -> float:
    """How far a hit's evidence reaches towards being strong, 1 at the bar: the lesser of its own
    evidence over ``STRONG_EVIDENCE`` and its lead over the store's ordinary over ``STANDS_OUT``: in a
    store with a spread, its fused evidence; in a smaller one, its own evidence above ``ordinary``
    (the other memories' median closeness in background deviations), when there is one."""
    own = own_evidence / STRONG_EVIDENCE
    if visible >= STORE_STATS_MIN:
        return min(own, fused / STANDS_OUT)
    return own if ordinary is None else min(own, (own_evidence - ordinary) / STANDS_OUT)


def strength(own_evidence: float, fused: float, visible: int, ordinary: float | None = None) -> Strength:
    return "strong" if margin(own_evidence, fused, visible, ordinary) >= 1.0 else "weak"


def _small_store_ordinary(
    similarity: Mapping[str, float], records: Mapping[str, MemoryRecord], model_id: str, asked: int
) -> dict[str, float]:
    """In a store too small for a spread of its own (``STORE_STATS_MIN``), each memory's ordinary:
    the median closeness to the question of the store's other memories, in background deviations
    (each pair of scripts measured against its own background); empty for a model the background
    table does not know, and for a memory with no other beside it."""
    import numpy as np

    meaning: dict[str, float] = {}
    for memory_id, cosine in similarity.items():
        record = records.get(memory_id)
        z = background_z(model_id, asked, script(record.content), cosine) if record is not None else None
        if z is not None:
            meaning[memory_id] = z
    return {m: float(np.median([z for other, z in meaning.items() if other != m])) for m in meaning if len(meaning) > 1}


async def _similarities(
    store: MemoryStore, embedder: Embedder, scope: Scope, question: str, dense: DenseHits, ids: Sequence[str]
) -> Mapping[str, float]:
    """The model's cosine of the question and each memory ``ids`` names: the dense search's own (of a
    store that mixes scripts, centred (ADR 10), the plain cosines it measured beside), or, where it
    did not measure one (found by a word or a link), from the stored vectors and the question's
    (cached) one."""
    import numpy as np

    plain = dense.cosines if dense.centred else dict(dense.hits)
    found = {m: plain[m] for m in ids if m in plain}
    missing = [m for m in ids if m not in found]
    if missing:
        query = await embedder.query(question, owner=scope.principal)
        for m, vector in (await store.lifecycle.vectors(scope, missing)).items():
            if vector.shape == query.shape:
                found[m] = float(np.dot(vector, query))
    return found
