"""One SQL for both backends (ADR 20): the storage functions written for SQLite run on PostgreSQL
through :class:`PgConn`, which answers the calls they make on an aiosqlite connection.

Each statement is translated once (and cached) from the SQLite dialect the storage modules speak:

- ``?`` placeholders become ``%s`` (a literal ``%`` is doubled); ``IS ?`` and ``IS NOT ?`` become
  ``IS [NOT] DISTINCT FROM``; a parameter only tested for NULL is cast to text, so it has a type;
  ``json_extract(column, '$.key')`` becomes ``column::jsonb ->> 'key'``; ``LIMIT -1`` (none) is read
  as PostgreSQL's ``LIMIT NULL``;
- ``INSERT OR IGNORE`` becomes ``ON CONFLICT DO NOTHING`` and ``INSERT OR REPLACE`` an upsert on the
  table's key; two-argument ``MAX(a, b)`` becomes ``GREATEST`` (which, unlike SQLite's, skips a
  NULL argument: the storage functions never pass one); ``CAST(... AS REAL)`` a double, and
  ``CAST(<arithmetic> AS INTEGER)`` truncates as SQLite's does (PostgreSQL's rounds); an
  ``ON CONFLICT (...)`` target gains the principal, with which every key begins;
- a per-principal table after FROM, JOIN, INTO or UPDATE becomes the principal's own partition
  (``memories`` -> ``memories_<key>``): the planner never looks at another principal's partition,
  and the partition's own row-level security still binds the transaction's principal. The
  ``principal`` column fills itself from the transaction's setting;
- an INSERT into a table numbered by identity returns the number, for ``lastrowid``;
- a DELETE from a table other rows hang on (memories, tasks) deletes them too, in one statement, as
  SQLite's foreign keys cascade (the PostgreSQL schema has none: ADR 19).

The keyword index is not SQL on SQLite (FTS5); its statements go to ``keyword.py``. Only the
statements the storage modules use are recognised; any other use of ``memories_fts`` is refused
loudly rather than run wrong. Text literals are left as they are, but for ``%``, which psycopg
reads as a placeholder's anywhere.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable, Sequence
from functools import lru_cache
from typing import Any

import psycopg

from mcp_memory.core.errors import StorageError
from mcp_memory.storage.pg import keyword
from mcp_memory.storage.pg.messages import exchange, inline
from mcp_memory.storage.pg.vector_layout import Vec32

PER_PRINCIPAL = (
    "meta", "memories", "memory_tags", "occurrences", "vectors", "second_vectors", "postings", "memory_entities",
    "changes", "tasks", "checkpoints", "erasures", "conflicts", "summary_sources", "compression_failures",
    "memory_events", "golden_queries", "golden_checks",
)  # fmt: skip
# The key of each table an INSERT OR REPLACE writes (what SQLite replaces on).
_KEYS = {
    "meta": "key",
    "vectors": "memory_n",
    "second_vectors": "memory_n",
    "compression_failures": "memory_id",
    "tasks": "task_id",
    "conflicts": "memory_id, other_id",
}
_NUMBERED = {"memories": "n", "erasures": "n", "memory_events": "n", "golden_checks": "n", "changes": "seq"}
# What SQLite's ON DELETE CASCADE removes with a row: (parent, its key, the children and their column).
_CASCADES = {
    "memories": ("n", (("memory_tags", "memory_n"), ("occurrences", "memory_n"), ("vectors", "memory_n"),
                       ("second_vectors", "memory_n"), ("memory_entities", "memory_n"))),
    "tasks": ("task_id", (("checkpoints", "task_id"),)),
}  # fmt: skip
_DELETE = re.compile(r"^\s*DELETE\s+FROM\s+(\w+)\b", re.IGNORECASE)
COUNTED = "__counted__"  # a translation whose one row is the statement's row count
_SUFFIX = "__principal__"  # stands for the partition's key in a cached translation

_TABLE = re.compile(r"\b(FROM|JOIN|INTO|UPDATE)(\s+)(" + "|".join(PER_PRINCIPAL) + r")\b(?!\s*\()", re.IGNORECASE)
_TABLE_COLUMNS = re.compile(r"\b(INTO)(\s+)(" + "|".join(PER_PRINCIPAL) + r")\s*\(", re.IGNORECASE)
_COMMA_TABLES = re.compile(r"(,\s*)(" + "|".join(PER_PRINCIPAL) + r")(\s+[a-z]\b)", re.IGNORECASE)
_INSERT = re.compile(r"^\s*INSERT\s+OR\s+(IGNORE|REPLACE)\s+INTO\s+(\w+)", re.IGNORECASE)
_INTO = re.compile(r"^\s*INSERT\s+INTO\s+(\w+)", re.IGNORECASE)
_MAX = re.compile(r"\bMAX\(", re.IGNORECASE)


def _code_parts(statement: str) -> list[str]:
    """The statement split at its single quotes: even items are SQL, odd ones literal text."""
    return statement.split("'")


def _greatest(code: str) -> str:
    """``MAX(a, b)`` with two arguments (SQLite's scalar max) as ``GREATEST(a, b)``."""
    out, at = [], 0
    for found in _MAX.finditer(code):
        depth, comma, end = 0, False, None
        for i in range(found.end(), len(code)):
            if code[i] == "(":
                depth += 1
            elif code[i] == ")":
                if depth == 0:
                    end = i
                    break
                depth -= 1
            elif code[i] == "," and depth == 0:
                comma = True
        if comma and end is not None:
            out.append(code[at : found.start()] + "GREATEST(")
            at = found.end()
    out.append(code[at:])
    return "".join(out)


def _truncating_casts(code: str) -> str:
    """``CAST(<arithmetic> AS INTEGER)`` as SQLite means it, truncated toward zero: PostgreSQL
    rounds. A cast of a plain column (a counter kept as text) is left as it is."""
    out, at = [], 0
    for found in re.finditer(r"\bCAST\(", code, flags=re.IGNORECASE):
        if found.start() < at:
            continue
        depth = 0
        for i in range(found.end(), len(code)):
            depth += code[i] == "("
            if code[i] == ")":
                if depth == 0:
                    inner = code[found.end() : i]
                    expr, sep, kind = inner.rpartition(" AS ")
                    if sep and kind.strip().upper() == "INTEGER" and re.search(r"[-+*/]", expr):
                        out.append(code[at : found.end()] + f"trunc({expr}) AS {kind}")
                        at = i
                    break
                depth -= 1
    out.append(code[at:])
    return "".join(out)


def _code(code: str, *, shared: bool = False) -> str:
    code = code.replace("%", "%%")
    code = re.sub(r"\bIS\s+NOT\s+\?", "IS DISTINCT FROM ?", code, flags=re.IGNORECASE)
    code = re.sub(r"\bIS\s+\?", "IS NOT DISTINCT FROM ?", code, flags=re.IGNORECASE)
    # a parameter tested for NULL and nothing else has no type PostgreSQL can infer: give it one
    code = re.sub(r"\?(\s+IS\s+(?:NOT\s+)?NULL)", r"CAST(? AS text)\1", code, flags=re.IGNORECASE)
    code = re.sub(r"\bLIMIT\s+\?", "LIMIT NULLIF(?, -1)", code, flags=re.IGNORECASE)  # SQLite's -1: no limit
    code = code.replace("?", "%s")
    code = re.sub(r"\bAS\s+REAL\)", "AS double precision)", code, flags=re.IGNORECASE)
    code = _truncating_casts(_greatest(code))
    if shared:
        return code
    # a per-principal table's keys all begin with the principal
    code = re.sub(r"\bON\s+CONFLICT\s*\(", "ON CONFLICT (principal, ", code, flags=re.IGNORECASE)
    code = _TABLE.sub(lambda m: f"{m.group(1)}{m.group(2)}{m.group(3)}_{_SUFFIX}", code)
    code = _TABLE_COLUMNS.sub(lambda m: f"{m.group(1)}{m.group(2)}{m.group(3)}_{_SUFFIX}(", code)
    return _COMMA_TABLES.sub(lambda m: f"{m.group(1)}{m.group(2)}_{_SUFFIX}{m.group(3)}", code)


@lru_cache(maxsize=2048)
def translate(statement: str) -> tuple[str, str | None]:
    """(the PostgreSQL statement with ``__principal__`` for the key, the column it returns or None)."""
    # SQLite's JSON path on a text column; the value compared is a string in every use
    statement = re.sub(r"json_extract\((\w+), '\$\.(\w+)'\)", r"(\1::jsonb ->> '\2')", statement)
    parts = _code_parts(statement)
    for i in range(len(parts)):  # psycopg reads every % as a placeholder's, in a literal too
        parts[i] = _code(parts[i]) if i % 2 == 0 else parts[i].replace("%", "%%")
    sql = "'".join(parts).strip().rstrip(";")
    returning = None
    conflict = _INSERT.match(statement)
    if conflict is not None:
        verb, table = conflict.group(1).upper(), conflict.group(2).lower()
        sql = re.sub(r"^\s*INSERT\s+OR\s+\w+\s+INTO", "INSERT INTO", sql, flags=re.IGNORECASE)
        if verb == "IGNORE":
            sql += " ON CONFLICT DO NOTHING"
        else:
            sql += _upsert(statement, table)
    sql = _qualify_updates(statement, sql)
    deleted = _DELETE.match(statement)
    if deleted is not None and deleted.group(1).lower() in _CASCADES:
        return _cascade(sql, deleted.group(1).lower()), COUNTED
    plain = _INTO.match(statement)
    if plain is not None and plain.group(1).lower() in _NUMBERED and " RETURNING " not in sql.upper():
        returning = _NUMBERED[plain.group(1).lower()]
        sql += f" RETURNING {returning}"
    return sql, returning


@lru_cache(maxsize=256)
def translate_shared(statement: str) -> str:
    """A statement on a table every principal and replica shares (tokens, leases, switches, the LLM
    ledger, inspector sessions): the same rewriting, without a principal's partition or key."""
    parts = _code_parts(statement)
    for i in range(len(parts)):
        parts[i] = _code(parts[i], shared=True) if i % 2 == 0 else parts[i].replace("%", "%%")
    sql = "'".join(parts).strip().rstrip(";")
    conflict = _INSERT.match(statement)
    if conflict is not None:
        if conflict.group(1).upper() != "IGNORE":
            raise StorageError("INSERT OR REPLACE into a shared table has no translation: write the upsert")
        sql = re.sub(r"^\s*INSERT\s+OR\s+IGNORE\s+INTO", "INSERT INTO", sql, flags=re.IGNORECASE)
        sql += " ON CONFLICT DO NOTHING"
    return _qualify_updates(statement, sql, partition=False)


def _split_top(text: str) -> list[str]:
    """``text`` split at its commas outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return [*parts, text[start:]]


def _qualify_updates(statement: str, sql: str, *, partition: bool = True) -> str:
    """In an upsert's ``DO UPDATE SET``, the existing row's columns named with their table:
    PostgreSQL finds ``SET n = n + 1`` ambiguous (the row, or EXCLUDED's), SQLite reads the row."""
    head, found, tail = sql.partition(" DO UPDATE SET ")
    into = _INTO.match(statement) or _INSERT.match(statement)
    columns = re.search(r"INTO\s+\w+\s*\(([^)]*)\)", statement, flags=re.IGNORECASE)
    if not found or into is None or columns is None:
        return sql
    table = into.group(into.lastindex or 1).lower() + ("_" + _SUFFIX if partition else "")
    names = [c.strip() for c in columns.group(1).split(",")]
    bare = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, names)) + r")\b(?!\s*\()")
    assignments = []
    for assignment in _split_top(tail):
        target, _, value = assignment.partition("=")
        assignments.append(f"{target}={bare.sub(lambda m: f'{table}.{m.group(1)}', value)}")
    return head + found + ",".join(assignments)


def _cascade(sql: str, table: str) -> str:
    """A DELETE from a parent table as one statement that also deletes its children's rows, as
    SQLite's foreign keys do (the PostgreSQL schema has none, ADR 19), and counts the parent's."""
    key, children = _CASCADES[table]
    steps = [f"gone AS ({sql} RETURNING {key})"]
    steps += [
        f"c{i} AS (DELETE FROM {child}_{_SUFFIX} WHERE {column} IN (SELECT {key} FROM gone))"
        for i, (child, column) in enumerate(children)
    ]
    return "WITH " + ", ".join(steps) + " SELECT count(*) FROM gone"


def _upsert(statement: str, table: str) -> str:
    key = _KEYS.get(table)
    columns = re.search(r"INTO\s+\w+\s*\(([^)]*)\)", statement, flags=re.IGNORECASE)
    if key is None or columns is None:
        raise StorageError(f"INSERT OR REPLACE into {table!r} has no known key for PostgreSQL")
    keys = {k.strip() for k in key.split(",")}
    updates = [c.strip() for c in columns.group(1).split(",") if c.strip() not in keys]
    sets = ", ".join(f"{c} = EXCLUDED.{c}" for c in updates)
    return f" ON CONFLICT (principal, {key}) DO " + (f"UPDATE SET {sets}" if sets else "NOTHING")


def _params(params: Iterable[Any]) -> list[Any]:
    return [int(p) if isinstance(p, bool) else p for p in params]  # 0/1 columns, as in SQLite


_VECTOR_WRITE = re.compile(r"\b(INTO|UPDATE)\s+vectors\b", re.IGNORECASE)


def _vector_params(conn: psycopg.AsyncConnection, statement: str, values: list[Any]) -> list[Any]:
    """On a connection of the pgvector layout (vector_layout.py), the bytes a statement writes
    into ``vectors`` go as ``vector`` values."""
    if getattr(conn, "vector_oid", None) is None or not _VECTOR_WRITE.search(statement):
        return values
    return [Vec32(v) if isinstance(v, bytes) else v for v in values]


class PgCursor:
    """The part of an aiosqlite cursor the storage functions read."""

    def __init__(self, rows: list[tuple[Any, ...]], rowcount: int, lastrowid: int | None) -> None:
        self._rows = rows
        self.rowcount = rowcount
        self.lastrowid = lastrowid

    async def fetchall(self) -> list[tuple[Any, ...]]:
        return self._rows

    async def fetchone(self) -> tuple[Any, ...] | None:
        return self._rows[0] if self._rows else None


class Reads:
    """What one transaction has read, until it writes: the same statement with the same values is
    answered from here (a call's repeated freshness check, id lookups, keyword search)."""

    def __init__(self) -> None:
        self._rows: dict[Hashable, list[tuple[Any, ...]]] = {}

    def get(self, statement: Hashable, params: Sequence[Any] = ()) -> list[tuple[Any, ...]] | None:
        rows = self._rows.get((statement, tuple(_params(params))))
        return None if rows is None else list(rows)

    def keep(self, statement: Hashable, params: Sequence[Any], rows: list[tuple[Any, ...]]) -> None:
        self._rows[(statement, tuple(_params(params)))] = list(rows)

    def forget(self) -> None:
        self._rows.clear()


def _reads_only(statement: str) -> bool:
    return statement.lstrip()[:6].upper() == "SELECT"


class PgConn:
    """An aiosqlite-shaped connection over one psycopg connection, inside a transaction the caller
    opened and bound to the principal ``key`` (``migrations.as_principal``); what the transaction
    read is kept in ``reads`` until it writes."""

    def __init__(self, conn: psycopg.AsyncConnection, key: str, reads: Reads | None = None) -> None:
        self.conn = conn
        self.key = key
        self.reads = reads if reads is not None else Reads()

    def _sql(self, statement: str) -> tuple[str, str | None]:
        sql, returning = translate(statement)
        return sql.replace(_SUFFIX, self.key), returning

    def fragment(self, condition: str, params: Sequence[Any]) -> tuple[str, dict[str, Any]]:
        """A condition written for SQLite (``rows.visible_clause``) as PostgreSQL text with named
        parameters, for a statement composed elsewhere (the keyword search's)."""
        parts = _code_parts(condition)
        for i in range(len(parts)):  # placeholders become \0 for a moment, told from a literal "%%s"
            parts[i] = _code(parts[i]).replace("%s", "\0") if i % 2 == 0 else parts[i].replace("%", "%%")
        pieces = "'".join(parts).replace(_SUFFIX, self.key).split("\0")
        values = _params(params)
        if len(pieces) != len(values) + 1:
            raise StorageError("a condition's placeholders and parameters do not match")
        named = {f"v{i}": value for i, value in enumerate(values)}
        return "".join(p + (f"%(v{i})s" if i < len(values) else "") for i, p in enumerate(pieces)), named

    async def execute(self, statement: str, params: Sequence[Any] = ()) -> PgCursor:
        if "memories_fts" in statement:
            self.reads.forget()
            return await self._keyword(statement, params)
        values = _params(params)
        reading = _reads_only(statement)
        if reading and (kept := self.reads.get(statement, values)) is not None:
            return PgCursor(kept, len(kept), None)
        if not reading:
            self.reads.forget()
        sql, returning = self._sql(statement)
        cur = await self.conn.execute(sql, _vector_params(self.conn, statement, values))
        rows = await cur.fetchall() if cur.description else []
        if reading:
            self.reads.keep(statement, values, rows)
        if returning == COUNTED:
            return PgCursor([], int(rows[0][0]), None)
        lastrowid = int(rows[-1][0]) if returning and rows else None
        return PgCursor(rows if not returning else [], cur.rowcount, lastrowid)

    async def execute_fetchall(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return await (await self.execute(statement, params)).fetchall()

    async def read_together(self, reads: Sequence[tuple[str, Sequence[Any]]]) -> list[list[tuple[Any, ...]]]:
        """Each read's rows (reads as the storage modules write them), those the transaction has not
        read yet sent in one message: one round trip (``rows.read_together``)."""
        answers = [self.reads.get(statement, params) for statement, params in reads]
        wanted = [i for i, kept in enumerate(answers) if kept is None]
        if any(not _reads_only(reads[i][0]) for i in wanted):
            raise StorageError("only reads are sent together")
        sent = [rendered(self, self.conn, *reads[i]) for i in wanted]
        for i, rows in zip(wanted, await exchange(self.conn, sent), strict=True):
            self.reads.keep(*reads[i], rows)
            answers[i] = rows
        return [list(rows or []) for rows in answers]

    async def executemany(self, statement: str, rows: Iterable[Sequence[Any]]) -> None:
        self.reads.forget()
        if " ".join(statement.split()) == "INSERT INTO memories_fts(rowid, body) VALUES (?, ?)":
            await keyword.index_segmented(self.conn, self.key, {int(n): str(body) for n, body in rows})
            return
        if "memories_fts" in statement:
            for row in rows:
                await self._keyword(statement, row)
            return
        sql, _ = self._sql(statement)
        async with self.conn.cursor() as cur:
            await cur.executemany(sql, [_vector_params(self.conn, statement, _params(r)) for r in rows])

    async def _keyword(self, statement: str, params: Sequence[Any]) -> PgCursor:
        """SQLite's FTS5 statements, as the keyword index answers them."""
        flat = " ".join(statement.split())
        if flat == "INSERT INTO memories_fts(rowid, body) VALUES (?, ?)":
            n, body = params
            await keyword.index_segmented(self.conn, self.key, {int(n): str(body)})
            return PgCursor([], 1, None)
        if (
            flat.startswith("DELETE FROM memories_fts WHERE rowid IN (")
            or flat == "DELETE FROM memories_fts WHERE rowid = ?"
        ):
            await keyword.unindex(self.conn, self.key, [int(p) for p in params])
            return PgCursor([], len(params), None)
        if flat == "DELETE FROM memories_fts":
            await keyword.unindex_all(self.conn, self.key)
            return PgCursor([], 0, None)
        if flat == "SELECT COUNT(*) FROM memories_fts WHERE memories_fts MATCH ?":
            (match,) = params
            count = await keyword.count_matching(self.conn, self.key, _match_terms(str(match)))
            return PgCursor([(count,)], 1, None)
        raise StorageError(f"the PostgreSQL backend has no translation of this keyword-index statement: {flat}")


def rendered(pg: PgConn, conn: psycopg.AsyncConnection, statement: str, params: Sequence[Any]) -> str:
    """A read as the storage modules write it, as one PostgreSQL statement with its values inline
    (to send with others in one message)."""
    sql, _ = pg._sql(statement)
    return inline(conn, sql, _params(params))


def _match_terms(match: str) -> list[str]:
    """The terms of an FTS5 query as ``rows.fts_match`` writes it: quoted phrases joined by OR."""
    return [
        part[1:-1].replace('""', '"') for part in match.split(" OR ") if len(part) >= 2 and part[0] == part[-1] == '"'
    ]
