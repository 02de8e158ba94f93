"""`mcp-memory import --from server-memory | mem0 | markdown`: dry run first, counts, idempotent, redacted.

The fixtures in tests/fixtures/imports are written in each source's documented shape: the reference
server-memory's memory.jsonl (entities with observations, relations), mem0's `get_all` answer, and
a folder of Markdown notes with front matter (and a hidden editor folder and a text file to skip).
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_memory.cli.command import main
from mcp_memory.config import load_settings
from mcp_memory.core.models import Scope
from mcp_memory.mcp.server import open_server
from mcp_memory.storage.pool import principal_file

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "imports"
SECRET = "sk-live-4fG7hJ9kL2mN5pQ8rS1tV3wX6yZ0aB2c"


def _import(data_dir: Path, source: str, path: Path, *flags: str) -> int:
    return main(["--data-dir", str(data_dir), "--principal", "alice", "import", "--from", source, str(path), *flags])


def _memories(data_dir: Path) -> list[tuple[str, str, str, str]]:
    """(content, kind, tags, metadata) of every stored memory."""
    path = principal_file(data_dir, "alice")
    if not path.exists():
        return []
    with sqlite3.connect(path) as conn:
        return list(conn.execute("SELECT content, kind, tags, metadata FROM memories ORDER BY n"))


def _recall(data_dir: Path, query: str) -> list[str]:
    async def run() -> list[str]:
        async with open_server(load_settings(data_dir=data_dir, principal="alice")) as runtime:
            result = await runtime.memory.recall(Scope("alice"), query, k=3, reinforce=False)
            return [h.text for h in result.hits]

    return anyio.run(run)


def _report(capfd: pytest.CaptureFixture[str]) -> str:
    return capfd.readouterr().err.strip().splitlines()[-1]


def test_server_memory_dry_runs_then_imports_once_with_names_kept(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    source = FIXTURES / "memory.jsonl"
    assert _import(data, "server-memory", source) == 0
    dry = _report(capfd)
    assert "8 memories read; 8 new, 0 already stored" in dry
    assert "Dry run: nothing was written" in dry
    assert _memories(data) == []

    assert _import(data, "server-memory", source, "--apply") == 0
    assert "Imported: 8 stored" in _report(capfd)
    rows = _memories(data)
    texts = [r[0] for r in rows]
    assert "John Smith (person): Speaks fluent Spanish" in texts
    assert "John Smith works at Anthropic" in texts
    assert "Project Borealis is a project" in texts  # an entity without observations still exists
    spanish = next(r for r in rows if "Spanish" in r[0])
    assert spanish[1] == "observation"
    assert '"John_Smith"' in spanish[2]
    assert '"entity":"John_Smith"' in spanish[3].replace(" ", "")
    assert all(SECRET not in "".join(r) for r in rows)  # a key in an observation is redacted
    assert any("Deploy Bot (service): Its API key is" in t for t in texts)

    assert _import(data, "server-memory", source, "--apply") == 0
    again = _report(capfd)
    assert "0 new, 8 already stored" in again
    assert "Imported: 0 stored" in again
    assert len(_memories(data)) == 8
    assert "John Smith works at Anthropic" in _recall(data, "Where does John Smith work?")


def test_mem0_export_keeps_times_categories_and_ids(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    assert _import(data, "mem0", FIXTURES / "mem0-export.json", "--apply") == 0
    assert "3 memories read; 3 new" in _report(capfd)
    with sqlite3.connect(principal_file(data, "alice")) as conn:
        rows = {r[0]: r[1:] for r in conn.execute("SELECT content, tags, metadata, occurred_at FROM memories")}
    tags, metadata, occurred = rows["Prefers vegetarian food and avoids mushrooms"]
    assert tags == '["food","preferences"]'
    assert '"mem0_id":"7f3c2a1e-5b8d-4c6f-9e0a-1b2c3d4e5f60"' in metadata
    assert '"type":"preference"' in metadata
    assert occurred == pytest.approx(1778775153.512345)  # 2026-05-14T16:12:33.512345Z
    assert "喜欢在周末去爬山" in rows
    assert _import(data, "mem0", FIXTURES / "mem0-export.json", "--apply") == 0
    assert "0 new, 3 already stored" in _report(capfd)


def test_markdown_notes_become_one_memory_per_section_with_front_matter(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    assert _import(data, "markdown", FIXTURES / "notes", "--apply") == 0
    assert "3 memories read; 3 new" in _report(capfd)
    rows = {r[0]: r[1:] for r in _memories(data)}
    freeze = next(t for t in rows if t.startswith("Deploy freeze: No deploys"))
    assert "December 20 and January 5" in freeze
    kind, tags, metadata = rows[freeze]
    assert kind == "note"
    assert tags == '["standup","work"]'
    assert '"section":"Deploy freeze"' in metadata
    assert '"file":"standup.md"' in metadata
    on_call = next(t for t in rows if t.startswith("On-call: "))
    assert "./oncall.sh --rotate" in on_call  # a comment in a code block is not a heading
    borealis = next(t for t in rows if "ClickHouse" in t)
    assert rows[borealis][0] == "decision"
    assert rows[borealis][1] == '["architecture","borealis"]'
    assert not any("Editor state" in t for t in rows)  # hidden folders are not notes
    assert _import(data, "markdown", FIXTURES / "notes", "--apply") == 0
    assert "0 new, 3 already stored" in _report(capfd)


def test_a_long_section_is_cut_between_paragraphs(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    paragraphs = [f"Paragraph {i}: " + "the runbook says to drain the node first. " * 40 for i in range(12)]
    (notes / "runbook.md").write_text("# Runbook\n\n" + "\n\n".join(paragraphs), encoding="utf-8")
    data = tmp_path / "data"
    assert _import(data, "markdown", notes, "--apply") == 0
    texts = [r[0] for r in _memories(data)]
    assert len(texts) > 1
    assert all(len(t.encode()) <= 16_384 for t in texts)
    assert all(t.count("Paragraph") >= 1 for t in texts)  # cut between paragraphs, not inside one


@pytest.mark.parametrize(
    ("source", "content", "problem"),
    [
        ("server-memory", '{"type":"entity","name":"A","observations":["x"]}\n{"type":"edge"}\n', "line 2"),
        ("server-memory", '{"type":"relation","from":"A","to":""}\n', '"to" must be a non-empty string'),
        ("mem0", '{"results": [{"memory": 5}]}', "memory 1"),
        ("mem0", "[1, 2", "neither JSON nor JSON lines"),
        ("mem0", '{"results": [{"memory": "x", "created_at": "last tuesday"}]}', "not an ISO 8601 time"),
    ],
)
def test_a_malformed_source_is_refused_by_line_and_nothing_is_written(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], source: str, content: str, problem: str
) -> None:
    data = tmp_path / "data"
    file = tmp_path / "source.json"
    file.write_text(content, encoding="utf-8")
    assert _import(data, source, file, "--apply") == 2
    assert problem in capfd.readouterr().err
    assert _memories(data) == []


def test_a_wrong_kind_of_path_names_what_to_give(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    args: list[Any] = [tmp_path / "data", "markdown", FIXTURES / "memory.jsonl"]
    assert _import(*args) == 2
    assert "reads a folder of notes" in capfd.readouterr().err
    assert _import(tmp_path / "data", "mem0", tmp_path / "nowhere.json") == 2
    assert "nowhere.json' does not exist" in capfd.readouterr().err
    assert _import(tmp_path / "data", "markdown", tmp_path / "no-notes") == 2
    assert "no-notes' does not exist" in capfd.readouterr().err


def test_an_empty_mem0_entry_is_counted_as_not_worth_keeping_and_the_rest_imported(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    file = tmp_path / "mem0.json"
    file.write_text('{"results": [{"memory": "Lives in Berlin"}, {"id": "a4", "memory": " "}]}', encoding="utf-8")
    for flags in ((), ("--apply",)):
        assert _import(data, "mem0", file, *flags) == 0
        assert "2 memories read; 1 new, 0 already stored, 0 repeated in the source, 1 not worth keeping" in _report(
            capfd
        )
    assert [r[0] for r in _memories(data)] == ["Lives in Berlin"]


def test_an_import_logs_as_the_other_commands_do(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    file = tmp_path / "mem0.json"
    file.write_text('{"results": [{"memory": "Lives in Berlin"}]}', encoding="utf-8")
    assert _import(tmp_path / "data", "mem0", file, "--apply") == 0
    logged = [line for line in capfd.readouterr().err.splitlines() if " INFO " in line]
    assert logged
    assert all(re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ INFO mcp_memory\.", line) for line in logged), logged


def test_repeats_in_the_source_are_counted_alike_in_the_dry_run_and_read_from_stdin(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    body = b'[{"memory": "Lives in Berlin"}, {"memory": "Lives in Berlin"}, {"memory": "Works at a bakery"}]'
    data = tmp_path / "data"
    for flags in ((), ("--apply",)):
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(body)))
        assert _import(data, "mem0", Path("-"), *flags) == 0
        assert "3 memories read; 2 new, 0 already stored, 1 repeated in the source" in _report(capfd)
    assert sorted(r[0] for r in _memories(data)) == ["Lives in Berlin", "Works at a bakery"]


def test_a_bad_front_matter_date_names_the_note(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "trip.md").write_text("---\ndate: yesterday\n---\nWe flew to Lisbon.\n", encoding="utf-8")
    assert _import(tmp_path / "data", "markdown", notes, "--apply") == 2
    error = capfd.readouterr().err
    assert "trip.md" in error
    assert "date 'yesterday' is not an ISO 8601 time" in error
    assert "Traceback" not in error
