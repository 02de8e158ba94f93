"""The memory tools' arguments, checked, and what they become: records and storage criteria.

A malformed argument raises InvalidInputError (or LimitExceededError) naming the field, before
anything is written: ``memories[2].tags[0]``, ``filters.occurred_after``, ``budget_tokens``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import orjson

from mcp_memory.config import Limits, RecallSettings
from mcp_memory.core.errors import InvalidInputError, LimitExceededError
from mcp_memory.core.ids import new_id
from mcp_memory.core.models import Criteria, MemoryDraft, MemoryFilter, MemoryRecord, Provenance, Scope, to_seconds
from mcp_memory.core.text import language, nothing_to_search, strip_query_syntax
from mcp_memory.services import checks, rules, scoring
from mcp_memory.services.checks import identifier, json_strings, text_field

_KIND = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
_MAX_TTL = 100 * 365 * 24 * 3600


def check_batch(items: Sequence[MemoryDraft], limits: Limits) -> None:
    """The memories of one remember call: at least one, at most ``limits.max_batch``, each well formed."""
    if not items:
        raise InvalidInputError("memories", "is empty; send at least one memory")
    if len(items) > limits.max_batch:
        raise LimitExceededError(
            "memories",
            f"has {len(items)} items; send them in several calls",
            limit_name="limits.max_batch",
            limit=limits.max_batch,
        )
    for i, item in enumerate(items):
        check_memory(i, item, limits)


def check_memory(index: int, item: MemoryDraft, limits: Limits) -> None:
    """One memory to remember; a failure names ``memories[index]`` and the field."""
    where = f"memories[{index}]"
    _check_content(where, item.content, limits)
    if not _KIND.match(item.kind):
        raise InvalidInputError(
            f"{where}.kind",
            "must be a lower-case word such as fact, preference, decision, event, "
            "observation or instruction (letters, digits, - and _, at most 32 characters)",
        )
    if item.importance is not None and not 0.0 <= item.importance <= 1.0:
        raise InvalidInputError(f"{where}.importance", "must be between 0 and 1")
    _check_tags(where, item.tags, limits)
    _check_metadata(where, item.metadata, limits)
    if item.ttl_seconds is not None and not 0 < item.ttl_seconds <= _MAX_TTL:
        raise InvalidInputError(f"{where}.ttl_seconds", f"must be between 1 and {_MAX_TTL} seconds")
    for name, text in (("key", item.key), ("task_id", item.task_id), ("session_id", item.session_id)):
        if text is not None:
            identifier(f"{where}.{name}", text)
    if len(item.supersedes) > limits.max_batch:
        raise LimitExceededError(
            f"{where}.supersedes",
            f"lists {len(item.supersedes)} ids",
            limit_name="limits.max_batch",
            limit=limits.max_batch,
        )
    for i, ident in enumerate(item.supersedes):
        text_field(f"{where}.supersedes[{i}]", ident)
    if item.key is not None and item.supersedes:
        raise InvalidInputError(f"{where}.supersedes", "give either key or supersedes, not both")


def _check_content(where: str, content: str, limits: Limits) -> None:
    text_field(f"{where}.content", content)
    if not content.strip():
        raise InvalidInputError(f"{where}.content", "is empty; send the text to remember")
    size = len(content.encode("utf-8"))
    if size > limits.max_content_bytes:
        raise LimitExceededError(
            f"{where}.content",
            f"is {size} bytes; split it into smaller memories",
            limit_name="limits.max_content_bytes",
            limit=limits.max_content_bytes,
        )


def _check_tags(where: str, tags: Sequence[str], limits: Limits) -> None:
    if len(tags) > limits.max_tags:
        raise LimitExceededError(
            f"{where}.tags", f"has {len(tags)} tags", limit_name="limits.max_tags", limit=limits.max_tags
        )
    for i, tag in enumerate(tags):
        text_field(f"{where}.tags[{i}]", tag)
        if not tag.strip():
            raise InvalidInputError(f"{where}.tags[{i}]", "is empty; drop it or give it text")
        if len(tag) > limits.max_tag_chars:
            raise LimitExceededError(
                f"{where}.tags[{i}]",
                f"is {len(tag)} characters",
                limit_name="limits.max_tag_chars",
                limit=limits.max_tag_chars,
            )


def _check_metadata(where: str, metadata: dict[str, Any], limits: Limits) -> None:
    json_strings(f"{where}.metadata", metadata)
    try:
        meta_size = len(orjson.dumps(metadata))
    except TypeError as exc:
        raise InvalidInputError(f"{where}.metadata", f"is not JSON: {exc}") from None
    if meta_size > limits.max_metadata_bytes:
        raise LimitExceededError(
            f"{where}.metadata",
            f"is {meta_size} bytes of JSON",
            limit_name="limits.max_metadata_bytes",
            limit=limits.max_metadata_bytes,
        )


def new_record(
    scope: Scope,
    item: MemoryDraft,
    content: str,
    h: str,
    occurred: float,
    now: float,
    session: str | None,
    provenance: Provenance,
) -> MemoryRecord:
    importance = item.importance if item.importance is not None else rules.estimate_importance(content, item.kind)
    tags = sorted({t.strip() for t in item.tags})  # the item was redacted once, by intake.persisted
    return MemoryRecord(
        id=new_id(),
        namespace=scope.namespace,
        kind=item.kind,
        content=content,
        key=item.key,
        tags=tags,
        metadata=item.metadata,
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
        task_id=item.task_id,
        provenance=provenance,
        content_hash=h,
    )


def check_recall(
    query: str, k: int | None, budget_tokens: int | None, preset: str | None, limits: Limits, config: RecallSettings
) -> tuple[str, int, int, str]:
    """recall's arguments, with the configured defaults filled in: (words, k, budget, preset)."""
    text_field("query", query)
    if len(query) > limits.max_query_chars:
        raise LimitExceededError(
            "query",
            f"is {len(query)} characters",
            limit_name="limits.max_query_chars",
            limit=limits.max_query_chars,
        )
    problem = nothing_to_search(query)  # "???", "the of and"
    if problem:
        raise InvalidInputError("query", problem)
    words = strip_query_syntax(query)
    k = config.default_k if k is None else k
    if not 1 <= k <= limits.max_k:
        raise LimitExceededError("k", f"is {k}; use 1 to {limits.max_k}", limit_name="limits.max_k", limit=limits.max_k)
    budget = checks.budget(budget_tokens, limits.default_recall_budget_tokens, limits)
    preset = preset or config.preset
    if preset not in scoring.PRESETS:
        raise InvalidInputError("preset", f"must be one of {sorted(scoring.PRESETS)}")
    return words, k, budget, preset


def recall_criteria(scope: Scope, filters: MemoryFilter | None) -> Criteria:
    """The filters of recall (and forget) as storage criteria; the namespace may only narrow."""
    if filters is None:
        return Criteria()
    if filters.namespace is not None and filters.namespace != scope.namespace:
        raise InvalidInputError(
            "filters.namespace",
            f"{filters.namespace!r} is not visible on this connection; "
            + (
                f"its namespace is {scope.namespace!r} (plus principal-wide memories)"
                if scope.namespace is not None
                else "it has no namespace and sees principal-wide memories only "
                "(a server started with --namespace NAME sees that one too)"
            ),
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


def forget_criteria(scope: Scope, ids: Sequence[str] | None, where: MemoryFilter | None, limits: Limits) -> Criteria:
    """What forget deletes: the listed ids, or the filtered memories, in every tier and state."""
    everything = Criteria(include_superseded=True, include_archived=True, include_expired=True)
    if ids is not None:
        if not ids:
            raise InvalidInputError("ids", "is empty; list the ids to forget")
        if len(ids) > limits.max_forget_ids:
            raise LimitExceededError(
                "ids",
                f"lists {len(ids)} ids",
                limit_name="limits.max_forget_ids",
                limit=limits.max_forget_ids,
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
        as_recall = MemoryFilter(
            kinds=where.kinds,
            tags=where.tags,
            occurred_after=where.occurred_after,
            occurred_before=where.occurred_before,
            task_id=where.task_id,
        )
        narrowed = recall_criteria(scope, as_recall)
        criteria = replace(narrowed, include_superseded=True, include_archived=True, include_expired=True)
    return criteria
