"""MemoryService: remember, recall and forget, inside one Scope.

Every string is redacted before it is written or logged. A call with a malformed argument
raises InvalidInputError naming the field and writes nothing; a memory that is merely not
worth keeping (an acknowledgement) is rejected per item with the reason.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import anyio
import numpy as np
import orjson

from mcp_memory.config import Limits, RecallSettings
from mcp_memory.embed.loader import Embedder
from mcp_memory.errors import InvalidInputError, LimitExceededError, NotFoundError
from mcp_memory.ids import new_id
from mcp_memory.models import (
    Criteria,
    MemoryRecord,
    Merge,
    NewMemory,
    NewOccurrence,
    Provenance,
    Scope,
    to_datetime,
    to_seconds,
)
from mcp_memory.redact import redact, redact_value
from mcp_memory.schemas import (
    ForgetFilter,
    ForgetItem,
    ForgetResult,
    MemoryInput,
    MemoryOut,
    PinResult,
    RecallFilters,
    RecallResult,
    RememberItem,
    RememberResult,
    Signals,
)
from mcp_memory.services import rules, scoring, summarize
from mcp_memory.services.checks import json_strings, text_field
from mcp_memory.services.sessions import SessionTracker
from mcp_memory.storage.lifecycle import LifecycleStore
from mcp_memory.storage.sqlite import SqliteStore
from mcp_memory.text import (
    estimate_tokens,
    keyword_terms,
    language,
    looks_like_identifier_query,
    normalize,
    segment_for_index,
    strip_query_syntax,
)

log = logging.getLogger(__name__)

_KIND = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
_MAX_TTL = 100 * 365 * 24 * 3600


@dataclass(frozen=True)
class CallContext:
    """What the transport knows about the caller, besides the Scope: provenance only."""

    provenance: Provenance = field(default_factory=Provenance)


def content_hash(namespace: str | None, content: str) -> str:
    return hashlib.sha256(f"{namespace or ''}\x1f{content.lower()}".encode()).hexdigest()


async def _concurrently(*calls: Awaitable[Any]) -> list[Any]:
    """Await all of ``calls`` at once; the first failure is raised as itself (not as a group)."""
    results: list[Any] = [None] * len(calls)
    errors: list[BaseException] = []

    async def run(i: int, call: Awaitable[Any]) -> None:
        try:
            results[i] = await call
        except Exception as exc:
            errors.append(exc)

    async with anyio.create_task_group() as tg:
        for i, call in enumerate(calls):
            tg.start_soon(run, i, call)
    if errors:
        raise errors[0]
    return results


class MemoryService:
    def __init__(
        self,
        store: SqliteStore,
        embedder: Embedder,
        limits: Limits,
        recall_config: RecallSettings,
        sessions: SessionTracker,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.clock = clock
        self.store = store
        self.rows = LifecycleStore(store)
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
            await self.store.sync(scope, dim)
        except Exception as exc:  # the first real call reports the same problem to the client
            log.warning("warm-up of the memory index failed: %s", exc)

    # ----- remember ------------------------------------------------------------------------

    def _validate(self, index: int, item: MemoryInput) -> None:
        lim = self.limits
        where = f"memories[{index}]"
        text_field(f"{where}.content", item.content)
        if not item.content.strip():
            raise InvalidInputError(f"{where}.content", "is empty; send the text to remember")
        size = len(item.content.encode("utf-8"))
        if size > lim.max_content_bytes:
            raise LimitExceededError(
                f"{where}.content",
                f"is {size} bytes; split it into smaller memories",
                limit_name="limits.max_content_bytes",
                limit=lim.max_content_bytes,
            )
        if not _KIND.match(item.kind):
            raise InvalidInputError(
                f"{where}.kind",
                "must be a lower-case word such as fact, preference, decision, event, "
                "observation or instruction (letters, digits, - and _, at most 32 characters)",
            )
        if item.importance is not None and not 0.0 <= item.importance <= 1.0:
            raise InvalidInputError(f"{where}.importance", "must be between 0 and 1")
        if len(item.tags) > lim.max_tags:
            raise LimitExceededError(
                f"{where}.tags",
                f"has {len(item.tags)} tags",
                limit_name="limits.max_tags",
                limit=lim.max_tags,
            )
        for i, tag in enumerate(item.tags):
            text_field(f"{where}.tags[{i}]", tag)
            if not tag.strip():
                raise InvalidInputError(f"{where}.tags[{i}]", "is empty; drop it or give it text")
            if len(tag) > lim.max_tag_chars:
                raise LimitExceededError(
                    f"{where}.tags[{i}]",
                    f"is {len(tag)} characters",
                    limit_name="limits.max_tag_chars",
                    limit=lim.max_tag_chars,
                )
        json_strings(f"{where}.metadata", item.metadata)
        try:
            meta_size = len(orjson.dumps(item.metadata))
        except TypeError as exc:
            raise InvalidInputError(f"{where}.metadata", f"is not JSON: {exc}") from None
        if meta_size > lim.max_metadata_bytes:
            raise LimitExceededError(
                f"{where}.metadata",
                f"is {meta_size} bytes of JSON",
                limit_name="limits.max_metadata_bytes",
                limit=lim.max_metadata_bytes,
            )
        if item.ttl_seconds is not None and not 0 < item.ttl_seconds <= _MAX_TTL:
            raise InvalidInputError(f"{where}.ttl_seconds", f"must be between 1 and {_MAX_TTL} seconds")
        for name, text in (("key", item.key), ("task_id", item.task_id), ("session_id", item.session_id)):
            if text is not None:
                text_field(f"{where}.{name}", text)
                if not text.strip() or len(text) > 200:
                    raise InvalidInputError(f"{where}.{name}", "must be 1 to 200 characters")
        if len(item.supersedes) > lim.max_batch:
            raise LimitExceededError(
                f"{where}.supersedes",
                f"lists {len(item.supersedes)} ids",
                limit_name="limits.max_batch",
                limit=lim.max_batch,
            )
        for i, ident in enumerate(item.supersedes):
            text_field(f"{where}.supersedes[{i}]", ident)
        if item.key is not None and item.supersedes:
            raise InvalidInputError(f"{where}.supersedes", "give either key or supersedes, not both")

    async def remember(self, scope: Scope, items: Sequence[MemoryInput], ctx: CallContext) -> RememberResult:
        if not items:
            raise InvalidInputError("memories", "is empty; send at least one memory")
        if len(items) > self.limits.max_batch:
            raise LimitExceededError(
                "memories",
                f"has {len(items)} items; send them in several calls",
                limit_name="limits.max_batch",
                limit=self.limits.max_batch,
            )
        for i, item in enumerate(items):
            self._validate(i, item)

        now = self.clock()
        results: list[RememberItem | None] = [None] * len(items)
        prepared: list[tuple[int, MemoryInput, str, str]] = []  # index, item, content, hash
        for i, item in enumerate(items):
            content = normalize(redact(item.content))
            if rules.is_throwaway(content):
                results[i] = RememberItem(
                    index=i, outcome="rejected", reason="an acknowledgement carries nothing worth recalling"
                )
                continue
            prepared.append((i, item, content, content_hash(scope.namespace, content)))

        new_pins = [estimate_tokens(content) for _, item, content, _ in prepared if item.pinned]
        if new_pins:
            self._check_pin_cap(await self._pinned_tokens(scope, now) + sum(new_pins), "memories.pinned")
        dim = await self._model_dim(scope)
        existing = await self.store.find_by_hash(scope, [h for *_, h in prepared], now)
        session = self.sessions.touch(scope, ctx.provenance, now)
        inserts: list[NewMemory] = []
        merges: list[Merge] = []
        batch_hash: dict[str, str] = {}
        to_embed = [
            (i, item, content, h)
            for i, item, content, h in prepared
            # a restatement of a stored memory is embedded too: it may replace what was said since
            if not self._plain(item) or h in existing or (h not in batch_hash and not batch_hash.setdefault(h, ""))
        ]
        vectors = await self.embedder.passages([c for _, _, c, _ in to_embed]) if to_embed else None
        embedded = {i: vectors[j] for j, (i, *_) in enumerate(to_embed)} if vectors is not None else {}
        batch_hash.clear()
        batch_vecs: list[tuple[np.ndarray[Any, Any], str, str, str]] = []  # vector, id, content, kind
        replaced_in_batch: set[str] = set()

        for i, item, content, h in prepared:
            occurred = to_seconds(item.occurred_at) if item.occurred_at else now
            occurrence = NewOccurrence(
                id=new_id(),
                session_key=redact(item.session_id) if item.session_id else session,
                occurred_at=occurred,
                metadata=redact_value(item.metadata),
                provenance=ctx.provenance,
            )
            target = None
            replaces: list[str] = []
            conflicts: list[str] = []
            if self._plain(item):
                target = existing.get(h) or batch_hash.get(h)
                if i in embedded:
                    close, replaces, conflicts = await self._relate(
                        scope, embedded[i], content, item.kind, batch_vecs, now, target
                    )
                    target = target or close
            if target is not None:
                fresh = tuple(r for r in replaces if r != target and r not in replaced_in_batch)
                replaced_in_batch.update(fresh)
                merges.append(Merge(target_id=target, occurrence=occurrence, seen_at=now, supersedes=fresh))
                results[i] = RememberItem(
                    index=i,
                    outcome="merged",
                    id=target,
                    reason="the same memory is already stored; this occurrence was recorded",
                )
                continue
            record = self._record(scope, item, content, h, occurred, now, occurrence.session_key, ctx)
            vector = embedded[i]
            inserts.append(
                NewMemory(
                    record=record,
                    vector=vector.astype(np.float32).tobytes(),
                    segmented=segment_for_index(content),
                    occurrence=occurrence,
                    supersedes=tuple(item.supersedes),
                    inferred_supersedes=tuple(r for r in replaces if r not in replaced_in_batch),
                    conflicts=tuple(conflicts),
                )
            )
            replaced_in_batch.update(replaces)
            batch_hash[h] = record.id
            batch_vecs.append((vector, record.id, content, item.kind))
            results[i] = RememberItem(index=i, outcome="stored", id=record.id, conflicts_with=conflicts)

        superseded = await self.store.apply(scope, inserts, merges) if inserts or merges else {}
        for result in results:  # "remember this, pinned" about something already stored pins that memory
            if result is not None and result.outcome == "merged" and result.id and items[result.index].pinned:
                await self.pin(scope, result.id, True)
        final: list[RememberItem] = []
        for result in results:
            assert result is not None
            if result.outcome in ("stored", "merged") and result.id in superseded:
                result = result.model_copy(update={"superseded": superseded[result.id]})
            final.append(result)
        log.info(
            "remember: %d stored, %d merged, %d rejected (dim %d)",
            len(inserts),
            len(merges),
            sum(r.outcome == "rejected" for r in final),
            dim,
        )
        return RememberResult(
            items=final,
            stored=sum(r.outcome == "stored" for r in final),
            merged=sum(r.outcome == "merged" for r in final),
            rejected=sum(r.outcome == "rejected" for r in final),
        )

    @staticmethod
    def _plain(item: MemoryInput) -> bool:
        """Only a memory that replaces nothing may merge into a duplicate."""
        return item.key is None and not item.supersedes

    async def _pinned_tokens(self, scope: Scope, now: float) -> int:
        pinned = await self.store.select_memories(scope, Criteria(pinned=True), now)
        return sum(estimate_tokens(r.content) for r in pinned)

    def _check_pin_cap(self, total: int, field: str) -> None:
        cap = self.limits.pinned_cap_tokens
        if total > cap:
            raise LimitExceededError(
                field,
                f"would bring pinned memories to {total} tokens; unpin something or shorten it",
                limit_name="limits.pinned_cap_tokens",
                limit=cap,
            )

    async def pin(self, scope: Scope, memory_id: str, pinned: bool = True) -> PinResult:
        """Pin (or unpin) a memory: it then always comes back with recall and resume."""
        text_field("id", memory_id)
        now = self.clock()
        found = await self.store.select_memories(scope, Criteria(ids=(memory_id,)), now)
        if not found:
            raise NotFoundError("memory", memory_id)
        record = found[0]
        total = await self._pinned_tokens(scope, now)
        if pinned and not record.pinned:
            total += estimate_tokens(record.content)
            self._check_pin_cap(total, "id")
        elif not pinned and record.pinned:
            total -= estimate_tokens(record.content)
        if record.pinned != pinned:
            await self.store.set_pinned(scope, record.rowid, pinned)
        return PinResult(id=memory_id, pinned=pinned, pinned_tokens=total, cap_tokens=self.limits.pinned_cap_tokens)

    async def _relate(
        self,
        scope: Scope,
        vector: np.ndarray[Any, Any],
        content: str,
        kind: str,
        batch: list[tuple[np.ndarray[Any, Any], str, str, str]],
        now: float,
        merge_into: str | None = None,
    ) -> tuple[str | None, list[str], list[str]]:
        """What a new memory is to the close ones already stored: (merge into, supersedes, conflicts with).

        Rules in ``rules.relation``: the same statement merges; a word-for-word denial or a stated
        change supersedes (history kept); a swapped preference or decision is kept and flagged.
        A restatement (``merge_into``, or a close equal found here) is the user's latest word
        too: what it replaces is superseded although the memory itself is not stored again.
        """
        model = await self.embedder.ready()
        duplicate = self.config.duplicate_similarity or model.duplicate_similarity
        related = min(model.related_similarity, duplicate)
        candidates: list[tuple[float, str, str, str]] = [
            (float(other @ vector), other_id, other_content, other_kind)
            for other, other_id, other_content, other_kind in batch
        ]
        hits = await self.store.dense_search(scope, vector, Criteria(namespace_only=True), 5, now)
        close = {n: score for n, score in hits if score >= related}
        if close:
            stored = await self.store.select_memories(scope, Criteria(namespace_only=True), now, ns=list(close))
            candidates.extend((close[r.rowid], r.id, r.content, r.kind) for r in stored)
        supersede: list[str] = []
        conflicts: list[str] = []
        for score, other_id, other_content, other_kind in sorted(candidates, key=lambda c: -c[0]):
            if other_kind != kind or score < related:
                continue
            if other_id == merge_into:
                continue
            relation = rules.relation(other_content, content, kind)
            if relation == "same" and score >= duplicate:
                merge_into = merge_into or other_id
                continue
            if relation in ("negation", "changed"):
                supersede.append(other_id)
            elif relation == "conflict":
                conflicts.append(other_id)
        if merge_into is not None:
            return merge_into, [i for i in supersede if i != merge_into], []
        return None, supersede, conflicts

    def _record(
        self,
        scope: Scope,
        item: MemoryInput,
        content: str,
        h: str,
        occurred: float,
        now: float,
        session: str | None,
        ctx: CallContext,
    ) -> MemoryRecord:
        importance = item.importance if item.importance is not None else rules.estimate_importance(content, item.kind)
        tags = sorted({redact(t.strip()) for t in item.tags})
        return MemoryRecord(
            id=new_id(),
            namespace=scope.namespace,
            kind=item.kind,
            content=content,
            key=redact(item.key) if item.key else None,
            tags=tags,
            metadata=redact_value(item.metadata),
            importance=importance,
            pinned=item.pinned,
            occurred_at=occurred,
            created_at=now,
            last_accessed_at=None,
            access_count=0,
            valid_from=occurred,
            valid_to=None,
            superseded_by=None,
            expires_at=now + item.ttl_seconds if item.ttl_seconds else None,
            tier="active",
            level=0,
            language=language(content),
            session_key=session,
            task_id=redact(item.task_id) if item.task_id else None,
            provenance=ctx.provenance,
            content_hash=h,
        )

    # ----- recall --------------------------------------------------------------------------

    def _criteria(self, scope: Scope, filters: RecallFilters | None) -> Criteria:
        if filters is None:
            return Criteria()
        if filters.namespace is not None and filters.namespace != scope.namespace:
            raise InvalidInputError(
                "filters.namespace",
                f"{filters.namespace!r} is not visible on this connection; "
                f"its namespace is {scope.namespace!r} (plus principal-wide memories)",
            )
        for name, values in (("kinds", filters.kinds), ("tags", filters.tags)):
            for i, value in enumerate(values or []):
                text_field(f"filters.{name}[{i}]", value)
        if filters.task_id is not None:
            text_field("filters.task_id", filters.task_id)
        after = to_seconds(filters.occurred_after) if filters.occurred_after else None
        before = to_seconds(filters.occurred_before) if filters.occurred_before else None
        if after is not None and before is not None and after >= before:
            raise InvalidInputError("filters.occurred_after", "must be earlier than filters.occurred_before")
        return Criteria(
            kinds=tuple(filters.kinds) if filters.kinds else None,
            tags=tuple(filters.tags) if filters.tags else None,
            occurred_after=after,
            occurred_before=before,
            task_id=filters.task_id,
            namespace_only=filters.namespace is not None,
            include_superseded=filters.include_superseded,
            include_archived=filters.include_archived,
            include_expired=filters.include_expired,
        )

    async def recall(
        self,
        scope: Scope,
        query: str,
        *,
        k: int | None = None,
        budget_tokens: int | None = None,
        filters: RecallFilters | None = None,
        explain: bool = False,
        reinforce: bool = True,
        preset: str | None = None,
    ) -> RecallResult:
        lim = self.limits
        text_field("query", query)
        if len(query) > lim.max_query_chars:
            raise LimitExceededError(
                "query",
                f"is {len(query)} characters",
                limit_name="limits.max_query_chars",
                limit=lim.max_query_chars,
            )
        words = strip_query_syntax(query)
        if not words:
            raise InvalidInputError("query", "has no words to search for; ask a question in words")
        k = self.config.default_k if k is None else k
        if not 1 <= k <= lim.max_k:
            raise LimitExceededError("k", f"is {k}; use 1 to {lim.max_k}", limit_name="limits.max_k", limit=lim.max_k)
        budget = lim.default_recall_budget_tokens if budget_tokens is None else budget_tokens
        if not 1 <= budget <= lim.max_recall_budget_tokens:
            raise LimitExceededError(
                "budget_tokens",
                f"is {budget}; use 1 to {lim.max_recall_budget_tokens}",
                limit_name="limits.max_recall_budget_tokens",
                limit=lim.max_recall_budget_tokens,
            )
        preset = preset or self.config.preset
        if preset not in scoring.PRESETS:
            raise InvalidInputError("preset", f"must be one of {sorted(scoring.PRESETS)}")
        criteria = self._criteria(scope, filters)
        now = self.clock()

        await self._model_dim(scope)
        depth = max(self.config.candidates, k * 3)

        async def dense_side() -> list[tuple[int, float]]:
            qvec = await self.embedder.query(words)
            return await self.store.dense_search(scope, qvec, criteria, depth, now)

        # The keyword search and the pins need no vector: they run while the question is embedded.
        dense, keyword, pinned = await _concurrently(
            dense_side(),
            self.store.keyword_search(scope, keyword_terms(words), criteria, depth, now),
            self.pinned(scope),
        )
        keyword_weight = (
            self.config.identifier_keyword_weight if looks_like_identifier_query(words) else self.config.keyword_weight
        )
        fusion = scoring.Fusion(self.config.dense_weight, keyword_weight, self.config.rrf_k)
        dense_rank = {n: r for r, (n, _) in enumerate(dense, start=1)}
        keyword_rank = {n: r for r, (n, _) in enumerate(keyword, start=1)}
        fused = fusion.fuse(dense_rank, keyword_rank)
        ranked = sorted(fused, key=lambda n: -fused[n])[:depth]
        records = {r.rowid: r for r in await self.store.select_memories(scope, criteria, now, ns=ranked)}
        dense_score, keyword_score = dict(dense), dict(keyword)

        scored: list[tuple[float, MemoryRecord, Signals]] = []
        for n in ranked:
            record = records.get(n)
            if record is None or record.pinned:
                continue
            hours = (now - (record.last_accessed_at or record.created_at)) / 3600
            t = scoring.recency(hours, self.config.recency_half_life_hours)
            f = scoring.frequency(record.access_count)
            v = scoring.value(preset, fused[n], t, f, record.importance)
            signals = Signals(
                dense=dense_score.get(n),
                dense_rank=dense_rank.get(n),
                keyword=keyword_score.get(n),
                keyword_rank=keyword_rank.get(n),
                relevance=round(fused[n], 6),
                recency=round(t, 6),
                frequency=f,
                importance=record.importance,
                value=round(v, 6),
            )
            scored.append((v, record, signals))
        scored.sort(key=lambda item: -item[0])
        scored = scoring.newer_side_first(scored)

        hits: list[MemoryOut] = []
        used = 0
        omitted = 0
        for _, record, signals in scored:
            if len(hits) >= k:
                break
            hit = self.to_out(record, signals if explain else None)
            if used + hit.tokens > budget:
                omitted += 1
                continue
            used += hit.tokens
            hits.append(hit)
        if reinforce and hits:
            await self.store.reinforce(scope, [h.id for h in hits], now)
        return RecallResult(
            query=query,
            hits=hits,
            pinned=pinned,
            preset=preset,
            budget_tokens=budget,
            used_tokens=used,
            omitted_for_budget=omitted,
        )

    async def undo_summary(self, scope: Scope, summary_id: str) -> list[str]:
        """Undo a compression: the sources return to the active tier and the summary is deleted."""
        text_field("id", summary_id)
        found = await self.store.select_memories(
            scope, Criteria(ids=(summary_id,), include_archived=True, include_superseded=True), self.clock()
        )
        if not found or found[0].level == 0:
            raise NotFoundError("summary", summary_id)
        # The sources stay faded: marked compression-resistant, so the next pass does not redo it.
        return await self.rows.undo_summary(scope, summary_id, resist=summarize.MAX_FAILURES)

    async def pinned(self, scope: Scope) -> list[MemoryOut]:
        """Every pinned memory visible in the scope, most important first."""
        records = await self.store.select_memories(
            scope, Criteria(pinned=True), self.clock(), order="m.importance DESC, m.n"
        )
        return [self.to_out(r) for r in records]

    @staticmethod
    def to_out(record: MemoryRecord, why: Signals | None = None) -> MemoryOut:
        def dt(seconds: float) -> datetime:
            moment = to_datetime(seconds)
            assert moment is not None
            return moment

        out = MemoryOut(
            id=record.id,
            text=record.content,
            kind=record.kind,
            tags=record.tags,
            metadata=record.metadata,
            importance=record.importance,
            pinned=record.pinned,
            namespace=record.namespace,
            key=record.key,
            occurred_at=dt(record.occurred_at),
            created_at=dt(record.created_at),
            last_accessed_at=to_datetime(record.last_accessed_at),
            access_count=record.access_count,
            valid_from=dt(record.valid_from),
            valid_to=to_datetime(record.valid_to),
            superseded_by=record.superseded_by,
            expires_at=to_datetime(record.expires_at),
            tier=record.tier,
            level=record.level,
            language=record.language,
            session_key=record.session_key,
            task_id=record.task_id,
            client_name=record.provenance.client_name,
            transport=record.provenance.transport,
            occurrence_ids=record.occurrence_ids,
            conflicts_with=record.conflicts_with,
            source_ids=record.source_ids,
            tokens=0,
            why=why,
        )
        # What a budget counts: the hit as the caller receives it, every field included.
        out.tokens = estimate_tokens(orjson.dumps(out.model_dump(mode="json")).decode())
        return out

    # ----- forget --------------------------------------------------------------------------

    async def forget(
        self,
        scope: Scope,
        *,
        ids: Sequence[str] | None = None,
        where: ForgetFilter | None = None,
        dry_run: bool = True,
    ) -> ForgetResult:
        if (ids is None) == (where is None):
            raise InvalidInputError("ids", "give either ids or filters (exactly one of them)")
        now = self.clock()
        everything = Criteria(include_superseded=True, include_archived=True, include_expired=True)
        if ids is not None:
            if not ids:
                raise InvalidInputError("ids", "is empty; list the ids to forget")
            if len(ids) > self.limits.max_forget_ids:
                raise LimitExceededError(
                    "ids",
                    f"lists {len(ids)} ids",
                    limit_name="limits.max_forget_ids",
                    limit=self.limits.max_forget_ids,
                )
            for i, ident in enumerate(ids):
                text_field(f"ids[{i}]", ident)
            criteria = replace(everything, ids=tuple(dict.fromkeys(ids)))
        else:
            assert where is not None
            if not any((where.tags, where.kinds, where.occurred_after, where.occurred_before, where.task_id)):
                raise InvalidInputError(
                    "filters",
                    "is empty; give tags, kinds, occurred_after, occurred_before or task_id "
                    "(forgetting everything at once is not offered)",
                )
            as_recall = RecallFilters(
                kinds=where.kinds,
                tags=where.tags,
                occurred_after=where.occurred_after,
                occurred_before=where.occurred_before,
                task_id=where.task_id,
            )
            narrowed = self._criteria(scope, as_recall)
            criteria = replace(narrowed, include_superseded=True, include_archived=True, include_expired=True)
        records = await self.store.select_memories(scope, criteria, now, order="m.occurred_at, m.n")
        if ids is not None:
            missing = [i for i in dict.fromkeys(ids) if i not in {r.id for r in records}]
            if missing:
                raise NotFoundError("memory", missing[0])
        items = [
            ForgetItem(id=r.id, kind=r.kind, preview=r.content[:80], occurred_at=to_datetime(r.occurred_at))
            for r in records
        ]
        if dry_run:
            return ForgetResult(
                dry_run=True,
                matched=len(records),
                deleted=0,
                items=items,
                note="dry run: nothing was deleted; call again with dry_run=false to delete these",
            )
        going = {r.id for r in records}
        for summary_id in await self.rows.summaries_of(scope, list(going)):
            if summary_id not in going:  # a summary of something forgotten goes too; its other sources return
                await self.rows.undo_summary(scope, summary_id)
        deleted, scrubbed = await self.store.delete(scope, [r.rowid for r in records])
        note = "deleted from every table and index; freed pages zeroed and the write-ahead log emptied"
        if not scrubbed:
            note = (
                "deleted from every table and index; another process is reading the store, so the write-ahead "
                "log keeps old pages until it lets go: they are wiped at a later write"
            )
        return ForgetResult(dry_run=False, matched=len(records), deleted=deleted, items=items, note=note)
