"""Hierarchical compression above L1: phase summaries (L2) and finished-task summaries (L3)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client

from mcp_memory.config import load_settings
from mcp_memory.core.models import Scope
from mcp_memory.mcp.server import Server, open_server
from mcp_memory.services import lifecycle
from mcp_memory.storage.lifecycle import LifecycleStore
from tests.conftest import Clock, call
from tests.fake_openai import FakeOpenAI, llm_table

pytestmark = pytest.mark.anyio
HOUR = 3600.0
DAY = 24 * HOUR

# The summaries (L1) of four stand-ups of one week restate one plan: an L2 can replace them.
STANDUP_SUMMARIES = [
    "Billing moves to PostgreSQL 16 on 2026-12-09 after tools/migrate_billing.py runs.",
    "Status: billing moves to PostgreSQL 16 on 2026-12-09 after tools/migrate_billing.py runs.",
    "Unchanged: billing moves to PostgreSQL 16 on 2026-12-09 after tools/migrate_billing.py runs.",
    "Update: billing still moves to PostgreSQL 16 on 2026-12-09 after tools/migrate_billing.py runs.",
]


def standup(day: int) -> list[str]:
    return [
        f"Stand-up {day}: billing moves to PostgreSQL 16 on 2026-12-09.",
        f"Stand-up {day}: tools/migrate_billing.py runs before the deploy.",
        f"Stand-up {day}: nothing else changed for billing, see you at stand-up {day + 1}.",
    ]


# A debugging session of a task: the cause and the fix are restated on the way.
TASK_MEMORIES = [
    "The flaky test test_invoice_totals failed because the fixture used the local timezone.",
    "Thanks, got it.",
    "So the root cause: the fixture used the local timezone, and test_invoice_totals failed after midnight.",
    "Great, thank you!",
    "The fix is merged: the fixture of test_invoice_totals uses UTC since the fix.",
    "Perfect, thanks a lot, that's all for today.",
    "To sum up: test_invoice_totals failed because its fixture used the local timezone; "
    "the fixture uses UTC since the fix.",
    "Okay, see you tomorrow.",
    "Once more for the notes: the fixture of test_invoice_totals used the local timezone and uses UTC since the fix.",
    "Alright, thank you so much, that works for me.",
]


def _monday_noon(clock: Clock) -> None:
    """Move the clock to the next Monday 12:00 UTC, so three daily sessions share an ISO week."""
    day = time.gmtime(clock.now)
    clock.now = clock.now - (day.tm_hour * HOUR + day.tm_min * 60 + day.tm_sec) + 12 * HOUR
    clock.advance(((7 - day.tm_wday) % 7 or 7) * DAY)


async def _remember(client: Client, texts: list[str], **fields: Any) -> list[str]:
    result = await call(client, "remember", {"memories": [{"content": t, "importance": 0.5, **fields} for t in texts]})
    return [item["id"] for item in result["items"] if item["outcome"] == "stored"]


async def _hits(client: Client, query: str, **filters: Any) -> list[dict[str, Any]]:
    args: dict[str, Any] = {"query": query, "k": 10, "reinforce": False}
    if filters:
        args["filters"] = filters
    return list((await call(client, "recall", {**args, "detail": "full"}))["hits"])


async def _summarized_standup(runtime: Server, client: Client, clock: Clock, day: int, text: str) -> str:
    """One stand-up session, already summarized (L1, as a pass makes it: the test gives the text)."""
    scope = Scope("alice")
    ids = set(await _remember(client, standup(day), session_id=f"standup-{day}"))
    members = [r for r in await LifecycleStore(runtime.store).compression_candidates(scope, 3) if r.id in ids]
    assert len(members) == 3
    vector = (await runtime.embedder.passages([text]))[0]
    summary = runtime.scheduler.lifecycle._summary_memory(None, members, text, vector, clock.now)
    await runtime.store.apply(scope, [summary], [])
    return summary.record.id


async def _week_of_standups(runtime: Server, client: Client, clock: Clock) -> list[str]:
    """Four sessions on four days of one week, each already summarized; returns the L1 ids."""
    _monday_noon(clock)
    summaries = []
    for day, text in enumerate(STANDUP_SUMMARIES):
        summaries.append(await _summarized_standup(runtime, client, clock, day, text))
        clock.advance(DAY)
    return summaries


async def test_faded_session_summaries_of_one_week_become_a_phase_summary(
    runtime: Server, client: Client, clock: Clock
) -> None:
    l1 = await _week_of_standups(runtime, client, clock)
    clock.advance(200 * HOUR)
    assert (await runtime.scheduler.run_once())["phase_summaries"] == 0  # the L1 summaries have not faded yet
    clock.advance(100 * HOUR)  # S = 216 h at importance 0.5: R < 0.3 after 260 h
    report = await runtime.scheduler.run_once()
    assert (report["phase_summaries"], report["summarized"]) == (1, 4)
    hits = await _hits(client, "when does billing move to PostgreSQL 16")
    phase = hits[0]
    assert phase["level"] == 2
    assert sorted(phase["source_ids"]) == sorted(l1)  # lineage: the L2 names the L1s it replaced
    for identifier in ("PostgreSQL 16", "2026-12-09", "tools/migrate_billing.py"):
        assert identifier in phase["text"]
    assert [h["level"] for h in hits] == [2]  # the L1s and their sources left default recall...
    archived = await _hits(client, "when does billing move to PostgreSQL 16", include_archived=True)
    assert {h["id"] for h in archived if h["tier"] == "archived"} >= set(l1)  # ...and are kept


async def test_session_summaries_of_different_weeks_are_not_one_phase(
    runtime: Server, client: Client, clock: Clock
) -> None:
    """Two L1 summaries in each of two weeks: as one group of four they would make a phase (the
    first test shows four do); a week at a time, each is too small."""
    _monday_noon(clock)
    l1 = []
    for day, text in enumerate(STANDUP_SUMMARIES):
        l1.append(await _summarized_standup(runtime, client, clock, day, text))
        clock.advance(DAY if day != 1 else 7 * DAY)  # the third and fourth fall in the next week
    clock.advance(300 * HOUR)
    report = await runtime.scheduler.run_once()
    assert report["phase_summaries"] == 0
    hits = await _hits(client, "when does billing move to PostgreSQL 16")
    assert sorted(h["id"] for h in hits if h["level"] == 1) == sorted(l1)


async def test_forgetting_a_raw_memory_takes_apart_every_summary_built_on_it(
    runtime: Server, client: Client, clock: Clock
) -> None:
    l1 = await _week_of_standups(runtime, client, clock)
    clock.advance(300 * HOUR)
    assert (await runtime.scheduler.run_once())["phase_summaries"] == 1
    first = await _hits(client, standup(0)[1], include_archived=True)
    source = next(h for h in first if h["text"] == standup(0)[1])
    await call(client, "forget", {"ids": [source["id"]], "dry_run": False})
    hits = await _hits(client, "when does billing move to PostgreSQL 16")
    assert sorted(h["id"] for h in hits if h["level"] > 0) == sorted(l1[1:])  # the other L1 come back
    texts = [h["text"] for h in hits]
    assert STANDUP_SUMMARIES[0] not in texts  # the L1 built on the forgotten memory is gone...
    assert standup(0)[0] in texts  # ...and its other sources are back
    assert all(standup(0)[1] != h["text"] for h in await _hits(client, standup(0)[1], include_archived=True))


async def test_undoing_a_session_summary_under_a_phase_summary_undoes_the_phase_first(
    runtime: Server, client: Client, clock: Clock
) -> None:
    l1 = await _week_of_standups(runtime, client, clock)
    clock.advance(300 * HOUR)
    await runtime.scheduler.run_once()
    undone = await call(client, "undo_summary", {"id": l1[0]})
    assert len(undone["restored"]) == len(standup(0))
    hits = await _hits(client, "when does billing move to PostgreSQL 16")
    assert 2 not in [h["level"] for h in hits]
    assert sorted(h["id"] for h in hits if h["level"] == 1) == sorted(l1[1:])


async def _finished_task(client: Client, status: str) -> None:
    await call(
        client,
        "checkpoint",
        {
            "task_id": "fix-flaky-invoice-test",
            "title": "Fix the flaky invoice test",
            "goal": "Make test_invoice_totals pass at any hour",
            "tree": {"id": "root", "title": "Fix the flaky invoice test", "status": status},
            "reason": "node_completed",
        },
    )


async def test_a_finished_task_becomes_one_task_summary(runtime: Server, client: Client, clock: Clock) -> None:
    ids = await _remember(client, TASK_MEMORIES, task_id="fix-flaky-invoice-test", session_id="debug")
    await _finished_task(client, "done")
    clock.advance(12 * HOUR)
    assert (await runtime.scheduler.run_once())["task_summaries"] == 0  # finished, but not a day ago
    clock.advance(13 * HOUR)
    report = await runtime.scheduler.run_once()
    assert report["task_summaries"] == 1
    task = (await _hits(client, "why did test_invoice_totals fail"))[0]
    assert task["level"] == 3
    assert task["task_id"] == "fix-flaky-invoice-test"
    assert sorted(task["source_ids"]) == sorted(ids)
    assert "fix-flaky-invoice-test" in task["text"]
    assert "done" in task["text"]
    assert "test_invoice_totals" in task["text"]


async def test_a_task_still_in_progress_gets_no_task_summary(runtime: Server, client: Client, clock: Clock) -> None:
    await _remember(client, TASK_MEMORIES, task_id="fix-flaky-invoice-test", session_id="debug")
    await _finished_task(client, "in_progress")
    clock.advance(30 * HOUR)
    assert (await runtime.scheduler.run_once())["task_summaries"] == 0


async def test_a_chinese_task_summary_opens_in_chinese(runtime: Server, client: Client, clock: Clock) -> None:
    texts = [
        "test_invoice_totals 失败，因为夹具使用了本地时区。",
        "好的，谢谢。",
        "根本原因：夹具使用了本地时区。",
        "太好了，非常感谢！",
        "修复已合并：夹具修复后使用 UTC。",
        "好的，今天就到这里，谢谢大家。",
        "总结：test_invoice_totals 失败，因为夹具使用了本地时区；修复已合并，夹具修复后使用 UTC。",
        "明天见。",
        "再说一遍：test_invoice_totals 失败，因为夹具使用了本地时区；修复已合并，夹具修复后使用 UTC。",
        "好的，辛苦了，再见。",
        "记下来：夹具使用了本地时区，所以 test_invoice_totals 失败；修复已合并，夹具修复后使用 UTC。",
        "收到，谢谢大家，再见。",
    ]
    await _remember(client, texts, task_id="fix-flaky-invoice-test", session_id="debug-zh")
    await _finished_task(client, "abandoned")
    clock.advance(25 * HOUR)
    assert (await runtime.scheduler.run_once())["task_summaries"] == 1
    task = (await _hits(client, "test_invoice_totals 为什么失败"))[0]
    assert task["level"] == 3
    assert task["language"] == "zh"
    assert task["text"].startswith("任务「Fix the flaky invoice test」（fix-flaky-invoice-test）")
    assert "放弃" in task["text"]
    for identifier in ("test_invoice_totals", "UTC"):
        assert identifier in task["text"]


@pytest.mark.parametrize("faithful", [True, False])
async def test_the_llm_writes_the_task_summary_from_the_task_record_and_is_held_to_it(
    data_dir: Path, fake_llm: FakeOpenAI, clock: Clock, faithful: bool
) -> None:
    settings = load_settings(data_dir=data_dir, principal="alice", llm=llm_table(fake_llm))
    async with open_server(settings, clock=clock) as runtime, Client(runtime.mcp, mode="legacy") as client:
        await _remember(client, TASK_MEMORIES, task_id="fix-flaky-invoice-test", session_id="debug")
        await _finished_task(client, "done")
        day = time.strftime("%Y-%m-%d", time.gmtime(clock.now))
        line = f"Task Fix the flaky invoice test (fix-flaky-invoice-test): done on {day}."
        body = "test_invoice_totals failed: its fixture used the local timezone; the fixture uses UTC since the fix."
        # The unfaithful answer forgets the task's line: the check holds the summary to the record.
        answer = f"{line} {body}" if faithful else body
        fake_llm.chat_default = ("json", {"summary": answer})
        clock.advance(25 * HOUR)
        assert (await runtime.scheduler.run_once())["task_summaries"] == 1
        assert "Its goal: Make test_invoice_totals pass at any hour" in fake_llm.chat_prompts[-1]
        assert "what is left of one finished task" in fake_llm.chat_prompts[-1]
        task = (await _hits(client, "why did test_invoice_totals fail"))[0]
        assert task["level"] == 3
        assert (task["text"] == answer) is faithful  # else the extractive fallback...
        assert task["text"].startswith(line)  # ...which keeps the line


async def test_a_task_summary_never_carries_text_into_another_namespace(data_dir: Path, clock: Clock) -> None:
    """A principal-wide task whose memories live in two namespaces gets one summary in each."""

    def settings(namespace: str | None) -> Any:
        return load_settings(data_dir=data_dir, principal="alice", namespace=namespace)

    async with (
        open_server(settings(None), clock=clock) as wide_rt,
        open_server(settings("proj-a"), clock=clock) as a_rt,
        open_server(settings("proj-b"), clock=clock) as b_rt,
        Client(wide_rt.mcp, mode="legacy") as wide,
        Client(a_rt.mcp, mode="legacy") as a,
        Client(b_rt.mcp, mode="legacy") as b,
    ):
        await _finished_task(wide, "in_progress")
        await _remember(a, TASK_MEMORIES, task_id="fix-flaky-invoice-test", session_id="debug-a")
        b_texts = [t.replace("test_invoice_totals", "test_refund_totals") for t in TASK_MEMORIES]
        await _remember(b, b_texts, task_id="fix-flaky-invoice-test", session_id="debug-b")
        await _finished_task(wide, "done")
        clock.advance(25 * HOUR)
        assert (await wide_rt.scheduler.run_once())["task_summaries"] == 2
        seen_by_a = [h for h in await _hits(a, "why did the test fail") if h["level"] == 3]
        seen_by_b = [h for h in await _hits(b, "why did the test fail") if h["level"] == 3]
        assert len(seen_by_a) == len(seen_by_b) == 1
        assert "test_invoice_totals" in seen_by_a[0]["text"]
        assert "test_refund_totals" not in seen_by_a[0]["text"]
        assert "test_refund_totals" in seen_by_b[0]["text"]
        assert "test_invoice_totals" not in seen_by_b[0]["text"]
        assert [h for h in await _hits(wide, "why did the test fail") if h["level"] == 3] == []


async def test_a_task_taken_back_from_done_loses_its_task_summary(
    runtime: Server, client: Client, clock: Clock
) -> None:
    ids = await _remember(client, TASK_MEMORIES, task_id="fix-flaky-invoice-test", session_id="debug")
    await _finished_task(client, "in_progress")
    open_checkpoint = (await call(client, "list_checkpoints", {"task_id": "fix-flaky-invoice-test"}))["checkpoints"]
    await _finished_task(client, "done")
    clock.advance(25 * HOUR)
    assert (await runtime.scheduler.run_once())["task_summaries"] == 1
    await call(
        client, "resume", {"task_id": "fix-flaky-invoice-test", "checkpoint_id": open_checkpoint[0]["id"]}
    )  # a rollback to when the task was in progress
    hits = await _hits(client, "why did test_invoice_totals fail")
    assert [h for h in hits if h["level"] == 3] == []
    assert {h["id"] for h in hits} <= set(ids)  # its memories are back in recall
    assert TASK_MEMORIES[6] in [h["text"] for h in hits]


async def test_sessions_that_fail_the_check_do_not_starve_the_task_summaries(
    runtime: Server, client: Client, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lifecycle, "MAX_GROUPS_PER_PASS", 2)
    for s in range(3):  # three sessions of distinct facts: each fails the fact check
        distinct = [f"Ticket INC-{s}{i}00 affects host db-{s}{i}.internal and build v{s}.{i}.1" for i in range(4)]
        await _remember(client, distinct, session_id=f"incidents-{s}")
    await _remember(client, TASK_MEMORIES, task_id="fix-flaky-invoice-test", session_id="debug")
    await _finished_task(client, "done")
    clock.advance(300 * HOUR)
    report = await runtime.scheduler.run_once()
    assert report["compression_failures"] >= 2  # the positive control: sessions used their share
    assert report["task_summaries"] == 1
