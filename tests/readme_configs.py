"""The client configurations in README.md, as a user would paste them.

Each ```json block is one client's configuration, named by the bold label before it ("**Cursor**").
The README tells the user the edits: replace `/path/to/mcp-memory` with the path of the clone, and
in the configurations for a network server, the URL with the server's and `mcpm_...` with a token.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PLACEHOLDER = "/path/to/mcp-memory"
URL_PLACEHOLDER = "http://127.0.0.1:8765/mcp"
TOKEN_PLACEHOLDER = "mcpm_..."


@dataclass(frozen=True)
class ClientConfig:
    client: str
    document: dict[str, Any]
    index: int = 0  # the block's position in the README (a client has one for stdio, one for the network)

    @property
    def name(self) -> str:
        return f"{self.client} ({'network' if self.remote else 'stdio'})"

    @property
    def remote(self) -> bool:
        """Whether it reaches a network server (directly or through `mcp-memory connect`)."""
        return URL_PLACEHOLDER in orjson.dumps(self.document).decode()

    def servers(self) -> dict[str, dict[str, Any]]:
        """The configured MCP servers by name, in the `mcpServers` shape (Claude Desktop, Cursor).

        Continue keeps a list under `experimental.modelContextProtocolServers`, each item with a
        `transport` holding exactly what an `mcpServers` entry holds (`type`, `command`, `args`,
        `env`, or `url`), so the conversion moves the transport into a named entry and changes
        nothing in it. An unknown layout fails rather than being skipped.
        """
        if "mcpServers" in self.document:
            servers: dict[str, dict[str, Any]] = self.document["mcpServers"]
            return servers
        continue_servers = self.document.get("experimental", {}).get("modelContextProtocolServers")
        if isinstance(continue_servers, list):
            return {f"{self.client}-{i}".lower(): item["transport"] for i, item in enumerate(continue_servers)}
        raise ValueError(f"README block for {self.client}: no mcpServers or Continue server list in {self.document}")

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
        """The configuration with the placeholder replaced by `clone`, as the README says to."""
        return ClientConfig(self.client, _replace(self.document, PLACEHOLDER, str(clone)), self.index)

    def for_server(self, url: str, token: str) -> ClientConfig:
        """The network configuration pointed at `url` with `token`, as the README says to."""
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


def readme_client_configs() -> list[ClientConfig]:
    """Every ```json block of README.md with the last bold label before it."""
    readme = README.read_text(encoding="utf-8")
    configs: list[ClientConfig] = []
    for block in re.finditer(r"```json\n(.*?)```", readme, flags=re.S):
        labels = re.findall(r"\*\*([^*\n]+)\*\*", readme[: block.start()])
        if not labels:
            raise ValueError(f"README.md: no bold client name before the JSON block at offset {block.start()}")
        configs.append(ClientConfig(labels[-1], orjson.loads(block.group(1)), len(configs)))
    return configs
