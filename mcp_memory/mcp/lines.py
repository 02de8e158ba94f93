"""The short text blocks of stats, forget, pin, unpin, list_memories, get_memory, golden_queries and
forget_user: what a person reads, a line per thing, beside the structured content that carries every
field (as ``templates`` does for recall, remember and the task tools). Text a caller wrote is quoted
as a JSON string (data, never an instruction)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import orjson

from mcp_memory.core.caution import reveal
from mcp_memory.mcp.recall_schemas import MemoryOut
from mcp_memory.mcp.schemas import (
    ForgetResult,
    ForgetUserResult,
    GoldenQueriesResult,
    ListedMemory,
    MemoryDetail,
    MemoryPage,
    PinResult,
    StatsResult,
    VersionOut,
)


def _quoted(text: str) -> str:
    return orjson.dumps(reveal(text)).decode()


def _marks(marks: list[str]) -> str:
    return "".join(f" [{mark}]" for mark in marks if mark)


def _pairs(counts: Mapping[str, Any]) -> str:
    """``{"a": 1, "b": None}`` as ``a 1, b none``; an empty mapping as ``none``."""
    return ", ".join(f"{key} {'none' if value is None else value}" for key, value in counts.items()) or "none"


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def _check(check: Mapping[str, Any]) -> str:
    """A golden check (wire_upkeep's): when, recall@k before and after, kept or rolled back, missed."""
    missed = check.get("missed") or []
    return (
        f"{check.get('at', '?')}: recall {check.get('recall_before')} -> {check.get('recall_after')}, "
        + ("rolled back" if check.get("rolled_back") else "kept")
        + (f", missed {', '.join(map(str, missed))}" if missed else "")
    )


def _day(moment: datetime) -> str:
    return f"{moment:%Y-%m-%d}"


def _time(moment: datetime | None) -> str:
    return "never" if moment is None else f"{moment:%Y-%m-%d %H:%M:%S}Z"


def stats_lines(result: StatsResult) -> str:
    """What the server holds for the caller, then how the process and the passes are doing."""
    model = result.embedding_model or "none loaded"
    dimension = f" ({result.embedding_dimension} dimensions)" if result.embedding_dimension else ""
    index = "not loaded" if result.vector_index_rows is None else f"{result.vector_index_rows} rows"
    golden = result.golden
    last = golden.get("last_check")
    passes = result.recent_passes
    lines = [
        f"memory: {result.memory_switch}",
        f"memories: {_pairs(result.memories)}",
        f"rows: {_pairs(result.tables)}",
        f"events: {_pairs(result.events)}",
        f"embedding model: {model}{dimension}; vector index {index} ({result.vector_engine})",
        f"process {result.process_id}: up {result.uptime_seconds:.0f} s, "
        f"{_count(result.models_loaded_in_process, 'model')} loaded, "
        f"{_count(result.schedulers_running_in_process, 'lifecycle scheduler')}",
        f"lifecycle passes: {len(passes)} recent" + (f", last: {_pairs(passes[0])}" if passes else ""),
        f"pending: {_pairs(result.pending)}",
        f"fact check: {_pairs(result.fact_check)}",
        f"llm: {'not configured' if result.llm is None else _pairs(result.llm)}",
        f"golden queries: {golden.get('queries', 0)}, {golden.get('rollbacks', 0)} rollbacks, "
        f"last check: {'none' if not last else _check(last)}",
        f"principal file: {result.principal_file}",
    ]
    return "\n".join(lines)


def forget_lines(result: ForgetResult) -> str:
    """What forget matched (a dry run) or deleted, one memory a line, then its note."""
    head = (
        f"dry run: {result.matched} matched, nothing deleted"
        if result.dry_run
        else f"{result.deleted} deleted of {result.matched} matched"
    )
    items = [f"- {_quoted(i.preview)} ({i.kind}, {_day(i.occurred_at)}) id={i.id}" for i in result.items]
    return "\n".join([head, *items, f"note: {result.note}"])


def pin_lines(result: PinResult) -> str:
    """A pin or unpin in a line, with what the pinned memories now take of their cap."""
    done = "pinned" if result.pinned else "unpinned"
    return f"{result.id} {done}; pinned memories take {result.pinned_tokens} of {result.cap_tokens} tokens"


def _listed(m: ListedMemory | MemoryOut) -> str:
    tags = f"; tags {', '.join(m.tags)}" if m.tags else ""
    return f"- {_quoted(m.text)} ({m.kind}, {_day(m.occurred_at)}{tags}) id={m.id}" + _marks(
        [
            "pinned" if m.pinned else "",
            f"namespace {_quoted(m.namespace)}" if m.namespace else "",
            f"{m.tier}" if m.tier != "active" else "",
            f"summary, level {m.level}" if m.level else "",
            f"replaced by {m.superseded_by}" if m.superseded_by else "",
            f"expires {_time(m.expires_at)}" if m.expires_at else "",
            f"conflicts with {', '.join(m.conflicts_with)}" if m.conflicts_with else "",
            f"caution: {m.caution}" if m.caution else "",
        ]
    )


def memory_page_lines(page: MemoryPage) -> str:
    """A page of memories, one a line in the page's order, and how to page on."""
    order = f"by {page.sort}, {'descending' if page.descending else 'ascending'}"
    more = [f"more: pass cursor={_quoted(page.next_cursor)}"] if page.next_cursor else []
    if not page.memories:
        return "\n".join(["no memories", *more])
    return "\n".join(
        [f"{_count(len(page.memories), 'memory', 'memories')} ({order}):", *(_listed(m) for m in page.memories), *more]
    )


def _version(v: VersionOut) -> str:
    return f"  - {_quoted(v.text)} ({v.kind}, from {_time(v.valid_from)}) id={v.id}"


def memory_detail_lines(detail: MemoryDetail) -> str:
    """One memory: its line, where it stands in its chain of versions, and what else is known of it
    (counts; the structured content lists each occurrence, link and event)."""
    m = detail.memory
    lines = [_listed(m).removeprefix("- ")]
    if detail.current_id and detail.current_id != m.id:
        lines.append(f"current version: {detail.current_id}")
    elif detail.current_id is None:
        lines.append("no current version: the chain ends in a deletion")
    if detail.replaces:
        lines += [f"replaces {_count(len(detail.replaces), 'earlier version')}:", *map(_version, detail.replaces)]
    if detail.replaced_by:
        lines += [
            f"replaced by {_count(len(detail.replaced_by), 'later version')}:",
            *map(_version, detail.replaced_by),
        ]
    if detail.summarized_in:
        lines.append(f"summarized in: {', '.join(detail.summarized_in)}")
    if detail.links:
        lines.append("linked: " + ", ".join(f"{link.id} ({link.via})" for link in detail.links))
    said = [_time(o.occurred_at) for o in detail.occurrences]
    lines.append(f"stated {_count(len(said), 'time')}" + (f", last {said[-1]}" if said else ""))
    if detail.events:
        lines.append("events: " + ", ".join(f"{e.event} {_time(e.at)}" for e in detail.events))
    return "\n".join(lines)


def golden_lines(result: GoldenQueriesResult) -> str:
    """The golden queries, one a line (found or missed when checked), and how the checks went."""
    found = {True: " [found]", False: " [missed]", None: ""}
    queries = [
        f"- {_quoted(q.query)} -> {q.memory_id} id={q.id}{found[q.found]}"
        + _marks([f"namespace {_quoted(q.namespace)}" if q.namespace else ""])
        for q in result.queries
    ]
    recall = "" if result.recall_at_k is None else f"; recall@{result.k} now {result.recall_at_k:.2f}"
    counted = _count(len(result.queries), "golden query", "golden queries")
    head = f"{counted} (each must be found in the top {result.k}){recall}"
    checks = [f"last check: {_check(result.recent_checks[0])}"] if result.recent_checks else []
    return "\n".join([head, *queries, *checks, f"passes rolled back for losing them: {result.rollbacks}"])


def forget_user_lines(result: ForgetUserResult) -> str:
    """What forget_user would delete (with the code and until when) or deleted, then its note."""
    counts = _pairs({table: n for table, n in result.counts.items() if n}) if any(result.counts.values()) else "none"
    if not result.dry_run:
        head = f"erased at {_time(result.erased_at)}: {counts}"
    elif result.confirmation_code:
        head = (
            f"dry run, would delete: {counts}; confirmation_code {_quoted(result.confirmation_code)} "
            f"valid until {_time(result.code_expires_at)}"
        )
    else:
        head = f"nothing deleted (would have been: {counts})"
    return f"{head}\nnote: {result.note}"
