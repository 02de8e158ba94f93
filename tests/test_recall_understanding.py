"""Recall reads a question's time, the people it names and its form (DESIGN.md section 6, step 3)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from mcp.client import Client

from mcp_memory.services.question import asks_only_when
from mcp_memory.services.when import anchored, resolve, utc_offset
from tests.conftest import call

pytestmark = pytest.mark.anyio

AS_OF = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)  # a Monday


def _day(text: str) -> tuple[str, str]:
    span = resolve(text, AS_OF.timestamp())
    assert span is not None, text
    return (
        datetime.fromtimestamp(span.start, UTC).date().isoformat(),
        datetime.fromtimestamp(span.end, UTC).date().isoformat(),
    )


@pytest.mark.parametrize(
    ("question", "start", "end"),
    [
        ("what did we decide last week?", "2026-11-23", "2026-11-30"),
        ("what happened in April 2022", "2022-04-01", "2022-05-01"),
        ("plans for the first weekend of August", "2026-08-01", "2026-08-03"),
        ("what did I eat yesterday", "2026-11-29", "2026-11-30"),
        ("上个月买了什么", "2026-10-01", "2026-11-01"),
        ("去年五月去了哪里", "2025-05-01", "2025-06-01"),
        ("前天开会说了什么", "2026-11-28", "2026-11-29"),
        ("what did I say on 8 May, 2023", "2023-05-08", "2023-05-09"),
        ("last weekend", "2026-11-28", "2026-11-30"),
        ("last April", "2026-04-01", "2026-05-01"),
        ("what did we decide in the last few days?", "2026-11-27", "2026-12-01"),
        ("what changed over the past two weeks", "2026-11-16", "2026-12-01"),
        ("anything new in the past week?", "2026-11-23", "2026-12-01"),
        ("what happened recently", "2026-11-23", "2026-12-01"),
        ("最近三天说了什么", "2026-11-27", "2026-12-01"),
        ("过去一周有什么决定", "2026-11-23", "2026-12-01"),
        ("这几天在忙什么", "2026-11-27", "2026-12-01"),
        ("what happened the day before yesterday", "2026-11-28", "2026-11-29"),
        ("what did I do the past week?", "2026-11-23", "2026-12-01"),
        ("anything in the past month", "2026-10-31", "2026-12-01"),
        ("what changed over the past year", "2025-11-30", "2026-12-01"),
        ("plans for this weekend", "2026-12-05", "2026-12-07"),
        ("what did we do this week", "2026-11-30", "2026-12-07"),
    ],
)
def test_time_expressions_resolve_against_as_of(question: str, start: str, end: str) -> None:
    assert _day(question) == (start, end)


def test_a_question_without_a_time_resolves_to_nothing() -> None:
    for question in ("what is the user's name", "may I ask which editor", "用户喜欢喝什么"):
        assert resolve(question, AS_OF.timestamp()) is None


def test_a_day_is_the_askers_day() -> None:
    """At 07:30 in Shanghai (23:30 UTC the evening before) yesterday is the Shanghai day before."""
    shanghai = timezone(timedelta(hours=8))
    as_of = datetime(2027, 1, 14, 7, 30, tzinfo=shanghai)
    span = resolve("我们昨天决定了什么？", as_of.timestamp(), utc_offset(as_of))
    assert span is not None
    assert (span.start, span.end) == (
        datetime(2027, 1, 13, tzinfo=shanghai).timestamp(),
        datetime(2027, 1, 14, tzinfo=shanghai).timestamp(),
    )
    utc = resolve("我们昨天决定了什么？", as_of.timestamp())  # no offset: UTC days, as before
    assert utc is not None
    assert utc.start == datetime(2027, 1, 12, tzinfo=UTC).timestamp()


async def test_a_question_naming_a_time_prefers_what_happened_then(client: Client) -> None:
    said = [
        ("We agreed to ship the billing export on Friday", "2026-11-25T10:00:00Z"),
        ("We agreed to ship the search rewrite after the holidays", "2026-10-14T10:00:00Z"),
        ("We agreed to ship the onboarding emails in the spring", "2025-05-20T10:00:00Z"),
    ]
    await call(client, "remember", {"memories": [{"content": c, "occurred_at": t} for c, t in said]})
    for question, expected in (
        ("what did we agree to ship last week?", said[0][0]),
        ("上个月我们同意发布什么？", said[1][0]),
        ("what did we agree to ship in May 2025?", said[2][0]),
    ):
        result = await call(
            client, "recall", {"query": question, "as_of": AS_OF.isoformat(), "k": 3, "reinforce": False}
        )
        assert result["hits"][0]["text"] == expected, question
        assert "happened" in result["hits"][0]["why"]
        assert len(result["hits"]) == 3  # a hint, never a filter: the others are still there


def test_a_month_without_its_year_is_the_latest_one_the_memories_speak_of() -> None:
    span = resolve("when did Melanie go camping in June?", AS_OF.timestamp())
    assert span is not None
    assert span.yearly
    june_2023 = datetime(2023, 6, 27, 15, 0, tzinfo=UTC).timestamp()
    later = datetime(2023, 7, 17, tzinfo=UTC).timestamp()
    found = anchored(span, [later, june_2023])
    assert found is not None
    assert (found.start, found.end) == (
        datetime(2023, 6, 1, tzinfo=UTC).timestamp(),
        datetime(2023, 7, 1, tzinfo=UTC).timestamp(),
    )
    assert anchored(span, [later]) == span  # no June among them: the latest June, as before
    named = resolve("what happened in June 2023", AS_OF.timestamp())
    assert named is not None
    assert not named.yearly
    assert anchored(named, [datetime(2021, 6, 5, tzinfo=UTC).timestamp()]) == named
    last = resolve("what did we do last June", AS_OF.timestamp())
    assert last is not None
    assert not last.yearly
    for asked, alone in (
        ("What happened last week?", True),
        ("上周发生了什么？", True),
        ("when did the user run a marathon last week?", False),  # a subject: the words count as before
        ("上周用户去哪里跑步了？", False),
    ):
        span_asked = resolve(asked, AS_OF.timestamp())
        assert span_asked is not None, asked
        assert asks_only_when(asked, span_asked) is alone, asked
    chinese = resolve("六月份去露营了吗", AS_OF.timestamp())
    assert chinese is not None
    assert chinese.yearly


async def test_a_month_without_its_year_finds_the_june_the_store_holds(client: Client) -> None:
    said = [
        ("Melanie: We went camping at the lake and roasted marshmallows.", "2023-06-27T15:00:00Z"),
        ("Melanie: We went camping in the mountains with the kids.", "2023-07-17T15:00:00Z"),
        ("Melanie: We went camping by the river last weekend.", "2023-09-02T15:00:00Z"),
    ]
    await call(client, "remember", {"memories": [{"content": c, "occurred_at": t} for c, t in said]})
    result = await call(
        client,
        "recall",
        {"query": "When did Melanie go camping in June?", "as_of": AS_OF.isoformat(), "reinforce": False},
    )
    assert result["hits"][0]["text"] == said[0][0]
    assert "happened in june" in result["hits"][0]["why"].lower()


async def test_a_question_naming_a_person_prefers_what_they_said(client: Client) -> None:
    # Who said it is only in the metadata: the text cannot tell the two apart, the speaker can.
    said = [
        ("Caroline", "We finally adopted a puppy from the shelter."),
        ("Melanie", "We adopted two kittens."),
        ("Jon", "We adopted a parrot named Kiwi."),
        ("Gina", "We adopted a rescue rabbit."),
    ]
    filler = ["The kids loved the beach trip last summer.", "My new job starts in March.", "I painted a sunset."]
    memories = [{"content": text, "metadata": {"speaker": who}} for who, text in said]
    memories += [{"content": text, "metadata": {"speaker": "Caroline"}} for text in filler]
    await call(client, "remember", {"memories": memories})
    for who, text in said:
        result = await call(client, "recall", {"query": f"What did {who} adopt?", "k": 3, "reinforce": False})
        assert result["hits"][0]["text"] == text
        assert f"said by {who}" in result["hits"][0]["why"]


async def test_a_memory_that_is_a_question_ranks_below_the_answer(client: Client) -> None:
    asked = "Melanie: What are your plans for the weekend?"
    answer = "Caroline: This weekend I am going camping with my brother."
    others = [
        "Melanie: The kids loved the beach trip last summer.",
        "Caroline: I started volunteering at the shelter on weekends.",
        "Melanie: I painted a sunset over the lake.",
        "Caroline: My new job starts in March.",
    ]
    await call(client, "remember", {"memories": [{"content": t} for t in [asked, answer, *others]]})
    question = {"query": "What are the plans for the weekend?", "reinforce": False}
    result = await call(client, "recall", question)
    texts = [h["text"] for h in result["hits"]]
    assert texts[0] == answer
    # the answer, not the question that shares its words; but a demotion is not the relevance
    # floor: a question the agent stored can still be found by asking it
    assert texts.index(answer) < texts.index(asked)
    assert "a question, not an answer" in result["hits"][texts.index(asked)]["why"]


async def test_a_stored_open_question_is_found_by_asking_it(client: Client) -> None:
    stored = "Open question for Sandra: should we move the billing service to Kubernetes next quarter?"
    others = [
        "The user's dog is called Pixel.",
        "The user is learning Japanese.",
        "The user's manager is Sandra.",
        "The user runs tests with pytest -x.",
        "The user's standup is at 9:30.",
        "The billing service runs on two VMs in Frankfurt.",
    ]
    await call(client, "remember", {"memories": [{"content": t} for t in [stored, *others]]})
    result = await call(client, "recall", {"query": "Should we move the billing service to Kubernetes?"})
    assert stored in [h["text"] for h in result["hits"][:3]]


def test_a_time_counted_back_is_cited_as_about_that_long_ago() -> None:
    # "two days ago" holds a day either side: a memory of yesterday is not said to be from two days ago.
    for question in ("what did the user eat two days ago?", "用户三天前做了什么？"):
        span = resolve(question, AS_OF.timestamp())
        assert span is not None, question
        assert span.said.startswith("about "), question


async def test_a_question_about_a_time_alone_puts_that_times_memories_first(client: Client) -> None:
    facts = ["The user uses vim keybindings", "User lives in Berlin", "The user prefers a casual tone"]
    events = [
        ("User went to the dentist", "2026-11-25T15:00:00Z"),
        ("User had dinner with Tom at an Italian place", "2026-11-27T19:00:00Z"),
        ("User ran a half marathon", "2022-04-17T08:00:00Z"),
    ]
    memories = [{"content": text} for text in facts]
    memories += [{"content": text, "occurred_at": when, "kind": "event"} for text, when in events]
    await call(client, "remember", {"memories": memories})
    for question in ("What happened last week?", "last week", "上周发生了什么？"):
        result = await call(
            client, "recall", {"query": question, "as_of": AS_OF.isoformat(), "k": 3, "reinforce": False}
        )
        assert {h["text"] for h in result["hits"][:2]} == {events[0][0], events[1][0]}, question
        assert all("happened" in h["why"] for h in result["hits"][:2]), question
    # Said without a time of its own, a memory of the last few days was said then, not "happened" then.
    recent = await call(client, "recall", {"query": "What did the user say in the last few days?", "k": 3})
    assert any(h["why"].startswith("said in the last few days") for h in recent["hits"]), recent["hits"]
