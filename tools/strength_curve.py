"""Recall's strength on the dev sets: how many questions about something absent recall calls weak,
against how many answered questions (the gold first) it calls strong, as the bar moves.

Each answer's margin is its best hit's (``services.strength.margin``: 1 at the bar recall serves,
the lesser of its own evidence over 3 and its fused evidence over 2, every evaluation store holding
ten memories or more); the answer is strong at bar ``t`` when that margin reaches ``t``. The served
verdict (``strength`` in recall's answer) is the row at 1.0. Absent questions: LoCoMo's category 5
(adversarial: the evidence is about the other speaker, the asked one never said it) and the
agentstore questions asked of a store without that attribute.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from stats import markdown_table

from mcp_memory.services.strength import STORE_STATS_MIN, margin

BARS = (0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5)


@dataclass
class StrengthLog:
    """Per answered or absent question: the answer's margin, and what recall served."""

    answered: list[tuple[float, str]] = field(default_factory=list)  # gold ranked first
    absent: list[tuple[float, str]] = field(default_factory=list)

    def add(self, hits: Sequence[dict[str, Any]], served: str, *, absent: bool, gold_first: bool) -> None:
        if absent:
            self.absent.append((answer_margin(hits), served))
        elif gold_first:
            self.answered.append((answer_margin(hits), served))


def answer_margin(hits: Sequence[dict[str, Any]]) -> float:
    """The best margin among the first ten hits (recall with explain=true)."""
    return max(
        (
            margin(float(h["signals"].get("evidence") or 0.0), float(h["signals"]["fused"]), STORE_STATS_MIN)
            for h in hits[:10]
        ),
        default=0.0,
    )


def table(name: str, log: StrengthLog) -> str:
    """The curve: per bar, the share of absent questions called weak and of answered ones called strong."""
    rows: list[list[object]] = []
    for bar in BARS:
        weak = sum(m < bar for m, _ in log.absent)
        strong = sum(m >= bar for m, _ in log.answered)
        rows.append(
            [f"{bar:.2f}" + (" (served)" if bar == 1.0 else ""), _share(weak, log.absent), _share(strong, log.answered)]
        )
    served_weak = sum(s == "weak" for _, s in log.absent)
    served_strong = sum(s == "strong" for _, s in log.answered)
    rows.append(["as served (`strength`)", _share(served_weak, log.absent), _share(served_strong, log.answered)])
    head = [
        "bar (margin)",
        f"absent called weak (n={len(log.absent)})",
        f"answered called strong (n={len(log.answered)})",
    ]
    return f"### Strength, {name}\n\n" + markdown_table(head, rows)


def _share(count: int, of: Sequence[object]) -> str:
    return f"{100 * count / len(of):.1f}% ({count})" if of else "-"
