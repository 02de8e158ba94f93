"""Question understanding without an LLM: when a question is about, who it names, and whether a
memory is itself a question.

Three rules from how conversations work (DESIGN.md section 6, step 3), in ADR 10's unit (one
standard deviation of dense similarity):

- A question that names a time ("last week", "in April 2022", "去年五月") prefers what happened then
  (``occurred_at`` inside the interval ``when.resolve`` gives) by two, what one rare matching word
  is worth; the rest stays, ranked as before.
- A question that names a person prefers what that person said (a memory whose speaker is named,
  from ``metadata.speaker`` or a leading ``"Name: "``) or, for a memory with no speaker, what is said
  about them (the name in its text). In a dialog the speaker's name is in half the turns, so the
  keyword side gives it no weight; this gives it back.
- A memory that is itself a question ("What are your plans for the weekend?") holds no answer: when
  the caller asks a question, it counts as no more than ordinary (its fused score is capped at 0,
  the scope's mean), so any memory that stands out ranks above it however many words the two
  questions share; one that says something and then asks ("I went hiking! Have you been?") ranks
  one standard deviation lower. On LoCoMo dev the treatment of pure questions made no difference
  (such turns are never evidence there); the mixed penalty at 1 was the natural unit and no larger
  value helped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from mcp_memory.core.models import MemoryRecord
from mcp_memory.core.text import keyword_terms
from mcp_memory.services.when import Span

PERSON_BONUS = 1.0
LINK_BONUS = 0.5  # a memory linked to one of the first hits: weaker evidence than a match of its own
ENDS_ASKING_PENALTY = 1.0  # a memory that says something, then asks
ASKS_ONLY = "a question, not an answer"
ANSWERS = "replies to a turn asking this"  # services/replies.py
ENDS_ASKING = "ends with a question"
DEMOTIONS = (ASKS_ONLY, ENDS_ASKING)  # the reasons a hit ranks lower than its words and meaning would put it
# A time the question names is a word it names: worth what one rare matching word is (ADR 10).
TIME_BONUS = 2.0
# An occurred_at this far from the moment a memory was stored was given by the caller (the time it happened).
DATED_SECONDS = 60.0

_SPEAKER = re.compile(r"^([A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,2}):\s")
_SPEAKER_KEYS = ("speaker", "author")
_EN_ASKING = frozenset(
    """what when where who whom whose which why how did does do is are was were can could should would will
    has have""".split()
)
_ZH_ASKING = re.compile("[吗呢么]$|什么|谁|哪|几|怎么|怎样|为什么|多少|是否|有没有")
_ASKS = re.compile(r"[?？]\s*$")
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s*")


# What a question says when it asks about a time and nothing else ("What happened last week?",
# "What did the user do in the last few days?", "上周发生了什么？").
_ABOUT_NOTHING = frozenset(
    "happen happened happens do did does done doing go went anything something new thing things event events "
    "user user's we i me my".split()
)
_ZH_ABOUT_NOTHING = re.compile("发生|做了|干了|做过|有什么|什么|事情|事|用户|我们|我|他|她|了|的|吗|呢|过|都")


def asks_only_when(question: str, span: Span) -> bool:
    """Whether ``question`` names a time and asks nothing else about it: then the time is all its
    evidence, and how close a memory's words come to "what happened" says nothing."""
    rest = question.lower().replace(span.said.removeprefix("about ").lower(), " ")
    return all(t in _ABOUT_NOTHING for t in keyword_terms(_ZH_ABOUT_NOTHING.sub(" ", rest)))


def speaker(record: MemoryRecord) -> str | None:
    """Who said a memory: its ``metadata`` speaker, else a leading "Name: " of the text."""
    for key in _SPEAKER_KEYS:
        value = record.metadata.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    match = _SPEAKER.match(record.content)
    return match.group(1) if match else None


def is_turn(*records: MemoryRecord) -> bool:
    """True when every record is a turn of a dialog (it has a speaker): only then is the memory stored
    before or after one part of the same exchange; facts an agent stores in one call are not."""
    return all(speaker(r) for r in records)


def is_question(text: str) -> bool:
    """True for a question: a question mark at the end, an English question word first, or a
    Chinese question word or particle."""
    body = text.strip()
    if _ASKS.search(body):
        return True
    first = body.split(maxsplit=1)[0].lower() if body else ""
    return first in _EN_ASKING or _ZH_ASKING.search(body) is not None


def body(record: MemoryRecord, said_by: str | None) -> str:
    """A memory's text without its leading "Name: " (``said_by``)."""
    if said_by and record.content.startswith(f"{said_by}:"):
        return record.content[len(said_by) + 1 :]
    return record.content


def named_people(question: str, speakers: Iterable[str]) -> set[str]:
    """The speakers a question names, matched as whole words whatever their case."""
    lowered = question.lower()
    return {s for s in speakers if re.search(rf"(?<!\w){re.escape(s.lower())}(?!\w)", lowered)}


@dataclass(frozen=True)
class Understanding:
    """What a question's time, people and form do to one memory's fused score, and why."""

    bonus: float = 0.0
    cap: float | None = None  # the most the fused score may be, bonus included
    reason: str = ""

    def apply(self, fused: float) -> float:
        total = fused + self.bonus
        return total if self.cap is None else min(total, self.cap)


def adjustments(
    question: str,
    records: Iterable[MemoryRecord],
    span: Span | None = None,
    linked: Mapping[str, str] | None = None,
    fused: Mapping[str, float] | None = None,
    answered: Mapping[str, str] | None = None,
) -> dict[str, Understanding]:
    """Per memory id, what the question's time, people and form (and a link from a first hit, with
    ``linked``: memory id -> how it was reached; ``answered``: the replies that took an asking
    turn's evidence, services/replies.py) do to its fused score, with the reasons. A question
    that asks about a time and nothing else lifts every memory of that time above all the others
    (``fused``, the scores before understanding, says by how much), keeping their own order."""
    records = list(records)
    time_bonus = TIME_BONUS + _time_alone(question, records, span, fused or {})
    said = {r.id: speaker(r) for r in records}
    named = named_people(question, {s for s in said.values() if s})
    asking = is_question(question)
    out: dict[str, Understanding] = {}

    def add(record: MemoryRecord, amount: float, reason: str, cap: float | None = None) -> None:
        was = out.get(record.id, Understanding())
        out[record.id] = Understanding(
            was.bonus + amount, cap if cap is not None else was.cap, f"{was.reason}; {reason}" if was.reason else reason
        )

    for record in records:
        who = said[record.id]
        if span is not None and span.holds(record.occurred_at):
            # without an occurred_at of its own a memory is dated when it was said, and says so
            verb = "happened" if abs(record.occurred_at - record.created_at) > DATED_SECONDS else "said"
            add(record, time_bonus, f"{verb} {span.said}")
        if named and (who in named if who else any(_mentions(record.content, n) for n in named)):
            add(record, PERSON_BONUS, f"said by {who}" if who else "about " + ", ".join(sorted(named)))
        if asking:
            form = asks(body(record, who))
            if form == "only":
                add(record, 0.0, ASKS_ONLY, cap=0.0)
            elif form == "ends":
                add(record, -ENDS_ASKING_PENALTY, ENDS_ASKING)
        if answered and record.id in answered:
            add(record, 0.0, ANSWERS)
        if linked and record.id in linked:
            add(record, LINK_BONUS, linked[record.id])
    return out


def _time_alone(question: str, records: list[MemoryRecord], span: Span | None, fused: Mapping[str, float]) -> float:
    """What lifts the weakest memory of the time a question asks about (and nothing else) to the best
    candidate's score, beyond TIME_BONUS; 0 for any other question."""
    if span is None or not fused or not asks_only_when(question, span):
        return 0.0
    inside = [fused[r.id] for r in records if r.id in fused and span.holds(r.occurred_at)]
    return max(0.0, max(fused.values()) - min(inside)) if inside else 0.0


def asks(text: str) -> str | None:
    """ "only" for a text that only asks, "ends" for one that says something and then asks, else None."""
    sentences = [part for part in _SENTENCE_END.split(text.strip()) if part.strip()]
    if not sentences or not _ASKS.search(sentences[-1]):
        return None
    return "only" if all(_ASKS.search(part) for part in sentences) else "ends"


def asking_part(text: str) -> str:
    """The questions ``text`` ends with: of "Been busy with the store. Any tips?" the "Any tips?"."""
    sentences = [part for part in _SENTENCE_END.split(text.strip()) if part.strip()]
    start = len(sentences)
    while start > 0 and _ASKS.search(sentences[start - 1]):
        start -= 1
    return " ".join(sentences[start:])


def _mentions(text: str, name: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(name.lower())}(?!\w)", text.lower()) is not None
