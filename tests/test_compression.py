"""Hierarchical compression (extractive path): lineage, source ids on hits, fact check, undo."""

from __future__ import annotations

import pytest
from mcp.client import Client

from mcp_memory.core.errors import ConflictError
from mcp_memory.core.models import Scope
from mcp_memory.mcp.server import Server
from mcp_memory.services import summarize
from mcp_memory.services.lifecycle import MAX_GROUP
from mcp_memory.storage.lifecycle import LifecycleStore
from tests.conftest import BILLING_SESSION, Clock, call, call_error

pytestmark = pytest.mark.anyio
HOUR = 3600.0

SESSION = BILLING_SESSION


async def _store_session(client: Client, texts: list[str], importance: float = 0.5) -> list[str]:
    result = await call(
        client,
        "remember",
        {"memories": [{"content": t, "session_id": "s-offsite", "importance": importance} for t in texts]},
    )
    return [item["id"] for item in result["items"]]


def test_an_extractive_summary_keeps_identifiers_within_thirty_percent() -> None:
    summary = summarize.extractive(SESSION)
    assert summary.tokens <= 0.30 * summary.source_tokens
    assert "PostgreSQL 16" in summary.text
    assert "tools/migrate_billing.py" in summary.text
    assert "thanks" not in summary.text.lower()  # acknowledgements go
    assert summarize.check(SESSION, summary) is None


def test_the_fact_check_rejects_a_summary_that_drops_identifiers_or_runs_long() -> None:
    dropped = summarize.Summary(
        text="We decided to move the billing database.",
        tokens=8,
        source_tokens=120,
        coverage=summarize.coverage(SESSION, "We decided to move the billing database."),
    )
    assert "identifiers" in str(summarize.check(SESSION, dropped))
    long = summarize.Summary(text=" ".join(SESSION), tokens=120, source_tokens=120, coverage=1.0)
    assert "over 30%" in str(summarize.check(SESSION, long))


async def test_a_faded_session_becomes_a_summary_with_its_sources_linked(
    runtime: Server, client: Client, clock: Clock
) -> None:
    ids = await _store_session(client, SESSION)
    clock.advance(300 * HOUR)  # importance 0.5: S = 216 h, R = 0.25 < 0.3, idle > a day; never evicted
    report = await runtime.scheduler.run_once()
    assert report["summaries"] == 1
    assert report["summarized"] == len(SESSION)
    hits = (
        await call(
            client, "recall", {"detail": "full", "query": "which database is billing moving to", "reinforce": False}
        )
    )["hits"]
    summary = hits[0]
    assert summary["level"] == 1
    assert summary["kind"] == "summary"
    assert sorted(summary["source_ids"]) == sorted(ids)
    assert "PostgreSQL 16" in summary["text"]
    assert (await call(client, "stats", {}))["fact_check"] == {"passed": 1, "failed": 0, "pass_rate": 1.0}
    assert all(h["level"] == 1 for h in hits)  # the sources left default recall...
    archived = await call(
        client,
        "recall",
        {"detail": "full", "query": "thanks, see you then", "reinforce": False, "filters": {"include_archived": True}},
    )
    assert any(h["tier"] == "archived" and h["id"] in ids for h in archived["hits"])  # ...but are kept
    lean = await call(
        client, "recall", {"query": "thanks, see you then", "reinforce": False, "filters": {"include_archived": True}}
    )
    assert all(h["why"].startswith("archived") for h in lean["hits"] if h["id"] in ids)  # a lean hit says so
    assert any(h["id"] in ids for h in lean["hits"])


async def test_a_summary_can_be_undone(runtime: Server, client: Client, clock: Clock) -> None:
    ids = await _store_session(client, SESSION)
    clock.advance(300 * HOUR)
    await runtime.scheduler.run_once()
    summary_id = (await call(client, "recall", {"detail": "full", "query": "billing database", "reinforce": False}))[
        "hits"
    ][0]["id"]
    undone = await call(client, "undo_summary", {"id": summary_id})
    assert sorted(undone["restored"]) == sorted(ids)
    hits = (await call(client, "recall", {"detail": "full", "query": "billing database", "k": 10, "reinforce": False}))[
        "hits"
    ]
    assert SESSION[0] in [h["text"] for h in hits]
    assert all(h["level"] == 0 for h in hits)
    assert "was found" in await call_error(client, "undo_summary", {"id": summary_id})
    clock.advance(HOUR)
    assert (await runtime.scheduler.run_once())["summaries"] == 0  # an undone summary is not made again


async def test_forgetting_a_source_drops_its_summary_and_returns_the_others(
    runtime: Server, client: Client, clock: Clock
) -> None:
    ids = await _store_session(client, SESSION)
    clock.advance(300 * HOUR)
    await runtime.scheduler.run_once()
    await call(client, "forget", {"ids": [ids[0]], "dry_run": False})
    hits = (await call(client, "recall", {"detail": "full", "query": "migration script", "k": 10, "reinforce": False}))[
        "hits"
    ]
    assert all(h["level"] == 0 for h in hits)
    assert SESSION[3] in [h["text"] for h in hits]


async def test_a_session_that_cannot_be_summarized_faithfully_is_left_alone_after_three_tries(
    runtime: Server, client: Client, clock: Clock
) -> None:
    dense = [f"Ticket INC-{4000 + i} affects host db-{i:02d}.internal and build v3.{i}.1" for i in range(6)]
    await _store_session(client, dense)
    clock.advance(300 * HOUR)
    for attempt in range(4):
        report = await runtime.scheduler.run_once()
        assert report["summaries"] == 0
        assert report["compression_failures"] == (1 if attempt < 3 else 0)  # resistant after three failures
        clock.advance(HOUR)
    hits = (await call(client, "recall", {"detail": "full", "query": "INC-4003", "reinforce": False}))["hits"]
    assert hits[0]["level"] == 0
    stats = await call(client, "stats", {})
    assert stats["fact_check"] == {"passed": 0, "failed": 3, "pass_rate": 0.0}
    assert stats["pending"]["compression_resistant"] == len(dense)


async def test_pinned_and_recent_memories_are_not_compressed(runtime: Server, client: Client, clock: Clock) -> None:
    await _store_session(client, SESSION)
    clock.advance(10 * HOUR)  # recent: not a day idle
    assert (await runtime.scheduler.run_once())["summaries"] == 0


async def test_a_source_forgotten_during_a_pass_is_not_brought_back(runtime: Server, client: Client) -> None:
    ids = await _store_session(client, SESSION)
    scope = Scope("alice")
    members = [r for r in await LifecycleStore(runtime.store).compression_candidates(scope, 3) if r.id in ids]
    await call(client, "forget", {"ids": [ids[0]], "dry_run": False})  # lands after the pass read its rows
    lifecycle = runtime.scheduler.lifecycle
    vector = (await runtime.embedder.passages(["summary text"]))[0]
    summary = lifecycle._summary_memory(None, members, "A summary that quotes the forgotten text.", vector, 0.0)
    with pytest.raises(ConflictError):
        await runtime.store.apply(scope, [summary], [])
    hits = (
        await call(client, "recall", {"detail": "full", "query": "forgotten text summary", "k": 10, "reinforce": False})
    )["hits"]
    assert all(h["level"] == 0 for h in hits)


async def test_memories_with_a_time_to_live_are_not_compressed(runtime: Server, client: Client, clock: Clock) -> None:
    await call(
        client,
        "remember",
        {
            "memories": [
                {"content": t, "session_id": "s-ttl", "importance": 0.5, "ttl_seconds": 400 * 3600} for t in SESSION
            ]
        },
    )
    clock.advance(300 * HOUR)
    assert (await runtime.scheduler.run_once())["summaries"] == 0


async def test_forgetting_a_summary_returns_its_sources(runtime: Server, client: Client, clock: Clock) -> None:
    ids = await _store_session(client, SESSION)
    clock.advance(300 * HOUR)
    await runtime.scheduler.run_once()
    summary_id = (await call(client, "recall", {"detail": "full", "query": "billing database", "reinforce": False}))[
        "hits"
    ][0]["id"]
    await call(client, "forget", {"ids": [summary_id], "dry_run": False})
    hits = (await call(client, "recall", {"detail": "full", "query": "billing database", "k": 10, "reinforce": False}))[
        "hits"
    ]
    assert {h["id"] for h in hits} <= set(ids)
    assert SESSION[0] in [h["text"] for h in hits]


async def test_keyed_memories_are_not_compressed(runtime: Server, client: Client, clock: Clock) -> None:
    await call(
        client,
        "remember",
        {
            "memories": [
                {"content": t, "session_id": "s-keyed", "importance": 0.5, "key": f"fact-{i}"}
                for i, t in enumerate(SESSION)
            ]
        },
    )
    clock.advance(300 * HOUR)
    assert (await runtime.scheduler.run_once())["summaries"] == 0


def test_the_fact_check_rejects_a_summary_that_keeps_the_identifiers_but_drops_facts() -> None:
    chat = [
        "Caroline went to an LGBTQ support group yesterday and found it powerful.",
        "Melanie painted a sunrise over the lake last year and still loves it.",
        "Caroline is thinking about adoption agencies for her future family.",
        "Melanie signed up for a pottery class at the community centre.",
    ]
    summary = summarize.extractive(chat)
    assert summary.tokens <= 0.30 * summary.source_tokens
    assert summary.coverage == 1.0  # no identifiers to lose...
    assert summary.fact_coverage < summarize.MIN_COVERAGE  # ...but three of four facts would be
    assert "sampled facts" in str(summarize.check(chat, summary))


def test_acknowledgements_are_not_facts() -> None:
    assert summarize.facts(["Great, thanks a lot.", "好的，没问题，谢谢。", "Perfect, see you then!"]) == []
    assert summarize.facts(["See you at 5 in room B-12.", "明天下午三点开会。"]) == [
        "See you at 5 in room B-12.",
        "明天下午三点开会。",
    ]


async def test_a_conversation_of_distinct_facts_is_kept_whole(runtime: Server, client: Client, clock: Clock) -> None:
    chat = [
        "Caroline went to an LGBTQ support group yesterday and found it powerful.",
        "Melanie painted a sunrise over the lake last year and still loves it.",
        "Caroline is thinking about adoption agencies for her future family.",
        "Melanie signed up for a pottery class at the community centre.",
        "Caroline's grandmother gave her a necklace from Sweden.",
    ]
    ids = await _store_session(client, chat)
    clock.advance(300 * HOUR)
    report = await runtime.scheduler.run_once()
    assert (report["summaries"], report["compression_failures"]) == (0, 1)
    hits = (
        await call(client, "recall", {"detail": "full", "query": "what did Melanie sign up for", "reinforce": False})
    )["hits"]
    assert hits[0]["id"] == ids[3]
    assert hits[0]["tier"] == "active"


async def test_a_long_session_becomes_several_summaries_in_time_order(
    runtime: Server, client: Client, clock: Clock
) -> None:
    """At most lifecycle.MAX_GROUP memories per summary: a long session is summarized in runs."""
    texts = [
        f"Decision {i}: the nightly job job-{i:03d} moves to runner-{i % 3}. Agreed, job-{i:03d} on runner-{i % 3}."
        for i in range(MAX_GROUP + 10)
    ]
    await _store_session(client, texts)
    clock.advance(300 * HOUR)
    report = await runtime.scheduler.run_once()
    assert report["summaries"] + report["compression_failures"] == 2  # 50 memories: two runs (40 and 10)


async def test_replacing_a_summarized_memory_takes_its_summary_apart(
    runtime: Server, client: Client, clock: Clock
) -> None:
    ids = await _store_session(client, SESSION)
    clock.advance(300 * HOUR)
    assert (await runtime.scheduler.run_once())["summaries"] == 1
    correction = "Billing moves to PostgreSQL 17 next Wednesday, not 16."
    await call(client, "remember", {"content": correction, "supersedes": [ids[2]]})
    hits = (
        await call(client, "recall", {"detail": "full", "query": "which PostgreSQL does billing move to", "k": 10})
    )["hits"]
    assert [h for h in hits if h["level"] > 0] == []  # the summary that said 16 is gone...
    assert hits[0]["text"] == correction
    assert ids[2] not in [h["id"] for h in hits]  # ...the replaced memory stays replaced...
    assert SESSION[5] in [h["text"] for h in hits]  # ...and the others are back


async def test_the_lifecycle_is_named_in_what_pin_forget_and_undo_say(
    runtime: Server, client: Client, clock: Clock
) -> None:
    ids = await _store_session(client, SESSION)
    clock.advance(300 * HOUR)
    await runtime.scheduler.run_once()
    summary_id = (await call(client, "recall", {"detail": "full", "query": "billing database", "reinforce": False}))[
        "hits"
    ][0]["id"]
    pinned = await call_error(client, "pin", {"id": ids[0]})
    assert f"archived inside summary '{summary_id}'" in pinned
    assert "raw memory, not a summary" in await call_error(client, "undo_summary", {"id": ids[0]})
    dry = await call(client, "forget", {"ids": [summary_id]})
    assert "1 of them are summaries: the memories they hold come back to recall" in dry["note"]
    replaced = await call(client, "remember", {"content": "Billing moves to PostgreSQL 17.", "supersedes": [ids[2]]})
    assert f"was replaced by '{replaced['items'][0]['id']}'" in await call_error(client, "pin", {"id": ids[2]})
