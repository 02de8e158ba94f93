"""LoCoMo, read in place from the shared data folder (CC BY-NC 4.0: never copied into the repository).

DESIGN.md section 10: every dialog turn is one memory, ``"Speaker: text"`` plus
``" [shares <blip_caption>]"`` for image turns, dated with its session's date, with the turn's
``dia_id`` in metadata. Malformed evidence strings are repaired where the turn exists.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")
_SESSION = re.compile(r"^session_(\d+)$")


@dataclass(frozen=True)
class Turn:
    dia_id: str
    content: str
    occurred_at: datetime


@dataclass(frozen=True)
class Question:
    conversation: str
    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]


@dataclass
class EvidenceLog:
    """What evidence repair did, for the report."""

    repaired: int = 0
    dropped_ids: int = 0
    no_evidence: int = 0


def session_date(text: str) -> datetime:
    """LoCoMo's ``"1:56 pm on 8 May, 2023"``, read as UTC."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def turn_text(turn: dict[str, Any]) -> str:
    text = f"{turn['speaker']}: {turn['text']}"
    caption = turn.get("blip_caption")
    if caption:
        text += f" [shares {caption}]"
    return text


def repair_evidence(raw: list[str], known: set[str], log: EvidenceLog) -> tuple[str, ...]:
    """``"D8:6; D9:17"`` -> D8:6, D9:17; ``"D:11:26"`` -> D11:26; ``"D30:05"`` -> D30:5; unknown ids dropped."""
    out: list[str] = []
    for item in raw:
        found = [f"D{int(a)}:{int(b)}" for a, b in _EVIDENCE.findall(str(item))]
        if found != [item]:
            log.repaired += 1
        for dia_id in found:
            if dia_id in known:
                if dia_id not in out:
                    out.append(dia_id)
            else:
                log.dropped_ids += 1
    return tuple(out)


def _turns(conversation: dict[str, Any]) -> list[Turn]:
    sessions = sorted(int(m.group(1)) for key in conversation if (m := _SESSION.match(key)))
    turns: list[Turn] = []
    for number in sessions:
        date = session_date(conversation[f"session_{number}_date_time"])
        turns.extend(Turn(t["dia_id"], turn_text(t), date) for t in conversation[f"session_{number}"])
    return turns


def load(data_dir: Path, log: EvidenceLog) -> list[Conversation]:
    samples = orjson.loads((data_dir / "locomo-dev.json").read_bytes())
    conversations: list[Conversation] = []
    for sample in samples:
        turns = _turns(sample["conversation"])
        known = {t.dia_id for t in turns}
        questions: list[Question] = []
        for qa in sample["qa"]:
            evidence = repair_evidence(list(qa.get("evidence") or []), known, log)
            if not evidence:
                log.no_evidence += 1
                continue
            questions.append(Question(sample["sample_id"], str(qa["question"]), int(qa["category"]), evidence))
        conversations.append(Conversation(sample["sample_id"], tuple(turns), tuple(questions)))
    return conversations


def session_hit(ranked_dia_ids: list[set[str]], gold: tuple[str, ...], k: int) -> float:
    """1.0 when one of the top k hits is a turn of a session a gold turn is in ("D8:6" is session D8)."""
    sessions = {d.split(":")[0] for ids in ranked_dia_ids[:k] for d in ids}
    return float(any(g.split(":")[0] in sessions for g in gold))


def recall_at(ranked_dia_ids: list[set[str]], gold: tuple[str, ...], k: int) -> float:
    """|gold dia_ids in the top k| / |gold|; one hit may stand for several dia_ids (merged turns)."""
    covered: set[str] = set()
    for ids in ranked_dia_ids[:k]:
        covered |= ids
    return len(covered.intersection(gold)) / len(gold)
