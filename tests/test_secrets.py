"""Secrets never reach the disk or the logs: canaries sent through every field and failing calls.

The server runs as a real stdio subprocess at DEBUG, its stderr captured to a file; afterwards
the random part of every canary is searched for in the bytes of every file of the data
directory (.db, -wal, -shm) while the server runs and after it exits, and in its stderr.
"""

from __future__ import annotations

import secrets
import string
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client

from mcp_memory.ids import new_id
from mcp_memory.redact import redact
from tests.conftest import call, call_error
from tests.test_stdio import spawn_server

pytestmark = pytest.mark.anyio

_ALNUM = string.ascii_letters + string.digits


def random_part(length: int) -> str:
    return "".join(secrets.choice(_ALNUM) for _ in range(length))


def files_holding(data_dir: Path, needles: dict[str, str]) -> dict[str, list[str]]:
    """For each named needle, the data files whose bytes contain it."""
    found: dict[str, list[str]] = {}
    for path in sorted(p for p in data_dir.rglob("*") if p.is_file()):
        data = path.read_bytes()
        for name, needle in needles.items():
            if needle.encode() in data:
                found.setdefault(name, []).append(path.name)
    return found


def data_files(data_dir: Path) -> set[str]:
    return {p.name.rsplit(".db", 1)[-1] or ".db" for p in data_dir.rglob("*.db*") if p.is_file()}


@pytest.mark.slow
async def test_secrets_never_reach_the_data_files_or_the_logs(tmp_path: Path, mode: str) -> None:
    key, bearer, password = random_part(40), random_part(32), random_part(24)
    canaries = {"openai-key": key, "bearer-token": bearer, "password": password}
    plain = f"zqplain{secrets.token_hex(6)}"  # not a secret: it must be stored, and logged at DEBUG
    openai_key = f"sk-proj-{key}"
    header = f"Authorization: Bearer {bearer}"
    pw = f"password={password}"
    content = f"Deploy notes {plain}: the OpenAI key is {openai_key}; call the API with {header} and log in with {pw}"

    async with spawn_server(tmp_path, mode, env={"MCP_MEMORY_LOG_LEVEL": "DEBUG"}) as (client, server):
        stored = await call(
            client,
            "remember",
            {
                "content": content,
                "tags": [openai_key, pw, f"bearer {bearer}"],
                "metadata": {
                    "header": header,
                    "login": pw,
                    openai_key: "the key as a metadata key",
                    header: "a header as a metadata key",
                    "nested": {"list": [openai_key, {"deep": pw}]},
                },
                "key": f"deploy.{openai_key}",
                "task_id": f"task {pw}",
                "session_id": f"session {openai_key}",
            },
        )
        assert stored["stored"] == 1
        merged = await call(client, "remember", {"content": content, "metadata": {"again": header}})
        assert merged["merged"] == 1  # a second occurrence, with its own metadata row
        batch = await call(
            client, "remember", {"memories": [{"content": f"Staging also uses {openai_key} behind {header}"}]}
        )
        assert batch["stored"] == 1

        # Failing calls that carry the canaries: nothing of them may be written or logged.
        too_big = f"{content} " + "padding " * 2100
        assert "limits.max_content_bytes" in await call_error(client, "remember", {"content": too_big})
        assert "limits.max_batch" in await call_error(
            client, "remember", {"memories": [{"content": f"{content} {i}"} for i in range(101)]}
        )
        await call_error(client, "remember", {"content": content, "importance": openai_key})
        await call_error(client, "remember", {"content": content, "kind": pw})
        assert "limits.max_query_chars" in await call_error(
            client, "recall", {"detail": "full", "query": f"{content} " * 20}
        )
        await call_error(client, "forget", {"ids": [openai_key, header], "dry_run": False})
        await call_error(client, "recall", {"detail": "full", "query": content, "filters": {"namespace": pw}})
        # A successful recall whose question holds every canary (and reinforces, so it writes).
        recalled = await call(client, "recall", {"detail": "full", "query": content})
        assert recalled["hits"]
        assert all(secret not in str(recalled["hits"]) for secret in canaries.values())

        while_running = files_holding(server.data_dir, {**canaries, "plain": plain})
        assert {".db", "-wal", "-shm"} <= data_files(server.data_dir)  # the WAL is live and was searched

    after_exit = files_holding(server.data_dir, {**canaries, "plain": plain})
    stderr = server.stderr()

    # Positive controls: the search finds what is really there, in the files and in the log.
    assert "plain" in while_running
    assert "plain" in after_exit
    assert plain in stderr
    assert "remember: 1 stored" in stderr

    assert {name: files for name, files in while_running.items() if name != "plain"} == {}
    assert {name: files for name, files in after_exit.items() if name != "plain"} == {}
    assert [name for name, secret in canaries.items() if secret in stderr] == []


@pytest.mark.parametrize(
    "metadata_key",
    ["password", "api_key", "client_secret", "access_token", "Authorization"],
)
async def test_a_secret_named_by_its_metadata_key_is_redacted(
    client: Client, data_dir: Path, metadata_key: str
) -> None:
    """`{"password": "..."}` is the usual shape of a secret in client JSON; the value alone looks harmless."""
    secret = random_part(28)
    ticket = f"zqticket{secrets.token_hex(6)}"
    await call(
        client,
        "remember",
        {
            "content": "The staging database credentials are in the metadata",
            "metadata": {metadata_key: secret, "ticket": ticket},
        },
    )
    result = await call(client, "recall", {"detail": "full", "query": "staging database credentials"})
    stored: dict[str, Any] = result["hits"][0]["metadata"]
    assert stored["ticket"] == ticket
    assert files_holding(data_dir, {"ticket": ticket}) != {}  # positive control
    assert stored[metadata_key] != secret
    assert files_holding(data_dir, {"secret": secret}) == {}


def test_a_task_id_is_not_mistaken_for_a_key() -> None:
    task_id = f"task-{new_id()}"
    assert redact(f"No task by the id of {task_id!r} was found") == f"No task by the id of {task_id!r} was found"
    assert redact(f"the key is sk-{'a1' * 12} and OPENAI_API_KEY=sk-proj-{'b2' * 12}").count("[REDACTED:") == 2
