"""Build the Claude Desktop extension: an MCP Bundle (a zip with manifest.json at its root).

    .venv/bin/python tools/build_mcpb.py [--out dist/mcp-memory.mcpb] [--repository URL]

Then double-click the file, or drag it onto Claude Desktop's Settings > Extensions.

The bundle is of server type "uv" (manifest 0.4): it carries this package's source and a
pyproject.toml with the package's runtime dependencies, and the host installs Python and those
dependencies with uv on the user's machine. So one bundle serves every platform, the compiled
dependencies (numpy, orjson, the embedding model's wheel) come for the user's own machine, and
nothing of this machine's .venv goes in. Type "python" would have to carry them, built for one
platform. The type is marked experimental in the spec; Claude Desktop installs it.

Where the format comes from: MANIFEST.md and src/schemas/0.4.ts of github.com/modelcontextprotocol/mcpb
at @anthropic-ai/mcpb 2.1.2, the CLI tests/test_mcpb.py validates with; the variable substitution
(``${__dirname}``, ``${user_config.KEY}``) follows its src/shared/config.ts.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import orjson
from mcp.client import Client

from mcp_memory import __version__
from mcp_memory.config import load_settings
from mcp_memory.mcp.server import open_server

REPO = Path(__file__).resolve().parents[1]
ENTRY = Path(__file__).resolve().parent / "mcpb_entry.py"
DEFAULT_OUT = REPO / "dist" / "mcp-memory.mcpb"
MANIFEST_VERSION = "0.4"
# Inside the bundle: Python puts the entry point's folder first on sys.path, so the package beside it is imported.
ENTRY_POINT = "server/main.py"
PACKAGE_DIR = "server/mcp_memory"
SKIPPED = {"__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
# A fixed timestamp for every entry: the same source builds the same bytes.
ZIP_TIME = (1980, 1, 1, 0, 0, 0)

LONG_DESCRIPTION = """\
Long-term memory for Claude: it remembers facts, preferences, decisions and events across
conversations and recalls the ones that matter for a question (meaning and keywords, ranked by
relevance, recency and importance), and it checkpoints long tasks so a later session resumes them.

Everything stays on this computer: one SQLite file per user under the data directory, and a small
embedding model that runs locally. The same data directory serves the `mcp-memory` command, so
Claude Code or Cursor set up with it share these memories."""

USER_CONFIG: dict[str, dict[str, Any]] = {
    "data_dir": {
        "type": "directory",
        "title": "Data directory",
        "description": "Where the memories are kept. Leave empty for the default the mcp-memory command uses "
        "too (~/.local/share/mcp-memory on Linux, ~/Library/Application Support/mcp-memory on macOS, "
        "%LOCALAPPDATA%\\mcp-memory\\mcp-memory on Windows), so other clients share the same memories.",
        "required": False,
    },
    "namespace": {
        "type": "string",
        "title": "Namespace",
        "description": "Optional: a project name that new memories are filed under (recall sees your "
        "memories from every namespace). Leave empty for none.",
        "required": False,
    },
}

# Each answer reaches the server as the settings variable of the same meaning (mcp_memory/config.py).
# No `${HOME}` default: Claude Desktop passes a default's variables through unsubstituted
# (github.com/modelcontextprotocol/mcpb issue 251), and an empty field leaves the server's default.
ENV = {"MCP_MEMORY_DATA_DIR": "${user_config.data_dir}", "MCP_MEMORY_NAMESPACE": "${user_config.namespace}"}


def project() -> dict[str, Any]:
    """The [project] table of this checkout's pyproject.toml."""
    table: dict[str, Any] = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return table


async def served_tools() -> list[dict[str, str]]:
    """Every tool a default server lists, named and described by its first paragraph, as served."""
    with tempfile.TemporaryDirectory() as scratch:
        config = Path(scratch) / "config.toml"
        config.touch()  # a config.toml in the builder's home must not change what is listed
        settings = load_settings(config, data_dir=Path(scratch) / "data")
        async with open_server(settings, warm=False) as runtime, Client(runtime.mcp) as client:
            listed = (await client.list_tools()).tools
    return [{"name": tool.name, "description": first_paragraph(tool.description or tool.name)} for tool in listed]


def first_paragraph(text: str) -> str:
    return " ".join(text.strip().split("\n\n", 1)[0].split())


def manifest(tools: list[dict[str, str]], repository: str | None = None) -> dict[str, Any]:
    """The bundle's manifest.json: how Claude Desktop shows, configures and starts the server."""
    meta = project()
    built: dict[str, Any] = {
        "manifest_version": MANIFEST_VERSION,
        "name": "mcp-memory",
        "display_name": "mcp-memory",
        "version": __version__,
        "description": meta["description"],
        "long_description": LONG_DESCRIPTION,
        "author": {"name": "mcp-memory contributors"},
        "server": {
            "type": "uv",
            "entry_point": ENTRY_POINT,
            # What the host runs: uv syncs the bundle's pyproject.toml into an environment in the
            # bundle's folder and starts the entry point there.
            "mcp_config": {"command": "uv", "args": ["run", "--directory", "${__dirname}", ENTRY_POINT], "env": ENV},
        },
        "tools": tools,
        "prompts_generated": True,  # its prompts take arguments and are rendered by the server
        "keywords": ["memory", "long-term memory", "recall", "tasks", "checkpoint", "local", "sqlite"],
        "license": meta["license"],
        "compatibility": {
            "platforms": ["darwin", "win32", "linux"],
            "runtimes": {"python": meta["requires-python"]},
        },
        "user_config": USER_CONFIG,
    }
    if repository is not None:
        built["repository"] = {"type": "git", "url": repository}
    return built


def bundle_pyproject() -> str:
    """The pyproject.toml uv installs from: the package's runtime dependencies, and no package to
    build (the source is in the bundle)."""
    meta = project()
    lines = [
        f"# Generated by tools/build_mcpb.py from {meta['name']} {__version__}'s pyproject.toml: the",
        "# dependencies the host installs with uv. The package itself is server/mcp_memory.",
        "[project]",
        f"name = {toml_string(meta['name'] + '-extension')}",
        f"version = {toml_string(__version__)}",
        f"requires-python = {toml_string(meta['requires-python'])}",
        "dependencies = [",
        *(f"    {toml_string(requirement)}," for requirement in meta["dependencies"]),
        "]",
        "",
        "[tool.uv]",
        "package = false",
        "",
    ]
    return "\n".join(lines)


def toml_string(value: str) -> str:
    return orjson.dumps(value).decode()  # a JSON string is a TOML basic string


def package_files() -> Iterator[tuple[Path, str]]:
    """Each file of the package with its name in the bundle; the prompts go where a wheel puts them."""
    for folder, target in ((REPO / "mcp_memory", PACKAGE_DIR), (REPO / "prompts", f"{PACKAGE_DIR}/prompts_text")):
        for path in sorted(folder.rglob("*")):
            relative = path.relative_to(folder)
            if path.is_file() and not SKIPPED & set(relative.parts) and path.suffix != ".pyc":
                yield path, f"{target}/{relative.as_posix()}"


def write_bundle(out: Path, manifest_json: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".tmp")
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
        add(bundle, "manifest.json", orjson.dumps(manifest_json, option=orjson.OPT_INDENT_2) + b"\n")
        add(bundle, "pyproject.toml", bundle_pyproject().encode())
        add(bundle, ENTRY_POINT, ENTRY.read_bytes())
        for path, name in package_files():
            add(bundle, name, path.read_bytes())
    partial.replace(out)


def add(bundle: zipfile.ZipFile, name: str, data: bytes) -> None:
    entry = zipfile.ZipInfo(name, ZIP_TIME)
    entry.external_attr = 0o644 << 16
    entry.compress_type = zipfile.ZIP_DEFLATED
    bundle.writestr(entry, data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build mcp-memory.mcpb, the Claude Desktop extension.")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"the bundle to write (default {DEFAULT_OUT})")
    parser.add_argument("--repository", help="the source repository's URL, for the manifest (none is published yet)")
    args = parser.parse_args(argv)
    tools = anyio.run(served_tools)
    write_bundle(args.out, manifest(tools, args.repository))
    sys.stderr.write(f"wrote {args.out} (mcp-memory {__version__}, {len(tools)} tools)\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
