"""Lifecycle: the decay curve, eviction to the archive, pins untouched, one pass per lease."""

from __future__ import annotations

import math
from pathlib import Path

import orjson
import pytest
from mcp.client import Client

from mcp_memory.cli.command import main
from mcp_memory.config import LifecycleSettings, load_settings
from mcp_memory.core.models import MemoryDraft, Scope
from mcp_memory.mcp.server import Server, open_server
from mcp_memory.services import scoring
from mcp_memory.services.lifecycle import retention, strength_hours
from mcp_memory.services.memory import CallContext
from mcp_memory.storage.lifecycle import LifecycleStore
from tests.conftest import Clock, call, hit_texts

pytestmark = pytest.mark.anyio
HOUR = 3600.0


def test_strength_grows_with_importance_and_use() -> None:
    assert strength_hours(72, 0.0, 0) == 72
    assert strength_hours(72, 0.5, 0) == 216
    assert strength_hours(72, 1.0, 0) == 360
    assert strength_hours(72, 0.5, 9) == pytest.approx(216 * (1 + math.log(10)))


def test_retention_is_exp_of_minus_t_over_s_and_recency_uses_the_same_curve() -> None:
    assert retention(216, 72, 0.5, 0) == pytest.approx(math.exp(-1))
    assert retention(0, 72, 0.0, 0) == 1.0
    assert scoring.recency(72, 72) == pytest.approx(0.5)  # the same exp(-t/S), S chosen to halve at 72 h
    assert scoring.recency(72, 72) == pytest.approx(scoring.retention(72, 72 / math.log(2)))


async def _remember(client: Client, text: str, importance: float, pinned: bool = False) -> str:
    result = await call(client, "remember", {"content": text, "importance": importance, "pinned": pinned})
    item_id: str = result["items"][0]["id"]
    return item_id


async def test_a_faded_unimportant_memory_is_archived_and_stays_recallable_on_request(
    runtime: Server, client: Client, clock: Clock
) -> None:
    await _remember(client, "The office printer on floor 2 jams on A3 paper", 0.3)
    await _remember(client, "The printer contract with Acme renews in 2027", 0.8)
    # importance 0.3: S = 72 x 2.2 = 158.4 h; after 500 h R = 0.043 < 0.05 -> evicted
    clock.advance(500 * HOUR)
    report = await runtime.scheduler.run_once()
    assert report["outcome"] == "done"
    assert report["evicted"] == 1
    current = hit_texts(await call(client, "recall", {"detail": "full", "query": "printer", "reinforce": False}))
    assert current == ["The printer contract with Acme renews in 2027"]
    archived = await call(
        client,
        "recall",
        {"detail": "full", "query": "printer", "reinforce": False, "filters": {"include_archived": True}},
    )
    tiers = {h["text"]: h["tier"] for h in archived["hits"]}
    assert tiers["The office printer on floor 2 jams on A3 paper"] == "archived"


async def test_a_memory_just_above_the_threshold_is_kept_but_counted_for_compression(
    runtime: Server, client: Client, clock: Clock
) -> None:
    await _remember(client, "The team lunch place is the noodle bar on Elm Street", 0.3)
    clock.advance(400 * HOUR)  # R = exp(-400/158.4) = 0.080: above 0.05, below 0.3
    report = await runtime.scheduler.run_once()
    assert report["evicted"] == 0
    assert report["compress_candidates"] == 1
    assert hit_texts(await call(client, "recall", {"detail": "full", "query": "team lunch", "reinforce": False}))


async def test_recall_reinforcement_slows_decay(runtime: Server, client: Client, clock: Clock) -> None:
    await _remember(client, "The VPN gateway is vpn2.example.org", 0.3)
    for _ in range(3):
        clock.advance(100 * HOUR)
        await call(client, "recall", {"detail": "full", "query": "VPN gateway"})
    clock.advance(200 * HOUR)  # 500 h since creation, but 200 h since the last access and 3 accesses
    assert (await runtime.scheduler.run_once())["evicted"] == 0


async def test_pinned_memories_are_never_touched_over_a_simulated_year(
    runtime: Server, client: Client, clock: Clock
) -> None:
    await _remember(client, "Never share the customer list outside the company", 0.0, pinned=True)
    for _ in range(52):
        clock.advance(7 * 24 * HOUR)
        report = await runtime.scheduler.run_once()
        assert report["evicted"] == 0
    pinned = (await call(client, "recall", {"detail": "full", "query": "anything"}))["pinned"]
    assert [p["text"] for p in pinned] == ["Never share the customer list outside the company"]
    assert pinned[0]["tier"] == "active"


async def test_only_one_process_runs_a_pass_and_another_takes_over_when_the_lease_expires(
    data_dir: Path, clock: Clock
) -> None:
    settings = load_settings(data_dir=data_dir, principal="alice")
    async with open_server(settings, clock=clock) as first, open_server(settings, clock=clock) as second:
        async with Client(first.mcp, mode="legacy") as client:
            await call(client, "remember", {"content": "A memory so the principal has a file"})
        now = clock()
        assert await first.scheduler.control.acquire("decay", first.scheduler.holder, now, 300)
        skipped = await second.scheduler.run_once(now)
        assert skipped["outcome"] == "skipped"
        # The first holder "dies" without releasing: after the lease expires the second runs the pass.
        taken = await second.scheduler.run_once(now + 301)
        assert taken["outcome"] == "done"
        recent = await second.scheduler.control.recent()
        assert recent[0]["holder"] == second.scheduler.holder
        assert recent[0]["outcome"] == "done"
        async with Client(second.mcp, mode="legacy") as client:
            stats = await call(client, "stats", {})
        assert stats["recent_passes"][0]["outcome"] == "done"
        assert "details" not in stats["recent_passes"][0]  # the counts of every principal are not shown


def test_maintain_runs_one_pass_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--data-dir", str(tmp_path), "--principal", "alice", "maintain"]) == 0
    report = orjson.loads(capsys.readouterr().out)
    assert report["name"] == "decay"
    assert report["outcome"] == "done"


def test_the_default_base_is_three_days() -> None:
    assert LifecycleSettings().decay_base_hours == 72


async def test_above_the_watermark_passes_evict_more_but_only_back_to_the_watermark(
    data_dir: Path, clock: Clock
) -> None:
    notes = [
        f"Casual note number {i} about the {w} in the garden"
        for i, w in enumerate(
            ["roses", "tulips", "daisies", "ferns", "hedges", "pond", "shed", "bench", "path", "lawn"]
        )
    ]

    async def evicted_with(capacity: int, folder: str) -> tuple[int, int]:
        settings = load_settings(
            data_dir=data_dir / folder, principal="alice", lifecycle={"capacity": capacity, "watermark": 0.8}
        )
        async with open_server(settings, clock=clock) as runtime, Client(runtime.mcp, mode="legacy") as client:
            start = clock()
            await call(client, "remember", {"memories": [{"content": t, "importance": 0.6} for t in notes]})
            # importance 0.6: S = 72 x 3.4 = 244.8 h; at 600 h R = 0.086: kept normally (0.05, and 0.6 >= 0.5),
            # evicted when aggressive (0.2, importance < 0.7).
            report = await runtime.scheduler.run_once(start + 600 * HOUR)
            return int(report["evicted"]), int(report["aggressive"])

    assert await evicted_with(1_000, "roomy") == (0, 0)
    # capacity 10 x watermark 0.8: the pass archives the two faintest, back to 8, not all ten
    assert await evicted_with(10, "full") == (2, 1)
    assert await evicted_with(5, "fuller") == (6, 1)


async def test_an_expired_memory_is_erased_by_the_pass_not_only_hidden(
    runtime: Server, client: Client, clock: Clock, data_dir: Path
) -> None:
    canary = "zqexpiring7731"
    await call(client, "remember", {"content": f"The one-time door code is {canary}", "ttl_seconds": 3600})
    await call(client, "remember", {"content": "The door code policy lives in the handbook"})
    clock.advance(2 * HOUR)
    hidden = await call(client, "recall", {"query": "door code", "reinforce": False})
    assert all(canary not in h["text"] for h in hidden["hits"])  # expired: hidden from recall at once
    assert _in_files(data_dir, canary)  # positive control: still in the file until a pass
    report = await runtime.scheduler.run_once()
    assert report["expired_erased"] == 1
    assert not _in_files(data_dir, canary)
    kept = await call(client, "recall", {"query": "door code", "reinforce": False})
    assert [h["text"] for h in kept["hits"]] == ["The door code policy lives in the handbook"]


def _in_files(data_dir: Path, needle: str) -> list[str]:
    return [p.name for p in data_dir.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


async def test_the_change_log_is_pruned_and_a_process_behind_it_rebuilds_its_index(data_dir: Path) -> None:
    """Two runtimes on one directory are two processes' indexes: the second read the log before the
    first wrote 30 memories and pruned all but 5 entries; its next recall must still see them all."""
    alice = Scope("alice")
    settings = load_settings(data_dir=data_dir, principal="alice")
    async with open_server(settings) as first, open_server(settings) as second:
        assert (await second.memory.recall(alice, "warm the index", reinforce=False)).hits == []
        for i in range(30):
            text = f"Build {i} of the billing service is tagged v{i}.0"
            await first.memory.remember(alice, [MemoryDraft(content=text)], CallContext())
        assert await LifecycleStore(first.store).prune_changes(alice, keep=5) == 25
        found = await second.memory.recall(
            alice, "which tag has build 3 of billing", reinforce=False, explain=True, detail="full"
        )
        assert found.hits[0].text == "Build 3 of the billing service is tagged v3.0"
        signals = found.hits[0].signals
        assert signals is not None
        assert signals.dense_rank is not None  # found through the rebuilt vector index, not keywords alone
        await second.store.vectors.sync(alice, (await second.embedder.ready()).dim)
        assert second.store.vectors.size(alice) == 30
