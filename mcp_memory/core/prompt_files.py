"""Prompt templates by name: the text files of prompts/ (mcp_memory/prompts_text in a wheel). The
LLM passes read their instructions here; the MCP face's text blocks (``mcp/templates.py``) too."""

from __future__ import annotations

import functools
from pathlib import Path

_PACKAGE = Path(__file__).parent.parent  # mcp_memory/
# In a wheel the folder is packaged as mcp_memory/prompts_text; in a checkout it is ../prompts.
_FOLDERS = (_PACKAGE / "prompts_text", _PACKAGE.parent / "prompts")


@functools.cache
def template(name: str) -> str:
    """The prompt text called ``name`` (prompts/<name>.md)."""
    for folder in _FOLDERS:
        path = folder / f"{name}.md"
        if path.is_file():
            return path.read_text(encoding="utf-8")
    raise FileNotFoundError(f"prompt template {name!r} is missing from {', '.join(str(f) for f in _FOLDERS)}")
