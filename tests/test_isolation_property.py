"""A property test: random operations by several principals never cross between them, on SQLite
files and on PostgreSQL (where the principals of every example share one database, as a team's do:
each example's names are its own)."""

from __future__ import annotations

import secrets
import tempfile
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_memory.config import load_settings
from mcp_memory.core.errors import NotFoundError
from mcp_memory.core.models import MemoryDraft, Scope
from mcp_memory.mcp.server import open_server
from mcp_memory.services.memory import CallContext
from mcp_memory.storage.pg import migrations
from tests import pgcluster

PRINCIPALS = ["alice", "bob", "carol"]
WORDS = ["apple", "river", "code", "launch", "blue", "seven", "market", "cloud", "tiger", "paper"]

operation = st.one_of(
    st.tuples(
        st.just("remember"), st.sampled_from(PRINCIPALS), st.lists(st.sampled_from(WORDS), min_size=2, max_size=5)
    ),
    st.tuples(st.just("forget"), st.sampled_from(PRINCIPALS), st.integers(min_value=0, max_value=50)),
    st.tuples(st.just("recall"), st.sampled_from(PRINCIPALS), st.lists(st.sampled_from(WORDS), min_size=1, max_size=3)),
)


async def _run(ops: list[tuple[str, str, object]], storage: dict[str, Any]) -> None:
    suffix = "-" + secrets.token_hex(4)  # one database serves every PostgreSQL example
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(data_dir=Path(tmp), principal="unused", storage=storage)
        async with open_server(settings) as runtime:
            memory = runtime.memory
            owned: dict[str, set[str]] = {p: set() for p in PRINCIPALS}
            all_ids: list[str] = []
            for n, (op, principal, arg) in enumerate(ops):
                scope = Scope(principal + suffix)
                if op == "remember":
                    assert isinstance(arg, list)
                    text = f"Note {n} by someone: " + " ".join(arg)
                    result = await memory.remember(scope, [MemoryDraft(content=text)], CallContext())
                    item = result.items[0]
                    assert item.id is not None
                    if item.outcome == "merged":
                        assert item.id in owned[principal]  # a merge only ever joins the caller's own memory
                    owned[principal].add(item.id)
                    all_ids.append(item.id)
                elif op == "forget" and all_ids:
                    assert isinstance(arg, int)
                    target = all_ids[arg % len(all_ids)]
                    if target in owned[principal]:
                        await memory.forget(scope, ids=[target], dry_run=False)
                        owned[principal].discard(target)
                    else:  # another principal's id (or a forgotten one) must look missing
                        with pytest.raises(NotFoundError):
                            await memory.forget(scope, ids=[target], dry_run=False)
                elif op == "recall":
                    assert isinstance(arg, list)
                    recalled = await memory.recall(scope, " ".join(arg), k=50, reinforce=False)
                    assert {h.id for h in recalled.hits} <= owned[principal]


async def _migrate(cluster: pgcluster.Cluster) -> None:
    async with await psycopg.AsyncConnection.connect(cluster.dsn(pgcluster.OWNER), autocommit=True) as owner:
        await migrations.migrate(owner, pgcluster.SERVER)


@pytest.fixture
def on_postgres(pg_empty: pgcluster.Cluster) -> dict[str, Any]:
    anyio.run(_migrate, pg_empty)
    return {"backend": "postgres", "postgres": {"dsn": pg_empty.dsn()}}


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(operation, min_size=5, max_size=25))
def test_random_operations_never_cross_principals(ops: list[tuple[str, str, object]]) -> None:
    anyio.run(_run, ops, {})


# Fewer examples: each costs about twice SQLite's, and the walls under test are the same code's
@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(ops=st.lists(operation, min_size=5, max_size=25))
def test_random_operations_never_cross_principals_on_postgres(
    on_postgres: dict[str, Any], ops: list[tuple[str, str, object]]
) -> None:
    anyio.run(_run, ops, on_postgres)
