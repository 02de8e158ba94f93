"""A user who changed their mind is answered with the new fact; an unjudgeable conflict is flagged."""

from __future__ import annotations

import pytest
from mcp.client import Client

from mcp_memory.services.rules import relation
from tests.conftest import Clock, call, hit_texts

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("old", "new", "kind", "expected"),
    [
        ("User likes tea", "User does not like tea", "fact", "negation"),
        ("I prefer dark mode in the editor", "I prefer light mode in the editor", "preference", "changed"),
        ("I prefer dark mode in the editor", "I prefer light mode in the editor", "fact", "different"),
        ("The user prefers Obsidian for notes", "The user prefers plain text files for notes", "preference", "changed"),
        ("The user prefers tea", "The user prefers coffee", "preference", "conflict"),
        ("Alice prefers tea for breakfast", "Bob prefers coffee for breakfast", "preference", "different"),
        ("I prefer coffee in the morning at work", "I prefer tea in the evening at work", "preference", "conflict"),
        ("I prefer 3 servers for staging", "I prefer 4 servers for staging", "preference", "different"),
        ("我更喜欢喝咖啡", "我更喜欢喝茶", "preference", "changed"),
        ("The user prefers Dvorak", "The user switched from Dvorak to Colemak", "preference", "changed"),
        ("Alice likes cats", "Alice likes dogs", "preference", "conflict"),
        ("Sam drinks coffee every morning", "Sam switched to tea every morning", "preference", "changed"),
        ("我喜欢喝咖啡", "我不再喝咖啡了", "preference", "changed"),
        ("The meeting is on Monday", "The meeting is on Tuesday", "fact", "different"),
        ("We use PostgreSQL for billing", "We use MySQL for billing", "decision", "different"),
        (
            "I prefer dark roast coffee in the morning",
            "In the mornings I prefer a dark roast coffee.",
            "preference",
            "same",
        ),
        # Said as an addition ("too", "also", "也"): both stay true, nothing is replaced.
        ("The user's sister lives in Paris.", "The user's brother moved to Paris too.", "fact", "different"),
        ("用户喜欢喝绿茶。", "用户现在也喜欢喝咖啡。", "preference", "different"),
        ("The user likes tea", "The user now also likes coffee", "preference", "different"),
        ("用户喜欢喝绿茶。", "用户现在喜欢喝咖啡。", "preference", "changed"),
    ],
)
def test_the_relation_rules(old: str, new: str, kind: str, expected: str) -> None:
    assert relation(old, new, kind) == expected


async def test_a_denial_supersedes_the_old_statement_and_keeps_it_in_history(client: Client) -> None:
    old = await call(client, "remember", {"content": "User likes tea", "kind": "preference"})
    new = await call(client, "remember", {"content": "User does not like tea", "kind": "preference"})
    assert new["items"][0]["outcome"] == "stored"
    assert new["items"][0]["superseded"] == [old["items"][0]["id"]]
    assert hit_texts(await call(client, "recall", {"detail": "full", "query": "does the user like tea"})) == [
        "User does not like tea"
    ]
    history = await call(
        client, "recall", {"detail": "full", "query": "does the user like tea", "filters": {"include_superseded": True}}
    )
    assert sorted(hit_texts(history)) == ["User does not like tea", "User likes tea"]


async def test_a_stated_change_of_mind_supersedes_the_old_preference(client: Client) -> None:
    old = await call(client, "remember", {"content": "Sam drinks coffee every morning", "kind": "preference"})
    new = await call(client, "remember", {"content": "Sam switched to tea every morning", "kind": "preference"})
    assert new["items"][0]["superseded"] == [old["items"][0]["id"]]
    answer = await call(client, "recall", {"detail": "full", "query": "what does Sam drink in the morning"})
    assert hit_texts(answer) == ["Sam switched to tea every morning"]


@pytest.mark.parametrize(
    ("before", "after"),
    [
        # A change that also names the new value lies further from the old statement in meaning
        # (e5: 0.87 and 0.90) than a bare denial does; its words still say it replaces it.
        ("The user likes tea", "The user no longer likes tea; switched to coffee"),
        ("The user drinks oolong tea", "The user no longer drinks oolong tea, drinks green tea instead"),
    ],
)
async def test_a_stated_change_that_names_the_new_value_supersedes_the_old(
    client: Client, before: str, after: str
) -> None:
    old = await call(client, "remember", {"content": before, "kind": "preference"})
    new = await call(client, "remember", {"content": after, "kind": "preference"})
    assert new["items"][0]["superseded"] == [old["items"][0]["id"]]
    answer = await call(client, "recall", {"query": "What does the user drink?", "reinforce": False})
    assert hit_texts(answer) == [after]


async def test_a_statement_of_change_about_something_else_replaces_nothing(client: Client) -> None:
    await call(client, "remember", {"content": "The user likes tea", "kind": "preference"})
    new = await call(
        client, "remember", {"content": "The user no longer likes jazz; switched to techno", "kind": "preference"}
    )
    assert new["items"][0]["superseded"] == []


async def test_an_unmarked_change_of_a_preference_supersedes_the_old_one_and_history_stays(client: Client) -> None:
    old = await call(client, "remember", {"content": "I prefer dark mode in the editor", "kind": "preference"})
    new = await call(client, "remember", {"content": "I prefer light mode in the editor", "kind": "preference"})
    old_id, new_id = old["items"][0]["id"], new["items"][0]["id"]
    assert new["items"][0]["superseded"] == [old_id]
    assert new["items"][0]["conflicts_with"] == []
    answer = await call(client, "recall", {"detail": "full", "query": "which editor mode does the user prefer"})
    assert hit_texts(answer) == ["I prefer light mode in the editor"]
    history = await call(
        client,
        "recall",
        {"detail": "full", "query": "which editor mode does the user prefer", "filters": {"include_superseded": True}},
    )
    by_id = {h["id"]: h for h in history["hits"]}
    assert by_id[old_id]["superseded_by"] == new_id
    # Asked in the old one's own words, history still puts the statement that replaced it first.
    asked = {"query": "dark mode in the editor", "filters": {"include_superseded": True}, "reinforce": False}
    worded = (await call(client, "recall", asked))["hits"]
    assert [h["id"] for h in worded] == [new_id, old_id], worded
    assert "replaced since" in worded[1]["why"], worded[1]["why"]
    assert "replaces an older one" in worded[0]["why"], worded[0]["why"]
    assert by_id[old_id]["valid_to"] is not None
    assert by_id[new_id].get("superseded_by") is None


async def test_an_unjudgeable_conflict_is_kept_and_flagged_and_the_newer_side_ranks_first(
    client: Client, clock: Clock
) -> None:
    old = await call(client, "remember", {"content": "Alice likes cats", "kind": "preference"})
    clock.advance(3600)
    new = await call(client, "remember", {"content": "Alice likes dogs", "kind": "preference"})
    old_id, new_id = old["items"][0]["id"], new["items"][0]["id"]
    assert new["items"][0]["superseded"] == []
    assert new["items"][0]["conflicts_with"] == [old_id]
    query = {"query": "which pets does Alice like", "reinforce": False}
    hits = (await call(client, "recall", {**query, "detail": "full"}))["hits"]
    assert [h["id"] for h in hits] == [new_id, old_id]  # both sides kept, the last said first
    assert hits[0]["score"] >= hits[1]["score"]  # and the scores fall down the list as the places do
    lean = (await call(client, "recall", {**query, "query": "Does Alice like cats?", "explain": True}))["hits"]
    assert [h["id"] for h in lean] == [new_id, old_id]
    assert "said after one it conflicts with" in lean[0]["why"], lean[0]["why"]  # why dogs come first
    assert "a later statement conflicts" in lean[1]["why"], lean[1]["why"]
    assert [h["score"] for h in lean] == [round(h["signals"]["value"], 3) for h in lean]  # the place's value
    assert hits[0]["conflicts_with"] == [old_id]
    assert hits[1]["conflicts_with"] == [new_id]
    clock.advance(3600)
    again = await call(client, "remember", {"content": "Alice likes cats", "kind": "preference"})
    assert again["items"][0]["outcome"] == "merged"
    hits = (await call(client, "recall", {**query, "detail": "full"}))["hits"]
    assert [h["id"] for h in hits] == [old_id, new_id]  # said again: now the latest word
    assert hits[0]["score"] >= hits[1]["score"]
    await call(client, "forget", {"ids": [old_id], "dry_run": False})
    hits = {h["id"]: h for h in (await call(client, "recall", {**query, "detail": "full"}))["hits"]}
    assert hits[new_id]["conflicts_with"] == []  # resolved by forgetting one side


async def test_correcting_one_side_settles_the_flag_everywhere(client: Client, clock: Clock) -> None:
    cats = (await call(client, "remember", {"content": "Alice likes cats", "kind": "preference"}))["items"][0]["id"]
    clock.advance(3600)
    dogs = (await call(client, "remember", {"content": "Alice likes dogs", "kind": "preference"}))["items"][0]
    assert dogs["conflicts_with"] == [cats]
    await call(client, "correct_memory", {"id": cats, "text": "Alice likes cats and hamsters"})
    # Stats counted the pair settled while recall and the browse filter still showed the replaced side.
    assert (await call(client, "stats", {}))["pending"]["conflicts_flagged"] == 0
    assert (await call(client, "list_memories", {"filters": {"conflicts": True}}))["memories"] == []
    query = {"query": "which pets does Alice like", "reinforce": False, "detail": "full"}
    hits = {h["id"]: h for h in (await call(client, "recall", query))["hits"]}
    assert hits[dogs["id"]]["conflicts_with"] == []


async def test_a_restated_change_supersedes_what_was_said_in_between(client: Client, clock: Clock) -> None:
    change = "The user switched from walking to cycling for the commute"
    first = await call(client, "remember", {"content": change, "kind": "preference"})
    clock.advance(3600)
    between = await call(
        client, "remember", {"content": "The user prefers walking for the commute", "kind": "preference"}
    )
    between_id = between["items"][0]["id"]
    assert between["items"][0]["superseded"] == []  # the rules cannot tell: flagged, kept
    clock.advance(3600)
    again = await call(client, "remember", {"content": change, "kind": "preference"})
    assert again["items"][0]["outcome"] == "merged"
    assert again["items"][0]["id"] == first["items"][0]["id"]
    assert again["items"][0]["superseded"] == [between_id]
    answer = await call(client, "recall", {"detail": "full", "query": "how does the user commute", "reinforce": False})
    assert hit_texts(answer) == [change]


async def test_unrelated_facts_are_neither_superseded_nor_flagged(client: Client) -> None:
    await call(client, "remember", {"content": "The deploy runs on Fridays"})
    new = await call(client, "remember", {"content": "Actually the team now eats lunch at noon"})
    assert new["items"][0]["superseded"] == []
    assert new["items"][0]["conflicts_with"] == []


async def test_two_items_of_one_batch_that_replace_the_same_memory_are_both_stored(client: Client) -> None:
    old = await call(client, "remember", {"content": "I like green tea in the morning", "kind": "preference"})
    batch = await call(
        client,
        "remember",
        {
            "memories": [
                {"content": "I now drink coffee instead of green tea in the morning", "kind": "preference"},
                {"content": "I do not like green tea in the morning", "kind": "preference"},
            ]
        },
    )
    assert batch["stored"] == 2
    replaced = [item["superseded"] for item in batch["items"]]
    assert replaced.count([old["items"][0]["id"]]) == 1
