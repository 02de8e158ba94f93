"""Claude Code's hooks for mcp-memory in the user's ~/.claude/settings.json (`install claude-code --hooks`).

The format is Claude Code's (docs.claude.com/en/docs/claude-code/hooks): ``"hooks"`` maps an event to
a list of groups, each ``{"hooks": [{"type": "command", "command": ..., "timeout": seconds}]}``
(SessionStart and the prompt, compaction and stop events take no matcher). The commands and their
timeouts are the README's. A hook is ours when its command runs ``mcp-memory hook EVENT``, wherever
that command lives; installing replaces ours, uninstalling removes only ours. Claude Code's settings
are strict JSON that it rewrites itself, so the file is loaded and dumped again (two-space indent).
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import orjson

from mcp_memory.core.errors import InvalidInputError

# Seconds Claude Code waits for each hook (the README's; hooks.DEADLINES keep the answer inside them).
TIMEOUTS = {"SessionStart": 15, "UserPromptSubmit": 5, "PreCompact": 60, "Stop": 30}
_OURS = re.compile(r"""\s*(["']?)(?:.*[\\/])?mcp-memory(?:\.exe)?\1\s+hook\s+(\w+)""")
_FIX = "fix it or move it aside, then run the command again"


def commands(executable: str, extra: list[str], windows: bool) -> dict[str, str]:
    """The command line of each event's hook: ``EXE hook EVENT [--data-dir D] [--namespace N]``."""
    join = subprocess.list2cmdline if windows else shlex.join
    return {event: join([executable, "hook", event, *extra]) for event in TIMEOUTS}


def is_ours(hook: Any) -> bool:
    return isinstance(hook, dict) and isinstance(hook.get("command"), str) and bool(_OURS.match(hook["command"]))


def _settings(text: str | None, path: Path) -> dict[str, Any]:
    if text is None or not text.strip():
        return {}
    try:
        settings = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise InvalidInputError(str(path), f"is not valid JSON ({exc}); {_FIX}") from None
    if not isinstance(settings, dict):
        raise InvalidInputError(str(path), f"holds a JSON {type(settings).__name__}, not an object; {_FIX}")
    hooks = settings.get("hooks", {})
    if not isinstance(hooks, dict) or not all(isinstance(groups, list) for groups in hooks.values()):
        raise InvalidInputError(str(path), f"'hooks' is not an object of event -> list of hook groups; {_FIX}")
    return settings


def _without_ours(groups: list[Any]) -> list[Any]:
    kept = []
    for group in groups:
        inner = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(inner, list) or not any(is_ours(hook) for hook in inner):
            kept.append(group)
        elif others := [hook for hook in inner if not is_ours(hook)]:
            kept.append({**group, "hooks": others})
    return kept


def _dump(settings: dict[str, Any]) -> str:
    return orjson.dumps(settings, option=orjson.OPT_INDENT_2).decode() + "\n"


def install_hooks(text: str | None, path: Path, lines: dict[str, str]) -> str:
    settings = _settings(text, path)
    hooks = dict(settings.get("hooks", {}))
    for event, command in lines.items():
        wanted = {"type": "command", "command": command, "timeout": TIMEOUTS[event]}
        groups = hooks.get(event, [])
        ours = [hook for group in groups if isinstance(group, dict) for hook in group.get("hooks", []) if is_ours(hook)]
        if ours == [wanted] and {"hooks": [wanted]} in groups:
            continue
        hooks[event] = [*_without_ours(groups), {"hooks": [wanted]}]
    if hooks == settings.get("hooks", {}) and text is not None:
        return text
    return _dump({**settings, "hooks": hooks})


def uninstall_hooks(text: str | None, path: Path) -> str | None:
    if text is None:
        return None
    settings = _settings(text, path)
    hooks = {}
    for event, groups in settings.get("hooks", {}).items():
        kept = _without_ours(groups)
        if kept or not groups:  # an event we emptied goes; one that was empty already stays
            hooks[event] = kept
    if hooks == settings.get("hooks", {}):
        return text
    rest = {key: value for key, value in settings.items() if key != "hooks"}
    if not hooks and not rest:  # nothing but our hooks, as install writes a file it creates: it goes
        return None
    return _dump({**rest, "hooks": hooks} if hooks else rest)


def has_ours(text: str | None) -> bool:
    """Whether the settings hold a hook of ours (a hint for `uninstall` without --hooks); never raises."""
    try:
        hooks = orjson.loads(text or "{}").get("hooks", {})
        return any(is_ours(h) for groups in hooks.values() for g in groups for h in g.get("hooks", []))
    except (orjson.JSONDecodeError, AttributeError, TypeError):
        return False
