"""The optional LLM stage of recall (ADR 10): the model splits the question into a few sub-queries
searched beside it, and reorders the first candidates.

Each part is off unless its setting is true (``recall.llm_rewrite``, ``recall.llm_rerank``) and an
LLM is configured. Sub-queries only widen the search: the question itself is always searched, and a
memory counts as relevant as the best of the queries finds it. The rerank runs after the ranking
without an LLM and only reorders what that ranking found: it never adds a memory and never drops
one (a memory the model leaves out keeps its place after the ones it ranked). Both go through the
lifecycle's ``LlmClient`` (redaction, the per-principal budget, retries, the breaker), and together
they wait at most ``recall.llm_timeout_seconds``: the rerank has what the sub-queries left. A
timeout, an error, a spent budget or an answer of the wrong shape leaves recall as it is without
that part, and the hits say so in ``note``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TypeVar

import anyio

from mcp_memory.config import RecallSettings
from mcp_memory.core.errors import UpstreamError
from mcp_memory.core.models import MemoryRecord, to_datetime
from mcp_memory.core.prompt_files import template
from mcp_memory.llm.client import LlmClient

log = logging.getLogger(__name__)

_Hit = TypeVar("_Hit", bound=tuple[float, MemoryRecord, object])


def prompt(question: str, records: Sequence[MemoryRecord]) -> str:
    lines = []
    for i, record in enumerate(records, start=1):
        when = to_datetime(record.occurred_at)
        # one line a memory: its own line breaks cannot pose as the next numbered memory
        text = " ".join(record.content.split())
        lines.append(f"{i}. ({when:%Y-%m-%d}) {text}")
    return template("rerank").format(question=" ".join(question.split()), memories="\n".join(lines))


def apply(scored: list[_Hit], ranking: object, count: int) -> list[_Hit] | None:
    """``scored`` with its first ``count`` reordered by the model's ``ranking`` (1-based numbers), or
    None when the answer is no ranking at all."""
    if not isinstance(ranking, list):
        return None
    picked: list[int] = []
    for item in ranking:
        if isinstance(item, bool) or not isinstance(item, int | str):
            continue
        try:
            number = int(item)
        except ValueError:
            continue
        if 1 <= number <= count and number - 1 not in picked:
            picked.append(number - 1)
    if not picked:
        return None
    head = [scored[i] for i in picked] + [hit for i, hit in enumerate(scored[:count]) if i not in picked]
    return head + scored[count:]


async def rerank(
    llm: LlmClient, principal: str, question: str, scored: list[_Hit], count: int, cap_seconds: float
) -> tuple[list[_Hit], str | None]:
    """The candidates reordered by the model, or unchanged with the reason it was not used."""
    count = min(count, len(scored))
    if count < 2:
        return scored, None
    text = prompt(question, [hit[1] for hit in scored[:count]])
    answer = None
    with anyio.move_on_after(cap_seconds):
        try:
            answer = await llm.complete_json(principal, text)
        except UpstreamError as exc:  # includes a paused LLM (budget, breaker)
            log.warning("recall's LLM rerank failed; the ranking without it stands: %s", exc)
            return scored, f"the LLM rerank was skipped ({exc}); this is the ranking without it"
    if answer is None:
        log.warning("recall's LLM rerank took longer than %.1f s; the ranking without it stands", cap_seconds)
        return scored, f"the LLM rerank took longer than {cap_seconds:g} s; this is the ranking without it"
    reordered = apply(scored, answer.get("ranking"), count)
    if reordered is None:
        return scored, "the LLM rerank answered no usable ranking; this is the ranking without it"
    return reordered, None


MAX_SUB_QUERY_CHARS = 300


def sub_queries(answer: object, question: str, count: int) -> list[str] | None:
    """The model's sub-queries (at most ``count``, none the question again), or None when the answer
    holds none."""
    if not isinstance(answer, list):
        return None
    seen = {" ".join(question.split()).casefold()}
    found: list[str] = []
    for item in answer:
        text = " ".join(item.split())[:MAX_SUB_QUERY_CHARS] if isinstance(item, str) else ""
        if text and text.casefold() not in seen:
            seen.add(text.casefold())
            found.append(text)
    return found[:count] or None


class LlmStage:
    """Recall's optional LLM parts for one service, each cut off so that both together wait no
    longer than the cap."""

    def __init__(self, llm: LlmClient | None, config: RecallSettings) -> None:
        self.llm = llm
        self.config = config

    async def rewrite(self, principal: str, question: str) -> tuple[list[str], float, str | None]:
        """(sub-queries to search beside the question, seconds of the cap left, a note when the
        model was asked and its answer not used)."""
        cap = self.config.llm_timeout_seconds
        if self.llm is None or not self.config.llm_rewrite:
            return [], cap, None
        started = time.monotonic()
        text = template("rewrite").format(question=" ".join(question.split()), count=self.config.llm_rewrite_queries)
        answer = None
        with anyio.move_on_after(cap):
            try:
                answer = await self.llm.complete_json(principal, text)
            except UpstreamError as exc:
                log.warning("recall's LLM sub-queries failed; the question is searched alone: %s", exc)
                return [], cap - (time.monotonic() - started), f"the LLM sub-queries were skipped ({exc})"
        left = cap - (time.monotonic() - started)
        if answer is None:
            log.warning("recall's LLM sub-queries took longer than %.1f s; the question is searched alone", cap)
            return [], left, f"the LLM sub-queries took longer than {cap:g} s; the question was searched alone"
        found = sub_queries(answer.get("queries"), question, self.config.llm_rewrite_queries)
        if found is None:
            return [], left, "the LLM answered no usable sub-queries; the question was searched alone"
        return found, left, None

    async def rerank(
        self, principal: str, question: str, scored: list[_Hit], left: float
    ) -> tuple[list[_Hit], str | None]:
        if self.llm is None or not self.config.llm_rerank:
            return scored, None
        if left <= 0:
            return (
                scored,
                "the LLM rerank had no time left within recall.llm_timeout_seconds; this is the ranking without it",
            )
        return await rerank(self.llm, principal, question, scored, self.config.llm_rerank_candidates, left)
