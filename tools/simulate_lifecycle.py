"""A month of simulated sessions, run with and without the lifecycle, in one run.

    OMP_NUM_THREADS=1 .venv/bin/python tools/simulate_lifecycle.py [--days 30] [--seed 7]

The generator (fixed seed): one user, `--days` days, 3 to 6 sessions a day, each session a few
memories: small talk, facts with identifiers, and statements of a preference on one of twelve
subjects (drink, editor theme, ...). A preference is restated now and then, and changes about
once a week per subject; half of the changes say so ("switched to", "no longer"), half just state
the new value. Time moves with an injected clock, so decay sees real idle times.

Both runs get the same memories. "with lifecycle" runs `Scheduler.run_once` once a simulated day
(decay, archive, compression); "without" never does. At the end each subject is asked about
("what <subject> does the user prefer now?") and the answer is stale when the first hit naming a
value of that subject names an old one. Reported: stale rate, active and archived memories,
summaries, pass durations (median) and the store's size on disk.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from mcp_memory.config import load_settings
from mcp_memory.models import MemoryInput, Scope
from mcp_memory.server import open_runtime
from mcp_memory.services.memory import CallContext

SUBJECTS: dict[str, list[str]] = {
    "morning drink": ["black coffee", "green tea", "oat latte", "hot chocolate"],
    "editor theme": ["dark theme", "light theme", "solarized theme"],
    "meeting slot": ["morning meetings", "afternoon meetings", "no meetings on Fridays"],
    "lunch": ["ramen", "salad bowls", "dumplings", "sandwiches"],
    "travel seat": ["window seat", "aisle seat"],
    "note app": ["Obsidian", "Notion", "plain text files"],
    "music while coding": ["lo-fi", "jazz", "silence"],
    "commute": ["cycling", "the train", "walking"],
    "report format": ["PDF reports", "slide decks", "plain email summaries"],
    "code review style": ["small pull requests", "batched reviews"],
    "exercise": ["running", "swimming", "yoga"],
    "reading": ["science fiction", "history books", "technical papers"],
}
SMALL_TALK = [
    "We chatted about the weather and whether it would rain on the way home today.",
    "Someone mentioned the coffee machine on the third floor is broken again.",
    "We talked for a while about a film from the weekend and its long ending.",
    "There was a long discussion about where the team offsite should happen this year.",
]


@dataclass
class RunResult:
    stale: int = 0
    asked: int = 0
    active: int = 0
    archived: int = 0
    summaries: int = 0
    pass_ms: list[float] = field(default_factory=list)
    bytes_on_disk: int = 0


@dataclass
class Event:
    day: float
    text: str
    session: str
    importance: float | None = None


def generate(days: int, seed: int) -> tuple[list[Event], dict[str, str]]:
    r = random.Random(seed)
    current = {subject: r.choice(values) for subject, values in SUBJECTS.items()}
    events: list[Event] = []
    for subject, value in current.items():
        events.append(Event(0.0, f"The user prefers {value} for {subject}.", "s-0-0"))
    ticket = 1000
    for day in range(1, days + 1):
        for s in range(r.randint(3, 6)):
            session = f"s-{day}-{s}"
            at = day + s / 10
            events.extend(
                Event(at, r.choice(SMALL_TALK) + f" (day {day})", session, 0.3) for _ in range(r.randint(1, 3))
            )
            ticket += 1
            events.append(Event(at, f"Ticket OPS-{ticket} was closed after the deploy on day {day}.", session))
            subject = r.choice(list(SUBJECTS))
            if r.random() < 1 / 7 * 2:  # each subject changes about once a week
                old, new = current[subject], r.choice([v for v in SUBJECTS[subject] if v != current[subject]])
                current[subject] = new
                text = (
                    f"The user switched from {old} to {new} for {subject}."
                    if r.random() < 0.5
                    else f"The user prefers {new} for {subject}."
                )
            else:
                text = f"The user prefers {current[subject]} for {subject}."
            events.append(Event(at, text, session))
    return events, current


async def run(events: list[Event], current: dict[str, str], lifecycle: bool, folder: Path) -> RunResult:
    clock_now = [time.time()]
    start = clock_now[0]
    settings = load_settings(data_dir=folder, principal="sim", lifecycle={"enabled": False})
    result = RunResult()
    async with open_runtime(settings, clock=lambda: clock_now[0], warm=False) as runtime:
        scope = Scope("sim")
        last_pass_day = 0
        for event in events:
            clock_now[0] = start + event.day * 86_400
            if lifecycle and int(event.day) > last_pass_day:
                last_pass_day = int(event.day)
                began = time.perf_counter()
                await runtime.scheduler.run_once(clock_now[0])
                result.pass_ms.append(1000 * (time.perf_counter() - began))
            item = MemoryInput(
                content=event.text,
                session_id=event.session,
                importance=event.importance,
                kind="preference" if "prefers" in event.text or "switched" in event.text else "fact",
            )
            await runtime.memory.remember(scope, [item], CallContext())
        clock_now[0] += 86_400
        for subject, value in current.items():
            answer = await runtime.memory.recall(
                scope, f"What {subject} does the user prefer now?", k=5, reinforce=False
            )
            result.asked += 1
            for hit in answer.hits:
                named = [v for v in SUBJECTS[subject] if v.lower() in hit.text.lower()]
                if named:
                    # a change statement names old and new: it answers with the value it ends on
                    if hit.text.lower().rfind(value.lower()) < max(hit.text.lower().rfind(v.lower()) for v in named):
                        result.stale += 1
                    break
        tiers = await runtime.scheduler.lifecycle.rows.tier_counts(scope)
        result.active = tiers.get("tier:active", 0)
        result.archived = tiers.get("tier:archived", 0)
        result.summaries = tiers.get("level:L1", 0)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    events, current = generate(args.days, args.seed)
    print(f"## Lifecycle simulation: {args.days} days, seed {args.seed}, {len(events)} memories sent\n")
    rows = []
    for lifecycle in (False, True):
        with tempfile.TemporaryDirectory() as tmp:
            began = time.perf_counter()
            result = anyio.run(run, events, current, lifecycle, Path(tmp))
            seconds = time.perf_counter() - began
            result.bytes_on_disk = sum(p.stat().st_size for p in Path(tmp).rglob("*") if p.is_file())
        median = f"{statistics.median(result.pass_ms):.0f}" if result.pass_ms else "-"
        rows.append(
            f"| {'with' if lifecycle else 'without'} lifecycle | {result.stale}/{result.asked} "
            f"({100 * result.stale / result.asked:.0f}%) | {result.active} | {result.archived} | {result.summaries} | "
            f"{median} | {result.bytes_on_disk / 1e6:.1f} MB | {seconds:.0f} s |"
        )
    print("| run | stale answers | active | archived | summaries | pass p50 ms | on disk | wall time |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print("\nTarget (issue 4): stale answers at most 5% with the lifecycle.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
