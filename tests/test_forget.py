"""forget through a real MCP client: dry runs, real runs, errors, and no text left in any file."""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client

from mcp_memory.config import load_settings
from mcp_memory.mcp.server import open_server
from mcp_memory.storage.pool import principal_file
from tests.conftest import Clock, call, call_error, hit_texts, row_counts

pytestmark = pytest.mark.anyio


def marker(label: str) -> str:
    """A lower-case token found nowhere else (FTS5 stores tokens lower-cased)."""
    return f"zq{label}{secrets.token_hex(6)}"


def files_holding(data_dir: Path, needle: str) -> list[str]:
    """Every file of the data directory whose bytes contain ``needle`` (case-insensitive)."""
    wanted = needle.lower().encode()
    return sorted(
        str(p.relative_to(data_dir)) for p in data_dir.rglob("*") if p.is_file() and wanted in p.read_bytes().lower()
    )


async def remember_one(client: Client, content: str, **fields: Any) -> str:
    result = await call(client, "remember", {"content": content, **fields})
    assert result["stored"] == 1, result
    ident: str = result["items"][0]["id"]
    return ident


async def test_a_dry_run_by_ids_lists_and_deletes_nothing(client: Client, data_dir: Path) -> None:
    gone = marker("dry")
    ident = await remember_one(client, f"The spare key {gone} hangs behind the boiler")
    before = row_counts(data_dir, "alice")
    result = await call(client, "forget", {"ids": [ident]})
    assert result["dry_run"] is True
    assert result["matched"] == 1
    assert result["deleted"] == 0
    assert [item["id"] for item in result["items"]] == [ident]
    assert gone in result["items"][0]["preview"]
    assert row_counts(data_dir, "alice") == before
    assert hit_texts(await call(client, "recall", {"query": gone})) == [f"The spare key {gone} hangs behind the boiler"]
    assert files_holding(data_dir, gone)  # the text is still on disk: the byte check below can fail


async def test_forget_by_ids_deletes_and_leaves_no_text_in_any_file(client: Client, data_dir: Path) -> None:
    gone, gone_tag, gone_meta, gone_dup = (marker(x) for x in ("gone", "tag", "meta", "dup"))
    kept = marker("kept")
    content = f"The locker code {gone} opens the bike room"
    ident = await remember_one(client, content, tags=[gone_tag], metadata={"ext_id": gone_meta}, task_id="t-forget")
    merged = await call(client, "remember", {"content": content, "metadata": {"ext_id": gone_dup}})
    assert merged["items"][0]["outcome"] == "merged"
    await remember_one(client, f"The garden gate {kept} is painted green", tags=["garden"])
    for needle in (gone, gone_tag, gone_meta, gone_dup, kept):
        assert files_holding(data_dir, needle), needle  # positive control: the bytes are there before

    result = await call(client, "forget", {"ids": [ident], "dry_run": False})
    assert result["dry_run"] is False
    assert result["matched"] == 1
    assert result["deleted"] == 1

    for needle in (gone, gone_tag, gone_meta, gone_dup):
        assert files_holding(data_dir, needle) == [], needle
    assert files_holding(data_dir, kept)
    counts = row_counts(data_dir, "alice")
    assert counts["memories"] == counts["vectors"] == counts["memories_fts"] == 1
    assert counts["occurrences"] == 1
    assert counts["memory_tags"] == 1
    assert hit_texts(await call(client, "recall", {"query": f"locker code {gone}"})) == [
        f"The garden gate {kept} is painted green"
    ]


async def test_a_forgotten_id_is_not_found_afterwards(client: Client) -> None:
    ident = await remember_one(client, "The printer on floor 3 needs A4 paper")
    await call(client, "forget", {"ids": [ident], "dry_run": False})
    message = await call_error(client, "forget", {"ids": [ident], "dry_run": False})
    assert ident in message


async def test_a_dry_run_by_filter_lists_the_matches_and_deletes_nothing(client: Client, data_dir: Path) -> None:
    await call(
        client,
        "remember",
        {
            "memories": [
                {"content": "Sprint 14 retro: the flaky test was in the importer", "tags": ["retro"]},
                {"content": "Sprint 15 retro: deploys were slow on Fridays", "tags": ["retro"]},
                {"content": "Sprint 15 goal: ship the exporter", "tags": ["goal"]},
            ]
        },
    )
    before = row_counts(data_dir, "alice")
    result = await call(client, "forget", {"filters": {"tags": ["retro"]}})
    assert result["dry_run"] is True
    assert result["matched"] == 2
    assert result["deleted"] == 0
    assert sorted(item["preview"] for item in result["items"]) == [
        "Sprint 14 retro: the flaky test was in the importer",
        "Sprint 15 retro: deploys were slow on Fridays",
    ]
    assert row_counts(data_dir, "alice") == before


async def test_forget_by_filter_deletes_only_the_matching_memories(client: Client, data_dir: Path) -> None:
    gone_a, gone_b, kept_a, kept_b = marker("ga"), marker("gb"), marker("ka"), marker("kb")
    await call(
        client,
        "remember",
        {
            "memories": [
                {"content": f"Old incident {gone_a} in the payment queue", "kind": "event", "tags": ["incident"]},
                {"content": f"Old incident {gone_b} in the search cluster", "kind": "event", "tags": ["incident"]},
                {"content": f"The payment queue {kept_a} runs on RabbitMQ", "kind": "fact", "tags": ["infra"]},
                {"content": f"Postmortem template {kept_b} lives in the wiki", "kind": "fact", "tags": ["incident"]},
            ]
        },
    )
    dry = await call(client, "forget", {"filters": {"tags": ["incident"], "kinds": ["event"]}})
    assert dry["matched"] == 2
    result = await call(client, "forget", {"filters": {"tags": ["incident"], "kinds": ["event"]}, "dry_run": False})
    assert result["deleted"] == 2
    assert sorted(item["id"] for item in result["items"]) == sorted(item["id"] for item in dry["items"])
    assert files_holding(data_dir, gone_a) == []
    assert files_holding(data_dir, gone_b) == []
    assert files_holding(data_dir, kept_a)
    assert files_holding(data_dir, kept_b)
    assert row_counts(data_dir, "alice")["memories"] == 2
    left = hit_texts(await call(client, "recall", {"query": "incident payment queue search cluster postmortem"}))
    assert sorted(left) == [
        f"Postmortem template {kept_b} lives in the wiki",
        f"The payment queue {kept_a} runs on RabbitMQ",
    ]


async def test_forget_by_task_and_time_range_deletes_only_inside_it(client: Client, data_dir: Path) -> None:
    await call(
        client,
        "remember",
        {
            "memories": [
                {
                    "content": "The migration copied the users table first",
                    "task_id": "mig",
                    "occurred_at": "2026-01-05",
                },
                {
                    "content": "Then the migration rebuilt the search index",
                    "task_id": "mig",
                    "occurred_at": "2026-02-05",
                },
                {"content": "Unrelated: the cafe closes at 6 pm", "occurred_at": "2026-01-06"},
            ]
        },
    )
    by_task = await call(client, "forget", {"filters": {"task_id": "mig", "occurred_before": "2026-02-01T00:00:00Z"}})
    assert [item["preview"] for item in by_task["items"]] == ["The migration copied the users table first"]
    await call(
        client, "forget", {"filters": {"task_id": "mig", "occurred_before": "2026-02-01T00:00:00Z"}, "dry_run": False}
    )
    assert row_counts(data_dir, "alice")["memories"] == 2
    by_time = await call(client, "forget", {"filters": {"occurred_after": "2026-01-01T00:00:00Z"}})
    assert sorted(item["preview"] for item in by_time["items"]) == [
        "Then the migration rebuilt the search index",
        "Unrelated: the cafe closes at 6 pm",
    ]


async def test_unknown_ids_are_an_error_naming_the_id_and_delete_nothing(client: Client, data_dir: Path) -> None:
    ident = await remember_one(client, "The VPN endpoint is vpn.example.org")
    before = row_counts(data_dir, "alice")
    missing = "01M8KXZZZZZZZZZZZZZZZZZZZZ"
    message = await call_error(client, "forget", {"ids": [ident, missing], "dry_run": False})
    assert missing in message
    assert "not found" in message.lower() or "no memory" in message.lower()
    assert row_counts(data_dir, "alice") == before
    assert hit_texts(await call(client, "recall", {"query": "VPN endpoint"})) == ["The VPN endpoint is vpn.example.org"]


@pytest.mark.parametrize(
    "args",
    [
        pytest.param({"filters": {}, "dry_run": False}, id="empty-filter"),
        pytest.param({"filters": {"tags": []}, "dry_run": False}, id="empty-tag-list"),
        pytest.param({"dry_run": False}, id="neither-ids-nor-filter"),
        pytest.param({"ids": [], "dry_run": False}, id="empty-ids"),
    ],
)
async def test_forget_without_a_target_is_an_error_and_deletes_nothing(
    client: Client, data_dir: Path, args: dict[str, Any]
) -> None:
    await remember_one(client, "The standup is at 9:30 in room Kepler")
    before = row_counts(data_dir, "alice")
    message = await call_error(client, "forget", args)
    assert "filter" in message or "ids" in message
    assert row_counts(data_dir, "alice") == before


async def test_forget_with_both_ids_and_filter_is_an_error(client: Client, data_dir: Path) -> None:
    ident = await remember_one(client, "The coffee machine descales on Mondays", tags=["office"])
    message = await call_error(client, "forget", {"ids": [ident], "filters": {"tags": ["office"]}, "dry_run": False})
    assert "exactly one" in message
    assert row_counts(data_dir, "alice")["memories"] == 1


@pytest.fixture
async def slow_reader_client(tmp_path: Path, clock: Clock, mode: str) -> AsyncIterator[tuple[Client, Path]]:
    """A server whose busy timeout is short, so a blocked scrub gives up in about a second."""
    data_dir = tmp_path / "busy"
    settings = load_settings(data_dir=data_dir, principal="alice", busy_timeout_ms=100)
    async with open_server(settings, clock=clock) as runtime, Client(runtime.mcp, mode=mode) as client:
        yield client, data_dir


async def test_forgotten_text_leaves_the_files_once_a_blocking_reader_lets_go(
    slow_reader_client: tuple[Client, Path],
) -> None:
    """Another process (Cursor's server, a backup, `mcp-memory export`) may be mid-read during forget.

    The text must still leave the disk: at the latest when the reader has gone and the next
    write commits. (Today the scrub gives up, the WAL keeps the text, and the result says
    "the WAL truncated" anyway.)
    """
    client, data_dir = slow_reader_client
    gone, kept = marker("held"), marker("kept")
    ident = await remember_one(client, f"The alarm code {gone} is for the back door")
    await remember_one(client, f"The front door {kept} uses the badge reader")
    reader = sqlite3.connect(principal_file(data_dir, "alice"))
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT COUNT(*) FROM memories").fetchone()  # holds a snapshot, as a long read would
        result = await call(client, "forget", {"ids": [ident], "dry_run": False})
        assert result["deleted"] == 1
    finally:
        reader.rollback()
        reader.close()
    await remember_one(client, "The bike room light is on a timer")  # the next write after the reader left
    assert files_holding(data_dir, kept)
    assert files_holding(data_dir, gone) == [], result["note"]
