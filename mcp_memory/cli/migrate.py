"""`mcp-memory migrate --to postgres | sqlite`: every principal of the data directory's SQLite files
into the PostgreSQL database of ``storage.postgres``, or back (ADR 19), with tokens, switches and LLM
budgets. Each principal moves in one transaction and is read back and compared; one already there
with the same rows is counted and left, so a run that stopped is run again.

Into PostgreSQL the copy keeps every number (the order of writing), so the database's sequences
are first moved past them, as the schema's owner (``$MCP_MEMORY_PG_OWNER_DSN``).
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from pathlib import Path

from mcp_memory.compose import record_store
from mcp_memory.config import Settings
from mcp_memory.core.errors import ConflictError, InvalidInputError, StorageError
from mcp_memory.storage import transfer
from mcp_memory.storage.control import ControlFile
from mcp_memory.storage.llm_usage import LlmLedger
from mcp_memory.storage.pool import principal_file
from mcp_memory.storage.switch import SwitchFile
from mcp_memory.storage.tokens import TokenStore


def _on(settings: Settings, backend: str) -> Settings:
    """The settings with ``backend`` as the system of record and the exact vector engine (a copy
    writes no Qdrant points: the engine brings them up from the store at its next call)."""
    storage = settings.storage.model_copy(update={"backend": backend})
    vectors = settings.vectors.model_copy(update={"engine": "exact"})
    return settings.model_copy(update={"storage": storage, "vectors": vectors})


def _shared(settings: Settings, stack: AsyncExitStack) -> dict[str, transfer.SharedSide]:
    """The tables a move takes along, each opened on ``settings``' backend (closed with ``stack``)."""
    kinds: dict[str, type[ControlFile]] = {"tokens": TokenStore, "switches": SwitchFile, "llm_usage": LlmLedger}
    opened = {table: kind.for_settings(settings) for table, kind in kinds.items()}
    for control in opened.values():
        stack.callback(control.close)
    return dict(opened)


async def run(settings: Settings, to: str, only: Sequence[str]) -> int:
    pg = settings.storage.postgres
    if pg.dsn is None:
        raise InvalidInputError(
            "storage.postgres.dsn",
            "is not set: migrate copies between data_dir's SQLite files and that database "
            "(MCP_MEMORY_STORAGE__POSTGRES__DSN=postgresql://role@host:5432/db)",
        )
    lite, postgres = _on(settings, "sqlite"), _on(settings, "postgres")
    async with AsyncExitStack() as stack:
        sqlite_store = await stack.enter_async_context(record_store(lite))
        pg_store = await stack.enter_async_context(record_store(postgres))
        source, target = (sqlite_store, pg_store) if to == "postgres" else (pg_store, sqlite_store)
        source_settings, target_settings = (lite, postgres) if to == "postgres" else (postgres, lite)
        before = None
        if to == "postgres":
            from mcp_memory.storage.pg import database

            owner = await stack.enter_async_context(await database.connect_owner(pg))

            async def before(maxima: dict[str, tuple[str, int]]) -> None:
                await database.raise_sequences(owner, maxima)

        known = await source.known_principals()
        if to == "postgres":
            _all_readable(settings.data_dir, known)
        missing = sorted(set(only) - set(known))
        if missing:
            raise InvalidInputError("--only", f"names no principal of the source: {', '.join(missing)}")
        names = list(only) or known
        moved, refused = await _move(source, target, names, before)
        sides = _shared(source_settings, stack), _shared(target_settings, stack)
        added = await transfer.copy_shared(*sides, set(moved), set(refused), every=not only)
    where = "the PostgreSQL database" if to == "postgres" else str(settings.data_dir)
    shared = ", ".join(f"{n} {table}" for table, n in added.items())
    copied = sum(1 for o in moved.values() if o == "copied")
    sys.stdout.write(
        f"migrated to {where}: {copied} principals copied and verified, {len(moved) - copied} already there with "
        f"the same rows; added {shared}\n"
    )
    for reason in refused.values():
        sys.stderr.write(f"mcp-memory: {reason}\n")
    if refused:
        sys.stderr.write(f"mcp-memory: {len(refused)} of {len(names)} principals were refused (above); nothing of them "
                         "was written, and their tokens, switches and budgets stayed behind\n")  # fmt: skip
    return 1 if refused else 0


async def _move(
    source: transfer.Side,
    target: transfer.Side,
    names: list[str],
    before: Callable[[dict[str, tuple[str, int]]], Awaitable[None]] | None,
) -> tuple[dict[str, str], dict[str, str]]:
    """Each principal in turn: {name: "copied" or "present"}, {name: why it was refused}."""
    moved: dict[str, str] = {}
    refused: dict[str, str] = {}
    for done, name in enumerate(names, 1):
        try:
            outcome = await transfer.copy_principal(source, target, name, before)
        except ConflictError as exc:  # the others still move; the run ends non-zero
            refused[name] = str(exc)
            _progress(done, len(names), f"{name}: refused")
            continue
        moved[name] = outcome.outcome
        _progress(done, len(names), f"{name}: {outcome.outcome}, {outcome.rows['memories']} memories")
    return moved, refused


def _all_readable(data_dir: Path, known: list[str]) -> None:
    """Every principal file of the data directory is one whose principal the store could read: a file
    it skipped (damaged, or not a data file) would otherwise be left behind without a word."""
    expected = {principal_file(data_dir, name) for name in known}
    unread = sorted(str(p) for p in (data_dir / "principals").glob("*.db") if p not in expected)
    if unread:
        raise StorageError(
            f"cannot read the principal file(s) {', '.join(unread)}: nothing was migrated. Repair them (`mcp-memory "
            "doctor`), or move them out of the data directory, and run migrate again"
        )


def _progress(done: int, total: int, line: str) -> None:
    """One line per principal; a bar on a terminal."""
    if sys.stderr.isatty():
        width = 30
        filled = width * done // max(total, 1)
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {line[:60]:<60}")
        if done >= total:
            sys.stderr.write("\n")
    else:
        sys.stderr.write(f"{line}\n")
    sys.stderr.flush()
