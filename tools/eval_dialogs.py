"""LoCoMo turn-level retrieval through a real `mcp-memory serve`, beside the same-run bm25s baseline.

Protocol (DESIGN.md sections 9 and 10): one fresh store per conversation, every turn one memory
stored with ``remember(memories=[...])`` in batches of at most 100; each question is asked with
``recall(query, k=10, reinforce=false)``. A merged turn maps to the memory it merged into, so a hit
on that memory counts for every dia_id mapped to it.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import after_maintain
import bm25s
from dialog_set import Conversation, Question, recall_at, session_hit
from mcpclient import MemoryClient, ServerSpec, Stopwatch, open_server
from strength_curve import StrengthLog

BATCH = 100
# The largest k whose candidate depth (max(recall.candidates, 3k)) equals k=10's, so its first 10 are k=10's.
DIAGNOSTIC_K = 33


@dataclass(frozen=True)
class QuestionScore:
    question: Question
    ours: dict[int, float]  # k -> R@k through MCP, as served
    bm25: dict[int, float]
    fused_only: dict[int, float]  # the top 33 re-sorted by the fused relevance R alone (diagnostic)
    # --after-maintain: horizon -> credit mode -> k -> R@k, asked again after `maintain --as-of`
    after: dict[str, dict[str, dict[int, float]]] = field(default_factory=dict)
    previous: dict[int, float] | None = None  # R@k of the baseline release, same run (--baseline)
    session: dict[int, float] = field(default_factory=dict)  # k -> 1.0 when a top-k hit is of a gold turn's session


@dataclass
class StoreLog:
    outcomes: Counter[str] = field(default_factory=Counter)
    omitted_for_budget: int = 0
    top10_mismatch: int = 0  # k=10 call vs the first 10 of the k=33 call
    floor_cut: int = 0  # questions with a gold turn in the unfloored top 10 that the served list lost
    seconds_remember: float = 0.0
    seconds_recall: float = 0.0
    merged_examples: list[tuple[str, str]] = field(default_factory=list)
    horizons: dict[str, list[after_maintain.Horizon]] = field(default_factory=dict)  # conversation -> passes
    strength: StrengthLog = field(default_factory=StrengthLog)  # category 5 absent, 1-4 answered


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


async def _store(
    client: MemoryClient, conv: Conversation, log: StoreLog, session_ids: bool = False
) -> dict[str, set[str]]:
    """Remember every turn; returns memory id -> the dia_ids it stands for.

    With ``session_ids`` each turn carries its LoCoMo session as ``session_id`` (``conv-26:D8``),
    so the lifecycle groups (and summarizes) per session instead of per client connection."""
    by_memory: dict[str, set[str]] = {}
    first_text: dict[str, str] = {}
    for start in range(0, len(conv.turns), BATCH):
        batch = conv.turns[start : start + BATCH]
        items: list[dict[str, Any]] = [
            {"content": t.content, "occurred_at": t.occurred_at.isoformat(), "metadata": {"dia_id": t.dia_id}}
            for t in batch
        ]
        if session_ids:
            for item, t in zip(items, batch, strict=True):
                item["session_id"] = f"{conv.sample_id}:{t.dia_id.split(':')[0]}"
        with Stopwatch() as sw:
            results = await client.remember(items)
        log.seconds_remember += sw.seconds
        for turn, result in zip(batch, results, strict=True):
            log.outcomes[str(result["outcome"])] += 1
            memory_id = result.get("id")
            if memory_id is None:
                continue
            by_memory.setdefault(memory_id, set()).add(turn.dia_id)
            if result["outcome"] == "stored":
                first_text[memory_id] = turn.content
            elif len(log.merged_examples) < 5:
                log.merged_examples.append((turn.content, first_text.get(memory_id, "?")))
    return by_memory


def _ranked(hits: Sequence[dict[str, Any]], by_memory: dict[str, set[str]]) -> list[set[str]]:
    return [by_memory.get(str(hit["id"]), set()) for hit in hits]


# served R@k, fused-only R@k, after maintain, served session hit@k
Ours = tuple[dict[int, float], dict[int, float], dict[str, dict[str, dict[int, float]]], dict[int, float]]


async def run_ours(
    conv: Conversation,
    work: Path,
    budget_tokens: int,
    log: StoreLog,
    server_env: dict[str, str],
    after: bool = False,
    session_ids: bool = False,
    source: Path | None = None,
) -> list[Ours]:
    """Per question, in order: R@k as served, R@k of the top 33 re-sorted by relevance alone, and
    with ``after`` R@k after each `maintain --as-of` horizon (after_maintain.py). With ``source``
    (an earlier release's package) only the served R@k is measured."""
    spec = ServerSpec(
        data_dir=Path(tempfile.mkdtemp(prefix=f"{conv.sample_id}-", dir=work)),
        principal=conv.sample_id,
        extra_env=server_env,
        source=source,
    )
    out: list[Ours] = []
    async with open_server(spec) as client:
        by_memory = await _store(client, conv, log, session_ids)
        loaded_at = time.time()
        for question in conv.questions:
            with Stopwatch() as sw:
                served = await client.recall(question.text, k=10, budget_tokens=budget_tokens)
            ranked = _ranked(served["hits"], by_memory)
            served_at = {k: recall_at(ranked, question.evidence, k) for k in (5, 10)}
            sessions = {k: session_hit(ranked, question.evidence, k) for k in (5, 10)}
            if source is not None:
                out.append((served_at, served_at, {}, sessions))
                continue
            log.seconds_recall += sw.seconds
            log.omitted_for_budget += int(served["omitted_for_budget"])
            if served.get("below_floor"):
                unfloored = _ranked(
                    (await client.recall(question.text, k=10, budget_tokens=budget_tokens, floor=False))["hits"],
                    by_memory,
                )
                lost = set().union(*unfloored) - set().union(*ranked) if unfloored else set()
                log.floor_cut += bool(lost & set(question.evidence))
            deep = await client.recall(question.text, k=DIAGNOSTIC_K, budget_tokens=budget_tokens, explain=True)
            top = [str(h["id"]) for h in served["hits"]]
            if top != [str(h["id"]) for h in deep["hits"][:10]]:
                log.top10_mismatch += 1
            first = recall_at(ranked, question.evidence, 1) > 0
            log.strength.add(deep["hits"], str(served.get("strength")), absent=question.category == 5, gold_first=first)
            by_relevance = sorted(deep["hits"], key=lambda h: -float(h["signals"]["relevance"]))
            fused = _ranked(by_relevance, by_memory)
            out.append((served_at, {k: recall_at(fused, question.evidence, k) for k in (5, 10)}, {}, sessions))
        if after:
            credit = after_maintain.Credit(by_memory, {t.dia_id: t.content for t in conv.turns})
            queries = [q.text for q in conv.questions]
            horizons = await after_maintain.run(
                client, spec, queries, credit, budget_tokens, loaded_at, f"locomo {conv.sample_id}"
            )
            log.horizons[conv.sample_id] = horizons
            for i, question in enumerate(conv.questions):
                for h in horizons:
                    out[i][2][h.name] = {
                        mode: {k: recall_at(h.ranked[mode][i], question.evidence, k) for k in (5, 10)}
                        for mode in after_maintain.MODES
                    }
    return out


def run_bm25(conv: Conversation) -> list[dict[int, float]]:
    """The baseline of DESIGN.md section 9: bm25s, English stopwords, the same memory text."""
    corpus = [t.content for t in conv.turns]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(corpus, stopwords="en", show_progress=False), show_progress=False)
    texts = [q.text for q in conv.questions]
    tokens = bm25s.tokenize(texts, stopwords="en", return_ids=False, show_progress=False)
    docs, _ = retriever.retrieve(tokens, k=10, show_progress=False)
    out: list[dict[int, float]] = []
    for question, row in zip(conv.questions, docs, strict=True):
        ranked = [{conv.turns[int(i)].dia_id} for i in row]
        out.append({k: recall_at(ranked, question.evidence, k) for k in (5, 10)})
    return out


async def evaluate(
    conversations: Sequence[Conversation],
    work: Path,
    budget_tokens: int,
    server_env: dict[str, str],
    after: bool = False,
    session_ids: bool = False,
    baseline: Path | None = None,
) -> tuple[list[QuestionScore], StoreLog]:
    log = StoreLog()
    scores: list[QuestionScore] = []
    for conv in conversations:
        _progress(f"locomo {conv.sample_id}: {len(conv.turns)} turns, {len(conv.questions)} questions")
        ours = await run_ours(conv, work, budget_tokens, log, server_env, after, session_ids)
        previous: list[dict[int, float] | None] = [None] * len(conv.questions)
        if baseline is not None:
            _progress(f"locomo {conv.sample_id}: the baseline release")
            earlier = await run_ours(
                conv, work, budget_tokens, StoreLog(), server_env, session_ids=session_ids, source=baseline
            )
            previous = [served for served, _, _, _ in earlier]
        bm25 = run_bm25(conv)
        for question, (served, fused, later, session), theirs, before in zip(
            conv.questions, ours, bm25, previous, strict=True
        ):
            scores.append(QuestionScore(question, served, theirs, fused, later, before, session))
    return scores, log
