"""Many principals on PostgreSQL in minutes: a few written through the store, the rest copied in SQL.

A million memories written through ``PostgresStore.apply`` take about an hour here (a dozen
statements and round trips per memory); through SQLite files and ``migrate`` about two. For the
replica benchmark the words matter less than the shape, so a few *template* principals are written
the real way (``fill_store.fill_into``: rows, vectors, keyword postings, entities, occurrences,
events and the change log, as ``remember`` makes them), and every other principal is a copy of
one template made inside the database: its partitions opened by the schema's own
``mcp_open_principal``, then one ``INSERT ... SELECT`` per table with the principal's key, fresh row
numbers from the schema's sequences, and fresh ids. A copy holds its template's texts and vectors
exactly, under its own key, so it is what the store would hold had the same memories been
remembered by that principal. The copy runs as the cluster's superuser (it writes many principals'
partitions in one session, which row-level security would refuse to the server's role); the
server then reads it as the plain role, through the policies, like any other data.
"""

from __future__ import annotations

from collections.abc import Callable

import psycopg
from psycopg import sql

# The tables a template fill writes (the others must be empty in it: the copy refuses otherwise).
FILLED = ("meta", "memories", "memory_tags", "occurrences", "vectors", "second_vectors", "postings",
          "memory_entities", "changes", "memory_events")  # fmt: skip
SEQUENCED = {"changes": ("seq", "changes_seq_seq"), "memory_events": ("n", "memory_events_n_seq")}

# A ULID keeps its first 10 characters (the millisecond); the other 16 become the copy's number
# and the row's, in hexadecimal (a subset of Crockford's base32), so ids stay valid, sortable and
# unique within the principal. Occurrences count from 2**32 so they never meet a memory's id.
_NEW_ID = "left({col}, 10) || upper(lpad(to_hex(%(copy)s::bigint), 6, '0') || lpad(to_hex({row}::bigint), 10, '0'))"


# The template's row numbers and ids against the copy's, numbered in the template's order of writing.
_MAP = sql.SQL(
    "CREATE TEMP TABLE clone_map ON COMMIT DROP AS "
    "SELECT old_n, nextval('memories_n_seq') AS new_n, old_id, " + _NEW_ID.format(col="old_id", row="r") + " AS new_id "
    "FROM (SELECT n AS old_n, id AS old_id, row_number() OVER (ORDER BY n) AS r "
    "FROM {} ORDER BY n) s"
)


async def _columns(conn: psycopg.AsyncConnection, table: str) -> list[str]:
    rows = await (
        await conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' AND table_name = %s "
            "ORDER BY ordinal_position",
            (table,),
        )
    ).fetchall()
    return [str(r[0]) for r in rows]


async def _check_template(conn: psycopg.AsyncConnection, template: str) -> None:
    """Refuse a template holding rows in a table the copy does not translate."""
    row = await (await conn.execute("SELECT mcp_principal_tables()")).fetchone()
    tables: list[str] = list(row[0]) if row else []
    for table in tables:
        if table in FILLED:
            continue
        query = sql.SQL("SELECT EXISTS (SELECT 1 FROM {})").format(_part(table, template))
        found = await (await conn.execute(query)).fetchone()
        if found and found[0]:
            raise RuntimeError(f"the template holds rows in {table}, which the copy does not translate")


def _part(table: str, key: str) -> sql.Identifier:
    """A principal's partition, named as the store names it (ADR 20): a statement on the parent,
    planned once and run for many principals, would lock every partition of every principal."""
    return sql.Identifier(f"{table}_{key}")


def _select(table: str, columns: list[str], template: str, key: str) -> sql.Composed:
    """The copy of one table's template rows: the key, the new row numbers and ids, the rest as is."""
    picked: list[sql.Composable] = []
    for col in columns:
        if col == "principal":
            picked.append(sql.SQL("%(key)s"))
        elif col == "memory_n" or (table == "memories" and col == "n"):
            picked.append(sql.SQL("m.new_n"))
        elif (table, col) in (("memories", "id"), ("memory_events", "memory_id")):
            picked.append(sql.SQL("m.new_id"))
        elif table == "occurrences" and col == "id":
            picked.append(sql.SQL(_NEW_ID.format(col="t.id", row="4294967296 + row_number() OVER (ORDER BY t.id)")))
        elif table in SEQUENCED and col == SEQUENCED[table][0]:
            picked.append(sql.SQL("nextval({})").format(sql.Literal(SEQUENCED[table][1])))
        else:
            picked.append(sql.SQL("t.{}").format(sql.Identifier(col)))
    join = "memory_id = m.old_id" if table == "memory_events" else "memory_n = m.old_n"
    if table == "memories":
        join = "n = m.old_n"
    source: sql.Composable = sql.SQL("FROM {} t JOIN clone_map m ON t.{} ORDER BY m.new_n").format(
        _part(table, template), sql.SQL(join)
    )
    if table == "meta":
        source = sql.SQL("FROM {} t").format(_part(table, template))
    return sql.SQL("INSERT INTO {} ({}) SELECT {} {}").format(
        _part(table, key), sql.SQL(", ").join(map(sql.Identifier, columns)), sql.SQL(", ").join(picked), source
    )


async def _check_counts(conn: psycopg.AsyncConnection, template: str, key: str) -> None:
    """Every table holds as many rows of the copy as of its template (else the copy is rolled back)."""
    for table in FILLED:
        query = sql.SQL("SELECT (SELECT count(*) FROM {}), (SELECT count(*) FROM {})").format(
            _part(table, template), _part(table, key)
        )
        row = await (await conn.execute(query)).fetchone()
        if row is None or row[0] != row[1]:
            raise RuntimeError(f"{table}: the copy holds {row and row[1]} rows, its template {row and row[0]}")


async def copy_principals(
    dsn: str, template: str, targets: list[tuple[str, str, int]], progress: Callable[[int], None] | None = None
) -> None:
    """Copy the principal keyed ``template`` into each (key, name, copy number) of ``targets``, one
    transaction per copy. ``dsn`` names a superuser of the cluster."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await _check_template(conn, template)
        columns = {table: await _columns(conn, table) for table in FILLED}
        for done, (key, name, number) in enumerate(targets, 1):
            async with conn.transaction():
                await conn.execute("SELECT set_config('mcp.principal', %s, true)", (key,))
                await conn.execute("SELECT mcp_open_principal(%s, %s)", (key, name))
                await conn.execute(_MAP.format(_part("memories", template)), {"copy": number})
                for table in FILLED:
                    await conn.execute(_select(table, columns[table], template, key), {"key": key, "copy": number})
                await _check_counts(conn, template, key)
            if progress is not None:
                progress(done)
