"""One live copy of a text per scope, whoever writes it and however the writes interleave."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import pytest
from mcp.client import Client

from mcp_memory.config import load_settings
from mcp_memory.core.models import MemoryDraft, Scope
from mcp_memory.mcp.server import open_server
from mcp_memory.services.intake import ItemOutcome
from mcp_memory.services.memory import CallContext
from mcp_memory.storage.pool import principal_file
from mcp_memory.storage.schema import SCHEMA_VERSION
from tests.conftest import call

pytestmark = pytest.mark.anyio

TEXTS = [
    "The release train leaves on Thursdays at 16:00",
    "Invoices go out on the first working day of the month",
    "用户的构建流水线跑在GitLab CI上",
]


async def test_two_stores_writing_the_same_text_at_once_keep_one_copy(tmp_path: Path) -> None:
    """Two runtimes on one data directory are two writers with their own connections, as two
    processes are; both look for the text before either writes it, so only the check inside the
    write transaction (and the unique index) can keep the second copy out."""
    data_dir = tmp_path / "data"
    settings = load_settings(data_dir=data_dir, principal="alice")
    async with open_server(settings) as first, open_server(settings) as second:
        outcomes: list[ItemOutcome] = []

        async def say(runtime_index: int, text: str) -> None:
            runtime = (first, second)[runtime_index]
            result = await runtime.memory.remember(Scope("alice"), [MemoryDraft(content=text)], CallContext())
            outcomes.append(result.items[0])

        for text in TEXTS:
            async with anyio.create_task_group() as group:
                group.start_soon(say, 0, text)
                group.start_soon(say, 1, text)
    assert sorted(item.outcome for item in outcomes) == ["merged"] * 3 + ["stored"] * 3
    conn = sqlite3.connect(principal_file(data_dir, "alice"))
    try:
        rows = conn.execute("SELECT content, COUNT(*) FROM memories GROUP BY content").fetchall()
        occurrences = conn.execute("SELECT COUNT(*) FROM occurrences").fetchone()[0]
    finally:
        conn.close()
    assert sorted(rows) == sorted((text, 1) for text in TEXTS)
    assert occurrences == 6  # every statement is kept as an occurrence of the one copy
    assert {item.id for item in outcomes if item.outcome == "merged"} == {
        item.id for item in outcomes if item.outcome == "stored"
    }


async def test_restating_a_superseded_text_makes_it_current_again(client: Client) -> None:
    first = await call(client, "remember", {"content": "The user drinks oat milk in their coffee"})
    old_id = first["items"][0]["id"]
    changed = await call(
        client, "remember", {"content": "The user switched to soy milk in their coffee", "supersedes": [old_id]}
    )
    new_id = changed["items"][0]["id"]
    again = await call(client, "remember", {"content": "The user drinks oat milk in their coffee"})
    item = again["items"][0]
    assert item["outcome"] == "stored"  # a new current copy; the old one stays in history
    assert item["id"] != old_id
    assert item["superseded"] == [new_id]  # and it replaces what had replaced it
    hits = await call(client, "recall", {"query": "what milk does the user take in coffee", "reinforce": False})
    assert hits["hits"][0]["text"] == "The user drinks oat milk in their coffee"
    history = await call(
        client,
        "recall",
        {
            "query": "what milk does the user take in coffee",
            "reinforce": False,
            "detail": "full",
            "filters": {"include_superseded": True},
        },
    )
    states = {h["id"]: h.get("superseded_by") for h in history["hits"]}
    assert states[old_id] == new_id  # what was said first stays replaced, as it was
    assert states[new_id] == item["id"]
    assert states[item["id"]] is None


def test_copies_stored_twice_before_the_unique_index_are_folded_into_the_oldest(tmp_path: Path) -> None:
    """A file from version 7 may hold two live copies (the race this index closes); the migration
    keeps the oldest live and supersedes the others, losing no row."""
    data_dir = tmp_path / "data"

    async def seed() -> None:
        settings = load_settings(data_dir=data_dir, principal="alice")
        async with open_server(settings) as runtime:
            await runtime.memory.remember(Scope("alice"), [MemoryDraft(content=TEXTS[0])], CallContext())

    anyio.run(seed)
    path = principal_file(data_dir, "alice")
    conn = sqlite3.connect(path)
    try:  # what version-7 code left behind after a race: a second live copy
        conn.execute("DROP INDEX memories_live_copy")
        columns = [r[1] for r in conn.execute("PRAGMA table_info(memories)") if r[1] not in ("n", "id")]
        conn.execute(
            f"INSERT INTO memories (id, {', '.join(columns)}) "
            f"SELECT '01ZZZZZZZZZZZZZZZZZZZZZZZZ', {', '.join(columns)} FROM memories"
        )
        conn.execute("UPDATE meta SET value = '7' WHERE key = 'schema_version'")
        conn.execute("DROP TABLE second_vectors")  # added by version 9
        conn.execute("DROP TABLE memory_events")  # added by version 10
        conn.execute("DROP TABLE golden_queries")  # added by version 11
        conn.execute("DROP TABLE golden_checks")
        conn.execute("DELETE FROM meta WHERE key = 'second_model'")
        conn.commit()
    finally:
        conn.close()

    async def reopen() -> list[str]:
        settings = load_settings(data_dir=data_dir, principal="alice")
        async with open_server(settings) as runtime:
            result = await runtime.memory.recall(Scope("alice"), "release train", reinforce=False)
            return [h.text for h in result.hits]

    assert anyio.run(reopen) == [TEXTS[0]]
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT id, superseded_by FROM memories ORDER BY n").fetchall()
        version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
    finally:
        conn.close()
    assert int(version) == SCHEMA_VERSION
    assert len(rows) == 2
    assert rows[0][1] is None
    assert rows[1][1] == rows[0][0]
