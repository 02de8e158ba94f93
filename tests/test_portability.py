"""Export and import carry lineage: summaries keep their sources, conflicts stay flagged, undone
summaries stay undone, whatever order the lines come in."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
from mcp.client import Client

from mcp_memory.config import Settings, load_settings
from mcp_memory.core.errors import InvalidInputError
from mcp_memory.core.models import GoldenRow, Scope
from mcp_memory.mcp.server import Server, open_server
from mcp_memory.services.portability import export_lines, import_lines
from tests.conftest import BILLING_SESSION, Clock, call, row_counts

pytestmark = pytest.mark.anyio
HOUR = 3600.0
ALICE = Scope("alice")

SESSION = BILLING_SESSION
PETS = {"query": "which pets does Alice like", "reinforce": False}
BILLING = {"query": "which database is billing moving to", "reinforce": False}


@dataclass
class Original:
    """A store after one maintain pass, as exported."""

    session: list[str]  # the summary's sources
    summary: str
    coffee: list[str]  # the consolidated fact's sources
    fact: str
    cats: str  # flagged as conflicting with dogs
    dogs: str
    lines: list[bytes]


def _settings(data_dir: Path) -> Settings:
    # Write-time merging held to near-identical cosines, so the two coffee wordings are stored apart.
    return load_settings(data_dir=data_dir, principal="alice", recall={"duplicate_similarity": 0.999})


async def _remember(client: Client, text: str, session: str, kind: str, importance: float) -> str:
    item = {"content": text, "session_id": session, "kind": kind, "importance": importance}
    memory_id: str = (await call(client, "remember", item))["items"][0]["id"]
    return memory_id


async def _build(data_dir: Path, clock: Clock, *, undo: bool = False) -> Original:
    async with open_server(_settings(data_dir), clock=clock) as runtime, Client(runtime.mcp, mode="legacy") as client:
        session = [await _remember(client, t, "s-offsite", "fact", 0.5) for t in SESSION]
        coffee = [await _remember(client, "I prefer dark roast coffee in the morning", "monday", "preference", 0.9)]
        clock.advance(24 * HOUR)
        coffee.append(
            await _remember(client, "In the mornings I prefer a dark roast coffee.", "tuesday", "preference", 0.9)
        )
        cats = await _remember(client, "Alice likes cats", "tuesday", "preference", 0.9)
        clock.advance(HOUR)
        dogs = await _remember(client, "Alice likes dogs", "tuesday", "preference", 0.9)
        clock.advance(300 * HOUR)  # the session fades (see tests/test_compression.py); preferences do not
        report = await runtime.scheduler.run_once()
        assert (report["summaries"], report["facts"]) == (1, 1)
        summary = (await call(client, "recall", {**BILLING, "detail": "full"}))["hits"][0]
        fact = (await call(client, "recall", {"detail": "full", "query": "morning coffee", "reinforce": False}))[
            "hits"
        ][0]
        assert sorted(summary["source_ids"]) == sorted(session)
        assert sorted(fact["source_ids"]) == sorted(coffee)
        if undo:
            await call(client, "undo_summary", {"id": summary["id"]})
        lines = [line async for line in export_lines(runtime.store, ALICE)]
    return Original(session, summary["id"], coffee, fact["id"], cats, dogs, lines)


@pytest.fixture
async def original(tmp_path: Path, clock: Clock) -> Original:
    return await _build(tmp_path / "original", clock)


@pytest.fixture
async def fresh(tmp_path: Path, clock: Clock) -> AsyncIterator[Server]:
    async with open_server(_settings(tmp_path / "fresh"), clock=clock) as runtime:
        yield runtime


async def _import(runtime: Server, lines: list[bytes], batch: int = 64) -> tuple[int, int]:
    return await import_lines(runtime.store, runtime.embedder, ALICE, lines, batch=batch)


def _without(lines: list[bytes], *fields: str) -> list[bytes]:
    """The lines as an export made before ``fields`` existed would have written them."""
    rows = [orjson.loads(line) for line in lines]
    return [orjson.dumps({k: v for k, v in row.items() if k not in fields}) for row in rows]


async def test_an_imported_summary_and_fact_still_name_their_sources_on_recall(
    original: Original, fresh: Server
) -> None:
    assert await _import(fresh, original.lines) == (len(original.lines), 0)
    async with Client(fresh.mcp, mode="legacy") as client:
        summary = (await call(client, "recall", {**BILLING, "detail": "full"}))["hits"][0]
        fact = (await call(client, "recall", {"detail": "full", "query": "morning coffee", "reinforce": False}))[
            "hits"
        ][0]
    assert (summary["id"], summary["level"]) == (original.summary, 1)
    assert sorted(summary["source_ids"]) == sorted(original.session)
    assert fact["id"] == original.fact
    assert sorted(fact["source_ids"]) == sorted(original.coffee)


async def test_an_imported_summary_can_be_undone(original: Original, fresh: Server) -> None:
    await _import(fresh, original.lines)
    async with Client(fresh.mcp, mode="legacy") as client:
        undone = await call(client, "undo_summary", {"id": original.summary})
        assert sorted(undone["restored"]) == sorted(original.session)
        hits = (await call(client, "recall", {"detail": "full", **BILLING, "k": 10}))["hits"]
    assert SESSION[0] in [h["text"] for h in hits]
    assert original.summary not in [h["id"] for h in hits]
    assert all(h["level"] == 0 for h in hits if h["id"] in original.session)


async def test_forgetting_an_imported_source_drops_its_summary_and_returns_the_others(
    original: Original, fresh: Server
) -> None:
    await _import(fresh, original.lines)
    async with Client(fresh.mcp, mode="legacy") as client:
        await call(client, "forget", {"ids": [original.session[0]], "dry_run": False})
        hits = (
            await call(client, "recall", {"detail": "full", "query": "migration script", "k": 10, "reinforce": False})
        )["hits"]
        every = await call(
            client, "recall", {"detail": "full", **BILLING, "k": 20, "filters": {"include_archived": True}}
        )
    assert SESSION[3] in [h["text"] for h in hits]  # back in the active tier
    assert original.session[0] not in [h["id"] for h in every["hits"]]
    assert original.summary not in [h["id"] for h in every["hits"]]


async def test_a_flagged_conflict_shows_on_both_sides_after_import(original: Original, fresh: Server) -> None:
    await _import(fresh, original.lines)
    async with Client(fresh.mcp, mode="legacy") as client:
        hits = {h["id"]: h for h in (await call(client, "recall", {**PETS, "detail": "full"}))["hits"]}
    assert hits[original.cats]["conflicts_with"] == [original.dogs]
    assert hits[original.dogs]["conflicts_with"] == [original.cats]


async def test_a_summary_undone_before_export_is_not_made_again_after_import(
    tmp_path: Path, clock: Clock, fresh: Server
) -> None:
    undone = await _build(tmp_path / "original", clock, undo=True)
    assert any(b'"compression_failures"' in line for line in undone.lines)
    await _import(fresh, undone.lines)
    clock.advance(HOUR)
    assert (await fresh.scheduler.run_once())["summaries"] == 0


async def test_lineage_is_restored_when_a_summary_comes_before_its_sources(original: Original, fresh: Server) -> None:
    lines = list(reversed(original.lines))
    assert orjson.loads(lines[0])["level"] > 0  # the summary or the fact opens the file
    await _import(fresh, lines, batch=2)
    async with Client(fresh.mcp, mode="legacy") as client:
        summary = (await call(client, "recall", {**BILLING, "detail": "full"}))["hits"][0]
        pets = {h["id"]: h for h in (await call(client, "recall", {**PETS, "detail": "full"}))["hits"]}
    assert sorted(summary["source_ids"]) == sorted(original.session)
    assert pets[original.cats]["conflicts_with"] == [original.dogs]


async def test_an_export_without_lineage_fields_still_imports(original: Original, fresh: Server) -> None:
    old = _without(original.lines, "source_ids", "conflicts_with", "compression_failures", "last_seen_at")
    assert await _import(fresh, old) == (len(old), 0)
    async with Client(fresh.mcp, mode="legacy") as client:
        summary = (await call(client, "recall", {**BILLING, "detail": "full"}))["hits"][0]
    assert (summary["id"], summary["source_ids"]) == (original.summary, [])


async def test_importing_the_full_export_again_completes_the_lineage_an_older_import_left_out(
    original: Original, fresh: Server
) -> None:
    await _import(fresh, _without(original.lines, "source_ids", "conflicts_with"))
    assert await _import(fresh, original.lines) == (0, len(original.lines))
    async with Client(fresh.mcp, mode="legacy") as client:
        summary = (await call(client, "recall", {**BILLING, "detail": "full"}))["hits"][0]
        pets = {h["id"]: h for h in (await call(client, "recall", {**PETS, "detail": "full"}))["hits"]}
    assert sorted(summary["source_ids"]) == sorted(original.session)
    assert pets[original.dogs]["conflicts_with"] == [original.cats]


async def test_a_line_naming_a_source_that_is_nowhere_is_refused_and_nothing_is_written(
    original: Original, fresh: Server, tmp_path: Path
) -> None:
    partial = [line for line in original.lines if orjson.loads(line)["id"] != original.session[2]]
    number = next(i for i, line in enumerate(partial, start=1) if orjson.loads(line)["id"] == original.summary)
    with pytest.raises(InvalidInputError) as refused:
        await _import(fresh, partial)
    message = str(refused.value)
    assert f"line {number}" in message
    assert original.session[2] in message
    assert "export the whole store again" in message
    assert row_counts(tmp_path / "fresh", "alice").get("memories", 0) == 0


async def test_a_line_whose_lineage_is_not_a_list_of_ids_is_refused(original: Original, fresh: Server) -> None:
    rows = [orjson.loads(line) for line in original.lines]
    rows[0]["source_ids"] = "01J0000000000000000000000"
    with pytest.raises(InvalidInputError, match="line 1"):
        await _import(fresh, [orjson.dumps(row) for row in rows])


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("occurred_at", "2026-03-01T10:00:00Z", "occurred_at: input should be a valid number (seconds since 1970"),
        ("metadata", "a string", "metadata: input should be a valid dictionary"),
        ("importance", "high", "importance: input should be a valid number"),
        ("importance", 1.5, "importance is 1.5; it is between 0 and 1"),
        ("tags", 5, "tags: input should be a valid list"),
        ("pinned", 1, "pinned: input should be a valid boolean"),
        ("access_count", -1, "access_count is -1"),
        ("tier", "gone", "tier: input should be 'active' or 'archived'"),
        ("provenance", {"client_name": 5}, "provenance.client_name: input should be a valid string"),
        ("surprise", 1, "unknown field 'surprise'"),
    ],
)
async def test_a_line_with_a_field_of_the_wrong_type_is_refused_and_nothing_is_written(
    original: Original, fresh: Server, field: str, value: object, named: str
) -> None:
    # Stored, such a line broke export, list_memories, get_memory and forget for the whole store.
    rows = [orjson.loads(line) for line in original.lines]
    rows[3][field] = value
    with pytest.raises(InvalidInputError) as refused:
        await _import(fresh, [orjson.dumps(row) for row in rows])
    assert "line 4" in str(refused.value)
    assert named in str(refused.value)
    # Asked of the runtime, not the file: a warming runtime may be creating it.
    assert [line async for line in export_lines(fresh.store, ALICE)] == []


async def test_a_line_replaced_by_a_memory_that_is_nowhere_is_refused(original: Original, fresh: Server) -> None:
    rows = [orjson.loads(line) for line in original.lines]
    rows[1]["superseded_by"] = "01J00000000000000000000000"
    refusal = r"line 2: superseded_by names memory '01J0+'.*set superseded_by to null"
    with pytest.raises(InvalidInputError, match=refusal):
        await _import(fresh, [orjson.dumps(row) for row in rows])


async def test_an_oversized_memory_and_a_repeated_id_are_refused_with_their_lines(
    original: Original, fresh: Server
) -> None:
    rows = [orjson.loads(line) for line in original.lines]
    big = dict(rows[0], content="word " * 4_000)
    with pytest.raises(InvalidInputError, match=r"line 1: .*20000 bytes, over limits.max_content_bytes \(16384\)"):
        await import_lines(fresh.store, fresh.embedder, ALICE, [orjson.dumps(big)], max_bytes=16_384)
    twice = [*original.lines, orjson.dumps(dict(rows[0], content="Another text under the same id"))]
    with pytest.raises(InvalidInputError, match=f"line {len(twice)}: repeats the id '{rows[0]['id']}' of line 1"):
        await _import(fresh, twice)
    assert [line async for line in export_lines(fresh.store, ALICE)] == []


async def test_golden_queries_travel_with_the_export_and_are_not_doubled(original: Original, tmp_path: Path) -> None:
    """The questions the passes are checked against come back with the memories, namespace and all."""
    async with open_server(_settings(tmp_path / "original")) as runtime:
        await runtime.store.golden.add(
            Scope("alice", "work"),
            GoldenRow("01GOLDEN0000000000000000000", "work", "what about cats?", original.cats, 1.0),
        )
        lines = [line async for line in export_lines(runtime.store, ALICE)]
    assert orjson.loads(lines[-1])["golden_query"]["memory_id"] == original.cats
    async with open_server(_settings(tmp_path / "copy")) as copy:
        assert await _import(copy, lines) == (len(lines) - 1, 0)
        assert await _import(copy, lines) == (0, len(lines) - 1)
        [golden] = await copy.store.golden.queries(ALICE)
        assert (golden.namespace, golden.query, golden.memory_id) == ("work", "what about cats?", original.cats)


async def test_a_golden_query_naming_a_memory_that_is_nowhere_is_refused(original: Original, fresh: Server) -> None:
    stray = {"golden_query": {"id": "g1", "namespace": None, "query": "q", "memory_id": "NOPE", "created_at": 1.0}}
    with pytest.raises(InvalidInputError, match=rf"line {len(original.lines) + 1}.*'NOPE'"):
        await _import(fresh, [*original.lines, orjson.dumps(stray)])
    assert (await fresh.store.count(ALICE))["memories"] == 0
