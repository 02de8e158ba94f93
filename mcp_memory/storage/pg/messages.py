"""Several reads in one message: one round trip where each read alone would cost one (issue 35).

A statement's values are put inline (psycopg quotes them on the client, as its ``ClientCursor``
does), and the statements, joined by ``;``, go to the server as one query of the simple protocol,
which it answers with every statement's rows in one go. Inside an open transaction they read what
it reads; outside one they run as one implicit transaction. Only reads are sent so: a value inline
is typed by the server as a literal (``1.5`` is numeric), which a comparison with a column
converts, but a value returned as itself would come back as another type.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
from psycopg import sql


def inline(
    conn: psycopg.AsyncConnection, query: sql.Composable | str, params: Sequence[Any] | Mapping[str, Any]
) -> str:
    """``query`` with ``params`` written into it, as the server will read it."""
    return psycopg.AsyncClientCursor(conn).mogrify(query, params)  # type: ignore[arg-type]


async def exchange(conn: psycopg.AsyncConnection, statements: Sequence[str]) -> list[list[tuple[Any, ...]]]:
    """Each statement's rows (statements with their values inline), sent in one message."""
    if not statements:
        return []
    cur = await conn.execute(sql.SQL("; ").join(sql.SQL(text) for text in statements))
    answers = []
    for _ in statements:
        answers.append(await cur.fetchall() if cur.description else [])
        cur.nextset()
    return answers
