"""forget_user: two steps, everything of the principal gone from every file, others untouched."""

from __future__ import annotations

import secrets
import sqlite3
from pathlib import Path

import pytest
from mcp.client import Client
from mcp.client.session import ClientRequestContext, ElicitationFnT
from mcp_types import ElicitRequestParams, ElicitResult

from mcp_memory.config import load_settings
from mcp_memory.core.models import Scope
from mcp_memory.mcp.server import open_server
from mcp_memory.storage.lifecycle import LifecycleStore
from mcp_memory.storage.pool import principal_file
from tests.conftest import Clock, call, call_error, hit_texts

pytestmark = pytest.mark.anyio


def _files(data_dir: Path) -> list[Path]:
    return [p for p in data_dir.rglob("*") if p.is_file()]


def _anywhere(data_dir: Path, needle: bytes) -> list[str]:
    return [p.name for p in _files(data_dir) if needle in p.read_bytes()]


async def _fill(client: Client, canary: str) -> None:
    stored = await call(
        client, "remember", {"content": f"My locker code is {canary}", "tags": [canary], "metadata": {"note": canary}}
    )
    await call(client, "remember", {"content": f"My locker code is {canary}", "metadata": {"again": canary}})
    await call(client, "pin", {"id": stored["items"][0]["id"]})
    await call(
        client,
        "checkpoint",
        {
            "task_id": f"task-{canary}",
            "goal": f"Move the locker {canary}",
            "snapshot": f"Working notes mentioning {canary} " * 50,
            "variables": {"locker": canary},
        },
    )


async def test_forget_user_erases_every_byte_and_spares_other_principals(data_dir: Path, mode: str) -> None:
    canary, other = secrets.token_hex(12), secrets.token_hex(12)
    alice_settings = load_settings(data_dir=data_dir, principal="alice")
    async with (
        open_server(alice_settings) as alice_rt,
        open_server(load_settings(data_dir=data_dir, principal="bob")) as bob_rt,
        open_server(alice_settings) as second_process,  # another connection pair on the same file
        Client(alice_rt.mcp, mode=mode) as alice,
        Client(bob_rt.mcp, mode=mode) as bob,
        Client(second_process.mcp, mode=mode) as alice_elsewhere,
    ):
        await _fill(alice, canary)
        await _fill(bob, other)
        # reinforce=False: the other process's reinforcement would be flushed within 2 s, and a flush
        # that overlaps the erasure's WAL truncation puts that off to a later commit (not tested here).
        seen = await call(alice_elsewhere, "recall", {"detail": "full", "query": "locker code", "reinforce": False})
        assert [p["text"] for p in seen["pinned"]] == [f"My locker code is {canary}"]  # it sees alice's data
        conn = sqlite3.connect(principal_file(data_dir, "alice"))
        envelope = conn.execute("SELECT envelope FROM checkpoints").fetchone()[0]
        conn.close()
        compressed = bytes(envelope[-64:])  # a piece of the zlib-compressed snapshot
        assert _anywhere(data_dir, canary.encode())  # positive controls: the bytes are on disk before
        assert _anywhere(data_dir, compressed)

        dry = await call(alice, "forget_user", {})
        assert dry["dry_run"] is True
        assert dry["counts"]["memories"] == 1
        assert dry["counts"]["occurrences"] == 2
        assert dry["counts"]["tasks"] == 1
        assert dry["counts"]["checkpoints"] == 1
        assert dry["counts"]["pinned"] == 1
        assert _anywhere(data_dir, canary.encode())  # the dry run deleted nothing

        done = await call(alice, "forget_user", {"confirmation_code": dry["confirmation_code"]})
        assert done["dry_run"] is False
        assert {k: done["counts"][k] for k in dry["counts"]} == dry["counts"]
        assert done["counts"]["wal_emptied"] == 1
        assert "the file rewritten and its write-ahead log emptied" in done["note"]
        assert _anywhere(data_dir, canary.encode()) == []
        assert _anywhere(data_dir, compressed) == []
        assert _anywhere(data_dir, other.encode())  # bob's data is untouched
        after = await call(alice_elsewhere, "recall", {"detail": "full", "query": "locker code"})
        assert after["hits"] == []
        assert after["pinned"] == []
        assert (await call(alice, "list_tasks", {}))["tasks"] == []
        assert (await call(alice, "recall", {"detail": "full", "query": "locker"}))["pinned"] == []
        assert [p["text"] for p in (await call(bob, "recall", {"detail": "full", "query": "locker"}))["pinned"]] == [
            f"My locker code is {other}"
        ]
    conn = sqlite3.connect(principal_file(data_dir, "alice"))
    receipt = conn.execute("SELECT receipt FROM erasures").fetchall()
    conn.close()
    assert len(receipt) == 1
    assert canary not in receipt[0][0]


async def test_a_wrong_or_expired_code_deletes_nothing(data_dir: Path, mode: str, clock: Clock) -> None:
    settings = load_settings(data_dir=data_dir, principal="alice")
    async with open_server(settings, clock=clock) as runtime, Client(runtime.mcp, mode=mode) as client:
        await call(client, "remember", {"content": "The spare key is under the blue pot"})
        first = await call(client, "forget_user", {})
        assert "confirmation_code" in await call_error(client, "forget_user", {"confirmation_code": "000000-000000"})
        # the wrong attempt voided the outstanding code: the right one no longer works either
        await call_error(client, "forget_user", {"confirmation_code": first["confirmation_code"]})
        second = await call(client, "forget_user", {})
        clock.advance(301)
        assert "expired" in await call_error(client, "forget_user", {"confirmation_code": second["confirmation_code"]})
        assert hit_texts(await call(client, "recall", {"detail": "full", "query": "spare key"})) == [
            "The spare key is under the blue pot"
        ]


async def test_a_code_is_bound_to_its_principal(data_dir: Path, mode: str) -> None:
    async with (
        open_server(load_settings(data_dir=data_dir, principal="alice")) as alice_rt,
        open_server(load_settings(data_dir=data_dir, principal="bob")) as bob_rt,
        Client(alice_rt.mcp, mode=mode) as alice,
        Client(bob_rt.mcp, mode=mode) as bob,
    ):
        await call(bob, "remember", {"content": "Bob's bike lock combination is stored elsewhere"})
        code = (await call(alice, "forget_user", {}))["confirmation_code"]
        await call_error(bob, "forget_user", {"confirmation_code": code})
        assert hit_texts(await call(bob, "recall", {"detail": "full", "query": "bike lock"}))


async def test_a_code_given_by_one_process_is_taken_once_by_another_on_the_same_data(data_dir: Path) -> None:
    """The dry run and the confirming call may reach different processes (a stdio server and a network
    one, or two replicas): the open code lives in the control tables, as a digest."""
    settings = load_settings(data_dir=data_dir, principal="alice")
    async with (
        open_server(settings) as first_rt,
        open_server(settings) as second_rt,
        Client(first_rt.mcp) as first,
        Client(second_rt.mcp) as second,
    ):
        await call(first, "remember", {"content": "The spare key is under the blue pot"})
        code = (await call(first, "forget_user", {}))["confirmation_code"]
        assert not _anywhere(data_dir, code.encode())
        assert (await call(second, "forget_user", {"confirmation_code": code}))["dry_run"] is False
        assert "used or expired" in await call_error(first, "forget_user", {"confirmation_code": code})
        assert hit_texts(await call(first, "recall", {"detail": "full", "query": "spare key"})) == []


async def test_forget_user_also_clears_the_passes_state(data_dir: Path, clock: Clock) -> None:
    """The fact extraction's marks and the fact check's counts are scheduler state: they go too."""
    settings = load_settings(data_dir=data_dir, principal="alice")
    async with open_server(settings, clock=clock) as runtime, Client(runtime.mcp, mode="legacy") as client:
        await call(client, "remember", {"content": "A note to read for facts.", "kind": "message"})
        rows = LifecycleStore(runtime.store)
        await rows.mark_extracted(Scope("alice"), None, 1)
        await rows.count_fact_check(Scope("alice"), None, passed=True)

        def passes_state() -> list[str]:
            conn = sqlite3.connect(principal_file(data_dir, "alice"))
            try:
                return [
                    str(r[0])
                    for r in conn.execute(
                        "SELECT key FROM meta WHERE key LIKE 'extracted_upto%' OR key LIKE 'fact_check_%'"
                    )
                ]
            finally:
                conn.close()

        assert len(passes_state()) == 2  # the positive control
        dry = await call(client, "forget_user", {})
        await call(client, "forget_user", {"confirmation_code": dry["confirmation_code"]})
        assert passes_state() == []


def _answering(action: str, content: dict[str, object] | None = None) -> tuple[list[str], ElicitationFnT]:
    """An elicitation callback that answers as a person would, and the messages it was shown."""
    shown: list[str] = []

    async def answer(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        shown.append(params.message)
        return ElicitResult(action=action, content=content)

    return shown, answer


@pytest.mark.parametrize(
    ("action", "content", "erased"),
    [
        ("accept", {"delete_everything": True}, True),
        ("accept", {"delete_everything": False}, False),
        ("decline", None, False),
        ("cancel", None, False),
    ],
)
async def test_a_client_that_can_ask_its_user_lets_the_person_decide(
    data_dir: Path, mode: str, action: str, content: dict[str, object] | None, erased: bool
) -> None:
    canary = secrets.token_hex(12)
    shown, answer = _answering(action, content)
    async with (
        open_server(load_settings(data_dir=data_dir, principal="alice")) as runtime,
        Client(runtime.mcp, mode=mode, elicitation_callback=answer) as client,
    ):
        await _fill(client, canary)
        result = await call(client, "forget_user", {})
        assert len(shown) == 1
        assert "1 memories" in shown[0]
        assert "1 tasks" in shown[0]
        assert result["dry_run"] is not erased
        assert not result.get("confirmation_code")  # the agent never holds a code to replay
        remaining = await call(client, "list_memories", {})
        assert (remaining["memories"] == []) is erased
    assert bool(_anywhere(data_dir, canary.encode())) is not erased


async def test_a_client_without_elicitation_gets_the_confirmation_code(data_dir: Path, mode: str) -> None:
    async with (
        open_server(load_settings(data_dir=data_dir, principal="alice")) as runtime,
        Client(runtime.mcp, mode=mode) as client,
    ):
        await _fill(client, secrets.token_hex(12))
        dry = await call(client, "forget_user", {})
        assert dry["dry_run"] is True
        assert dry["confirmation_code"]
        done = await call(client, "forget_user", {"confirmation_code": dry["confirmation_code"]})
        assert done["dry_run"] is False


async def test_a_connection_bound_to_a_namespace_can_neither_count_nor_erase_the_others(
    data_dir: Path, mode: str
) -> None:
    # A token for "web" sees web's memories only: forget_user would have counted and erased mobile's too.
    shown, answer = _answering("accept", {"delete_everything": True})
    async with (
        open_server(load_settings(data_dir=data_dir, principal="dave", namespace="mobile")) as mobile_rt,
        open_server(load_settings(data_dir=data_dir, principal="dave", namespace="web")) as web_rt,
        Client(mobile_rt.mcp, mode=mode) as mobile,
        Client(web_rt.mcp, mode=mode, elicitation_callback=answer) as web,
    ):
        await call(mobile, "remember", {"content": "The mobile app's push key rotates monthly"})
        await call(web, "remember", {"content": "The web dashboard uses dark mode"})
        message = await call_error(web, "forget_user", {})
        assert "bound to namespace 'web'" in message
        assert "without a namespace" in message
        assert shown == []  # nobody was asked to confirm counts the connection may not see
        assert hit_texts(await call(mobile, "recall", {"detail": "full", "query": "push key"}))
        assert hit_texts(await call(web, "recall", {"detail": "full", "query": "dark mode"}))
