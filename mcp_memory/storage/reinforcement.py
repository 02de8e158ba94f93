"""Recall's reinforcement, waiting in memory until a batch writes it (ADR 11): reads never wait
for a write, and a crash loses at most the seconds between two batches. Both backends keep one
buffer per principal."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from mcp_memory.core.errors import StorageError
from mcp_memory.core.models import MemoryRecord

log = logging.getLogger(__name__)

# Recall's reinforcement waits in memory at most this long before it is written (and at close).
REINFORCE_FLUSH_SECONDS = 2.0


class Reinforcement:
    """One principal's access counts and last accesses not written yet: id -> (count, last access)."""

    def __init__(self) -> None:
        self.pending: dict[str, tuple[int, float]] = {}
        self.flushing: dict[str, tuple[int, float]] = {}  # the batch being written

    def reinforced(self, ids: Sequence[str], now: float) -> None:
        self.reinforce_again(dict.fromkeys(ids, (1, now)))

    def reinforce_again(self, counts: dict[str, tuple[int, float]]) -> None:
        for ident, (count, last) in counts.items():
            before, seen = self.pending.get(ident, (0, 0.0))
            self.pending[ident] = (before + count, max(seen, last))

    def overlay(self, records: Sequence[MemoryRecord]) -> None:
        """This process's reinforcement not yet written, added to records read from the store."""
        for buffer in (self.flushing, self.pending):
            for record in records:
                if (found := buffer.get(record.id)) is not None:
                    record.access_count += found[0]
                    record.last_accessed_at = max(record.last_accessed_at or 0.0, found[1])

    async def flush(self, transaction: AbstractAsyncContextManager[Any]) -> None:
        """Write what waits, in ``transaction``; if the store is busy it waits for the next batch."""
        if not self.pending:
            return
        self.flushing, self.pending = self.pending, {}
        try:
            async with transaction as conn:
                await conn.executemany(
                    "UPDATE memories SET access_count = access_count + ?, "
                    "last_accessed_at = MAX(COALESCE(last_accessed_at, 0), ?) WHERE id = ?",
                    [(count, last, ident) for ident, (count, last) in self.flushing.items()],
                )
        except StorageError as exc:
            log.warning("reinforcement of %d memories not written yet: %s", len(self.flushing), exc)
            self.reinforce_again(self.flushing)
        finally:
            self.flushing = {}
