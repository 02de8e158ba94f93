"""Golden queries guard the lifecycle passes: a pass that loses what they find is rolled back, one
that keeps it is not, and what answers them is never evicted."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.client import Client

from mcp_memory import metrics
from mcp_memory.mcp.server import Server
from tests.conftest import Clock, call, call_error

pytestmark = pytest.mark.anyio
HOUR = 3600.0
# A session that says four things three times each, and once, in passing, a long aside: the
# summary keeps the four (and passes the fact check, 12 of 13 facts) but has no room for the aside.
SAID_THRICE = [
    ("Billing moves to PostgreSQL 16 next Wednesday.", "Next Wednesday billing goes to PostgreSQL 16.",
     "So billing is on PostgreSQL 16 from next Wednesday."),
    ("Run tools/migrate_billing.py before the deploy.", "The deploy waits for tools/migrate_billing.py.",
     "First tools/migrate_billing.py, then the deploy."),
    ("Invoices freeze from 18:00 on Tuesday.", "No invoices after 18:00 Tuesday.",
     "Invoice freeze starts Tuesday 18:00."),
    ("Marta owns the rollback plan.", "The rollback plan is Marta's.", "Marta has the rollback plan."),
]  # fmt: skip
BADGE = (
    "By the way, in case anyone ever needs it, the spare visitor badge for the Lisbon office is kept in the "
    "blue folder in the second drawer behind the reception desk, next to the old printer manuals."
)
SESSION = [s for said in zip(*SAID_THRICE, strict=True) for s in said] + [BADGE]
# A session whose summary loses nothing anyone asks for.
SEARCH = [
    ("Search moves to OpenSearch 2.13 next Monday.", "Next Monday search goes to OpenSearch 2.13.",
     "So search is on OpenSearch 2.13 from next Monday, as agreed."),
    ("Run tools/reindex_search.py before the switch.", "The switch waits for tools/reindex_search.py to finish.",
     "First tools/reindex_search.py, then the switch, in that order."),
    ("Yusuf owns the search rollback.", "The search rollback is Yusuf's job this time.",
     "Yusuf has the search rollback, as he had last time."),
]  # fmt: skip


async def _session(client: Client) -> list[str]:
    items = [{"content": t, "session_id": "s-billing", "importance": 0.5} for t in SESSION]
    return [i["id"] for i in (await call(client, "remember", {"memories": items}))["items"]]


async def _golden(client: Client, **arguments: Any) -> dict[str, Any]:
    return await call(client, "golden_queries", arguments)


def _rollbacks_counted() -> float:
    lines = [x for x in metrics.render().splitlines() if x.startswith("mcp_memory_golden_rollbacks_total")]
    return float(lines[0].split()[-1]) if lines else 0.0


async def test_a_pass_that_loses_a_golden_memory_is_rolled_back(runtime: Server, client: Client, clock: Clock) -> None:
    ids = await _session(client)
    search = [
        {"content": t, "session_id": "s-search", "importance": 0.5} for said in zip(*SEARCH, strict=True) for t in said
    ]
    await call(client, "remember", {"memories": search})
    badge = ids[-1]
    added = await _golden(client, query="where is the spare Lisbon badge", memory_id=badge)
    assert [q["memory_id"] for q in added["queries"]] == [badge]
    counted = _rollbacks_counted()
    clock.advance(300 * HOUR)  # every memory faded under compress_threshold, none evicted
    report = await runtime.scheduler.run_once()
    assert (report["summaries"], report["golden_checked"], report["golden_rollbacks"]) == (2, 1, 1)
    assert _rollbacks_counted() == counted + 1
    events = [e["event"] for e in (await call(client, "get_memory", {"id": badge}))["events"]]
    assert events[-2:] == ["summarized", "restored"]  # the summary was written, then taken apart
    hits = await call(client, "recall", {"query": "Lisbon spare badge", "reinforce": False, "detail": "full"})
    assert hits["hits"][0]["id"] == badge
    assert all(h["level"] == 0 and h["tier"] == "active" for h in hits["hits"])
    stats = (await call(client, "stats", {}))["golden"]
    assert stats["rollbacks"] == 1
    assert stats["last_check"]["rolled_back"] is True
    assert (stats["last_check"]["recall_before"], stats["last_check"]["recall_after"]) == (1.0, 0.0)
    checks = (await _golden(client))["recent_checks"]
    assert checks[0]["lost"] == [added["queries"][0]["id"]]
    clock.advance(HOUR)
    again = await runtime.scheduler.run_once()  # the group that lost the badge is not compressed again;
    assert (again["summaries"], again["golden_rollbacks"]) == (1, 0)  # the search one's, which lost nothing, is
    summary = (await call(client, "recall", {"query": "search OpenSearch", "reinforce": False, "detail": "full"}))[
        "hits"
    ][0]
    assert summary["kind"] == "summary"
    assert "OpenSearch 2.13" in summary["text"]


async def test_a_pass_that_keeps_what_golden_queries_find_stands(runtime: Server, client: Client, clock: Clock) -> None:
    ids = await _session(client)
    # The rollback plan's owner survives in the summary: the summary answers the query as well.
    await _golden(client, query="who owns the rollback plan", memory_id=ids[3])
    clock.advance(300 * HOUR)
    report = await runtime.scheduler.run_once()
    assert (report["summaries"], report["golden_checked"], report["golden_rollbacks"]) == (1, 1, 0)
    hits = (await call(client, "recall", {"query": "rollback plan owner", "reinforce": False, "detail": "full"}))[
        "hits"
    ]
    assert hits[0]["kind"] == "summary"
    assert ids[3] in hits[0]["source_ids"]
    assert "Lisbon" not in hits[0]["text"]  # the pass lost the aside, which no golden query asks for
    assert (await call(client, "stats", {}))["golden"]["last_check"]["rolled_back"] is False


async def test_what_answers_a_golden_query_is_not_evicted(runtime: Server, client: Client, clock: Clock) -> None:
    faint = {"content": "The old VPN used OpenVPN on port 1194", "importance": 0.1}
    kept = (await call(client, "remember", faint))["items"][0]["id"]
    other = {"content": "The canteen closes at three on Fridays", "importance": 0.1}
    gone = (await call(client, "remember", other))["items"][0]["id"]
    await _golden(client, query="which port did the old VPN use", memory_id=kept)
    clock.advance(400 * HOUR)  # both far under evict_threshold
    assert (await runtime.scheduler.run_once())["evicted"] == 1
    tiers = {
        h["id"]: h["tier"]
        for h in (
            await call(
                client,
                "list_memories",
                {"filters": {"include_archived": True}, "detail": "full"},
            )
        )["memories"]
    }
    assert tiers == {kept: "active", gone: "archived"}


async def test_sampled_queries_ask_with_the_rarest_words_not_the_whole_text(client: Client) -> None:
    text = "Deploys to the Frankfurt region need the approval of Ingrid from the platform team"
    important = (await call(client, "remember", {"content": text, "importance": 0.9}))["items"][0]["id"]
    for filler in ("Deploys happen on Tuesdays", "The platform team owns the deploy pipeline"):
        await call(client, "remember", {"content": filler})
    checked = await _golden(client, check=True)
    (sampled,) = checked["queries"]
    assert sampled["id"] == f"sampled:{important}"
    asked = sampled["query"].split()
    assert len(asked) == 4  # of its 8 words
    assert set(asked) <= {"frankfurt", "region", "need", "approval", "ingrid"}  # said by no other memory
    assert "frankfurt" in asked
    assert sampled["found"] is True
    assert checked["recall_at_k"] == 1.0
    (recorded,) = checked["recent_checks"]  # asked by hand, recorded beside the passes' checks
    assert (recorded["by"], recorded["queries"], recorded["recall_after"], recorded["missed"]) == (
        "request",
        1,
        1.0,
        [],
    )
    assert recorded["rolled_back"] is False


async def test_golden_queries_refuse_bad_input_and_follow_a_forget(client: Client) -> None:
    stored = (await call(client, "remember", {"content": "The release train leaves every second Thursday"}))["items"]
    memory_id = stored[0]["id"]
    assert "No memory by the id of 'nope'" in await call_error(
        client, "golden_queries", {"query": "release train", "memory_id": "nope"}
    )
    assert "searchable word" in await call_error(client, "golden_queries", {"query": "the of", "memory_id": memory_id})
    assert "name the memory" in await call_error(client, "golden_queries", {"query": "release train"})
    assert "No golden query" in await call_error(client, "golden_queries", {"remove": "missing"})
    kept = (await _golden(client, query="release train", memory_id=memory_id))["queries"][0]["id"]
    again = await call_error(client, "golden_queries", {"query": "release train", "memory_id": memory_id})
    assert f"already kept as {kept!r}" in again
    await _golden(client, remove=kept)
    secret = "release train token sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
    added = (await _golden(client, query=secret, memory_id=memory_id))["queries"][0]
    assert "4f9a8b7c6d5e" not in added["query"]  # a query is stored text: redacted
    await call(client, "forget", {"ids": [memory_id], "dry_run": False})
    assert (await _golden(client))["queries"] == []  # it named what is gone
    assert "No memory by the id" in await call_error(
        client, "golden_queries", {"query": "release train", "memory_id": memory_id}
    )


async def test_a_golden_query_for_a_replaced_memory_names_what_replaced_it(client: Client) -> None:
    old = (await call(client, "remember", {"content": "Ingrid's phone number is 0151 2345 678"}))["items"][0]["id"]
    corrected = await call(client, "correct_memory", {"id": old, "text": "Ingrid's phone number is 0151 9999 000"})
    new = corrected["id"]
    error = await call_error(client, "golden_queries", {"query": "phone of Ingrid", "memory_id": old})
    assert f"{old!r} was replaced by {new!r}; use that one" in error
