"""Numbered migrations for one principal's SQLite file.

The file records ``schema_version`` and ``min_code_schema`` (the oldest code schema that may
write it). Older code refuses a newer file naming both versions; an existing file is backed up
with ``VACUUM INTO`` before a migration runs, and each migration runs under an exclusive
transaction, so a crash leaves either the old or the new schema.
"""

from __future__ import annotations

import functools
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from mcp_memory import __version__
from mcp_memory.core.errors import SchemaVersionError, StorageError
from mcp_memory.core.text import segment_for_index
from mcp_memory.storage import links
from mcp_memory.storage.permissions import private_dir, private_file

SCHEMA_VERSION = 12

_V1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE memories (
    n INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    namespace TEXT,
    kind TEXT NOT NULL,
    content TEXT NOT NULL,
    key TEXT,
    tags TEXT NOT NULL DEFAULT '[]',
    metadata TEXT NOT NULL DEFAULT '{}',
    importance REAL NOT NULL,
    pinned INTEGER NOT NULL DEFAULT 0,
    occurred_at REAL NOT NULL,
    created_at REAL NOT NULL,
    last_accessed_at REAL,
    access_count INTEGER NOT NULL DEFAULT 0,
    valid_from REAL NOT NULL,
    valid_to REAL,
    superseded_by TEXT,
    expires_at REAL,
    tier TEXT NOT NULL DEFAULT 'active',
    level INTEGER NOT NULL DEFAULT 0,
    language TEXT NOT NULL,
    session_key TEXT,
    task_id TEXT,
    client_name TEXT,
    client_version TEXT,
    transport TEXT,
    content_hash TEXT NOT NULL
);
CREATE INDEX memories_key ON memories(key, namespace) WHERE key IS NOT NULL;
CREATE INDEX memories_hash ON memories(content_hash);
CREATE INDEX memories_occurred ON memories(occurred_at);
CREATE INDEX memories_task ON memories(task_id) WHERE task_id IS NOT NULL;
CREATE INDEX memories_pinned ON memories(pinned) WHERE pinned = 1;
CREATE TABLE memory_tags (
    tag TEXT NOT NULL,
    memory_n INTEGER NOT NULL REFERENCES memories(n) ON DELETE CASCADE,
    PRIMARY KEY (tag, memory_n)
) WITHOUT ROWID;
CREATE INDEX memory_tags_memory ON memory_tags(memory_n);
CREATE TABLE occurrences (
    id TEXT PRIMARY KEY,
    memory_n INTEGER NOT NULL REFERENCES memories(n) ON DELETE CASCADE,
    session_key TEXT,
    occurred_at REAL NOT NULL,
    created_at REAL NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{}',
    client_name TEXT,
    transport TEXT
);
CREATE INDEX occurrences_memory ON occurrences(memory_n);
CREATE TABLE vectors (
    memory_n INTEGER PRIMARY KEY REFERENCES memories(n) ON DELETE CASCADE,
    vec BLOB NOT NULL
);
CREATE VIRTUAL TABLE memories_fts USING fts5(body, tokenize = 'unicode61 remove_diacritics 2');
CREATE TABLE changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    memory_n INTEGER NOT NULL,
    op TEXT NOT NULL CHECK (op IN ('put', 'del'))
);
"""

_V2 = """
CREATE TABLE tasks (
    task_id TEXT PRIMARY KEY,
    namespace TEXT,
    title TEXT NOT NULL,
    goal TEXT NOT NULL,
    constraints TEXT NOT NULL DEFAULT '[]',
    head BLOB NOT NULL,
    head_seq INTEGER NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    latest_checkpoint_id TEXT
);
CREATE INDEX tasks_updated ON tasks(updated_at, task_id);
CREATE TABLE checkpoints (
    id TEXT PRIMARY KEY,
    task_id TEXT NOT NULL REFERENCES tasks(task_id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    parent_id TEXT,
    reason TEXT NOT NULL,
    created_at REAL NOT NULL,
    size INTEGER NOT NULL,
    checksum TEXT NOT NULL,
    envelope BLOB NOT NULL,
    UNIQUE (task_id, seq)
);
"""

_V3 = """
CREATE TABLE erasures (
    n INTEGER PRIMARY KEY AUTOINCREMENT,
    erased_at REAL NOT NULL,
    receipt TEXT NOT NULL
);
"""

_V4 = """
CREATE TABLE conflicts (
    memory_id TEXT NOT NULL,
    other_id TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (memory_id, other_id)
) WITHOUT ROWID;
CREATE INDEX conflicts_other ON conflicts(other_id);
"""

_V5 = """
CREATE TABLE summary_sources (
    summary_id TEXT NOT NULL,
    source_id TEXT NOT NULL,
    PRIMARY KEY (summary_id, source_id)
) WITHOUT ROWID;
CREATE INDEX summary_sources_source ON summary_sources(source_id);
CREATE TABLE compression_failures (
    memory_id TEXT PRIMARY KEY,
    failures INTEGER NOT NULL
) WITHOUT ROWID;
"""

# A conflict the LLM judged and could not settle, or failed to judge three times, is not put to
# it again at every pass.
_V6 = """
ALTER TABLE conflicts ADD COLUMN judged_at REAL;
ALTER TABLE conflicts ADD COLUMN judge_failures INTEGER NOT NULL DEFAULT 0;
"""

# What each memory names (recall follows links between memories that share a rare one), and the
# order of a session's memories (recall follows a memory's neighbours). The entities of the memories
# already stored are written by links.backfill in the same transaction.
_V7 = """
CREATE TABLE memory_entities (
    entity TEXT NOT NULL,
    memory_n INTEGER NOT NULL REFERENCES memories(n) ON DELETE CASCADE,
    PRIMARY KEY (entity, memory_n)
) WITHOUT ROWID;
CREATE INDEX memory_entities_memory ON memory_entities(memory_n);
CREATE INDEX memories_session ON memories(session_key, n) WHERE session_key IS NOT NULL;
"""

# One live copy of a text per scope (the hash includes the namespace): a said-again memory merges.
# Only what `remember` writes as itself is unique: a keyed memory may repeat another's words, and
# summaries and consolidated facts (level >= 1) may carry a source's text while it is archived.
# Copies that two processes stored before this index existed are superseded by the oldest copy.


def live_copy(t: str) -> str:
    """The rows of table alias ``t`` that the unique index of version 8 covers."""
    return f"{t}.superseded_by IS NULL AND {t}.tier = 'active' AND {t}.key IS NULL AND {t}.level = 0"


_OLDER_COPY = (
    f"EXISTS (SELECT 1 FROM memories k WHERE k.content_hash = m.content_hash AND k.n < m.n AND {live_copy('k')})"
)
_V8 = f"""
INSERT INTO changes(memory_n, op) SELECT m.n, 'put' FROM memories m WHERE {live_copy("m")} AND {_OLDER_COPY};
UPDATE memories AS m SET
    valid_to = CAST(strftime('%s', 'now') AS REAL),
    superseded_by = (SELECT k.id FROM memories k WHERE k.content_hash = m.content_hash AND k.n < m.n
                     AND {live_copy("k")} ORDER BY k.n LIMIT 1)
WHERE {live_copy("m")} AND {_OLDER_COPY};
CREATE UNIQUE INDEX memories_live_copy ON memories(content_hash)
    WHERE superseded_by IS NULL AND tier = 'active' AND key IS NULL AND level = 0;
"""

# The second model's vector of each memory (ADR 14): recall reads the few of its first candidates.
# Memories stored before, or by older code, have none and are left as the first model ranks them;
# `mcp-memory reindex` writes them all.
_V9 = """
CREATE TABLE second_vectors (
    memory_n INTEGER PRIMARY KEY REFERENCES memories(n) ON DELETE CASCADE,
    vec BLOB NOT NULL
);
"""

# Each memory's event log (storage/events.py), keyed by id so a forgotten memory keeps its one
# content-free event. The memories already stored get a "created" event at their creation time.
_V10 = """
CREATE TABLE memory_events (
    n INTEGER PRIMARY KEY AUTOINCREMENT,
    memory_id TEXT NOT NULL,
    at REAL NOT NULL,
    event TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX memory_events_memory ON memory_events(memory_id, n);
INSERT INTO memory_events(memory_id, at, event, detail)
    SELECT id, created_at, 'created', '{"backfilled":true}' FROM memories ORDER BY n;
"""

# Golden queries (storage/golden.py): the person's queries with the memory each must find, and the
# checks the lifecycle passes made against them.
_V11 = """
CREATE TABLE golden_queries (
    id TEXT PRIMARY KEY,
    namespace TEXT,
    query TEXT NOT NULL,
    memory_id TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX golden_queries_memory ON golden_queries(memory_id);
CREATE TABLE golden_checks (
    n INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    queries INTEGER NOT NULL,
    before REAL NOT NULL,
    after REAL NOT NULL,
    rolled_back INTEGER NOT NULL,
    detail TEXT NOT NULL DEFAULT '{}'
);
"""

# Version 12 changes no table: the keyword index of every memory is written again by `_resegment`,
# now with the stems of its English words (text.segment_for_index).
_V12 = ""


def _resegment(conn: sqlite3.Connection) -> None:
    """The keyword index again from every memory's text (each memory is in it, whatever its tier)."""
    rows = conn.execute("SELECT n, content FROM memories").fetchall()
    conn.execute("DELETE FROM memories_fts")
    conn.executemany(
        "INSERT INTO memories_fts(rowid, body) VALUES (?, ?)", [(n, segment_for_index(str(c))) for n, c in rows]
    )


# (version, script, the oldest code schema that may write a file at this version). Versions 2 and 3
# only add tables, so code that knows version 1 may still write memories into such files.
# Versions 4 and 5 change what a delete must clean (conflicts, summary lineage): older code may not
# write such a file. Version 6 adds a nullable column that version-5 code never names: it may write.
# Version 7's entities must be written with every memory: older code would leave new memories
# unlinked, so it may not write. Version 8's unique index only refuses what version-7 code would
# store twice in a race between processes: it may write. Version 9's second vectors are optional
# (a memory without one is ranked by the first model alone): version-7 code may write. Version 10's
# event log is a record, not a rule: what older code writes has no events, nothing breaks. Version
# 11's golden queries only guard passes: older code runs its passes unguarded, nothing breaks. Version
# 12's stems are found only by newer code: a memory older code writes has none and is found by its
# words as written, as older code finds every memory; older code may write.
MIGRATIONS: list[tuple[int, str, int]] = [
    (1, _V1, 1),
    (2, _V2, 1),
    (3, _V3, 1),
    (4, _V4, 4),
    (5, _V5, 5),
    (6, _V6, 5),
    (7, _V7, 7),
    (8, _V8, 7),
    (9, _V9, 7),
    (10, _V10, 7),
    (11, _V11, 7),
    (12, _V12, 7),
]
# Work a migration does beyond its SQL, in the same transaction.
BACKFILLS: dict[int, Callable[[sqlite3.Connection], None]] = {7: links.backfill, 12: _resegment}


def _journal_wal(conn: sqlite3.Connection, busy_timeout_ms: int) -> None:
    """Put the file in WAL mode. While another process closes the file's last connection (it
    checkpoints and removes the WAL) this answers "database is locked" without waiting for the busy
    timeout, so it is retried here within that timeout (seen when servers start one after another)."""
    deadline = time.monotonic() + busy_timeout_ms / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def connect_sync(path: Path, busy_timeout_ms: int) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=busy_timeout_ms / 1000)
    private_file(path)  # before the WAL exists, so SQLite creates it private
    configure(conn, busy_timeout_ms)
    return conn


def configure(conn: sqlite3.Connection, busy_timeout_ms: int) -> None:
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    _journal_wal(conn, busy_timeout_ms)
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    # Freed pages are zeroed, so forgotten text is not left behind in the file.
    conn.execute("PRAGMA secure_delete = ON")


def _read_meta(conn: sqlite3.Connection, key: str) -> str | None:
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    except sqlite3.OperationalError:
        return None
    return None if row is None else str(row[0])


def file_schema(conn: sqlite3.Connection) -> tuple[int, int, str | None]:
    version = int(_read_meta(conn, "schema_version") or 0)
    min_code = int(_read_meta(conn, "min_code_schema") or 0)
    return version, min_code, _read_meta(conn, "written_by")


def migrate(path: Path, busy_timeout_ms: int) -> None:
    """Bring the file at ``path`` to SCHEMA_VERSION, or refuse a file from newer code."""
    try:
        private_dir(path.parent)
        conn = connect_sync(path, busy_timeout_ms)
    except (sqlite3.Error, OSError) as exc:
        raise StorageError(f"cannot open data file {str(path)!r}: {exc}") from exc
    try:
        version, min_code, written_by = file_schema(conn)
        if min_code > SCHEMA_VERSION or (version > SCHEMA_VERSION and min_code == 0):
            raise SchemaVersionError(
                f"data file {str(path)!r} has schema version {version} (written by mcp-memory "
                f"{written_by or 'unknown'}); this mcp-memory {__version__} knows schema versions up to "
                f"{SCHEMA_VERSION}. Upgrade mcp-memory to use this file."
            )
        pending = [m for m in MIGRATIONS if m[0] > version]
        if not pending:
            return
        if version > 0:
            backup = path.with_name(f"{path.stem}.v{version}.{int(time.time())}.bak.db")
            conn.execute("VACUUM INTO ?", (str(backup),))
            private_file(backup)
        for number, script, oldest in pending:
            conn.execute("BEGIN EXCLUSIVE")
            try:
                current, _, _ = file_schema(conn)
                if current < number:  # another process may have migrated meanwhile
                    for statement in _statements(script):
                        conn.execute(statement)
                    if number in BACKFILLS:
                        BACKFILLS[number](conn)
                    for key, value in (
                        ("schema_version", str(number)),
                        ("min_code_schema", str(oldest)),
                        ("written_by", __version__),
                    ):
                        conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
    except sqlite3.Error as exc:
        raise StorageError(f"cannot migrate data file {str(path)!r}: {exc}") from exc
    finally:
        conn.close()


def _statements(script: str) -> list[str]:
    return [s.strip() for s in script.split(";\n") if s.strip()]


@functools.cache
def table_columns() -> dict[str, tuple[str, ...]]:
    """Every table of a principal's file (the keyword index's virtual tables aside) and its columns,
    in order, as the migrations make them."""
    conn = sqlite3.connect(":memory:")
    try:
        for _, script, _ in MIGRATIONS:
            for statement in _statements(script):
                conn.execute(statement)
        tables = [
            str(r[0])
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%'"
            )
            if not str(r[0]).startswith(("sqlite_", "memories_fts"))
        ]
        return {t: tuple(str(c[1]) for c in conn.execute(f"PRAGMA table_info({t})")) for t in tables}
    finally:
        conn.close()
