"""Keyword search inside PostgreSQL (storage/pg/keyword.py) scores what SQLite's FTS5 scores: the
same tokens, phrases and BM25 over the same texts, side by side on a throwaway cluster (ADR 19)."""

from __future__ import annotations

import hashlib
import sqlite3

import psycopg
import pytest
from psycopg import sql

from mcp_memory.core.text import keyword_terms, segment_for_index, stem_terms
from mcp_memory.storage.pg import keyword, migrations
from mcp_memory.storage.rows import fts_match
from tests import pgcluster

pytestmark = pytest.mark.anyio

KEY = hashlib.sha256(b"alice").hexdigest()[:32]
TEXTS = [
    "The user prefers oolong tea without sugar",
    "The user uses vim keybindings in every editor",
    "The user lives in Berlin and works remotely",
    "用户喜欢喝乌龙茶，不加糖",
    "用户住在柏林，远程工作",
    "Invoice INV-767 was paid on 2024-03-02 by Café Zürich",
    "INV 767 is not the same as INV-768; see inv-767 again",
    "The deploy runbook lives in docs/runbook.md, version v1.2.3",
    "Caroline went to the LGBTQ support group on Tuesday",
    "Melanie painted a sunrise; Caroline liked the sunrise painting",
    "We decided to move the billing database to PostgreSQL 16 next Wednesday",
    "The user, the user, the user: boilerplate that every memory repeats",
    "Crème brûlée at the café in Zürich was the user's favourite dessert",
    "数据库迁移定在下周三，用户同意了",
    "Σίσυφος and ΣΊΣΥΦΟΣ are one word; naïve and NAIVE too",
    "tea tea tea tea: a memory that says tea four times",
]
QUESTIONS = [
    "What does the user like to drink?",
    "tea",
    "inv-767",
    "INV 767",
    "cafe zurich",
    "用户喜欢喝什么茶？",
    "柏林",
    "Where is the runbook? docs/runbook.md",
    "v1.2.3",
    "Caroline sunrise painting",
    "postgresql billing wednesday",
    "σίσυφος naive",
    "nothing matches zzzqx",
    "the user",
    "Which games and paintings does she like?",
]


async def _pg_index(cluster: pgcluster.Cluster) -> psycopg.AsyncConnection:
    async with await psycopg.AsyncConnection.connect(cluster.dsn(pgcluster.OWNER), autocommit=True) as owner:
        await migrations.migrate(owner, pgcluster.SERVER)
    conn = await psycopg.AsyncConnection.connect(cluster.dsn())
    await _write(conn, KEY, TEXTS)
    return conn


async def _write(conn: psycopg.AsyncConnection, key: str, texts: list[str], *, with_lengths: bool = True) -> None:
    """The texts as memories m00, m01, ... (m02 archived), indexed; ``with_lengths=False``: their
    postings as schema 3 wrote them."""
    async with conn.transaction():
        await migrations.as_principal(conn, key)
        await conn.execute("SELECT mcp_open_principal(%s, %s)", (key, "someone"))
        rows: dict[int, str] = {}
        for i, text in enumerate(texts):
            row = await (
                await conn.execute(
                    "INSERT INTO memories (principal, id, kind, content, importance, occurred_at, created_at, "
                    "valid_from, language, content_hash, tier) VALUES (%s, %s, 'fact', %s, 0.5, 0, 0, 0, 'en', %s, %s) "
                    "RETURNING n",
                    (key, f"m{i:02d}", text, f"h{i}", "archived" if i == 2 else "active"),
                )
            ).fetchone()
            assert row is not None
            rows[int(row[0])] = text
        await keyword.index(conn, key, rows, with_lengths=with_lengths)


def _fts5() -> sqlite3.Connection:
    """The SQLite store's keyword index over the same texts (schema.py's table, writes.py's rows)."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE memories_fts USING fts5(body, tokenize = 'unicode61 remove_diacritics 2')")
    db.executemany(
        "INSERT INTO memories_fts(rowid, body) VALUES (?, ?)", [(i, segment_for_index(t)) for i, t in enumerate(TEXTS)]
    )
    return db


def _sqlite_scores(db: sqlite3.Connection, terms: list[str]) -> dict[str, float]:
    if not terms:  # a Chinese question has no stems: the store searches nothing
        return {}
    rows = db.execute(
        "SELECT rowid, bm25(memories_fts) FROM memories_fts WHERE memories_fts MATCH ?", (fts_match(terms),)
    ).fetchall()
    return {f"m{r[0]:02d}": -float(r[1]) for r in rows}


async def _pg_scores(conn: psycopg.AsyncConnection, terms: list[str], **kwargs: object) -> dict[str, float]:
    async with conn.transaction():
        await migrations.as_principal(conn, KEY)
        return dict(await keyword.search(conn, KEY, terms, 100, **kwargs))  # type: ignore[arg-type]


async def test_bm25_in_postgresql_equals_fts5_on_english_chinese_phrases_and_accents(
    pg_empty: pgcluster.Cluster,
) -> None:
    db = _fts5()
    async with await _pg_index(pg_empty) as conn:
        compared = 0
        stemmed = 0
        for question in QUESTIONS:
            for terms in (keyword_terms(question), stem_terms(keyword_terms(question))):
                expected = _sqlite_scores(db, terms)
                got = await _pg_scores(conn, terms)
                assert got.keys() == expected.keys(), question
                for memory, score in expected.items():
                    assert got[memory] == pytest.approx(score, rel=1e-9, abs=1e-12), (question, memory)
                compared += len(expected)
            stemmed += len(_sqlite_scores(db, stem_terms(keyword_terms(question))))
        assert compared > 20  # positive control: the questions do match
        assert stemmed > 10  # and their stems too
        assert "m09" in await _pg_scores(conn, stem_terms(["paintings"]))  # "painted", "painting"
        # a phrase matches only where its tokens stand together, as in FTS5
        assert set(await _pg_scores(conn, ["inv-767"])) == {"m05", "m06"}
        assert "m06" not in await _pg_scores(conn, ["inv-768-x"])


async def test_the_visibility_condition_filters_after_the_statistics_and_a_deletion_unindexes(
    pg_empty: pgcluster.Cluster,
) -> None:
    async with await _pg_index(pg_empty) as conn:
        everything = await _pg_scores(conn, ["berlin", "柏林"])
        assert set(everything) == {"m02", "m04"}
        active = await _pg_scores(conn, ["berlin", "柏林"], visible=sql.SQL("m.tier = 'active'"))
        assert active == {"m04": everything["m04"]}  # the archived one still counts in N, as in FTS5
        async with conn.transaction():
            await migrations.as_principal(conn, KEY)
            row = await (
                await conn.execute("SELECT n FROM memories WHERE principal = %s AND id = 'm04'", (KEY,))
            ).fetchone()
            assert row is not None
            await keyword.unindex(conn, KEY, [int(row[0])])
            await conn.execute("DELETE FROM memories WHERE principal = %s AND id = 'm04'", (KEY,))
            counts = await keyword.document_counts(conn, KEY, ["柏林", "tea", "inv-767"])
        assert counts == {"柏林": 0, "tea": 2, "inv-767": 2}
        db = _fts5()
        db.execute("DELETE FROM memories_fts WHERE rowid = 4")
        assert await _pg_scores(conn, ["tea", "user"]) == pytest.approx(_sqlite_scores(db, ["tea", "user"]))


async def test_the_upgrade_to_schema_2_indexes_the_stems_of_stored_memories(
    pg_empty: pgcluster.Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with await psycopg.AsyncConnection.connect(pg_empty.dsn(pgcluster.OWNER), autocommit=True) as owner:
        monkeypatch.setattr(migrations, "SCHEMA_VERSION", 1)
        await migrations.migrate(owner, pgcluster.SERVER)
        monkeypatch.undo()
        async with owner.transaction():  # a memory as schema 1 indexed it: its words as written only
            await migrations.as_principal(owner, KEY)
            await owner.execute("SELECT mcp_open_principal(%s, %s)", (KEY, "someone"))
            row = await (
                await owner.execute(
                    "INSERT INTO memories (principal, id, kind, content, importance, occurred_at, created_at, "
                    "valid_from, language, content_hash) VALUES (%s, 'm00', 'fact', %s, 0.5, 0, 0, 0, 'en', 'h') "
                    "RETURNING n",
                    (KEY, "The user wants game recommendations"),
                )
            ).fetchone()
            assert row is not None
            await keyword.index_segmented(
                owner, KEY, {int(row[0]): "the user wants game recommendations"}, with_lengths=False
            )
        async with owner.transaction():
            await migrations.as_principal(owner, KEY)
            stems = [token for phrase in keyword.phrases(stem_terms(["games"])) for token in phrase]
            held = await (
                await owner.execute("SELECT count(*) FROM postings WHERE term = ANY(%s)", (stems,))
            ).fetchone()
            assert held == (0,)  # (schema 1's postings have no doc_len for the search of this code to read)
        assert await migrations.migrate(owner, pgcluster.SERVER) == migrations.SCHEMA_VERSION
        async with owner.transaction():
            await migrations.as_principal(owner, KEY)
            found = await keyword.search(owner, KEY, stem_terms(["games"]), 10)
            written = await keyword.search(owner, KEY, ["recommendations"], 10)
        db = sqlite3.connect(":memory:")
        db.execute("CREATE VIRTUAL TABLE memories_fts USING fts5(body, tokenize = 'unicode61 remove_diacritics 2')")
        db.execute(
            "INSERT INTO memories_fts(rowid, body) VALUES (0, ?)",
            (segment_for_index("The user wants game recommendations"),),
        )
        assert [m for m, _ in found] == [m for m, _ in written] == ["m00"]
        assert dict(written) == pytest.approx(_sqlite_scores(db, ["recommendations"]))  # one memory, counted once


async def _all_scores(conn: psycopg.AsyncConnection, key: str) -> list[list[tuple[str, float]]]:
    async with conn.transaction():
        await migrations.as_principal(conn, key)
        asked = [keyword_terms(q) for q in QUESTIONS] + [stem_terms(keyword_terms(q)) for q in QUESTIONS]
        return await keyword.searches(conn, key, asked, 100)


async def test_the_upgrade_to_schema_4_gives_each_posting_its_memorys_length_and_scores_as_fresh(
    pg_empty: pgcluster.Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with await psycopg.AsyncConnection.connect(pg_empty.dsn(pgcluster.OWNER), autocommit=True) as owner:
        monkeypatch.setattr(migrations, "SCHEMA_VERSION", 3)
        await migrations.migrate(owner, pgcluster.SERVER)
        monkeypatch.undo()
        await _write(owner, KEY, TEXTS, with_lengths=False)  # a principal of schema 3, its partitions made then
        assert await migrations.migrate(owner, pgcluster.SERVER) == migrations.SCHEMA_VERSION
        late = hashlib.sha256(b"bob").hexdigest()[:32]
        await _write(owner, late, TEXTS)  # a principal whose partitions schema 4 makes
        for key in (KEY, late):
            async with owner.transaction():
                await migrations.as_principal(owner, key)
                row = await (
                    await owner.execute(
                        "SELECT count(*), count(*) FILTER (WHERE p.doc_len = m.doc_len AND p.doc_len > 0) "
                        "FROM postings p JOIN memories m ON m.principal = p.principal AND m.n = p.memory_n"
                    )
                ).fetchone()
            assert row is not None
            assert row[0] > 100, key
            assert row[0] == row[1], key  # every posting holds its memory's length
        migrated, fresh = await _all_scores(owner, KEY), await _all_scores(owner, late)
    assert migrated == fresh  # ids, order and scores, to the last bit
    assert sum(map(len, migrated)) > 30  # positive control: the questions match
    db = _fts5()
    expected = _sqlite_scores(db, keyword_terms(QUESTIONS[0]))
    assert dict(migrated[0]) == pytest.approx(expected, rel=1e-9, abs=1e-12)


async def test_exact_ties_of_several_phrases_come_in_order_of_id(pg_empty: pgcluster.Cluster) -> None:
    """The same text scores the same to the last bit whatever order the plan adds a memory's phrases
    in (the phrases' order, as FTS5 adds them), so the id breaks the tie."""
    texts = [f"orion release notes for the weekly sync, copy {i}" for i in range(40)]
    texts += ["weekly notes", "orion sync", "release"] * 20
    async with await _pg_index(pg_empty) as conn:
        await _write(conn, late := hashlib.sha256(b"carol").hexdigest()[:32], texts)
        terms = ["orion", "release", "notes", "weekly", "sync"]
        for plan in ("on", "off"):  # a hash aggregate and a sort: two orders of the same rows
            async with conn.transaction():
                await migrations.as_principal(conn, late)
                await conn.execute(f"SET LOCAL enable_hashagg = {plan}")
                found = await keyword.search(conn, late, terms, 30)
            tied = found[:30]
            assert len({score for _, score in tied}) == 1, plan
            assert [m for m, _ in tied] == sorted(m for m, _ in tied), plan
