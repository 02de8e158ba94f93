"""Numbered migrations of the PostgreSQL schema, run by the owner role (ADR 19).

Each file in ``migrations/`` runs in one transaction with the row that records it, so a failed
migration leaves the schema as it was. A database written by a newer mcp-memory is refused, as a
SQLite file is (``schema_version`` holds the version and the oldest code that may use it).
"""

from __future__ import annotations

import re
from importlib import resources

import psycopg
from psycopg import sql

from mcp_memory import __version__
from mcp_memory.core.errors import SchemaVersionError, StorageError
from mcp_memory.storage.pg import keyword, vector_layout

SCHEMA_VERSION = 7
MIN_CODE_SCHEMA = (
    4  # the oldest code that may open a database of this version: schema 3 code writes postings without doc_len
)
PGVECTOR_MIN_CODE = 3  # ... and of one whose vectors are in pgvector: older code would write them as bytes
_ROLE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


async def schema_state(conn: psycopg.AsyncConnection) -> tuple[int, int]:
    """(version, the oldest code schema that may use it); (0, 0) for an empty database."""
    present = await (await conn.execute("SELECT to_regclass('schema_version') IS NOT NULL")).fetchone()
    if not present or not present[0]:
        return 0, 0
    row = await (await conn.execute("SELECT version, min_code FROM schema_version")).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def check_code(version: int, min_code: int) -> None:
    if min_code > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"the database's schema is version {version}, written by a newer mcp-memory that needs code of "
            f"schema {min_code} or later (this is {__version__}, schema {SCHEMA_VERSION}): upgrade mcp-memory"
        )


async def migrate(conn: psycopg.AsyncConnection, server_role: str, vectors: str | None = None) -> int:
    """Apply every pending migration as the owner; ``server_role`` gets what the server may do; then
    the vectors' layout settled (``vectors``: "pgvector" or "in-process"; None: pgvector when the
    extension is installed, vector_layout.settle). Returns the version reached."""
    if not _ROLE.match(server_role):
        raise StorageError(f"server role {server_role!r} is not a plain PostgreSQL role name")
    version, min_code = await schema_state(conn)
    check_code(version, min_code)
    for number in range(version + 1, SCHEMA_VERSION + 1):
        script = resources.files("mcp_memory.storage.pg").joinpath(f"migrations/{number:03d}.sql").read_text()
        async with conn.transaction():
            await conn.execute(sql.SQL(script.replace("{server}", server_role)))
            if number == 2:
                await _resegment(conn)
            if number == 4:
                await _posting_lengths(conn)
            await conn.execute(
                "UPDATE schema_version SET version = %s, min_code = %s, written_by = %s",
                (number, MIN_CODE_SCHEMA, f"mcp-memory {__version__}"),
            )
            await conn.execute(sql.SQL("GRANT SELECT ON schema_version TO {}").format(sql.Identifier(server_role)))
    layout = await vector_layout.settle(conn, server_role, vectors)
    least = max(MIN_CODE_SCHEMA, PGVECTOR_MIN_CODE if layout == vector_layout.PGVECTOR else 0)
    await conn.execute("UPDATE schema_version SET min_code = %s", (least,))
    return SCHEMA_VERSION


async def _resegment(conn: psycopg.AsyncConnection) -> None:
    """Schema 2: every principal's keyword index written again from its memories' text, now with the
    stems of their English words (each principal's rows bound to it, as row-level security asks)."""
    for (key,) in await (await conn.execute("SELECT principal FROM principals")).fetchall():
        await as_principal(conn, str(key))
        rows = await (
            await conn.execute(sql.SQL("SELECT n, content FROM {}").format(sql.Identifier(f"memories_{key}")))
        ).fetchall()
        await keyword.unindex_all(conn, str(key))
        # the postings of schema 2, without their length: schema 4 adds the column and fills it
        await keyword.index(conn, str(key), {int(n): str(content) for n, content in rows}, with_lengths=False)


async def _posting_lengths(conn: psycopg.AsyncConnection) -> None:
    """Schema 4: each principal's postings given their memory's token count (memories.doc_len)."""
    for (key,) in await (await conn.execute("SELECT principal FROM principals")).fetchall():
        await as_principal(conn, str(key))
        await conn.execute(
            sql.SQL("UPDATE {} AS p SET doc_len = m.doc_len FROM {} AS m WHERE m.n = p.memory_n").format(
                sql.Identifier(f"postings_{key}"), sql.Identifier(f"memories_{key}")
            )
        )


async def role_problems(conn: psycopg.AsyncConnection) -> list[str]:
    """Why the connected role must not serve: row-level security does not hold for it."""
    row = await (
        await conn.execute("SELECT current_user, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user")
    ).fetchone()
    if row is None:
        return ["the connected role is not in pg_roles"]
    user, superuser, bypass = row
    problems = []
    if superuser:
        problems.append(
            f"role {user!r} is a superuser, which row-level security does not bind: connect as a plain role"
        )
    if bypass:
        problems.append(f"role {user!r} has BYPASSRLS, which skips row-level security: ALTER ROLE {user} NOBYPASSRLS")
    return problems


async def as_principal(conn: psycopg.AsyncConnection, key: str) -> None:
    """Bind the open transaction to one principal: the policies and partition functions read it."""
    await conn.execute("SELECT set_config('mcp.principal', %s, true)", (key,))


SHARED_TABLES = (
    "deployment",
    "principals",
    "tokens",
    "switches",
    "llm_usage",
    "leases",
    "passes",
    "ui_sessions",
    "forget_codes",
)


async def missing_tables(conn: psycopg.AsyncConnection) -> list[str]:
    """The schema's tables the connected role cannot find (a half-restored or foreign database)."""
    row = await (await conn.execute("SELECT to_regproc('mcp_principal_tables') IS NOT NULL")).fetchone()
    per_principal: list[str] = []
    if row and row[0]:
        per_principal = list((await (await conn.execute("SELECT mcp_principal_tables()")).fetchone() or [[]])[0])
    wanted = [*per_principal, *SHARED_TABLES] if per_principal else ["mcp_principal_tables()", *SHARED_TABLES]
    rows = await (
        await conn.execute(
            "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relname = ANY(%s)",
            (list(wanted),),
        )
    ).fetchall()
    present = {r[0] for r in rows}
    return [t for t in wanted if t not in present]
