"""The Claude Desktop extension (tools/build_mcpb.py) and the MCP Registry entry (server.json).

The bundle goes through the official MCPB CLI (pinned in tests/node), then is unpacked and started
the way Claude Desktop starts it. server.json is checked against the registry's published schema,
vendored in tests/fixtures/registry (its source and licence are in the README there).
"""

from __future__ import annotations

import getpass
import importlib.util
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from jsonschema import Draft7Validator  # type: ignore[import-untyped]
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from mcp_memory import __version__
from mcp_memory.config import Settings
from mcp_memory.mcp.server import Server
from mcp_memory.storage.pool import principal_file
from tests import node_tools

REPO = Path(__file__).resolve().parents[1]
BUILD = REPO / "tools" / "build_mcpb.py"
ENTRY = REPO / "tools" / "mcpb_entry.py"
MCPB = node_tools.MODULES / "@anthropic-ai" / "mcpb" / "dist" / "cli" / "cli.js"
SCHEMA = Path(__file__).resolve().parent / "fixtures" / "registry" / "server.schema.json"
REPOSITORY = "https://example.org/mcp-memory.git"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundle as a developer builds it: the script, run from this checkout."""
    out = tmp_path_factory.mktemp("dist") / "mcp-memory.mcpb"
    argv = [sys.executable, str(BUILD), "--out", str(out), "--repository", REPOSITORY]
    built = subprocess.run(
        argv, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=120, check=False
    )
    assert built.returncode == 0, built.stderr
    return out


def manifest_of(bundle: Path) -> dict[str, Any]:
    with zipfile.ZipFile(bundle) as archive:
        loaded: dict[str, Any] = orjson.loads(archive.read("manifest.json"))
    return loaded


def mcpb(*args: Path | str) -> subprocess.CompletedProcess[str]:
    """The official MCPB CLI (@anthropic-ai/mcpb, pinned in tests/node/package-lock.json)."""
    argv = [node_tools.node(MCPB), str(MCPB), *map(str, args)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def desktop_config(manifest: dict[str, Any], dirname: Path, answers: dict[str, str]) -> dict[str, Any]:
    """``server.mcp_config`` resolved as Claude Desktop resolves it (mcpb src/shared/config.ts,
    getMcpConfigForManifest): one pass, ``${__dirname}`` and the system folders first, then each
    ``${user_config.KEY}`` that has an answer or a default; any other placeholder stays as written."""
    values = {key: option["default"] for key, option in manifest["user_config"].items() if "default" in option}
    values |= answers
    variables = {"__dirname": str(dirname), "pathSeparator": os.sep, "/": os.sep, "HOME": str(Path.home())}
    variables |= {f"user_config.{key}": str(value) for key, value in values.items()}

    def substitute(value: Any) -> Any:
        if isinstance(value, str):
            for name, replacement in variables.items():
                value = value.replace("${" + name + "}", replacement)
            return value
        if isinstance(value, list):
            return [substitute(item) for item in value]
        if isinstance(value, dict):
            return {key: substitute(item) for key, item in value.items()}
        return value

    resolved: dict[str, Any] = substitute(manifest["server"]["mcp_config"])
    return resolved


def test_the_official_mcpb_cli_unpacks_and_validates_the_bundle(bundle: Path, tmp_path: Path) -> None:
    unpacked = tmp_path / "unpacked"
    opened = mcpb("unpack", bundle, unpacked)
    assert opened.returncode == 0, opened.stdout + opened.stderr
    checked = mcpb("validate", unpacked)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "validation passes" in checked.stdout
    assert orjson.loads((unpacked / "manifest.json").read_bytes())["repository"]["url"] == REPOSITORY


def test_the_mcpb_cli_rejects_a_manifest_the_spec_does_not_allow(bundle: Path, tmp_path: Path) -> None:
    """The validation above has teeth: without the required author it fails."""
    manifest = manifest_of(bundle)
    del manifest["author"]
    (tmp_path / "manifest.json").write_bytes(orjson.dumps(manifest))
    checked = mcpb("validate", tmp_path)
    assert checked.returncode == 1
    assert "author" in checked.stdout


@pytest.mark.anyio
async def test_the_manifest_lists_every_tool_the_server_serves(bundle: Path, runtime: Server) -> None:
    async with Client(runtime.mcp) as client:
        served = {tool.name: tool.description or "" for tool in (await client.list_tools()).tools}
    listed = {tool["name"]: tool["description"] for tool in manifest_of(bundle)["tools"]}
    assert listed.keys() == served.keys()
    for name, description in listed.items():
        assert description, name
        assert " ".join(served[name].split()).startswith(description), name


def test_the_manifest_names_this_version_and_settings_the_server_reads(bundle: Path) -> None:
    manifest = manifest_of(bundle)
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert manifest["version"] == __version__
    assert manifest["server"]["type"] == "uv"
    assert manifest["compatibility"]["runtimes"]["python"] == project["requires-python"]
    assert manifest["license"] == project["license"]
    assert manifest["user_config"]["data_dir"]["type"] == "directory"
    env = manifest["server"]["mcp_config"]["env"]
    assert env == {"MCP_MEMORY_DATA_DIR": "${user_config.data_dir}", "MCP_MEMORY_NAMESPACE": "${user_config.namespace}"}
    assert {name.removeprefix("MCP_MEMORY_").lower() for name in env} <= Settings.model_fields.keys()


def test_the_bundle_carries_the_source_and_its_dependencies_and_no_environment(bundle: Path) -> None:
    with zipfile.ZipFile(bundle) as archive:
        names = set(archive.namelist())
        pyproject = tomllib.loads(archive.read("pyproject.toml").decode())
        entry = archive.read("server/main.py")
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert pyproject["project"]["dependencies"] == project["dependencies"]
    assert pyproject["project"]["requires-python"] == project["requires-python"]
    assert pyproject["tool"]["uv"]["package"] is False
    assert entry == ENTRY.read_bytes()
    source = {
        f"server/mcp_memory/{path.relative_to(REPO / 'mcp_memory').as_posix()}"
        for path in (REPO / "mcp_memory").rglob("*.py")
    }
    assert source <= names
    prompts = {f"server/mcp_memory/prompts_text/{path.name}" for path in (REPO / "prompts").glob("*.md")}
    assert prompts <= names
    assert not [name for name in names if {".venv", "site-packages", "__pycache__"} & set(name.split("/"))]
    assert not [name for name in names if name.endswith(".pyc")]


def test_an_unanswered_field_leaves_the_servers_default() -> None:
    spec = importlib.util.spec_from_file_location("mcpb_entry", ENTRY)
    assert spec is not None
    assert spec.loader is not None
    entry = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(entry)
    environ = {
        "MCP_MEMORY_DATA_DIR": "/home/ada/memories",
        "MCP_MEMORY_NAMESPACE": "${user_config.namespace}",  # no answer and no default: left as written
        "MCP_MEMORY_LOG_LEVEL": " ",
        "PATH": "/usr/bin",
    }
    entry.drop_unanswered(environ)
    assert environ == {"MCP_MEMORY_DATA_DIR": "/home/ada/memories", "PATH": "/usr/bin"}


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_unpacked_bundle_started_as_claude_desktop_would_answers_tools_list(
    bundle: Path, tmp_path: Path
) -> None:
    extension = tmp_path / "Claude Extensions" / "mcp-memory"  # a space, as in the host's own folder
    with zipfile.ZipFile(bundle) as archive:
        archive.extractall(extension)
    data = tmp_path / "data"
    config = desktop_config(manifest_of(bundle), extension, {"data_dir": str(data)})  # the namespace unanswered
    assert config["command"] == "uv"
    assert config["args"][:3] == ["run", "--directory", str(extension)]
    # uv builds an environment from the bundle's pyproject.toml and runs the entry point in it, from
    # the bundle's folder; offline, this venv stands in for that environment (the same dependencies).
    (tmp_path / "empty.toml").touch()
    env = {**config["env"], "MCP_MEMORY_CONFIG": str(tmp_path / "empty.toml")}
    params = StdioServerParameters(command=sys.executable, args=config["args"][3:], env=env, cwd=str(extension))
    with anyio.fail_after(60):
        async with Client(params) as session:
            tools = {tool.name for tool in (await session.list_tools()).tools}
            stored = await session.call_tool("remember", {"content": "The extension keeps memories where it is told"})
    assert {"remember", "recall"} <= tools
    assert not stored.is_error, stored.content
    assert principal_file(data, getpass.getuser()).is_file()


def test_server_json_follows_the_registry_schema_and_this_version() -> None:
    server = orjson.loads((REPO / "server.json").read_bytes())
    schema = orjson.loads(SCHEMA.read_bytes())
    Draft7Validator(schema, format_checker=Draft7Validator.FORMAT_CHECKER).validate(server)
    assert server["$schema"] == schema["$id"]
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert server["version"] == __version__
    (package,) = server["packages"]
    assert (package["registryType"], package["identifier"], package["version"]) == (
        "pypi",
        project["name"],
        __version__,
    )
    names = {variable["name"].removeprefix("MCP_MEMORY_").lower() for variable in package["environmentVariables"]}
    assert names <= Settings.model_fields.keys()


@pytest.mark.parametrize(
    ("field", "value"),
    [("description", "x" * 101), ("name", "mcp-memory"), ("version", "latest")],
)
def test_the_vendored_schema_rejects_what_the_registry_rejects(field: str, value: str) -> None:
    server = orjson.loads((REPO / "server.json").read_bytes())
    if field == "version":
        server["packages"][0]["version"] = value
    else:
        server[field] = value
    errors = list(Draft7Validator(orjson.loads(SCHEMA.read_bytes())).iter_errors(server))
    assert errors
