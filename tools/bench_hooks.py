"""Time to answer of the Claude Code hooks, each from a cold process as Claude Code runs them.

    .venv/bin/python tools/bench_hooks.py [--runs 9] [--memories 1000]

A store of synthetic agent memories is written once; then `mcp-memory hook EVENT` is run `--runs`
times per event with the payload on stdin, and the wall time from spawn to exit is measured. The
target (issue 13): UserPromptSubmit answers within 1.5 s on this kind of machine. Markdown goes to
stdout.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import anyio
import orjson
import synth
from stats import markdown_table, median, percentile, verdict

from mcp_memory.compose import open_runtime
from mcp_memory.config import load_settings
from mcp_memory.core.models import MemoryDraft, Scope
from mcp_memory.mcp.wire_recall import hit_tokens
from mcp_memory.services.memory import CallContext

REPO = Path(__file__).resolve().parent.parent
BINARY = REPO / ".venv" / "bin" / "mcp-memory"
TARGET_SECONDS = 1.5


def _seed(data: Path, count: int) -> None:
    async def run() -> None:
        settings = load_settings(data_dir=data, principal="local-owner")
        async with open_runtime(settings, hit_cost=hit_tokens) as core:
            core.embedder.start()
            texts = synth.distinct(synth.memory, count, seed=13)
            batch = settings.limits.max_batch
            for start in range(0, len(texts), batch):
                items = [MemoryDraft(content=t) for t in texts[start : start + batch]]
                await core.memory.remember(Scope("local-owner"), items, CallContext())

    anyio.run(run)


def _time(data: Path, event: str, payload: Mapping[str, object]) -> tuple[float, bool]:
    # What Claude Code passes matters little here: the data directory, the principal, a home.
    env = {"MCP_MEMORY_DATA_DIR": str(data), "MCP_MEMORY_PRINCIPAL": "local-owner", "HOME": str(data.parent)}
    started = time.perf_counter()
    done = subprocess.run(
        [str(BINARY), "hook", event], input=orjson.dumps(payload), env=env, capture_output=True, check=False
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"hook {event} exited {done.returncode}: {done.stderr.decode(errors='replace')}")
    return elapsed, bool(done.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--memories", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        _seed(data, args.memories)
        questions = synth.distinct(synth.question, args.runs, seed=29)
        common = {"session_id": "bench", "transcript_path": str(Path(tmp) / "none.jsonl"), "cwd": tmp}
        rows = []
        for event, payloads in (
            ("UserPromptSubmit", [{**common, "hook_event_name": "UserPromptSubmit", "prompt": q} for q in questions]),
            ("SessionStart", [{**common, "hook_event_name": "SessionStart", "source": "startup"}] * args.runs),
            ("Stop", [{**common, "hook_event_name": "Stop", "stop_hook_active": False}] * args.runs),
        ):
            timed = [_time(data, event, p) for p in payloads]
            seconds = [t for t, _ in timed]
            answered = sum(a for _, a in timed)
            ok = median(seconds) <= TARGET_SECONDS if event == "UserPromptSubmit" else True
            rows.append(
                [
                    event,
                    f"{median(seconds):.2f}",
                    f"{percentile(seconds, 90):.2f}",
                    f"{answered}/{len(timed)}",
                    verdict(ok) if event == "UserPromptSubmit" else "-",
                ]
            )
    print(f"Cold-process hook answers, store of {args.memories} memories, {args.runs} runs each")
    print(f"(load {' '.join(Path('/proc/loadavg').read_text().split()[:3])})\n")
    print(markdown_table(["event", "median s", "p90 s", "with context", f"<= {TARGET_SECONDS} s"], rows))


if __name__ == "__main__":
    main()
