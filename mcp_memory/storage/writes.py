"""The SQL of memory writes, run inside a transaction SqliteStore has opened.

Every function takes the transaction's connection and appends what it touches to the ``changes``
log, so the other processes replay it into their vector indexes. Opening, committing and the
file-level clean-up after a delete (keyword-index rewrite, WAL truncation) stay in SqliteStore.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import aiosqlite
import orjson

from mcp_memory.core.errors import ConflictError, NotFoundError
from mcp_memory.core.models import SCHEDULER, Applied, Criteria, Merge, NewMemory, NewOccurrence, Scope
from mcp_memory.storage import events, links, second
from mcp_memory.storage.rows import INSERT_MEMORY, blob, record_values, rows_in, visible_clause
from mcp_memory.storage.schema import live_copy


async def apply(
    conn: aiosqlite.Connection, scope: Scope, inserts: Sequence[NewMemory], merges: Sequence[Merge], now: float
) -> Applied:
    """Insert new memories and record merged occurrences.

    Returns, per inserted id, the ids it superseded (by ``supersedes`` or by ``key``), and the
    inserts that became occurrences of a live copy of their text (another process stored it first).
    Raises NotFoundError when a ``supersedes`` id is not in the scope (the caller rolls back).
    """
    superseded: dict[str, list[str]] = {}
    merged: dict[str, str] = {}
    merges = list(merges)
    where, params = visible_clause(scope, Criteria(include_expired=True, include_archived=True), now)
    second_model = await second.writable(conn, inserts)
    for item in inserts:
        copy = await _live_copy(conn, item, now)
        if copy is not None and copy in item.supersedes:
            # A new version in the same words (a corrected kind, tags or importance): the old one steps aside first.
            superseded[item.record.id] = await _supersede(conn, item, -1, where, params)
            await _insert(conn, item, second_model)
            continue
        if copy is not None:  # the text is already live: this statement is one more occurrence of it
            await _check_named(conn, item.supersedes, where, params)
            merged[item.record.id] = copy
            merges.extend(_as_merges(item, copy, now))
            continue
        n = await _insert(conn, item, second_model)
        if item.summarizes:
            await _archive_sources(conn, item)
        superseded[item.record.id] = await _supersede(conn, item, n, where, params)
    for merge in merges:
        found = await _merge(conn, merge, where, params, now)
        if found is not None:
            superseded[merge.target_id] = sorted({*superseded.get(merge.target_id, []), *found})
    return Applied(superseded, merged)


def _as_merges(item: NewMemory, copy: str, now: float) -> list[Merge]:
    """An insert whose text another process stored first, as occurrences of that copy."""
    return [
        Merge(
            target_id=copy,
            occurrence=occurrence,
            seen_at=now,
            supersedes=(*item.supersedes, *item.inferred_supersedes),
            expires_at=item.record.expires_at,
        )
        for occurrence in (item.occurrence, *item.more_occurrences)
    ]


async def _insert(conn: aiosqlite.Connection, item: NewMemory, second_model: str | None) -> int:
    """The memory row and everything derived from it: tags, vector, keyword text, entities,
    occurrences, the change-log entry and the conflict flags. Returns its row number."""
    rec = item.record
    cursor = await conn.execute(INSERT_MEMORY, record_values(rec))
    n = cursor.lastrowid
    assert n is not None
    await conn.executemany("INSERT OR IGNORE INTO memory_tags(tag, memory_n) VALUES (?, ?)", [(t, n) for t in rec.tags])
    await conn.execute("INSERT INTO vectors(memory_n, vec) VALUES (?, ?)", (n, blob(item.vector)))
    await second.insert(conn, n, item, second_model)
    await conn.execute("INSERT INTO memories_fts(rowid, body) VALUES (?, ?)", (n, item.segmented))
    await links.index_entities(conn, [(n, rec.content)])
    for occurrence in (item.occurrence, *item.more_occurrences):
        await insert_occurrence(conn, n, occurrence)
    await conn.execute("INSERT INTO changes(memory_n, op) VALUES (?, 'put')", (n,))
    await conn.executemany(
        "INSERT OR IGNORE INTO conflicts(memory_id, other_id, created_at) VALUES (?, ?, ?)",
        [(a, b, rec.created_at) for other in item.conflicts for a, b in ((rec.id, other), (other, rec.id))],
    )
    await events.record(
        conn, [rec.id], "created", rec.created_at, kind=rec.kind, level=rec.level, client=rec.provenance.client_name
    )
    for other in item.conflicts:
        await events.record(conn, [rec.id], "flagged", rec.created_at, other=other)
        await events.record(conn, [other], "flagged", rec.created_at, other=rec.id)
    return n


async def _archive_sources(conn: aiosqlite.Connection, item: NewMemory) -> None:
    """A summary's sources are archived under it, if every one is still what the pass read."""
    rec = item.record
    marks = ",".join("?" * len(item.summarizes))
    # The pass read its candidates earlier: a source forgotten, pinned, superseded or
    # expired since then must not be summarized (nor its text brought back).
    live = await conn.execute_fetchall(
        f"SELECT COUNT(*) FROM memories WHERE id IN ({marks}) AND tier = 'active' AND pinned = 0 "
        "AND level < ? AND superseded_by IS NULL AND (expires_at IS NULL OR expires_at > ?)",
        [*item.summarizes, rec.level, rec.created_at],
    )
    if int(next(iter(live))[0]) != len(item.summarizes):
        raise ConflictError("the memories to summarize changed since the pass read them")
    await conn.executemany(
        "INSERT OR IGNORE INTO summary_sources(summary_id, source_id) VALUES (?, ?)",
        [(rec.id, source) for source in item.summarizes],
    )
    await conn.execute(
        f"INSERT INTO changes(memory_n, op) SELECT n, 'put' FROM memories WHERE id IN ({marks})", item.summarizes
    )
    await conn.execute(f"UPDATE memories SET tier = 'archived' WHERE id IN ({marks})", item.summarizes)
    await events.record(conn, item.summarizes, "summarized", rec.created_at, into=rec.id)


async def _supersede(
    conn: aiosqlite.Connection, item: NewMemory, n: int, where: str, params: Sequence[object]
) -> list[str]:
    """Mark what a new memory replaces (named by the caller, inferred by the rules, holding the
    same key, or, for a keyed memory, saying its text without a key) as superseded by it, and take
    apart the summaries built on them. Returns their ids."""
    rec = item.record
    old = await _check_named(conn, item.supersedes, where, params)
    rules = dict.fromkeys((i for _, i in old), "named")
    if item.inferred_supersedes:
        # Replaced by the rules, not named by the caller: one already gone or replaced is skipped.
        marks = ",".join("?" * len(item.inferred_supersedes))
        found = await conn.execute_fetchall(
            f"SELECT m.n, m.id FROM memories m WHERE m.id IN ({marks}) AND m.superseded_by IS NULL AND {where}",
            [*item.inferred_supersedes, *params],
        )
        old.extend((int(r[0]), str(r[1])) for r in found)
        rules.update((str(r[1]), "rules") for r in found if str(r[1]) not in rules)
    if rec.key is not None:
        found = await conn.execute_fetchall(
            "SELECT n, id FROM memories WHERE key = ? AND namespace IS ? AND superseded_by IS NULL AND n != ?",
            (rec.key, rec.namespace, n),
        )
        old.extend((int(r[0]), str(r[1])) for r in found)
        rules.update((str(r[1]), "key") for r in found if str(r[1]) not in rules)
        # The same words said without a key: the keyed memory takes their place, so the text has
        # one current memory (as a plain restatement would have merged into it).
        found = await conn.execute_fetchall(
            f"SELECT m.n, m.id FROM memories m WHERE m.content_hash = ? AND {live_copy('m')} AND m.n != ?",
            (rec.content_hash, n),
        )
        old.extend((int(r[0]), str(r[1])) for r in found if str(r[1]) not in rules)
        rules.update((str(r[1]), "same text, now under a key") for r in found if str(r[1]) not in rules)
    for old_n, old_id in old:
        cursor = await conn.execute(
            "UPDATE memories SET valid_to = ?, superseded_by = ? WHERE n = ? AND superseded_by IS NULL",
            (rec.created_at, rec.id, old_n),
        )
        await conn.execute("INSERT INTO changes(memory_n, op) VALUES (?, 'put')", (old_n,))
        if cursor.rowcount:
            await events.record(conn, [old_id], "superseded", rec.created_at, by=rec.id, rule=rules[old_id])
    # A summary built on a memory now replaced would go on saying the old thing: it is taken
    # apart (its other sources return; the next pass may summarize them again).
    for above in await ancestors(conn, [i for _, i in old]):
        if above != rec.id:
            await undo(conn, above, 0)
    return sorted({i for _, i in old})


async def _merge(
    conn: aiosqlite.Connection, merge: Merge, where: str, params: Sequence[object], now: float
) -> list[str] | None:
    """One more occurrence of a stored memory: its expiry and last sighting follow, and what the
    restatement replaces is superseded by it. Returns those ids (None: the target is gone)."""
    rows = await conn.execute_fetchall("SELECT n FROM memories WHERE id = ?", (merge.target_id,))
    if not rows:
        return None
    target_n = int(next(iter(rows))[0])
    await insert_occurrence(conn, target_n, merge.occurrence)
    await events.record(conn, [merge.target_id], "merged", merge.seen_at or now, occurrence=merge.occurrence.id)
    await conn.execute(  # the longest-lived statement sets the expiry (NULL: never)
        "UPDATE memories SET expires_at = CASE WHEN ? IS NULL THEN NULL ELSE MAX(expires_at, ?) END "
        "WHERE n = ? AND expires_at IS NOT NULL",
        (merge.expires_at, merge.expires_at, target_n),
    )
    if merge.seen_at is not None:
        await conn.execute(
            "UPDATE memories SET last_accessed_at = MAX(COALESCE(last_accessed_at, created_at), ?) WHERE n = ?",
            (merge.seen_at, target_n),
        )
    if not merge.supersedes:
        return None
    marks = ",".join("?" * len(merge.supersedes))
    found = await conn.execute_fetchall(
        f"SELECT m.n, m.id FROM memories m WHERE m.id IN ({marks}) AND m.superseded_by IS NULL "
        f"AND m.n != ? AND {where}",
        [*merge.supersedes, target_n, *params],
    )
    for old_n, old_id in found:
        await conn.execute(
            "UPDATE memories SET valid_to = ?, superseded_by = ? WHERE n = ?",
            (merge.seen_at or now, merge.target_id, old_n),
        )
        await conn.execute("INSERT INTO changes(memory_n, op) VALUES (?, 'put')", (old_n,))
        await events.record(
            conn, [str(old_id)], "superseded", merge.seen_at or now, by=merge.target_id, rule="restated"
        )
    return [str(i) for _, i in found]


async def _check_named(
    conn: aiosqlite.Connection, ids: Sequence[str], where: str, params: Sequence[object]
) -> list[tuple[int, str]]:
    """(n, id) of each memory a caller's ``supersedes`` names; NotFoundError for one not in the scope."""
    if not ids:
        return []
    found = await conn.execute_fetchall(
        f"SELECT m.n, m.id FROM memories m WHERE m.id IN ({','.join('?' * len(ids))}) AND {where}",
        [*ids, *params],
    )
    named = [(int(r[0]), str(r[1])) for r in found]
    missing = set(ids) - {i for _, i in named}
    if missing:
        raise NotFoundError("memory", sorted(missing)[0], "recall and list_memories give the ids of your memories")
    return named


async def _live_copy(conn: aiosqlite.Connection, item: NewMemory, now: float) -> str | None:
    """The id of the live memory that already says ``item``'s text, checked inside the write
    transaction (so two processes cannot both miss it). A copy that expired is replaced instead."""
    rec = item.record
    if rec.key is not None or rec.level != 0 or rec.tier != "active" or rec.superseded_by is not None:
        return None
    rows = list(
        await conn.execute_fetchall(
            f"SELECT m.n, m.id, m.expires_at FROM memories m WHERE m.content_hash = ? AND {live_copy('m')}",
            (rec.content_hash,),
        )
    )
    if not rows:
        return None
    n, ident, expires_at = rows[0]
    if expires_at is None or float(expires_at) > now:
        return str(ident)
    await conn.execute("UPDATE memories SET valid_to = ?, superseded_by = ? WHERE n = ?", (now, rec.id, int(n)))
    await conn.execute("INSERT INTO changes(memory_n, op) VALUES (?, 'put')", (int(n),))
    await events.record(conn, [str(ident)], "superseded", now, by=rec.id, rule="expired copy")
    return None


async def insert_occurrence(conn: aiosqlite.Connection, n: int, occ: NewOccurrence) -> None:
    await conn.execute(
        "INSERT INTO occurrences(id, memory_n, session_key, occurred_at, created_at, metadata, client_name, "
        "transport) VALUES (?,?,?,?,?,?,?,?)",
        (
            occ.id,
            n,
            occ.session_key,
            occ.occurred_at,
            time.time(),
            orjson.dumps(occ.metadata).decode(),
            occ.provenance.client_name,
            occ.provenance.transport,
        ),
    )


async def delete(
    conn: aiosqlite.Connection,
    ns: Sequence[int],
    *,
    unpinned_only: bool = False,
    derived: bool = False,
    event: str = "forgotten",
) -> int:
    """Delete memories from every table and index; returns how many rows went.

    With ``derived`` (a user's forget) every summary and extracted fact built on them is taken
    apart first, in the same transaction, so none is left holding their text.
    """
    deleted = 0
    for start in range(0, len(ns), 500):
        chunk = list(ns[start : start + 500])
        marks = ",".join("?" * len(chunk))
        if unpinned_only:  # a pass read its rows earlier: a memory pinned since then stays
            kept = await conn.execute_fetchall(f"SELECT n FROM memories WHERE n IN ({marks}) AND pinned = 0", chunk)
            chunk = [int(r[0]) for r in kept]
            if not chunk:
                continue
            marks = ",".join("?" * len(chunk))
        if derived:
            chunk = await _with_derived(conn, chunk)
            marks = ",".join("?" * len(chunk))
        ids = f"(SELECT id FROM memories WHERE n IN ({marks}))"
        # The sources a summary archived return to the active tier when it goes (an extracted fact,
        # level 0, archived nothing: its source keeps its tier); the lineage goes.
        summaries = f"(SELECT id FROM memories WHERE n IN ({marks}) AND level > 0)"
        await conn.execute(
            "INSERT INTO changes(memory_n, op) SELECT n, 'put' FROM memories WHERE id IN "
            f"(SELECT source_id FROM summary_sources WHERE summary_id IN {summaries})",
            chunk,
        )
        await conn.execute(
            "UPDATE memories SET tier = 'active' WHERE id IN "
            f"(SELECT source_id FROM summary_sources WHERE summary_id IN {summaries})",
            chunk,
        )
        for column in ("summary_id", "source_id"):
            await conn.execute(f"DELETE FROM summary_sources WHERE {column} IN {ids}", chunk)
        await conn.execute(f"DELETE FROM memories_fts WHERE rowid IN ({marks})", chunk)
        for column in ("memory_id", "other_id"):
            await conn.execute(
                f"DELETE FROM conflicts WHERE {column} IN (SELECT id FROM memories WHERE n IN ({marks}))", chunk
            )
        gone = [str(r[0]) for r in await conn.execute_fetchall(f"SELECT id FROM memories WHERE n IN ({marks})", chunk)]
        await events.only(conn, gone, event, time.time())
        await rows_in(conn, "DELETE FROM golden_queries WHERE memory_id IN ({marks})", gone)  # it names what is gone
        cursor = await conn.execute(f"DELETE FROM memories WHERE n IN ({marks})", chunk)
        deleted += cursor.rowcount
        await conn.executemany("INSERT INTO changes(memory_n, op) VALUES (?, 'del')", [(n,) for n in chunk])
    return deleted


async def _with_derived(conn: aiosqlite.Connection, chunk: list[int]) -> list[int]:
    """A user's forget of rows ``chunk``: the summaries built on them taken apart, and the rows of
    the facts extracted from them added."""
    marks = ",".join("?" * len(chunk))
    # Every summary and extracted fact built on what goes, at any level, is taken apart in
    # this transaction (its other sources come back): one a pass wrote while this forget was
    # on its way is not left holding the forgotten text.
    going = [str(r[0]) for r in await conn.execute_fetchall(f"SELECT id FROM memories WHERE n IN ({marks})", chunk)]
    for above in await ancestors(conn, going):
        if above not in going:
            await undo(conn, above, 0)
    # a fact the scheduler extracted but had not linked yet (a crash between the two) names
    # its source in its metadata: it goes too
    orphans = await conn.execute_fetchall(
        "SELECT n FROM memories WHERE level = 0 AND transport = ? AND "
        f"json_extract(metadata, '$.extracted_from') IN ({','.join('?' * len(going))})",
        [SCHEDULER.transport, *going],
    )
    return list(dict.fromkeys([*chunk, *(int(r[0]) for r in orphans)]))


async def erase_principal(conn: aiosqlite.Connection, now: float) -> dict[str, int]:
    """Delete every row the principal has and record a content-free receipt; returns the counts per table."""
    counts: dict[str, int] = {}
    for table in ("memories", "occurrences", "vectors", "memory_tags", "tasks", "checkpoints"):
        rows = await conn.execute_fetchall(f"SELECT COUNT(*) FROM {table}")
        counts[table] = int(next(iter(rows))[0])
    counts["pinned"] = int(next(iter(await conn.execute_fetchall("SELECT COUNT(*) FROM memories WHERE pinned = 1")))[0])
    await conn.execute("INSERT INTO changes(memory_n, op) SELECT n, 'del' FROM memories")
    await conn.execute("DELETE FROM memories_fts")
    await conn.execute("DELETE FROM memories")
    await conn.execute("DELETE FROM checkpoints")
    await conn.execute("DELETE FROM tasks")
    await conn.execute("DELETE FROM conflicts")
    await conn.execute("DELETE FROM summary_sources")
    await conn.execute("DELETE FROM compression_failures")
    await conn.execute("DELETE FROM memory_events")
    await conn.execute("DELETE FROM golden_queries")
    await conn.execute("DELETE FROM golden_checks")
    # the passes' state: the fact extraction's marks and the fact check's counts
    await conn.execute(
        "DELETE FROM meta WHERE key LIKE 'extracted_upto%' OR key LIKE 'fact_check_%' OR key LIKE 'extract_failures:%' "
        "OR key = 'consolidated_upto'"
    )
    await conn.execute("INSERT INTO erasures(erased_at, receipt) VALUES (?, ?)", (now, orjson.dumps(counts).decode()))
    return counts


async def ancestors(conn: aiosqlite.Connection, ids: Sequence[str]) -> list[str]:
    """Every summary built from ``ids``, directly or through other summaries, highest level first."""
    found: list[str] = []
    frontier = list(dict.fromkeys(ids))
    while frontier:
        above: list[str] = []
        for start in range(0, len(frontier), 500):
            chunk = frontier[start : start + 500]
            rows = await conn.execute_fetchall(
                f"SELECT DISTINCT summary_id FROM summary_sources WHERE source_id IN ({','.join('?' * len(chunk))})",
                chunk,
            )
            above.extend(str(r[0]) for r in rows if str(r[0]) not in found)
        above = list(dict.fromkeys(above))
        found.extend(above)
        frontier = above
    return found[::-1]


async def undo(conn: aiosqlite.Connection, summary_id: str, resist: int) -> list[str]:
    """Inside a transaction: the summary's sources back to the active tier, the summary deleted."""
    sources = [
        str(r[0])
        for r in await conn.execute_fetchall(
            "SELECT source_id FROM summary_sources WHERE summary_id = ?", (summary_id,)
        )
    ]
    archived_them = list(
        await conn.execute_fetchall("SELECT 1 FROM memories WHERE id = ? AND level > 0", (summary_id,))
    )
    if sources and archived_them:  # an extracted fact (level 0) archived nothing: no tier to give back
        marks = ",".join("?" * len(sources))
        await conn.execute(f"UPDATE memories SET tier = 'active' WHERE id IN ({marks})", sources)
        await conn.execute(
            f"INSERT INTO changes(memory_n, op) SELECT n, 'put' FROM memories WHERE id IN ({marks})", sources
        )
        await events.record(conn, sources, "restored", time.time(), summary=summary_id)
        if resist:
            await conn.executemany(
                "INSERT INTO compression_failures(memory_id, failures) VALUES (?, ?) "
                "ON CONFLICT(memory_id) DO UPDATE SET failures = MAX(failures, excluded.failures)",
                [(source, resist) for source in sources],
            )
    await conn.execute("DELETE FROM summary_sources WHERE summary_id = ?", (summary_id,))
    await conn.execute("DELETE FROM conflicts WHERE memory_id = ? OR other_id = ?", (summary_id, summary_id))
    for (n,) in list(await conn.execute_fetchall("SELECT n FROM memories WHERE id = ?", (summary_id,))):
        await events.only(conn, [summary_id], "undone", time.time())
        await conn.execute("DELETE FROM memories_fts WHERE rowid = ?", (n,))
        await conn.execute("DELETE FROM memories WHERE n = ?", (n,))
        await conn.execute("INSERT INTO changes(memory_n, op) VALUES (?, 'del')", (n,))
    return sources
