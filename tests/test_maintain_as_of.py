"""`mcp-memory maintain --as-of`: one lifecycle pass as if it were a later moment, in a real store."""

from __future__ import annotations

import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path

import anyio
import orjson
import pytest

from mcp_memory.cli.command import main, parse_as_of
from mcp_memory.config import load_settings
from mcp_memory.core.errors import InvalidInputError
from mcp_memory.core.models import MemoryDraft, Scope
from mcp_memory.mcp.server import open_server
from mcp_memory.services.memory import CallContext
from mcp_memory.storage.pool import principal_file
from tests.conftest import BILLING_SESSION

NOW = datetime(2026, 12, 1, tzinfo=UTC).timestamp()
DAY = 86_400.0


def test_as_of_reads_durations_ahead_and_dates() -> None:
    assert parse_as_of("+30d", NOW) == NOW + 30 * DAY
    assert parse_as_of("30d", NOW) == NOW + 30 * DAY
    assert parse_as_of("+12h", NOW) == NOW + 12 * 3600
    assert parse_as_of("90m", NOW) == NOW + 90 * 60
    assert parse_as_of("2027-01-31", NOW) == datetime(2027, 1, 31, tzinfo=UTC).timestamp()
    assert parse_as_of("2027-01-31T08:00:00+01:00", NOW) == datetime(2027, 1, 31, 7, tzinfo=UTC).timestamp()


@pytest.mark.parametrize("text", ["soon", "+30", "30 days", "+-3d", "d", ""])
def test_as_of_refuses_garbage_naming_the_forms_it_takes(text: str) -> None:
    with pytest.raises(InvalidInputError, match=r"--as-of: .* is neither a duration ahead \(\+30d") as refused:
        parse_as_of(text, NOW)
    assert repr(text) in str(refused.value)  # what was typed, "+" and all


def test_as_of_refuses_the_past() -> None:
    with pytest.raises(InvalidInputError, match="in the past"):
        parse_as_of("2020-01-01", NOW)


def test_maintain_as_of_garbage_exits_2_with_the_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--data-dir", str(tmp_path), "--principal", "alice", "maintain", "--as-of", "next week"]) == 2
    assert "--as-of: 'next week' is neither a duration ahead (+30d, 12h, 90m) nor a date" in capsys.readouterr().err


def _tiers(data_dir: Path) -> dict[str, str]:
    conn = sqlite3.connect(principal_file(data_dir, "alice"))
    try:
        return {str(content): str(tier) for content, tier in conn.execute("SELECT content, tier FROM memories")}
    finally:
        conn.close()


def test_a_pass_as_of_thirty_days_ahead_archives_an_old_unimportant_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    casual, important = "The office printer on floor 2 jams on A3 paper", "The Acme contract renews on 2027-03-01"

    async def seed() -> None:
        async with open_server(load_settings(data_dir=tmp_path, principal="alice")) as runtime:
            items = [MemoryDraft(content=casual, importance=0.3), MemoryDraft(content=important, importance=0.9)]
            await runtime.memory.remember(Scope("alice"), items, CallContext())

    anyio.run(seed)
    command = ["--data-dir", str(tmp_path), "--principal", "alice", "maintain"]
    assert main(command) == 0  # at the real time both were just written: nothing fades
    assert orjson.loads(capsys.readouterr().out)["evicted"] == 0
    assert set(_tiers(tmp_path).values()) == {"active"}

    before = time.time()
    assert main([*command, "--as-of", "+30d"]) == 0
    after = time.time()
    report = orjson.loads(capsys.readouterr().out)
    # importance 0.3: S = 72 x 2.2 = 158.4 h, so after 720 h R = 0.011 < 0.05; importance 0.9 is never evicted.
    assert report["outcome"] == "done"
    assert report["evicted"] == 1
    as_of = datetime.strptime(report["as_of"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    assert before + 30 * DAY - 1 <= as_of <= after + 30 * DAY
    assert _tiers(tmp_path) == {casual: "archived", important: "active"}


def test_what_a_pass_as_of_later_writes_is_dated_now(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    session = BILLING_SESSION

    async def seed() -> None:
        async with open_server(load_settings(data_dir=tmp_path, principal="alice")) as runtime:
            items = [MemoryDraft(content=t, importance=0.5, session_id="s1") for t in session]
            await runtime.memory.remember(Scope("alice"), items, CallContext())

    anyio.run(seed)
    assert main(["--data-dir", str(tmp_path), "--principal", "alice", "maintain", "--as-of", "+30d"]) == 0
    assert orjson.loads(capsys.readouterr().out)["summaries"] == 1  # the positive control: it wrote one
    conn = sqlite3.connect(principal_file(tmp_path, "alice"))
    try:
        created = [float(r[0]) for r in conn.execute("SELECT created_at FROM memories WHERE level = 1")]
    finally:
        conn.close()
    assert len(created) == 1
    assert created[0] <= time.time()  # not 30 days ahead: it would look fresh (and not fade) for a month
