"""MemoryService: remember, recall and forget, inside one Scope.

Every string is redacted before it is written or logged. A call with a malformed argument
raises InvalidInputError naming the field and writes nothing; a memory that is merely not
worth keeping (an acknowledgement) is rejected per item with the reason.

The argument checks are in ``inputs``, how a new memory relates to stored ones in ``relations``,
and how recall ranks and packs its hits in ``recall``; the service runs each call in order.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, NoReturn

from mcp_memory.config import Limits, RecallSettings
from mcp_memory.core.errors import InvalidInputError, LimitExceededError, NotFoundError
from mcp_memory.core.models import (
    Applied,
    Centring,
    Criteria,
    DenseHits,
    MemoryDraft,
    MemoryFilter,
    MemoryRecord,
    Scope,
)
from mcp_memory.core.recalled import Detail, HitCost, Recalled, Recollection
from mcp_memory.core.text import (
    estimate_tokens,
    keyword_terms,
    looks_like_identifier_query,
    script,
)
from mcp_memory.embed.loader import Embedder
from mcp_memory.llm.client import LlmClient
from mcp_memory.services import inputs, intake, lookup, question, recall, rerank, scoring, second, summarize, when
from mcp_memory.services.checks import text_field
from mcp_memory.services.incoming import redacted
from mcp_memory.services.intake import CallContext as CallContext  # where callers have always found it
from mcp_memory.services.intake import Progress
from mcp_memory.services.keywords import keyword_ranking
from mcp_memory.services.one_call import in_one_transaction
from mcp_memory.services.ports import MemoryStore
from mcp_memory.services.recall import Scored, concurrently, fit_budget, floored, score
from mcp_memory.services.relations import Thresholds, stored_neighbours
from mcp_memory.services.replies import answered as replies_to
from mcp_memory.services.rules import says_stopped
from mcp_memory.services.sessions import SessionTracker
from mcp_memory.services.strength import with_strength
from mcp_memory.services.switch import SwitchState, nothing_recalled, off_reason, refuse_if_off

if TYPE_CHECKING:
    from mcp_memory.core.models import Vector

log = logging.getLogger(__name__)


def link_words(via: str) -> str:
    return repr(via) if via else "session"


@dataclass(frozen=True, slots=True)
class Forgotten:
    """What forget matched, oldest first, and (not a dry run) how many went and whether the freed
    pages were wiped at once (``scrubbed``; else at a later write)."""

    records: list[MemoryRecord]
    dry_run: bool
    deleted: int = 0
    scrubbed: bool = True


@dataclass(frozen=True)
class _Gathered:
    ranked: list[str]  # memory ids, best first, that the scope may see
    records: dict[str, MemoryRecord]
    linked: dict[str, str]  # memory id -> how a link reached it
    entity_linked: set[str]  # reached through a shared rare entity: kept above the floor


class MemoryService:
    def __init__(
        self,
        store: MemoryStore,
        embedder: Embedder,
        limits: Limits,
        recall_config: RecallSettings,
        sessions: SessionTracker,
        hit_cost: HitCost,
        clock: Callable[[], float] = time.time,
        llm: LlmClient | None = None,
        switch: SwitchState | None = None,
    ) -> None:
        self.clock = clock
        self.hit_cost = hit_cost  # a hit as the caller receives it, in tokens: the face's measure
        self.switch = switch  # the kill switch (None: always on)
        self.llm = llm
        self.llm_stage = rerank.LlmStage(llm, recall_config)  # recall's optional LLM parts
        self.store = store
        self.rows = store.lifecycle
        self.embedder = embedder
        self.limits = limits
        self.config = recall_config
        self.sessions = sessions
        self._checked: set[str] = set()

    async def _model_dim(self, scope: Scope) -> int:
        model = await self.embedder.ready()
        if scope.principal not in self._checked:
            await self.store.check_model(scope, model.model_id, model.dim)
            self._checked.add(scope.principal)
        return model.dim

    async def warm(self, scope: Scope) -> None:
        """Load the model and the scope's vector index ahead of the first call (in the background)."""
        try:
            dim = await self._model_dim(scope)
            await self.store.vectors.sync(scope, dim)
            if self.embedder.second is not None and await second.mixes(self.store, scope, dim, []):
                self.embedder.second.start()  # its recalls will ask the second model (ADR 14)
        except Exception as exc:  # the first real call reports the same problem to the client
            log.warning("warm-up of the memory index failed: %s", exc)

    # ----- remember ------------------------------------------------------------------------

    @in_one_transaction("store")
    async def remember(self, scope: Scope, items: Sequence[MemoryDraft], ctx: CallContext) -> intake.Remembered:
        """Prepare the batch, read what is known about it (stored copies, vectors, one neighbour
        search), classify every item, write once, report."""
        inputs.check_batch(items, self.limits)
        await refuse_if_off(self.switch, scope)
        now = self.clock()
        batch = intake.prepare(scope, items)
        new_pins = [estimate_tokens(p.content) for p in batch.prepared if p.item.pinned]
        if new_pins:  # what the batch replaces leaves the pins as it arrives
            leaving = {old for p in batch.prepared for old in p.item.supersedes}
            self._check_pin_cap(await self._pinned_tokens(scope, now, leaving) + sum(new_pins), "memories.pinned")
        dim = await self._model_dim(scope)
        known = await self._known(scope, batch, now, ctx.progress)
        session = self.sessions.touch(scope, ctx.provenance, now)
        plan = intake.classify(scope, batch, known, ctx.provenance, session, now)
        applied = await self.store.apply(scope, plan.inserts, plan.merges) if plan.inserts or plan.merges else None
        result = await self._report(scope, items, plan, applied or Applied({}, {}))
        if ctx.progress is not None:
            await ctx.progress(len(items), len(items), "stored")
        counts = (len(plan.inserts), len(plan.merges), result.rejected, dim)
        log.info("remember: %d stored, %d merged, %d rejected (dim %d)", *counts)
        return result

    async def _known(
        self, scope: Scope, batch: intake.Intake, now: float, told: Progress | None = None
    ) -> intake.Known:
        """Stored copies by hash, the vectors classify needs (one embedding call) and their stored
        neighbours (one search)."""
        hashes = [p.hash for p in batch.prepared]
        existing = await self.store.find_by_hash(scope, hashes, now)
        # Said again after it was replaced: the restatement replaces what replaced it.
        restated = await self.store.replaced_by_hash(scope, [h for h in hashes if h not in existing], now)
        wanted = intake.to_embed(batch.prepared, existing)
        model = await self.embedder.ready()
        thresholds = Thresholds.of(
            model.duplicate_similarity, model.related_similarity, self.config.duplicate_similarity
        )
        if not wanted:
            return intake.Known(existing, restated, {}, {}, thresholds)
        texts = [p.content for p in wanted]

        async def progress(done: int) -> None:
            if told is not None:
                await told(done, len(batch.results), "embedded")

        mixed = False
        if self.embedder.second is not None:
            known_scripts = await self.store.vectors.scripts(scope, model.dim)
            mixed = all(second.scripts_of(texts, *known_scripts))
            if mixed and not all(known_scripts):  # this batch mixes the store: its memories join at once
                await second.fill(self.store, self.embedder.second, scope)
        vectors, seconds = await concurrently(
            self.embedder.passages(texts, owner=scope.principal, progress=progress),
            second.passages(self.embedder.second if mixed else None, texts, scope.principal),
        )
        plain = [j for j, p in enumerate(wanted) if p.plain]
        # only a statement that says something stopped looks further than related (Thresholds.reach)
        reach = thresholds.reach if any(says_stopped(text) for text in texts) else thresholds.related
        close = await stored_neighbours(self.store, scope, vectors[plain], reach, now)
        return intake.Known(
            existing,
            restated,
            {p.index: vectors[j] for j, p in enumerate(wanted)},
            {wanted[j].index: found for j, found in zip(plain, close, strict=True)},
            thresholds,
            {p.index: seconds[j] for j, p in enumerate(wanted)} if seconds else {},
        )

    async def _report(
        self, scope: Scope, items: Sequence[MemoryDraft], plan: intake.Plan, applied: Applied
    ) -> intake.Remembered:
        """Each item's outcome after the write: an insert another process made first is a merge; a
        merge asked to pin pins the memory; what each memory superseded."""
        final: list[intake.ItemOutcome] = []
        for result in plan.results:
            assert result is not None
            if result.outcome == "stored" and result.id in applied.merged:  # stored meanwhile elsewhere
                told = "; ".join(r for r in (intake.MERGED_REASON, result.reason) if r)  # a redaction stays said
                result = intake.ItemOutcome(
                    result.index, "merged", id=applied.merged[result.id], reason=told, caution=result.caution
                )
            if result.outcome == "merged" and result.id and items[result.index].pinned:
                await self.pin(scope, result.id, True)  # "remember this, pinned" about a stored memory
            if result.outcome in ("stored", "merged") and result.id in applied.superseded:
                result = replace(result, superseded=applied.superseded[result.id])
            final.append(result)
        return intake.Remembered(final)

    async def _pinned_tokens(self, scope: Scope, now: float, leaving: set[str] | None = None) -> int:
        pinned = await self.store.select_memories(scope, Criteria(pinned=True), now)
        return sum(estimate_tokens(r.content) for r in pinned if r.id not in (leaving or ()))

    def _check_pin_cap(self, total: int, field: str) -> None:
        cap = self.limits.pinned_cap_tokens
        if total > cap:
            raise LimitExceededError(
                field,
                f"would bring pinned memories to {total} tokens; unpin something or shorten it",
                limit_name="limits.pinned_cap_tokens",
                limit=cap,
            )

    async def pin(self, scope: Scope, memory_id: str, pinned: bool = True) -> int:
        """Pin (or unpin) a memory: it then always comes back with recall and resume. Returns the
        tokens of all pinned memories visible here (limits.pinned_cap_tokens caps them)."""
        text_field("id", memory_id)
        await refuse_if_off(self.switch, scope, "nothing was changed")
        now = self.clock()
        found = await self.store.select_memories(scope, Criteria(ids=(memory_id,)), now)
        if not found:
            await self.why_not_current(scope, memory_id, now)
        record = found[0]
        total = await self._pinned_tokens(scope, now)
        if pinned and not record.pinned:
            total += estimate_tokens(record.content)
            self._check_pin_cap(total, "id")
        elif not pinned and record.pinned:
            total -= estimate_tokens(record.content)
        if record.pinned != pinned:
            await self.store.set_pinned(scope, record.id, pinned)
        return total

    # ----- recall --------------------------------------------------------------------------

    @in_one_transaction("store")
    async def recall(
        self,
        scope: Scope,
        query: str,
        *,
        k: int | None = None,
        budget_tokens: int | None = None,
        filters: MemoryFilter | None = None,
        explain: bool = False,
        reinforce: bool = True,
        preset: str | None = None,
        detail: Detail = "lean",
        as_of: datetime | None = None,
        floor: bool = True,
    ) -> Recollection:
        words, k, budget, preset = inputs.check_recall(query, k, budget_tokens, preset, self.limits, self.config)
        if (off := await off_reason(self.switch, scope)) is not None:
            return nothing_recalled(redacted(query), preset, budget, off, detail)
        criteria = inputs.recall_criteria(scope, filters)
        terms, now = keyword_terms(words), self.clock()
        said_from, offset, span = when.asked(words, as_of, now, self.config.timezone)
        dim, depth = await self._model_dim(scope), max(self.config.candidates, k * 3)
        (subs, left, rewrite_note), (dense, keyword, pinned), asked = await concurrently(  # the models side by side
            self.llm_stage.rewrite(scope.principal, words),
            self._searches(scope, words, terms, criteria, depth, now),
            second.question_for(self.store, self.embedder.second, scope, dim, words),
        )
        fused, said = await self._fuse(scope, words, dense, keyword, asked)
        await self._widen(scope, subs, criteria, depth, now, fused)
        found = await self._gather(scope, fused, dense, criteria, depth, now)
        scoring.keyword_blind(fused, found.records, dense, keyword, terms, self.config.keyword_weight)
        answered = await replies_to(self.store, scope, words, found.ranked, found.records, fused, criteria, now)
        span = when.anchored(span, (r.occurred_at for r in found.records.values()))  # "in June": which June
        scored = score(
            found.ranked,
            found.records,
            fused=fused,
            dense=dense,
            keyword=keyword,
            second=said,
            understanding=question.adjustments(words, found.records.values(), span, found.linked, fused, answered),
            preset=preset,
            half_life_hours=self.config.recency_half_life_hours,
            now=now,
            span=span,
        )
        below, scored = floored(scored, dense.visible, found.entity_linked, floor)
        scored, rerank_note = await self.llm_stage.rerank(scope.principal, words, scored, left)
        telling = recall.telling_terms(terms, found.records.values())  # the words a hit's reason may cite
        fit = (self.hit_cost, detail)  # each hit measured as the caller receives it
        hits, used, omitted = fit_budget(
            scored, k, budget, cost=fit, terms=telling, explain=explain, now=said_from, offset=offset, question=words
        )
        hits, used = await self._strengthened(scope, words, (dense, scored, found.records), hits, fit)
        if reinforce and hits:
            await self.store.reinforce(scope, recall.reinforced(scored, hits), now)
        counts = {"k": k, "budget": budget, "used": used, "omitted": omitted, "below": below}
        notes = (rewrite_note, rerank_note)
        return recall.answer(query, hits, pinned, **counts, detail=detail, preset=preset, notes=notes)

    async def _strengthened(
        self,
        scope: Scope,
        words: str,
        evidence: tuple[DenseHits, list[Scored], dict[str, MemoryRecord]],
        hits: list[Recalled],
        fit: tuple[HitCost, Detail],
    ) -> tuple[list[Recalled], int]:
        """``hits`` judged strong or weak (services/strength.py) on the dense search, the scored
        candidates and the records read (whose texts give a small store's ordinary its scripts)."""
        dense, scored, records = evidence
        return await with_strength(
            self.store, self.embedder, scope, words, dense, scored, hits, self.config, fit, records
        )

    async def _fuse(
        self,
        scope: Scope,
        words: str,
        dense: DenseHits,
        keyword: list[tuple[str, float]],
        asked: second.Question | None = None,
    ) -> tuple[dict[str, float], dict[str, float]]:
        """Score-aware fusion of the two searches (ADR 10), then the second model's opinion of the
        first candidates in a store that mixes scripts (ADR 14), of ``asked`` when it was asked
        already: the fused scores and that opinion."""
        identifier = looks_like_identifier_query(words)
        fused = scoring.Fusion(
            self.config.identifier_keyword_weight if identifier else self.config.keyword_weight
        ).fuse(dense, keyword)
        if not dense.centred:  # a store of one script: the first model alone
            return fused, {}
        asked = asked or await second.question(self.embedder.second, words, scope.principal, script(words))
        said = await second.opinion(self.store, scope, fused, asked, self.config.second_opinion_candidates)
        second.add(fused, said)
        return fused, said

    async def _widen(
        self, scope: Scope, queries: list[str], criteria: Criteria, depth: int, now: float, fused: dict[str, float]
    ) -> None:
        """The LLM's sub-queries searched too, at once: a memory is as relevant as its best query finds it."""

        async def fused_for(query: str) -> dict[str, float]:
            dense, keyword = await self._ranked(scope, query, keyword_terms(query), criteria, depth, now)
            return (await self._fuse(scope, query, dense, keyword))[0]

        for found in await concurrently(*(fused_for(query) for query in queries)):
            for m, value in found.items():
                fused[m] = max(fused.get(m, value), value)

    async def _searches(
        self, scope: Scope, words: str, terms: list[str], criteria: Criteria, depth: int, now: float
    ) -> tuple[DenseHits, list[tuple[str, float]], list[MemoryRecord]]:
        """The dense ranking, the keyword ranking and the pins; the keyword search and the pins need
        no vector, so they run while the question is embedded."""
        (dense, keyword), pinned = await concurrently(
            self._ranked(scope, words, terms, criteria, depth, now), self._pins(scope)
        )
        return dense, keyword, pinned

    async def _ranked(
        self, scope: Scope, words: str, terms: list[str], criteria: Criteria, depth: int, now: float
    ) -> tuple[DenseHits, list[tuple[str, float]]]:
        """One query's dense and keyword rankings, the keyword search while the query is embedded."""

        async def dense_side() -> DenseHits:
            qvec = await self.embedder.query(words, owner=scope.principal)
            return await self.store.vectors.ranking(
                scope, qvec, criteria, depth, now, await self._centring(words, qvec)
            )

        dense, keyword = await concurrently(
            dense_side(), keyword_ranking(self.store, scope, terms, criteria, depth, now)
        )
        return dense, keyword

    async def _gather(
        self, scope: Scope, fused: dict[str, float], dense: DenseHits, criteria: Criteria, depth: int, now: float
    ) -> _Gathered:
        """The best fused candidates and the memories their links reach, read in one go."""
        ranked = sorted(fused, key=lambda m: -fused[m])[:depth]
        seeds = [m for m in ranked[: scoring.LINK_SEEDS] if fused[m] > scoring.RELEVANCE_FLOOR]
        reached = await self._follow_links(scope, seeds, dense)
        for m in reached:
            fused.setdefault(m, scoring.unseen(dense))
        wanted = list(dict.fromkeys([*ranked, *reached]))
        records = {r.id: r for r in await self.store.select_memories(scope, criteria, now, among=wanted)}
        linked = {
            m: f"via link from {source} ({link_words(via)})"
            for m, (source, via) in reached.items()
            if m in records and source in records and (via or question.is_turn(records[m], records[source]))
        }
        # A memory a first hit names by a rare entity is relevant through it, however far its own words are.
        entity_linked = {m for m, (_, via) in reached.items() if via and m in records}
        return _Gathered([m for m in wanted if m in records], records, linked, entity_linked)

    async def _follow_links(self, scope: Scope, seeds: list[str], dense: DenseHits) -> dict[str, tuple[str, str]]:
        """Linked to the first hits: target -> (its seed, the entity or "" for a neighbour); first found wins."""
        if not seeds:
            return {}
        reached: dict[str, tuple[str, str]] = {}
        for link in await self.store.links(scope, seeds, dense.population):
            # a seed reached from a better seed is one answer reached twice: it gains too
            if link.target != link.source and link.target != seeds[0]:
                reached.setdefault(link.target, (link.source, link.via))
        return reached

    async def _centring(self, question: str, query: Vector) -> Centring | None:
        """What takes the language out of the dense search in a store that mixes scripts (ADR 10)."""
        return scoring.centring(await self.embedder.language_means(), script(question), query)

    async def why_not_current(self, scope: Scope, memory_id: str, now: float) -> NoReturn:
        await lookup.why_not_current(self.store, scope, memory_id, now)

    async def undo_summary(self, scope: Scope, summary_id: str) -> list[str]:
        """Undo a compression: the sources return to the active tier and the summary is deleted."""
        text_field("id", summary_id)
        found = await self.store.select_memories(
            scope, Criteria(ids=(summary_id,), include_archived=True, include_superseded=True), self.clock()
        )
        if not found:
            raise NotFoundError("summary", summary_id)
        if found[0].level == 0:
            raise InvalidInputError(
                "id", f"{summary_id!r} is a raw memory, not a summary: undo_summary takes apart level 1-3 memories"
            )
        # The sources stay faded: marked compression-resistant, so the next pass does not redo it.
        return await self.rows.undo_summary(scope, summary_id, resist=summarize.MAX_FAILURES)

    async def reopen_task(self, scope: Scope, task_id: str, root_status: str | None) -> None:
        """A task that is not (or no longer) done or abandoned has no task summary: its L3
        summaries are undone and what they held returns to recall (a rollback, a reopened root)."""
        if root_status not in ("done", "abandoned"):
            for summary_id in await self.rows.task_summaries(scope, task_id):
                await self.rows.undo_summary(scope, summary_id)

    async def change_mark(self, scope: Scope) -> int:
        """Moves with every write of any process to the principal's memories (a lifecycle pass too)."""
        return await self.store.change_mark(scope)

    async def pinned(self, scope: Scope) -> list[MemoryRecord]:
        """Every pinned memory visible in the scope, most important first (none while memory is off)."""
        if await off_reason(self.switch, scope) is not None:
            return []
        return await self._pins(scope)

    async def _pins(self, scope: Scope) -> list[MemoryRecord]:
        """The pinned memories, for a caller that has checked the switch already."""
        return await self.store.select_memories(scope, Criteria(pinned=True), self.clock(), order="importance")

    # ----- forget --------------------------------------------------------------------------

    async def forget(
        self,
        scope: Scope,
        *,
        ids: Sequence[str] | None = None,
        where: MemoryFilter | None = None,
        dry_run: bool = True,
    ) -> Forgotten:
        if (ids is None) == (where is None):
            raise InvalidInputError("ids", "give either ids or filters (exactly one of them)")
        # Memory off: nothing is read (a dry run's previews are text) and nothing goes; forget_user
        # and `mcp-memory export` stay the person's own.
        await refuse_if_off(self.switch, scope, "nothing was read or deleted")
        now = self.clock()
        criteria = inputs.forget_criteria(scope, ids, where, self.limits)
        records = await self.store.select_memories(scope, criteria, now, order="occurred")
        if ids is not None:
            missing = [i for i in dict.fromkeys(ids) if i not in {r.id for r in records}]
            if missing:
                raise NotFoundError("memory", missing[0], "recall and list_memories give the ids of your memories")
        if dry_run:
            return Forgotten(records, dry_run=True)
        deleted, scrubbed = await self.store.delete(scope, [r.id for r in records], derived=True)
        return Forgotten(records, dry_run=False, deleted=deleted, scrubbed=scrubbed)
