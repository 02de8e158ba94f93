"""`mcp-memory database migrate | status`, and what `doctor` says of a PostgreSQL backend (ADR 19).

`migrate` runs as the schema's owner (the DSN in ``storage.postgres.owner_dsn_env``), grants the
server's role (the user of ``storage.postgres.dsn``) what it may do and moves the vectors into the
layout asked (``--vectors``; by default pgvector when the extension is installed, ADR 25);
`status` connects as the server's role and reports what `doctor` reports. Neither prints a password.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from mcp_memory.config import PostgresSettings, Settings
from mcp_memory.core.errors import InvalidInputError


async def run(settings: Settings, action: str, vectors: str | None = None) -> int:
    if settings.storage.backend != "postgres" and settings.storage.postgres.dsn is None:
        raise InvalidInputError(
            "storage.postgres.dsn",
            "is not set: the database commands work on the PostgreSQL backend "
            "(MCP_MEMORY_STORAGE__POSTGRES__DSN=postgresql://role@host:5432/db)",
        )
    if action == "migrate":
        from mcp_memory.storage.pg import database

        before, after, layout = await database.migrate(settings.storage.postgres, vectors)
        said = "already at" if before == after else f"migrated from version {before} to"
        sys.stdout.write(f"database schema: {said} version {after}\n")
        where = "in PostgreSQL (pgvector)" if layout == "pgvector" else "in each replica's process"
        sys.stdout.write(f"vectors: {layout} layout, searched {where}\n")
        return 0
    return 0 if await doctor(settings.storage.postgres, _out) else 1


def _out(line: str) -> None:
    sys.stdout.write(line + "\n")


async def doctor(settings: PostgresSettings, say: Callable[[str], None]) -> bool:
    """The database's findings, one line each; whether all of them are fine."""
    from mcp_memory.storage.pg import database

    ok = True
    for finding in await database.check(settings):
        ok = ok and finding.ok
        say(f"{finding.what}: {finding.said}" if finding.ok else f"{finding.what}: PROBLEM: {finding.said}")
    return ok
