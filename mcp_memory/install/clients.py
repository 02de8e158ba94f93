"""The MCP clients `mcp-memory install` knows: where each keeps its user-level configuration on Linux,
macOS and Windows, in which format, and what a stdio entry looks like there.

Each entry names the page (or the client's own repository file) its format and location come from,
as checked when this table was written; the README's hand-written blocks say the same.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

Format = Literal["json", "jsonc", "toml", "yaml"]


@dataclass(frozen=True)
class Places:
    """The directories a client's configuration hangs from, for one operating system."""

    system: str  # platform.system(): Linux, Darwin, Windows
    home: Path
    env: Mapping[str, str]  # APPDATA, XDG_CONFIG_HOME, CODEX_HOME when set

    def app_data(self) -> Path:
        """Where desktop apps keep per-user settings: ~/Library/Application Support, %APPDATA%,
        $XDG_CONFIG_HOME (~/.config)."""
        if self.system == "Darwin":
            return self.home / "Library" / "Application Support"
        if self.system == "Windows":
            return Path(self.env.get("APPDATA") or self.home / "AppData" / "Roaming")
        return self.xdg_config()

    def xdg_config(self) -> Path:
        return Path(self.env.get("XDG_CONFIG_HOME") or self.home / ".config")


@dataclass(frozen=True)
class Client:
    name: str
    title: str
    format: Format
    servers_key: str  # the map (or Continue's list) the servers live in
    location: Callable[[Places, str], Path]  # (places, server name) -> the user-level file
    source: str  # where the format and the location come from
    entry_fields: Mapping[str, Any] = field(default_factory=dict)  # fields before command and args

    def entry(self, command: str, args: list[str]) -> dict[str, Any]:
        return {**self.entry_fields, "command": command, "args": args}


def _zed(places: Places, _name: str) -> Path:
    if places.system == "Windows":
        return places.app_data() / "Zed" / "settings.json"
    if places.system == "Darwin":  # Zed keeps ~/.config on macOS too
        return places.home / ".config" / "zed" / "settings.json"
    return places.xdg_config() / "zed" / "settings.json"


def _codex(places: Places, _name: str) -> Path:
    return Path(places.env.get("CODEX_HOME") or places.home / ".codex") / "config.toml"


_CLIENTS = (
    # modelcontextprotocol.io/quickstart/user ("claude_desktop_config.json", macOS and Windows paths);
    # on Linux (no official build) the community builds read ~/.config/Claude.
    Client(
        "claude-desktop",
        "Claude Desktop",
        "json",
        "mcpServers",
        lambda p, _: p.app_data() / "Claude" / "claude_desktop_config.json",
        "https://modelcontextprotocol.io/quickstart/user",
    ),
    # code.claude.com/docs/en/mcp: user scope = top-level "mcpServers" of ~/.claude.json (what
    # `claude mcp add --scope user` writes); hooks: docs.claude.com/en/docs/claude-code/hooks.
    Client(
        "claude-code",
        "Claude Code",
        "json",
        "mcpServers",
        lambda p, _: p.home / ".claude.json",
        "https://code.claude.com/docs/en/mcp",
        {"type": "stdio"},
    ),
    # cursor.com/docs/mcp: global ~/.cursor/mcp.json, "mcpServers" with command/args/env.
    Client(
        "cursor",
        "Cursor",
        "json",
        "mcpServers",
        lambda p, _: p.home / ".cursor" / "mcp.json",
        "https://cursor.com/docs/mcp",
    ),
    # code.visualstudio.com/docs/copilot/reference/mcp-configuration: user-profile mcp.json, top-level
    # "servers", stdio entries need "type": "stdio"; the default profile's folder per OS from
    # code.visualstudio.com/docs/getstarted/settings#_settings-file-locations. JSONC.
    Client(
        "vscode",
        "VS Code",
        "jsonc",
        "servers",
        lambda p, _: p.app_data() / "Code" / "User" / "mcp.json",
        "https://code.visualstudio.com/docs/copilot/reference/mcp-configuration",
        {"type": "stdio"},
    ),
    # docs.windsurf.com/windsurf/cascade/mcp: ~/.codeium/windsurf/mcp_config.json, "mcpServers".
    Client(
        "windsurf",
        "Windsurf",
        "json",
        "mcpServers",
        lambda p, _: p.home / ".codeium" / "windsurf" / "mcp_config.json",
        "https://docs.windsurf.com/windsurf/cascade/mcp",
    ),
    # docs.continue.dev/customize/deep-dives/mcp: a block file with an "mcpServers" list (name, command,
    # args); continuedev/continue core/config/loadLocalAssistants.ts reads such blocks from
    # ~/.continue/mcpServers as well as the workspace's, so our own file leaves config.yaml alone.
    Client(
        "continue",
        "Continue",
        "yaml",
        "mcpServers",
        lambda p, name: p.home / ".continue" / "mcpServers" / f"{name}.yaml",
        "https://docs.continue.dev/customize/deep-dives/mcp",
    ),
    # docs.cline.bot/mcp/configuring-mcp-servers: cline_mcp_settings.json, "mcpServers"; the file sits in
    # the extension's VS Code global storage (saoudrizwan.claude-dev/settings).
    Client(
        "cline",
        "Cline",
        "json",
        "mcpServers",
        lambda p, _: (
            p.app_data()
            / "Code"
            / "User"
            / "globalStorage"
            / "saoudrizwan.claude-dev"
            / "settings"
            / "cline_mcp_settings.json"
        ),
        "https://docs.cline.bot/mcp/configuring-mcp-servers",
    ),
    # openai/codex docs/config.md: [mcp_servers.NAME] tables in $CODEX_HOME/config.toml (~/.codex).
    Client(
        "codex",
        "Codex CLI",
        "toml",
        "mcp_servers",
        _codex,
        "https://github.com/openai/codex/blob/main/docs/config.md",
    ),
    # google-gemini/gemini-cli docs/tools/mcp-server.md: "mcpServers" in ~/.gemini/settings.json.
    Client(
        "gemini-cli",
        "Gemini CLI",
        "json",
        "mcpServers",
        lambda p, _: p.home / ".gemini" / "settings.json",
        "https://github.com/google-gemini/gemini-cli/blob/main/docs/tools/mcp-server.md",
    ),
    # zed.dev/docs/ai/mcp ("context_servers": command/args/env) and zed.dev/docs/configuring-zed
    # (settings.json, JSON with comments; ~/.config/zed on macOS and Linux, %APPDATA%\Zed on Windows).
    Client(
        "zed",
        "Zed",
        "jsonc",
        "context_servers",
        _zed,
        "https://zed.dev/docs/ai/mcp",
    ),
)

CLIENTS: dict[str, Client] = {client.name: client for client in _CLIENTS}


def claude_code_settings(places: Places) -> Path:
    """Claude Code's user settings, where hooks live (docs.claude.com/en/docs/claude-code/hooks)."""
    return places.home / ".claude" / "settings.json"
