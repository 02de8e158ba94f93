"""A user who changed their mind is answered with the new fact; an unjudgeable conflict is flagged."""

from __future__ import annotations

import pytest
from mcp.client import Client

from mcp_memory.services.rules import relation
from tests.conftest import call, hit_texts

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("old", "new", "kind", "expected"),
    [
        ("User likes tea", "User does not like tea", "fact", "negation"),
        ("I prefer dark mode in the editor", "I prefer light mode in the editor", "preference", "conflict"),
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
    ],
)
def test_the_relation_rules(old: str, new: str, kind: str, expected: str) -> None:
    assert relation(old, new, kind) == expected


async def test_a_denial_supersedes_the_old_statement_and_keeps_it_in_history(client: Client) -> None:
    old = await call(client, "remember", {"content": "User likes tea", "kind": "preference"})
    new = await call(client, "remember", {"content": "User does not like tea", "kind": "preference"})
    assert new["items"][0]["outcome"] == "stored"
    assert new["items"][0]["superseded"] == [old["items"][0]["id"]]
    assert hit_texts(await call(client, "recall", {"query": "does the user like tea"})) == ["User does not like tea"]
    history = await call(client, "recall", {"query": "does the user like tea", "filters": {"include_superseded": True}})
    assert sorted(hit_texts(history)) == ["User does not like tea", "User likes tea"]


async def test_a_stated_change_of_mind_supersedes_the_old_preference(client: Client) -> None:
    old = await call(client, "remember", {"content": "Sam drinks coffee every morning", "kind": "preference"})
    new = await call(client, "remember", {"content": "Sam switched to tea every morning", "kind": "preference"})
    assert new["items"][0]["superseded"] == [old["items"][0]["id"]]
    answer = await call(client, "recall", {"query": "what does Sam drink in the morning"})
    assert hit_texts(answer) == ["Sam switched to tea every morning"]


async def test_a_swapped_preference_without_a_word_of_change_is_kept_and_flagged(client: Client) -> None:
    old = await call(client, "remember", {"content": "I prefer dark mode in the editor", "kind": "preference"})
    new = await call(client, "remember", {"content": "I prefer light mode in the editor", "kind": "preference"})
    old_id, new_id = old["items"][0]["id"], new["items"][0]["id"]
    assert new["items"][0]["superseded"] == []
    assert new["items"][0]["conflicts_with"] == [old_id]
    hits = {h["id"]: h for h in (await call(client, "recall", {"query": "editor colour mode"}))["hits"]}
    assert hits[old_id]["conflicts_with"] == [new_id]
    assert hits[new_id]["conflicts_with"] == [old_id]
    await call(client, "forget", {"ids": [old_id], "dry_run": False})
    hits = {h["id"]: h for h in (await call(client, "recall", {"query": "editor colour mode"}))["hits"]}
    assert hits[new_id]["conflicts_with"] == []  # resolved by forgetting one side


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
