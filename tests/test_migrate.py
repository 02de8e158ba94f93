"""`mcp-memory migrate`: a data directory's principals into PostgreSQL and back, every table
verified, identical exports, tokens and switches along; a second run changes nothing, and a
principal the target holds differently is refused whole (ADR 19)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import anyio
import psycopg
import pytest

from mcp_memory.cli.command import main
from mcp_memory.config import Settings, load_settings
from mcp_memory.core.models import EVERYWHERE, MemoryDraft, Scope
from mcp_memory.mcp.server import open_server
from mcp_memory.services.memory import CallContext
from mcp_memory.services.portability import export_lines
from mcp_memory.storage import transfer
from mcp_memory.storage.pg import keyword, migrations
from mcp_memory.storage.pool import principal_file
from mcp_memory.storage.switch import SwitchFile
from mcp_memory.storage.tokens import TokenStore
from tests import pgcluster

ALICE, BOB = Scope("alice"), Scope("bob")
PEOPLE = {
    "alice": [
        "The user drinks oolong tea without sugar",
        "用户的猫叫小米，喜欢晒太阳",
        "Deploys go out on Fridays after the review; 100% of them need a ticket",
    ],
    "bob": ["Bob parks on level three", "项目的数据库是 PostgreSQL 15"],
}


def _settings(data_dir: Path, dsn: str, backend: str = "sqlite") -> Settings:
    return load_settings(data_dir=data_dir, principal="alice", storage={"backend": backend, "postgres": {"dsn": dsn}})


async def _fill(settings: Settings) -> str:
    """Two principals with memories in two scripts, a restated key, a pin, a forgotten memory, a task
    with two checkpoints; a token and a switch. Returns the token."""
    async with open_server(settings, warm=False) as rt:
        for name, texts in PEOPLE.items():
            await rt.memory.remember(Scope(name), [MemoryDraft(content=t) for t in texts], CallContext())
        keyed = [MemoryDraft(content=f"The deploy target is {where}", key="deploy-target") for where in ("eu", "us")]
        for item in keyed:
            await rt.memory.remember(ALICE, [item], CallContext())
        gone = await rt.memory.remember(ALICE, [MemoryDraft(content="A note to forget")], CallContext())
        await rt.memory.forget(ALICE, ids=[str(gone.items[0].id)], dry_run=False)
        pinned = await rt.memory.remember(ALICE, [MemoryDraft(content="Always answer in English")], CallContext())
        await rt.memory.pin(ALICE, str(pinned.items[0].id), True)
        await rt.tasks.checkpoint(ALICE, "trip", changes={"current_node": None}, goal="Book the trip to Lisbon")
        await rt.tasks.checkpoint(ALICE, "trip", changes={"variables": {"hotel": "Alfama"}})
    token, _ = await TokenStore(settings.data_dir).create("alice", None, "laptop", 1_000.0, None)
    await SwitchFile(settings.data_dir).set("carol", "off", 1_000.0)
    return token


async def _exports(settings: Settings) -> dict[str, bytes]:
    async with open_server(settings, warm=False) as rt:
        return {name: b"".join([line async for line in export_lines(rt.store, Scope(name))]) for name in PEOPLE}


async def _tables(settings: Settings) -> dict[str, dict[str, str]]:
    """Every table's digest, per principal, as the copy compares them."""
    async with open_server(settings, warm=False) as rt:
        out = {}
        for name in PEOPLE:
            async with rt.store.transaction(Scope(name)) as conn:
                out[name] = {t: transfer.digest(rows) for t, rows in (await transfer.read_all(conn)).items()}
        return out


async def _migrate_schema(cluster: pgcluster.Cluster) -> None:
    async with await psycopg.AsyncConnection.connect(cluster.dsn(pgcluster.OWNER), autocommit=True) as owner:
        await migrations.migrate(owner, pgcluster.SERVER)


@pytest.fixture
def database(pg_empty: pgcluster.Cluster, monkeypatch: pytest.MonkeyPatch) -> pgcluster.Cluster:
    """A migrated database, named to the command as an operator names it: the server's DSN and the
    owner's (for the sequences) in the environment."""
    anyio.run(_migrate_schema, pg_empty)
    monkeypatch.setenv("MCP_MEMORY_STORAGE__POSTGRES__DSN", pg_empty.dsn())
    monkeypatch.setenv("MCP_MEMORY_PG_OWNER_DSN", pg_empty.dsn(pgcluster.OWNER))
    return pg_empty


def _run(data_dir: Path, *args: str) -> int:
    return main(["--data-dir", str(data_dir), "migrate", *args])


def test_a_data_directory_goes_to_postgres_and_back_unchanged(
    database: pgcluster.Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, back = tmp_path / "first", tmp_path / "back"
    lite = _settings(first, database.dsn())
    on_pg = _settings(tmp_path / "replica", database.dsn(), "postgres")
    token = anyio.run(_fill, lite)

    assert _run(first, "--to", "postgres") == 0
    assert "2 principals copied and verified, 0 already there" in capsys.readouterr().out
    assert _run(first, "--to", "postgres") == 0  # again: nothing new, nothing doubled
    assert "0 principals copied and verified, 2 already there with the same rows; added 0 tokens" in (
        capsys.readouterr().out
    )
    assert anyio.run(_exports, on_pg) == anyio.run(_exports, lite)
    assert anyio.run(_tables, on_pg) == anyio.run(_tables, lite)
    assert not (tmp_path / "replica").exists()

    async def served() -> None:  # the copy serves: recall, the task, the token, the switch, a new write
        async with open_server(on_pg, warm=False) as rt:
            hits = await rt.memory.recall(ALICE, "what does the user drink?", reinforce=False)
            assert hits.hits[0].text == PEOPLE["alice"][0]
            assert (await rt.memory.recall(BOB, "数据库", reinforce=False)).hits[0].text == PEOPLE["bob"][1]
            assert (await rt.tasks.state(ALICE, "trip")).row.head_seq == 2
            await rt.memory.remember(ALICE, [MemoryDraft(content="The user's sister is called Mira")], CallContext())
        with closing(TokenStore.for_settings(on_pg)) as tokens, closing(SwitchFile.for_settings(on_pg)) as switch:
            found = await tokens.verify(token, 2_000.0)
            assert found is not None
            assert found.principal == "alice"
            assert await switch.off_within("carol")

    anyio.run(served)
    assert _run(back, "--to", "sqlite") == 0
    assert "2 principals copied and verified" in capsys.readouterr().out
    assert anyio.run(_exports, _settings(back, database.dsn())) == anyio.run(_exports, on_pg)
    assert anyio.run(TokenStore(back).verify, token, 2_000.0) is not None


def test_a_principal_held_otherwise_is_refused_alone_and_what_moves_takes_only_its_own(
    database: pgcluster.Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    lite, on_pg = _settings(data, database.dsn()), _settings(tmp_path / "replica", database.dsn(), "postgres")
    anyio.run(_fill, lite)
    anyio.run(TokenStore(data).create, "bob", None, "phone", 1_000.0, None)
    anyio.run(SwitchFile(data).set, EVERYWHERE, "off", 1_000.0)

    assert _run(data, "--to", "postgres", "--only", "alice") == 0
    assert "1 principals copied and verified, 0 already there with the same rows; added 1 tokens, 0 switches" in (
        capsys.readouterr().out
    )  # Bob's token, Carol's switch and the switch over everyone stay behind

    async def shared_rows() -> tuple[list[str], list[str]]:
        with closing(TokenStore.for_settings(on_pg)) as tokens, closing(SwitchFile.for_settings(on_pg)) as switch:
            return [t.principal for t in await tokens.list()], [row[0] for row in await switch.all()]

    assert anyio.run(shared_rows) == (["alice"], [])
    anyio.run(SwitchFile(data).set, EVERYWHERE, "on", 1_001.0)

    async def on_the_target(statement: str) -> None:  # a lifecycle pass there moved its mark on
        async with open_server(on_pg, warm=False) as rt, rt.store.transaction(ALICE) as conn:
            await conn.execute(statement)

    anyio.run(on_the_target, "INSERT OR REPLACE INTO meta(key, value) VALUES ('consolidated_upto', '7')")
    assert _run(data, "--to", "postgres", "--only", "alice") == 0
    assert "0 principals copied and verified, 1 already there" in capsys.readouterr().out

    async def more() -> None:
        async with open_server(lite, warm=False) as rt:
            await rt.memory.remember(ALICE, [MemoryDraft(content="Written after the copy")], CallContext())

    anyio.run(more)
    before = anyio.run(_tables, on_pg)["alice"]
    assert _run(data, "--to", "postgres") == 1  # Alice is refused, Bob still moves
    out, err = capsys.readouterr()
    assert "1 principals copied and verified, 0 already there" in out
    assert "'alice' already has other data in the target (tables memories, occurrences, vectors" in err
    assert "1 of 2 principals were refused" in err
    assert anyio.run(_tables, on_pg)["alice"] == before

    async def forget_alice_there() -> None:  # the way out the refusal names
        async with open_server(on_pg, warm=False) as rt:
            code = (await rt.erasure.forget_user(ALICE)).confirmation_code
            assert code is not None
            await rt.erasure.forget_user(ALICE, code)

    anyio.run(forget_alice_there)
    assert _run(data, "--to", "postgres", "--only", "alice") == 0
    assert "1 principals copied and verified" in capsys.readouterr().out
    assert anyio.run(_exports, on_pg)["alice"] == anyio.run(_exports, lite)["alice"]

    assert _run(data, "--to", "postgres", "--only", "nobody") == 2
    assert "names no principal of the source: nobody" in capsys.readouterr().err

    async def dan() -> None:
        async with open_server(lite, warm=False) as rt:
            await rt.memory.remember(Scope("dan"), [MemoryDraft(content="Dan's office is on floor 4")], CallContext())

    anyio.run(dan)
    with closing(sqlite3.connect(principal_file(data, "dan"))) as db, db:  # as an older import let it through
        db.execute("UPDATE memories SET occurred_at = '2026-03-01T10:00:00Z'")
    assert _run(data, "--to", "postgres", "--only", "dan") == 1
    err = capsys.readouterr().err
    assert "principal 'dan' holds a row the target cannot take (" in err
    assert "nothing of it was written" in err
    principal_file(data, "zoe").write_bytes(b"not a database " * 300)
    assert _run(data, "--to", "postgres") == 2
    assert "cannot read the principal file(s)" in capsys.readouterr().err


def test_what_one_store_keeps_for_itself_stays_behind() -> None:
    assert {keyword.DOCS, keyword.TOKENS} <= set(transfer.LOCAL_META)
    assert transfer.digest([(1, 2.5, "a", b"\x00", None)]) == transfer.digest([(1, 2.5, "a", b"\x00", None)])
    assert transfer.digest([(1,), (2,)]) == transfer.digest([(2,), (1,)])
    assert transfer.digest([(1,)]) != transfer.digest([(1.0,)])
