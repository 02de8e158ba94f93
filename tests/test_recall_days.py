"""Whose days a recall counts in: the caller's as_of offset, else `recall.timezone`; and the reason
a hit gives in words ("said yesterday", its rarest matching words)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from mcp.client import Client

from mcp_memory.config import Settings, load_settings
from mcp_memory.core.errors import InvalidInputError
from mcp_memory.services.when import asker_offset, said
from tests.conftest import Clock, call

pytestmark = pytest.mark.anyio

SHANGHAI = timezone(timedelta(hours=8))
# 07:30 on the 15th in Shanghai is still the evening of the 14th in UTC.
MORNING = datetime(2027, 1, 15, 7, 30, tzinfo=SHANGHAI)


@pytest.fixture
def settings(data_dir: Path) -> Settings:
    return load_settings(data_dir=data_dir, principal="alice", recall={"timezone": "Asia/Shanghai"})


def _at(moment: datetime) -> float:
    return moment.timestamp()


@pytest.mark.parametrize(
    ("occurred", "words"),
    [
        (datetime(2027, 1, 15, 7, 10, tzinfo=SHANGHAI), "just now"),
        (datetime(2027, 1, 15, 0, 5, tzinfo=SHANGHAI), "today"),
        (datetime(2027, 1, 14, 23, 50, tzinfo=SHANGHAI), "yesterday"),  # 7 hours ago, but the day before
        (datetime(2027, 1, 14, 8, 0, tzinfo=SHANGHAI), "yesterday"),
        (datetime(2027, 1, 13, 9, 0, tzinfo=SHANGHAI), "2 days ago"),
        (datetime(2027, 1, 8, 9, 0, tzinfo=SHANGHAI), "week ago"),
        (datetime(2026, 12, 1, 9, 0, tzinfo=SHANGHAI), "month ago"),
        (datetime(2027, 1, 16, 9, 0, tzinfo=SHANGHAI), "tomorrow"),
        (datetime(2027, 1, 15, 21, 0, tzinfo=SHANGHAI), "later today"),
        (datetime(2027, 1, 20, 9, 0, tzinfo=SHANGHAI), "in 5 days"),
    ],
)
def test_said_counts_calendar_days_in_the_askers_zone(occurred: datetime, words: str) -> None:
    offset = 8 * 3600.0
    assert said(_at(occurred), _at(MORNING), offset).endswith(words)


def test_the_same_moment_is_today_in_utc_and_yesterday_in_shanghai() -> None:
    occurred = _at(datetime(2027, 1, 14, 8, 0, tzinfo=UTC))  # 16:00 on the 14th in Shanghai
    now = _at(MORNING)  # 23:30 on the 14th in UTC
    assert said(occurred, now, 0.0) == "today"
    assert said(occurred, now, 8 * 3600.0) == "yesterday"


def test_an_as_of_offset_wins_over_the_configured_zone() -> None:
    now = _at(MORNING)
    assert asker_offset(MORNING, now, "UTC") == 8 * 3600
    assert asker_offset(None, now, "Asia/Shanghai") == 8 * 3600
    assert asker_offset(datetime(2027, 1, 15), now, "Asia/Shanghai") == 8 * 3600  # naive: no offset of its own
    assert asker_offset(None, _at(datetime(2027, 7, 1, tzinfo=UTC)), "Europe/Berlin") == 2 * 3600  # summer time
    assert asker_offset(None, now, "UTC") == 0


def test_an_unknown_zone_is_refused_with_the_fix(data_dir: Path) -> None:
    with pytest.raises(InvalidInputError) as raised:
        load_settings(data_dir=data_dir, recall={"timezone": "Mars/Olympus"})
    message = str(raised.value)
    assert "recall.timezone" in message
    assert "'Mars/Olympus' is not a time zone" in message
    assert '"local"' in message
    assert "IANA" in message


async def test_yesterday_is_the_configured_zones_day(client: Client, clock: Clock) -> None:
    """Asked at 07:30 in Shanghai with no as_of: yesterday is the 14th there, which in UTC days would
    be the 13th. The hit's reason says when in the same days."""
    clock.now = _at(MORNING)
    memories = [
        ("We decided to rename the billing service to Ledger", datetime(2027, 1, 14, 10, 0, tzinfo=SHANGHAI)),
        ("We decided to drop the legacy CSV importer", datetime(2027, 1, 13, 18, 0, tzinfo=SHANGHAI)),
        ("We decided to keep the staging cluster small", datetime(2026, 12, 2, 18, 0, tzinfo=SHANGHAI)),
    ]
    await call(
        client, "remember", {"memories": [{"content": text, "occurred_at": at.isoformat()} for text, at in memories]}
    )
    result = await call(client, "recall", {"query": "What did we decide yesterday?", "k": 3, "reinforce": False})
    first = result["hits"][0]
    assert first["text"] == memories[0][0]
    assert "happened yesterday" in first["why"]
    assert "said yesterday" in first["why"]
    why = {hit["text"]: hit["why"] for hit in result["hits"]}
    assert "happened" not in why[memories[1][0]]  # the 13th is the day before yesterday in Shanghai
    # With an as_of in UTC the days are UTC days: yesterday is then the 13th (the 14th is today).
    as_utc = MORNING.astimezone(UTC).isoformat()
    result = await call(
        client, "recall", {"query": "What did we decide yesterday?", "k": 3, "reinforce": False, "as_of": as_utc}
    )
    why = {hit["text"]: hit["why"] for hit in result["hits"]}
    assert "happened yesterday" in why[memories[1][0]]
    assert "happened" not in why[memories[0][0]]


async def test_a_reason_cites_the_rarest_words_it_matched(client: Client) -> None:
    common = [
        "The project budget was approved by finance.",
        "The project kickoff is on Monday.",
        "The project wiki lives in Confluence.",
        "The project channel is #eng-platform.",
        "The project owner is Priya.",
    ]
    answer = "The project Falcon deadline is March 3."
    await call(client, "remember", {"memories": [{"content": text} for text in [*common, answer]]})
    result = await call(client, "recall", {"query": "project falcon deadline", "k": 3, "reinforce": False})
    first = result["hits"][0]
    assert first["text"] == answer
    assert first["why"].startswith("matches 'falcon', 'deadline'"), first["why"]


async def test_an_event_still_to_come_happens_then_rather_than_being_said_then(client: Client, clock: Clock) -> None:
    clock.now = _at(MORNING)
    flight = (MORNING + timedelta(days=62)).isoformat()
    await call(client, "remember", {"content": "Booked flights to Tokyo for the spring trip", "occurred_at": flight})
    result = await call(client, "recall", {"query": "flights to Tokyo", "reinforce": False})
    assert "happens in 2 months" in result["hits"][0]["why"]
    assert "said in" not in result["hits"][0]["why"]


async def test_asked_as_of_an_earlier_day_a_memory_said_since_is_said_on_its_date(client: Client, clock: Clock) -> None:
    clock.now = _at(MORNING)
    await call(client, "remember", {"content": "The user keeps their notes in Obsidian"})
    earlier = (MORNING - timedelta(days=6)).isoformat()
    result = await call(client, "recall", {"query": "notes app", "as_of": earlier, "reinforce": False})
    why = result["hits"][0]["why"]
    assert "said 2027-01-15" in why, why  # the day it was said, in the asker's days (as_of's +08:00)
    assert "happens" not in why  # "happens" is for an event dated ahead of its telling


async def test_a_budget_too_small_for_any_hit_says_so_rather_than_nothing_relevant(client: Client) -> None:
    long = " ".join(["with milk, in the blue mug by the window,"] * 30)  # over 200 tokens a memory
    texts = [f"The user drinks oolong tea {long}", f"The user drinks green tea {long}", f"The user is in Porto {long}"]
    await call(client, "remember", {"memories": [{"content": text} for text in texts]})
    result = await call(client, "recall", {"query": "tea", "budget_tokens": 200, "reinforce": False})
    assert result["hits"] == []
    assert result["omitted_for_budget"] >= 1
    assert "did not fit budget_tokens=200: raise it" in result["note"]
    assert "no relevant memories" not in result["note"]
    assert "lower k" not in result["note"]  # fewer hits would not fit either
    # What the budget leaves out is counted within k, not over every candidate recall weighed.
    one = await call(client, "recall", {"query": "tea", "k": 1, "budget_tokens": 200, "reinforce": False})
    assert one["omitted_for_budget"] == 1
    assert one["note"].startswith("1 relevant memory did not fit")


async def test_an_empty_store_says_there_is_nothing_relevant(client: Client) -> None:
    result = await call(client, "recall", {"query": "what does the user like to drink?", "reinforce": False})
    assert result["hits"] == []
    assert result["note"].startswith("no relevant memories")
    # a new user's first recall: the empty store, not a scope or filter they never gave, is named first
    assert "nothing is stored yet (remember stores it)" in result["note"]


async def test_a_word_most_memories_contain_is_no_reason(client: Client) -> None:
    texts = [
        "The user likes tea",
        "The user prefers dark mode",
        "The user lives in Porto",
        "The user drives a Volvo",
        "The user has a cat named Miso",
        "The user works at Acme",
    ]
    await call(client, "remember", {"memories": [{"content": text} for text in texts]})
    result = await call(client, "recall", {"query": "the user likes tea?", "reinforce": False})
    first = result["hits"][0]
    assert first["text"] == "The user likes tea"
    assert first["why"].startswith("matches "), first["why"]
    assert "'tea'" in first["why"]
    assert "'user'" not in first["why"]  # in every memory: before, it was cited first


async def test_a_chinese_reason_cites_no_half_of_a_common_word(client: Client) -> None:
    texts = [
        "用户喜欢喝乌龙茶，不加糖",
        "用户住在杭州",
        "用户用Vim写代码",
        "用户每天早上跑步",
        "用户养了一只猫",
        "用户在银行工作",
    ]
    await call(client, "remember", {"memories": [{"content": text} for text in texts]})
    result = await call(client, "recall", {"query": "用户喜欢喝什么", "reinforce": False})
    first = result["hits"][0]
    assert first["text"] == texts[0]
    # the run the question and the memory share, without 户喜 (half of 用户, in every memory, and half of 喜欢)
    assert first["why"].startswith("matches '喜欢喝';"), first["why"]
    assert "'用户'" not in first["why"]
