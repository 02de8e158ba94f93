"""One server entry added to, or removed from, a client's configuration text: JSON and JSONC (by a
minimal text edit, see jsonc.py), TOML (Codex: our table is cut out and written again, the rest of
the text kept) and YAML (Continue: a list of servers; PyYAML keeps no comments, so a file that has
any is refused rather than stripped).

Each function takes the file's text (None when the file does not exist) and returns the new text:
the same string when nothing needs to change, None when the file should go (one install created,
emptied). A text that cannot be read as the client's format raises InvalidInputError naming
the file and the fix, before anything is written.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import orjson

from mcp_memory.core.errors import InvalidInputError
from mcp_memory.install import jsonc
from mcp_memory.install.clients import Client

_FIX = "fix it or move it aside, then run the command again"
# The skeleton of a Continue block file we create (docs.continue.dev: name, version, schema, then blocks).
CONTINUE_BLOCK = {"name": "mcp-memory", "version": "0.0.1", "schema": "v1"}


def merged(current: Any, entry: dict[str, Any]) -> dict[str, Any]:
    """Our entry over the one in place: fields the user or the client added (disabled, autoApprove,
    timeout ...) stay; ours are set."""
    return {**current, **entry} if isinstance(current, dict) else dict(entry)


def install_text(client: Client, text: str | None, path: Path, name: str, entry: dict[str, Any]) -> str | None:
    if client.format == "toml":
        return _toml_install(text or "", path, name, entry)
    if client.format == "yaml":
        return _yaml_install(text, path, name, entry)
    if text is None or not text.strip():
        return jsonc.render({client.servers_key: {name: entry}}, 0, "  ") + "\n"
    current = _json_servers(client, text, path).get(name)
    wanted = merged(current, entry)
    return text if current == wanted else jsonc.set_path(text, (client.servers_key, name), wanted)


def uninstall_text(client: Client, text: str | None, path: Path, name: str) -> str | None:
    """``text`` without our entry; None when the file should go: what is left is exactly what
    ``install`` writes into a file it creates, less the entry (the file install created, or one that
    said as little: a copy is kept as for every change)."""
    if text is None:
        return None
    if client.format == "toml":
        left = _toml_uninstall(text, path, name)
        return None if left != text and left == "" else left
    if client.format == "yaml":
        return _yaml_uninstall(text, path, name)
    if not text.strip() or name not in _json_servers(client, text, path):
        return text
    left = jsonc.remove_path(text, (client.servers_key, name))
    return None if left == jsonc.render({client.servers_key: {}}, 0, "  ") + "\n" else left


def _json_servers(client: Client, text: str, path: Path) -> dict[str, Any]:
    kind = "JSON with comments" if client.format == "jsonc" else "JSON"
    try:
        if client.format == "json":
            orjson.loads(text)  # the client's own parser allows no comments: neither do we
        root = jsonc.parse(text)
        servers = jsonc.member(root, client.servers_key) if isinstance(root.value, dict) else None
        if servers is not None:
            jsonc.unique_keys(servers.node)  # which duplicate a client keeps differs: refuse to guess
    except (orjson.JSONDecodeError, jsonc.JsoncError) as exc:
        raise InvalidInputError(str(path), f"is not valid {kind} ({exc}); {_FIX}") from None
    if not isinstance(root.value, dict):
        raise InvalidInputError(str(path), f"holds a JSON {type(root.value).__name__}, not an object; {_FIX}")
    found = root.value.get(client.servers_key, {})
    if not isinstance(found, dict):
        raise InvalidInputError(
            str(path), f"{client.servers_key!r} is a JSON {type(found).__name__}, not an object of servers; {_FIX}"
        )
    return found


# --- TOML (Codex) -----------------------------------------------------------------------------------


def _toml(text: str, path: Path) -> dict[str, Any]:
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInputError(str(path), f"is not valid TOML ({exc}); {_FIX}") from None
    servers = document.get("mcp_servers", {})
    if not isinstance(servers, dict):
        raise InvalidInputError(str(path), f"'mcp_servers' is not a table; {_FIX}")
    return document


def _cut_table(text: str, name: str) -> str:
    """``text`` without the [mcp_servers.NAME] table and its sub-tables (up to the next header)."""
    quoted = re.escape(name) if re.fullmatch(r"[A-Za-z0-9_-]+", name) else "(?!)"
    ours = re.compile(rf"""\s*\[\s*mcp_servers\s*\.\s*(?:{quoted}|"{re.escape(name)}")\s*(?:\..*)?\]\s*(?:#.*)?""")
    kept: list[str] = []
    cutting = False
    for line in text.splitlines(keepends=True):
        if re.match(r"\s*\[", line):
            cutting = bool(ours.fullmatch(line.rstrip("\r\n")))
        if not cutting:
            kept.append(line)
    return "".join(kept)


def _cut_ours(text: str, path: Path, name: str) -> str:
    rest = _cut_table(text, name)
    if name in _toml(rest, path).get("mcp_servers", {}):
        raise InvalidInputError(
            str(path),
            f"defines mcp_servers.{name} inline or with dotted keys, which this command does not rewrite; "
            f"make it a [mcp_servers.{name}] table (or remove it) and run the command again",
        )
    return rest


def _toml_install(text: str, path: Path, name: str, entry: dict[str, Any]) -> str:
    document = _toml(text, path)
    current = document.get("mcp_servers", {}).get(name)
    wanted = merged(current, entry)
    if current == wanted:
        return text
    rest = _cut_ours(text, path, name).rstrip("\n")
    new = (rest + "\n\n" if rest else "") + _toml_table(name, wanted)
    _verify_toml(document, new, path, name, wanted)
    return new


def _toml_uninstall(text: str, path: Path, name: str) -> str:
    document = _toml(text, path)
    if name not in document.get("mcp_servers", {}):
        return text
    new = _cut_ours(text, path, name)
    new = new.rstrip("\n") + "\n" if new.strip() else ""  # no blank lines left where our table ended
    _verify_toml(document, new, path, name, None)
    return new


def _verify_toml(before: dict[str, Any], new: str, path: Path, name: str, wanted: dict[str, Any] | None) -> None:
    """The edit changed our table and nothing else, or nothing is written."""
    servers = dict(before.get("mcp_servers", {}))
    servers.pop(name, None)
    if wanted is not None:
        servers[name] = wanted
    expected = {key: value for key, value in before.items() if key != "mcp_servers"}
    after = tomllib.loads(new)
    if after.pop("mcp_servers", {}) != servers or after != expected:
        raise InvalidInputError(
            str(path),
            f"its layout keeps this command from changing mcp_servers.{name} alone; edit that table by hand",
        )


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):  # a JSON string is a TOML basic string (same escapes)
        return orjson.dumps(value).decode()
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise InvalidInputError("mcp_servers", f"cannot write a {type(value).__name__} back; edit the table by hand")


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else orjson.dumps(key).decode()


def _toml_table(name: str, entry: dict[str, Any]) -> str:
    lines = [f"[mcp_servers.{_toml_key(name)}]"]
    lines += [f"{_toml_key(key)} = {_toml_value(value)}" for key, value in entry.items()]
    return "\n".join(lines) + "\n"


# --- YAML (Continue) --------------------------------------------------------------------------------


def _yaml(text: str, path: Path) -> tuple[dict[str, Any], list[Any]]:
    import yaml

    if re.search(r"(^|\s)#", text, flags=re.M):
        raise InvalidInputError(
            str(path),
            "has comments, which rewriting the YAML would drop; add the server to its mcpServers list by hand "
            "(see the README) or point --client-config at a block file of its own",
        )
    try:
        document = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError as exc:
        raise InvalidInputError(str(path), f"is not valid YAML ({' '.join(str(exc).split())}); {_FIX}") from None
    if not isinstance(document, dict):
        raise InvalidInputError(str(path), f"holds a YAML {type(document).__name__}, not a mapping; {_FIX}")
    servers = document.get("mcpServers", [])
    if not isinstance(servers, list):
        raise InvalidInputError(str(path), f"'mcpServers' is not a list (Continue's YAML lists its servers); {_FIX}")
    return document, servers


def _ours(servers: list[Any], name: str, path: Path) -> int | None:
    found = [i for i, item in enumerate(servers) if isinstance(item, dict) and item.get("name") == name]
    if len(found) > 1:
        raise InvalidInputError(str(path), f"lists the server {name!r} {len(found)} times; keep one")
    return found[0] if found else None


def _yaml_dump(document: dict[str, Any]) -> str:
    import yaml

    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True, default_flow_style=False)


def _yaml_install(text: str | None, path: Path, name: str, entry: dict[str, Any]) -> str:
    document, servers = _yaml(text or "", path)
    if text is None or not text.strip():
        document = dict(CONTINUE_BLOCK)
    index = _ours(servers, name, path)
    wanted = merged(servers[index] if index is not None else None, {"name": name, **entry})
    if index is not None and servers[index] == wanted:
        return text or ""
    servers = list(servers)
    if index is None:
        servers.append(wanted)
    else:
        servers[index] = wanted
    return _yaml_dump({**document, "mcpServers": servers})


def _yaml_uninstall(text: str, path: Path, name: str) -> str | None:
    document, servers = _yaml(text, path)
    index = _ours(servers, name, path)
    if index is None:
        return text
    rest = servers[:index] + servers[index + 1 :]
    if not rest and {k: v for k, v in document.items() if k != "mcpServers"} == CONTINUE_BLOCK:
        return None  # our own block file, now empty
    return _yaml_dump({**document, "mcpServers": rest})
