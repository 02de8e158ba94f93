"""The keyword index inside PostgreSQL: SQLite FTS5's tokens, postings and BM25, with no extension
(ADR 19).

A memory's text goes through the same ``text.segment_for_index`` as on SQLite (CJK runs become
bigrams), then through :func:`tokens`, which follows FTS5's ``unicode61 remove_diacritics 2``:
letters, digits, marks and private-use characters make tokens, everything else separates them;
tokens are case-folded, and Latin letters lose their diacritics. It agrees with FTS5 on Latin,
Greek, Cyrillic, Arabic, Hebrew, Hangul, CJK bigrams, digits and identifiers. It differs where
SQLite's Unicode tables are older than Python's, and in scripts whose vowel signs FTS5 takes for
separators (Devanagari and its kin), where this one keeps the word whole.

Each token is a row of ``postings`` with its positions in the memory, so a query term of several
tokens (``inv-767``) is matched as a phrase, as FTS5 matches a quoted term. The score is FTS5's
``bm25()`` over the principal's whole index (every tier, as FTS5 holds every row): for each term,
idf = ln((N - n + 0.5) / (n + 0.5)), floored at 1e-6, times f * (k1 + 1) / (f + k1 * (1 - b + b * D
/ avgdl)), with k1 = 1.2 and b = 0.75. N and the total of tokens are kept in ``meta``; ``D`` is
the memory's token count, kept in each of its postings (``postings.doc_len``, schema 4) as in
``memories.doc_len``; ``n`` is counted from the term's postings as FTS5 reads its doclist.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import psycopg
from psycopg import sql

from mcp_memory.core.text import segment_for_index
from mcp_memory.storage.pg.messages import exchange, inline

K1, B = 1.2, 0.75
DOCS, TOKENS = "keyword_docs", "keyword_tokens"  # the meta rows of N and the total of tokens
_DIACRITICS = range(0x300, 0x370)
EVERY_MEMORY = sql.SQL("true")


def _latin(ch: str) -> bool:
    code = ord(ch)
    return code < 0x250 or 0x1E00 <= code < 0x1F00


def _fold(ch: str) -> str:
    """One character as FTS5 stores it: case-folded (a one-character fold, else lower case) and,
    for a Latin letter, without its diacritics."""
    folded = ch.casefold()
    if len(folded) != 1:
        folded = ch.lower()  # "ß" stays "ß", as in FTS5, rather than becoming "ss"
    kept = []
    for c in folded:
        if ord(c) in _DIACRITICS:
            continue
        parts = unicodedata.normalize("NFD", c)
        if len(parts) > 1 and _latin(parts[0]):
            c = "".join(p for p in parts if ord(p) not in _DIACRITICS)
        kept.append(c)
    return "".join(kept)


def _token_char(ch: str) -> bool:
    category = unicodedata.category(ch)
    return category[0] in "LNM" or category == "Co"


def tokens(text: str) -> list[str]:
    """The tokens of an already segmented text (``text.segment_for_index``), in order."""
    found: list[str] = []
    current: list[str] = []
    for ch in text:
        if _token_char(ch):
            current.append(_fold(ch))
        elif current:
            found.append("".join(current))
            current = []
    if current:
        found.append("".join(current))
    return [t for t in found if t]


def positions(segmented: str) -> tuple[dict[str, list[int]], int]:
    """Each token of a memory's segmented text with its positions, and how many tokens it has."""
    seen: dict[str, list[int]] = {}
    words = tokens(segmented)
    for at, token in enumerate(words):
        seen.setdefault(token, []).append(at)
    return seen, len(words)


def _part(table: str, principal: str) -> sql.Identifier:
    """The principal's partition of ``table``, named as the dialect names it (ADR 20): a statement
    on the parent, prepared by psycopg after its fifth run, gets a generic plan that locks every
    partition of every principal (a thousand principals ran the lock table out of shared memory)."""
    return sql.Identifier(f"{table}_{principal}")


async def index(
    conn: psycopg.AsyncConnection, principal: str, rows: Mapping[int, str], *, with_lengths: bool = True
) -> None:
    """Index memories (row number -> text) inside the caller's transaction."""
    await index_segmented(
        conn, principal, {n: segment_for_index(text) for n, text in rows.items()}, with_lengths=with_lengths
    )


async def index_segmented(
    conn: psycopg.AsyncConnection, principal: str, rows: Mapping[int, str], *, with_lengths: bool = True
) -> None:
    """Index memories (row number -> ``text.segment_for_index`` of their text), as FTS5 is fed.
    ``with_lengths=False``: postings as schema 1 to 3 wrote them, without ``doc_len`` (the upgrade
    to schema 2 writes them before schema 4 adds the column, and fills it)."""
    terms: list[str] = []
    numbers: list[int] = []
    places: list[str] = []  # each posting's positions as an array literal: unnest takes no ragged arrays
    lengths: dict[int, int] = {}
    for n, segmented in rows.items():
        where, lengths[n] = positions(segmented)
        for term, at in where.items():
            terms.append(term)
            numbers.append(n)
            places.append("{" + ",".join(map(str, at)) + "}")
    # two statements for any number of memories (a `migrate` brings thousands at once)
    length = sql.SQL(", doc_len") if with_lengths else sql.SQL("")
    await conn.execute(
        sql.SQL(
            "INSERT INTO {} (principal, term, memory_n, positions{length}) SELECT %s, t, n, p::integer[]{d} "
            "FROM unnest(%s::text[], %s::bigint[], %s::text[], %s::integer[]) AS u(t, n, p, d)"
        ).format(_part("postings", principal), length=length, d=sql.SQL(", d") if with_lengths else sql.SQL("")),
        (principal, terms, numbers, places, [lengths[n] for n in numbers]),
    )
    await conn.execute(
        sql.SQL(
            "UPDATE {} AS m SET doc_len = v.len FROM unnest(%s::bigint[], %s::integer[]) AS v(n, len) "
            "WHERE m.principal = %s AND m.n = v.n"
        ).format(_part("memories", principal)),
        (list(lengths), list(lengths.values()), principal),
    )
    await _count(conn, principal, len(rows), sum(lengths.values()))


async def unindex(conn: psycopg.AsyncConnection, principal: str, rows: Sequence[int]) -> None:
    """Take memories out of the index, inside the caller's transaction (before their rows go)."""
    if not rows:
        return
    found = await (
        await conn.execute(
            sql.SQL("SELECT count(*), coalesce(sum(doc_len), 0) FROM {} WHERE principal = %s AND n = ANY(%s)").format(
                _part("memories", principal)
            ),
            (principal, list(rows)),
        )
    ).fetchone()
    await conn.execute(
        sql.SQL("DELETE FROM {} WHERE principal = %s AND memory_n = ANY(%s)").format(_part("postings", principal)),
        (principal, list(rows)),
    )
    if found is not None:
        await _count(conn, principal, -int(found[0]), -int(found[1]))


async def unindex_all(conn: psycopg.AsyncConnection, principal: str) -> None:
    """Empty the principal's index (forget_user), inside the caller's transaction."""
    await conn.execute(
        sql.SQL("DELETE FROM {} WHERE principal = %s").format(_part("postings", principal)), (principal,)
    )
    await conn.execute(
        sql.SQL("DELETE FROM {} WHERE principal = %s AND key IN (%s, %s)").format(_part("meta", principal)),
        (principal, DOCS, TOKENS),
    )


async def _count(conn: psycopg.AsyncConnection, principal: str, docs: int, total: int) -> None:
    await conn.execute(
        sql.SQL(
            "INSERT INTO {} AS meta (principal, key, value) "
            "VALUES (%(p)s, %(docs)s, %(d)s), (%(p)s, %(tokens)s, %(t)s) "
            "ON CONFLICT (principal, key) DO UPDATE SET value = (meta.value::bigint + excluded.value::bigint)::text"
        ).format(_part("meta", principal)),
        {"p": principal, "docs": DOCS, "tokens": TOKENS, "d": str(docs), "t": str(total)},
    )


def phrases(terms: Iterable[str]) -> list[list[str]]:
    """Each query term as the phrase FTS5 makes of it (its tokens); terms without one are dropped."""
    return [found for found in (tokens(term) for term in terms) if found]


def _phrase_hits(i: int, phrase: list[str], params: dict[str, Any]) -> sql.Composed:
    """(phrase number, memory row, occurrences) for the memories holding ``phrase``."""
    postings = _part("postings", str(params["p"]))
    for j, token in enumerate(phrase):
        params[f"t{i}_{j}"] = token
    if len(phrase) == 1:
        return sql.SQL(
            "SELECT {i} AS i, memory_n, cardinality(positions) AS f, doc_len FROM {postings} "
            "WHERE principal = %(p)s AND term = %(t{i}_0)s"
        ).format(i=sql.Literal(i), postings=postings)
    joins = sql.SQL(" ").join(
        sql.SQL(
            "JOIN {postings} a{j} ON a{j}.principal = a0.principal AND a{j}.memory_n = a0.memory_n "
            "AND a{j}.term = %(t{i}_{j})s"
        ).format(j=sql.Literal(j), i=sql.Literal(i), postings=postings)
        for j in range(1, len(phrase))
    )
    follows = sql.SQL(" AND ").join(
        sql.SQL("x + {j} = ANY(a{j}.positions)").format(j=sql.Literal(j)) for j in range(1, len(phrase))
    )
    return sql.SQL(
        "SELECT i, memory_n, f, doc_len FROM (SELECT {i} AS i, a0.memory_n, a0.doc_len, "
        "(SELECT count(*) FROM unnest(a0.positions) AS x WHERE {follows}) AS f "
        "FROM {postings} a0 {joins} WHERE a0.principal = %(p)s AND a0.term = %(t{i}_0)s) h WHERE f > 0"
    ).format(i=sql.Literal(i), follows=follows, joins=joins, postings=postings)


def bm25_query(found: list[list[str]], visible: sql.Composable, limit: int, params: dict[str, Any]) -> sql.Composed:
    """One statement: (memory id, BM25) of the best ``limit`` visible memories holding any phrase.
    ``visible`` is a condition on the memories as ``m``; ``params`` gains the phrases' tokens."""
    hits = sql.SQL(" UNION ALL ").join(_phrase_hits(i, phrase, params) for i, phrase in enumerate(found))
    params["limit"] = limit
    return sql.SQL(
        "WITH hits AS ({hits}), "
        "stats AS MATERIALIZED (SELECT docs, greatest(total / greatest(docs, 1), 1e-9) AS avgdl FROM (SELECT "
        "  coalesce((SELECT value::float8 FROM {meta} WHERE principal = %(p)s AND key = {docs}), 0) AS docs, "
        "  coalesce((SELECT value::float8 FROM {meta} WHERE principal = %(p)s AND key = {tokens}), 0) AS total) c), "
        # float8 throughout: a literal such as 0.5 is numeric, and numeric arithmetic on each of
        # thousands of hits cost more than the float8 it is cast to (exact here: halves and integers)
        "idf AS (SELECT i, greatest(ln((s.docs - df.n + 0.5) / (df.n + 0.5::float8)), 1e-6) AS idf "
        "  FROM (SELECT i, count(*) AS n FROM hits GROUP BY i) df CROSS JOIN stats s), "
        # each hit's weight from its posting alone (which carries the memory's length, schema 4)
        "weights AS (SELECT h.i, h.memory_n, idf.idf * h.f * {k1plus} "
        "  / (h.f + {k1} * (1 - {b} + {b}::float8 * h.doc_len / s.avgdl)) AS w "
        "  FROM hits h JOIN idf USING (i) CROSS JOIN stats s OFFSET 0), "  # OFFSET 0: once, not once per phrase
        # a memory's score added up in the phrases' order, as FTS5 adds it: sum() adds in whatever
        # order the plan brings the rows, and the last bit that changes breaks exact ties at random
        "scored AS (SELECT memory_n, {total} AS score FROM weights GROUP BY memory_n ORDER BY score DESC) "
        "SELECT m.id, sc.score FROM scored sc "
        # then the memories looked up by key in that order, only until ``limit`` visible ones and
        # their ties are found (an incremental sort on the id, within each score, stops there);
        # OFFSET 0: the planner may not turn the join round (a partition fresh from a migrate has
        # no statistics, and a scan of every hit per memory cost 1 s at 10k)
        "CROSS JOIN LATERAL (SELECT m.id FROM {memories} m "
        "WHERE m.principal = %(p)s AND m.n = sc.memory_n AND {visible} OFFSET 0) m "
        "ORDER BY sc.score DESC, m.id LIMIT %(limit)s"
    ).format(
        hits=hits,
        total=sql.SQL(" + ").join(
            sql.SQL("coalesce(max(w) FILTER (WHERE i = {}), 0::float8)").format(sql.Literal(i))
            for i in range(len(found))
        ),
        docs=sql.Literal(DOCS),
        tokens=sql.Literal(TOKENS),
        k1plus=sql.Literal(K1 + 1),
        k1=sql.Literal(K1),
        b=sql.Literal(B),
        visible=visible,
        meta=_part("meta", str(params["p"])),
        memories=_part("memories", str(params["p"])),
    )


async def search(
    conn: psycopg.AsyncConnection,
    principal: str,
    terms: Sequence[str],
    limit: int,
    visible: sql.Composable = EVERY_MEMORY,
    visible_params: Mapping[str, Any] | None = None,
) -> list[tuple[str, float]]:
    """Top ``limit`` (memory id, BM25) where a larger score is better, as the SQLite store answers."""
    return (await searches(conn, principal, [terms], limit, visible, visible_params))[0]


async def searches(
    conn: psycopg.AsyncConnection,
    principal: str,
    asked: Sequence[Sequence[str]],
    limit: int,
    visible: sql.Composable = EVERY_MEMORY,
    visible_params: Mapping[str, Any] | None = None,
) -> list[list[tuple[str, float]]]:
    """``search`` of each list of terms in ``asked``, the statements sent in one message."""
    statements: dict[int, str] = {}
    for i, terms in enumerate(asked):
        if found := phrases(terms):
            params: dict[str, Any] = {"p": principal, **(visible_params or {})}
            statements[i] = inline(conn, bm25_query(found, visible, limit, params), params)
    answers: list[list[tuple[str, float]]] = [[] for _ in asked]
    for i, rows in zip(statements, await exchange(conn, list(statements.values())), strict=True):
        answers[i] = [(str(r[0]), float(r[1])) for r in rows]
    return answers


async def count_matching(conn: psycopg.AsyncConnection, principal: str, terms: Sequence[str]) -> int:
    """How many memories (every tier) hold any of the terms, each as a phrase (FTS5's MATCH count)."""
    found = phrases(terms)
    if not found:
        return 0
    params: dict[str, Any] = {"p": principal}
    hits = sql.SQL(" UNION ALL ").join(_phrase_hits(i, phrase, params) for i, phrase in enumerate(found))
    query = sql.SQL("SELECT count(DISTINCT memory_n) FROM ({hits}) h").format(hits=hits)
    row = await (await conn.execute(query, params)).fetchone()
    return int(row[0]) if row else 0


async def document_counts(conn: psycopg.AsyncConnection, principal: str, terms: Sequence[str]) -> dict[str, int]:
    """How many memories (every tier) hold each term, as a phrase: what golden queries weigh."""
    return {term: await count_matching(conn, principal, [term]) for term in dict.fromkeys(terms)}
