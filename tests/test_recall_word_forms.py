"""Word forms: an English question finds another form of its words through their stems, the form
as written still counts more, and Chinese is segmented as before (issue 37, item 3)."""

from __future__ import annotations

import pytest
from mcp.client import Client

from mcp_memory.core.text import keyword_terms, segment_for_index, stem_terms
from tests.conftest import call, explained_hits, remember_all

pytestmark = pytest.mark.anyio

STORE = [
    "The user asked for board game recommendations for a family evening",
    "The user lives in Berlin",
    "The user uses vim keybindings",
    "The user has a dog named Pixel",
    "The user prefers dark mode in every app",
    "The user is learning Japanese",
    "用户喜欢喝乌龙茶，不加糖",
    "用户每天早上六点起床跑步",
]


@pytest.fixture
async def store(client: Client) -> Client:
    await remember_all(client, STORE)
    return client


async def test_games_finds_game_recommendations_through_the_stem(store: Client) -> None:
    hits = await explained_hits(store, "Which games could we play?")
    found = next(h for h in hits if h["text"] == STORE[0])
    assert found is hits[0]
    assert found["signals"]["keyword_evidence"] > 0  # the keyword side found it: no such word as written
    assert "matches 'game'" in found["why"], found  # cited as the memory writes it


async def test_the_word_as_written_ranks_above_another_form_of_it(store: Client) -> None:
    said = "The user plays board games with friends on Fridays"
    await call(store, "remember", {"content": said})
    hits = await explained_hits(store, "board games")
    texts = [h["text"] for h in hits]
    assert texts.index(said) < texts.index(STORE[0])
    evidence = {h["text"]: h["signals"].get("keyword_evidence", 0) for h in hits}  # a dense-only hit has none
    assert evidence[said] > evidence[STORE[0]] > 0


async def test_chinese_is_segmented_as_before_and_has_no_stems(store: Client) -> None:
    assert segment_for_index("用户喜欢喝乌龙茶") == " 用户 户喜 喜欢 欢喝 喝乌 乌龙 龙茶 "
    assert stem_terms(keyword_terms("用户喜欢喝什么茶？")) == []
    hits = await explained_hits(store, "用户喜欢喝乌龙茶吗")
    assert hits[0]["text"] == "用户喜欢喝乌龙茶，不加糖"
    assert hits[0]["why"].startswith("matches '")  # bigrams as written, as before
