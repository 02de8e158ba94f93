"""`mcp-memory hook EVENT`, run as Claude Code runs it: a cold process, the payload on stdin.

Claude Code cannot run here; the payloads and the transcript lines are written from its hooks
documentation (common fields session_id, transcript_path, cwd, hook_event_name; SessionStart's
source, UserPromptSubmit's prompt, PreCompact's trigger and custom_instructions, Stop's
stop_hook_active) and its transcript shape (one JSON object a line, `type` user or assistant, the
message's content a string or a list of blocks).
"""

from __future__ import annotations

import random
import shlex
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from mcp_memory.cli.hooks import TRANSCRIPT_TAIL_LINES, tail
from mcp_memory.config import load_settings
from mcp_memory.core.models import MemoryDraft, Scope
from mcp_memory.mcp.server import open_server
from mcp_memory.services.memory import CallContext
from mcp_memory.storage.pool import principal_file
from tests.netserver import SERVER_BIN, server_env
from tests.readme_configs import PLACEHOLDER, REPO, readme_hook_settings

SESSION = "3f1c9a2e-8b7d-4e5f-a6c1-0d9e8f7a6b5c"
RULE = "Never push directly to the main branch; open a pull request"
FACTS = [
    "The billing service runs on PostgreSQL 16 since the migration in March",
    "Dana prefers tabs over spaces in Go code",
    "The staging cluster lives in the Frankfurt region",
    "Our office plants get watered every Thursday",
    "The quarterly report is due on the fifth of January",
    "Marek plays the cello in a string quartet",
    "The invoice service is written in Go",
    "The VPN gateway needs a hardware key to connect",
    "The coffee machine on the third floor is out of order",
    "Lena's flight to Oslo leaves at twenty to ten",
]  # with the rule, enough memories for the store's own statistics (hooks.STORE_STATS_MIN)


# The behaviour tests give the prompt hook time (CI runs them with the slower fallback model too);
# its deadline has a test of its own, and tools/bench_hooks.py measures the real answer time.
PATIENT = {"MCP_MEMORY_HOOK_PROMPT_SECONDS": "30"}


def hook(
    data: Path, event: str, payload: dict[str, Any] | bytes, *flags: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    body = payload if isinstance(payload, bytes) else orjson.dumps(payload)
    return subprocess.run(
        [str(SERVER_BIN), *flags, "hook", event],
        input=body,
        env=server_env(data, env or PATIENT),
        capture_output=True,
        timeout=60,
        check=False,
    )


def context_of(done: subprocess.CompletedProcess[bytes], event: str) -> str:
    assert done.returncode == 0, done.stderr
    answer = orjson.loads(done.stdout)
    assert set(answer) == {"hookSpecificOutput"}
    assert answer["hookSpecificOutput"]["hookEventName"] == event
    text: str = answer["hookSpecificOutput"]["additionalContext"]
    return text


def base(data: Path, event: str, **fields: Any) -> dict[str, Any]:
    transcript = data.parent / "transcript.jsonl"
    return {
        "session_id": SESSION,
        "transcript_path": str(transcript),
        "cwd": str(data.parent),
        "hook_event_name": event,
        **fields,
    }


def seed(data: Path, *, namespace: str | None = None, task: bool = False, facts: list[str] = FACTS) -> None:
    async def run() -> None:
        settings = load_settings(data_dir=data, principal="local-owner", namespace=namespace)
        async with open_server(settings, warm=False) as runtime:
            scope = Scope("local-owner", namespace)
            items = [MemoryDraft(content=RULE, kind="instruction", pinned=True)]
            items += [MemoryDraft(content=text) for text in facts]
            await runtime.memory.remember(scope, items, CallContext())
            if task:
                tree = {"id": "root", "title": "Move billing to PostgreSQL 16", "status": "in_progress"}
                changes = {"tree": tree, "current_node": "root", "snapshot": "Dump taken; restore next."}
                await runtime.tasks.checkpoint(
                    scope, "task-billing", changes=changes, goal="Move billing to PostgreSQL 16"
                )

    anyio.run(run)


def rows(data: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(principal_file(data, "local-owner")) as conn:
        return list(conn.execute(sql))


def test_session_start_gives_the_pinned_rules_and_the_task_in_progress(tmp_path: Path) -> None:
    data = tmp_path / "data"
    seed(data, task=True)
    text = context_of(hook(data, "SessionStart", base(data, "SessionStart", source="startup")), "SessionStart")
    assert RULE in text
    assert "Move billing to PostgreSQL 16" in text
    assert "Dump taken; restore next." in text


def test_session_start_with_nothing_stored_says_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    done = hook(data, "SessionStart", base(data, "SessionStart", source="startup"))
    assert done.returncode == 0
    assert done.stdout == b""


def test_a_prompt_gets_the_memories_that_bear_on_it_and_noise_gets_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    seed(data)
    asked = base(data, "UserPromptSubmit", prompt="Which database does the billing service use?")
    text = context_of(hook(data, "UserPromptSubmit", asked), "UserPromptSubmit")
    listed = [line for line in text.splitlines() if line.startswith("- ")]
    assert FACTS[0] in listed[0]  # the memory that answers comes first
    unrelated = base(data, "UserPromptSubmit", prompt="Wie hoch ist der Mount Everest in Metern?")
    done = hook(data, "UserPromptSubmit", unrelated)
    assert done.returncode == 0
    assert done.stdout == b"", done.stdout  # nothing above the floor: no context rather than noise


@pytest.mark.parametrize("prompt", ["???", "and then?", "的 了"])
def test_a_prompt_with_nothing_to_search_for_gets_nothing_and_no_warning(tmp_path: Path, prompt: str) -> None:
    """recall refuses such a question; the hook does not ask it, so the log holds no failure."""
    data = tmp_path / "data"
    seed(data)
    done = hook(data, "UserPromptSubmit", base(data, "UserPromptSubmit", prompt=prompt))
    assert done.returncode == 0
    assert done.stdout == b""
    assert b"answered nothing" not in done.stderr, done.stderr


def test_a_first_session_store_of_one_rule_and_one_fact_gives_the_fact_and_noise_nothing(tmp_path: Path) -> None:
    """Too few memories for the store's own statistics: each hit is judged on its own evidence (a
    content word of the prompt in the memory, closeness above the model's unrelated pairs)."""
    data = tmp_path / "data"
    cat = "The user's cat is named Biscuit"
    seed(data, facts=[cat])
    asked = base(data, "UserPromptSubmit", prompt="what's my cat called?")
    text = context_of(hook(data, "UserPromptSubmit", asked), "UserPromptSubmit")
    listed = [line for line in text.splitlines() if line.startswith("- ")]
    assert len(listed) == 1
    assert cat in listed[0]
    for prompt in ("how do I reverse a list in python?", "Wie hoch ist der Mount Everest in Metern?"):
        done = hook(data, "UserPromptSubmit", base(data, "UserPromptSubmit", prompt=prompt))
        assert done.returncode == 0
        assert done.stdout == b"", (prompt, done.stdout)


# A first week's store of technical notes: with e5, every one of them stands three background
# deviations above unrelated everyday texts for any technical prompt.
TECHNICAL = [
    "The user prefers tabs over spaces in Python code",
    "The app's config lives in /etc/orbit/config.toml on every server",
    "The deploy key for staging is kept in the team vault, do not share it",
    "The database password rotates every ninety days",
    "Robert's ticket about the DROP TABLE bug was closed",
    "我们决定下周三把账单数据库迁移到 PostgreSQL 16",
]


def test_a_small_store_of_technical_notes_gives_a_prompt_what_stands_above_the_others(tmp_path: Path) -> None:
    """Fewer memories than the store's statistics need, all close to any technical prompt: a hit
    goes beside the prompt only when it also stands above the store's other memories (their median
    closeness in the model's background deviations), not for being technical like the prompt."""
    data = tmp_path / "data"
    seed(data, facts=TECHNICAL)
    for prompt, wanted in (
        ("what are my coding style preferences?", TECHNICAL[0]),
        ("where is the config file of the app?", TECHNICAL[1]),
    ):
        text = context_of(
            hook(data, "UserPromptSubmit", base(data, "UserPromptSubmit", prompt=prompt)), "UserPromptSubmit"
        )
        listed = [line for line in text.splitlines() if line.startswith("- ")]
        assert len(listed) == 1, (prompt, listed)
        assert wanted in listed[0], (prompt, listed)
    done = hook(data, "UserPromptSubmit", base(data, "UserPromptSubmit", prompt="how do I reverse a list in Rust?"))
    assert done.returncode == 0
    assert done.stdout == b"", done.stdout


def test_the_namespace_comes_from_the_hook_command(tmp_path: Path) -> None:
    data = tmp_path / "data"
    seed(data, namespace="proj-a")
    asked = base(data, "UserPromptSubmit", prompt="Which database does the billing service use?")
    assert FACTS[0] in context_of(hook(data, "UserPromptSubmit", asked, "--namespace", "proj-a"), "UserPromptSubmit")
    other = hook(data, "UserPromptSubmit", asked, "--namespace", "proj-b")
    assert other.returncode == 0
    assert other.stdout == b""


def _transcript(data: Path) -> None:
    lines = [
        {
            "type": "user",
            "sessionId": SESSION,
            "message": {
                "role": "user",
                "content": "Remember that we deploy the billing service with Helm chart billing-2.4.1 from now on.",
            },
        },
        {
            "type": "assistant",
            "sessionId": SESSION,
            "message": {"role": "assistant", "content": [{"type": "text", "text": "Noted. I decided to use Helm."}]},
        },
        {"type": "user", "sessionId": SESSION, "message": {"role": "user", "content": "What time is it in Oslo?"}},
        {
            "type": "user",
            "sessionId": SESSION,
            "message": {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_01", "content": "We decided nothing; exit code 0"}
                ],
            },
        },
        {
            "type": "user",
            "sessionId": SESSION,
            "message": {"role": "user", "content": "<command-name>/clear</command-name>"},
        },
        {
            "type": "user",
            "sessionId": SESSION,
            "isMeta": True,
            "message": {
                "role": "user",
                "content": "Caveat: the messages below were generated by the user while running local commands.",
            },
        },
        {
            "type": "user",
            "sessionId": SESSION,
            "message": {
                "role": "user",
                "content": [
                    {"type": "text", "text": "We decided to keep the old invoices in the archive bucket INV-2025."}
                ],
            },
        },
        {"type": "user", "sessionId": SESSION, "message": {"role": "user", "content": "thanks!"}},
    ]
    (data.parent / "transcript.jsonl").write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))


@pytest.mark.parametrize("event", ["PreCompact", "Stop"])
def test_compaction_and_stop_keep_the_notable_statements_and_checkpoint_a_moved_task(
    tmp_path: Path, event: str
) -> None:
    data = tmp_path / "data"
    seed(data, task=True)
    _transcript(data)
    extra = {"trigger": "auto", "custom_instructions": ""} if event == "PreCompact" else {"stop_hook_active": False}
    before = rows(data, "SELECT COUNT(*) FROM checkpoints")[0][0]
    done = hook(data, event, base(data, event, **extra))
    assert done.returncode == 0, done.stderr
    assert done.stdout == b""
    captured = rows(data, "SELECT content, task_id, session_key FROM memories WHERE tags LIKE '%claude-code%'")
    assert sorted(c[0] for c in captured) == [
        "Remember that we deploy the billing service with Helm chart billing-2.4.1 from now on.",
        "We decided to keep the old invoices in the archive bucket INV-2025.",
    ]
    assert {(c[1], c[2]) for c in captured} == {("task-billing", f"claude-code:{SESSION}")}
    assert rows(data, "SELECT COUNT(*) FROM checkpoints")[0][0] == before  # the head had not moved

    again = hook(data, event, base(data, event, **extra))
    assert again.returncode == 0
    assert len(rows(data, "SELECT id FROM memories WHERE tags LIKE '%claude-code%'")) == 2  # nothing twice
    occurrences = rows(
        data, "SELECT COUNT(*) FROM occurrences o JOIN memories m ON m.n = o.memory_n WHERE m.tags LIKE '%claude-code%'"
    )
    assert occurrences[0][0] == 2


def test_a_task_moved_since_its_last_checkpoint_is_checkpointed_before_compaction(tmp_path: Path) -> None:
    data = tmp_path / "data"
    seed(data, task=True)

    async def move() -> None:
        from mcp_memory.core.task_model import TaskEdit

        async with open_server(load_settings(data_dir=data, principal="local-owner"), warm=False) as runtime:
            edit = TaskEdit.model_validate({"op": "set", "node_id": "root", "notes": "restore is running"})
            await runtime.tasks.update_task(Scope("local-owner"), "task-billing", [edit], None)

    anyio.run(move)
    done = hook(data, "PreCompact", base(data, "PreCompact", trigger="manual", custom_instructions="keep the plan"))
    assert done.returncode == 0, done.stderr
    reasons = rows(data, "SELECT reason FROM checkpoints ORDER BY seq")
    assert reasons[-1] == ("before_compaction",)


@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]", b'{"prompt": 42}'])
def test_a_broken_payload_never_blocks_the_session(tmp_path: Path, body: bytes) -> None:
    done = hook(tmp_path / "data", "UserPromptSubmit", body)
    assert done.returncode == 0
    assert done.stdout == b""


def test_the_readme_hooks_block_wires_each_event_with_the_project_namespace(tmp_path: Path) -> None:
    hooks = readme_hook_settings()
    assert set(hooks) == {"SessionStart", "UserPromptSubmit", "PreCompact", "Stop"}
    data = tmp_path / "data"
    seed(data, namespace="my-project")
    for event, groups in hooks.items():
        ((entry,),) = [group["hooks"] for group in groups]
        assert entry["type"] == "command"
        assert entry["timeout"] >= 5
        argv = shlex.split(entry["command"].replace(PLACEHOLDER, str(REPO)))
        assert argv[1:3] == ["hook", event]
        done = subprocess.run(
            argv,
            input=orjson.dumps(base(data, event, prompt="Which database does billing use?", source="startup")),
            env=server_env(data, PATIENT),
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        if event in ("SessionStart", "UserPromptSubmit"):  # the namespace reached: its memories come back
            assert RULE in context_of(done, event) or FACTS[0] in context_of(done, event)


def test_the_hooks_obey_the_kill_switch(tmp_path: Path) -> None:
    data = tmp_path / "data"
    seed(data, task=True)
    _transcript(data)
    off = subprocess.run(
        [str(SERVER_BIN), "switch", "off"], env=server_env(data), capture_output=True, timeout=60, check=False
    )
    assert off.returncode == 0, off.stderr
    for event, extra in (("SessionStart", {"source": "startup"}), ("UserPromptSubmit", {"prompt": FACTS[0]})):
        done = hook(data, event, base(data, event, **extra))
        assert done.returncode == 0
        assert done.stdout == b""
    stopped = hook(data, "Stop", base(data, "Stop", stop_hook_active=False))
    assert stopped.returncode == 0
    assert stopped.stderr == b""  # quiet: being off is no failure
    assert rows(data, "SELECT COUNT(*) FROM memories WHERE tags LIKE '%claude-code%'") == [(0,)]


def test_a_prompt_hook_past_its_deadline_answers_nothing_and_exits_at_once(tmp_path: Path) -> None:
    data = tmp_path / "data"
    seed(data)
    asked = base(data, "UserPromptSubmit", prompt="Which database does the billing service use?")
    started = time.monotonic()
    done = hook(data, "UserPromptSubmit", asked, env={"MCP_MEMORY_HOOK_PROMPT_SECONDS": "0.01"})
    assert time.monotonic() - started < 20  # no thread left behind keeps the process alive
    assert done.returncode == 0
    assert done.stdout == b""
    assert b"gave up after" in done.stderr


@pytest.mark.parametrize(
    "flags",
    [["--config", "/nonexistent/config.toml"], ["--namespce", "x"]],
    ids=["missing-config", "mistyped-flag"],
)
def test_a_broken_command_line_or_config_never_blocks_the_session(tmp_path: Path, flags: list[str]) -> None:
    done = hook(tmp_path / "data", "Stop", base(tmp_path / "data", "Stop"), *flags)
    assert done.returncode == 0  # exit 2 would tell Claude Code to block
    assert done.stdout == b""
    assert done.stderr  # and says what is wrong


def test_an_unknown_event_never_blocks_the_session(tmp_path: Path) -> None:
    done = hook(tmp_path / "data", "SubagentStop", {"hook_event_name": "SubagentStop"})
    assert done.returncode == 0
    assert done.stdout == b""


def test_the_transcript_is_read_from_its_end_not_whole(tmp_path: Path) -> None:
    # A 300 MB transcript was read whole (700 MB resident) to keep its last 2,000 lines.
    rng = random.Random(7)
    lines = [b"x" * rng.randrange(0, 3_000) + b" %d" % i for i in range(5_000)]
    transcript = tmp_path / "transcript.jsonl"
    transcript.write_bytes(b"\n".join(lines) + b"\n")
    assert tail(transcript, 2_000, 1 << 30) == lines[-2_000:]
    assert tail(transcript, 10, 1 << 30) == lines[-10:]
    capped = tail(transcript, 2_000, 100_000)  # at most this much of the end, whole lines only
    assert 0 < len(capped) < 2_000
    assert capped == lines[-len(capped) :]
    assert tail(transcript, 5_000, 1 << 30) == lines


def test_the_stop_hook_reads_only_the_transcripts_recent_turns(tmp_path: Path) -> None:
    # The hook keeps what the session said lately: a statement 2,000 lines before the end is past it.
    data = tmp_path / "data"
    seed(data)

    def said(text: str) -> bytes:
        return orjson.dumps({"type": "user", "sessionId": SESSION, "message": {"role": "user", "content": text}})

    reply = {"role": "assistant", "content": "ok"}
    filler = orjson.dumps({"type": "assistant", "sessionId": SESSION, "message": reply})
    early = said("We decided to rename the staging bucket to STG-OLD-7.")
    late = said("We decided to pin the invoice worker to Python 3.12 from now on.")
    lines = [early, *[filler] * TRANSCRIPT_TAIL_LINES, late]
    (data.parent / "transcript.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    done = hook(data, "Stop", base(data, "Stop", stop_hook_active=False))
    assert done.returncode == 0, done.stderr
    captured = rows(data, "SELECT content FROM memories WHERE tags LIKE '%claude-code%'")
    assert [c[0] for c in captured] == ["We decided to pin the invoice worker to Python 3.12 from now on."]


def test_session_start_applies_the_memory_file_first(tmp_path: Path) -> None:
    """Pins written in the memory file while no server ran are in the session's first context, as
    they are in a starting server's first recall: the hook gave only the store's pins before."""
    data = tmp_path / "data"
    seed(data, facts=FACTS[:2])
    config = tmp_path / "config.toml"
    config.touch()
    (tmp_path / "MEMORY.md").write_text("# Memory\n- Deploys need Ingrid's approval {#deploys}\n", encoding="utf-8")
    env = {**PATIENT, "MCP_MEMORY_CONFIG": str(config)}
    text = context_of(hook(data, "SessionStart", base(data, "SessionStart", source="startup"), env=env), "SessionStart")
    assert "Deploys need Ingrid's approval" in text
    assert RULE in text  # the store's own pin stays
    # Edited again: the next session's context has the new wording, not the old.
    (tmp_path / "MEMORY.md").write_text("- Deploys need Ingrid's or Omar's approval {#deploys}\n", encoding="utf-8")
    text = context_of(hook(data, "SessionStart", base(data, "SessionStart", source="startup"), env=env), "SessionStart")
    assert "Deploys need Ingrid's or Omar's approval" in text
    assert "Deploys need Ingrid's approval" not in text
