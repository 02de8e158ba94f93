"""Isolation is absolute: no call reads, changes or deletes another principal's data."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp.client import Client

from mcp_memory.config import load_settings
from mcp_memory.mcp.server import open_server
from tests.conftest import call, call_error, hit_texts

pytestmark = pytest.mark.anyio

SHARED_TEXT = "The launch code name is Project Nightingale"


@asynccontextmanager
async def connect(data_dir: Path, principal: str, mode: str, namespace: str | None = None) -> AsyncIterator[Client]:
    settings = load_settings(data_dir=data_dir, principal=principal, namespace=namespace)
    async with open_server(settings) as runtime, Client(runtime.mcp, mode=mode) as client:
        yield client


async def test_each_principal_sees_only_its_own_copy(data_dir: Path, mode: str) -> None:
    async with connect(data_dir, "alice", mode) as alice, connect(data_dir, "bob", mode) as bob:
        a_id = (await call(alice, "remember", {"content": SHARED_TEXT}))["items"][0]["id"]
        b_id = (await call(bob, "remember", {"content": SHARED_TEXT}))["items"][0]["id"]
        assert a_id != b_id  # the positive control: both stored, neither merged into the other's
        a_hits = await call(alice, "recall", {"query": "launch code name", "k": 10})
        b_hits = await call(bob, "recall", {"query": "launch code name", "k": 10})
        assert [h["id"] for h in a_hits["hits"]] == [a_id]
        assert [h["id"] for h in b_hits["hits"]] == [b_id]


async def test_another_principals_id_answers_exactly_like_a_missing_one(data_dir: Path, mode: str) -> None:
    async with connect(data_dir, "alice", mode) as alice, connect(data_dir, "bob", mode) as bob:
        b_id = (await call(bob, "remember", {"content": SHARED_TEXT}))["items"][0]["id"]
        missing = "01ZZZZZZZZZZZZZZZZZZZZZZZZ"
        theirs = await call_error(alice, "forget", {"ids": [b_id], "dry_run": False})
        absent = await call_error(alice, "forget", {"ids": [missing], "dry_run": False})
        assert theirs.replace(b_id, "<id>") == absent.replace(missing, "<id>")
        superseding = await call_error(alice, "remember", {"content": "Nightingale was renamed", "supersedes": [b_id]})
        assert b_id in superseding
        assert hit_texts(await call(bob, "recall", {"query": "launch code name"})) == [SHARED_TEXT]


async def test_forget_by_filter_never_reaches_another_principal(data_dir: Path, mode: str) -> None:
    async with connect(data_dir, "alice", mode) as alice, connect(data_dir, "bob", mode) as bob:
        for client in (alice, bob):
            await call(client, "remember", {"content": SHARED_TEXT, "tags": ["secret-project"]})
        dry = await call(alice, "forget", {"filters": {"tags": ["secret-project"]}})
        assert dry["matched"] == 1
        done = await call(alice, "forget", {"filters": {"tags": ["secret-project"]}, "dry_run": False})
        assert done["deleted"] == 1
        assert hit_texts(await call(alice, "recall", {"query": "launch code name"})) == []
        assert hit_texts(await call(bob, "recall", {"query": "launch code name"})) == [SHARED_TEXT]


async def test_principal_names_cannot_steer_outside_the_data_directory(data_dir: Path, mode: str) -> None:
    for name in ("../../etc/passwd", "bob/../alice", "C:\\windows", "..", "名字"):
        async with connect(data_dir, name, mode) as client:
            await call(client, "remember", {"content": f"A note written by the principal {name!r}"})
    files = [p for p in data_dir.rglob("*") if p.is_file()]  # noqa: ASYNC240 - a test's own tmp dir
    assert files
    assert all(data_dir in p.parents for p in files)
    # Every principal's file is under principals/; the one control file (leases, the kill switch) is beside it.
    assert {p.parent for p in files if p.suffix == ".db" and p.name != "control.db"} == {data_dir / "principals"}


async def test_a_namespace_sees_its_own_and_principal_wide_memories_only(data_dir: Path, mode: str) -> None:
    async with (
        connect(data_dir, "alice", mode, namespace="proj-a") as a,
        connect(data_dir, "alice", mode, namespace="proj-b") as b,
        connect(data_dir, "alice", mode) as wide,
    ):
        await call(a, "remember", {"content": "Project A deploys with Helm charts"})
        await call(b, "remember", {"content": "Project B deploys with Terraform modules"})
        await call(wide, "remember", {"content": "Alice deploys only on weekdays"})
        seen_by_a = hit_texts(await call(a, "recall", {"query": "how do we deploy", "k": 10}))
        assert sorted(seen_by_a) == ["Alice deploys only on weekdays", "Project A deploys with Helm charts"]
        only_a = await call(a, "recall", {"query": "deploy", "filters": {"namespace": "proj-a"}})
        assert hit_texts(only_a) == ["Project A deploys with Helm charts"]
        assert hit_texts(await call(wide, "recall", {"query": "how do we deploy", "k": 10})) == [
            "Alice deploys only on weekdays"
        ]
