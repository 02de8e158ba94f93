#!/bin/sh
# Create or refresh .venv for this checkout. Prints only to stderr (stdout may be a stdio wire).
# Usage: sh tools/bootstrap.sh [--dev]
# --dev also installs the MCP Inspector CLI that tests/test_inspector.py drives, pinned by
# tests/inspector/package-lock.json; it needs Node.js >= 20 and npm, and fails without them.
set -eu
cd "$(dirname "$0")/.."
want="runtime"
[ "${1:-}" = "--dev" ] && want="dev"
python="${PYTHON:-python3}"
"$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null || {
    echo "mcp-memory needs Python >= 3.11 (found: $("$python" --version 2>&1)); set PYTHON=/path/to/python3.11" >&2
    exit 1
}
sha256() {
    "$python" -c 'import hashlib,sys; h=hashlib.sha256(); [h.update(open(p,"rb").read()) for p in sys.argv[1:]]; print(h.hexdigest())' "$@"
}

venv_ready() {
    venv_digest=$(sha256 pyproject.toml)
    # A dev install includes everything the runtime needs.
    for ready in ".venv/.mcp-memory-$want" .venv/.mcp-memory-dev; do
        if [ -f "$ready" ] && [ "$(cat "$ready")" = "$venv_digest" ]; then
            return 0
        fi
    done
    return 1
}

if ! venv_ready; then
    echo "setting up .venv ($want dependencies; first run takes a minute)..." >&2
    [ -x .venv/bin/python ] || "$python" -m venv .venv >&2
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade "pip>=25.1" >&2
    if [ "$want" = "dev" ]; then
        .venv/bin/python -m pip install --quiet --disable-pip-version-check -e . --group dev >&2
    else
        .venv/bin/python -m pip install --quiet --disable-pip-version-check -e . >&2
    fi
    echo "$venv_digest" > ".venv/.mcp-memory-$want"
fi
[ "$want" = "dev" ] || exit 0

# The Inspector is part of the gate (issue 5), so a machine without Node.js cannot pass it: fail here,
# where the fix is obvious, rather than skip the tests. The package declares node >= 22.19; every
# CLI path the tests use works on 20, the oldest line still maintained.
inspector=tests/inspector
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "the dev set-up needs Node.js >= 20 and npm on PATH, for the MCP Inspector CLI in $inspector;" \
        "install them (e.g. from https://nodejs.org) and run again" >&2
    exit 1
fi
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' || {
    echo "the dev set-up needs Node.js >= 20 for the MCP Inspector CLI in $inspector (found: $(node --version))" >&2
    exit 1
}
# The stamp lives in node_modules, so `npm ci` (which empties it) and a deleted folder both reset it.
stamp="$inspector/node_modules/.mcp-memory-lock"
inspector_digest=$(sha256 "$inspector/package.json" "$inspector/package-lock.json")
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$inspector_digest" ]; then
    echo "installing the MCP Inspector CLI from $inspector/package-lock.json (npm ci)..." >&2
    # No install scripts: the Inspector's one postinstall does nothing outside its own source tree.
    npm ci --prefix "$inspector" --ignore-scripts --no-audit --no-fund --no-update-notifier >&2
    echo "$inspector_digest" > "$stamp"
fi
