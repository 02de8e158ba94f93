"""Numbered migrations: an older file is backed up and upgraded in place; nothing is lost."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from mcp_memory.core.errors import SchemaVersionError
from mcp_memory.core.text import stem_terms
from mcp_memory.storage import schema
from mcp_memory.storage.rows import fts_match
from mcp_memory.storage.schema import SCHEMA_VERSION, migrate


def _v1_file(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as mp:
        mp.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:1])
        mp.setattr(schema, "SCHEMA_VERSION", 1)
        migrate(path, 1_000)
    conn = sqlite3.connect(path)
    conn.execute(
        "INSERT INTO memories (id, kind, content, importance, occurred_at, created_at, valid_from, language, "
        "content_hash) VALUES ('01JOLDMEMORY0000000000000', 'fact', 'kept across the upgrade', 0.5, 1, 1, 1, 'en', 'h')"
    )
    conn.commit()
    conn.close()


def test_an_older_file_is_backed_up_then_upgraded_with_its_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "alice.db"
    _v1_file(path, monkeypatch)
    migrate(path, 1_000)
    conn = sqlite3.connect(path)
    version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
    assert int(version) == SCHEMA_VERSION
    assert conn.execute("SELECT content FROM memories").fetchall() == [("kept across the upgrade",)]
    assert conn.execute("SELECT COUNT(*) FROM tasks").fetchone()[0] == 0
    conn.close()
    backups = list(tmp_path.glob("alice.v1.*.bak.db"))
    assert len(backups) == 1
    old = sqlite3.connect(backups[0])
    assert old.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == "1"
    assert old.execute("SELECT content FROM memories").fetchall() == [("kept across the upgrade",)]
    old.close()


def test_migrating_twice_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "alice.db"
    migrate(path, 1_000)
    migrate(path, 1_000)
    assert list(tmp_path.glob("*.bak.db")) == []


def test_older_code_refuses_a_newer_file_naming_both_versions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "alice.db"
    migrate(path, 1_000)
    conn = sqlite3.connect(path)
    newer = SCHEMA_VERSION + 1
    conn.execute("UPDATE meta SET value = ? WHERE key IN ('schema_version', 'min_code_schema')", (str(newer),))
    conn.commit()
    conn.close()
    with pytest.raises(
        SchemaVersionError, match=rf"schema version {newer} .* knows schema versions up to {SCHEMA_VERSION}"
    ):
        migrate(path, 1_000)


def test_a_newer_file_that_older_code_may_still_write_is_opened(tmp_path: Path) -> None:
    path = tmp_path / "alice.db"
    migrate(path, 1_000)
    conn = sqlite3.connect(path)
    # a newer, additive version: its min_code_schema still lets this code write
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    conn.commit()
    conn.close()
    migrate(path, 1_000)  # no error: the newer schema says this code may still write it


def test_a_migration_backup_goes_when_text_is_forgotten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import anyio

    from mcp_memory.config import load_settings
    from mcp_memory.core.models import Scope
    from mcp_memory.mcp.server import open_server
    from mcp_memory.storage.pool import principal_file

    path = principal_file(tmp_path, "alice")
    path.parent.mkdir(parents=True)
    _v1_file(path, monkeypatch)  # holds "kept across the upgrade"

    async def forget_it() -> None:
        async with open_server(load_settings(data_dir=tmp_path, principal="alice"), warm=False) as runtime:
            await runtime.store.count(Scope("alice"))  # opening the file upgrades it
            assert list(path.parent.glob("*.bak.db"))  # the upgrade made a backup with the old text
            result = await runtime.memory.forget(Scope("alice"), ids=["01JOLDMEMORY0000000000000"], dry_run=False)
            assert result.deleted == 1

    anyio.run(forget_it)
    assert list(path.parent.glob("*.bak.db")) == []
    for file in path.parent.iterdir():
        assert b"kept across the upgrade" not in file.read_bytes()


def test_a_file_at_schema_5_or_later_refuses_code_that_knows_only_schema_4(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "alice.db"
    migrate(path, 1_000)
    monkeypatch.setattr(schema, "SCHEMA_VERSION", 4)
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:4])
    with pytest.raises(SchemaVersionError, match=f"schema version {SCHEMA_VERSION}"):
        migrate(path, 1_000)


def test_the_upgrade_to_schema_7_indexes_what_stored_memories_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "alice.db"
    with monkeypatch.context() as mp:
        mp.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:6])
        mp.setattr(schema, "SCHEMA_VERSION", 6)
        migrate(path, 1_000)
    conn = sqlite3.connect(path)
    for i, text in enumerate(("Buildkite deploys INV-767 at night", "INV-767 broke the nightly export")):
        conn.execute(
            "INSERT INTO memories (id, kind, content, importance, occurred_at, created_at, valid_from, language, "
            "content_hash) VALUES (?, 'fact', ?, 0.5, 1, 1, 1, 'en', ?)",
            (f"01JOLDMEMORY000000000000{i}", text, f"h{i}"),
        )
    conn.commit()
    conn.close()
    migrate(path, 1_000)
    conn = sqlite3.connect(path)
    named = conn.execute("SELECT entity, COUNT(*) FROM memory_entities GROUP BY entity ORDER BY entity").fetchall()
    conn.close()
    assert named == [("buildkite", 1), ("inv-767", 2)]


def test_the_upgrade_to_schema_12_indexes_the_stems_of_stored_memories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "alice.db"
    with monkeypatch.context() as mp:
        mp.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:11])
        mp.setattr(schema, "SCHEMA_VERSION", 11)
        migrate(path, 1_000)
    conn = sqlite3.connect(path)
    n = conn.execute(
        "INSERT INTO memories (id, kind, content, importance, occurred_at, created_at, valid_from, language, "
        "content_hash) VALUES ('01JOLDMEMORY0000000000000', 'fact', 'The user wants game recommendations', "
        "0.5, 1, 1, 1, 'en', 'h')"
    ).lastrowid
    conn.execute(  # as code of schema 11 indexed it: the words as written only
        "INSERT INTO memories_fts(rowid, body) VALUES (?, 'the user wants game recommendations')", (n,)
    )
    conn.commit()
    stem = fts_match(stem_terms(["games"]))
    assert conn.execute("SELECT COUNT(*) FROM memories_fts WHERE memories_fts MATCH ?", (stem,)).fetchone() == (0,)
    conn.close()
    migrate(path, 1_000)
    conn = sqlite3.connect(path)
    found = conn.execute("SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?", (stem,)).fetchall()
    written = conn.execute(
        "SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?", ('"recommendations"',)
    ).fetchall()
    rows = conn.execute("SELECT COUNT(*) FROM memories_fts").fetchone()
    conn.close()
    assert found == written == [(n,)]
    assert rows == (1,)  # written again, not twice
