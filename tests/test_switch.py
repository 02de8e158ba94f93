"""The kill switch: `mcp-memory switch off` drops every process on the data directory to no memory at
once; on again, nothing is lost. The state lives in the control file, read at every call."""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client

from mcp_memory.cli.command import main
from mcp_memory.config import load_settings
from mcp_memory.core.models import Scope
from mcp_memory.mcp.server import Server, open_server
from mcp_memory.storage.pool import principal_file
from tests.conftest import call, call_error, hit_texts, row_counts

FACT = "The staging cluster lives in the Frankfurt region"


def switch(data: Path, *args: str) -> None:
    assert main(["--data-dir", str(data), "switch", *args]) == 0


def serve(data: Path, principal: str, work: Callable[[Client, Server], Awaitable[Any]], **extra: Any) -> Any:
    """Run ``work`` against a server of ``principal`` on ``data``; switch commands run between two
    such calls as another process's would (the server reads the control file at every call)."""

    async def run() -> Any:
        settings = load_settings(data_dir=data, principal=principal, **extra)
        async with open_server(settings) as runtime, Client(runtime.mcp) as client:
            return await work(client, runtime)

    return anyio.run(run)


def test_off_means_no_memory_in_and_none_out_and_on_loses_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"

    async def fill(client: Client, runtime: Server) -> None:
        await call(client, "remember", {"content": FACT, "pinned": True})
        await call(client, "checkpoint", {"task_id": "task-1", "goal": "Move staging to Paris"})

    serve(data, "alice", fill)
    before = row_counts(data, "alice")
    switch(data, "off")

    async def while_off(client: Client, runtime: Server) -> None:
        recalled = await call(client, "recall", {"query": "Where is the staging cluster?"})
        assert recalled["hits"] == []
        assert recalled["pinned"] == []
        assert "switched off" in recalled["note"]
        refused = await call_error(client, "remember", {"content": "The staging cluster moves to Paris"})
        assert "nothing was stored" in refused
        assert "mcp-memory switch on" in refused
        assert "switched off" in await call_error(client, "list_memories", {})
        pinned_id = (await runtime.store.export_rows(Scope("alice")))[0].id
        for tool, arguments in (
            ("forget", {"filters": {"kinds": ["fact"]}}),  # a dry run's previews are memory text
            ("forget", {"ids": [pinned_id], "dry_run": False}),
            ("unpin", {"id": pinned_id}),
            ("golden_queries", {}),
            ("golden_queries", {"query": "staging region", "memory_id": pinned_id}),
        ):
            assert "switched off" in await call_error(client, tool, arguments), tool
        packet = await call(client, "resume", {"task_id": "task-1"})  # tasks stay readable
        assert packet["goal"] == "Move staging to Paris"
        stats = await call(client, "stats", {})
        assert "switched off for every principal of the store" in stats["memory_switch"]

    serve(data, "alice", while_off)
    assert row_counts(data, "alice")["memories"] == before["memories"]  # nothing written
    switch(data, "on")

    async def on_again(client: Client, runtime: Server) -> None:
        assert FACT in [p["text"] for p in (await call(client, "recall", {"query": "staging region"}))["pinned"]]
        assert (await call(client, "stats", {}))["memory_switch"] == "on"

    serve(data, "alice", on_again)


def test_a_call_after_switch_off_returns_is_refused_in_a_server_already_running(tmp_path: Path) -> None:
    data = tmp_path / "data"

    async def work(client: Client, runtime: Server) -> None:
        await call(client, "remember", {"content": FACT})
        assert hit_texts(await call(client, "recall", {"query": "staging cluster region"})) == [FACT]
        await anyio.to_thread.run_sync(switch, data, "off")  # another process, while this one serves
        assert (await call(client, "recall", {"query": "staging cluster region"}))["hits"] == []
        await anyio.to_thread.run_sync(switch, data, "on")
        assert hit_texts(await call(client, "recall", {"query": "staging cluster region"})) == [FACT]

    serve(data, "alice", work)


def test_a_principal_or_namespace_switch_covers_only_that(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    switch(data, "off", "--principal", "bob")

    async def alice(client: Client, runtime: Server) -> None:
        await call(client, "remember", {"content": FACT})

    async def bob(client: Client, runtime: Server) -> None:
        assert "principal 'bob'" in await call_error(client, "remember", {"content": FACT})

    serve(data, "alice", alice)
    serve(data, "bob", bob)
    switch(data, "on", "--principal", "bob")
    switch(data, "off", "--principal", "alice", "--namespace", "proj-a")

    async def alice_a(client: Client, runtime: Server) -> None:
        assert "namespace 'proj-a'" in await call_error(client, "remember", {"content": "Project A uses Helm"})

    async def alice_b(client: Client, runtime: Server) -> None:
        await call(client, "remember", {"content": "Project B uses Terraform"})

    serve(data, "alice", alice_a, namespace="proj-a")
    serve(data, "alice", alice_b, namespace="proj-b")
    # Without --principal the switch covers everyone, whatever the environment's principal is.
    monkeypatch.setenv("MCP_MEMORY_PRINCIPAL", "alice")
    switch(data, "off")

    async def bob_everywhere(client: Client, runtime: Server) -> None:
        assert "every principal of the store" in await call_error(client, "remember", {"content": FACT})

    serve(data, "bob", bob_everywhere)


def test_the_config_key_sets_the_state_at_first_start_only(tmp_path: Path) -> None:
    data = tmp_path / "data"

    async def refused(client: Client, runtime: Server) -> None:
        assert "switched off" in await call_error(client, "remember", {"content": FACT})

    async def stored(client: Client, runtime: Server) -> None:
        await call(client, "remember", {"content": FACT})

    serve(data, "alice", refused, memory_switch="off")
    switch(data, "on")
    serve(data, "alice", stored, memory_switch="off")  # the person's `switch on` wins over the config


def test_status_doctor_and_a_lifecycle_pass_show_and_obey_it(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"

    async def fill(client: Client, runtime: Server) -> None:
        await call(client, "remember", {"content": FACT})

    serve(data, "alice", fill)
    switch(data, "off", "--principal", "alice")
    capfd.readouterr()
    switch(data, "status")
    assert "off\tprincipal 'alice'" in capfd.readouterr().out
    assert main(["--data-dir", str(data), "--principal", "alice", "doctor"]) == 0
    assert "memory switch: memory is switched off for principal 'alice'" in capfd.readouterr().out
    assert main(["--data-dir", str(data), "--principal", "alice", "maintain"]) == 0
    assert '"principals_switched_off":1' in capfd.readouterr().out.replace(" ", "")
    with sqlite3.connect(principal_file(data, "alice")) as conn:
        assert conn.execute("SELECT content FROM memories").fetchall() == [(FACT,)]


def test_a_narrower_switch_on_says_a_broader_one_keeps_memory_off(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    switch(data, "off")
    capfd.readouterr()
    switch(data, "on", "--principal", "alice")
    said = capfd.readouterr().err
    assert "memory stays off there" in said
    assert "every principal of the store" in said


def test_switching_a_principal_with_nothing_stored_says_so(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"

    async def alice(client: Client, runtime: Server) -> None:
        await call(client, "remember", {"content": FACT})

    serve(data, "alice", alice)
    capfd.readouterr()
    switch(data, "off", "--principal", "alcie")  # a typo: alice's memory stays on, and the person is told
    said = capfd.readouterr().err
    assert "nothing is stored yet for principal 'alcie'" in said
    assert "check the name" in said
    switch(data, "off", "--principal", "alice")
    assert "nothing is stored yet" not in capfd.readouterr().err
