"""The MCP Inspector CLI, pinned in tests/node/package-lock.json, run one request at a time on Node 22.

`node .../launcher/build/index.js --cli --format json [target] --method M ...` connects, sends one
request, prints `{"result": ...}` on stdout and exits; a failure prints `{"error": {"code",
"message"}}` as the last line of stderr and exits non-zero (5 for a tool result with `isError`,
whose result is still on stdout). A stdio server is started and stopped by each call, so state
carries from one call to the next only through the data directory.

The Inspector runs with HOME in a temporary directory: it keeps a catalog, a client config and OAuth
tokens under ~/.mcp-inspector, and a developer's own must not change a test. With no terminal it
never starts an interactive OAuth login (it fails with `auth_required`), and it has no telemetry
or update check.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson

from tests.node_tools import MODULES, node

LAUNCHER = MODULES / "@modelcontextprotocol/inspector/clients/launcher/build/index.js"

Era = Literal["legacy", "modern"]
# The Inspector's --protocol-era for each protocol generation the tests run in (conftest.MODES):
# legacy negotiates 2025-11-25 with initialize, modern speaks 2026-07-28.
ERA_OF_MODE: dict[str, Era] = {"legacy": "legacy", "2026-07-28": "modern"}


@dataclass(frozen=True)
class StdioTarget:
    """A server the Inspector starts itself: `command`, with `env` as the server's whole environment
    beyond the few variables (HOME, PATH, ...) the SDK's stdio transport passes on."""

    command: Sequence[str]
    env: Mapping[str, str] = field(default_factory=dict)

    def argv(self) -> list[str]:
        # After `--` the command's own flags are not read as the Inspector's.
        return [*_env_flags(self.env), "--", *self.command]


@dataclass(frozen=True)
class UrlTarget:
    """A server already listening on `url`, over SSE or streamable HTTP, sent `headers` on every request."""

    url: str
    transport: Literal["sse", "http"]
    headers: Mapping[str, str] = field(default_factory=dict)

    def argv(self) -> list[str]:
        headers = [arg for name, value in self.headers.items() for arg in ("--header", f"{name}: {value}")]
        # A refused token must fail the call, never start an OAuth login.
        return ["--transport", self.transport, "--server-url", self.url, *headers, "--stored-auth-only"]


@dataclass(frozen=True)
class ConfigTarget:
    """Server `server` of a client configuration file with an `mcpServers` object (Claude Desktop's
    format), read by `--config`; `env` is added to the entry's own `env` (stdio entries only)."""

    config: Path
    server: str
    env: Mapping[str, str] = field(default_factory=dict)

    def argv(self) -> list[str]:
        return ["--config", str(self.config), "--server", self.server, *_env_flags(self.env)]


Target = StdioTarget | UrlTarget | ConfigTarget


def _env_flags(env: Mapping[str, str]) -> list[str]:
    return [arg for name, value in env.items() for arg in ("-e", f"{name}={value}")]


class InspectorError(RuntimeError):
    """The Inspector exited non-zero; `code` and `message` are from its error envelope, `result`
    from stdout when there is one (a tool call answered with `isError`)."""

    def __init__(self, argv: Sequence[str], returncode: int, stdout: str, stderr: str) -> None:
        self.returncode = returncode
        self.stderr = stderr
        self.result: dict[str, Any] | None = _parse_result(stdout)
        envelope = _last_json_line(stderr).get("error", {})
        self.code: str = envelope.get("code", "")
        self.message: str = envelope.get("message", "")
        super().__init__(f"`{' '.join(argv)}` exited with {returncode} ({self.code}: {self.message})\n{stderr}")


def _last_json_line(text: str) -> dict[str, Any]:
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            try:
                parsed = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(parsed, dict):
                return parsed
    return {}


def _parse_result(stdout: str) -> dict[str, Any] | None:
    if not stdout.strip():
        return None
    result = orjson.loads(stdout).get("result")
    return result if isinstance(result, dict) else None


@dataclass(frozen=True)
class InspectorCli:
    """The Inspector CLI pointed at one target, in one protocol era."""

    target: Target
    home: Path
    era: Era = "legacy"
    timeout: float = 60.0

    def run(self, method: str, *args: str) -> dict[str, Any]:
        """One request; the `result` object, or InspectorError with the Inspector's stderr."""
        argv = [
            node(LAUNCHER),
            str(LAUNCHER),
            "--cli",  # the launcher reads its mode flag only first
            "--format",
            "json",
            "--protocol-era",
            self.era,
            "--method",
            method,
            *args,
            *self.target.argv(),
        ]
        self.home.mkdir(parents=True, exist_ok=True)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.home), "NO_COLOR": "1"}
        done = subprocess.run(
            argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=self.timeout, check=False
        )
        if done.returncode != 0:
            raise InspectorError(argv, done.returncode, done.stdout, done.stderr)
        result = _parse_result(done.stdout)
        if result is None:
            raise InspectorError(argv, done.returncode, done.stdout, done.stderr)
        return result

    def initialize(self) -> dict[str, Any]:
        """What the handshake gave: serverInfo, protocolVersion, capabilities, instructions."""
        return self.run("initialize")

    def list_tools(self) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = self.run("tools/list")["tools"]
        return tools

    def call_tool(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The tool's structured result. Arguments go as one JSON object (`--tool-args-json`), so a
        string that looks like a number stays a string; `--tool-arg k=v` would parse each value as JSON."""
        result = self.run("tools/call", "--tool-name", name, "--tool-args-json", orjson.dumps(arguments).decode())
        structured: dict[str, Any] = result["structuredContent"]
        return structured

    def list_resources(self) -> list[dict[str, Any]]:
        resources: list[dict[str, Any]] = self.run("resources/list")["resources"]
        return resources

    def list_resource_templates(self) -> list[dict[str, Any]]:
        templates: list[dict[str, Any]] = self.run("resources/templates/list")["resourceTemplates"]
        return templates

    def read_resource(self, uri: str) -> str:
        (content,) = self.run("resources/read", "--uri", uri)["contents"]
        text: str = content["text"]
        return text

    def list_prompts(self) -> list[dict[str, Any]]:
        prompts: list[dict[str, Any]] = self.run("prompts/list")["prompts"]
        return prompts

    def get_prompt(self, name: str, arguments: Mapping[str, str]) -> list[str]:
        """The text of each message. `--prompt-args k=v` parses a value as JSON when it can and turns
        it back into a string, so `1.0` would arrive as `1`."""
        pairs = [f"{key}={value}" for key, value in arguments.items()]
        messages = self.run("prompts/get", "--prompt-name", name, *(["--prompt-args", *pairs] if pairs else []))
        return [str(message["content"]["text"]) for message in messages["messages"]]
