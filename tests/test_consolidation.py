"""Consolidation and restatements: what the user says again is one fact, and counts as recent."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp.client import Client

from mcp_memory.config import load_settings
from mcp_memory.mcp.server import Server, open_server
from mcp_memory.services import lifecycle
from tests.conftest import Clock, call, hit_texts

pytestmark = pytest.mark.anyio
HOUR = 3600.0


async def _say(
    client: Client, text: str, session: str, kind: str = "preference", importance: float | None = None
) -> str:
    item: dict[str, object] = {"content": text, "kind": kind, "session_id": session}
    if importance is not None:
        item["importance"] = importance
    result = await call(client, "remember", item)
    memory_id: str = result["items"][0]["id"]
    return memory_id


async def test_a_merged_restatement_refreshes_recency_and_delays_decay(
    runtime: Server, client: Client, clock: Clock
) -> None:
    kept = await _say(client, "The user likes the noodle bar on Elm Street for team lunches", "s1", "fact", 0.3)
    faded = await _say(client, "The office printer on floor 2 jams on A3 paper", "s1", "fact", 0.3)
    clock.advance(400 * HOUR)
    assert await _say(client, "The user likes the noodle bar on Elm Street for team lunches", "s2", "fact") == kept
    why = {
        h["id"]: h["signals"]
        for h in (
            await call(
                client, "recall", {"detail": "full", "query": "lunch printer", "explain": True, "reinforce": False}
            )
        )["hits"]
    }
    assert why[kept]["recency"] == pytest.approx(1.0)  # last seen now, not 400 hours ago
    assert why[faded]["recency"] < 0.05
    # importance 0.3: S = 158.4 h. 100 h after the restatement R = 0.53; 500 h after creation R = 0.04
    clock.advance(100 * HOUR)
    assert (await runtime.scheduler.run_once())["evicted"] == 1
    current = await call(client, "recall", {"detail": "full", "query": "lunch printer", "reinforce": False})
    assert [h["id"] for h in current["hits"]] == [kept]


@pytest.fixture
async def strict_runtime(data_dir: Path, clock: Clock) -> AsyncIterator[Server]:
    """Write-time merging held to near-identical cosines, so paraphrases are stored apart."""
    settings = load_settings(data_dir=data_dir, principal="alice", recall={"duplicate_similarity": 0.999})
    async with open_server(settings, clock=clock) as rt:
        yield rt


async def test_a_preference_stated_in_two_sessions_is_consolidated_into_one_fact(
    strict_runtime: Server, clock: Clock
) -> None:
    async with Client(strict_runtime.mcp, mode="legacy") as client:
        first = await _say(client, "I prefer dark roast coffee in the morning", "monday")
        clock.advance(24 * HOUR)
        second = await _say(client, "In the mornings I prefer a dark roast coffee.", "tuesday")
        assert first != second  # not merged when written
        once = await _say(client, "I prefer invoice INV-767 by email", "monday")
        other = await _say(client, "I prefer invoice INV-372 by email", "tuesday")
        same_day = await _say(client, "I prefer short stand-up meetings", "wednesday")
        also_same_day = await _say(client, "I prefer short stand-up meetings, please", "wednesday")
        clock.advance(HOUR)
        report = await strict_runtime.scheduler.run_once()
        assert report["facts"] == 1
        assert report["consolidated"] == 2
        hits = (await call(client, "recall", {"detail": "full", "query": "morning coffee", "reinforce": False}))["hits"]
        coffee = [h for h in hits if "roast" in h["text"]]
        assert len(coffee) == 1
        fact = coffee[0]
        assert fact["text"] == "In the mornings I prefer a dark roast coffee."  # the wording said last
        assert fact["kind"] == "preference"
        assert sorted(fact["source_ids"]) == sorted([first, second])
        assert len(fact["occurrence_ids"]) == 2
        archived = await call(
            client,
            "recall",
            {"detail": "full", "query": "morning coffee", "reinforce": False, "filters": {"include_archived": True}},
        )
        tiers = {h["id"]: h["tier"] for h in archived["hits"]}
        assert tiers[first] == tiers[second] == "archived"
        # identifiers differ: never one fact (ADR 5); one session only: not yet a fact the user holds
        invoices = {
            h["id"] for h in (await call(client, "recall", {"detail": "full", "query": "invoice by email"}))["hits"]
        }
        assert {once, other} <= invoices
        meetings = {
            h["id"] for h in (await call(client, "recall", {"detail": "full", "query": "stand-up meetings"}))["hits"]
        }
        assert {same_day, also_same_day} <= meetings
        # a restatement of the fact merges into it; undo takes the fact apart again
        again = await call(
            client, "remember", {"content": "In the mornings I prefer a dark roast coffee.", "kind": "preference"}
        )
        assert again["items"][0]["id"] == fact["id"]
        await call(client, "undo_summary", {"id": fact["id"]})
        restored = {
            h["id"] for h in (await call(client, "recall", {"detail": "full", "query": "dark roast coffee"}))["hits"]
        }
        assert {first, second} <= restored


async def test_compression_leaves_preferences_to_consolidation(runtime: Server, client: Client, clock: Clock) -> None:
    preference = await _say(client, "The user prefers window seats on long flights", "trip", importance=0.3)
    notes = (  # a session that restates one fact and acknowledges it: a summary keeps all it says
        "The hotel breakfast starts at seven in the lobby.",
        "Great, thanks a lot.",
        "So breakfast at the hotel starts at seven, in the lobby.",
        "Perfect, see you then, and thanks again!",
        "Alright, thank you so much, that works for me.",
    )
    for note in notes:
        await _say(client, note, "trip", "fact", 0.4)
    clock.advance(300 * HOUR)
    report = await runtime.scheduler.run_once()
    assert report["summaries"] == 1
    answer = await call(client, "recall", {"detail": "full", "query": "window seat on flights", "reinforce": False})
    assert preference in [h["id"] for h in answer["hits"]]
    assert "The user prefers window seats on long flights" in hit_texts(answer)


async def test_undoing_a_fact_leaves_no_conflict_flag_naming_it(strict_runtime: Server, clock: Clock) -> None:
    async with Client(strict_runtime.mcp, mode="legacy") as client:
        first = await _say(client, "Alice likes cats", "monday")
        clock.advance(24 * HOUR)
        second = await _say(client, "Alice really likes cats", "tuesday")
        dogs = await _say(client, "Alice likes dogs", "tuesday")
        clock.advance(HOUR)
        assert (await strict_runtime.scheduler.run_once())["facts"] == 1
        query = {"query": "which pets does Alice like", "reinforce": False}
        fact = next(h for h in (await call(client, "recall", {**query, "detail": "full"}))["hits"] if h["source_ids"])
        assert fact["conflicts_with"] == [dogs]  # the positive control: the fact carries the flag
        await call(client, "undo_summary", {"id": fact["id"]})
        hits = {h["id"]: h for h in (await call(client, "recall", {**query, "detail": "full"}))["hits"]}
        assert fact["id"] not in hits[dogs]["conflicts_with"]
        assert {first, second} <= set(hits)


async def test_a_new_statement_is_compared_with_every_older_one_however_large_the_store(
    strict_runtime: Server, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lifecycle, "MAX_NEW_PER_PASS", 2)  # a pass compares two new memories with all
    async with Client(strict_runtime.mcp, mode="legacy") as client:
        first = await _say(client, "I prefer dark roast coffee in the morning", "monday")
        await _say(client, "I prefer aisle seats on long flights", "monday")
        assert (await strict_runtime.scheduler.run_once())["facts"] == 0  # both compared: nothing alike
        clock.advance(24 * HOUR)
        await _say(client, "I prefer stand-up meetings before ten", "tuesday")
        await _say(client, "I prefer invoices by email", "tuesday")
        second = await _say(client, "In the mornings I prefer a dark roast coffee.", "tuesday")
        facts = [(await strict_runtime.scheduler.run_once())["facts"] for _ in range(2)]
        assert facts == [0, 1]  # the restatement, new in the second pass, meets the oldest memory
        fact = next(
            h
            for h in (await call(client, "recall", {"detail": "full", "query": "morning coffee"}))["hits"]
            if h["source_ids"]
        )
        assert sorted(fact["source_ids"]) == sorted([first, second])
