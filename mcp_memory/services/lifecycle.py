"""LifecycleService: the deliberate forgetting passes (ADR 7). Decay is the first of them.

    R = exp(-t / S)    t: hours since the last access (or creation)
    S = base x (1 + 4 x importance) x (1 + ln(1 + access_count))

Below ``evict_threshold`` with importance < 0.5 a memory is evicted (archived by default, or
deleted); below ``compress_threshold`` and idle for a day it is a candidate for compression.
Pinned memories never decay. The curve is ``scoring.retention``, the one recall's recency uses.

Consolidation: what the user holds (preferences, constraints) is not summarized with the session
it was said in; the same statement made in two or more sessions and stored twice (a wording the
write-time merge could not prove equal) becomes one semantic fact carrying every occurrence, with
its sources linked and archived, undoable like a summary.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio

from mcp_memory.config import LifecycleSettings
from mcp_memory.core.envelope import unpack
from mcp_memory.core.errors import ConflictError, StorageError, UpstreamError
from mcp_memory.core.ids import new_id
from mcp_memory.core.models import SCHEDULER, MemoryRecord, NewMemory, NewOccurrence, Scope, TaskSummaryRow
from mcp_memory.core.prompt_files import template
from mcp_memory.core.task_model import TaskHead
from mcp_memory.core.text import estimate_tokens, language, normalize, segment_for_index
from mcp_memory.embed.loader import Embedder
from mcp_memory.llm.client import LlmClient
from mcp_memory.services import consolidation, scoring, second, summarize
from mcp_memory.services.intake import content_hash
from mcp_memory.services.ports import MemoryStore

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)
MIN_GROUP = 3
MAX_GROUP = 40  # memories per summary: a longer session becomes several summaries, in time order
MAX_GROUPS_PER_PASS = 50  # summaries tried per principal, level and pass
TASK_IDLE_HOURS = 24  # a finished task is summarized once it has not changed for this long
SEMANTIC_KINDS = ("preference", "constraint")  # held by the user: consolidated, never summarized away
MAX_NEW_PER_PASS = 2_000  # memories a consolidation pass compares with all those before them
CHANGES_KEPT = 10_000  # change-log entries kept for other processes (one further behind reloads its index)


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
    aggressive: bool = False
    archived: list[str] = field(default_factory=list)  # ids moved to the archive tier


@dataclass(frozen=True)
class ConsolidateOutcome:
    facts: int
    consolidated: int
    made: list[str] = field(default_factory=list)  # the facts' ids


@dataclass(frozen=True)
class CompressOutcome:
    summaries: int  # at every level
    summarized: int
    failed: int
    phase_summaries: int = 0  # L2
    task_summaries: int = 0  # L3
    made: list[str] = field(default_factory=list)  # the summaries' ids, in the order written


@dataclass(frozen=True)
class _Tally:
    summaries: int
    summarized: int
    failed: int
    made: list[str]


@dataclass(frozen=True)
class _Group:
    """Memories one summary is to replace, and what the prompt calls them."""

    namespace: str | None
    level: int
    members: list[MemoryRecord]
    subject: str
    header: str | None = None  # a line from the task's record (L3), given to the check as a source
    task_id: str | None = None
    context: str = ""  # what the prompt says before the memories


@dataclass(frozen=True)
class UpkeepOutcome:
    erased: int
    changes_pruned: int


class LifecycleService:
    def __init__(
        self, store: MemoryStore, embedder: Embedder, settings: LifecycleSettings, llm: LlmClient | None = None
    ) -> None:
        self.llm = llm
        self.store = store
        self.rows = store.lifecycle
        self.embedder = embedder
        self.settings = settings

    async def decay(self, scope: Scope, now: float, keep: frozenset[str] = frozenset()) -> DecayOutcome:
        """One decay pass over the principal's active, unpinned memories (every namespace); the
        memories in ``keep`` (what answers the golden queries now) are never evicted."""
        cfg = self.settings
        rows = await self.rows.decay_rows(scope)
        # Over the watermark a pass evicts more: below four times the threshold with importance up
        # to 0.7, the faintest first, only until the store is back under the watermark.
        target = int(cfg.capacity * cfg.watermark)
        aggressive = len(rows) > target
        evict: dict[str, tuple[float, float]] = {}  # id -> (retention, the threshold it fell under)
        extra: list[tuple[float, str]] = []  # (retention, id): evictable only over the watermark
        deep = min(cfg.evict_threshold * 4, cfg.compress_threshold)
        compress = 0
        for memory_id, importance, access_count, last_touch in rows:
            idle = max(now - last_touch, 0.0) / 3600
            r = retention(idle, cfg.decay_base_hours, importance, access_count)
            if r < cfg.evict_threshold and importance < 0.5 and memory_id not in keep:
                evict[memory_id] = (r, cfg.evict_threshold)
            elif (
                aggressive
                and r < min(cfg.evict_threshold * 4, cfg.compress_threshold)
                and importance < 0.7
                and memory_id not in keep
            ):
                extra.append((r, memory_id))
            elif r < cfg.compress_threshold and idle >= 24:
                compress += 1
        over = len(rows) - len(evict) - target
        if over > 0:
            # the faintest first; equal ones in the order they were written (decay_rows' order)
            evict.update((memory_id, (r, deep)) for r, memory_id in sorted(extra, key=lambda e: e[0])[:over])
        evicted, archived = 0, []
        if evict:
            if cfg.evict_action == "delete":
                evicted, _ = await self.store.delete(scope, list(evict), unpinned_only=True, event="evicted")
            else:
                archived = await self.rows.archive(scope, evict)
                evicted = len(archived)
        return DecayOutcome(
            examined=len(rows), evicted=evicted, compress_candidates=compress, aggressive=aggressive, archived=archived
        )

    async def upkeep(self, scope: Scope, now: float) -> UpkeepOutcome:
        """Erase what has expired (its text gone from the file, as a forget leaves it) and keep the
        change log to its last CHANGES_KEPT entries (ADR 1)."""
        expired = await self.rows.expired(scope, now)
        erased = (await self.store.delete(scope, expired, event="expired"))[0] if expired else 0
        pruned = await self.rows.prune_changes(scope, CHANGES_KEPT)
        return UpkeepOutcome(erased=erased, changes_pruned=pruned)

    async def second_vectors(self, scope: Scope) -> int:
        """Give memories written without it the second model's vector (at most a pass's share)."""
        if self.embedder.second is None:
            return 0
        model = await self.embedder.ready()
        if not await second.mixes(self.store, scope, model.dim, []):
            return 0  # asked only in a store that mixes scripts
        return await second.fill(self.store, self.embedder.second, scope)

    def _compressible(self, record: MemoryRecord, now: float) -> bool:
        idle = max(now - (record.last_accessed_at or record.created_at), 0.0) / 3600
        r = retention(idle, self.settings.decay_base_hours, record.importance, record.access_count)
        return idle >= 24 and r < self.settings.compress_threshold

    async def compress(self, scope: Scope, now: float, written_at: float | None = None) -> CompressOutcome:
        """Hierarchical compression, one level after the other; the sources of a summary are archived.

        - L1: faded raw memories of one session (or of one task) become a summary.
        - L2: faded L1 summaries of one phase (a task's, else those of one ISO week in a namespace)
          become a phase summary.
        - L3: a task finished (its root done or abandoned) and idle for a day: what is left of it
          at levels 0-2 becomes one task summary, opened by a line made from the task's record.

        Every summary is checked (``summarize.check``: at most 30% of its sources' tokens, 85% of
        their identifiers and sampled facts); one that fails is not written and its sources are
        marked, so after summarize.MAX_FAILURES tries they are left alone (compression-resistant).
        At most MAX_GROUPS_PER_PASS groups are tried per level and pass.
        """
        stamp = now if written_at is None else written_at  # `maintain --as-of`: judged then, dated now
        # Finished tasks first: their memories go into the task summary whole, not session by
        # session. Each level has its own share of tries: sessions that keep failing the check
        # must not starve the task and phase summaries.
        tasks = await self._summarize_groups(scope, await self._task_groups(scope, now), stamp, MAX_GROUPS_PER_PASS)
        groups = await self._session_groups(scope, now)
        done = await self._summarize_groups(scope, groups, stamp, MAX_GROUPS_PER_PASS)
        phases = await self._summarize_groups(scope, await self._phase_groups(scope, now), stamp, MAX_GROUPS_PER_PASS)
        return CompressOutcome(
            summaries=done.summaries + phases.summaries + tasks.summaries,
            summarized=done.summarized + phases.summarized + tasks.summarized,
            failed=done.failed + phases.failed + tasks.failed,
            phase_summaries=phases.summaries,
            task_summaries=tasks.summaries,
            made=[*tasks.made, *done.made, *phases.made],
        )

    async def _session_groups(self, scope: Scope, now: float) -> list[_Group]:
        keyed: dict[tuple[str | None, str], list[MemoryRecord]] = {}
        for record in await self.rows.compression_candidates(scope, summarize.MAX_FAILURES, SEMANTIC_KINDS):
            group = (
                f"task:{record.task_id}"
                if record.task_id
                else (f"session:{record.session_key}" if record.session_key else None)
            )
            if group is not None and self._compressible(record, now):
                keyed.setdefault((record.namespace, group), []).append(record)
        return _grouped(keyed, 1, "the memories of one conversation session (or of one task's work)")

    async def _phase_groups(self, scope: Scope, now: float) -> list[_Group]:
        keyed: dict[tuple[str | None, str], list[MemoryRecord]] = {}
        candidates = await self.rows.compression_candidates(scope, summarize.MAX_FAILURES, SEMANTIC_KINDS, levels=(1,))
        for record in candidates:
            if self._compressible(record, now):
                week = time.strftime("%G-W%V", time.gmtime(record.occurred_at))
                phase = f"task:{record.task_id}" if record.task_id else f"week:{week}"
                keyed.setdefault((record.namespace, phase), []).append(record)
        return _grouped(keyed, 2, "summaries of the sessions of one phase of work (one task, or one week)")

    async def _task_groups(self, scope: Scope, now: float) -> list[_Group]:
        groups: list[_Group] = []
        for row in await self.rows.tasks_with_memories(scope, now - TASK_IDLE_HOURS * 3600):
            try:
                structured = unpack(row.head).structured
                tree = TaskHead.model_validate({**structured.get("head", structured), "snapshot": ""}).tree
            except (StorageError, ValueError) as exc:  # corrupt, or from a newer format
                log.info("task %s not summarized: its head cannot be read (%s)", row.task_id, exc)
                continue
            if tree is None or tree.status not in ("done", "abandoned"):
                continue
            members = await self.rows.compression_candidates(
                scope, summarize.MAX_FAILURES, SEMANTIC_KINDS, levels=(0, 1, 2), task_id=row.task_id
            )
            header = _task_line(row, tree.status, [m.content for m in members])
            by_namespace: dict[str | None, list[MemoryRecord]] = {}
            for member in members:  # a summary never carries text into a namespace it was not in
                if row.namespace is None or member.namespace == row.namespace:  # nor a namespaced task's line
                    by_namespace.setdefault(member.namespace, []).append(member)
            groups.extend(
                _Group(
                    namespace,
                    3,
                    chunk,
                    "what is left of one finished task",
                    header,
                    row.task_id,
                    f"The task, from its record: {header} Its goal: {row.goal}\n\n",
                )
                for namespace, part in by_namespace.items()
                for chunk in _chunks(part, MAX_GROUP)
                if len(chunk) >= MIN_GROUP
            )
        return groups

    async def _summarize_groups(self, scope: Scope, groups: list[_Group], now: float, limit: int) -> _Tally:
        summaries = summarized = failed = 0
        made: list[str] = []
        for group in groups[: max(limit, 0)]:
            texts = [m.content for m in group.members]
            sources = [group.header, *texts] if group.header else texts
            summary = await self._summarize(scope, sources, group)
            if summarize.check(sources, summary) is not None:
                await self.rows.record_compression_failure(scope, [m.id for m in group.members])
                await self.rows.count_fact_check(scope, group.namespace, passed=False)
                failed += 1
                continue
            model = await self.embedder.ready()
            await self.store.check_model(scope, model.model_id, model.dim)
            vector = (await self.embedder.passages([summary.text], owner=scope.principal))[0]
            memory = self._summary_memory(
                group.namespace, group.members, summary.text, vector, now, group.level, group.task_id
            )
            try:
                await self.store.apply(scope, [memory], [])
            except ConflictError:
                continue  # a source was forgotten, pinned or replaced meanwhile: the next pass looks again
            await self.rows.count_fact_check(scope, group.namespace, passed=True)
            made.append(memory.record.id)
            summaries += 1
            summarized += len(group.members)
        return _Tally(summaries=summaries, summarized=summarized, failed=failed, made=made)

    async def consolidate(self, scope: Scope, now: float, written_at: float | None = None) -> ConsolidateOutcome:
        """Statements of one preference or constraint from two or more sessions become one fact.

        Two memories are one statement when they are close (cosine at the model's "related"
        level) and ``rules.same_facts`` holds (ADR 5: identifiers, numbers, dates, names and
        negation agree, no value swapped). The fact takes the wording said last, every occurrence
        of its sources, their conflicts and their use; the sources are linked and archived in the
        same transaction, and ``undo_summary`` takes it apart.
        """
        # Each memory is compared once with every one before it, when it is new: a pass takes up
        # to MAX_NEW_PER_PASS new ones, so a large store is covered over passes, none left out.
        # Nothing new: nothing else is read.
        mark = await self.rows.consolidation_mark(scope)
        new_ones = await self.rows.consolidation_candidates(scope, SEMANTIC_KINDS, after=mark, limit=MAX_NEW_PER_PASS)
        if not new_ones:
            return ConsolidateOutcome(facts=0, consolidated=0)
        fresh = {r.id for r in new_ones}
        records = await self.rows.consolidation_candidates(scope, SEMANTIC_KINDS)
        model = await self.embedder.ready()
        related = min(model.related_similarity, model.duplicate_similarity)
        vectors = await self.rows.vectors(scope, [r.id for r in records])
        records = [r for r in records if r.id in vectors]
        groups = consolidation.same_fact_groups(records, vectors, fresh, related)
        facts = consolidated = 0
        made: list[str] = []
        done = True  # every group was looked at: the new memories need not be compared again
        for members in groups:
            if facts >= MAX_GROUPS_PER_PASS:
                done = False  # the rest waits for the next pass, which compares the same new ones again
                break
            occurrences = await self.rows.occurrences(scope, [m.id for m in members])
            if len({o.session_key for found in occurrences.values() for o in found}) < 2:
                continue  # said twice in one session is not yet a fact the user holds
            fact = consolidation.consolidated_fact(
                members, occurrences, vectors, now if written_at is None else written_at
            )
            try:
                await self.store.apply(scope, [fact], [])
            except ConflictError:
                done = False  # a source changed since it was read: the next pass looks again
                continue
            facts += 1
            consolidated += len(members)
            made.append(fact.record.id)
        if done:
            await self.rows.mark_consolidated(scope, max(r.written for r in new_ones))
        return ConsolidateOutcome(facts=facts, consolidated=consolidated, made=made)

    async def _summarize(self, scope: Scope, texts: list[str], group: _Group) -> summarize.Summary:
        """The LLM's summary when it is configured, answers and passes the check; else the extractive one."""
        if self.llm is not None:
            source_tokens = sum(estimate_tokens(t) for t in texts)
            prompt = template("summarize").format(
                subject=group.subject,
                context=group.context,
                max_tokens=int(source_tokens * summarize.MAX_RATIO),
                memories="\n".join(f"- {m.content}" for m in group.members),
            )
            try:
                answer = await self.llm.complete_json(scope.principal, prompt)
            except UpstreamError as exc:
                log.info("LLM summary unavailable, using the extractive one: %s", exc)
            else:
                candidate = summarize.measure(texts, normalize(str(answer.get("summary", ""))))
                problem = summarize.check(texts, candidate)
                if problem is None:
                    return candidate
                log.info("LLM summary rejected (%s); using the extractive one", problem)
        # CPU work on a worker thread: a pass must never stall the requests of the process.
        return await anyio.to_thread.run_sync(summarize.extractive, texts)

    @staticmethod
    def _summary_memory(
        namespace: str | None,
        members: list[MemoryRecord],
        text: str,
        vector: np.ndarray,
        now: float,
        level: int = 1,
        task_id: str | None = None,
    ) -> NewMemory:
        """A summary of ``members``; it belongs to ``task_id``, else to their task if they share one."""
        import numpy as np

        tasks = {m.task_id for m in members}
        first = min(m.occurred_at for m in members)
        record = MemoryRecord(
            id=new_id(),
            namespace=namespace,
            kind="summary",
            content=text,
            key=None,
            tags=sorted({t for m in members for t in m.tags}),
            metadata={"summary_of": len(members)},
            importance=max(m.importance for m in members),
            pinned=False,
            occurred_at=first,
            created_at=now,
            last_accessed_at=None,
            access_count=0,
            valid_from=first,
            valid_to=None,
            superseded_by=None,
            expires_at=None,
            tier="active",
            level=level,
            language=language(text),
            session_key=members[0].session_key,
            task_id=task_id or (tasks.pop() if len(tasks) == 1 else None),
            provenance=SCHEDULER,
            content_hash=content_hash(namespace, text),
        )
        occurrence = NewOccurrence(
            id=new_id(), session_key=record.session_key, occurred_at=now, metadata={}, provenance=SCHEDULER
        )
        return NewMemory(
            record=record,
            vector=np.asarray(vector, np.float32),
            segmented=segment_for_index(text),
            occurrence=occurrence,
            summarizes=tuple(m.id for m in members),
        )


def _grouped(keyed: dict[tuple[str | None, str], list[MemoryRecord]], level: int, subject: str) -> list[_Group]:
    """Each group in runs of at most MAX_GROUP, in time order; runs under MIN_GROUP wait."""
    return [
        _Group(namespace, level, chunk, subject)
        for (namespace, _), members in keyed.items()
        for chunk in _chunks(sorted(members, key=lambda m: (m.occurred_at, m.id)), MAX_GROUP)
        if len(chunk) >= MIN_GROUP
    ]


def _task_line(task: TaskSummaryRow, status: str, texts: list[str]) -> str:
    """The opening line of a task summary, from the task's record, in the language of its memories.

    It is one of the summary's sources (the check holds the summary to it like to the memories);
    the goal stays in the task's record, shown to the LLM as context, to keep the line short."""
    day = time.strftime("%Y-%m-%d", time.gmtime(task.updated_at))
    if language(" ".join(texts)) in ("zh", "ja"):
        state = "完成" if status == "done" else "放弃"
        return f"任务「{task.title}」（{task.task_id}）于 {day} {state}。"
    return f"Task {task.title} ({task.task_id}): {status} on {day}."


def _chunks(members: list[MemoryRecord], size: int) -> list[list[MemoryRecord]]:
    """Consecutive runs of ``size``; a tail too short to summarize joins the run before it."""
    runs = [members[i : i + size] for i in range(0, len(members), size)]
    if len(runs) > 1 and len(runs[-1]) < MIN_GROUP:
        runs[-2].extend(runs.pop())
    return runs
