"""Golden queries against a pass that would lose memories: the same store maintained unguarded and guarded.

    OMP_NUM_THREADS=1 .venv/bin/python tools/bench_golden.py [--sessions 10] [--runs 3]

Each session says four things three times (restated, as people do) and once, in passing, a long
aside (where a spare badge is kept). Two weeks on, the lifecycle's summary keeps the four things and
passes its fact check (12 of 13 facts) but has no room for the aside, whose memory goes to the
archive tier with the rest of the session: recall no longer finds it.

Both arms write the same sessions through a real `mcp-memory serve` over stdio, then run the real
CLI, `mcp-memory maintain --as-of +14d`, and ask each aside's question again (top 5, reinforcement
off). The unguarded arm has no golden queries (and none sampled); the guarded arm adds one golden
query per aside with the `golden_queries` tool. Printed per arm: summaries left after the pass,
passes rolled back, asides left archived, asides recall still finds, and the time `maintain` took
(median of --runs; the guarded arm asks each golden query twice).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import orjson
from mcpclient import SERVER_BIN, MemoryClient, ServerSpec, open_server
from stats import markdown_table

SERVICES = ["billing", "search", "payroll", "ledger", "catalog", "auth", "reports", "inbox", "quotes", "shipping"]
PEOPLE = ["Marta", "Kenji", "Aisha", "Tomas", "Priya", "Lars", "Chen", "Noor", "Diego", "Ilse"]
CITIES = ["Lisbon", "Oslo", "Osaka", "Quito", "Tunis", "Perth", "Cork", "Brno", "Lyon", "Pune"]
COLOURS = ["blue", "green", "red", "grey", "yellow", "white", "black", "orange", "purple", "brown"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]


def session(i: int) -> tuple[list[str], str, str]:
    """The session's memories (the aside last), the aside and its question."""
    svc, person, city = SERVICES[i % 10], PEOPLE[(i * 3) % 10], CITIES[(i * 7) % 10]
    colour, day, other, version, hour = COLOURS[(i * 9) % 10], DAYS[i % 5], DAYS[(i + 2) % 5], 12 + i, 14 + i % 8
    said = [
        (f"{svc} moves to PostgreSQL {version} next {day}.", f"Next {day} {svc} goes to PostgreSQL {version}.",
         f"So {svc} is on PostgreSQL {version} from next {day}."),
        (f"Run tools/migrate_{svc}.py before the deploy.", f"The deploy waits for tools/migrate_{svc}.py.",
         f"First tools/migrate_{svc}.py, then the deploy."),
        (f"Invoices freeze from {hour}:00 on {other}.", f"No invoices after {hour}:00 {other}.",
         f"Invoice freeze starts {other} {hour}:00."),
        (f"{person} owns the {svc} rollback plan.", f"The {svc} rollback plan is {person}'s.",
         f"{person} has the {svc} rollback plan."),
    ]  # fmt: skip
    aside = (
        f"By the way, in case anyone ever needs it, the spare visitor badge for the {city} office is kept in the "
        f"{colour} folder in the second drawer behind the reception desk, next to the old printer manuals."
    )
    return [s for trio in zip(*said, strict=True) for s in trio] + [aside], aside, f"where is the spare {city} badge"


async def write(spec: ServerSpec, sessions: int, guarded: bool) -> list[tuple[str, str]]:
    """Store every session; in the guarded arm add a golden query per aside. Returns (aside id, question)."""
    asides: list[tuple[str, str]] = []
    async with open_server(spec) as client:
        for i in range(sessions):
            texts, _, question = session(i)
            items = [{"content": t, "session_id": f"s-{i}", "importance": 0.5} for t in texts]
            stored = await client.remember(items)
            asides.append((stored[-1]["id"], question))
            if guarded:
                await client.call("golden_queries", {"query": question, "memory_id": stored[-1]["id"]})
    return asides


def maintain(spec: ServerSpec) -> tuple[dict[str, Any], float]:
    env = {**spec.parameters().env, "PATH": "/usr/bin:/bin"}  # type: ignore[dict-item]
    started = time.perf_counter()
    done = subprocess.run(
        [str(SERVER_BIN), "maintain", "--as-of", "+14d"], env=env, capture_output=True, text=True, check=True
    )
    return orjson.loads(done.stdout), time.perf_counter() - started


async def after(client: MemoryClient, asides: list[tuple[str, str]]) -> tuple[int, int]:
    """How many asides recall finds in its top 5, and how many the pass archived."""
    found = archived = 0
    for memory_id, question in asides:
        hits = (await client.recall(question, k=5))["hits"]
        found += any(h["id"] == memory_id for h in hits)
        archived += (await client.call("get_memory", {"id": memory_id}))["memory"]["tier"] == "archived"
    return found, archived


async def arm(root: Path, sessions: int, guarded: bool, run: int) -> dict[str, Any]:
    name = "guarded" if guarded else "unguarded"
    extra = {} if guarded else {"MCP_MEMORY_LIFECYCLE__GOLDEN_SAMPLE": "0"}
    spec = ServerSpec(data_dir=root / f"{name}-{run}", extra_env=extra)
    asides = await write(spec, sessions, guarded)
    report, seconds = maintain(spec)
    async with open_server(spec) as client:
        found, archived = await after(client, asides)
        summaries = (await client.call("stats", {}))["memories"].get("level:L1", 0)
    return {
        "arm": name,
        "report": report,
        "seconds": seconds,
        "found": found,
        "archived": archived,
        "summaries": summaries,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10, choices=range(1, 11), help="distinct sessions, 1 to 10")
    parser.add_argument("--runs", type=int, default=3, help="maintain runs per arm, for the median time")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-golden-") as tmp:
        for guarded in (False, True):
            results = []
            for run in range(args.runs):
                print(f"{'guarded' if guarded else 'unguarded'} run {run + 1}/{args.runs}", file=sys.stderr)
                results.append(await arm(Path(tmp), args.sessions, guarded, run))
            last = results[-1]
            rows.append(
                [
                    last["arm"],
                    str(args.sessions),
                    str(last["report"]["summaries"]),
                    str(last["summaries"]),
                    str(last["report"]["golden_rollbacks"]),
                    f"{last['archived']} / {args.sessions}",
                    f"{last['found']} / {args.sessions}",
                    f"{statistics.median(r['seconds'] for r in results):.2f}",
                ]
            )
    print(
        markdown_table(
            [
                "arm",
                "sessions",
                "summaries written",
                "summaries kept",
                "passes rolled back",
                "asides archived",
                "asides found (top 5)",
                "maintain s (median)",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    anyio.run(main)
