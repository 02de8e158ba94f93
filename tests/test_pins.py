"""Pinned memory: always back with recall and resume, outside k, under a token cap."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest
from mcp.client import Client

from mcp_memory.config import load_settings
from mcp_memory.mcp.server import open_server
from tests.conftest import call, call_error, hit_texts

pytestmark = pytest.mark.anyio

RULE = "Never run database migrations on Fridays"


async def test_pinned_memories_come_back_with_recall_outside_k(client: Client) -> None:
    await call(client, "remember", {"content": RULE, "kind": "instruction", "pinned": True})
    await call(
        client,
        "remember",
        {
            "memories": [
                {"content": "The cafeteria serves ramen on Wednesdays"},
                {"content": "Ramen shop on 5th closes at 9pm"},
            ]
        },
    )
    result = await call(client, "recall", {"detail": "full", "query": "ramen", "k": 1})
    assert [p["text"] for p in result["pinned"]] == [RULE]
    assert len(result["hits"]) == 1
    assert RULE not in hit_texts(result)


async def test_pin_and_unpin_an_existing_memory(client: Client) -> None:
    stored = await call(client, "remember", {"content": "The user's name is Dana and she uses she/her"})
    memory_id = stored["items"][0]["id"]
    pinned = await call(client, "pin", {"id": memory_id})
    assert pinned["pinned"] is True
    assert pinned["pinned_tokens"] > 0
    assert [p["id"] for p in (await call(client, "recall", {"detail": "full", "query": "weather"}))["pinned"]] == [
        memory_id
    ]
    assert (await call(client, "unpin", {"id": memory_id}))["pinned_tokens"] == 0
    assert (await call(client, "recall", {"detail": "full", "query": "weather"}))["pinned"] == []
    assert "was found" in await call_error(client, "pin", {"id": "01ZZZZZZZZZZZZZZZZZZZZZZZZ"})


async def test_pinned_memories_come_back_with_resume(client: Client) -> None:
    await call(client, "remember", {"content": RULE, "pinned": True})
    await call(client, "checkpoint", {"task_id": "t", "goal": "Upgrade the database"})
    packet = await call(client, "resume", {"task_id": "t"})
    assert [p["text"] for p in packet["pinned"]] == [RULE]


async def test_the_pinned_cap_is_enforced_and_named(data_dir: Path, mode: str) -> None:
    settings = load_settings(data_dir=data_dir, principal="alice", limits={"pinned_cap_tokens": 30})
    async with open_server(settings) as runtime, Client(runtime.mcp, mode=mode) as client:
        await call(client, "remember", {"content": "Rule one: answer in English " * 2, "pinned": True})
        big = "Rule two: always cite the source document and page number " * 2
        message = await call_error(client, "remember", {"content": big, "pinned": True})
        assert "limits.pinned_cap_tokens = 30" in message
        stored = await call(client, "remember", {"content": big + secrets.token_hex(4)})
        assert "limits.pinned_cap_tokens = 30" in await call_error(client, "pin", {"id": stored["items"][0]["id"]})
        assert len((await call(client, "recall", {"detail": "full", "query": "rules"}))["pinned"]) == 1
