"""`mcp-memory hook EVENT`: Claude Code's hooks, answered from long-term memory.

Claude Code runs the command at each event with a JSON object on stdin (session_id,
transcript_path, cwd, hook_event_name and the event's own fields) and reads the answer on stdout:

- SessionStart: the memory file applied (as a starting server does), then the pinned memories and
  the resume packet of the task in progress, as context.
- UserPromptSubmit: the memories recall finds for the prompt, within a small budget, that stand
  clearly out of the store (HINT_MIN_Z; nothing rather than noise), as context; in a store too small
  to stand out of (STORE_STATS_MIN), those recall calls strong on their own evidence.
- PreCompact and Stop: the user's notable statements of the session (decisions, preferences,
  identifiers, "remember ...") are remembered, tied to the task in progress, and the task's head is
  checkpointed when it moved since its last checkpoint. Nothing is printed.

While the kill switch is off for the scope, every hook does nothing (quietly). The namespace is
the hook command's `--namespace` (set per project in that project's settings),
never guessed from the working directory. A hook never blocks the session: whatever fails is
logged on stderr and the answer is empty, exit code 0. Nothing but the answer reaches stdout. The
MCP SDK is not imported: the prompt hook answers from a cold process within its deadline.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import orjson

from mcp_memory.compose import Runtime, open_runtime
from mcp_memory.config import Settings
from mcp_memory.core.models import MemoryDraft, Scope
from mcp_memory.core.task_model import CheckpointReason, Task
from mcp_memory.core.text import normalize, nothing_to_search
from mcp_memory.mcp.templates import hint_text, recall_text, resume_text
from mcp_memory.mcp.wire_recall import hit_tokens, memory_out, recall_result
from mcp_memory.mcp.wire_tasks import resume_packet
from mcp_memory.services import foreign, rules, strength
from mcp_memory.services.switch import off_reason

log = logging.getLogger(__name__)

# Claude Code waits for a hook; these deadlines keep the session moving when memory is slow.
DEADLINES = {"SessionStart": 8.0, "PreCompact": 30.0, "Stop": 15.0}  # UserPromptSubmit: hook_prompt_seconds
PROMPT_K = 5
PROMPT_BUDGET_TOKENS = 800
# A prompt's hint carries a memory only when it stands this many standard deviations above the store's
# ordinary closeness to the prompt (recall's fused score): recall's own floor (above the ordinary) lets
# about half a store through for any prompt, which is noise for context nobody asked for.
HINT_MIN_Z = strength.STANDS_OUT
# Below this many memories the store's own mean and spread say nothing (of n memories the best stands at
# most sqrt(n - 1) deviations above their mean, and a spread of a handful is noise): there a hit is judged
# on its own evidence instead, against the embedding model's background (embed.background), not the store's:
# the hits recall calls strong (services/strength.py: their closeness in background deviations and the rare
# words they share, above the other memories' median closeness), so what recall calls strong is what goes.
STORE_STATS_MIN = strength.STORE_STATS_MIN
RESUME_BUDGET_TOKENS = 2_000
MEMORY_FILE_SECONDS = 4.0  # SessionStart waits at most this for another process applying the memory file
TRANSCRIPT_TAIL_LINES = 2_000  # the session's recent turns: a long transcript is not read whole
TRANSCRIPT_TAIL_BYTES = 32 << 20  # nor more than this of its end, however long its lines (tool results)
_NOT_PROMPTS = ("<command-", "<local-command", "<bash-", "<user-memory-input", "Caveat:", "/")
_FINISHED = ("done", "abandoned")


@dataclass(frozen=True)
class Answer:
    context: str | None = None  # added to the model's context (SessionStart, UserPromptSubmit)


def run(settings: Settings, event: str, raw: bytes) -> int:
    """Answer one hook call; always exit 0 (a failure is logged, the session goes on)."""
    started = time.perf_counter()
    try:
        answer = anyio.run(_answer_in_time, settings, event, _payload(raw))
    except Exception as exc:  # the session must go on whatever happened here
        cause: BaseException = exc
        while isinstance(cause, BaseExceptionGroup) and cause.exceptions:  # the cause, not the task group
            cause = cause.exceptions[0]
        log.warning("hook %s answered nothing: %s: %s", event, type(cause).__name__, cause)
        return 0
    if answer.context:
        out = {"hookSpecificOutput": {"hookEventName": event, "additionalContext": answer.context}}
        sys.stdout.write(orjson.dumps(out).decode() + "\n")
        sys.stdout.flush()
    log.info("hook %s answered in %.0f ms", event, (time.perf_counter() - started) * 1000)
    return 0


def _payload(raw: bytes) -> dict[str, Any]:
    payload = orjson.loads(raw) if raw.strip() else {}
    if not isinstance(payload, dict):
        raise ValueError("the hook input is not a JSON object")
    return payload


async def _answer_in_time(settings: Settings, event: str, payload: dict[str, Any]) -> Answer:
    """The answer, or, past the event's deadline, nothing at once: the process ends there (work
    cut short by a cancellation could leave a database thread behind and keep it alive; SQLite
    rolls back whatever was not committed)."""
    # No hook gives up sooner than the prompt hook may take (raising it gives every hook that time).
    deadline = max(DEADLINES.get(event, 0.0), settings.hook_prompt_seconds)
    answered: list[Answer] = []
    async with anyio.create_task_group() as group:

        async def work() -> None:
            answered.append(await _answer(settings, event, payload))
            group.cancel_scope.cancel()

        group.start_soon(work)
        await anyio.sleep(deadline)
        log.warning("hook %s gave up after %.1f s: no answer this time", event, deadline)
        logging.shutdown()
        os._exit(0)
    return answered[0]


async def _answer(settings: Settings, event: str, payload: dict[str, Any]) -> Answer:
    scope = Scope(settings.principal, settings.namespace)
    async with open_runtime(settings, hit_cost=hit_tokens) as runtime:
        if await off_reason(runtime.memory.switch, scope) is not None:  # the kill switch: quietly nothing
            return Answer()
        if event == "UserPromptSubmit":
            runtime.embedder.start()
            prompt = payload.get("prompt")
            return await _prompt(runtime, scope, prompt if isinstance(prompt, str) else "", settings)
        if event == "SessionStart":
            return await _session_start(runtime, scope)
        runtime.embedder.start()
        reason: CheckpointReason = "before_compaction" if event == "PreCompact" else "periodic"
        await _capture(runtime, scope, payload, reason)
        return Answer()


async def _prompt(runtime: Runtime, scope: Scope, prompt: str, settings: Settings) -> Answer:
    question = prompt.strip()[: settings.limits.max_query_chars]
    if nothing_to_search(question):  # "???", "and then?": recall would refuse it, and nobody asked
        return Answer()
    result = recall_result(
        await runtime.memory.recall(
            scope, question, k=PROMPT_K, budget_tokens=PROMPT_BUDGET_TOKENS, reinforce=False, floor=True, explain=True
        )
    )
    size = runtime.store.vectors.size(scope)  # the principal's index, loaded by the recall
    if size is not None and size < STORE_STATS_MIN:  # recall's strength: its own evidence (services/strength.py)
        hits = [h for h in result.hits if h.strong]
    else:  # nobody asked: only what stands clearly out of the store goes beside the prompt
        hits = [h for h in result.hits if h.signals is not None and h.signals.fused >= HINT_MIN_Z]
    return Answer(hint_text(hits) if hits else None)


async def _session_start(runtime: Runtime, scope: Scope) -> Answer:
    # The memory file first, as a starting server's first calls wait for its first look at it: pins
    # edited while no server ran belong in this context too (MEMORY_FILE_SECONDS at most for another
    # process applying it, within the hook's deadline).
    await runtime.memory_file.look(MEMORY_FILE_SECONDS)
    parts = []
    pinned = await runtime.memory.pinned(scope)
    task = await _task_in_progress(runtime, scope)
    if task is not None:
        found = await runtime.tasks.resume(scope, task.row.task_id, budget_tokens=RESUME_BUDGET_TOKENS)
        parts.append(resume_text(resume_packet(found)))  # it carries the pinned memories too
    elif pinned:
        parts.append(recall_text("what always applies", [memory_out(p) for p in pinned], []))
    return Answer("\n\n".join(parts) or None)


async def _task_in_progress(runtime: Runtime, scope: Scope) -> Task | None:
    """The most recently changed task of the scope that is neither done nor abandoned."""
    page = await runtime.tasks.list_tasks(scope, limit=20)
    return next((t for t in page.items if (t.head.tree.status if t.head.tree else None) not in _FINISHED), None)


async def _capture(runtime: Runtime, scope: Scope, payload: dict[str, Any], reason: CheckpointReason) -> None:
    """Before compaction and at a stop: the session's notable statements, and the task's head."""
    task = await _task_in_progress(runtime, scope)
    session = str(payload.get("session_id") or "") or None
    statements = notable(_user_texts(payload.get("transcript_path")))
    items = [
        MemoryDraft(
            content=text,
            kind="observation",
            tags=["claude-code"],
            metadata={"captured_by": "claude-code hook"},
            session_id=f"claude-code:{session}" if session else None,
            task_id=task.row.task_id if task is not None else None,
        )
        for text in statements
    ]
    if items:
        outcome = await foreign.bring_in(runtime.memory, scope, items, apply=True)
        log.info("hook: %d statements, %d new, %d already stored", outcome.read, outcome.stored, outcome.present)
    if task is not None:
        latest = await runtime.tasks.latest_checkpoint(scope, task.row.task_id)
        if latest is None or latest.seq < task.row.head_seq:  # the head moved since it was last saved
            await runtime.tasks.checkpoint(scope, task.row.task_id, changes={}, reason=reason)


def notable(texts: list[str]) -> list[str]:
    """What is worth keeping of what the user said: statements (not questions) that a rule finds
    notable (a decision, a preference, an identifier, an explicit "remember")."""
    kept = []
    for text in texts:
        clean = normalize(text)
        if not clean or clean.endswith(("?", "？")) or rules.is_throwaway(clean):
            continue
        if rules.estimate_importance(clean, "observation") > rules.estimate_importance("", "observation"):
            kept.append(clean)
    return list(dict.fromkeys(kept))


def tail(file: Path, lines: int, most: int) -> list[bytes]:
    """The last ``lines`` whole lines of ``file``, read back from its end, ``most`` bytes at the most:
    a transcript of hundreds of megabytes costs its last blocks, not its size in memory."""
    with file.open("rb") as fh:
        end = fh.seek(0, os.SEEK_END)
        start, at, data = max(end - most, 0), end, b""
        while at > start and data.count(b"\n") <= lines:
            step = min(1 << 20, at - start)
            at -= step
            fh.seek(at)
            data = fh.read(step) + data
    rows = data.splitlines()
    return (rows[1:] if at > 0 else rows)[-lines:]  # a read that began mid-line drops that piece


def _user_texts(path: object) -> list[str]:
    """The text the user typed in the session's recent turns (not tool results, not commands)."""
    if not isinstance(path, str) or not path:
        return []
    file = Path(path).expanduser()
    if not file.is_file():
        return []
    texts = []
    for line in tail(file, TRANSCRIPT_TAIL_LINES, TRANSCRIPT_TAIL_BYTES):
        try:
            entry = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(entry, dict) or entry.get("type") != "user" or entry.get("isMeta"):
            continue
        message = entry.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):  # blocks: text typed, or tool results (never the user's words)
            content = "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
        if isinstance(content, str) and content.strip() and not content.lstrip().startswith(_NOT_PROMPTS):
            texts.append(content)
    return texts
