"""The Claude Desktop extension's entry point: tools/build_mcpb.py bundles it as server/main.py.

Claude Desktop runs it in the environment uv builds from the bundle's pyproject.toml, with the
manifest's ``mcp_config.env``: the settings' own variables (``MCP_MEMORY_DATA_DIR``,
``MCP_MEMORY_NAMESPACE``) set from the user's answers. The package itself sits beside this file
(server/mcp_memory), first on ``sys.path`` because Python puts a script's folder there.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping


def drop_unanswered(environ: MutableMapping[str, str]) -> None:
    """Remove the settings variables an optional field left without a value.

    The host substitutes ``${user_config.KEY}`` only for a key that has a value (or a default); an
    unanswered one arrives as the placeholder itself, or as an empty string. Either would be taken
    as a directory or namespace literally named so: without it the server's own default applies.
    """
    for name in [name for name in environ if name.startswith("MCP_MEMORY_")]:
        value = environ[name].strip()
        if not value or value.startswith("${"):
            del environ[name]


def main() -> int:
    drop_unanswered(os.environ)  # noqa: TID251 - this process's settings come only from its environment
    from mcp_memory.cli import main as serve  # after the clean-up: the settings read the environment

    return serve(["serve", *sys.argv[1:]])


if __name__ == "__main__":
    raise SystemExit(main())
