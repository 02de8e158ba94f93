"""Isolation over HTTP, for real: three principals with their own tokens on one server subprocess,
on SQLite files and on PostgreSQL (ADR 19).

Each principal stores memories and tasks whose texts carry a marker no one else ever sends. Then a
seeded random sequence of rounds has all three call tools, resources and prompts at once, very often
with the real ids, task ids, checkpoint ids, cursors and confirmation codes of the others and with
queries made of the others' sentences. After every round:

- no answer holds another principal's marker or ids (unless the request itself sent that id);
- an operation on another principal's id answers exactly as the same operation on a missing id;
- a principal's rows (its SQLite file, or its rows in PostgreSQL) changed only if that principal
  itself wrote in that round.

At the end each principal's rows are compared with what its principal did, each principal deletes its own data
(the positive control), and a token revoked while its session is open is refused at once.
"""

from __future__ import annotations

import hashlib
import random
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import orjson
import psycopg
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError

from mcp_memory.core.ids import new_id
from mcp_memory.storage.pg import dialect, migrations
from mcp_memory.storage.pg.connections import principal_key
from mcp_memory.storage.pool import principal_file
from tests import pgcluster
from tests.conftest import call
from tests.netserver import NetServer, connect, create_token, initialize, post, revoke, rpc, running, sse_session

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

SEED = 5_2026
ROUNDS = 100  # three operations each, one per principal, sent at once
TOPICS = [
    "The staging database moved to host {c}-db.internal",
    "Deploys go out on Thursdays behind the feature flag {c}_rollout",
    "The on-call rotation of the payments service belongs to team {c}",
]
RULE = "Always answer {name} in British English and sign every reply as {c}"
KEYED = "The deploy target is the cluster {c}-east"


@dataclass
class Principal:
    name: str
    namespace: str | None
    mode: str
    token: str = ""
    marker: str = ""  # in every text this principal stores; no one else ever sends it
    canary: str = ""  # a word of its texts that the others put in their queries
    client: Client | None = None
    sentences: list[str] = field(default_factory=list)  # what it stored, without the marker
    memories: set[str] = field(default_factory=set)  # live ids
    ever: set[str] = field(default_factory=set)  # every id it was ever given
    fixed: list[str] = field(default_factory=list)  # phase-1 memories, never deleted before the end
    scratch: list[str] = field(default_factory=list)  # phase-2 memories it may delete
    pinned: set[str] = field(default_factory=set)
    tasks: dict[str, list[str]] = field(default_factory=dict)  # task id -> checkpoint ids captured
    unique_tasks: list[str] = field(default_factory=list)  # ids no one else uses
    cursor: str = ""
    codes: set[str] = field(default_factory=set)  # forget_user confirmation codes it received

    @property
    def mcp(self) -> Client:
        assert self.client is not None
        return self.client

    def text(self, sentence: str) -> str:
        return f"{self.marker} {sentence}"

    def secrets(self, records: Records) -> set[str]:
        """What no one else may ever be shown."""
        checkpoints = {cp for cps in self.tasks.values() for cp in cps}
        return {self.marker, records.location(self.name), *self.ever, *self.unique_tasks, *checkpoints} | self.codes


@dataclass
class Answer:
    text: str  # the whole answer, serialised
    error: str | None  # the error message, when it failed

    def normalised(self, ident: str) -> str:
        assert self.error is not None
        return self.error.replace(ident, "<id>")


async def tool(client: Client, name: str, args: dict[str, Any]) -> Answer:
    result = await client.call_tool(name, args)
    message = result.content[0].text if result.is_error and result.content[0].type == "text" else None
    return Answer(result.model_dump_json(), message)


async def resource(client: Client, uri: str) -> Answer:
    try:
        result = await client.read_resource(uri)
    except MCPError as exc:
        return Answer(f"{exc.error.code} {exc.error.message} {exc.error.data}", f"{exc.error.code} {exc.error.message}")
    return Answer(result.model_dump_json(), None)


async def prompt(client: Client, name: str, args: dict[str, str]) -> Answer:
    try:
        result = await client.get_prompt(name, args)
    except MCPError as exc:
        return Answer(f"{exc.error.code} {exc.error.message} {exc.error.data}", f"{exc.error.code} {exc.error.message}")
    return Answer(result.model_dump_json(), None)


# Recall's reinforcement reaches the store up to 2 s after the recall (ADR 11), so it may land during
# a later round's read-only call of the same principal: those two columns are left out.
DEFERRED = {"memories": {"access_count", "last_accessed_at"}}


class Records:
    """Each principal's rows as the test reads them behind the server's back: its SQLite file, or on
    PostgreSQL (``dsn``) its rows through the server's role with row-level security bound to it."""

    def __init__(self, data: Path, dsn: str | None = None) -> None:
        self.data = data
        self.dsn = dsn
        self.env = {"MCP_MEMORY_STORAGE__BACKEND": "postgres", "MCP_MEMORY_STORAGE__POSTGRES__DSN": dsn} if dsn else {}
        self._conn = psycopg.connect(dsn, autocommit=True) if dsn else None  # the server's role: RLS binds it
        self._columns: dict[str, list[str]] = {}
        self._deployment: str | None = None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()

    def location(self, principal: str) -> str:
        """Where the principal's rows are, by a name no other principal may ever be shown."""
        if self._conn is None:
            return principal_file(self.data, principal).name
        if self._deployment is None:
            [(deployment,)] = self._conn.execute("SELECT id FROM deployment").fetchall()
            self._deployment = str(deployment)
        return principal_key(self._deployment, principal)

    @contextmanager
    def _sqlite(self, principal: str) -> Iterator[sqlite3.Connection]:
        conn = sqlite3.connect(f"file:{principal_file(self.data, principal)}?mode=ro", uri=True)
        try:
            yield conn
        finally:
            conn.close()

    @contextmanager
    def _pg(self, principal: str) -> Iterator[psycopg.Connection[Any]]:
        assert self._conn is not None
        self._conn.execute("SELECT set_config('mcp.principal', %s, false)", (self.location(principal),))
        yield self._conn

    def rows(self, principal: str, sql: str) -> list[tuple[Any, ...]]:
        """``sql`` (SQLite's dialect, which these reads share with PostgreSQL) over the principal's rows."""
        if self.dsn is None:
            with self._sqlite(principal) as conn:
                return conn.execute(sql).fetchall()
        with self._pg(principal) as conn:
            return conn.execute(sql.replace("%", "%%")).fetchall()

    def tables(self, principal: str) -> Iterator[tuple[str, list[str]]]:
        """Every table of the principal's, as the rows' text in a fixed order (deferred columns left out)."""
        if self.dsn is None:
            with self._sqlite(principal) as conn:
                names = [
                    r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
                ]
                for name in names:
                    columns = [
                        f'"{r[1]}"'
                        for r in conn.execute(f'PRAGMA table_info("{name}")')
                        if r[1] not in DEFERRED.get(name, ())
                    ]
                    yield (
                        name,
                        [repr(r) for r in conn.execute(f'SELECT {", ".join(columns) or "*"} FROM "{name}" ORDER BY 1')],
                    )
            return
        with self._pg(principal) as conn:
            for name in sorted(dialect.PER_PRINCIPAL):
                if name not in self._columns:
                    self._columns[name] = [
                        r[0]
                        for r in conn.execute(
                            "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
                            "ORDER BY ordinal_position",
                            (name,),
                        )
                        if r[0] not in DEFERRED.get(name, ())
                    ]
                columns = self._columns[name]
                yield name, sorted(repr(r) for r in conn.execute(f"SELECT {', '.join(columns)} FROM {name}"))

    def fingerprint(self, principal: str) -> str:
        """A digest of every row of every table of the principal's (but deferred reinforcement)."""
        digest = hashlib.sha256()
        for name, rows in self.tables(principal):
            digest.update(name.encode())
            for row in rows:
                digest.update(row.encode())
        return digest.hexdigest()

    def dump(self, principal: str) -> str:
        if self.dsn is None:
            with self._sqlite(principal) as conn:
                return "\n".join(conn.iterdump())
        return "\n".join(f"{name}: {row}" for name, rows in self.tables(principal) for row in rows)


# ----- phase 1: each principal's own data, every id captured ----------------------------------


async def seed(p: Principal, rng: random.Random) -> None:
    p.marker = f"MK{p.name.upper()}{rng.randrange(16**8):08x}"
    p.canary = f"{p.name}{rng.randrange(16**6):06x}"
    items: list[dict[str, Any]] = [
        {"content": p.text(t.format(c=p.canary)), "tags": [f"{p.name}-only", "ops"]} for t in TOPICS
    ]
    items.append({"content": p.text(RULE.format(name=p.name, c=p.canary)), "kind": "instruction", "pinned": True})
    items.append({"content": p.text(KEYED.format(c=p.canary)), "key": "deploy-target", "kind": "decision"})
    stored = await call(p.mcp, "remember", {"memories": items})
    assert stored["stored"] == len(items), stored
    ids = [item["id"] for item in stored["items"]]
    p.sentences = [item["content"].removeprefix(p.marker + " ") for item in items]
    p.memories, p.ever, p.fixed = set(ids), set(ids), list(ids)
    p.pinned = {ids[3]}

    named = f"{p.name}-release-{rng.randrange(16**6):06x}"
    tree = {
        "id": "root",
        "title": f"{p.marker} release",
        "children": [{"id": "build", "title": "build"}, {"id": "ship", "title": "ship"}],
    }
    first = await call(
        p.mcp,
        "checkpoint",
        {
            "task_id": named,
            "goal": p.text(f"ship the release of {p.canary}"),
            "tree": tree,
            "current_node": "build",
            "snapshot": p.text("the build is half done"),
            "pending_actions": [{"text": p.text("email the release notes"), "external": True}],
        },
    )
    second = await call(p.mcp, "checkpoint", {"task_id": named, "current_node": "ship", "snapshot": p.text("built")})
    generated = await call(
        p.mcp,
        "checkpoint",
        {
            "goal": p.text(f"clean up after {p.canary}"),
            "tree": {"id": "root", "title": "clean up"},
            "namespaced": p.namespace is not None,
        },
    )
    gen_id = generated["checkpoint"]["task_id"]
    assert gen_id.startswith("task-")
    # The same task id for everyone: three separate tasks that must never meet.
    shared = await call(p.mcp, "checkpoint", {"task_id": "deploy", "goal": p.text("the shared name")})
    p.tasks = {
        named: [first["checkpoint"]["id"], second["checkpoint"]["id"]],
        gen_id: [generated["checkpoint"]["id"]],
        "deploy": [shared["checkpoint"]["id"]],
    }
    p.unique_tasks = [named, gen_id]
    await call(p.mcp, "remember", {"content": p.text(f"release {p.canary} needs a changelog"), "task_id": named})
    linked = (await call(p.mcp, "recall", {"query": f"release {p.canary} needs a changelog", "reinforce": False}))[
        "hits"
    ][0]["id"]
    p.memories.add(linked)
    p.ever.add(linked)
    p.fixed.append(linked)
    p.sentences.append(f"release {p.canary} needs a changelog")
    page = await call(p.mcp, "list_tasks", {"limit": 1})
    assert page["next_cursor"]
    p.cursor = page["next_cursor"]
    if p.namespace is None:  # a connection bound to a namespace may not erase the whole principal
        dry = await call(p.mcp, "forget_user", {})
        p.codes.add(dry["confirmation_code"])


# ----- phase 2: the random rounds -------------------------------------------------------------


@dataclass
class Op:
    """One call by one principal. Every random choice is made before the round runs its calls at once."""

    label: str
    run: Callable[[], Awaitable[Answer]]
    request: str  # everything the request carried, for telling an echo from a leak
    writes: bool = False  # may change the actor's own file
    check: Callable[[Answer], None] | None = None
    # An operation on another principal's id: it must answer as `missing()` does, with `ident` as <id>.
    ident: str | None = None
    missing: Callable[[], Awaitable[Answer]] | None = None
    fake: str | None = None


def fake_like(ident: str) -> str:
    return f"task-{new_id()}" if ident.startswith("task-") else f"nosuch-{new_id().lower()}"


class Rounds:
    def __init__(self, records: Records, principals: list[Principal], rng: random.Random) -> None:
        self.records = records
        self.all = principals
        self.rng = rng
        self.reference: dict[str, str] = {}  # label -> the normalised answer for a missing id
        self.counts: dict[str, int] = {}

    def others(self, p: Principal) -> list[Principal]:
        return [o for o in self.all if o is not p]

    def choose(self, p: Principal) -> Op:
        rng = self.rng
        v = rng.choice(self.others(p))
        roll = rng.random()
        if roll < 0.5:
            return self.cross(p, v)
        if roll < 0.8:
            return self.read(p, v)
        return self.own(p)

    def cross(self, p: Principal, v: Principal) -> Op:
        """An operation aimed at the victim's data through its real ids: it must fail like a missing id."""
        rng = self.rng
        c = p.mcp
        vm = rng.choice(sorted(v.ever))
        vt = rng.choice(v.unique_tasks)
        vc = rng.choice(v.tasks[vt])
        own_task = rng.choice(p.unique_tasks)
        mine = rng.choice(p.fixed)

        dry = rng.random() < 0.5

        def by_id(label: str, ident: str, make: Callable[[str], Callable[[], Awaitable[Answer]]], also: str = "") -> Op:
            fake = fake_like(ident)
            return Op(label, make(ident), f"{ident} {also}", ident=ident, missing=make(fake), fake=fake)

        choices: list[Callable[[], Op]] = [
            lambda: by_id("forget", vm, lambda x: lambda: tool(c, "forget", {"ids": [x], "dry_run": dry})),
            lambda: by_id(
                "forget-mixed", vm, lambda x: lambda: tool(c, "forget", {"ids": [mine, x], "dry_run": False})
            ),
            lambda: by_id("pin", vm, lambda x: lambda: tool(c, "pin", {"id": x})),
            lambda: by_id("unpin", rng.choice(sorted(v.pinned)), lambda x: lambda: tool(c, "unpin", {"id": x})),
            lambda: by_id("undo_summary", vm, lambda x: lambda: tool(c, "undo_summary", {"id": x})),
            lambda: by_id("get_memory", vm, lambda x: lambda: tool(c, "get_memory", {"id": x})),
            lambda: by_id(
                "golden_queries",
                vm,
                lambda x: lambda: tool(c, "golden_queries", {"query": p.text("find it"), "memory_id": x}),
            ),
            lambda: by_id(
                "correct_memory", vm, lambda x: lambda: tool(c, "correct_memory", {"id": x, "text": p.text("mine")})
            ),
            lambda: by_id(
                "remember-supersedes",
                vm,
                lambda x: lambda: tool(c, "remember", {"content": p.text("this replaces it"), "supersedes": [x]}),
            ),
            lambda: by_id(
                "checkpoint:task",
                vt,
                lambda x: lambda: tool(c, "checkpoint", {"task_id": x, "snapshot": p.text("mine now")}),
            ),
            lambda: by_id("resume:task", vt, lambda x: lambda: tool(c, "resume", {"task_id": x})),
            lambda: by_id(
                "resume-rollback",
                vc,
                lambda x: lambda: tool(c, "resume", {"task_id": own_task, "checkpoint_id": x}),
            ),
            lambda: by_id(
                "update_task:task",
                vt,
                lambda x: (
                    lambda: tool(
                        c, "update_task", {"task_id": x, "edits": [{"op": "set", "node_id": "root", "status": "done"}]}
                    )
                ),
            ),
            lambda: by_id("list_checkpoints:task", vt, lambda x: lambda: tool(c, "list_checkpoints", {"task_id": x})),
            lambda: by_id("resource-task:task", vt, lambda x: lambda: resource(c, f"memory://tasks/{x}")),
            lambda: by_id(
                "resource-checkpoints:task", vt, lambda x: lambda: resource(c, f"memory://tasks/{x}/checkpoints")
            ),
            lambda: by_id(
                "resource-checkpoint:task",
                vt,
                lambda x: lambda: resource(c, f"memory://tasks/{x}/checkpoints/{vc}"),
                vc,
            ),
            lambda: by_id(
                "resource-own-task-their-checkpoint",
                vc,
                lambda x: lambda: resource(c, f"memory://tasks/{own_task}/checkpoints/{x}"),
            ),
            lambda: by_id("prompt-resume:task", vt, lambda x: lambda: prompt(c, "resume_task", {"task_id": x})),
            lambda: self.named_principal(p, v),
        ]
        if v.codes and p.namespace is None:  # a namespaced caller is refused before any code is read
            choices.append(lambda: self.wrong_code(p, v))
        if v.namespace is not None and v.namespace != p.namespace:
            ns = v.namespace
            choices.append(
                lambda: Op(
                    "recall-namespace",
                    (lambda: tool(c, "recall", {"query": "deploys", "filters": {"namespace": ns}})),
                    ns,
                    ident=ns,
                    missing=lambda: tool(c, "recall", {"query": "deploys", "filters": {"namespace": "proj-zz"}}),
                    fake="proj-zz",
                )
            )
        return rng.choice(choices)()

    def wrong_code(self, p: Principal, v: Principal) -> Op:
        code = self.rng.choice(sorted(v.codes))
        return Op(
            "forget_user-their-code",
            lambda: tool(p.mcp, "forget_user", {"confirmation_code": code}),
            code,
            ident=code,
            missing=lambda: tool(p.mcp, "forget_user", {"confirmation_code": "000000-000000"}),
            fake="000000-000000",
        )

    def named_principal(self, p: Principal, v: Principal) -> Op:
        name, args = self.rng.choice(
            [
                ("remember", {"content": p.text("as someone else"), "principal": v.name}),
                ("recall", {"query": v.sentences[0], "principal": v.name}),
                ("checkpoint", {"task_id": v.unique_tasks[0], "goal": "x", "principal": v.name}),
                ("stats", {"principal": v.name}),
                ("recall", {"query": v.sentences[0], "namespace": v.namespace or "proj-b"}),
            ]
        )

        def check(a: Answer) -> None:
            assert a.error is not None, a.text
            assert "unknown argument" in a.error

        return Op(f"{name}-as-another", lambda: tool(p.mcp, name, args), orjson.dumps(args).decode(), check=check)

    def read(self, p: Principal, v: Principal) -> Op:
        """Reads and filters aimed at the victim: they succeed, over the actor's own data only."""
        rng = self.rng
        c = p.mcp
        sentence = rng.choice(v.sentences)
        vt = rng.choice(v.unique_tasks)

        def nothing_matched(a: Answer) -> None:
            assert a.error is None, a.text
            result = orjson.loads(a.text)["structured_content"]
            assert (result["matched"], result["deleted"]) == (0, 0), result

        def listed_nothing(a: Answer) -> None:
            assert a.error is None, a.text
            assert orjson.loads(a.text)["structured_content"]["memories"] == []

        def own_stats(a: Answer) -> None:
            assert a.error is None, a.text
            payload = orjson.loads(a.text)
            result = payload.get("structured_content") or orjson.loads(payload["contents"][0]["text"])
            assert result["tables"]["memories"] == len(p.memories), (result["tables"], len(p.memories))
            assert result["tables"]["tasks"] == len(p.tasks)

        def ok(a: Answer) -> None:
            assert a.error is None, a.text

        def marked(a: Answer) -> None:
            assert a.error is None, a.text
            assert p.marker in a.text

        dry = rng.random() < 0.5
        filters = rng.choice([None, {"tags": [f"{v.name}-only"]}, {"task_id": vt}, {"kinds": ["instruction"]}])
        args: dict[str, Any] = {"query": sentence, "k": rng.randint(1, 20), "reinforce": rng.random() < 0.5}
        if filters:
            args["filters"] = filters
        ops = [
            Op("recall-their-words", lambda: tool(c, "recall", args), orjson.dumps(args).decode(), True, ok),
            Op(
                "recall-context-their-words",
                lambda: prompt(c, "recall_context", {"query": sentence}),
                sentence,
                check=ok,
            ),
            Op(
                "forget-their-tag",
                lambda: tool(c, "forget", {"filters": {"tags": [f"{v.name}-only"]}, "dry_run": dry}),
                "",
                check=nothing_matched,
            ),
            Op(
                "list-their-tag",
                lambda: tool(c, "list_memories", {"filters": {"tags": [f"{v.name}-only"]}}),
                "",
                check=listed_nothing,
            ),
            Op(
                "forget-their-task",
                lambda: tool(c, "forget", {"filters": {"task_id": vt}, "dry_run": False}),
                vt,
                check=nothing_matched,
            ),
            Op(
                "list_tasks-their-cursor",
                lambda: tool(c, "list_tasks", {"cursor": v.cursor, "limit": 1}),
                v.cursor,
            ),
            Op("stats", lambda: tool(c, "stats", {}), "", check=own_stats),
            Op("resource-stats", lambda: resource(c, "memory://stats"), "", check=own_stats),
            Op("resource-pinned", lambda: resource(c, "memory://pinned"), "", check=ok),
            Op("resource-pinned-json", lambda: resource(c, "memory://pinned.json"), "", check=ok),
            Op("resource-tasks", lambda: resource(c, "memory://tasks"), "", check=ok),
            Op("list_tasks", lambda: tool(c, "list_tasks", {"limit": 50}), "", check=ok),
            Op("resume-shared-name", lambda: tool(c, "resume", {"task_id": "deploy"}), "", check=marked),
            Op("resource-shared-name", lambda: resource(c, "memory://tasks/deploy"), "", check=marked),
        ]
        return rng.choice(ops)

    def own(self, p: Principal) -> Op:
        """The actor's own writes and reads: they succeed and the model follows them."""
        rng = self.rng
        c = p.mcp
        task = rng.choice(p.unique_tasks)
        pinned, draw, sentence = rng.random() < 0.3, rng.randrange(10**6), rng.choice(p.sentences)
        rollback = rng.random() < 0.3

        async def remember() -> Answer:
            content = p.text(f"scratch note {len(p.ever)} about {p.canary}")
            a = await tool(c, "remember", {"content": content, "pinned": pinned})
            ident = orjson.loads(a.text)["structured_content"]["items"][0]["id"]
            p.memories.add(ident)
            p.ever.add(ident)
            p.scratch.append(ident)
            if pinned:
                p.pinned.add(ident)
            return a

        async def forget() -> Answer:
            if not p.scratch:
                return await remember()
            ident = p.scratch.pop(draw % len(p.scratch))
            a = await tool(c, "forget", {"ids": [ident], "dry_run": False})
            assert orjson.loads(a.text)["structured_content"]["deleted"] == 1, a.text
            p.memories.discard(ident)
            p.pinned.discard(ident)
            return a

        async def pin() -> Answer:
            if not p.scratch:
                return await remember()
            ident = p.scratch[draw % len(p.scratch)]
            on = ident not in p.pinned
            a = await tool(c, "pin" if on else "unpin", {"id": ident})
            (p.pinned.add if on else p.pinned.discard)(ident)
            return a

        async def checkpoint() -> Answer:
            a = await tool(c, "checkpoint", {"task_id": task, "snapshot": p.text(f"step {draw}")})
            p.tasks[task].append(orjson.loads(a.text)["structured_content"]["checkpoint"]["id"])
            return a

        async def resume() -> Answer:
            args: dict[str, Any] = {"task_id": task}
            if rollback:
                args["checkpoint_id"] = p.tasks[task][draw % len(p.tasks[task])]
            return await tool(c, "resume", args)

        def ok(a: Answer) -> None:
            assert a.error is None, a.text

        def marked(a: Answer) -> None:
            assert a.error is None, a.text
            assert p.marker in a.text

        edit = {"task_id": task, "edits": [{"op": "set", "node_id": "root", "notes": p.text(f"noted {draw}")}]}
        first_checkpoint = f"memory://tasks/{task}/checkpoints/{p.tasks[task][0]}"
        ops = [
            Op("own-remember", remember, "", True, ok),
            Op("own-forget", forget, "", True, ok),
            Op("own-pin", pin, "", True, ok),
            Op("own-checkpoint", checkpoint, "", True, ok),
            Op("own-resume", resume, "", True, marked),
            Op("own-update_task", lambda: tool(c, "update_task", edit), "", True, ok),
            Op("own-list_checkpoints", lambda: tool(c, "list_checkpoints", {"task_id": task}), "", check=ok),
            Op("own-task-resource", lambda: resource(c, f"memory://tasks/{task}"), "", check=marked),
            Op("own-checkpoint-resource", lambda: resource(c, first_checkpoint), "", check=marked),
            Op("own-resume-prompt", lambda: prompt(c, "resume_task", {"task_id": task}), "", check=marked),
            Op("own-recall", lambda: tool(c, "recall", {"query": sentence}), "", True, marked),
        ]
        if p.namespace is None:  # a connection bound to a namespace may not erase the whole principal
            ops.append(Op("own-forget_user-dry-run", lambda: self.dry_run(p), "", check=ok))
        return rng.choice(ops)

    async def dry_run(self, p: Principal) -> Answer:
        a = await tool(p.mcp, "forget_user", {})
        p.codes.add(orjson.loads(a.text)["structured_content"]["confirmation_code"])
        return a

    async def perform(self, p: Principal, op: Op) -> None:
        a = await op.run()
        self.counts[op.label] = self.counts.get(op.label, 0) + 1
        for o in self.others(p):
            for secret in o.secrets(self.records):
                assert secret not in a.text or secret in op.request, (
                    f"{p.name}'s {op.label} showed {o.name}'s {secret!r}: {a.text[:2000]}"
                )
        if op.check is not None:
            op.check(a)
        if op.missing is not None:
            assert op.ident is not None
            assert op.fake is not None
            assert a.error is not None, f"{p.name}'s {op.label} on {op.ident!r} succeeded: {a.text[:2000]}"
            if op.label not in self.reference:
                self.reference[op.label] = (await op.missing()).normalised(op.fake)
            assert a.normalised(op.ident) == self.reference[op.label], (op.label, a.error)

    async def round(self) -> None:
        ops = [(p, self.choose(p)) for p in self.all]
        before = {p.name: self.records.fingerprint(p.name) for p in self.all}
        async with anyio.create_task_group() as tg:
            for p, op in ops:
                tg.start_soon(self.perform, p, op)
        for p, op in ops:
            if not op.writes:
                assert self.records.fingerprint(p.name) == before[p.name], f"{p.name}'s {op.label} changed its file"


# ----- the test -------------------------------------------------------------------------------


async def _migrated(cluster: pgcluster.Cluster) -> str:
    """The schema made in the cluster's fresh database by its owner; the server role's DSN."""
    async with await psycopg.AsyncConnection.connect(cluster.dsn(pgcluster.OWNER), autocommit=True) as owner:
        await migrations.migrate(owner, pgcluster.SERVER)
    return cluster.dsn()


@asynccontextmanager
async def sessions(server: NetServer, cast: list[Principal]) -> AsyncIterator[list[Principal]]:
    async with AsyncExitStack() as stack:
        for p in cast:
            p.client = await stack.enter_async_context(connect(server, p.token, p.mode))
        yield cast


def cast_of(records: Records) -> list[Principal]:
    cast = [
        Principal("alice", None, "legacy"),
        Principal("bob", "proj-b", "2026-07-28"),
        Principal("mallory", None, "2026-07-28"),
    ]
    for p in cast:
        p.token = create_token(
            records.data, p.name, *(["--namespace", p.namespace] if p.namespace else []), env=records.env
        )
    return cast


@asynccontextmanager
async def raw_session(server: NetServer, token: str) -> AsyncIterator[tuple[dict[str, str], str | None]]:
    """Headers and path of a session opened without the SDK client, so its id can be handed to another."""
    if server.transport == "sse":
        async with sse_session(server, token) as sse:
            yield sse.headers, sse.path
        return
    yield initialize(server, token), None


async def a_session_cannot_be_ridden_by_another_token(
    server: NetServer, records: Records, cast: list[Principal]
) -> None:
    alice, bob, _ = cast
    async with raw_session(server, alice.token) as (headers, path):
        before = {p.name: records.fingerprint(p.name) for p in cast}
        hijack = {**headers, "authorization": f"Bearer {bob.token}"}
        made_up = path.rsplit("=", 1)[0] + "=" + "0" * 32 if path else None
        nobody = {**hijack, "mcp-session-id": "0" * 32} if path is None else hijack
        for message in (
            rpc("tools/call", {"name": "recall", "arguments": {"query": alice.sentences[0]}}, 7),
            rpc("tools/call", {"name": "forget", "arguments": {"ids": sorted(alice.ever), "dry_run": False}}, 8),
        ):
            refused = post(server, message, hijack, path)
            missing = post(server, message, nobody, made_up)
            assert refused.status_code == 404, refused.text
            assert (refused.status_code, refused.text) == (missing.status_code, missing.text)  # no oracle either
        assert {p.name: records.fingerprint(p.name) for p in cast} == before
        assert post(server, rpc("tools/list", {}, 9), headers, path).status_code in (200, 202)


@pytest.mark.parametrize(
    ("transport", "backend", "rounds"),
    [("http", "sqlite", ROUNDS), ("sse", "sqlite", ROUNDS // 4), ("http", "postgres", ROUNDS // 4)],
)
async def test_no_read_write_or_deletion_crosses_a_principal(
    tmp_path: Path, transport: str, backend: str, rounds: int, request: pytest.FixtureRequest
) -> None:
    data = tmp_path / "data"
    records = Records(data, await _migrated(request.getfixturevalue("pg_empty")) if backend == "postgres" else None)
    rng = random.Random(SEED)
    cast = cast_of(records)
    with closing(records), running(data, transport, env=records.env) as server:
        async with sessions(server, cast):
            alice, bob, mallory = cast
            for p in cast:
                await seed(p, rng)
            for p in cast:  # one key, three principals: none supersedes another's
                assert records.rows(p.name, "SELECT superseded_by FROM memories WHERE key = 'deploy-target'") == [
                    (None,)
                ]

            await a_session_cannot_be_ridden_by_another_token(server, records, cast)
            play = Rounds(records, cast, rng)
            with anyio.fail_after(120):
                for _ in range(rounds):
                    await play.round()
            assert len(play.counts) >= 40 * rounds // ROUNDS, sorted(play.counts)  # nearly every kind was played

            # Each file holds exactly what its principal did, and nothing of anyone else's.
            for p in cast:
                assert {r[0] for r in records.rows(p.name, "SELECT id FROM memories")} == p.memories
                assert {r[0] for r in records.rows(p.name, "SELECT id FROM memories WHERE pinned = 1")} == p.pinned
                assert all(
                    text.startswith(p.marker) for (text,) in records.rows(p.name, "SELECT content FROM memories")
                )
                assert {r[0] for r in records.rows(p.name, "SELECT task_id FROM tasks")} == set(p.tasks)
                stored = set(records.rows(p.name, "SELECT task_id, id FROM checkpoints"))
                assert {(t, cp) for t, cps in p.tasks.items() for cp in cps} <= stored
                assert {t for t, _ in stored} == set(p.tasks)
                whole = records.dump(p.name)
                for o in play.others(p):
                    leaked = {s for s in o.secrets(records) if s in whole}
                    assert not leaked, f"{p.name}'s file holds {o.name}'s {leaked}"

            # The positive control: each principal sees and deletes its own.
            for p in cast:
                hits = await call(p.mcp, "recall", {"query": p.sentences[0], "k": 3, "reinforce": False})
                assert p.fixed[0] in [h["id"] for h in hits["hits"]]
                task = await p.mcp.read_resource(f"memory://tasks/{p.unique_tasks[0]}")
                assert p.marker in task.model_dump_json()
                others = {o.name: records.fingerprint(o.name) for o in play.others(p)}
                gone = await call(p.mcp, "forget", {"ids": [p.fixed[0]], "dry_run": False})
                assert gone["deleted"] == 1
                assert records.rows(p.name, f"SELECT id FROM memories WHERE id = '{p.fixed[0]}'") == []
                assert {o.name: records.fingerprint(o.name) for o in play.others(p)} == others

            # Task ids are the caller's own words: the same id makes a separate task.
            before = {p.name: records.fingerprint(p.name) for p in (alice, bob)}
            taken = alice.unique_tasks[0]
            same = await call(mallory.mcp, "checkpoint", {"task_id": taken, "goal": mallory.text("mine too")})
            assert (same["created_task"], same["head_seq"]) == (True, 1)
            resumed = await call(mallory.mcp, "resume", {"task_id": taken})
            assert mallory.marker in resumed["goal"]
            assert alice.marker not in orjson.dumps(resumed).decode()
            assert {p.name: records.fingerprint(p.name) for p in (alice, bob)} == before

            # forget_user: another principal's code opens nothing; the owner's still works.
            code = (await call(mallory.mcp, "forget_user", {}))["confirmation_code"]
            for p in (alice, bob):
                wrong = await p.mcp.call_tool("forget_user", {"confirmation_code": code})
                assert wrong.is_error
            erased = await call(mallory.mcp, "forget_user", {"confirmation_code": code})
            assert erased["dry_run"] is False
            assert records.rows("mallory", "SELECT COUNT(*) FROM memories") == [(0,)]
            assert records.rows("mallory", "SELECT COUNT(*) FROM tasks") == [(0,)]
            assert {p.name: records.fingerprint(p.name) for p in (alice, bob)} == before

            # A token revoked while its sessions are open is refused on its next request; the others go on.
            async with raw_session(server, mallory.token) as (headers, path):
                revoke(data, "mallory", records.env)
                refused = post(server, rpc("tools/call", {"name": "stats", "arguments": {}}, 5), headers, path)
                assert refused.status_code == 401, refused.text
                assert 'error="invalid_token"' in refused.headers["www-authenticate"]
            if transport == "http":  # the SDK's SSE client logs a refused POST and never answers the call
                with pytest.raises(MCPError):
                    await mallory.mcp.call_tool("stats", {})
            for p in (alice, bob):
                stats = await call(p.mcp, "stats", {})
                assert stats["tables"]["memories"] == len(p.memories) - 1
