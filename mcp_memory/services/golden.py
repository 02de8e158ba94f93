"""Golden queries: what upkeep must not make recall lose (ADR 16).

A golden query is a question with the memory it must find. The person names some (the
``golden_queries`` tool); the others are sampled at each pass from pinned and important memories,
each asked with its rarest words (at most half of them: never the memory's whole text). Around a
principal's lifecycle pass the scheduler asks them all with reinforcement off:

- before the pass, and the memories that answer them are kept from eviction, so no pass deletes
  (or archives) what a golden query finds;
- after the pass: if recall@k fell by more than ``lifecycle.golden_max_drop``, the pass's summaries
  and facts are taken apart (their sources marked, so the group is not compressed again) and its
  archives go back to the active tier. Each check that saw a change is recorded for `stats`, a
  rollback is counted in `/metrics` and logged.

A query finds its memory when one of its top k hits (or the pinned memories recall returns with
them) is the memory, what replaced it, or a summary holding either that still carries at least half
of the query's words: a summary that lost the memory's particulars does not count.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from mcp_memory.config import LifecycleSettings
from mcp_memory.core.errors import InvalidInputError, NotFoundError
from mcp_memory.core.ids import new_id
from mcp_memory.core.models import Criteria, GoldenCheckRow, GoldenRow, Scope
from mcp_memory.core.text import keyword_terms
from mcp_memory.metrics import GOLDEN_ROLLBACKS
from mcp_memory.services import incoming, summarize
from mcp_memory.services.checks import text_field
from mcp_memory.services.memory import MemoryService
from mcp_memory.services.ports import MemoryStore
from mcp_memory.services.switch import refuse_if_off

log = logging.getLogger(__name__)
MAX_QUERIES = 200  # the person's golden queries per principal
MAX_QUERY_CHARS = 500
SAMPLED_TERMS = 4  # words of a sampled query, at most half of its memory's


@dataclass(frozen=True)
class Probe:
    id: str  # the person's query id, or "sampled:<memory id>"
    namespace: str | None
    query: str
    memory_id: str


@dataclass(frozen=True)
class Measure:
    probes: list[Probe]
    found: dict[str, bool]  # probe id -> found in the top k
    answering: frozenset[str] = frozenset()  # ids of the memories that found them

    @property
    def recall(self) -> float:
        return sum(self.found.values()) / len(self.probes) if self.probes else 1.0


@dataclass
class PassChanges:
    """What a pass wrote that a rollback takes back."""

    summaries: list[str] = field(default_factory=list)  # summaries and facts, in the order written
    archived: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.summaries or self.archived)


@dataclass(frozen=True)
class Verdict:
    before: float
    after: float
    lost: list[str]
    rolled_back: bool


class GoldenService:
    def __init__(
        self,
        store: MemoryStore,
        memory: MemoryService,
        settings: LifecycleSettings,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.rows = store.golden
        self.memory = memory
        self.settings = settings
        self.clock = clock

    # ----- the person's queries ------------------------------------------------------------

    async def add(self, scope: Scope, query: str, memory_id: str) -> GoldenRow:
        await refuse_if_off(self.memory.switch, scope, "no golden query was added")
        text_field("memory_id", memory_id)
        if not memory_id.strip():
            raise InvalidInputError(
                "memory_id", "name the memory the query must find (an id from remember, recall or list_memories)"
            )
        query = incoming.redacted(query.strip())  # stored text: no secret in it (DESIGN §7)
        if not keyword_terms(query) or len(query) > MAX_QUERY_CHARS:
            raise InvalidInputError(
                "query", f"a golden query needs at least one searchable word and at most {MAX_QUERY_CHARS} characters"
            )
        found = await self.store.select_memories(scope, Criteria(ids=(memory_id,), include_archived=True), self.clock())
        if not found:  # gone, or replaced or expired: the error says which and what to use
            await self.memory.why_not_current(scope, memory_id, self.clock())
        known = await self.rows.queries(Scope(scope.principal))
        same = next(
            (q for q in known if (q.query, q.memory_id, q.namespace) == (query, memory_id, scope.namespace)), None
        )
        if same is not None:
            raise InvalidInputError("query", f"this golden query is already kept as {same.id!r}")
        if len(known) >= MAX_QUERIES:
            raise InvalidInputError(
                "query", f"this principal already has {MAX_QUERIES} golden queries; remove one with remove=<id> first"
            )
        row = GoldenRow(new_id(), scope.namespace, query, memory_id, self.clock())
        await self.rows.add(scope, row)
        return row

    async def remove(self, scope: Scope, golden_id: str) -> None:
        await refuse_if_off(self.memory.switch, scope, "no golden query was removed")
        text_field("remove", golden_id)
        if not await self.rows.remove(scope, golden_id):
            raise NotFoundError("golden query", golden_id)

    async def queries(self, scope: Scope) -> list[GoldenRow]:
        await refuse_if_off(self.memory.switch, scope, "nothing was read")  # the queries name memories
        return await self.rows.queries(scope)

    async def checks(self, scope: Scope) -> tuple[list[GoldenCheckRow], int]:
        return await self.rows.checks(scope)

    # ----- around a pass -------------------------------------------------------------------

    async def probes(self, scope: Scope) -> list[Probe]:
        """The person's queries and the sampled ones of the principal (every namespace)."""
        person = [Probe(q.id, q.namespace, q.query, q.memory_id) for q in await self.rows.queries(scope)]
        return person + await self._sampled(scope)

    async def _sampled(self, scope: Scope) -> list[Probe]:
        if self.settings.golden_sample == 0:
            return []
        records = await self.rows.candidates(scope, self.settings.golden_min_importance, self.settings.golden_sample)
        terms_of = {r.id: keyword_terms(r.content) for r in records}
        counts = await self.rows.document_counts(scope, [t for terms in terms_of.values() for t in terms])
        probes: list[Probe] = []
        for record in records:
            terms = terms_of[record.id]
            if len(terms) < 4:  # too short to ask without saying it
                continue
            order = {t: i for i, t in enumerate(terms)}
            rarest = set(
                sorted(terms, key=lambda t: (counts.get(t, 0), order[t]))[: min(SAMPLED_TERMS, len(terms) // 2)]
            )
            query = " ".join(t for t in terms if t in rarest)  # in the memory's own order
            probes.append(Probe(f"sampled:{record.id}", record.namespace, query, record.id))
        return probes

    async def measure(self, scope: Scope, probes: Sequence[Probe]) -> Measure:
        """Ask every probe (reinforcement off): which find their memory, and through which memories."""
        found: dict[str, bool] = {}
        answering: set[str] = set()
        for probe in probes:
            answer = await self._answer(Scope(scope.principal, probe.namespace), probe)
            found[probe.id] = answer is not None
            if answer is not None:
                answering.add(answer)
        return Measure(list(probes), found, frozenset(answering))

    async def _answer(self, scope: Scope, probe: Probe) -> str | None:
        """The id of the hit that finds the probe's memory, or None."""
        try:
            result = await self.memory.recall(scope, probe.query, k=self.settings.golden_k, reinforce=False)
        except InvalidInputError as exc:  # a query the limits refuse now: it finds nothing
            log.info("golden query %s cannot be asked: %s", probe.id, exc)
            return None
        accepted = {r.id: r for r in await self.rows.accepted(scope, probe.memory_id)}
        words = set(keyword_terms(probe.query))
        for hit_id in [h.id for h in result.hits] + [p.id for p in result.pinned]:
            record = accepted.get(hit_id)
            if record is None:
                continue
            if record.level == 0 or 2 * len(words & set(keyword_terms(record.content))) >= len(words):
                return record.id
        return None

    async def check_now(self, scope: Scope) -> Measure:
        """Ask every golden query now (the tool's ``check=true``) and record it with the passes'
        checks: nothing changed, so recall@k before and after are the same figure."""
        measure = await self.measure(scope, await self.probes(scope))
        missed = [p.id for p in measure.probes if not measure.found[p.id]]
        detail: dict[str, object] = {"by": "request", "missed": missed[:20]}
        check = GoldenCheckRow(self.clock(), len(measure.probes), measure.recall, measure.recall, False, detail)
        await self.rows.record_check(scope, check)
        return measure

    async def settle(self, scope: Scope, before: Measure, changes: PassChanges) -> Verdict | None:
        """After the pass: ask again, roll the pass back if recall@k fell too far, record the check."""
        if not before.probes or not changes:
            return None
        after = await self.measure(scope, before.probes)
        lost = [p.id for p in before.probes if before.found[p.id] and not after.found[p.id]]
        rolled_back = before.recall - after.recall > self.settings.golden_max_drop
        detail: dict[str, object] = {"lost": lost[:20], "summaries": len(changes.summaries)}
        detail["archived"] = len(changes.archived)
        if rolled_back:
            lost_memories = [p.memory_id for p in before.probes if p.id in lost]
            await self._roll_back(scope, changes, await self._implicated(scope, changes, lost_memories))
            GOLDEN_ROLLBACKS.inc()
            log.warning(
                "a lifecycle pass was rolled back for principal %s: golden recall@%d fell from %.2f to %.2f "
                "(lost %s); %d summaries taken apart, %d archived memories restored",
                scope.principal,
                self.settings.golden_k,
                before.recall,
                after.recall,
                ", ".join(lost[:5]),
                len(changes.summaries),
                len(changes.archived),
            )
        check = GoldenCheckRow(self.clock(), len(before.probes), before.recall, after.recall, rolled_back, detail)
        await self.rows.record_check(scope, check)
        return Verdict(before.recall, after.recall, lost, rolled_back)

    async def _implicated(self, scope: Scope, changes: PassChanges, lost: list[str]) -> set[str]:
        """The pass's summaries that hold a lost memory; all of them when none does (the loss came
        from elsewhere: a summary crowding it out of the top k)."""
        made = set(changes.summaries)
        holding = {r.id for memory_id in lost for r in await self.rows.accepted(scope, memory_id)} & made
        return holding or made

    async def _roll_back(self, scope: Scope, changes: PassChanges, implicated: set[str]) -> None:
        # Newest first, so a summary built on another comes apart before it. The sources of an
        # implicated one are marked as failed that often, so no pass makes that summary again; the
        # others may be made again by the next pass, which is checked like this one.
        for summary_id in reversed(changes.summaries):
            resist = summarize.MAX_FAILURES if summary_id in implicated else 0
            await self.store.lifecycle.undo_summary(scope, summary_id, resist=resist)
        await self.rows.unarchive(scope, changes.archived, "golden")
