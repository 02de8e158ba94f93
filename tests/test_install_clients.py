"""`mcp-memory install CLIENT` and `uninstall CLIENT` against every client's configuration format.

(tests/test_install.py is another matter: the wheel installed into a fresh venv.)
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
import yaml
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from mcp_memory import cli
from mcp_memory.install import jsonc
from mcp_memory.install.clients import CLIENTS, Places
from tests.readme_configs import REPO

SERVER = str(Path(sys.executable).parent / "mcp-memory")


def servers(client: str, path: Path) -> dict[str, Any]:
    """The servers the client would read from the file, by name."""
    text, spec = path.read_text(encoding="utf-8"), CLIENTS[client]
    if spec.format == "toml":
        found: dict[str, Any] = tomllib.loads(text).get("mcp_servers", {})
        return found
    if spec.format == "yaml":
        return {item["name"]: item for item in yaml.safe_load(text).get("mcpServers", [])}
    document = jsonc.parse(text).value if spec.format == "jsonc" else orjson.loads(text)
    found = document.get(spec.servers_key, {})
    return found


def another_server(client: str) -> str:
    """A configuration that already holds another server and a setting of the client's own."""
    spec = CLIENTS[client]
    if spec.format == "toml":
        return 'model = "o3"  # the user\'s\n\n[mcp_servers.other]\ncommand = "other-server"\nargs = ["--x"]\n'
    if spec.format == "yaml":
        return "name: mine\nversion: 0.0.1\nschema: v1\nmcpServers:\n  - name: other\n    command: other-server\n"
    document = {"theme": "dark", spec.servers_key: {"other": {"command": "other-server", "args": ["--x"]}}}
    return orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n"


def run(*argv: str) -> int:
    return cli.main(list(argv))


def backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".bak-*"))


@pytest.mark.parametrize("client", list(CLIENTS))
def test_install_writes_an_entry_that_starts_this_installation(tmp_path: Path, client: str) -> None:
    target = tmp_path / "deep" / "config"
    data = tmp_path / "data"
    assert run("install", client, "--client-config", str(target), "--data-dir", str(data), "--namespace", "p") == 0
    entry = servers(client, target)["memory"]
    assert entry["command"] == SERVER
    assert entry["args"] == ["serve", "--data-dir", str(data), "--namespace", "p"]
    if client in ("vscode", "claude-code"):
        assert entry["type"] == "stdio"
    assert backups(target) == []  # nothing was there to keep


@pytest.mark.parametrize("client", list(CLIENTS))
def test_install_keeps_another_server_and_a_second_run_changes_nothing(
    tmp_path: Path, client: str, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "config"
    target.write_text(another_server(client), encoding="utf-8")
    original = target.read_bytes()
    assert run("install", client, "--client-config", str(target)) == 0
    found = servers(client, target)
    assert found["other"]["command"] == "other-server"
    assert found["memory"]["args"] == ["serve"]
    (backup,) = backups(target)
    assert backup.read_bytes() == original
    first = target.read_bytes()
    capsys.readouterr()
    assert run("install", client, "--client-config", str(target)) == 0
    assert "already installed" in capsys.readouterr().err
    assert target.read_bytes() == first
    assert len(backups(target)) == 1
    assert list(servers(client, target)) == ["other", "memory"]


@pytest.mark.parametrize("client", list(CLIENTS))
def test_uninstall_removes_only_ours(tmp_path: Path, client: str) -> None:
    target = tmp_path / "config"
    target.write_text(another_server(client), encoding="utf-8")
    assert run("install", client, "--client-config", str(target), "--name", "mem2") == 0
    assert run("uninstall", client, "--client-config", str(target), "--name", "mem2") == 0
    assert list(servers(client, target)) == ["other"]
    assert run("uninstall", client, "--client-config", str(target), "--name", "mem2") == 0  # nothing left to do


@pytest.mark.parametrize("client", list(CLIENTS))
def test_dry_run_prints_the_diff_and_writes_nothing(
    tmp_path: Path, client: str, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "config"
    target.write_text(another_server(client), encoding="utf-8")
    original = target.read_bytes()
    assert run("install", client, "--client-config", str(target), "--dry-run") == 0
    out = capsys.readouterr().out
    assert out.startswith(f"--- {target}\n+++ {target}\n")
    assert any(line.startswith("+") and SERVER in line for line in out.splitlines())
    assert target.read_bytes() == original
    assert backups(target) == []
    fresh = tmp_path / "new" / "config"
    assert run("install", client, "--client-config", str(fresh), "--dry-run") == 0
    assert capsys.readouterr().out.startswith(f"--- /dev/null\n+++ {fresh}\n")
    assert not fresh.parent.exists()


def test_uninstall_of_our_own_continue_block_file_removes_the_file(tmp_path: Path) -> None:
    target = tmp_path / "memory.yaml"
    assert run("install", "continue", "--client-config", str(target)) == 0
    assert yaml.safe_load(target.read_text())["schema"] == "v1"
    assert run("uninstall", "continue", "--client-config", str(target)) == 0
    assert not target.exists()
    assert backups(target) == []  # it held our entry and nothing else: nothing to keep


@pytest.mark.parametrize("client", ["vscode", "zed"])
def test_jsonc_comments_and_layout_stay(tmp_path: Path, client: str) -> None:
    key = CLIENTS[client].servers_key
    text = (
        '// my settings\n{\n\t/* font */ "ui_font_size": 16,\n'
        f'\t"{key}": {{\n\t\t"other": {{ "command": "other-server" }}, // keep me\n\t}},\n}}\n'
    )
    target = tmp_path / "settings.json"
    target.write_text(text, encoding="utf-8")
    assert run("install", client, "--client-config", str(target)) == 0
    new = target.read_text(encoding="utf-8")
    assert new.startswith('// my settings\n{\n\t/* font */ "ui_font_size": 16,\n')
    assert '"other": { "command": "other-server" }, // keep me\n\t\t"memory": {\n\t\t\t' in new
    assert servers(client, target)["memory"]["command"] == SERVER
    assert run("uninstall", client, "--client-config", str(target)) == 0
    after = target.read_text(encoding="utf-8")
    for comment in ("// my settings", "/* font */", "// keep me"):
        assert comment in after
    assert list(servers(client, target)) == ["other"]


@pytest.mark.parametrize("client", ["cursor", "vscode", "zed", "codex"])
def test_uninstall_removes_the_file_install_created_and_keeps_one_that_holds_more(tmp_path: Path, client: str) -> None:
    target = tmp_path / "config"
    assert run("install", client, "--client-config", str(target)) == 0
    assert target.is_file()  # positive control: install created it
    assert run("uninstall", client, "--client-config", str(target)) == 0
    assert sorted(tmp_path.iterdir()) == []  # as before install: no emptied file, no copy of our entry
    kept = {
        "toml": 'model = "o3"\n',
        "json": f'{{\n  "{CLIENTS[client].servers_key}": {{}},\n  "theme": "dark"\n}}\n',
        "jsonc": f'{{\n  "{CLIENTS[client].servers_key}": {{\n    // mine\n  }}\n}}\n',
    }[CLIENTS[client].format]
    target.write_text(kept, encoding="utf-8")
    assert run("install", client, "--client-config", str(target)) == 0
    assert run("uninstall", client, "--client-config", str(target)) == 0
    assert target.read_text(encoding="utf-8") == kept  # what was there before, comments and keys kept


def test_an_existing_entry_keeps_the_fields_the_client_added(tmp_path: Path) -> None:
    target = tmp_path / "cline.json"
    entry = {"command": "/old/mcp-memory", "args": ["serve"], "disabled": False, "autoApprove": ["recall"]}
    target.write_text(orjson.dumps({"mcpServers": {"memory": entry}}).decode(), encoding="utf-8")
    assert run("install", "cline", "--client-config", str(target)) == 0
    assert servers("cline", target)["memory"] == {**entry, "command": SERVER}


@pytest.mark.parametrize(
    ("client", "text", "problem"),
    [
        ("cursor", '{"mcpServers": {"a": 1,}}', "is not valid JSON"),
        ("claude-desktop", '{"mcpServers": {}} // note', "is not valid JSON"),
        ("vscode", '{"servers": {"a": 1} "b": 2}', "is not valid JSON with comments"),
        ("cursor", "[1, 2]", "not an object"),
        ("windsurf", '{"mcpServers": ["memory"]}', "not an object of servers"),
        ("gemini-cli", '{"mcpServers": {"memory": {}, "memory": {}}}', "appears 2 times"),
        ("codex", "[mcp_servers\ncommand = 1\n", "is not valid TOML"),
        ("codex", "mcp_servers = 3\n", "'mcp_servers' is not a table"),
        ("codex", 'mcp_servers.memory.command = "x"\n', "inline or with dotted keys"),
        ("continue", "mcpServers: [unclosed\n", "is not valid YAML"),
        ("continue", "mcpServers:\n  memory: {}\n", "is not a list"),
        ("continue", "# mine\nmcpServers: []\n", "has comments"),
    ],
)
def test_an_invalid_file_is_named_with_the_fix_and_left_untouched(
    tmp_path: Path, client: str, text: str, problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "config"
    target.write_text(text, encoding="utf-8")
    for verb in ("install", "uninstall"):
        assert run(verb, client, "--client-config", str(target)) == 2
        err = capsys.readouterr().err
        if verb == "install" or "comments" not in problem:
            assert str(target) in err, err
            assert problem in err, err
    assert target.read_text(encoding="utf-8") == text
    assert backups(target) == []


def test_an_unknown_client_or_a_bad_name_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("install", "notepad", "--client-config", str(tmp_path / "x.json")) == 2
    err = capsys.readouterr().err
    assert "'notepad' is not a client this command knows" in err
    assert "claude-desktop, claude-code, cursor, vscode, windsurf, continue, cline, codex, gemini-cli, zed" in err
    assert "did you mean" not in err  # nothing near "notepad"
    assert run("install", "Curser", "--client-config", str(tmp_path / "x.json")) == 2
    assert "'Curser' is not a client this command knows (did you mean 'cursor'?)" in capsys.readouterr().err
    assert run("install", "cursor", "--name", "../evil", "--client-config", str(tmp_path / "x.json")) == 2
    assert "--name" in capsys.readouterr().err
    assert run("install", "cursor", "--hooks", "--client-config", str(tmp_path / "x.json")) == 2
    assert "hooks are Claude Code's" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_an_unreadable_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "mcp.json"
    folder.mkdir()
    assert run("install", "cursor", "--client-config", str(folder)) == 2
    assert f"{folder}: is a folder" in capsys.readouterr().err


LINUX_DEFAULTS = {
    "claude-desktop": ".config/Claude/claude_desktop_config.json",
    "claude-code": ".claude.json",
    "cursor": ".cursor/mcp.json",
    "vscode": ".config/Code/User/mcp.json",
    "windsurf": ".codeium/windsurf/mcp_config.json",
    "continue": ".continue/mcpServers/memory.yaml",
    "cline": ".config/Code/User/globalStorage/saoudrizwan.claude-dev/settings/cline_mcp_settings.json",
    "codex": ".codex/config.toml",
    "gemini-cli": ".gemini/settings.json",
    "zed": ".config/zed/settings.json",
}


@pytest.mark.skipif(sys.platform != "linux", reason="the default locations of this machine's OS")
@pytest.mark.parametrize("client", list(CLIENTS))
def test_the_default_location_is_the_clients_own_under_home(
    tmp_path: Path, client: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert set(LINUX_DEFAULTS) == set(CLIENTS)
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("XDG_CONFIG_HOME", "APPDATA", "CODEX_HOME"):
        monkeypatch.delenv(name, raising=False)
    assert run("install", client) == 0
    assert servers(client, tmp_path / LINUX_DEFAULTS[client])["memory"]["command"] == SERVER
    assert run("uninstall", client) == 0


def test_xdg_config_home_and_codex_home_move_the_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))
    places = Places("Linux", tmp_path / "home", {"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "CODEX_HOME": "/c"})
    assert CLIENTS["zed"].location(places, "memory") == tmp_path / "xdg" / "zed" / "settings.json"
    assert CLIENTS["codex"].location(places, "memory") == Path("/c/config.toml")
    if sys.platform == "linux":
        assert run("install", "codex") == 0
        assert "memory" in servers("codex", tmp_path / "codex" / "config.toml")


def test_macos_and_windows_locations(tmp_path: Path) -> None:
    home, roaming = tmp_path / "home", tmp_path / "AppData" / "Roaming"
    mac, win = Places("Darwin", home, {}), Places("Windows", home, {"APPDATA": str(roaming)})
    support = home / "Library" / "Application Support"
    where = {name: (client.location(mac, "memory"), client.location(win, "memory")) for name, client in CLIENTS.items()}
    assert where["claude-desktop"] == (
        support / "Claude" / "claude_desktop_config.json",
        roaming / "Claude" / "claude_desktop_config.json",
    )
    assert where["vscode"] == (support / "Code" / "User" / "mcp.json", roaming / "Code" / "User" / "mcp.json")
    cline = Path("globalStorage", "saoudrizwan.claude-dev", "settings", "cline_mcp_settings.json")
    assert where["cline"] == (support / "Code" / "User" / cline, roaming / "Code" / "User" / cline)
    assert where["zed"] == (home / ".config" / "zed" / "settings.json", roaming / "Zed" / "settings.json")
    for name in ("claude-code", "cursor", "windsurf", "codex", "gemini-cli", "continue"):
        mac_path, win_path = where[name]
        assert mac_path == win_path, name
        assert mac_path.is_relative_to(home), name
    windows_without_appdata = Places("Windows", home, {})
    assert CLIENTS["claude-desktop"].location(windows_without_appdata, "m").is_relative_to(home / "AppData" / "Roaming")


def test_claude_code_hooks_are_added_once_and_removed_alone(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    theirs = {"hooks": [{"type": "command", "command": "echo theirs"}]}
    settings.write_text(orjson.dumps({"model": "opus", "hooks": {"Stop": [theirs]}}).decode(), encoding="utf-8")
    argv = ["--client-config", str(tmp_path / "claude.json"), "--hooks", "--hooks-config", str(settings)]
    assert run("install", "claude-code", *argv, "--namespace", "proj") == 0
    hooks = orjson.loads(settings.read_bytes())["hooks"]
    assert set(hooks) == {"SessionStart", "UserPromptSubmit", "PreCompact", "Stop"}
    assert hooks["UserPromptSubmit"] == [
        {"hooks": [{"type": "command", "command": f"{SERVER} hook UserPromptSubmit --namespace proj", "timeout": 5}]}
    ]
    assert hooks["Stop"][0] == theirs
    first = settings.read_bytes()
    assert run("install", "claude-code", *argv, "--namespace", "proj") == 0
    assert settings.read_bytes() == first
    assert run("uninstall", "claude-code", *argv) == 0
    assert orjson.loads(settings.read_bytes()) == {"model": "opus", "hooks": {"Stop": [theirs]}}
    assert not (tmp_path / "claude.json").exists()  # install created it for our entry alone


def test_the_readme_blocks_say_what_install_writes() -> None:
    """The hand-written entries of docs/clients.md and the installer agree on each client's shape."""
    from tests.readme_configs import readme_client_configs

    written = {"Claude Desktop": "claude-desktop", "Cursor": "cursor", "VS Code": "vscode", "Windsurf": "windsurf"}
    written |= {"Codex CLI": "codex", "Gemini CLI": "gemini-cli"}
    for config in readme_client_configs():
        if config.client in written and not config.remote and not config.windows:
            readme = config.servers()["memory"]
            ours = CLIENTS[written[config.client]].entry(readme["command"], readme["args"])
            assert ours == readme, config.client


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize("client", ["claude-desktop", "cursor", "vscode"])
async def test_the_installed_entry_answers_tools_list_when_started_as_the_client_would(
    tmp_path: Path, client: str
) -> None:
    target = tmp_path / "config.json"
    target.write_text(another_server(client), encoding="utf-8")
    assert run("install", client, "--client-config", str(target), "--data-dir", str(tmp_path / "data")) == 0
    entry = servers(client, target)["memory"]
    assert CLIENTS[client].format != "jsonc" or entry["type"] == "stdio"
    (tmp_path / "empty.toml").touch()
    # The client passes its own few variables; PYTHONPATH makes the entry run this checkout's code.
    env = {**entry.get("env", {}), "PYTHONPATH": str(REPO), "MCP_MEMORY_CONFIG": str(tmp_path / "empty.toml")}
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=env, cwd=str(tmp_path))
    with anyio.fail_after(60):
        async with Client(params) as session:
            tools = {tool.name for tool in (await session.list_tools()).tools}
    assert {"remember", "recall"} <= tools


def test_the_file_keeps_its_mode_and_a_symlink_stays_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "mcp.json"
    real.parent.mkdir()
    real.write_text(another_server("cursor"), encoding="utf-8")
    real.chmod(0o640)
    link = tmp_path / "mcp.json"
    link.symlink_to(real)
    assert run("install", "cursor", "--client-config", str(link)) == 0
    assert link.is_symlink()
    assert real.stat().st_mode & 0o777 == 0o640
    assert "memory" in servers("cursor", real)
    assert sorted(p.name for p in tmp_path.rglob("*") if ".tmp" in p.name) == []  # no temporary file left


def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("XDG_CONFIG_HOME", "APPDATA", "CODEX_HOME"):
        monkeypatch.delenv(name, raising=False)
    return home


def _tree(home: Path) -> list[str]:
    return sorted(str(path.relative_to(home)) for path in home.rglob("*"))


@pytest.mark.skipif(sys.platform != "linux", reason="the default locations of this machine's OS")
def test_uninstall_removes_the_folders_install_created_once_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """~/.cursor, ~/.config/zed and ~/.config went with the files install had put in them (docs/adr/0030)."""
    home = _home(tmp_path, monkeypatch)
    for client in ("cursor", "zed", "claude-code"):
        assert run("install", client, *(["--hooks"] if client == "claude-code" else [])) == 0
    assert {".cursor/mcp.json", ".config/zed/settings.json", ".claude/settings.json"} <= set(_tree(home))
    for client in ("cursor", "zed", "claude-code"):
        assert run("uninstall", client, *(["--hooks"] if client == "claude-code" else [])) == 0
    assert _tree(home) == []  # as before install


@pytest.mark.skipif(sys.platform != "linux", reason="the default locations of this machine's OS")
def test_uninstall_keeps_a_folder_it_did_not_create_or_that_holds_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = _home(tmp_path, monkeypatch)
    (home / ".cursor").mkdir()  # the user's (Cursor ran once): empty, and not ours to remove
    assert run("install", "cursor") == 0
    assert run("install", "zed") == 0
    (home / ".config" / "other-app").mkdir()  # another program's, made since
    (home / ".config" / "zed" / "themes.json").write_text("{}", encoding="utf-8")  # Zed's, made since
    assert run("uninstall", "cursor") == 0
    assert run("uninstall", "zed") == 0
    assert _tree(home) == [
        ".config",
        ".config/other-app",
        ".config/zed",
        ".config/zed/.mcp-memory-made",  # kept: once themes.json goes, uninstall can still tidy up
        ".config/zed/themes.json",
        ".cursor",
    ]
    (home / ".config" / "zed" / "themes.json").unlink()
    (home / ".config" / "other-app").rmdir()
    assert run("uninstall", "zed") == 0  # nothing of ours left in a file: the folders still go
    assert _tree(home) == [".cursor"]
