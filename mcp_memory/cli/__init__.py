"""The ``mcp-memory`` command (``command``) and its subcommands, one module each.

``main`` is named here because it is the console script's entry point (``mcp_memory.cli:main`` in
pyproject.toml, in installed scripts and in ``python -m mcp_memory``).
"""

from mcp_memory.cli.command import main

__all__ = ["main"]
