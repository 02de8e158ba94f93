"""The client configurations in docs/clients.md (README.md's until the docs site), as a user would paste them.

Each ```json, ```yaml or ```toml block is one client's configuration, named by the bold label before
it ("**Cursor**"); a JSON block with `hooks` is Claude Code's hook settings, read apart.
The page tells the user the edits: replace `/path/to/mcp-memory` with the path of the clone, and
in the configurations for a network server, the URL with the server's and `mcpm_...` with a token.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import yaml

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
CLIENTS_PAGE = REPO / "docs" / "clients.md"
PLACEHOLDER = "/path/to/mcp-memory"
URL_PLACEHOLDER = "http://127.0.0.1:8765/mcp"
TOKEN_PLACEHOLDER = "mcpm_..."


@dataclass(frozen=True)
class ClientConfig:
    client: str
    document: dict[str, Any]
    index: int = 0  # the block's position in the page (a client has one for stdio, one for the network)

    @property
    def name(self) -> str:
        return f"{self.client} ({'network' if self.remote else 'stdio'})"

    @property
    def remote(self) -> bool:
        """Whether it reaches a network server (directly or through `mcp-memory connect`)."""
        return URL_PLACEHOLDER in orjson.dumps(self.document).decode()

    @property
    def windows(self) -> bool:
        """A configuration for Windows (an .exe under .venv\\Scripts): parsed, not started here."""
        return any(str(entry.get("command", "")).endswith(".exe") for entry in self.servers().values())

    def servers(self) -> dict[str, dict[str, Any]]:
        """The configured MCP servers by name, in the `mcpServers` shape (Claude Desktop, Cursor).

        VS Code names the map `servers`, Codex CLI `mcp_servers`; Continue's YAML keeps a list under
        `mcpServers`, each item with its `name` beside what an `mcpServers` entry holds. The
        conversion names the entries and changes nothing in them; an unknown layout fails.
        """
        for key in ("mcpServers", "servers", "mcp_servers"):
            found = self.document.get(key)
            if isinstance(found, dict):
                return found
            if isinstance(found, list):  # Continue's YAML
                return {item["name"]: {k: v for k, v in item.items() if k != "name"} for item in found}
        raise ValueError(f"{CLIENTS_PAGE.name} block for {self.client}: no server map or list in {self.document}")

    def inspector_config(self) -> dict[str, Any]:
        """What the Inspector's --config reads: the servers in the `mcpServers` shape (Continue's list
        converted). Cursor tells a remote server by its `url` alone; the Inspector wants that said as
        `"type": "streamable-http"`, which is added to such an entry and nothing else changes."""
        servers = {
            name: ({"type": "streamable-http", **entry} if "url" in entry and "type" not in entry else entry)
            for name, entry in self.servers().items()
        }
        return {"mcpServers": servers}

    def in_clone(self, clone: Path) -> ClientConfig:
        """The configuration with the placeholder replaced by `clone`, as the page says to."""
        return ClientConfig(self.client, _replace(self.document, PLACEHOLDER, str(clone)), self.index)

    def for_server(self, url: str, token: str) -> ClientConfig:
        """The network configuration pointed at `url` with `token`, as the page says to."""
        document = _replace(_replace(self.document, URL_PLACEHOLDER, url), TOKEN_PLACEHOLDER, token)
        return ClientConfig(self.client, document, self.index)


def _replace(node: Any, old: str, new: str) -> Any:
    if isinstance(node, dict):
        return {key: _replace(value, old, new) for key, value in node.items()}
    if isinstance(node, list):
        return [_replace(value, old, new) for value in node]
    if isinstance(node, str):
        return node.replace(old, new)
    return node


def _blocks() -> list[tuple[str, dict[str, Any]]]:
    """Every configuration block of docs/clients.md as (the last bold label before it, the document)."""
    page = CLIENTS_PAGE.read_text(encoding="utf-8")
    found: list[tuple[str, dict[str, Any]]] = []
    for block in re.finditer(r"```(json|yaml|toml)\n(.*?)```", page, flags=re.S):
        labels = re.findall(r"\*\*([^*\n]+)\*\*", page[: block.start()])
        if not labels:
            raise ValueError(f"{CLIENTS_PAGE}: no bold client name before the block at offset {block.start()}")
        kind, text = block.group(1), block.group(2)
        document = (
            orjson.loads(text) if kind == "json" else yaml.safe_load(text) if kind == "yaml" else tomllib.loads(text)
        )
        found.append((labels[-1], document))
    return found


def readme_client_configs() -> list[ClientConfig]:
    """Every client configuration block of docs/clients.md with the last bold label before it."""
    configs: list[ClientConfig] = []
    for label, document in _blocks():
        if "hooks" not in document:
            configs.append(ClientConfig(label, document, len(configs)))
    return configs


def readme_hook_settings() -> dict[str, Any]:
    """The Claude Code hooks block of docs/clients.md (the settings.json `hooks` map)."""
    (hooks,) = [document["hooks"] for _, document in _blocks() if "hooks" in document]
    found: dict[str, Any] = hooks
    return found
