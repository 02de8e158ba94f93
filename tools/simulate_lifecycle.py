"""A month of simulated sessions, run with and without the lifecycle, in one run.

    OMP_NUM_THREADS=1 .venv/bin/python tools/simulate_lifecycle.py [--days 30] [--seed 7]
        [--base-hours 72] [--explain]

The generator (``generate``, fixed seed, pure function of days and seed):

- one user, ``--days`` days, 4 to 8 sessions a day, 10 to 20 memories a session (about 3,000
  in a month), sent with one ``remember`` call per session (an agent saving the session);
- small talk (importance 0.3) built from a topic, a detail and the day, so it is rarely
  word-for-word repeated; facts with identifiers (tickets, hosts, versions, days of the week);
- one or two preference statements a session about one of 24 subjects (drink, editor theme,
  commute...). A statement restates the current value (in one of two wordings) or, often
  enough that each subject changes about once a week, changes it: half of the changes say so
  ("switched from A to B", "now prefers B"), half just state the new value ("prefers B for S").

Both runs get the same memories and the same injected clock. "with lifecycle" runs
``Scheduler.run_once`` at the start of every simulated day (decay, consolidation, compression);
"without" never does. At the end of every week and of the month each subject is asked about
("What <subject> does the user prefer now?", ``reinforce=false``): the answer is stale when the
first hit naming a value of that subject names an old one (a change statement answers with the
value it ends on), missed when no hit among the top 5 names one. Reported per run: stale and
missed rates, active, archived and superseded memories, summaries and consolidated facts, the
median and slowest pass, the store's size on disk, wall time.
"""

from __future__ import annotations

import argparse
import logging
import random
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from mcp_memory.config import load_settings
from mcp_memory.core.models import MemoryDraft, Scope
from mcp_memory.mcp.recall_schemas import MemoryOut
from mcp_memory.mcp.server import open_server
from mcp_memory.mcp.wire_recall import recall_result
from mcp_memory.services.memory import CallContext
from mcp_memory.storage.counts import CountStore

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
    "programming language": ["Python", "Rust", "Go"],
    "terminal shell": ["zsh", "fish", "bash"],
    "keyboard layout": ["QWERTY", "Dvorak", "Colemak"],
    "holiday destination": ["the mountains", "the seaside", "city trips"],
    "chat tool": ["Slack", "Matrix", "email threads"],
    "test style": ["property tests", "example tests", "snapshot tests"],
    "desk setup": ["a standing desk", "a sitting desk"],
    "snack": ["almonds", "fruit", "dark chocolate"],
    "browser": ["Firefox", "Chromium", "Safari"],
    "documentation format": ["Markdown", "reStructuredText", "AsciiDoc"],
    "working hours": ["early starts", "late evenings", "core hours only"],
    "podcast genre": ["tech podcasts", "true crime", "history podcasts"],
}
TOPICS = ["the weather", "a film", "the offsite", "the coffee machine", "a football match", "the new office", "a book"]
DETAILS = ["at length", "briefly over lunch", "while waiting for a build", "after standup", "on the way out"]
HOSTS = ["db1", "db2", "cache3", "api4", "worker7", "queue2"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
CHECKS_EVERY_DAYS = 7


@dataclass
class RunResult:
    stale: int = 0
    missed: int = 0
    asked: int = 0
    active: int = 0
    archived: int = 0
    superseded: int = 0
    summaries: int = 0
    facts: int = 0
    pass_ms: list[float] = field(default_factory=list)
    bytes_on_disk: int = 0
    seconds: float = 0.0


@dataclass
class Event:
    day: float
    text: str
    kind: str = "fact"
    importance: float | None = None


@dataclass
class Session:
    day: float
    key: str
    events: list[Event]
    current: dict[str, str]  # what the user prefers once the session is over


def _preference(r: random.Random, subject: str, current: dict[str, str]) -> str:
    if r.random() < 0.4:  # about one change per subject a week at ~1.5 statements a session
        old = current[subject]
        new = r.choice([v for v in SUBJECTS[subject] if v != old])
        current[subject] = new
        style = r.random()
        if style < 0.25:
            return f"The user switched from {old} to {new} for {subject}."
        if style < 0.5:
            return f"The user now prefers {new} for {subject}."
        return f"The user prefers {new} for {subject}."
    value = current[subject]
    return (
        f"The user prefers {value} for {subject}." if r.random() < 0.7 else f"For {subject}, the user prefers {value}."
    )


def generate(days: int, seed: int) -> list[Session]:
    r = random.Random(seed)
    current = {subject: r.choice(values) for subject, values in SUBJECTS.items()}
    first = [Event(0.0, f"The user prefers {value} for {subject}.", "preference") for subject, value in current.items()]
    sessions = [Session(0.0, "s-0-0", first, dict(current))]
    ticket, version = 1000, 10
    for day in range(1, days + 1):
        count = r.randint(4, 8)
        for s in range(count):
            at = day + s / (count + 1)
            events: list[Event] = []
            for _ in range(r.randint(10, 20)):
                roll = r.random()
                if roll < 0.45:
                    text = f"We talked about {r.choice(TOPICS)} {r.choice(DETAILS)} on day {day}."
                    events.append(Event(at, text, importance=0.3))
                elif roll < 0.85:
                    ticket += 1
                    version += r.random() < 0.1
                    text = r.choice(
                        [
                            f"Ticket OPS-{ticket} was closed after the deploy to {r.choice(HOSTS)} on day {day}.",
                            f"Service {r.choice(HOSTS)} was upgraded to version 2.{version} (ticket OPS-{ticket}).",
                            f"The backup of {r.choice(HOSTS)} moves to {r.choice(WEEKDAYS)} (ticket OPS-{ticket}).",
                        ]
                    )
                    events.append(Event(at, text))
                elif roll < 0.94:
                    events.append(Event(at, _preference(r, r.choice(list(SUBJECTS)), current), "preference"))
            sessions.append(Session(at, f"s-{day}-{s}", events, dict(current)))
    return sessions


def _named(text: str, subject: str) -> list[str]:
    return [v for v in SUBJECTS[subject] if v.lower() in text.lower()]


def _answer(text: str, subject: str) -> str:
    """The value a hit states: the one it names last ("switched from A to B" answers B)."""
    lowered = text.lower()
    return max(_named(text, subject), key=lambda v: lowered.rfind(v.lower()))


async def run(sessions: list[Session], lifecycle: bool, folder: Path, base_hours: float, explain: bool) -> RunResult:
    clock_now = [time.time()]
    start = clock_now[0]
    settings = load_settings(
        data_dir=folder, principal="sim", lifecycle={"enabled": False, "decay_base_hours": base_hours}
    )
    result = RunResult()
    async with open_server(settings, clock=lambda: clock_now[0], warm=False) as runtime:
        logging.getLogger("mcp_memory").setLevel(logging.WARNING)
        scope = Scope("sim")
        last_pass_day = 0
        last_check_day = 0
        previous_current = sessions[0].current

        async def ask(current: dict[str, str]) -> None:
            for subject, value in current.items():
                answer = recall_result(
                    await runtime.memory.recall(
                        scope, f"What {subject} does the user prefer now?", k=5, reinforce=False, detail="full"
                    )
                )
                result.asked += 1
                said = next((_answer(h.text, subject) for h in answer.hits if _named(h.text, subject)), None)
                result.stale += said is not None and said != value
                result.missed += said is None
                if explain and said != value:
                    print(f"\n{'stale' if said else 'missed'}: {subject} is {value!r}, answered {said!r}")
                    for h in answer.hits:
                        assert isinstance(h, MemoryOut)
                        print(
                            f"   {h.kind:10} L{h.level} occ={len(h.occurrence_ids)} conflicts={len(h.conflicts_with)} "
                            f"{h.created_at:%m-%d} | {h.text[:90]}"
                        )

        for session in sessions:
            day = int(session.day)
            clock_now[0] = start + session.day * 86_400
            if day >= last_check_day + CHECKS_EVERY_DAYS:
                last_check_day = day
                await ask(previous_current)
            if lifecycle and day > last_pass_day:
                last_pass_day = day
                began = time.perf_counter()
                await runtime.scheduler.run_once(start + day * 86_400)
                result.pass_ms.append(1000 * (time.perf_counter() - began))
            items = [
                MemoryDraft(content=e.text, session_id=session.key, importance=e.importance, kind=e.kind)
                for e in session.events
            ]
            if items:
                await runtime.memory.remember(scope, items, CallContext())
            previous_current = session.current
        clock_now[0] += 3_600
        await ask(sessions[-1].current)
        tiers = await CountStore(runtime.store).tier_counts(scope)
        result.active = tiers.get("tier:active", 0)
        result.archived = tiers.get("tier:archived", 0)
        result.superseded = tiers.get("superseded", 0)
        result.summaries = await _count(runtime, scope, "level >= 1 AND kind = 'summary'")
        result.facts = await _count(runtime, scope, "level = 1 AND kind != 'summary'")
    return result


async def _count(runtime: object, scope: Scope, where: str) -> int:
    store = runtime.store  # type: ignore[attr-defined]
    conn = await store.reader(scope)
    rows = list(await conn.execute_fetchall(f"SELECT COUNT(*) FROM memories WHERE {where}"))
    return int(rows[0][0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--base-hours", type=float, default=72.0, help="lifecycle.decay_base_hours")
    parser.add_argument("--explain", action="store_true", help="print the hits of every stale or missed answer")
    args = parser.parse_args()
    sessions = generate(args.days, args.seed)
    memories = sum(len(s.events) for s in sessions)
    preferences = sum(e.kind == "preference" for s in sessions for e in s.events)
    print(
        f"## Lifecycle simulation: {args.days} days, seed {args.seed}, decay base {args.base_hours:g} h, "
        f"{len(sessions)} sessions, {memories} memories sent ({preferences} preference statements)\n"
    )
    rows = []
    for lifecycle in (False, True):
        with tempfile.TemporaryDirectory() as tmp:
            began = time.perf_counter()
            result = anyio.run(run, sessions, lifecycle, Path(tmp), args.base_hours, args.explain)
            result.seconds = time.perf_counter() - began
            result.bytes_on_disk = sum(p.stat().st_size for p in Path(tmp).rglob("*") if p.is_file())
        median = f"{statistics.median(result.pass_ms):.0f}" if result.pass_ms else "-"
        slowest = f"{max(result.pass_ms):.0f}" if result.pass_ms else "-"
        rows.append(
            f"| {'with' if lifecycle else 'without'} lifecycle | {result.stale}/{result.asked} "
            f"({100 * result.stale / result.asked:.1f}%) | {result.missed} | {result.active} | {result.archived} | "
            f"{result.superseded} | {result.summaries} | {result.facts} | {median} / {slowest} | "
            f"{result.bytes_on_disk / 1e6:.1f} MB | {result.seconds:.0f} s |"
        )
    print(
        "| run | stale answers | missed | active | archived | superseded | summaries | facts | "
        "pass ms p50 / max | on disk | wall time |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print("\nTarget (issue 4): stale answers at most 5% with the lifecycle.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
