"""Links: recall follows shared rare entities and session neighbours from its first hits; a forget
takes a memory's links with it; the relevance floor says when nothing else is relevant."""

from __future__ import annotations

import sqlite3

import pytest
from mcp.client import Client

from mcp_memory.core.models import Scope
from mcp_memory.mcp.server import Server
from mcp_memory.storage.links import MAX_LINKS
from mcp_memory.storage.pool import principal_file
from tests.conftest import call

pytestmark = pytest.mark.anyio

OTHERS = [
    "The user prefers dark mode in every app",
    "The user is learning Japanese",
    "The user has a dog named Pixel",
    "The user's laptop is a ThinkPad X1 Carbon",
    "The user drinks oolong tea without sugar",
    "The user runs fish as the shell",
]


async def _remember(client: Client, texts: list[str], session: str) -> list[str]:
    result = await call(client, "remember", {"memories": [{"content": t, "session_id": session} for t in texts]})
    return [str(item["id"]) for item in result["items"]]


async def test_a_rare_shared_name_links_an_answer_from_another_session(client: Client) -> None:
    await _remember(client, OTHERS, "s0")
    (lead,) = await _remember(client, ["Nadia leads the Falcon project at work"], "s1")
    (ships,) = await _remember(client, ["Falcon ships its public beta on June 5"], "s2")
    result = await call(client, "recall", {"query": "Which project does Nadia lead?", "k": 5, "reinforce": False})
    hits = {h["id"]: h for h in result["hits"]}
    assert result["hits"][0]["id"] == lead
    assert ships in hits
    assert f"via link from {lead} ('falcon')" in hits[ships]["why"]


async def test_a_name_most_memories_share_links_nothing(client: Client) -> None:
    await _remember(client, OTHERS, "s0")
    ids = await _remember(
        client,
        ["Falcon is the team's main project", "Falcon ships its public beta on June 5", "Falcon uses PostgreSQL 16"],
        "s1",
    )
    result = await call(
        client, "recall", {"query": "What is the team's main project?", "k": 10, "explain": True, "reinforce": False}
    )
    assert result["hits"][0]["id"] == ids[0]
    # three of nine memories name Falcon: over the share that links, so nothing comes "via" it
    assert not any("'falcon')" in h["why"] for h in result["hits"])


async def test_the_next_turn_of_a_dialog_comes_with_its_neighbour(client: Client) -> None:
    await _remember(client, [*OTHERS, *(f"The user finished chapter {i} of the Rust book" for i in range(1, 13))], "s0")
    first, second = await _remember(
        client,
        ["Caroline: I finally picked up a new hobby last month.", "Caroline: It is pottery, every Tuesday."],
        "s1",
    )
    result = await call(client, "recall", {"query": "What new hobby did she pick up?", "k": 5, "reinforce": False})
    hits = {h["id"]: h for h in result["hits"]}
    assert result["hits"][0]["id"] == first
    assert second in hits
    assert f"via link from {first} (session)" in hits[second]["why"]


async def test_forget_takes_a_memorys_links_with_it(client: Client, runtime: Server) -> None:
    await _remember(client, OTHERS, "s0")
    (lead,) = await _remember(client, ["Nadia leads the Falcon project at work"], "s1")
    (ships,) = await _remember(client, ["Falcon ships its public beta on June 5"], "s2")

    def falcon_rows() -> int:
        conn = sqlite3.connect(principal_file(runtime.settings.data_dir, "alice"))
        try:
            return int(conn.execute("SELECT COUNT(*) FROM memory_entities WHERE entity = 'falcon'").fetchone()[0])
        finally:
            conn.close()

    assert falcon_rows() == 2
    await call(client, "forget", {"ids": [ships], "dry_run": False})
    assert falcon_rows() == 1  # the forgotten memory's entities went with it; the other's stay
    result = await call(client, "recall", {"query": "Which project does Nadia lead?", "k": 10, "reinforce": False})
    assert result["hits"][0]["id"] == lead
    assert ships not in {h["id"] for h in result["hits"]}
    assert not any("via link" in h["why"] and "'falcon'" in h["why"] for h in result["hits"])


async def test_recall_returns_fewer_than_k_when_nothing_else_is_relevant_and_says_so(client: Client) -> None:
    await _remember(client, [*OTHERS, "The user lives in Berlin", "The user works at a logistics company"], "s0")
    floored = await call(client, "recall", {"query": "Which tea does the user drink?", "k": 10, "reinforce": False})
    assert floored["hits"][0]["text"] == "The user drinks oolong tea without sugar"
    assert len(floored["hits"]) < 8
    assert floored["below_floor"] == 8 - len(floored["hits"])
    assert "no closer to the question than" in floored["note"]
    everything = await call(
        client, "recall", {"query": "Which tea does the user drink?", "k": 10, "floor": False, "reinforce": False}
    )
    assert len(everything["hits"]) == 8
    assert "note" not in everything


async def test_facts_stored_in_one_call_are_not_each_others_neighbours(client: Client) -> None:
    await _remember(client, OTHERS, "s0")
    result = await call(client, "recall", {"query": "Which tea does the user drink?", "k": 10, "reinforce": False})
    assert not any("(session)" in h["why"] for h in result["hits"])


async def test_an_entity_many_memories_name_still_gives_each_source_its_full_share(
    client: Client, runtime: Server
) -> None:
    """Recall reads only an entity's first memories (USABLE_PER_ENTITY): a source still gets MAX_LINKS
    targets, the first stored, however many memories name the entity (the share is taken from a
    large store's population here, so that 60 of them count as rare)."""
    texts = [f"Falcon milestone {i}: the {i}th review of the Falcon plan passed" for i in range(60)]
    ids = await _remember(client, texts, "s-falcon")
    scope = Scope("alice")
    for source in (ids[0], ids[30]):
        found = [link for link in await runtime.store.links(scope, [source], 100_000) if link.via]
        assert len(found) == MAX_LINKS
        expected = [m for m in ids if m != source][:MAX_LINKS]
        assert sorted(link.target for link in found) == sorted(expected)
