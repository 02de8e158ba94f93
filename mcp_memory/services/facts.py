"""FactService: the LLM's two passes over the facts the user holds, off the request path.

- Conflict judgement: a pair the rules flagged ("likes cats" / "likes dogs") is put to the LLM
  once. "replaces" supersedes the older side (history kept), "both_true" lifts the flag, and
  "unsure" (or an answer that is not one of these) leaves both sides flagged for the user.
- Fact extraction: raw memories written since the last pass are read in batches; the LLM lists
  the preferences, constraints and decisions they state, and each becomes a memory of its own,
  stored through ``MemoryService.remember`` (so the write-time rules merge, supersede or flag it)
  and linked to its source, so forgetting the source takes the fact with it.

An extracted fact must be grounded in its memory: no identifier the memory does not have, most
of its words from it, the memory's language. Without an LLM neither pass runs: conflicts stay
flagged for the user, and facts are the memories clients stored as preferences and constraints
(README). When the LLM fails nothing is written and the mark does not move: the next pass retries.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from mcp_memory.core.errors import LlmPausedError, MemoryServerError, UpstreamError
from mcp_memory.core.models import SCHEDULER, MemoryDraft, MemoryRecord, Scope, to_datetime
from mcp_memory.core.prompt_files import template
from mcp_memory.core.text import identifiers, language, normalize
from mcp_memory.llm.client import LlmClient
from mcp_memory.services import summarize
from mcp_memory.services.memory import CallContext, MemoryService
from mcp_memory.services.ports import MemoryStore

log = logging.getLogger(__name__)
JUDGEMENTS_PER_PASS = 20
EXTRACTION_BATCH = 20  # memories per LLM call
EXTRACTION_BATCHES_PER_PASS = 3
FACTS_PER_MEMORY = 3
MAX_FACT_CHARS = 500
FACT_KINDS = ("preference", "constraint", "decision")
VERDICTS = ("replaces", "both_true", "unsure")
GIVE_UP_AFTER = 3  # failed calls (not pauses) on one pair or one batch before it is left alone
_CONTEXT = CallContext(provenance=SCHEDULER)


@dataclass(frozen=True)
class JudgeOutcome:
    judged: int = 0
    superseded: int = 0
    cleared: int = 0


@dataclass(frozen=True)
class ExtractOutcome:
    facts: int = 0
    refused: int = 0  # facts the LLM listed that were not grounded in their memory
    skipped: int = 0  # memories given up on after GIVE_UP_AFTER failed calls


class FactService:
    def __init__(self, store: MemoryStore, memory: MemoryService, llm: LlmClient | None) -> None:
        self.rows = store.lifecycle
        self.memory = memory
        self.llm = llm

    async def judge_conflicts(self, scope: Scope, now: float) -> JudgeOutcome:
        """Put flagged pairs to the LLM, at most JUDGEMENTS_PER_PASS; stops when the LLM is paused.
        A pair that fails GIVE_UP_AFTER times is left flagged for the user."""
        if self.llm is None:
            return JudgeOutcome()
        judged = superseded = cleared = 0
        for first, second in await self.rows.unjudged_conflicts(scope, JUDGEMENTS_PER_PASS):
            older, newer = sorted((first, second), key=_said_at)
            prompt = template("judge_conflict").format(
                kind=newer.kind,
                older=_one_line(older.content),
                older_date=_day(_said_at(older)),
                newer=_one_line(newer.content),
                newer_date=_day(_said_at(newer)),
            )
            try:
                answer = await self.llm.complete_json(scope.principal, prompt)
            except LlmPausedError as exc:
                log.info("conflict judgement paused, the pairs stay flagged: %s", exc)
                break
            except UpstreamError as exc:  # this pair failed: after GIVE_UP_AFTER tries it waits for the user
                if await self.rows.judgement_failed(scope, older.id, newer.id, now, GIVE_UP_AFTER):
                    log.warning("a flagged conflict could not be judged %d times; left for the user", GIVE_UP_AFTER)
                log.info("conflict judgement failed, the pair stays flagged: %s", exc)
                continue
            verdict = str(answer.get("verdict", "")).strip().lower()
            verdict = verdict if verdict in VERDICTS else "unsure"
            applied = await self.rows.settle_conflict(scope, older.id, newer.id, verdict, now)
            if applied is not None:
                judged += 1
                superseded += applied == "replaces"
                cleared += applied == "both_true"
        return JudgeOutcome(judged=judged, superseded=superseded, cleared=cleared)

    async def extract(self, scope: Scope) -> ExtractOutcome:
        """Facts from the raw memories written since the last pass: one LLM call per batch, and a
        batch never mixes namespaces (a fact must not carry one namespace's words into another)."""
        if self.llm is None:
            return ExtractOutcome()
        stored = refused = calls = skipped = 0
        for namespace in await self.rows.extraction_namespaces(scope):
            while calls < EXTRACTION_BATCHES_PER_PASS:
                batch = await self.rows.extraction_batch(scope, namespace, FACT_KINDS, EXTRACTION_BATCH)
                if not batch:
                    break
                calls += 1
                prompt = template("extract_facts").format(
                    memories="\n".join(f"{i}. {_one_line(m.content)}" for i, m in enumerate(batch, start=1))
                )
                try:
                    answer = await self.llm.complete_json(scope.principal, prompt)
                except LlmPausedError as exc:
                    log.info("fact extraction paused, retried at a later pass: %s", exc)
                    return ExtractOutcome(facts=stored, refused=refused, skipped=skipped)
                except UpstreamError as exc:  # this batch failed: tried again next pass, skipped after GIVE_UP_AFTER
                    if await self.rows.extraction_failed(scope, namespace) >= GIVE_UP_AFTER:
                        await self.rows.mark_extracted(scope, namespace, max(m.written for m in batch))
                        skipped += len(batch)
                        log.warning(
                            "%d memories could not be read for facts after %d tries; skipped", len(batch), GIVE_UP_AFTER
                        )
                    else:
                        log.info("fact extraction failed, retried at the next pass: %s", exc)
                    break  # the namespace's next batch waits for the next pass
                facts, not_grounded = _grounded(batch, answer.get("facts"))
                refused += not_grounded
                for source, kind, text in facts:
                    stored += await self._store(scope, source, kind, text)
                await self.rows.mark_extracted(scope, namespace, max(m.written for m in batch))
        return ExtractOutcome(facts=stored, refused=refused, skipped=skipped)

    async def _store(self, scope: Scope, source: MemoryRecord, kind: str, text: str) -> int:
        item = MemoryDraft(
            content=text,
            kind=kind,
            importance=max(source.importance, 0.6),
            tags=source.tags,
            metadata={"extracted_from": source.id},
            occurred_at=to_datetime(source.occurred_at),
            task_id=source.task_id,
            session_id=source.session_key,
        )
        try:
            result = await self.memory.remember(Scope(scope.principal, source.namespace), [item], _CONTEXT)
        except MemoryServerError as exc:  # e.g. its task was deleted meanwhile: the fact is skipped
            log.info("an extracted fact was not stored: %s", exc)
            return 0
        kept = 0
        for done in result.items:
            if done.outcome != "stored" or done.id is None:
                continue  # merged into a memory the user stated: that one is not the source's to take
            if await self.rows.link_sources(scope, done.id, [source.id]):
                kept += 1
            else:  # the source was forgotten while the LLM read it: its fact goes with it
                await self.memory.forget(Scope(scope.principal, source.namespace), ids=[done.id], dry_run=False)
        return kept


def _one_line(text: str) -> str:
    """A memory on one line of the prompt: its own line breaks cannot pose as the next memory."""
    return " ".join(text.split())


def _said_at(record: MemoryRecord) -> float:
    return record.last_seen_at or record.occurred_at


def _day(seconds: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(seconds))


def _grounded(batch: list[MemoryRecord], facts: Any) -> tuple[list[tuple[MemoryRecord, str, str]], int]:
    """The answer's facts that hold up against their memory; and how many did not."""
    kept: list[tuple[MemoryRecord, str, str]] = []
    refused = 0
    per_memory: dict[int, int] = {}
    for fact in facts if isinstance(facts, list) else []:
        if not isinstance(fact, dict):
            refused += 1
            continue
        index, kind, text = fact.get("memory"), fact.get("kind"), normalize(str(fact.get("text", ""))).strip()
        if type(index) is not int or not 1 <= index <= len(batch) or kind not in FACT_KINDS:  # True is no index
            refused += 1
            continue
        source = batch[index - 1]
        if (
            not text
            or len(text) > MAX_FACT_CHARS
            or per_memory.get(index, 0) >= FACTS_PER_MEMORY
            or not identifiers(text) <= identifiers(source.content)
            or language(text) not in (source.language, "und")
            or not summarize.grounded(text, source.content)
        ):
            refused += 1
            continue
        per_memory[index] = per_memory.get(index, 0) + 1
        kept.append((source, str(kind), text))
    return kept, refused
