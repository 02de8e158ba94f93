"""The PostgreSQL database as the settings name it: connecting as the server's role or the schema
owner's, migrating, and what `doctor` checks (ADR 19).

The server's password comes from the variable ``password_env`` names and the owner's whole DSN from
``owner_dsn_env``; neither is ever in the config file, a log line or an error message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from mcp_memory.config import PostgresSettings
from mcp_memory.core.errors import InvalidInputError, StorageError
from mcp_memory.storage.pg import migrations, vector_layout

APPLICATION = "mcp-memory"


def server_role(settings: PostgresSettings) -> str:
    """The role the server connects as: the user its DSN names."""
    user = _parts(settings.dsn).get("user")
    if not user:
        raise InvalidInputError(
            "storage.postgres.dsn", "names no user: give the server's role (postgresql://mcp_server@host/db)"
        )
    return str(user)


def _parts(dsn: str | None) -> dict[str, object]:
    if not dsn:
        raise InvalidInputError("storage.postgres.dsn", "is not set: set it, or MCP_MEMORY_STORAGE__POSTGRES__DSN")
    try:
        return dict(conninfo_to_dict(dsn))
    except psycopg.ProgrammingError as exc:
        raise InvalidInputError("storage.postgres.dsn", f"is not a PostgreSQL connection string ({exc})") from exc


def server_parts(settings: PostgresSettings) -> dict[str, Any]:
    """The server role's connection parameters: the DSN's, its password, the statement timeout."""
    parts: dict[str, Any] = _parts(settings.dsn)
    password = settings.password
    if password is not None:
        parts["password"] = password.get_secret_value()
    parts.setdefault("application_name", APPLICATION)
    parts.setdefault("connect_timeout", 10)
    parts["options"] = f"-c statement_timeout={settings.statement_timeout_ms}"
    return parts


def where(parts: dict[str, Any]) -> str:
    """host:port/db of a connection, for a message (never the password)."""
    return f"{parts.get('host', 'localhost')}:{parts.get('port', 5432)}/{parts.get('dbname', '')}"


async def connect_server(settings: PostgresSettings, *, autocommit: bool = False) -> psycopg.AsyncConnection:
    """One connection as the server's role, with its statement timeout."""
    return await _connect(server_parts(settings), autocommit, "storage.postgres.dsn")


async def connect_owner(settings: PostgresSettings) -> psycopg.AsyncConnection:
    """One connection as the schema's owner, from the DSN in ``owner_dsn_env`` (migrations only)."""
    dsn = settings.owner_dsn
    if dsn is None:
        raise InvalidInputError(
            settings.owner_dsn_env,
            "is not set: put the schema owner's DSN (with its password) in it to migrate; the server's own "
            "role may not change the schema",
        )
    try:
        parts: dict[str, Any] = dict(conninfo_to_dict(dsn.get_secret_value()))
    except psycopg.ProgrammingError:  # its message quotes the string, which holds the password
        raise InvalidInputError(
            settings.owner_dsn_env,
            "is not a PostgreSQL connection string (postgresql://owner:password@host:5432/db); its value is not shown",
        ) from None
    parts.setdefault("application_name", APPLICATION)
    parts.setdefault("connect_timeout", 10)
    return await _connect(parts, True, settings.owner_dsn_env)


async def _connect(parts: dict[str, Any], autocommit: bool, named: str) -> psycopg.AsyncConnection:
    try:
        return await psycopg.AsyncConnection.connect(autocommit=autocommit, **parts)
    except psycopg.OperationalError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StorageError(f"cannot connect to PostgreSQL at {where(parts)} ({named}): {first}") from exc


async def migrate(settings: PostgresSettings, vectors: str | None = None) -> tuple[int, int, str]:
    """Bring the schema to this code's version as its owner, the vectors in the layout ``vectors``
    names (None: pgvector when the extension is installed): (version before, after, the layout)."""
    role = server_role(settings)
    async with await connect_owner(settings) as owner:
        before, _ = await migrations.schema_state(owner)
        try:
            after = await migrations.migrate(owner, role, vectors)
            layout = vector_layout.PGVECTOR if await vector_layout.vector_type(owner) else vector_layout.IN_PROCESS
            return before, after, layout
        except psycopg.Error as exc:  # each migration rolls back whole: nothing half-made stays
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise StorageError(
                f"the migration failed and was rolled back ({first}); the server role is {role!r} "
                "(the user of storage.postgres.dsn): it must exist before `database migrate`"
            ) from exc


@dataclass(frozen=True)
class Finding:
    what: str
    ok: bool
    said: str


async def check(settings: PostgresSettings) -> list[Finding]:
    """What `doctor` reports of the database: reachable, the role, the schema and its tables."""
    try:
        conn = await connect_server(settings, autocommit=True)
    except (StorageError, InvalidInputError) as exc:
        return [Finding("database", False, str(exc))]
    async with conn:
        version = conn.info.server_version
        found = [
            Finding("database", True, f"PostgreSQL {version // 10000}.{version % 10000} as {server_role(settings)}")
        ]
        if version < 150000:
            found.append(Finding("database version", False, "PostgreSQL 15 or later is needed"))
        found.append(await _collation(conn))
        problems = await migrations.role_problems(conn)
        found.append(Finding("database role", not problems, "; ".join(problems) or "bound by row-level security"))
        found.append(await _schema(conn))
        found.append(await _vectors(conn))
    return found


async def _vectors(conn: psycopg.AsyncConnection) -> Finding:
    """Where recall's vector search runs (ADR 25), chosen by the server as it starts."""
    installed, available = await vector_layout.extension(conn)
    if await vector_layout.vector_type(conn) is not None:
        return Finding("vector engine", True, "pgvector: the vectors are searched in PostgreSQL")
    if installed:
        return Finding(
            "vector engine",
            True,
            "in-process (each replica holds the principals' vectors it serves): the vector extension is installed, "
            "`mcp-memory database migrate` moves the vectors into it",
        )
    said = "a superuser may CREATE EXTENSION vector, then" if available else "no pgvector on this server; with it,"
    return Finding("vector engine", True, f"in-process (each replica holds the vectors it serves): {said} "
                   "`mcp-memory database migrate` moves the vectors into PostgreSQL")  # fmt: skip


async def _collation(conn: psycopg.AsyncConnection) -> Finding:
    """Text is ordered as SQLite orders it (byte order) only under the C collation (ADR 20)."""
    row = await (await conn.execute("SELECT datcollate FROM pg_database WHERE datname = current_database()")).fetchone()
    collation = str(row[0]) if row else "?"
    if collation.split(".")[0] in ("C", "POSIX"):
        return Finding("database collation", True, f"{collation} (byte order, as SQLite)")
    return Finding(
        "database collation",
        False,
        f"{collation}: texts sort differently from SQLite (pages by id, ties); create the database with "
        "LC_COLLATE 'C' (CREATE DATABASE ... TEMPLATE template0 LC_COLLATE 'C')",
    )


async def _schema(conn: psycopg.AsyncConnection) -> Finding:
    version, min_code = await migrations.schema_state(conn)
    if version == 0:
        return Finding("database schema", False, "empty: run `mcp-memory database migrate` with the owner's DSN")
    try:
        migrations.check_code(version, min_code)
    except StorageError as exc:
        return Finding("database schema", False, str(exc))
    if version < migrations.SCHEMA_VERSION:
        return Finding(
            "database schema",
            False,
            f"version {version}, this code needs {migrations.SCHEMA_VERSION}: run `mcp-memory database migrate`",
        )
    missing = await migrations.missing_tables(conn)
    if missing:
        return Finding("database schema", False, f"version {version} but tables are missing: {', '.join(missing)}")
    return Finding("database schema", True, f"version {version}, every table present")


async def raise_sequences(owner: psycopg.AsyncConnection, maxima: dict[str, tuple[str, int]]) -> None:
    """Each numbered table's sequence past the highest number a copy brings (table -> (column, number)):
    ``migrate`` keeps a principal's numbers, and the next write must not hand one out again."""
    for table, (column, top) in maxima.items():
        name = f"{table}_{column}_seq"
        await owner.execute(
            sql.SQL("SELECT setval({}::regclass, GREATEST(%s, (SELECT last_value FROM {})))").format(
                sql.Literal(name), sql.Identifier(name)
            ),
            (top,),
        )
