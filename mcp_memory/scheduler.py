"""The scheduler: runs the lifecycle passes in the background, one process at a time.

It is owned by the process's resource stack (never by a connection), waits ``interval_minutes``
between passes, and takes a lease in the control file before each pass, so with several
processes on one data directory only one runs it; when a holder dies its lease expires and
another process takes over. ``run_once(now)`` lets tests and ``mcp-memory maintain`` drive it.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from typing import Any

import anyio

from mcp_memory.config import LifecycleSettings
from mcp_memory.core.errors import StorageError
from mcp_memory.core.models import Scope
from mcp_memory.metrics import PASSES, Process
from mcp_memory.services.control_ports import PassControl
from mcp_memory.services.facts import FactService
from mcp_memory.services.golden import GoldenService, PassChanges
from mcp_memory.services.lifecycle import LifecycleService
from mcp_memory.services.ports import MemoryStore
from mcp_memory.services.switch import SwitchState

log = logging.getLogger(__name__)


class _LeaseLost(Exception):
    """Another process took the lease over: this pass stops at its next step."""


def _utc(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


# What a decay pass reports, in this order (``mcp-memory maintain`` prints them, the control file keeps them).
PASS_COUNTS = (
    "principals",
    "examined",
    "evicted",
    "compress_candidates",
    "summaries",
    "aggressive",
    "summarized",
    "phase_summaries",
    "task_summaries",
    "compression_failures",
    "facts",
    "consolidated",
    "conflicts_judged",
    "conflicts_superseded",
    "conflicts_cleared",
    "facts_extracted",
    "facts_refused",
    "memories_skipped_for_facts",
    "expired_erased",
    "changes_pruned",
    "second_vectors",
    "golden_checked",
    "golden_rollbacks",
    "principals_failed",
    "principals_switched_off",
)


class Scheduler:
    def __init__(
        self,
        store: MemoryStore,
        control: PassControl,
        lifecycle: LifecycleService,
        settings: LifecycleSettings,
        clock: Callable[[], float] = time.time,
        facts: FactService | None = None,
        switch: SwitchState | None = None,
        golden: GoldenService | None = None,
    ) -> None:
        self.golden = golden  # the golden queries that guard every pass
        self.facts = facts
        self.switch = switch  # the kill switch: a principal whose memory is off is left alone
        self.store = store
        self.control = control
        self.lifecycle = lifecycle
        self.settings = settings
        self.clock = clock
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

    async def run_once(self, now: float | None = None, *, as_of: float | None = None) -> dict[str, Any]:
        """One decay pass over every principal, under the lease; returns what it did.

        ``as_of`` runs the passes as if it were that moment (`mcp-memory maintain --as-of +30d`)
        while the lease keeps ``now``: a holder killed mid-pass must not block the real passes
        until a date in the future.
        """
        now = self.clock() if now is None else now
        moment = now if as_of is None else as_of
        if not await self.control.acquire("decay", self.holder, now, self.settings.lease_seconds):
            PASSES.inc(outcome="skipped")
            held = await self.control.holder("decay")
            holder, until = held if held is not None else ("another process", now)
            return {
                "name": "decay",
                "outcome": "skipped",
                "reason": f"{holder} holds the lease until {_utc(until)} (lifecycle.lease_seconds); "
                "it is taken over then if that process has died",
            }
        started = time.time()
        totals = dict.fromkeys(PASS_COUNTS, 0)
        outcome = "done"
        lost = anyio.Event()
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._keep_lease, now, lost)
                try:
                    outcome = await self._every_principal(moment, now, totals, lost)
                finally:
                    tg.cancel_scope.cancel()
            if lost.is_set():
                outcome = "lost the lease"
                log.warning("the decay pass stopped: its lease was taken over (lifecycle.lease_seconds)")
        except Exception as exc:  # recorded, and retried at the next interval
            outcome = "failed"
            log.warning("decay pass failed: %s", exc)
        finally:
            await self.control.release("decay", self.holder)
        await self.control.record("decay", self.holder, started, time.time(), outcome, totals)
        PASSES.inc(outcome=outcome)
        return {"name": "decay", "outcome": outcome, **totals}

    async def _every_principal(self, moment: float, now: float, totals: dict[str, int], lost: anyio.Event) -> str:
        """Each principal's pass in turn, until the lease is lost; "failed" when one of them failed."""
        outcome = "done"
        for principal in await self.store.lifecycle.known_principals():
            if lost.is_set():
                break
            if self.switch is not None and await self.switch.off_within(principal):
                totals["principals_switched_off"] += 1  # the kill switch: its memories are left alone
                continue
            try:
                async with self.store.lease(principal):  # the pool leaves it open meanwhile
                    await self._principal(Scope(principal), moment, now, totals, lost)
            except _LeaseLost:
                break
            except Exception as exc:  # one user's failure does not stop the others' passes
                outcome = "failed"
                totals["principals_failed"] += 1
                log.warning("decay pass failed for one principal: %s", exc)
        return outcome

    async def _keep_lease(self, now: float, lost: anyio.Event) -> None:
        """Renew the lease three times per lease period while the pass runs; set ``lost`` (the
        pass stops at its next step) if another process took it over meanwhile."""
        started = time.monotonic()
        while True:
            await anyio.sleep(self.settings.lease_seconds / 3)
            elapsed = time.monotonic() - started
            try:
                kept = await self.control.acquire("decay", self.holder, now + elapsed, self.settings.lease_seconds)
            except StorageError as exc:  # the control file is busy: try again at the next tick
                log.info("the lease could not be renewed just now: %s", exc)
                continue
            if not kept:
                lost.set()
                return

    async def _principal(
        self, scope: Scope, moment: float, now: float, totals: dict[str, int], lost: anyio.Event
    ) -> None:
        """Every pass over one principal's file, as of ``moment``; what they write is dated ``now``.
        Each step first checks the lease is still this process's. The golden queries are asked
        before (what answers them is not evicted) and after: a pass that lost them is rolled back."""

        def check() -> None:
            if lost.is_set():
                raise _LeaseLost

        before = await self.golden.measure(scope, await self.golden.probes(scope)) if self.golden else None
        changes = PassChanges()
        result = await self.lifecycle.decay(scope, moment, keep=before.answering if before else frozenset())
        changes.archived.extend(result.archived)
        totals["principals"] += 1
        totals["examined"] += result.examined
        totals["evicted"] += result.evicted
        totals["compress_candidates"] += result.compress_candidates
        totals["aggressive"] += int(result.aggressive)
        if self.facts is not None:  # the LLM's passes (no-ops without an LLM)
            check()
            await self._facts(scope, now, totals)
        check()
        merged = await self.lifecycle.consolidate(scope, moment, written_at=now)
        changes.summaries.extend(merged.made)
        totals["facts"] += merged.facts
        totals["consolidated"] += merged.consolidated
        check()
        kept = await self.lifecycle.upkeep(scope, moment)
        totals["expired_erased"] += kept.erased
        totals["changes_pruned"] += kept.changes_pruned
        check()
        compressed = await self.lifecycle.compress(scope, moment, written_at=now)
        changes.summaries.extend(compressed.made)
        totals["summaries"] += compressed.summaries
        totals["summarized"] += compressed.summarized
        totals["phase_summaries"] += compressed.phase_summaries
        totals["task_summaries"] += compressed.task_summaries
        totals["compression_failures"] += compressed.failed
        if self.golden is not None and before is not None:
            verdict = await self.golden.settle(scope, before, changes)
            totals["golden_checked"] += verdict is not None
            totals["golden_rollbacks"] += bool(verdict and verdict.rolled_back)
        check()
        totals["second_vectors"] += await self.lifecycle.second_vectors(scope)

    async def _facts(self, scope: Scope, now: float, totals: dict[str, int]) -> None:
        assert self.facts is not None
        judged = await self.facts.judge_conflicts(scope, now)
        totals["conflicts_judged"] += judged.judged
        totals["conflicts_superseded"] += judged.superseded
        totals["conflicts_cleared"] += judged.cleared
        extracted = await self.facts.extract(scope)
        totals["facts_extracted"] += extracted.facts
        totals["facts_refused"] += extracted.refused
        totals["memories_skipped_for_facts"] += extracted.skipped

    async def run(self, stop: anyio.Event) -> None:
        """Pass after pass until ``stop`` is set; a pass in progress finishes first."""
        Process.schedulers_running += 1
        try:
            await self._loop(stop)
        finally:
            Process.schedulers_running -= 1

    async def _loop(self, stop: anyio.Event) -> None:
        while not stop.is_set():
            with anyio.move_on_after(self.settings.interval_minutes * 60):
                await stop.wait()
            if stop.is_set():
                return
            try:
                await self.run_once()
            except Exception:  # a failed pass is logged and retried at the next interval
                log.exception("scheduler pass failed")
