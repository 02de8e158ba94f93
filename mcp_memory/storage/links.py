"""What memories name, and the links recall follows from its first hits (ADR 10).

Each memory's entities (``text.entities``: names, identifiers, titles) are kept in
``memory_entities``, written with the memory and deleted with it. Two memories are linked when they
share an entity that few memories of the file name (at most ``LINK_SHARE`` of them, never fewer
than two); a memory is also linked to the memories just before and after it in its session. Links
are read when recall asks, not stored: an entity that becomes common stops linking at once, and a
forgotten memory takes its entities with it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

import aiosqlite

from mcp_memory.core.models import Link
from mcp_memory.core.text import entities
from mcp_memory.storage.rows import read_together, rows_in_each

LINK_SHARE = 0.05  # an entity in more than this share of the memories ("user", a speaker) links nothing
MAX_LINKS = 20  # per memory, rarest entities first
# A source passes over at most MAX_LINKS + 1 memories it has seen and takes at most MAX_LINKS + 1, so
# an entity's first this many memories are all any source can use (under the 5% share, an entity of
# a 100k store may name thousands, which recall would read for nothing).
USABLE_PER_ENTITY = 2 * (MAX_LINKS + 1)


def entity_rows(n: int, content: str) -> list[tuple[str, int]]:
    return [(entity, n) for entity in sorted(entities(content))]


async def index_entities(conn: aiosqlite.Connection, memories: Iterable[tuple[int, str]]) -> None:
    rows = [row for n, content in memories for row in entity_rows(n, content)]
    if rows:
        await conn.executemany("INSERT OR IGNORE INTO memory_entities(entity, memory_n) VALUES (?, ?)", rows)


def backfill(conn: sqlite3.Connection) -> None:
    """The entities of every memory already stored (the schema 7 migration)."""
    memories = conn.execute("SELECT n, content FROM memories").fetchall()
    rows = [row for n, content in memories for row in entity_rows(int(n), str(content))]
    conn.executemany("INSERT OR IGNORE INTO memory_entities(entity, memory_n) VALUES (?, ?)", rows)


async def links(conn: aiosqlite.Connection, sources: Sequence[str], population: int) -> list[Link]:
    """The links of the memories ``sources`` (ids): shared rare entities (at most MAX_LINKS a
    source), then session neighbours. Two exchanges: what the sources name and their neighbours,
    then how many memories name each entity and the first of them; on PostgreSQL one round trip
    (``_at_once``)."""
    if not sources:
        return []
    cap = max(2, int(LINK_SHARE * population))
    if getattr(conn, "read_together", None) is not None and len(sources) <= _PER_STATEMENT:
        named, beside, counts, sharing = await _at_once(conn, sources, cap)
    else:
        named, beside = await rows_in_each(conn, [(_NAMED, sources), (_NEIGHBOURS, sources)])
        counts, sharing = await _named_by(conn, sorted({str(e) for _, e in named if e is not None}), cap)
    by_source: dict[str, list[str]] = {}
    for ident, entity in named:
        by_source.setdefault(str(ident), []).extend([] if entity is None else [str(entity)])
    found: list[Link] = []
    for source in (s for s in sources if s in by_source):  # a source not stored names nothing
        seen: set[str] = {source}
        for entity in sorted(by_source[source], key=lambda e: (counts.get(e, 0), e)):
            for target in sharing.get(entity, []):
                if target not in seen and len(seen) <= MAX_LINKS:
                    seen.add(target)
                    found.append(Link(source, target, entity))
    found.extend(Link(str(r[0]), str(t), "") for r in beside for t in (r[1], r[2]) if t is not None)
    return found


async def following(conn: aiosqlite.Connection, ids: Sequence[str]) -> dict[str, str]:
    """The memory stored just after each of ``ids`` in its session, by id: in a dialog, its reply."""
    if not ids:
        return {}
    (rows,) = await rows_in_each(conn, [(_FOLLOWING, ids)])
    return {str(r[0]): str(r[1]) for r in rows if r[1] is not None}


_NAMED = (  # each stored source, with each entity it names (NULL for none)
    "SELECT m.id, e.entity FROM memories m LEFT JOIN memory_entities e ON e.memory_n = m.n WHERE m.id IN ({marks})"
)
_NEIGHBOURS = (  # each source's memories just before and after it in its session
    "SELECT m.id, "
    "(SELECT p.id FROM memories p WHERE p.session_key = m.session_key AND p.n < m.n ORDER BY p.n DESC LIMIT 1), "
    "(SELECT x.id FROM memories x WHERE x.session_key = m.session_key AND x.n > m.n ORDER BY x.n LIMIT 1) "
    "FROM memories m WHERE m.session_key IS NOT NULL AND m.id IN ({marks}) ORDER BY m.n"
)
_FOLLOWING = (  # each memory's next in its session
    "SELECT m.id, (SELECT x.id FROM memories x WHERE x.session_key = m.session_key AND x.n > m.n ORDER BY x.n LIMIT 1) "
    "FROM memories m WHERE m.session_key IS NOT NULL AND m.id IN ({marks})"
)
# Per-entity subqueries joined in one statement: each reads its entity's first rows from the primary
# key and stops (a window over an entity's every row cost 5 ms at 100k memories, this 0.1 ms).
_PER_STATEMENT = 100
_COUNT = (
    "SELECT entity, COUNT(*) FROM (SELECT entity FROM memory_entities WHERE entity = ? LIMIT ?) AS named "
    "GROUP BY entity"
)
_FIRST = (
    "SELECT entity, n, id FROM (SELECT e.entity, m.n, m.id FROM memory_entities e JOIN memories m ON m.n = e.memory_n "
    f"WHERE e.entity = ? ORDER BY e.memory_n LIMIT {USABLE_PER_ENTITY}) AS earliest"
)


async def _named_by(
    conn: aiosqlite.Connection, wanted: Sequence[str], cap: int
) -> tuple[dict[str, int], dict[str, list[str]]]:
    """How many memories name each entity, counted up to ``cap`` + 1 (beyond that it links
    nothing), and the ids of the first USABLE_PER_ENTITY memories naming each one counted no more
    than ``cap``, oldest first. Both read together: the first of a common entity are read for nothing."""
    reads: list[tuple[str, list[Any]]] = []
    for start in range(0, len(wanted), _PER_STATEMENT):
        chunk = list(wanted[start : start + _PER_STATEMENT])
        reads.append((" UNION ALL ".join([_COUNT] * len(chunk)), [v for entity in chunk for v in (entity, cap + 1)]))
        reads.append((" UNION ALL ".join([_FIRST] * len(chunk)), chunk))
    answers = await read_together(conn, reads)
    counts = {str(r[0]): int(r[1]) for rows in answers[0::2] for r in rows}
    first: dict[str, list[tuple[int, str]]] = {}
    for entity, n, ident in (r for rows in answers[1::2] for r in rows):
        if counts.get(str(entity), 0) <= cap:
            first.setdefault(str(entity), []).append((int(n), str(ident)))
    return counts, {entity: [ident for _, ident in sorted(rows)] for entity, rows in first.items()}


# On PostgreSQL, what the sources name counted and its first memories read in the same statement
# (LATERAL, which SQLite has not): each entity's count and first rows still stop at their LIMIT.
_NAMED_BY_AT_ONCE = (
    "SELECT named.entity, counted.k, earliest.n, earliest.id FROM (SELECT DISTINCT e.entity FROM memories m "
    "JOIN memory_entities e ON e.memory_n = m.n WHERE m.id IN ({marks})) AS named "
    "CROSS JOIN LATERAL (SELECT COUNT(*) AS k FROM (SELECT 1 FROM memory_entities x WHERE x.entity = named.entity "
    "LIMIT ?) AS t) AS counted "
    "LEFT JOIN LATERAL (SELECT f.memory_n AS n, fm.id FROM memory_entities f JOIN memories fm ON fm.n = f.memory_n "
    f"WHERE f.entity = named.entity AND counted.k <= ? ORDER BY f.memory_n LIMIT {USABLE_PER_ENTITY}) AS earliest "
    "ON TRUE"
)


async def _at_once(
    conn: aiosqlite.Connection, sources: Sequence[str], cap: int
) -> tuple[list[Any], list[Any], dict[str, int], dict[str, list[str]]]:
    """What ``links`` reads in two exchanges, in one (a connection that sends reads together): what
    the sources name, their neighbours, and ``_named_by``'s counts and first memories."""
    marks = ",".join("?" * len(sources))
    named, beside, counted = await read_together(
        conn,
        [
            (_NAMED.format(marks=marks), sources),
            (_NEIGHBOURS.format(marks=marks), sources),
            (_NAMED_BY_AT_ONCE.format(marks=marks), [*sources, cap + 1, cap]),
        ],
    )
    counts = {str(r[0]): int(r[1]) for r in counted}
    first: dict[str, list[tuple[int, str]]] = {}
    for entity, _, n, ident in counted:
        if n is not None:
            first.setdefault(str(entity), []).append((int(n), str(ident)))
    return named, beside, counts, {entity: [ident for _, ident in sorted(rows)] for entity, rows in first.items()}
