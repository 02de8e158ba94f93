"""The served surface as sorted JSON: tools (names, descriptions, input and output schemas,
annotations), resources, resource templates and prompts, as a client lists them, in one protocol
mode. For a change that moves shapes: dump before and after, then compare byte for byte.

    .venv/bin/python tools/served_surface.py OUT.json [--mode legacy|2026-07-28]
    (cd /work/main && .venv/bin/python $OLDPWD/tools/served_surface.py /tmp/before.json); cmp /tmp/before.json OUT.json

The server runs in process over an empty data directory (no network, nothing written elsewhere).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

import anyio
import orjson
from mcp.client import Client

from mcp_memory.config import load_settings
from mcp_memory.mcp.server import open_server


def _dumped(items: list[Any]) -> list[Any]:
    return [item.model_dump(mode="json", exclude_none=True) for item in items]


async def surface(mode: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as data:
        settings = load_settings(data_dir=data, principal="local-owner")
        async with open_server(settings, warm=False) as runtime, Client(runtime.mcp, mode=mode) as client:
            return {
                "tools": _dumped((await client.list_tools()).tools),
                "resources": _dumped((await client.list_resources()).resources),
                "templates": _dumped((await client.list_resource_templates()).resource_templates),
                "prompts": _dumped((await client.list_prompts()).prompts),
            }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--mode", default="legacy", help="the client's protocol mode (legacy or 2026-07-28)")
    args = parser.parse_args()
    found = anyio.run(surface, args.mode)
    args.out.write_bytes(orjson.dumps(found, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))


if __name__ == "__main__":
    main()
