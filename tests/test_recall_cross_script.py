"""A Chinese question about an English memory: the keyword side cannot read Chinese words in an
English memory, so its silence there is no evidence against it (issue 37, item 5; ADR 10)."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.client import Client

from tests.conftest import call

pytestmark = pytest.mark.anyio

ANSWER = "The user writes unit tests with Go's built-in testing package."
NEAR = "用户写代码用VS Code。"  # shares 代码 ("code") with the question, and is about the editor
STORE = [
    ANSWER,
    NEAR,
    "The user's dog is called Pixel.",
    "The user lives in Lisbon.",
    "User reports to Priya.",
    "The user's builds run in Jenkins.",
    "用户的生日是7月2日。",
    "用户每天早上六点起床跑步。",
    "用户喜欢喝乌龙茶，不加糖。",
    "用户的另一半是由纪。",
]
QUESTION = "给用户的代码补用例该用什么工具？"  # what tool to add test cases to the user's code with


async def _hits(client: Client, question: str) -> list[dict[str, Any]]:
    result = await call(client, "recall", {"query": question, "reinforce": False, "explain": True})
    return list(result["hits"])


async def test_english_memories_are_not_judged_by_chinese_words_they_cannot_hold(client: Client) -> None:
    await call(client, "remember", {"memories": [{"content": t} for t in STORE]})
    hits = await _hits(client, QUESTION)
    by_text = {h["text"]: h["signals"] for h in hits}
    near = by_text[NEAR]
    assert near.get("keyword_evidence", 0) > 0  # 代码 matched: the Chinese candidates have keyword evidence
    added = []
    for text, signals in by_text.items():
        if text.isascii():  # an English candidate: no word of the question can be in it
            assert signals.get("keyword_evidence") is None
            added.append(signals["fused"] - (signals.get("dense_z") or 0.0) - (signals.get("second_opinion") or 0.0))
    # each got the same: the Chinese candidates' mean keyword evidence, in standard deviations
    assert len(added) >= 2
    assert min(added) > 0.05, added
    assert max(added) - min(added) < 0.01, added
    assert ANSWER in [h["text"] for h in hits[:3]]


async def test_a_question_with_a_latin_word_is_read_as_it_is(client: Client) -> None:
    """ "IDE" can be in an English memory: the keyword side could have matched it, and nothing is added."""
    await call(client, "remember", {"memories": [{"content": t} for t in STORE]})
    for signals in [h["signals"] for h in await _hits(client, "用户的代码用什么IDE写？") if h["text"].isascii()]:
        mine = (
            (signals.get("dense_z") or 0.0)
            + (signals.get("second_opinion") or 0.0)
            + 2 * (signals.get("keyword_evidence") or 0)
        )
        assert signals["fused"] == pytest.approx(mine, abs=0.01)


async def test_in_a_tiny_store_the_one_chinese_answer_lends_its_evidence_to_no_english_memory(client: Client) -> None:
    """A review's 4-memory store: the only Chinese memory answers the question, so the Chinese
    candidates' mean keyword evidence was that answer's own, and every English memory got it; the
    important preference, sharing nothing with the question, then came first by its importance."""
    answer = "用户每天早上六点起床"
    tiny = [
        {"content": "The user prefers dark mode in every app", "kind": "preference"},
        {"content": answer},
        {"content": "The user's cat is named Biscuit"},
        {"content": "The user works at Acme as a backend engineer"},
    ]
    await call(client, "remember", {"memories": tiny})
    hits = await _hits(client, "用户每天几点起床？")
    assert hits[0]["text"] == answer, "\n".join(f"{h['text']} {h['signals']}" for h in hits)
    by_text = {h["text"]: h["signals"] for h in hits}
    lent = [
        s["fused"] - (s.get("dense_z") or 0.0) - (s.get("second_opinion") or 0.0)
        for t, s in by_text.items()
        if t.isascii()
    ]
    # an average of one memory is mostly the prior's (no word shared): each English memory gets well
    # under a quarter of what the answer's own words earn it (keyword_weight 2 per unit)
    assert max(lent) < 2 * by_text[answer]["keyword_evidence"] / 4, lent


async def test_the_words_every_chinese_memory_shares_are_lent_in_full(client: Client) -> None:
    """What "用户" gives every Chinese memory, an English memory holds in meaning ("the user"): the
    shrinking of the lent average (for a store with few Chinese memories) stops at that level."""
    more = ["The user's laptop is a ThinkPad.", "The user plays chess on Sundays."]
    await call(client, "remember", {"memories": [{"content": t} for t in [*STORE, *more]]})
    asked = {"query": "用户住在哪个城市？", "k": 20, "floor": False, "reinforce": False, "explain": True}
    hits = (await call(client, "recall", asked))["hits"]  # which city the user lives in: Lisbon
    chinese = [h["signals"].get("keyword_evidence") or 0.0 for h in hits if not h["text"].isascii()]
    assert len(chinese) == 5
    assert min(chinese) > 0.01, chinese  # 用户, in 5 of 12 memories, is worth a little to each
    for signals in [h["signals"] for h in hits if h["text"].isascii()]:
        lent = signals["fused"] - (signals.get("dense_z") or 0.0) - (signals.get("second_opinion") or 0.0)
        assert lent >= 2 * min(chinese) - 0.01, (lent, chinese)
