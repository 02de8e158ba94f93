"""Strength: each recall hit and the answer as a whole say whether they clearly bear on the question,
on evidence measured against the model's unrelated texts, not the store (issue 37, item 6)."""

from __future__ import annotations

import pytest
from mcp.client import Client
from mcp_types import CallToolResult

from tests.conftest import call

pytestmark = pytest.mark.anyio

STORE = [
    "The user has a dog named Pixel",
    "The user lives in Berlin",
    "The user uses vim keybindings",
    "The user works as a backend engineer at a logistics company",
    "The user prefers dark mode in every app",
    "The user is learning Japanese",
    "The user's laptop is a ThinkPad X1 Carbon",
    "用户喜欢喝乌龙茶，不加糖",
    "用户每天早上六点起床跑步",
    "用户对花生过敏",
    "The deploy runbook lives in docs/runbook.md",
    "The user's sister is called Maya",
]


@pytest.fixture
async def store(client: Client) -> Client:
    assert (await call(client, "remember", {"memories": [{"content": t} for t in STORE]}))["stored"] == len(STORE)
    return client


def _text_block(result: CallToolResult) -> str:
    assert not result.is_error
    block = result.content[0]
    assert block.type == "text"
    return block.text


async def test_a_clear_answer_is_strong_and_the_text_says_nothing_of_weakness(store: Client) -> None:
    result = await store.call_tool("recall", {"query": "What is the name of the user's dog?", "reinforce": False})
    found = result.structured_content or {}
    assert found["hits"][0]["text"] == "The user has a dog named Pixel"
    assert found["hits"][0]["strong"] is True
    assert found["strength"] == "strong"
    assert "nothing stands out" not in _text_block(result)
    # a fact that only shares the store's template ("The user's ...") is not strong beside it
    assert not any(h.get("strong") for h in found["hits"] if "Maya" in h["text"])


async def test_a_chinese_question_about_a_chinese_fact_is_strong(store: Client) -> None:
    found = await call(store, "recall", {"query": "用户对什么过敏？", "reinforce": False})
    assert found["hits"][0]["text"] == "用户对花生过敏"
    assert [found["hits"][0]["strong"], found["strength"]] == [True, "strong"]


@pytest.mark.parametrize("question", ["What is the capital of Peru?", "How do I bake sourdough bread?"])
async def test_an_unrelated_question_gets_weak_hits_and_nothing_stands_out(store: Client, question: str) -> None:
    result = await store.call_tool("recall", {"query": question, "reinforce": False, "explain": True})
    found = result.structured_content or {}
    assert found["hits"]  # recall still returns the nearest: the agent decides
    assert not any("strong" in h for h in found["hits"])  # a weak hit leaves the flag out
    assert all(h["signals"]["evidence"] < 3 for h in found["hits"])
    assert found["strength"] == "weak"
    assert found["note"].startswith("nothing stands out")
    lean = await store.call_tool("recall", {"query": question, "reinforce": False})
    assert "nothing stands out" in _text_block(lean)
