"""How recall ranks what its two searches found and fits the best into the token budget.

MemoryService.recall runs the searches and reads the records; here are the steps after: the value
function per candidate, the newer side of a supersession first, packing hits into the budget (each
measured by the caller's ``HitCost``: the hit as it is sent) and the reason given for each.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import anyio

from mcp_memory.core.models import DenseHits, MemoryRecord
from mcp_memory.core.recalled import Detail, HitCost, Recalled, Recollection, Signals
from mcp_memory.core.text import ZH_FUNCTION_CHARS, has_cjk, shares_stem
from mcp_memory.services import incoming, scoring
from mcp_memory.services.question import DATED_SECONDS, DEMOTIONS, Understanding
from mcp_memory.services.when import Span, said


async def concurrently(*calls: Awaitable[Any]) -> list[Any]:
    """Await all of ``calls`` at once; the first failure is raised as itself (not as a group)."""
    results: list[Any] = [None] * len(calls)
    errors: list[BaseException] = []

    async def run(i: int, call: Awaitable[Any]) -> None:
        try:
            results[i] = await call
        except Exception as exc:
            errors.append(exc)

    async with anyio.create_task_group() as tg:
        for i, call in enumerate(calls):
            tg.start_soon(run, i, call)
    if errors:
        raise errors[0]
    return results


Scored = tuple[float, MemoryRecord, Signals]  # value, the memory, why


def score(
    ranked: Sequence[str],
    records: Mapping[str, MemoryRecord],
    *,
    fused: Mapping[str, float],
    dense: DenseHits,
    keyword: Sequence[tuple[str, float]],
    second: Mapping[str, float],
    understanding: Mapping[str, Understanding],
    preset: str,
    half_life_hours: float,
    now: float,
    span: Span | None = None,
) -> list[Scored]:
    """The value of every candidate but the pinned ones (they come back apart): best first, the newer
    side of a supersession ahead of the older. For a question that names a time (``span``), recency
    is closeness of ``occurred_at`` to that time, not of the last access to now."""
    dense_score, keyword_score = dict(dense.hits), dict(keyword)
    evidence = scoring.keyword_evidence(dense, keyword)
    dense_rank = {n: r for r, (n, _) in enumerate(dense.hits, start=1)}
    keyword_rank = {n: r for r, (n, _) in enumerate(keyword, start=1)}
    totals = {n: _understood(fused[n], understanding.get(records[n].id)) for n in ranked if n in records}
    best = _best(totals, records, dense)
    scored: list[tuple[float, MemoryRecord, Signals]] = []
    for n in ranked:
        record = records.get(n)
        if record is None or record.pinned:
            continue
        t = _recency(record, span, now, half_life_hours)
        f = scoring.frequency(record.access_count)
        understood = understanding.get(record.id)
        total = totals[n]
        r = scoring.relevance(total)
        # A named time is evidence, not a boost: closeness to it counts in full (ADR 10).
        v = scoring.value(
            preset, r, t, f, record.importance, scoring.closeness(total, best), time_asked=span is not None
        )
        signals = Signals(
            dense=dense_score.get(n),
            dense_z=round(dense.z(dense_score[n]), 3) if n in dense_score else None,
            dense_rank=dense_rank.get(n),
            keyword=keyword_score.get(n),
            keyword_evidence=round(evidence[n], 3) if n in evidence else None,
            keyword_rank=keyword_rank.get(n),
            second_opinion=second.get(n),
            fused=round(total, 4),
            understanding=round(total - fused[n], 4) if understood else None,
            understood=understood.reason if understood else None,
            relevance=round(r, 6),
            recency=round(t, 6),
            frequency=f,
            importance=record.importance,
            value=round(v, 6),
        )
        scored.append((v, record, signals))
    scored.sort(key=lambda item: -item[0])
    return _conflicts_placed(scored)


def _conflicts_placed(scored: list[Scored]) -> list[Scored]:
    """The newer side of a flagged conflict or a replacement ahead of the older (``scoring.newer_side_first``),
    and each side moved says so in its reason, since its score is the place's, not its own evidence."""
    earned = {record.id: i for i, (_, record, _) in enumerate(scored)}
    placed = scoring.newer_side_first(scored)
    out: list[Scored] = []
    for i, (value, record, signals) in enumerate(placed):
        if earned[record.id] != i:
            if record.superseded_by:
                said = "replaced since"
            elif i < earned[record.id]:
                said = "said after one it conflicts with" if record.conflicts_with else "replaces an older one"
            else:
                said = "a later statement conflicts"
            reasons = "; ".join(filter(None, (said, signals.understood)))  # first: it explains the place
            signals = replace(signals, understood=reasons, value=round(value, 6))
        out.append((value, record, signals))
    return out


def reinforced(scored: Sequence[Scored], hits: Sequence[Recalled]) -> list[str]:
    """The hits recall judged answers, which it strengthens: those within one rare word's worth of
    evidence of the best (scoring.BOOST_REACH). Strengthening the padding too would make it fresher
    and more frequent with every call, until it outranked a new statement of the answer."""
    fused = {record.id: signals.fused for _, record, signals in scored}
    best = max(fused.values(), default=0.0)
    return [h.id for h in hits if best - fused.get(h.id, float("-inf")) <= scoring.BOOST_REACH]


def _understood(fused: float, understood: Understanding | None) -> float:
    return understood.apply(fused) if understood else fused


def _best(totals: Mapping[str, float], records: Mapping[str, MemoryRecord], dense: DenseHits) -> float:
    """The best candidate's evidence, which the boosts are measured from; -inf (no measure) in a
    scope too small for its standard deviations to mean anything."""
    if dense.visible < scoring.FLOOR_MIN_MEMORIES:
        return float("-inf")
    return max((totals[n] for n in totals if not records[n].pinned), default=0.0)


def _recency(record: MemoryRecord, span: Span | None, now: float, half_life_hours: float) -> float:
    """T: closeness of the last access to now, or of ``occurred_at`` to the time the question names."""
    if span is None:
        return scoring.recency((now - (record.last_accessed_at or record.created_at)) / 3600, half_life_hours)
    return scoring.recency(span.distance_hours(record.occurred_at), max((span.end - span.start) / 3600, 24.0))


def floored(scored: list[Scored], visible: int, entity_linked: set[str], on: bool) -> tuple[int, list[Scored]]:
    """The relevance floor (ADR 10): how many candidates are no closer to the question than the
    scope's ordinary memory, and the others. A memory a first hit names by a rare entity stays; a
    scope too small for a mean and a spread to say anything is not floored."""
    if not on or visible < scoring.FLOOR_MIN_MEMORIES:
        return 0, scored
    # A demotion (a memory that only asks) orders, it does not floor: its own evidence is judged.
    kept = [
        h
        for h in scored
        if h[2].fused - min(h[2].understanding or 0.0, 0.0) > scoring.RELEVANCE_FLOOR or h[1].id in entity_linked
    ]
    return len(scored) - len(kept), kept


def floor_note(returned: int, k: int, below: int, omitted: int = 0, budget: int = 0) -> str | None:
    """What recall says when it returns fewer than ``k`` hits: what the budget left out, or that the
    relevance floor (or an empty scope) left nothing, or only so many."""
    parts: list[str] = []
    if omitted:
        what = "memory did" if omitted == 1 else "memories did"
        more = "more " if returned else ""
        parts.append(f"{omitted} {more}relevant {what} not fit budget_tokens={budget}: raise it")
    if returned == 0 and not omitted:
        parts.append(
            "no relevant memories: nothing here stands out from the ordinary for this question"
            if below
            else "no relevant memories: nothing is stored yet (remember stores it), or none in this question's "
            "scope and filters"
        )
    elif below and returned + omitted < k:
        parts.append(f"only {returned + omitted} relevant: {below} more no closer to the question than the ordinary")
    return "; ".join(parts) or None


def answer(
    query: str,
    hits: list[Recalled],
    pinned: list[MemoryRecord],
    *,
    k: int,
    budget: int,
    used: int,
    omitted: int,
    below: int,
    detail: Detail,
    preset: str,
    notes: Sequence[str | None] = (),
) -> Recollection:
    """What recall sends: the question redacted (the answer is stored in a transcript: no secret is
    echoed back), the hits and pins, and one note of what the floor, the budget and the LLM did, and
    that nothing stands out when no hit is strong."""
    strong = any(h.strength == "strong" for h in hits)
    weak = None if strong or not hits else NOTHING_STANDS_OUT
    return Recollection(
        query=incoming.redacted(query),
        hits=hits,
        pinned=pinned,
        detail=detail,
        preset=preset,
        budget_tokens=budget,
        used_tokens=used,
        omitted_for_budget=omitted,
        below_floor=below,
        note="; ".join(filter(None, (weak, floor_note(len(hits), k, below, omitted, budget), *notes))) or None,
        strength="strong" if strong else "weak",
    )


NOTHING_STANDS_OUT = "nothing stands out: no hit clearly bears on the question"


# Fewer candidates than this say nothing of how common a word is: every term may be cited.
TELLING_AMONG = 4


def fit_budget(
    scored: Sequence[tuple[float, MemoryRecord, Signals]],
    k: int,
    budget: int,
    *,
    cost: tuple[HitCost, Detail],
    terms: Sequence[str],
    explain: bool,
    now: float,
    offset: float = 0.0,
    question: str = "",
) -> tuple[list[Recalled], int, int]:
    """The best ``k`` hits whose tokens fit the budget: (hits, tokens used, hits left out for the budget).

    What counts is the hit as it is sent, lean or whole (``cost``: the measure and the detail).
    A reason cites ``terms`` in their order (``telling_terms``), Chinese ones as the runs ``question``
    shares with the hit; ``now`` and ``offset`` (the asker's UTC offset) say when each hit was said in
    the asker's days."""
    measure, detail = cost
    hits: list[Recalled] = []
    used = 0
    omitted = 0
    for value, record, signals in scored:
        if len(hits) >= k:
            break
        reason = why(record, signals, terms, now, offset, question)
        # counted strong, the longer word: its strength is judged after (services/strength.py)
        hit = Recalled(record, round(value, 3), reason, "strong", signals if explain else None)
        tokens = measure(hit, detail)
        if used + tokens > budget:
            omitted += 1
            continue
        used += tokens
        hits.append(replace(hit, tokens=tokens))
    if len(hits) < k:  # a budget too small for k hits: what it left out is counted within k, not over every candidate
        omitted = min(omitted, k - len(hits))
    return hits, used, omitted


def telling_terms(terms: Sequence[str], candidates: Iterable[MemoryRecord]) -> list[str]:
    """The question's terms a hit's reason may cite, rarest among recall's candidates first: a word
    most of them contain ("user" in an agent's store) sets none apart and is no reason."""
    among = list(candidates)
    counts = dict.fromkeys(terms, 0)
    for record in among:
        for term in matched_terms(record.content, terms):
            counts[term] += 1
    common = {t for t in terms if len(among) >= TELLING_AMONG and 2 * counts[t] > len(among)}
    kept = [t for i, t in enumerate(terms) if t not in common and not _straddles(terms, i, common)]
    return sorted(kept, key=lambda t: counts[t])


def _straddles(terms: Sequence[str], i: int, common: set[str]) -> bool:
    """Whether the CJK bigram ``terms[i]`` shares a character with a common bigram beside it: of
    "用户喜欢" with 用户 common, 户喜 is half of that word and half of the next, no word to cite."""
    term = terms[i]
    if len(term) != 2 or not has_cjk(term):
        return False
    before = terms[i - 1] if i > 0 else ""
    after = terms[i + 1] if i + 1 < len(terms) else ""
    return (before in common and before[-1:] == term[0]) or (after in common and after[:1] == term[1])


def matched_terms(content: str, terms: Sequence[str]) -> list[str]:
    """The question's keyword terms that ``content`` contains as words (CJK bigrams as characters)."""
    text = content.lower()
    found: list[str] = []
    for term in terms:
        if term not in text:  # most terms are in few memories: no pattern for them
            continue
        if has_cjk(term) or re.search(rf"(?<![^\W_]){re.escape(term)}(?![^\W_])", text):
            found.append(term)
    return found


def forms_matched(content: str, terms: Sequence[str]) -> list[str]:
    """The words of ``content`` that share a stem with one of the question's English ``terms``, as
    ``content`` writes them: what a hit the keyword side found by a word's stem is cited by."""
    return list(dict.fromkeys(filter(None, (shares_stem(content, term) for term in terms))))


# A hit's line in recall's text block costs at most 120 characters beyond its text: the quotes, date,
# id and punctuation take 49, so its reason gets what is left (in the JSON a lean fact's other fields
# and the keys take 103, or 116 when it is strong: mcp/recall_schemas.py).
WHY_CHARS = 70


def why(
    record: MemoryRecord, signals: Signals, terms: Sequence[str], now: float, offset: float = 0.0, question: str = ""
) -> str:
    """Why a hit was returned, in a few words, the strongest reasons first: the words it matched
    (the first of ``terms`` first; Chinese as the whole runs it shares with ``question``), its
    closeness in meaning, what the question's time, people or a link added, when it was said (in the
    days of ``offset``)."""
    parts: list[str] = []
    # Words nearly every memory contains ("user") carry no evidence and are no reason.
    evidence = signals.keyword_evidence or 0.0
    matched = matched_terms(record.content, terms) if evidence >= 0.3 else []
    if not matched and evidence >= 0.3 * scoring.STEM_WEIGHT:  # found by a stem: its evidence counts half
        matched = forms_matched(record.content, terms)
    if matched:
        parts.append("matches " + ", ".join(f"'{t}'" for t in cited_words(record.content, question, matched)[:2]))
    # the question's time, people and form, then a link (in that order from question.adjustments)
    parts.extend(signals.understood.split("; ") if signals.understood else [])
    z = signals.dense_z
    if z is not None and z >= 2.0:
        parts.insert(1 if matched else 0, "close in meaning")
    elif z is not None and z >= 1.0:
        parts.append("related in meaning")
    if not parts:
        parts.append("the nearest in meaning here" if signals.dense_rank == 1 else "weakly related")
    # a demotion explains the hit's place better than what it matched: it is never the reason left out
    parts.sort(key=lambda part: part not in DEMOTIONS)
    # returned only because filters asked for them (include_expired, include_archived): said first
    if record.tier == "archived":
        parts.insert(0, "archived")
    if record.expires_at is not None and record.expires_at <= now:
        parts.insert(0, f"expired {said(record.expires_at, now, offset)}")
    kept: list[str] = []
    for part in [*parts, _when(record, now, offset)]:
        if len("; ".join([*kept, part])) <= WHY_CHARS:
            kept.append(part)
    return "; ".join(kept)


def cited_words(content: str, question: str, matched: Sequence[str]) -> list[str]:
    """The matched ``terms`` as a reason cites them, in their order: a Chinese bigram as the whole run
    of matched bigrams around it that ``question`` and ``content`` share (of 用户喜欢喝什么茶 and
    用户喜欢喝乌龙茶, 用户喜欢喝 rather than 户喜 and 喜欢), every other term as it is."""
    text, asked = content.lower(), question.lower()
    bigrams = {t for t in matched if len(t) == 2 and has_cjk(t)}
    cited: list[str] = []
    for term in matched:
        if term not in bigrams:
            cited.append(term)
        elif not any(term in run for run in cited):
            cited.append(_shared_run(term, asked, text, bigrams))
    return list(dict.fromkeys(cited))


def _shared_run(bigram: str, asked: str, text: str, bigrams: set[str]) -> str:
    """``bigram`` grown, one character at a time either way through the question, while the next
    bigram is matched too (or holds a function character such as 和, which the keyword side never
    searches) and the run is still in the memory; a function character is not left at either end
    (of 中华人民共和国 shared, that run, not 中华人民共 and 国国家)."""
    start = asked.find(bigram)
    if start < 0:  # a question the terms were not cut from: the bigram alone
        return bigram

    def joins(pair: str) -> bool:
        return pair in bigrams or ZH_FUNCTION_CHARS.search(pair) is not None

    end = start + 2
    while start > 0 and joins(asked[start - 1 : start + 1]) and asked[start - 1 : end] in text:
        start -= 1
    while end < len(asked) and joins(asked[end - 1 : end + 1]) and asked[start : end + 1] in text:
        end += 1
    while ZH_FUNCTION_CHARS.fullmatch(asked[start]):
        start += 1
    while ZH_FUNCTION_CHARS.fullmatch(asked[end - 1]):
        end -= 1
    return asked[start:end]


def _when(record: MemoryRecord, now: float, offset: float) -> str:
    """When a hit was said, or for an event dated ahead of its telling when it happens, from ``now``
    (the caller's ``as_of``). A memory said after an ``as_of`` in the past is said on a date, not "in 6 days"."""
    moment = said(record.occurred_at, now, offset)
    if record.occurred_at <= now:
        return f"said {moment}"
    if record.occurred_at > record.created_at + DATED_SECONDS:
        return f"happens {moment}"
    return "said " + datetime.fromtimestamp(record.occurred_at + offset, UTC).date().isoformat()
