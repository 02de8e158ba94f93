"""Where a PostgreSQL database keeps the memories' vectors (ADR 25): the two layouts, how a
connection reads and writes each, and how `mcp-memory database migrate` moves between them.

- ``in-process``: ``vectors.vec`` is ``bytea`` (float32, little-endian, as in SQLite); each replica
  searches a matrix it reads from there (store.PgIndexSearch). What a database without the
  ``vector`` extension (pgvector) has.
- ``pgvector``: ``vectors.vec`` is pgvector's ``vector`` (float32: the same numbers, bit for bit)
  and the search runs in PostgreSQL (pg/vector_search.py); a principal's partition past
  ``HNSW_ROWS`` rows gets an HNSW index over the vectors in half precision, one graph per script.

The storage code is the same for both (ADR 20): on a ``pgvector`` connection a ``vector`` reads back
as the bytes SQLite holds (a loader), and the bytes a statement writes into ``vectors`` are sent as
a ``vector`` (``PgConn`` wraps them as :class:`Vec32`). The layout is read once, as the server opens
the pool; `database migrate` settles it (pgvector when the extension is installed in the database,
unless told ``--vectors in-process``).
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from psycopg.adapt import Dumper, Loader
from psycopg.pq import Format

from mcp_memory.core.errors import StorageError
from mcp_memory.core.models import Criteria, Scope

PGVECTOR, IN_PROCESS = "pgvector", "in-process"
LAYOUTS = (PGVECTOR, IN_PROCESS)
HNSW_ROWS = 7_500  # a partition past this many vectors is searched through its HNSW graphs (ADR 25)
_COPY_BATCH = 2_000


class Vec32(bytes):
    """A float32 vector's bytes (as SQLite stores them), to be written into a ``vector`` column."""


class _VectorLoader(Loader):
    """pgvector's text form ('[0.1,0.2]') as the float32 bytes the storage code reads."""

    def load(self, data: Any) -> bytes:
        text = bytes(data).decode()
        return np.fromstring(text[1:-1], dtype=np.float32, sep=",").astype("<f4").tobytes()


class _VectorDumper(Dumper):
    """Float32 bytes as pgvector's binary form: the dimension, a reserved word, big-endian floats."""

    format = Format.BINARY

    def dump(self, obj: Any) -> bytes:
        values = np.frombuffer(bytes(obj), dtype="<f4")
        return struct.pack(">HH", len(values), 0) + values.astype(">f4").tobytes()


async def vector_type(conn: psycopg.AsyncConnection) -> int | None:
    """The ``vector`` type's oid when ``vectors.vec`` is one (the pgvector layout), else None."""
    row = await (
        await conn.execute(
            "SELECT t.oid, t.typname FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
            "WHERE a.attrelid = to_regclass('public.vectors') AND a.attname = 'vec'"
        )
    ).fetchone()
    return int(row[0]) if row is not None and row[1] == "vector" else None


def adapt(conn: psycopg.AsyncConnection, oid: int) -> None:
    """Read ``vector`` values as float32 bytes, write :class:`Vec32` as ``vector``, on ``conn``."""
    dumper = type("VectorDumper", (_VectorDumper,), {"oid": oid})
    conn.adapters.register_dumper(Vec32, dumper)
    conn.adapters.register_loader(oid, _VectorLoader)


async def prepare(conn: psycopg.AsyncConnection) -> int | None:
    """A new connection made ready for the database's layout: on a pgvector one, pgvector's values
    read and written as the storage code's bytes, and the type remembered on the connection
    (``vector_oid``, which ``PgConn`` reads). The type's oid, or None."""
    oid = await vector_type(conn)
    setattr(conn, "vector_oid", oid)  # noqa: B010 (an attribute psycopg's class does not declare)
    if oid is not None:
        adapt(conn, oid)
    return oid


async def extension(conn: psycopg.AsyncConnection) -> tuple[bool, bool]:
    """(the ``vector`` extension is installed in this database, it could be: the server has it)."""
    row = await (
        await conn.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector'), "
            "EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')"
        )
    ).fetchone()
    return (bool(row[0]), bool(row[1])) if row else (False, False)


async def settle(conn: psycopg.AsyncConnection, server_role: str, wanted: str | None) -> str:
    """As the owner: the vectors' layout made ``wanted`` (None: pgvector when the extension is
    installed), every principal's vectors moved over in one transaction; the layout reached."""
    installed, available = await extension(conn)
    current = PGVECTOR if await vector_type(conn) is not None else IN_PROCESS
    target = wanted or (PGVECTOR if installed else IN_PROCESS)
    if target == PGVECTOR and not installed:
        how = (
            "a superuser must run CREATE EXTENSION vector in this database first"
            if available
            else "this PostgreSQL server has no pgvector: install it (https://github.com/pgvector/pgvector)"
        )
        raise StorageError(f"the pgvector layout needs the vector extension: {how}")
    if target == current:
        if target == PGVECTOR:
            await _functions(conn, server_role)
        return current
    async with conn.transaction():
        await conn.execute("LOCK TABLE vectors IN ACCESS EXCLUSIVE MODE")
        if target == PGVECTOR:
            await _convert(conn, "vector", _to_vector)
            await _functions(conn, server_role)
        else:
            await conn.execute("DROP FUNCTION IF EXISTS mcp_vector_index(text, int)")
            await _convert(conn, "bytea", _to_bytes)
    return target


def _to_vector(raw: bytes) -> str:
    return "[" + ",".join(map(repr, np.frombuffer(raw, dtype="<f4").tolist())) + "]"


def _to_bytes(text: str) -> bytes:
    return np.fromstring(text[1:-1], dtype=np.float32, sep=",").astype("<f4").tobytes()


async def _convert(conn: psycopg.AsyncConnection, kind: str, convert: Any) -> None:
    """``vectors.vec`` as ``kind``: a new column filled from the old one, partition by partition,
    then put in its place (the parent's type follows, and so do partitions made later)."""
    await conn.execute(sql.SQL("ALTER TABLE vectors ADD COLUMN vec_new {}").format(sql.SQL(kind)))
    cast = sql.SQL("::vector" if kind == "vector" else "")
    parts = await (
        await conn.execute("SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = 'vectors'::regclass")
    ).fetchall()
    for (part,) in parts:
        name = sql.Identifier(part)
        # row-level security binds the owner too (forced): each partition is read as its principal's
        await conn.execute("SELECT set_config('mcp.principal', %s, true)", (part.removeprefix("vectors_"),))
        old = sql.SQL("vec::text" if kind == "bytea" else "vec")
        rows = await (await conn.execute(sql.SQL("SELECT memory_n, {} FROM {}").format(old, name))).fetchall()
        update = sql.SQL("UPDATE {} SET vec_new = %s{} WHERE memory_n = %s").format(name, cast)
        async with conn.cursor() as cur:
            for start in range(0, len(rows), _COPY_BATCH):
                chunk = rows[start : start + _COPY_BATCH]
                await cur.executemany(
                    update, [(convert(bytes(v) if kind == "vector" else str(v)), n) for n, v in chunk]
                )
    await conn.execute("ALTER TABLE vectors DROP COLUMN vec")
    await conn.execute("ALTER TABLE vectors RENAME COLUMN vec_new TO vec")
    await conn.execute("ALTER TABLE vectors ALTER COLUMN vec SET NOT NULL")


async def _functions(conn: psycopg.AsyncConnection, server_role: str) -> None:
    """The owner's function that gives a principal's partition its HNSW index (the server may not
    make one itself), granted to the server."""
    await conn.execute(sql.SQL(_INDEX_FUNCTION).format(server=sql.Identifier(server_role)))


# The index is over the vectors in half precision (half the size of float32, ADR 25), of one
# dimension (a reindex under another model writes vectors of another length beside them for a
# while), one graph per script (`vectors.cjk`, schema 5): recall probes each script apart, and a
# probe walks only its own script's graph. The search orders by the same expression, with the same
# script filter, then scores its candidates in float32. The CJK graph is made last: its name says
# the index is whole (index_name). A call while another transaction builds the partition's graphs
# returns at once, without them (the caller reads whether they are there).
_INDEX_FUNCTION = """
CREATE OR REPLACE FUNCTION mcp_vector_index(p text, dim int) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $$
DECLARE
    script text;
    graph text;
    predicate text;
    counted bigint;
    need bigint;
    given text := current_setting('maintenance_work_mem');
BEGIN
    PERFORM public.mcp_own_principal(p);
    IF dim IS NULL OR dim < 1 OR dim > 4000 THEN
        RAISE EXCEPTION 'a vector dimension is between 1 and 4000';
    END IF;
    -- one build of a partition at a time, whichever replica asks: another's is left to finish (its
    -- commit makes the index) instead of built again beside it, to fail on the name at the end
    IF NOT pg_try_advisory_xact_lock(hashtext('mcp_vector_index'), hashtext(p)) THEN
        RETURN;
    END IF;
    FOREACH script IN ARRAY ARRAY['latin', 'cjk'] LOOP
        graph := 'vectors_' || p || '_hnsw_' || dim || '_' || script;
        predicate := format('vector_dims(vec) = %s AND %s', dim, CASE script WHEN 'cjk' THEN 'cjk' ELSE 'NOT cjk' END);
        CONTINUE WHEN to_regclass(format('public.%I', graph)) IS NOT NULL;
        -- the graph built in memory, not spilled: about 1.5 kB a vector at 384 dimensions (pgvector
        -- said it no longer fit 64 MB after 43,000; building 60,000 took twice as long then); the
        -- server's own setting when larger, never more than 1 GB, and the caller's again afterwards
        EXECUTE format('SELECT count(*) FROM public.%I WHERE %s', 'vectors_' || p, predicate) INTO counted;
        need := least(counted * (2 * dim + 1024), pg_size_bytes('1GB'));
        IF need > pg_size_bytes(current_setting('maintenance_work_mem')) THEN
            PERFORM set_config('maintenance_work_mem', (need / 1024) || 'kB', true);
        END IF;
        EXECUTE format(
            'CREATE INDEX IF NOT EXISTS %I ON public.%I USING hnsw ((vec::halfvec(%s)) halfvec_ip_ops) WHERE %s',
            graph, 'vectors_' || p, dim, predicate);
    END LOOP;
    PERFORM set_config('maintenance_work_mem', given, true);
END $$;
REVOKE ALL ON FUNCTION mcp_vector_index(text, int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_vector_index(text, int) TO {server};
"""

SCRIPTS = ("latin", "cjk")  # the per-script graphs, by the suffix of their names


def index_name(key: str, dim: int, script: str = "cjk") -> str:
    """A script's HNSW index of the partition; the CJK one (made last) says both are there."""
    return f"vectors_{key}_hnsw_{dim}_{script}"


def visible_filter(scope: Scope, criteria: Criteria, now: float, allow: list[int] | None) -> sql.Composable:
    """What a search may return, as the in-process index's mask (vectors.VectorIndex._mask), read from
    the copy of its memory's figures each vector row ``v`` carries (schema 7: its namespace, ``live``
    and expiry, kept by triggers), so that no memory is read to filter a row."""
    ns = sql.Literal(scope.namespace)
    parts: list[sql.Composable]
    if criteria.namespace_only:
        parts = [sql.SQL("v.namespace IS NOT DISTINCT FROM {}").format(ns)]
    elif scope.namespace is None:
        parts = [sql.SQL("v.namespace IS NULL")]
    else:
        parts = [sql.SQL("(v.namespace IS NULL OR v.namespace = {})").format(ns)]
    if not (criteria.include_superseded or criteria.include_archived):
        parts.append(sql.SQL("v.live"))
    if not criteria.include_expired:
        parts.append(sql.SQL("(v.expires_at IS NULL OR v.expires_at > {})").format(sql.Literal(float(now))))
    if allow is not None:
        parts.append(sql.SQL("v.memory_n = ANY({}::bigint[])").format(sql.Literal(allow)))
    return sql.SQL("(") + sql.SQL(" AND ").join(parts) + sql.SQL(")")
