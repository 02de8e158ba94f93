"""remember and recall through a real MCP client, in both protocol generations."""

from __future__ import annotations

import sqlite3

import pytest
from mcp.client import Client

from mcp_memory.mcp.server import Server
from mcp_memory.storage.pool import principal_file
from tests.conftest import Clock, call, call_error, hit_texts

pytestmark = pytest.mark.anyio


async def test_tools_are_listed_with_annotations(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert {"remember", "recall", "forget"} <= set(tools)
    assert tools["recall"].annotations is not None
    assert tools["recall"].annotations.read_only_hint is True
    assert tools["forget"].annotations is not None
    assert tools["forget"].annotations.destructive_hint is True
    assert tools["remember"].output_schema is not None


async def test_recall_returns_what_was_remembered_first(client: Client) -> None:
    await call(
        client,
        "remember",
        {
            "memories": [
                {
                    "content": "The user's favourite editor is Neovim with the LazyVim distribution",
                    "kind": "preference",
                },
                {"content": "The production database runs PostgreSQL 16 on db-prod-3", "kind": "fact"},
                {"content": "We decided to ship the billing rewrite in March", "kind": "decision"},
            ]
        },
    )
    result = await call(client, "recall", {"detail": "full", "query": "which text editor does the user like?", "k": 2})
    assert hit_texts(result)[0].startswith("The user's favourite editor is Neovim")
    hit = result["hits"][0]
    assert hit["kind"] == "preference"
    assert hit["occurrence_ids"]
    assert hit["created_at"]
    assert hit["occurred_at"]
    assert hit["client_name"]
    assert hit["transport"] == "stdio"


async def test_throwaway_messages_are_rejected_with_a_reason(client: Client) -> None:
    result = await call(client, "remember", {"memories": [{"content": c} for c in ("ok", "好的", "继续", "Thanks!")]})
    assert result["rejected"] == 4
    assert result["stored"] == 0
    assert all(item["reason"] for item in result["items"])


async def test_a_paraphrase_merges_and_keeps_both_occurrences(client: Client) -> None:
    first = await call(client, "remember", {"content": "I prefer dark roast coffee in the morning"})
    second = await call(client, "remember", {"content": "In the mornings I prefer a dark roast coffee."})
    assert second["items"][0]["outcome"] == "merged"
    assert second["items"][0]["id"] == first["items"][0]["id"]
    result = await call(client, "recall", {"detail": "full", "query": "coffee", "k": 1})
    assert len(result["hits"][0]["occurrence_ids"]) == 2


async def test_texts_with_different_identifiers_never_merge(client: Client) -> None:
    a = await call(client, "remember", {"content": "Invoice INV-767 for ACME was paid in May"})
    b = await call(client, "remember", {"content": "Invoice INV-372 for ACME was paid in May"})
    assert b["items"][0]["outcome"] == "stored"
    assert a["items"][0]["id"] != b["items"][0]["id"]
    result = await call(client, "recall", {"detail": "full", "query": "INV-372", "k": 1})
    assert hit_texts(result) == ["Invoice INV-372 for ACME was paid in May"]


async def test_texts_that_differ_by_a_weekday_never_merge(client: Client) -> None:
    await call(client, "remember", {"content": "The team meeting is on Monday"})
    b = await call(client, "remember", {"content": "The team meeting is on Tuesday"})
    assert b["items"][0]["outcome"] == "stored"


async def test_texts_where_one_word_replaces_another_never_merge(client: Client) -> None:
    await call(client, "remember", {"content": "Sam prefers tea in the morning."})
    b = await call(client, "remember", {"content": "Sam prefers coffee in the morning."})
    c = await call(client, "remember", {"content": "We need 3 servers for the launch"})
    d = await call(client, "remember", {"content": "We need 4 servers for the launch"})
    assert b["items"][0]["outcome"] == "stored"
    assert c["items"][0]["id"] != d["items"][0]["id"]


async def test_chinese_texts_that_differ_by_a_weekday_never_merge(client: Client) -> None:
    await call(client, "remember", {"content": "何伟的欢送午餐定在周一。"})
    b = await call(client, "remember", {"content": "何伟的欢送午餐定在周三。"})
    assert b["items"][0]["outcome"] == "stored"


async def test_a_later_memory_with_the_same_key_supersedes_and_keeps_history(client: Client) -> None:
    old = await call(client, "remember", {"content": "The user lives in Lisbon", "key": "user.city"})
    new = await call(client, "remember", {"content": "The user lives in Berlin", "key": "user.city"})
    assert new["items"][0]["superseded"] == [old["items"][0]["id"]]
    current = await call(client, "recall", {"detail": "full", "query": "where does the user live", "k": 5})
    assert "The user lives in Berlin" in hit_texts(current)
    assert "The user lives in Lisbon" not in hit_texts(current)
    history = await call(
        client,
        "recall",
        {"detail": "full", "query": "where does the user live", "k": 5, "filters": {"include_superseded": True}},
    )
    by_text = {h["text"]: h for h in history["hits"]}
    assert by_text["The user lives in Lisbon"]["superseded_by"] == new["items"][0]["id"]
    assert by_text["The user lives in Lisbon"]["valid_to"] is not None


async def test_the_same_words_under_a_key_take_the_place_of_the_plain_memory(client: Client) -> None:
    """One current memory per text: saying a stored text again with a key replaces the plain copy
    (history kept), as saying it again without one merges into it."""
    plain = (await call(client, "remember", {"content": "The user prefers dark mode"}))["items"][0]["id"]
    keyed = (await call(client, "remember", {"content": "The user prefers dark mode", "key": "ui.theme"}))["items"][0]
    assert keyed["outcome"] == "stored"
    assert keyed["superseded"] == [plain]
    current = await call(client, "recall", {"detail": "full", "query": "dark mode", "k": 5})
    assert [(h["id"], h["key"]) for h in current["hits"]] == [(keyed["id"], "ui.theme")]
    again = (await call(client, "remember", {"content": "The user prefers dark mode"}))["items"][0]
    assert (again["outcome"], again["id"]) == ("merged", keyed["id"])  # said plainly again: one memory still
    history = (await call(client, "get_memory", {"id": plain}))["memory"]
    assert history["superseded_by"] == keyed["id"]


async def test_supersedes_by_id_replaces_the_named_memory(client: Client) -> None:
    old = await call(client, "remember", {"content": "Deploys go out on Thursdays"})
    await call(
        client, "remember", {"content": "Deploys go out every weekday now", "supersedes": [old["items"][0]["id"]]}
    )
    result = await call(client, "recall", {"detail": "full", "query": "when do deploys go out", "k": 5})
    assert hit_texts(result) == ["Deploys go out every weekday now"]


async def test_a_memory_expires_after_its_time_to_live(client: Client, clock: Clock) -> None:
    await call(
        client, "remember", {"content": "The wifi guest password rotates; today it is on the fridge", "ttl_seconds": 60}
    )
    assert hit_texts(await call(client, "recall", {"detail": "full", "query": "guest wifi", "k": 3}))
    clock.advance(61)
    assert hit_texts(await call(client, "recall", {"detail": "full", "query": "guest wifi", "k": 3})) == []
    expired = await call(
        client, "recall", {"detail": "full", "query": "guest wifi", "k": 3, "filters": {"include_expired": True}}
    )
    assert len(expired["hits"]) == 1
    lean = await call(client, "recall", {"query": "guest wifi", "filters": {"include_expired": True}})
    assert lean["hits"][0]["why"].startswith("expired just now"), lean["hits"][0]["why"]  # not to be read as current


async def test_a_memory_lives_as_long_as_its_longest_lived_statement(client: Client, clock: Clock) -> None:
    text = "The visitor badge for the Lisbon office is at the front desk"
    first = await call(client, "remember", {"content": text, "ttl_seconds": 60})
    longer = await call(client, "remember", {"content": text, "ttl_seconds": 600})
    assert longer["items"][0]["outcome"] == "merged"
    clock.advance(120)
    assert hit_texts(await call(client, "recall", {"detail": "full", "query": "visitor badge", "k": 3})) == [
        text
    ]  # 600 s now
    shorter = await call(client, "remember", {"content": text, "ttl_seconds": 10})
    assert shorter["items"][0]["outcome"] == "merged"
    clock.advance(60)
    assert hit_texts(await call(client, "recall", {"detail": "full", "query": "visitor badge", "k": 3})) == [
        text
    ]  # not cut short
    await call(client, "remember", {"content": text})  # said for good
    clock.advance(10_000)
    hits = (await call(client, "recall", {"detail": "full", "query": "visitor badge", "k": 3}))["hits"]
    assert [h["id"] for h in hits] == [first["items"][0]["id"]]


async def test_explain_reports_every_signal(client: Client) -> None:
    await call(client, "remember", {"content": "Our CI runs on GitHub Actions with self-hosted runners"})
    result = await call(client, "recall", {"query": "where does CI run", "explain": True})
    why = result["hits"][0]["signals"]
    for signal in ("dense", "keyword", "relevance", "recency", "frequency", "importance", "value"):
        assert signal in why
    assert 0 < why["relevance"] <= 1
    assert why["value"] > 0


async def test_recall_reinforces_unless_told_not_to(client: Client) -> None:
    await call(client, "remember", {"content": "The staging cluster is called blue-falcon"})
    await call(client, "recall", {"detail": "full", "query": "staging cluster name", "reinforce": False})
    quiet = await call(client, "recall", {"detail": "full", "query": "staging cluster name", "reinforce": False})
    assert quiet["hits"][0]["access_count"] == 0
    await call(client, "recall", {"detail": "full", "query": "staging cluster name"})
    loud = await call(client, "recall", {"detail": "full", "query": "staging cluster name", "reinforce": False})
    assert loud["hits"][0]["access_count"] == 1
    assert loud["hits"][0]["last_accessed_at"] is not None


async def test_recall_strengthens_what_answers_not_the_padding(client: Client) -> None:
    """Reinforcing every hit would let the memories that pad each answer grow fresher and more
    frequent with every call, until they outrank a new statement of the answer."""
    answer = "The user works from the Berlin office on Alexanderplatz."
    others = [
        "The user's dog is called Pixel.",
        "The user is learning Japanese.",
        "The user drives a Skoda.",
        "The user's manager is Sandra.",
        "The user runs tests with pytest -x.",
        "The user climbs on Wednesdays.",
        "The user's standup is at 9:30.",
    ]
    await call(client, "remember", {"memories": [{"content": t} for t in [answer, *others]]})
    served = await call(client, "recall", {"query": "Where is the user's office?", "floor": False})
    assert served["hits"][0]["text"] == answer
    assert len(served["hits"]) > 1
    after = await call(client, "recall", {"detail": "full", "query": "office", "floor": False, "reinforce": False})
    counts = {h["text"]: h["access_count"] for h in after["hits"]}
    assert counts[answer] == 1
    assert [t for t in others if counts.get(t)] == []


async def test_the_token_budget_limits_what_comes_back(client: Client) -> None:
    long_text = "The quarterly report covers revenue, churn and hiring plans. " * 20
    await call(
        client,
        "remember",
        {"memories": [{"content": long_text}, {"content": "The quarterly report is due on the 5th"}]},
    )
    result = await call(client, "recall", {"detail": "full", "query": "quarterly report", "budget_tokens": 250})
    assert hit_texts(result) == ["The quarterly report is due on the 5th"]
    assert result["used_tokens"] == result["hits"][0]["tokens"]
    assert result["used_tokens"] <= 250
    assert result["omitted_for_budget"] >= 1


async def test_a_hit_too_large_for_the_budget_leaves_room_for_the_next_ones(client: Client) -> None:
    long_text = "The quarterly report covers revenue, churn and hiring plans. " * 20
    short = ["The quarterly report is due on the 5th", "The quarterly report template lives in the shared drive"]
    await call(client, "remember", {"memories": [{"content": long_text}, *({"content": t} for t in short)]})
    # its own words put the long one first with either embedding model; the short ones still match
    asked = {"query": "quarterly report revenue churn hiring plans", "k": 2, "budget_tokens": 250}
    result = await call(client, "recall", asked)
    assert sorted(hit_texts(result)) == sorted(short)  # k hits still, from below the one that did not fit
    assert result["omitted_for_budget"] == 1


async def test_filters_narrow_by_kind_tag_time_and_task(client: Client) -> None:
    await call(
        client,
        "remember",
        {
            "memories": [
                {
                    "content": "Release 2.4 shipped with the new importer",
                    "kind": "event",
                    "tags": ["release"],
                    "occurred_at": "2026-01-10T10:00:00Z",
                    "task_id": "t-1",
                },
                {
                    "content": "Release 2.5 is planned with the new exporter",
                    "kind": "decision",
                    "tags": ["plan"],
                    "occurred_at": "2026-03-10T10:00:00Z",
                },
            ]
        },
    )
    q = "release importer exporter"
    assert hit_texts(await call(client, "recall", {"detail": "full", "query": q, "filters": {"kinds": ["event"]}})) == [
        "Release 2.4 shipped with the new importer"
    ]
    assert hit_texts(await call(client, "recall", {"detail": "full", "query": q, "filters": {"tags": ["plan"]}})) == [
        "Release 2.5 is planned with the new exporter"
    ]
    after = await call(
        client, "recall", {"detail": "full", "query": q, "filters": {"occurred_after": "2026-02-01T00:00:00Z"}}
    )
    assert hit_texts(after) == ["Release 2.5 is planned with the new exporter"]
    task = await call(client, "recall", {"detail": "full", "query": q, "filters": {"task_id": "t-1"}})
    assert hit_texts(task) == ["Release 2.4 shipped with the new importer"]


async def test_importance_is_estimated_when_absent(client: Client) -> None:
    await call(
        client,
        "remember",
        {
            "memories": [
                {"content": "Remember this: never force-push to main", "kind": "instruction"},
                {"content": "The office plant was watered", "kind": "observation"},
            ]
        },
    )
    result = await call(client, "recall", {"detail": "full", "query": "force-push main plant watered", "k": 5})
    importance = {h["text"]: h["importance"] for h in result["hits"]}
    assert importance["Remember this: never force-push to main"] > importance["The office plant was watered"]


async def test_one_process_serves_many_connections_with_one_model(runtime: Server, mode: str) -> None:
    async with Client(runtime.mcp, mode=mode) as a, Client(runtime.mcp, mode=mode) as b:
        await call(a, "remember", {"content": "Connection A wrote this note about Kafka partitions"})
        result = await call(b, "recall", {"detail": "full", "query": "Kafka partitions"})
        assert hit_texts(result) == ["Connection A wrote this note about Kafka partitions"]


async def test_a_batch_repeating_a_text_that_merges_gives_every_item_its_outcome(client: Client) -> None:
    first = await call(client, "remember", {"content": "I prefer dark roast coffee in the morning"})
    paraphrase = "In the mornings I prefer a dark roast coffee."
    result = await call(
        client,
        "remember",
        {"memories": [{"content": paraphrase}, {"content": "The printer is on floor 3"}, {"content": paraphrase}]},
    )
    outcomes = [(item["index"], item["outcome"], item["id"]) for item in result["items"]]
    kept = first["items"][0]["id"]
    assert outcomes[0] == (0, "merged", kept)
    assert outcomes[1][1] == "stored"
    assert outcomes[2] == (2, "merged", kept)  # the repeat merges where the first copy went
    hits = (await call(client, "recall", {"detail": "full", "query": "coffee", "k": 1}))["hits"]
    assert len(hits[0]["occurrence_ids"]) == 3


async def test_an_internal_error_names_what_failed_and_the_request(client: Client, runtime: Server) -> None:
    await call(client, "remember", {"content": "The staging cluster is called blue-falcon"})
    # Break the store under the server, as a damaged file would: recall then fails inside our code.
    conn = sqlite3.connect(principal_file(runtime.settings.data_dir, "alice"))
    conn.execute("DROP TABLE occurrences")
    conn.commit()
    conn.close()
    message = await call_error(client, "recall", {"query": "staging cluster", "reinforce": False})
    assert "internal error in recall: OperationalError: no such table: occurrences" in message
    assert "(request " in message
    assert "request unknown" not in message
