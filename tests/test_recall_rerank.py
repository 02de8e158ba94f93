"""The optional LLM stage of recall, through the real openai client against a local fake server:
a good ranking reorders, garbage and errors fall back, a slow model never makes recall wait past
its cap, and nothing is asked when the stage is off."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client

from mcp_memory.config import load_settings
from mcp_memory.mcp.server import open_server
from tests.conftest import Clock, call
from tests.fake_openai import FakeOpenAI, llm_table

pytestmark = pytest.mark.anyio

MEMORIES = [
    "The user drinks oolong tea without sugar",
    "The user keeps a bottle of sparkling water on the desk",
    "The user has a dog named Pixel",
    "The user is learning Japanese",
    "The user prefers dark mode in every app",
    "The user runs fish as the shell",
]
QUESTION = {"query": "What does the user drink?", "k": 3, "reinforce": False}


@asynccontextmanager
async def served(data_dir: Path, fake: FakeOpenAI, clock: Clock, **recall: Any) -> AsyncIterator[Client]:
    settings = load_settings(
        data_dir=data_dir,
        principal="alice",
        llm=llm_table(fake, timeout_seconds=5.0),
        recall={"llm_rerank": True, "llm_timeout_seconds": 1.0, **recall},
    )
    async with open_server(settings, clock=clock) as runtime, Client(runtime.mcp, mode="legacy") as client:
        await call(client, "remember", {"memories": [{"content": m} for m in MEMORIES]})
        yield client


async def _without_llm(client: Client, fake: FakeOpenAI) -> list[str]:
    """The order without the LLM: the stage is on, but the model answers no usable ranking."""
    fake.chat_script = [("json", {"ranking": []})]
    return [h["text"] for h in (await call(client, "recall", {**QUESTION, "k": 10, "floor": False}))["hits"]]


async def test_the_llm_reorders_the_first_candidates(data_dir: Path, fake_llm: FakeOpenAI, clock: Clock) -> None:
    async with served(data_dir, fake_llm, clock, llm_rerank_candidates=6) as client:
        before = await _without_llm(client, fake_llm)
        fake_llm.chat_script = [("json", {"ranking": [2, 1]})]  # the second first, then the first
        result = await call(client, "recall", {**QUESTION, "k": 10, "floor": False})
    assert [h["text"] for h in result["hits"]] == [before[1], before[0], *before[2:]]
    assert "LLM" not in result.get("note", "")
    prompt = fake_llm.chat_prompts[-1]
    assert "Question: What does the user drink?" in prompt
    assert all(m in prompt for m in MEMORIES)  # it sees the candidates, one a line


@pytest.mark.parametrize(
    "answer",
    [("json", {"ranking": "first"}), ("json", {"order": [1]}), ("text", "the first one"), ("json", {"ranking": [99]})],
)
async def test_an_answer_that_is_no_ranking_keeps_the_ranking_without_it(
    data_dir: Path, fake_llm: FakeOpenAI, clock: Clock, answer: tuple[str, Any]
) -> None:
    async with served(data_dir, fake_llm, clock) as client:
        without = await _without_llm(client, fake_llm)
        fake_llm.chat_script = [answer]
        result = await call(client, "recall", {**QUESTION, "floor": False, "k": 10})
    assert [h["text"] for h in result["hits"]] == without
    assert "the LLM rerank" in result["note"]


async def test_a_failing_llm_keeps_the_ranking_without_it(data_dir: Path, fake_llm: FakeOpenAI, clock: Clock) -> None:
    async with served(data_dir, fake_llm, clock) as client:
        without = await _without_llm(client, fake_llm)
        fake_llm.fail_with = 503
        result = await call(client, "recall", {**QUESTION, "floor": False, "k": 10})
    assert [h["text"] for h in result["hits"]] == without
    assert "the LLM rerank was skipped" in result["note"]


async def test_a_slow_llm_never_makes_recall_wait_past_its_cap(
    data_dir: Path, fake_llm: FakeOpenAI, clock: Clock
) -> None:
    async with served(data_dir, fake_llm, clock, llm_timeout_seconds=0.5) as client:
        without = await _without_llm(client, fake_llm)
        fake_llm.chat_script = [("sleep", 3.0)]
        # answered when the cap ran out, with the ranking without the model, not after 3 s
        result = await call(client, "recall", {**QUESTION, "floor": False, "k": 10})
    assert [h["text"] for h in result["hits"]] == without
    assert "took longer than 0.5 s" in result["note"]


async def test_the_llm_is_not_asked_when_the_stage_is_off(data_dir: Path, fake_llm: FakeOpenAI, clock: Clock) -> None:
    async with served(data_dir, fake_llm, clock, llm_rerank=False) as client:
        await call(client, "recall", QUESTION)
    assert fake_llm.chat_prompts == []


# ----- sub-queries (recall.llm_rewrite) --------------------------------------------------------


async def _alone(client: Client, fake: FakeOpenAI) -> list[str]:
    """The order of the question searched alone: the stage is on, the model answers no sub-query."""
    fake.chat_script = [("json", {"queries": []})]
    return [h["text"] for h in (await call(client, "recall", {**QUESTION, "k": 10, "floor": False}))["hits"]]


def _rewriting(**more: Any) -> dict[str, Any]:
    return {"llm_rerank": False, "llm_rewrite": True, **more}


async def test_sub_queries_find_what_the_question_alone_ranks_last(
    data_dir: Path, fake_llm: FakeOpenAI, clock: Clock
) -> None:
    async with served(data_dir, fake_llm, clock, **_rewriting()) as client:
        alone = await _alone(client, fake_llm)
        target = alone[-1]  # the memory the question alone finds least related
        fake_llm.chat_script = [("json", {"queries": [QUESTION["query"], target]})]
        result = await call(client, "recall", QUESTION)  # k=3
    assert target not in alone[:3]
    assert target in [h["text"] for h in result["hits"]]
    assert alone[0] in [h["text"] for h in result["hits"]]  # the question itself is still searched
    assert "LLM" not in result.get("note", "")
    prompt = fake_llm.chat_prompts[-1]
    assert "Question: What does the user drink?" in prompt
    assert "up to 3 short search queries" in prompt


NO_SUB_QUERIES = "the LLM answered no usable sub-queries"


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (("json", {"queries": "tea"}), NO_SUB_QUERIES),
        (("json", {"query": ["tea"]}), NO_SUB_QUERIES),
        (("json", {"queries": [7, " "]}), NO_SUB_QUERIES),
        (
            ("text", "tea, water"),
            "the LLM sub-queries were skipped (the LLM call failed: UpstreamError: the LLM "
            "answered with something that is not JSON)",
        ),
    ],
)
async def test_an_answer_that_is_no_sub_queries_searches_the_question_alone(
    data_dir: Path, fake_llm: FakeOpenAI, clock: Clock, answer: tuple[str, Any], said: str
) -> None:
    async with served(data_dir, fake_llm, clock, **_rewriting()) as client:
        alone = await _alone(client, fake_llm)
        fake_llm.chat_script = [answer]
        result = await call(client, "recall", {**QUESTION, "floor": False, "k": 10})
    assert [h["text"] for h in result["hits"]] == alone
    assert said in result["note"]


async def test_a_failing_or_slow_model_leaves_the_question_searched_alone_within_the_cap(
    data_dir: Path, fake_llm: FakeOpenAI, clock: Clock
) -> None:
    async with served(data_dir, fake_llm, clock, **_rewriting(llm_rerank=True, llm_timeout_seconds=0.5)) as client:
        fake_llm.chat_script = [("json", {"queries": []}), ("json", {"ranking": []})]
        alone = [h["text"] for h in (await call(client, "recall", {**QUESTION, "k": 10, "floor": False}))["hits"]]
        fake_llm.fail_with = 503
        failed = await call(client, "recall", {**QUESTION, "floor": False, "k": 10})
        fake_llm.fail_with = None
        asked = len(fake_llm.chat_prompts)
        fake_llm.chat_script = [("sleep", 3.0)]
        slow = await call(client, "recall", {**QUESTION, "floor": False, "k": 10})
    assert [h["text"] for h in failed["hits"]] == alone
    assert "the LLM sub-queries were skipped" in failed["note"]
    # the sub-queries spent the whole cap: the rerank is not asked at all
    assert [h["text"] for h in slow["hits"]] == alone
    assert "the LLM sub-queries took longer than 0.5 s" in slow["note"]
    assert "the LLM rerank had no time left" in slow["note"]
    assert len(fake_llm.chat_prompts) == asked + 1
