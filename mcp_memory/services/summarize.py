"""Deterministic (extractive) summaries and the fact check every summary must pass.

Without an LLM a summary is made of the sources' own sentences, so it stays in their language
and never invents anything. Sentences that carry identifiers (paths, numbers, names, versions,
dates), decisions, preferences and explicit instructions are kept first; acknowledgements go.
A summary is at most ``MAX_RATIO`` of its sources' tokens, and the fact check requires at least
``MIN_COVERAGE`` of the sources' identifiers to be in it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from mcp_memory.services import rules
from mcp_memory.text import estimate_tokens, identifiers

MAX_RATIO = 0.30
MIN_COVERAGE = 0.85
MAX_FAILURES = 3  # a memory whose summaries fail (or are undone) this often is compression-resistant
# A sentence ends at . ! ? followed by a space (not inside tools/deploy.sh or v2.4.1), or at 。！？.
_BOUNDARY = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n+")


@dataclass(frozen=True)
class Summary:
    text: str
    tokens: int
    source_tokens: int
    coverage: float


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _BOUNDARY.split(text) if s.strip()]


def _weight(sentence: str) -> float:
    score = 3.0 * len(identifiers(sentence))
    if rules.estimate_importance(sentence, "fact") > 0.55:
        score += 2.0
    return score


def coverage(sources: Sequence[str], summary: str) -> float:
    """The share of the sources' identifiers that the summary keeps (1.0 when they have none)."""
    wanted: set[str] = set().union(*(identifiers(s) for s in sources)) if sources else set()
    if not wanted:
        return 1.0
    return len(wanted & identifiers(summary)) / len(wanted)


def extractive(sources: Sequence[str]) -> Summary:
    """The best sentences of ``sources`` in their original order, within MAX_RATIO of their tokens."""
    source_tokens = sum(estimate_tokens(s) for s in sources)
    budget = int(source_tokens * MAX_RATIO)
    candidates: list[tuple[float, int, str]] = []
    seen: set[str] = set()
    for position, sentence in enumerate(s for text in sources for s in _sentences(text)):
        key = sentence.lower()
        if key in seen or rules.is_throwaway(sentence):
            continue
        seen.add(key)
        candidates.append((_weight(sentence), position, sentence))
    chosen: list[tuple[int, str]] = []
    used = 0
    for weight, position, sentence in sorted(candidates, key=lambda c: (-c[0], c[1])):
        cost = estimate_tokens(sentence)
        if weight <= 0 and chosen:
            break  # nothing worth its tokens is left
        if used + cost <= budget:
            chosen.append((position, sentence))
            used += cost
    text = " ".join(sentence for _, sentence in sorted(chosen))
    return Summary(
        text=text,
        tokens=estimate_tokens(text) if text else 0,
        source_tokens=source_tokens,
        coverage=coverage(sources, text),
    )


def check(sources: Sequence[str], summary: Summary) -> str | None:
    """Why the summary must be rolled back, or None when it passes."""
    if not summary.text:
        return "the summary is empty"
    if summary.tokens > summary.source_tokens * MAX_RATIO:
        return f"the summary is {summary.tokens} tokens, over {MAX_RATIO:.0%} of its sources' {summary.source_tokens}"
    if summary.coverage < MIN_COVERAGE:
        return f"the summary keeps {summary.coverage:.0%} of the sources' identifiers, under {MIN_COVERAGE:.0%}"
    return None
