"""The optional LLM stage of recall: the model reorders the first candidates (ADR 10).

Off unless ``recall.llm_rerank`` is true and an LLM is configured. It runs after the ranking
without an LLM and only reorders what that ranking found: it never adds a memory and never drops
one (a memory the model leaves out keeps its place after the ones it ranked). It goes through the
lifecycle's ``LlmClient`` (redaction, the per-principal budget, retries, the breaker), and is cut
off at ``recall.llm_timeout_seconds``: a timeout, an error, a spent budget or an answer that is not
a ranking all return the ranking without the LLM, and the hits say so in ``note``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TypeVar

import anyio

from mcp_memory.errors import UpstreamError
from mcp_memory.llm.client import LlmClient
from mcp_memory.models import MemoryRecord, to_datetime
from mcp_memory.templates import template

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
