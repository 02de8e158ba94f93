"""The optional LLM through the real openai client against a local fake OpenAI-compatible server."""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client

from mcp_memory.config import load_settings
from mcp_memory.core.errors import LlmPausedError, UpstreamError
from mcp_memory.core.models import MemoryDraft, Scope
from mcp_memory.llm.client import LlmClient, LlmConfig
from mcp_memory.mcp.server import open_server
from mcp_memory.services import summarize
from mcp_memory.services.memory import CallContext
from mcp_memory.storage.llm_usage import LlmLedger
from tests.conftest import Clock, call
from tests.fake_openai import LLM_KEY, FakeOpenAI, llm_table

pytestmark = pytest.mark.anyio
HOUR = 3600.0


def _client(fake_llm: FakeOpenAI, clock: Clock, **overrides: Any) -> LlmClient:
    config = LlmConfig(
        base_url=fake_llm.base_url, model="fake-chat", api_key=LLM_KEY, timeout_seconds=1.0, backoff_seconds=0.01
    )
    return LlmClient(replace(config, **overrides), clock=clock)


async def test_a_good_answer_is_parsed_and_the_prompt_is_redacted(fake_llm: FakeOpenAI, clock: Clock) -> None:
    fake_llm.chat_script = [("json", {"summary": "ok"})]
    llm = _client(fake_llm, clock)
    assert await llm.complete_json("alice", "Summarize this. The key is sk-proj-" + "S" * 40) == {"summary": "ok"}
    assert "sk-proj-SSSS" not in fake_llm.chat_prompts[-1]
    assert "[REDACTED:openai-key]" in fake_llm.chat_prompts[-1]
    assert fake_llm.authorizations[-1] == f"Bearer {LLM_KEY}"


async def test_429_500_timeouts_and_malformed_json_are_retried(fake_llm: FakeOpenAI, clock: Clock) -> None:
    fake_llm.chat_script = [
        ("status", 429),
        ("status", 500),
        ("sleep", 1.5),
        ("text", "not json {"),
        ("json", {"summary": "finally"}),
    ]
    llm = _client(fake_llm, clock, max_retries=4)
    assert await llm.complete_json("alice", "p") == {"summary": "finally"}
    assert llm.stats.calls == 5


async def test_a_call_that_keeps_failing_is_an_upstream_error(fake_llm: FakeOpenAI, clock: Clock) -> None:
    fake_llm.chat_default = ("status", 500)
    llm = _client(fake_llm, clock, max_retries=2)
    with pytest.raises(UpstreamError, match="LLM call failed"):
        await llm.complete_json("alice", "p")
    assert llm.stats.calls == 3


async def test_the_budget_per_principal_is_enforced(fake_llm: FakeOpenAI, clock: Clock) -> None:
    fake_llm.chat_default = ("json", {"summary": "x"})
    llm = _client(fake_llm, clock, calls_per_scope_per_day=2)
    await llm.complete_json("alice", "p")
    await llm.complete_json("alice", "p")
    with pytest.raises(UpstreamError, match="budget"):
        await llm.complete_json("alice", "p")
    await llm.complete_json("bob", "p")  # another principal has its own budget
    clock.advance(86_400)
    await llm.complete_json("alice", "p")  # a new day
    assert llm.stats.refused_by_budget == 1


async def test_the_circuit_opens_after_repeated_failures_and_closes_after_the_cool_down(
    fake_llm: FakeOpenAI, clock: Clock
) -> None:
    fake_llm.chat_default = ("status", 500)
    llm = _client(fake_llm, clock, max_retries=0, breaker_failures=2, breaker_cooldown_seconds=60)
    for _ in range(2):
        with pytest.raises(UpstreamError):
            await llm.complete_json("alice", "p")
    calls = llm.stats.calls
    with pytest.raises(UpstreamError, match="paused"):
        await llm.complete_json("alice", "p")
    assert llm.stats.calls == calls  # not even tried
    clock.advance(61)
    fake_llm.chat_default = ("json", {"summary": "back"})
    assert await llm.complete_json("alice", "p") == {"summary": "back"}


# A working session in Chinese: a decision with its reason, restated and acknowledged on the way.
SESSION_ZH = [
    "我们决定下周三把计费数据库迁移到PostgreSQL 16，因为需要JSONB。",
    "好的，谢谢！",
    "确认一下：下周三把计费数据库迁移到PostgreSQL 16。",
    "部署脚本在tools/migrate_billing.py，必须在发布之前运行。",
    "收到，明白了，谢谢。",
    "提醒：发布之前必须运行tools/migrate_billing.py。",
    "好的，没问题，谢谢。",
    "嗯嗯，好的。",
    "好的好的，收到。",
    "明白了，没问题。",
    "嗯，可以，谢谢。",
    "对，是的，好的。",
]


async def _compress_with(data_dir: Path, fake_llm: FakeOpenAI, clock: Clock) -> dict[str, object]:
    settings = load_settings(data_dir=data_dir, principal="alice", llm=llm_table(fake_llm, max_retries=1))
    async with open_server(settings, clock=clock) as runtime, Client(runtime.mcp, mode="legacy") as client:
        await call(
            client,
            "remember",
            {"memories": [{"content": t, "session_id": "s-zh", "importance": 0.5} for t in SESSION_ZH]},
        )
        clock.advance(300 * HOUR)
        await runtime.scheduler.run_once()
        hits = (await call(client, "recall", {"detail": "full", "query": "计费数据库迁移", "reinforce": False}))["hits"]
        return dict(hits[0])


async def test_a_chinese_session_gets_the_llms_chinese_summary_with_identifiers(
    data_dir: Path, fake_llm: FakeOpenAI, clock: Clock
) -> None:
    summary = "下周三把计费数据库迁移到PostgreSQL 16，因为需要JSONB；发布之前必须运行tools/migrate_billing.py。"
    fake_llm.chat_default = ("json", {"summary": summary})
    hit = await _compress_with(data_dir, fake_llm, clock)
    assert hit["level"] == 1
    assert hit["text"] == summary
    assert hit["language"] == "zh"
    assert "PostgreSQL 16" in fake_llm.chat_prompts[-1]  # the sources went to the LLM


async def test_a_failing_or_unfaithful_llm_falls_back_and_loses_nothing(
    data_dir: Path, fake_llm: FakeOpenAI, clock: Clock
) -> None:
    fake_llm.chat_default = ("json", {"summary": "迁移数据库。"})  # drops the identifiers: rejected
    hit = await _compress_with(data_dir / "a", fake_llm, clock)
    assert hit["level"] == 1
    assert "PostgreSQL 16" in str(hit["text"])  # the extractive fallback kept them
    fake_llm.chat_default = ("status", 500)
    hit = await _compress_with(data_dir / "b", fake_llm, clock)
    assert hit["level"] == 1
    assert "tools/migrate_billing.py" in str(hit["text"])


async def test_a_configured_key_of_any_shape_never_reaches_an_error_or_a_log(
    data_dir: Path, fake_llm: FakeOpenAI, clock: Clock
) -> None:
    key = "corp-gateway-7f3a9c2e1b8d4f60a5e7"  # no pattern knows this shape
    fake_llm.chat_default = ("error", (401, f"Incorrect API key provided: {key}"))
    llm = _client(fake_llm, clock, api_key=key, max_retries=0)
    with pytest.raises(UpstreamError) as raised:
        await llm.complete_json("alice", "p")
    assert key not in str(raised.value)
    assert "[REDACTED:configured-key]" in str(raised.value)  # the positive control: the message was there
    # The operator's view: `mcp-memory maintain` in its own process, its log on stderr.
    async with open_server(load_settings(data_dir=data_dir, principal="alice")) as runtime:
        chat = MemoryDraft(content="A chat turn worth reading for facts.", kind="message")
        await runtime.memory.remember(Scope("alice"), [chat], CallContext())
    env = {
        **os.environ,
        "MCP_MEMORY_LLM__ENABLED": "true",
        "MCP_MEMORY_LLM__BASE_URL": fake_llm.base_url,
        "MCP_MEMORY_LLM__MAX_RETRIES": "0",
        "MCP_MEMORY_LLM__API_KEY_ENV": "CORP_GATEWAY_KEY",
        "CORP_GATEWAY_KEY": key,
        "MCP_MEMORY_LOG_LEVEL": "DEBUG",
    }
    with anyio.fail_after(120):
        done = await anyio.run_process(
            [sys.executable, "-m", "mcp_memory", "--data-dir", str(data_dir), "--principal", "alice", "maintain"],
            env=env,
            check=False,
        )
    stderr, stdout = done.stderr.decode(), done.stdout.decode()
    assert done.returncode == 0, stderr
    assert "Incorrect API key provided: [REDACTED:configured-key]" in stderr
    assert key not in stderr + stdout


async def test_retries_stop_at_the_budget(fake_llm: FakeOpenAI, clock: Clock) -> None:
    fake_llm.chat_default = ("status", 500)
    llm = _client(fake_llm, clock, max_retries=5, calls_per_scope_per_day=2)
    with pytest.raises(UpstreamError):
        await llm.complete_json("alice", "p")
    assert llm.stats.calls == 2  # not 6: every attempt is paid from the budget
    assert (await llm.usage("alice"))["calls_today"] == 2


async def test_an_llm_summary_that_adds_what_its_sources_do_not_say_is_rejected(
    data_dir: Path, fake_llm: FakeOpenAI, clock: Clock
) -> None:
    faithful = "下周三把计费数据库迁移到PostgreSQL 16，因为需要JSONB；发布之前必须运行tools/migrate_billing.py。"
    fake_llm.chat_default = ("json", {"summary": faithful + "另外，db-7 在 2027-01-05 部署。"})
    hit = await _compress_with(data_dir, fake_llm, clock)
    assert hit["level"] == 1
    assert "db-7" not in str(hit["text"])  # the extractive summary was used instead
    assert "PostgreSQL 16" in str(hit["text"])


def test_the_check_names_an_invented_identifier_or_sentence() -> None:
    sources = ["Billing moves to PostgreSQL 16 on 2026-12-09.", "Great, thanks.", "It moves on 2026-12-09, yes."]
    assert summarize.invented(sources, "Billing moves to PostgreSQL 16 on 2026-12-09.") is None
    assert "db-7" in str(summarize.invented(sources, "Billing moves to PostgreSQL 16. Deploy db-7."))
    made_up = summarize.invented(sources, "Billing moves to PostgreSQL 16. The CFO approved a larger budget.")
    assert "do not" in str(made_up)


async def test_the_budget_is_one_for_every_process_on_the_data_directory(
    tmp_path: Path, fake_llm: FakeOpenAI, clock: Clock
) -> None:
    """A server and a `maintain` run (two clients, two ledgers on one directory) share one budget."""
    fake_llm.chat_default = ("json", {"summary": "x"})
    server = _client(fake_llm, clock, calls_per_scope_per_day=3)
    server.ledger = LlmLedger(tmp_path)
    maintain = _client(fake_llm, clock, calls_per_scope_per_day=3)
    maintain.ledger = LlmLedger(tmp_path)
    await server.complete_json("alice", "p")
    await maintain.complete_json("alice", "p")
    await server.complete_json("alice", "p")
    with pytest.raises(LlmPausedError, match="budget"):
        await maintain.complete_json("alice", "p")
    assert (await server.usage("alice"))["calls_today"] == 3  # what the other process spent counts
    await maintain.complete_json("bob", "p")  # per principal
    clock.advance(86_400)
    await maintain.complete_json("alice", "p")  # and per day
    assert b"alice" not in (tmp_path / "control.db").read_bytes()  # names are not kept, only hashes
