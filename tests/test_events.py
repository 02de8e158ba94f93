"""Each memory's event log: created, merged, superseded, archived, summarized, restored, and one
content-free event when it is gone."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client

from mcp_memory.mcp.server import Server
from mcp_memory.storage.pool import principal_file
from tests.conftest import Clock, call
from tests.test_hierarchy import _summarized_standup

pytestmark = pytest.mark.anyio


async def _events(client: Client, memory_id: str) -> list[tuple[str, dict[str, Any]]]:
    return [(e["event"], e["detail"]) for e in (await call(client, "get_memory", {"id": memory_id}))["events"]]


def _stored_events(data_dir: Path, memory_id: str) -> list[tuple[str, str]]:
    with sqlite3.connect(principal_file(data_dir, "alice")) as conn:
        return list(
            conn.execute("SELECT event, detail FROM memory_events WHERE memory_id = ? ORDER BY n", (memory_id,))
        )


async def test_a_memory_is_created_merged_and_superseded_with_the_rule(client: Client) -> None:
    first = (await call(client, "remember", {"content": "The staging cluster runs Kubernetes 1.31"}))["items"][0]["id"]
    await call(client, "remember", {"content": "The staging cluster runs Kubernetes 1.31"})
    second = (
        await call(client, "remember", {"content": "The staging cluster runs Kubernetes 1.32", "supersedes": [first]})
    )["items"][0]["id"]
    logged = await _events(client, first)
    assert [e for e, _ in logged] == ["created", "merged", "superseded"]
    assert logged[2][1] == {"by": second, "rule": "named"}
    keyed = [
        (await call(client, "remember", {"content": text, "key": "editor-theme"}))["items"][0]["id"]
        for text in ("The editor theme is solarized dark", "The editor theme is gruvbox light")
    ]
    assert (await _events(client, keyed[0]))[-1] == ("superseded", {"by": keyed[1], "rule": "key"})
    stats = await call(client, "stats", {})
    assert stats["events"]["created"] == 4
    assert stats["events"]["superseded"] == 2


async def test_summarized_restored_and_undone(runtime: Server, client: Client, clock: Clock) -> None:
    summary = await _summarized_standup(runtime, client, clock, 1, "Billing moves to PostgreSQL 16 on 2026-12-09.")
    sources = (await call(client, "get_memory", {"id": summary}))["memory"]["source_ids"]
    assert (await _events(client, sources[0]))[-1] == ("summarized", {"into": summary})
    await call(client, "undo_summary", {"id": summary})
    assert (await _events(client, sources[0]))[-1] == ("restored", {"summary": summary})
    assert _stored_events(runtime.settings.data_dir, summary) == [("undone", "{}")]


async def test_archived_by_a_pass_with_its_retention_and_threshold(
    runtime: Server, client: Client, clock: Clock
) -> None:
    content = {"content": "The old VPN used OpenVPN on port 1194", "importance": 0.1}
    stored = (await call(client, "remember", content))["items"][0]["id"]
    clock.advance(400 * 3600)  # S = 72 h x 1.4: R = exp(-400 / 100.8) = 0.019, under evict_threshold 0.05
    assert (await runtime.scheduler.run_once())["evicted"] == 1
    (created, archived) = await _events(client, stored)
    assert created[0] == "created"
    assert archived == ("archived", {"retention": 0.0189, "threshold": 0.05})


async def test_a_forget_leaves_one_content_free_event(runtime: Server, client: Client) -> None:
    text = "My locker code is 4471"
    memory_id = (await call(client, "remember", {"content": text}))["items"][0]["id"]
    await call(client, "remember", {"content": text})
    await call(client, "forget", {"ids": [memory_id], "dry_run": False})
    assert _stored_events(runtime.settings.data_dir, memory_id) == [("forgotten", "{}")]
    with sqlite3.connect(principal_file(runtime.settings.data_dir, "alice")) as conn:
        assert all("4471" not in str(row) for row in conn.execute("SELECT * FROM memory_events"))
