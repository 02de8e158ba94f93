"""Browsing and correcting: list_memories pages, get_memory tells the history, correct_memory keeps it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client

from mcp_memory.config import load_settings
from mcp_memory.mcp.server import Server, open_server
from tests.conftest import Clock, call, call_error, hit_texts, row_counts
from tests.test_hierarchy import _summarized_standup

pytestmark = pytest.mark.anyio

# Seven memories with nothing in common, so no rule relates one to another.
NOTES = [
    "The staging cluster runs Kubernetes 1.31",
    "Dana prefers dark roast coffee from Ethiopia",
    "The invoice service is written in Go",
    "Our office plants get watered every Thursday",
    "The quarterly report is due on the fifth of January",
    "Marek plays the cello in a string quartet",
    "The VPN gateway sits in the Frankfurt region",
]
START = datetime(2026, 3, 1, tzinfo=UTC)


async def _store_notes(client: Client) -> list[str]:
    """The notes, one day apart and of rising importance; returns their ids in that order."""
    items = [
        {"content": text, "occurred_at": (START + timedelta(days=i)).isoformat(), "importance": 0.1 + i / 10}
        for i, text in enumerate(NOTES)
    ]
    result = await call(client, "remember", {"memories": items})
    assert [i["outcome"] for i in result["items"]] == ["stored"] * len(NOTES)
    return [i["id"] for i in result["items"]]


async def _all_pages(client: Client, args: dict[str, Any]) -> list[list[str]]:
    pages: list[list[str]] = []
    cursor = None
    while True:
        page = await call(client, "list_memories", {**args, **({"cursor": cursor} if cursor else {})})
        pages.append([m["id"] for m in page["memories"]])
        cursor = page.get("next_cursor")
        if cursor is None:
            return pages
        assert len(pages) < 20, "paging never ends"


async def test_list_pages_through_every_memory_once_in_each_sort(client: Client) -> None:
    ids = await _store_notes(client)
    pages = await _all_pages(client, {"limit": 3})
    assert [len(p) for p in pages] == [3, 3, 1]
    assert [i for p in pages for i in p] == ids[::-1]  # when it happened, newest first
    oldest_first = await _all_pages(client, {"limit": 2, "descending": False})
    assert [i for p in oldest_first for i in p] == ids
    by_importance = await _all_pages(client, {"limit": 4, "sort": "importance"})
    assert [i for p in by_importance for i in p] == ids[::-1]
    first = await call(client, "list_memories", {"limit": 1})
    assert first["memories"][0]["text"] == NOTES[-1]
    assert set(first["memories"][0]) >= {"id", "text", "kind", "tags", "importance", "occurred_at", "tier"}
    assert "occurrence_ids" not in first["memories"][0]  # listed entries are lean; detail="full" has it all
    full = await call(client, "list_memories", {"limit": 1, "detail": "full"})
    assert full["memories"][0]["occurrence_ids"]


async def test_a_cursor_is_refused_by_another_sort_and_a_forged_one_names_the_fix(client: Client) -> None:
    await _store_notes(client)
    cursor = (await call(client, "list_memories", {"limit": 2}))["next_cursor"]
    error = await call_error(client, "list_memories", {"limit": 2, "sort": "importance", "cursor": cursor})
    assert "cursor" in error
    assert "omit it to start over" in error
    assert "omit it" in await call_error(client, "list_memories", {"cursor": "not-a-cursor"})
    assert "between 1 and 200" in await call_error(client, "list_memories", {"limit": 0})


async def test_list_filters_narrow_as_recall_and_by_pin_and_conflict(client: Client) -> None:
    ids = await _store_notes(client)
    await call(client, "remember", {"content": "Deploys need two approvals", "kind": "instruction", "tags": ["ops"]})
    await call(client, "pin", {"id": ids[2]})
    by_kind = await call(client, "list_memories", {"filters": {"kinds": ["instruction"]}})
    assert [m["text"] for m in by_kind["memories"]] == ["Deploys need two approvals"]
    assert [m["text"] for m in (await call(client, "list_memories", {"filters": {"tags": ["ops"]}}))["memories"]] == [
        "Deploys need two approvals"
    ]
    pinned = await call(client, "list_memories", {"filters": {"pinned": True}})
    assert [m["id"] for m in pinned["memories"]] == [ids[2]]
    unpinned = await call(client, "list_memories", {"filters": {"pinned": False}, "limit": 50})
    assert ids[2] not in {m["id"] for m in unpinned["memories"]}
    assert len(unpinned["memories"]) == len(NOTES)
    early = await call(
        client, "list_memories", {"filters": {"occurred_before": (START + timedelta(days=2)).isoformat()}}
    )
    assert [m["id"] for m in early["memories"]] == ids[1::-1]
    assert (await call(client, "list_memories", {"filters": {"conflicts": True}}))["memories"] == []
    assert (await call(client, "list_memories", {"filters": {"level": 1}}))["memories"] == []
    assert "between 0 and 3" in await call_error(client, "list_memories", {"filters": {"level": 9}})


async def test_a_correction_is_a_new_version_and_the_history_is_whole(client: Client) -> None:
    ids = await _store_notes(client)
    await call(client, "pin", {"id": ids[0]})
    first = await call(client, "correct_memory", {"id": ids[0], "text": "The staging cluster runs Kubernetes 1.32"})
    assert first["outcome"] == "corrected"
    assert first["replaces"] == ids[0]
    assert first["changed"] == ["text"]
    second = await call(client, "correct_memory", {"id": first["id"], "tags": ["infra"], "importance": 0.9})
    assert sorted(second["changed"]) == ["importance", "tags"]
    v1, v2, v3 = ids[0], first["id"], second["id"]
    assert len({v1, v2, v3}) == 3  # the same words with new tags are still a new version

    hits = await call(client, "recall", {"query": "Which Kubernetes version does staging run?", "detail": "full"})
    texts = hit_texts(hits) + [p["text"] for p in hits["pinned"]]
    assert "The staging cluster runs Kubernetes 1.32" in texts
    assert "The staging cluster runs Kubernetes 1.31" not in texts
    current = (await call(client, "get_memory", {"id": v3}))["memory"]
    assert current["pinned"] is True
    assert current["tags"] == ["infra"]
    assert current["importance"] == 0.9
    assert current["occurred_at"].startswith("2026-03-01")  # when it happened carries over

    oldest = await call(client, "get_memory", {"id": v1})
    assert oldest["memory"]["superseded_by"] == v2
    assert [v["id"] for v in oldest["replaced_by"]] == [v2, v3]
    assert oldest["current_id"] == v3
    assert oldest["replaces"] == []
    newest = await call(client, "get_memory", {"id": v3})
    assert [v["id"] for v in newest["replaces"]] == [v1, v2]
    assert newest["replaces"][0]["text"] == "The staging cluster runs Kubernetes 1.31"
    assert newest["current_id"] == v3
    assert newest["replaced_by"] == []
    assert len(newest["occurrences"]) == 1
    assert newest["occurrences"][0]["occurred_at"].startswith("2026-03-01")

    error = await call_error(client, "correct_memory", {"id": v1, "text": "The staging cluster runs Kubernetes 1.33"})
    assert repr(v2) in error  # a replaced memory names what replaced it
    assert "changes nothing" in await call_error(client, "correct_memory", {"id": v3, "importance": 0.9})
    assert "at least one of" in await call_error(client, "correct_memory", {"id": v3})
    listed = await call(client, "list_memories", {"filters": {"include_superseded": True}, "limit": 50})
    assert {v1, v2, v3} <= {m["id"] for m in listed["memories"]}
    assert v1 not in {m["id"] for m in (await call(client, "list_memories", {"limit": 50}))["memories"]}


async def test_a_chain_broken_by_a_forget_ends_and_the_forgotten_one_says_when_it_went(client: Client) -> None:
    ids = [
        (await call(client, "remember", {"content": f"My locker is number {n}", "key": "locker"}))["items"][0]["id"]
        for n in (12, 14, 16)
    ]
    await call(client, "forget", {"ids": [ids[1]], "dry_run": False})
    oldest = await call(client, "get_memory", {"id": ids[0]})
    assert oldest["memory"]["superseded_by"] == ids[1]
    assert oldest.get("current_id") is None  # the chain ends in a deletion
    gone = await call_error(client, "get_memory", {"id": ids[1]})
    assert f"No memory by the id of {ids[1]!r} was found: it was forgotten on " in gone


async def test_a_correction_into_words_another_memory_holds_merges_into_it(client: Client) -> None:
    ids = await _store_notes(client)
    result = await call(client, "correct_memory", {"id": ids[1], "text": NOTES[3]})
    assert (result["outcome"], result["id"]) == ("merged", ids[3])
    assert (await call(client, "get_memory", {"id": ids[1]}))["current_id"] == ids[3]
    assert len((await call(client, "get_memory", {"id": ids[3]}))["occurrences"]) == 2


async def test_a_correction_redacts_a_secret_and_keeps_it_out_of_history(client: Client, data_dir: Path) -> None:
    ids = await _store_notes(client)
    key = "sk-proj-" + "Zx9" * 12
    result = await call(client, "correct_memory", {"id": ids[2], "text": f"The invoice service uses API key {key}"})
    text = (await call(client, "get_memory", {"id": result["id"]}))["memory"]["text"]
    assert key not in text
    assert "invoice service" in text
    assert not any(key.encode() in p.read_bytes() for p in data_dir.rglob("*") if p.is_file())  # noqa: ASYNC240


async def test_get_memory_of_a_summary_and_its_source_and_no_correcting_a_summary(
    runtime: Server, client: Client, clock: Clock
) -> None:
    summary = await _summarized_standup(runtime, client, clock, 1, "Billing moves to PostgreSQL 16 on 2026-12-09.")
    detail = await call(client, "get_memory", {"id": summary})
    sources = detail["memory"]["source_ids"]
    assert len(sources) == 3
    assert detail["memory"]["level"] == 1
    source = await call(client, "get_memory", {"id": sources[0]})
    assert source["summarized_in"] == [summary]
    assert source["memory"]["tier"] == "archived"
    assert "undo_summary" in await call_error(client, "correct_memory", {"id": summary, "text": "Billing moves later."})
    listed = await call(client, "list_memories", {"filters": {"level": 1}})
    assert [m["id"] for m in listed["memories"]] == [summary]


async def test_get_memory_shows_the_links_recall_follows(client: Client) -> None:
    a = await call(client, "remember", {"content": "Project Halvorsen ships the new billing dashboard"})
    b = await call(client, "remember", {"content": "Priya leads Project Halvorsen from the Oslo office"})
    await call(client, "remember", {"content": "The cafeteria closes at three on Fridays"})
    detail = await call(client, "get_memory", {"id": a["items"][0]["id"]})
    linked = {link["id"]: link["via"] for link in detail["links"]}
    assert b["items"][0]["id"] in linked
    assert "halvorsen" in linked[b["items"][0]["id"]].lower()


async def test_another_principals_ids_are_not_found_and_nothing_of_theirs_changes(data_dir: Path, mode: str) -> None:
    async with (
        open_server(load_settings(data_dir=data_dir, principal="alice")) as ra,
        open_server(load_settings(data_dir=data_dir, principal="bob")) as rb,
        Client(ra.mcp, mode=mode) as alice,
        Client(rb.mcp, mode=mode) as bob,
    ):
        theirs = (await call(bob, "remember", {"content": "Bob's locker code is in the blue notebook"}))["items"][0]
        before = row_counts(data_dir, "bob")
        missing = "01ZZZZZZZZZZZZZZZZZZZZZZZZ"
        for tool, args in (("get_memory", {}), ("correct_memory", {"text": "Alice was here"})):
            theirs_error = await call_error(alice, tool, {"id": theirs["id"], **args})
            assert theirs_error == (await call_error(alice, tool, {"id": missing, **args})).replace(
                missing, theirs["id"]
            )
        assert (await call(alice, "list_memories", {"limit": 200}))["memories"] == []
        assert row_counts(data_dir, "bob") == before
        assert (await call(bob, "get_memory", {"id": theirs["id"]}))["current_id"] == theirs["id"]


async def test_a_principal_wide_memory_corrected_from_a_namespace_stays_principal_wide(data_dir: Path) -> None:
    async with (
        open_server(load_settings(data_dir=data_dir, principal="alice")) as wide_rt,
        open_server(load_settings(data_dir=data_dir, principal="alice", namespace="proj-a")) as a_rt,
        open_server(load_settings(data_dir=data_dir, principal="alice", namespace="proj-b")) as b_rt,
        Client(wide_rt.mcp) as wide,
        Client(a_rt.mcp) as a,
        Client(b_rt.mcp) as b,
    ):
        stored = await call(wide, "remember", {"content": "Alice reviews pull requests every morning"})
        result = await call(
            a, "correct_memory", {"id": stored["items"][0]["id"], "text": "Alice reviews pull requests every afternoon"}
        )
        seen_by_b = await call(b, "get_memory", {"id": result["id"]})
        assert seen_by_b["memory"].get("namespace") is None


async def test_the_tools_say_which_of_them_only_read(client: Client) -> None:
    tools = {t.name: t.annotations for t in (await client.list_tools()).tools}
    for name in ("list_memories", "get_memory"):
        hints = tools[name]
        assert hints is not None
        assert hints.read_only_hint is True
    correct = tools["correct_memory"]
    assert correct is not None
    assert correct.read_only_hint is False
    assert correct.idempotent_hint is False


async def test_correcting_a_pinned_memory_near_the_cap_counts_it_once(data_dir: Path) -> None:
    settings = load_settings(data_dir=data_dir, principal="alice", limits={"pinned_cap_tokens": 30})
    async with open_server(settings) as runtime, Client(runtime.mcp) as client:
        rule = "Never deploy the payment service on a Friday afternoon"
        stored = await call(client, "remember", {"content": rule, "kind": "instruction", "pinned": True})
        result = await call(client, "correct_memory", {"id": stored["items"][0]["id"], "text": rule + " or evening"})
        assert (await call(client, "get_memory", {"id": result["id"]}))["memory"]["pinned"] is True
