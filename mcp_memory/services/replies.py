"""A question asked in a conversation is answered by the turn after it (ADR 10, question echo).

In a dialog the turn that shares most words with a question is often the question itself, asked by
the other speaker ("What kind of counseling do you want to pursue?"), and the answer is the reply
that follows it, which may share few words with the question ("I'm thinking of working with trans
people ..."). recall demotes the asking turn (services/question.py); here its reply takes the
asking turn's evidence: a turn that asks what the question asks is as close to the question as its
words and meaning put it, and what answers it is the next turn, said by someone else. The reply
keeps its own evidence when that is higher and gets no more than the asking turn's: nothing is
added that the searches did not find.

Only what asks the question counts: a turn that only asks, or one whose closing question shares a
word (or a word's stem) with it. A turn that says something and then asks in passing ("Just got
back from a road trip! Anything new with you?") matched the question with what it said; its reply
answers "anything new?", not the question. Only turns of a dialog (each with a speaker) and only a
question (not a statement) take part.
"""

from __future__ import annotations

from collections.abc import Sequence

from mcp_memory.core.models import Criteria, MemoryRecord, Scope
from mcp_memory.core.text import keyword_terms
from mcp_memory.services.ports import MemoryRows
from mcp_memory.services.question import asking_part, asks, body, is_question, speaker
from mcp_memory.services.recall import forms_matched, matched_terms


def asking_turns(question: str, ranked: Sequence[str], records: dict[str, MemoryRecord]) -> list[str]:
    """The candidates that are turns of a dialog and ask ``question``: they only ask, or their
    closing question shares one of its words other than a speaker's name; best first."""
    terms: list[str] | None = None
    out: list[str] = []
    for m in ranked:
        record = records.get(m)
        if record is None or ("?" not in record.content and "？" not in record.content):  # most memories ask nothing
            continue
        if not (who := speaker(record)):
            continue
        form = asks(text := body(record, who))
        if form == "ends" and terms is None:
            names = {said.lower() for r in records.values() if (said := speaker(r))}
            terms = [t for t in keyword_terms(question) if t not in names]
        if form == "only" or (form == "ends" and _echoes(asking_part(text), terms or [])):
            out.append(m)
    return out


def _echoes(text: str, terms: Sequence[str]) -> bool:
    return bool(matched_terms(text, terms) or forms_matched(text, terms))


async def answered(
    store: MemoryRows,
    scope: Scope,
    question: str,
    ranked: list[str],
    records: dict[str, MemoryRecord],
    fused: dict[str, float],
    criteria: Criteria,
    now: float,
) -> dict[str, str]:
    """reply id -> the asking turn whose evidence it took. The replies not among the candidates are
    read (as the scope sees them) into ``records`` and ``ranked``; ``fused`` gets each reply's new
    evidence: the best of its own and its asking turn's, before understanding."""
    if not is_question(question):
        return {}
    askers = asking_turns(question, ranked, records)
    if not askers:
        return {}
    following = await store.replies(scope, askers)
    missing = [m for m in dict.fromkeys(following.values()) if m not in records]
    if missing:
        records.update({r.id: r for r in await store.select_memories(scope, criteria, now, among=missing)})
    out: dict[str, str] = {}
    for asker in askers:  # best first: a reply takes the evidence of the best turn it answers
        reply = records.get(following.get(asker, ""))
        said_by = speaker(reply) if reply is not None else None
        if reply is None or not said_by or said_by == speaker(records[asker]):
            continue
        if fused[asker] > fused.get(reply.id, float("-inf")):
            if reply.id not in fused:
                ranked.append(reply.id)
            fused[reply.id] = fused[asker]
            out[reply.id] = asker
    for m in missing:  # a reply read for nothing is no candidate
        if m not in fused:
            records.pop(m, None)
    return out
