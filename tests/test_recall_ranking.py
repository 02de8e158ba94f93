"""What recall ranks first on a small agent-written store, in English, Chinese and across the two."""

from __future__ import annotations

import re
from typing import Any

import orjson
import pytest
from mcp.client import Client
from mcp_types import CallToolResult

from mcp_memory.services.recall import cited_words
from tests.conftest import Clock, call

pytestmark = pytest.mark.anyio

HOUR = 3600.0

# Every memory says "The user" or "用户": the words a keyword search matches everywhere.
NEW_USER = [
    "The user uses vim keybindings",
    "The user lives in Berlin",
    "用户喜欢喝乌龙茶，不加糖",
    "The user works as a backend engineer at a logistics company",
    "The user has a dog named Pixel",
    "The user prefers dark mode in every app",
    "用户每天早上六点起床跑步",
    "The user is learning Japanese",
    "The user's laptop is a ThinkPad X1 Carbon",
    "用户对花生过敏",
]


async def _first(client: Client, question: str) -> str:
    result = await call(client, "recall", {"query": question, "k": 3, "reinforce": False})
    return str(result["hits"][0]["text"])


@pytest.fixture
async def new_user(client: Client) -> Client:
    stored = await call(client, "remember", {"memories": [{"content": t} for t in NEW_USER]})
    assert stored["stored"] == len(NEW_USER)
    return client


async def test_a_word_every_memory_contains_does_not_outrank_the_meaning(new_user: Client) -> None:
    assert await _first(new_user, "What does the user like to drink?") == "用户喜欢喝乌龙茶，不加糖"
    assert await _first(new_user, "what pet does the user have") == "The user has a dog named Pixel"


async def test_a_chinese_question_finds_an_english_memory(new_user: Client) -> None:
    assert await _first(new_user, "用户住在哪个城市？") == "The user lives in Berlin"
    assert await _first(new_user, "用户用什么编辑器快捷键？") == "The user uses vim keybindings"


async def test_an_english_question_finds_a_chinese_memory(new_user: Client) -> None:
    assert await _first(new_user, "Is the user allergic to anything?") == "用户对花生过敏"
    assert await _first(new_user, "When does the user get up in the morning?") == "用户每天早上六点起床跑步"


async def test_a_rare_word_still_finds_its_memory_by_keyword(new_user: Client) -> None:
    result = await call(new_user, "recall", {"query": "ThinkPad", "k": 3, "reinforce": False})
    assert result["hits"][0]["text"] == "The user's laptop is a ThinkPad X1 Carbon"
    assert "'thinkpad'" in result["hits"][0]["why"]


async def test_a_chinese_reason_cites_the_runs_question_and_memory_share_not_their_bigrams(new_user: Client) -> None:
    """户每 and 每天 were cited for 用户每天几点起床: two artificial bigrams of one shared run."""
    result = await call(new_user, "recall", {"query": "用户每天几点起床？", "k": 1, "reinforce": False})
    hit = result["hits"][0]
    assert hit["text"] == "用户每天早上六点起床跑步"
    assert hit["why"].startswith("matches '用户每天', '点起床';"), hit["why"]


def test_a_cited_chinese_run_grows_only_through_matched_bigrams_the_memory_holds_in_a_row() -> None:
    memory, question = "用户喜欢喝乌龙茶，不加糖", "用户喜欢喝什么茶？"
    # 用户 common in the store: not matched, so the run does not grow through 户喜 into it
    assert cited_words(memory, question, ["喜欢", "欢喝"]) == ["喜欢喝"]
    assert cited_words(memory, question, ["茶", "欢喝", "用户", "户喜", "喜欢"]) == ["茶", "用户喜欢喝"]
    # 喝什 is not in the memory, and 喜欢 and 什么 of "喜欢什么" are two runs there: 喜欢什么 is not
    assert cited_words("喜欢的东西是什么", "喜欢什么", ["喜欢", "什么"]) == ["喜欢", "什么"]
    assert cited_words(memory, question, ["tea", "喜欢"]) == ["tea", "喜欢"]  # nothing beside it matched


def test_a_cited_chinese_run_bridges_a_function_character_and_ends_on_none() -> None:
    """The keyword side never searches a bigram with 和 or 的 in it, so the runs stopped there:
    中华人民共和国国家发展 was cited as 中华人民共 and 国国家发展, halves of words."""
    memory = "中华人民共和国国家发展和改革委员会办公厅今天发布了通知"
    question = "中华人民共和国国家发展和改革委员会办公厅发布了什么"
    matched = ["中华", "华人", "人民", "民共", "国国", "国家", "家发", "发展", "改革", "革委", "委员", "员会", "会办"]
    assert cited_words(memory, question, [*matched, "办公", "公厅", "发布"]) == [
        "中华人民共和国国家发展和改革委员会办公厅",
        "发布",
    ]
    assert cited_words("我们的猫叫咪咪", "我们的猫叫什么", ["我们", "猫叫"]) == ["我们的猫叫"]
    # a function character at the end is left off, and one alone is no bridge to an unmatched bigram
    assert cited_words("发布了通知", "发布了什么", ["发布"]) == ["发布"]


LEAN_FIELDS = {
    "id",
    "text",
    "kind",
    "occurred_at",
    "score",
    "why",
    "strong",
    "conflicts_with",
    "superseded_by",
    "source_ids",
}


async def test_a_default_hit_is_lean_and_says_why(new_user: Client) -> None:
    result = await call(new_user, "recall", {"query": "What does the user like to drink?", "floor": False})
    assert len(result["hits"]) == len(NEW_USER)
    for hit in result["hits"]:
        assert set(hit) <= LEAN_FIELDS
        assert isinstance(hit["why"], str)
        assert hit["why"]
    # what is at its default is left out: a fact says no kind, a weak hit no strength
    assert [h.get("strong", False) for h in result["hits"]] == [True] + [False] * (len(NEW_USER) - 1)
    assert not any("kind" in h for h in result["hits"])


def _overheads(result: CallToolResult) -> list[tuple[int, int, dict[str, Any]]]:
    """Per hit: what its line in the text block costs beyond its text, what its JSON in the
    structured content costs beyond its text and the words of its reason, and the hit."""
    lines = _text_block(result).splitlines()
    hits = (result.structured_content or {})["hits"]
    costs = []
    for hit, line in zip(hits, lines, strict=False):
        beyond = len(orjson.dumps(hit).decode()) - len(orjson.dumps(hit["text"]).decode()) - len(hit["why"])
        costs.append((len(line) - len(hit["text"]), beyond, hit))
    return costs


async def test_a_hit_costs_at_most_120_characters_beyond_its_text_in_each_block(new_user: Client) -> None:
    """Issue 37: a fact's line in the text block (its reason included) and its JSON in the structured
    content (id, time, score, strength and the keys; the reason's words are the reason's) each cost
    at most 120 characters beyond its text. Another kind adds its name."""
    await call(new_user, "remember", {"content": "The user prefers green tea over coffee", "kind": "preference"})
    costs = []
    for question in ("ThinkPad", "Does the user like green tea?"):
        asked = {"query": question, "k": 4, "reinforce": False, "floor": False}
        costs += _overheads(await new_user.call_tool("recall", asked))
    assert costs[0][2]["why"].startswith("matches 'thinkpad'; close in meaning; said"), costs[0]  # a realistic reason
    for line_cost, json_cost, hit in costs:
        assert len(hit["why"]) <= 70, hit
        assert line_cost <= 120, (line_cost, hit)
        named = len(orjson.dumps({"kind": hit["kind"]})) - 1 if "kind" in hit else 0  # ,"kind":"preference"
        assert json_cost - named <= 120, (json_cost, hit)
    strong = {(hit["text"], hit.get("kind")) for _, _, hit in costs if hit.get("strong")}  # both costs paid
    assert {
        ("The user's laptop is a ThinkPad X1 Carbon", None),
        ("The user prefers green tea over coffee", "preference"),
    } <= strong


def _text_block(result: CallToolResult) -> str:
    assert not result.is_error
    assert len(result.content) == 1
    block = result.content[0]
    assert block.type == "text"
    return block.text


async def test_the_text_block_gives_one_short_line_per_hit_not_the_json_again(new_user: Client) -> None:
    question = {"query": "What does the user like to drink?", "reinforce": False, "floor": False}
    result = await new_user.call_tool("recall", question)
    text = _text_block(result)
    hits = (result.structured_content or {})["hits"]
    lines = text.splitlines()
    assert len(lines) == len(hits)  # no header, no note: nothing to say beyond the hits
    assert "{" not in text
    assert '"id"' not in text
    for hit, line in zip(hits, lines, strict=True):
        quoted = orjson.dumps(hit["text"]).decode()
        assert line.startswith(f"- {quoted} ("), line
        assert f"({hit['occurred_at'][:10]}; {hit['why']})" in line  # its date and its reason
        assert line.endswith(f"id={hit['id']}")  # what forget and pin take
        assert len(line) - len(hit["text"]) <= 120, line


async def test_the_text_block_lists_the_pinned_memories_and_a_note_only_when_it_says_something(
    new_user: Client,
) -> None:
    rule = "Never push to main without review"
    pinned = (await call(new_user, "remember", {"content": rule, "pinned": True}))["items"][0]["id"]
    result = await new_user.call_tool("recall", {"query": "ThinkPad", "reinforce": False})
    lines = _text_block(result).splitlines()
    note = (result.structured_content or {})["note"]
    assert lines[0].startswith('- "The user\'s laptop is a ThinkPad X1 Carbon" (')
    assert lines[-3] == "pinned (always apply):"
    assert re.fullmatch(rf'- "{rule}" \(\d{{4}}-\d\d-\d\d\) id={pinned}', lines[-2]), lines[-2]
    assert lines[-1] == f"note: {note}"
    assert len(note) <= 80, note  # the floor's note in a few words


async def test_asked_for_every_signal_the_text_block_carries_the_json(new_user: Client) -> None:
    result = await new_user.call_tool("recall", {"query": "Berlin", "explain": True, "reinforce": False})
    assert orjson.loads(_text_block(result)) == result.structured_content
    result = await new_user.call_tool("recall", {"query": "Berlin", "detail": "full", "reinforce": False})
    assert orjson.loads(_text_block(result)) == result.structured_content


async def test_detail_full_returns_the_whole_record(new_user: Client) -> None:
    result = await call(new_user, "recall", {"query": "Berlin", "detail": "full", "reinforce": False})
    hit = result["hits"][0]
    assert hit["text"] == "The user lives in Berlin"
    for field in ("tags", "metadata", "importance", "created_at", "access_count", "tier", "level", "language"):
        assert field in hit
    assert isinstance(hit["why"], str)
    assert "'berlin'" in hit["why"]


async def test_pinned_memories_come_lean_by_default_and_whole_with_detail_full(new_user: Client) -> None:
    rule = "Never push to main without review"
    await call(new_user, "remember", {"content": rule, "pinned": True})
    lean = (await call(new_user, "recall", {"query": "Berlin", "reinforce": False}))["pinned"]
    assert [pin["text"] for pin in lean] == [rule]
    assert set(lean[0]) <= {"id", "text", "kind", "occurred_at", "conflicts_with", "caution"}
    # Beyond its text a lean pin costs what a lean hit does at most: well under the record's cost.
    assert len(orjson.dumps(lean[0]).decode()) - len(orjson.dumps(rule).decode()) <= 120
    full = (await call(new_user, "recall", {"query": "Berlin", "detail": "full", "reinforce": False}))["pinned"]
    assert full[0]["id"] == lean[0]["id"]
    assert full[0]["pinned"] is True
    assert {"created_at", "occurrence_ids", "importance"} <= set(full[0])


# Templated memories, as agents write them: each shares most of its words with the others.
PROJECTS = ["orion", "falcon", "atlas", "search-api", "billing-service", "recommender", "mobile-app", "data-pipeline"]
PEOPLE = ["Diego", "Sam", "Mei", "Ken", "Carlos", "Priya", "Ines", "Tom"]
BUDGETS = [
    f"Budget for {p} in Q{i % 4 + 1} 202{3 + i % 3} is ${100 + 61 * i}k, approved by {who}."
    for i, (p, who) in enumerate(zip(PROJECTS, PEOPLE, strict=True))
]
RECENT_BUDGETS = [
    f"Budget for {p} in Q{(i + 2) % 4 + 1} 202{4 + i % 2} is ${700 - 53 * i}k, approved by {who}."
    for i, (p, who) in enumerate(zip(PROJECTS[::-1], PEOPLE, strict=True))
]


async def test_a_memory_asked_for_in_its_own_words_outranks_a_weaker_match_said_since(
    client: Client, clock: Clock
) -> None:
    """Relevance saturates for strong matches; recency and importance must not then decide alone
    (before ADR 10's closeness every one of these came second to a budget said a month later)."""
    await call(client, "remember", {"memories": [{"content": t} for t in BUDGETS]})
    clock.advance(30 * 24 * HOUR)  # a month later the agent notes two more budgets
    await call(client, "remember", {"memories": [{"content": t} for t in RECENT_BUDGETS]})
    for text in BUDGETS:
        assert await _first(client, text) == text


async def test_of_two_statements_about_as_close_to_the_question_the_newer_ranks_first(
    new_user: Client, clock: Clock
) -> None:
    await call(new_user, "remember", {"content": "The user drinks green tea every morning."})
    clock.advance(10 * 24 * HOUR)
    await call(new_user, "remember", {"content": "The user drinks black coffee every morning."})
    first = await _first(new_user, "What does the user drink in the morning?")
    assert first == "The user drinks black coffee every morning."
