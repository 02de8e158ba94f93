"""Prompt templates by name: the text files of prompts/ (mcp_memory/prompts_text in a wheel)."""

from __future__ import annotations

import functools
from pathlib import Path

_HERE = Path(__file__).parent
# In a wheel the folder is packaged as mcp_memory/prompts_text; in a checkout it is ../prompts.
_FOLDERS = (_HERE / "prompts_text", _HERE.parent / "prompts")


@functools.cache
def template(name: str) -> str:
    """The prompt text called ``name`` (prompts/<name>.md)."""
    for folder in _FOLDERS:
        path = folder / f"{name}.md"
        if path.is_file():
            return path.read_text(encoding="utf-8")
    raise FileNotFoundError(f"prompt template {name!r} is missing from {', '.join(str(f) for f in _FOLDERS)}")
