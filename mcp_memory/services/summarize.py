"""Deterministic (extractive) summaries and the fact check every summary must pass.

Without an LLM a summary is made of the sources' own sentences, so it stays in their language
and never invents anything. It picks, within ``MAX_RATIO`` of the sources' tokens, the sentences
that keep the most of the sources' facts and identifiers per token; acknowledgements go.

The fact check every summary must pass (the LLM's too): nothing the sources do not say (no new
identifier, no sentence mostly of other words), at most ``MAX_RATIO`` of the tokens, at least
``MIN_COVERAGE`` of the sources' identifiers, and at least ``MIN_COVERAGE`` of a sample of their
facts. A fact is a sentence that says something (not an acknowledgement, two content words
or more); it is kept when ``FACT_TERMS_KEPT`` of its content words are in the summary. Sources in
which every sentence is a different fact cannot be cut to 30% and keep 85% of them, so they are
not summarized (and become compression-resistant): a summary replaces what repeats, acknowledges
or restates, never what would be lost.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mcp_memory.core.text import estimate_tokens, identifiers, keyword_terms
from mcp_memory.services import rules

MAX_RATIO = 0.30
MIN_COVERAGE = 0.85
MAX_FAILURES = 3  # a memory whose summaries fail (or are undone) this often is compression-resistant
FACT_SAMPLE = 32  # facts the check samples per summary (deterministically)
FACT_TERMS_KEPT = 0.6  # a fact is kept when this share of its content words is in the summary
# A sentence ends at . ! ? followed by a space (not inside tools/deploy.sh or v2.4.1), or at 。！？.
_BOUNDARY = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n+")


@dataclass(frozen=True)
class Summary:
    text: str
    tokens: int
    source_tokens: int
    coverage: float
    fact_coverage: float = 1.0


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _BOUNDARY.split(text) if s.strip()]


_SUFFIX = re.compile(r"(?<=[a-z]{3})(?:ing|ed|es|s)$")


def _terms(text: str) -> frozenset[str]:
    """Content words, lightly stemmed (runs, running -> run), CJK as bigrams."""
    return frozenset(_SUFFIX.sub("", term) if term.isalpha() else term for term in keyword_terms(text))


def facts(sources: Sequence[str]) -> list[str]:
    """The sentences of the sources that say something, each once, in order."""
    seen: dict[str, None] = {}
    for text in sources:
        for sentence in _sentences(text):
            if not rules.is_acknowledgement(sentence) and len(_terms(sentence)) >= 2:
                seen.setdefault(sentence, None)
    return list(seen)


def sampled_facts(sources: Sequence[str]) -> list[str]:
    """Up to FACT_SAMPLE facts, chosen by a hash of their text: the same sources, the same sample."""
    return sorted(facts(sources), key=lambda f: hashlib.sha256(f.encode()).digest())[:FACT_SAMPLE]


def _kept(fact_terms: frozenset[str], sentence_terms: frozenset[str] | set[str]) -> float:
    """How far one sentence keeps a fact, 0..1 (1: at least FACT_TERMS_KEPT of its words)."""
    return min(1.0, len(fact_terms & sentence_terms) / (FACT_TERMS_KEPT * len(fact_terms)))


def grounded(statement: str, source: str) -> bool:
    """The statement is made of the source's words: FACT_TERMS_KEPT of its content words are there."""
    terms = _terms(statement)
    return bool(terms) and _kept(terms, _terms(source)) >= 1.0


def coverage(sources: Sequence[str], summary: str) -> float:
    """The share of the sources' identifiers that the summary keeps (1.0 when they have none)."""
    wanted: set[str] = set().union(*(identifiers(s) for s in sources)) if sources else set()
    if not wanted:
        return 1.0
    return len(wanted & identifiers(summary)) / len(wanted)


def fact_coverage(sources: Sequence[str], summary: str) -> float:
    """The share of the sampled facts that one sentence of the summary keeps (1.0 when the sources
    state none). Per sentence, not over the whole summary: a long summary's vocabulary would
    otherwise "keep" any fact made of common words."""
    sample = sampled_facts(sources)
    if not sample:
        return 1.0
    parts = [_terms(p) for p in _sentences(summary)] or [frozenset()]
    return sum(max(_kept(_terms(f), p) for p in parts) >= 1.0 for f in sample) / len(sample)


def measure(sources: Sequence[str], text: str) -> Summary:
    """A candidate summary with its size and both coverages, ready for `check`."""
    return Summary(
        text=text,
        tokens=estimate_tokens(text) if text else 0,
        source_tokens=sum(estimate_tokens(s) for s in sources),
        coverage=coverage(sources, text),
        fact_coverage=fact_coverage(sources, text),
    )


def extractive(sources: Sequence[str]) -> Summary:
    """Sentences of ``sources`` in their original order, within MAX_RATIO of their tokens, chosen
    for the facts and identifiers they keep per token.

    Budgeted coverage, solved the usual way: greedy by gain per token, greedy by gain alone, and
    greedy started from each of the few sentences that keep the most on their own (a long
    sentence that says everything can lose to short ones on the ratio, and short ones with a
    little gain can use up the budget a needed long one wants); the best of these summaries wins. A sentence only
    changes the facts that share a word with it, which keeps each step cheap.
    """
    budget = int(sum(estimate_tokens(s) for s in sources) * MAX_RATIO)
    sentences = facts(sources)
    cover = _Coverage(sources, sentences, budget)
    fitting = [i for i in range(len(sentences)) if cover.info[i][2] <= budget]
    seeds = sorted(fitting, key=lambda i: -cover.alone(i))[:3]
    options = [cover.grow([]), cover.grow([], by_ratio=False), *(cover.grow([i]) for i in seeds)]
    _, chosen = max(options, key=lambda option: option[0])
    return measure(sources, " ".join(sentences[i] for i in sorted(chosen)))


class _Coverage:
    """The facts of the sources, the identifiers they name, and how far each sentence keeps them."""

    def __init__(self, sources: Sequence[str], sentences: list[str], budget: int) -> None:
        self.budget = budget
        self.stated = [_terms(f) for f in sentences]
        wanted: set[str] = set().union(*(identifiers(s) for s in sources)) if sources else set()
        self.id_weight = max(len(self.stated), 1) / max(len(wanted), 1)  # facts and identifiers weigh alike
        self.info = [(_terms(x), identifiers(x) & wanted, estimate_tokens(x)) for x in sentences]
        facts_with: dict[str, set[int]] = {}
        for index, terms in enumerate(self.stated):
            for term in terms:
                facts_with.setdefault(term, set()).add(index)
        # How far sentence i keeps each fact it shares a word with.
        self.keeps = [
            {f: _kept(self.stated[f], terms) for f in set().union(*(facts_with.get(t, set()) for t in terms))}
            for terms, _, _ in self.info
        ]

    def alone(self, i: int) -> float:
        return sum(self.keeps[i].values()) + self.id_weight * len(self.info[i][1])

    def grow(self, seed: list[int], by_ratio: bool = True) -> tuple[float, list[int]]:
        """Sentences picked greedily (``seed`` first) while they fit the budget: (gain, picked)."""
        kept = [0.0] * len(self.stated)
        ids: set[str] = set()
        total = 0.0
        picked: list[int] = []
        used = 0
        candidates = list(seed)

        def gain(i: int) -> float:
            more = sum(max(0.0, k - kept[f]) for f, k in self.keeps[i].items())
            return more + self.id_weight * len(self.info[i][1] - ids)

        while True:
            choice = candidates.pop() if candidates else self._best(gain, picked, used, by_ratio)
            if choice is None:
                return total, picked
            total += gain(choice)
            for f, k in self.keeps[choice].items():
                kept[f] = max(kept[f], k)
            ids |= self.info[choice][1]
            picked.append(choice)
            used += self.info[choice][2]

    def _best(self, gain: Callable[[int], float], picked: list[int], used: int, by_ratio: bool) -> int | None:
        best: tuple[float, int] | None = None
        for i in range(len(self.info)):
            if i in picked or used + self.info[i][2] > self.budget:
                continue
            ratio = gain(i) / max(self.info[i][2], 1) if by_ratio else gain(i)
            if ratio > 1e-9 and (best is None or ratio > best[0]):
                best = (ratio, i)
        return None if best is None else best[1]


def invented(sources: Sequence[str], summary: str) -> str | None:
    """What the summary says that its sources do not: an identifier none of them has, or a
    sentence most of whose words are not theirs (an LLM adding a fact). None when it has none."""
    known: set[str] = set().union(*(identifiers(s) for s in sources)) if sources else set()
    new = sorted(identifiers(summary) - known)
    if new:
        return f"the summary names {new[0]!r}, which no source has"
    words = frozenset().union(*(_terms(s) for s in sources)) if sources else frozenset()
    for sentence in _sentences(summary):
        terms = _terms(sentence)
        if len(terms) >= 2 and _kept(terms, words) < 1.0:
            return f"the summary says what its sources do not: {sentence[:80]!r}"
    return None


def check(sources: Sequence[str], summary: Summary) -> str | None:
    """Why the summary must be rolled back, or None when it passes."""
    if not summary.text:
        return "the summary is empty"
    made_up = invented(sources, summary.text)
    if made_up is not None:
        return made_up
    if summary.tokens > summary.source_tokens * MAX_RATIO:
        return f"the summary is {summary.tokens} tokens, over {MAX_RATIO:.0%} of its sources' {summary.source_tokens}"
    if summary.coverage < MIN_COVERAGE:
        return f"the summary keeps {summary.coverage:.0%} of the sources' identifiers, under {MIN_COVERAGE:.0%}"
    if summary.fact_coverage < MIN_COVERAGE:
        return f"the summary keeps {summary.fact_coverage:.0%} of the sampled facts, under {MIN_COVERAGE:.0%}"
    return None
