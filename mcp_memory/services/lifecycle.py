"""LifecycleService: the deliberate forgetting passes (ADR 7). Decay is the first of them.

    R = exp(-t / S)    t: hours since the last access (or creation)
    S = base x (1 + 4 x importance) x (1 + ln(1 + access_count))

Below ``evict_threshold`` with importance < 0.5 a memory is evicted (archived by default, or
deleted); below ``compress_threshold`` and idle for a day it is a candidate for compression.
Pinned memories never decay. The curve is ``scoring.retention``, the one recall's recency uses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mcp_memory.config import LifecycleSettings
from mcp_memory.models import Scope
from mcp_memory.services import scoring
from mcp_memory.storage.sqlite import SqliteStore


def strength_hours(base_hours: float, importance: float, access_count: int) -> float:
    """S: how slowly a memory fades; importance and use both slow it."""
    return base_hours * (1 + 4 * min(max(importance, 0.0), 1.0)) * (1 + math.log1p(max(access_count, 0)))


def retention(hours_idle: float, base_hours: float, importance: float, access_count: int) -> float:
    return scoring.retention(hours_idle, strength_hours(base_hours, importance, access_count))


@dataclass(frozen=True)
class DecayOutcome:
    examined: int
    evicted: int
    compress_candidates: int


class LifecycleService:
    def __init__(self, store: SqliteStore, settings: LifecycleSettings) -> None:
        self.store = store
        self.settings = settings

    async def decay(self, scope: Scope, now: float) -> DecayOutcome:
        """One decay pass over the principal's active, unpinned memories (every namespace)."""
        cfg = self.settings
        rows = await self.store.decay_rows(scope)
        evict: list[int] = []
        compress = 0
        for n, importance, access_count, last_touch in rows:
            idle = max(now - last_touch, 0.0) / 3600
            r = retention(idle, cfg.decay_base_hours, importance, access_count)
            if r < cfg.evict_threshold and importance < 0.5:
                evict.append(n)
            elif r < cfg.compress_threshold and idle >= 24:
                compress += 1
        evicted = 0
        if evict:
            if cfg.evict_action == "delete":
                evicted, _ = await self.store.delete(scope, evict)
            else:
                evicted = await self.store.archive(scope, evict)
        return DecayOutcome(examined=len(rows), evicted=evicted, compress_candidates=compress)
