#!/bin/sh
# Create or refresh .venv for this checkout. Prints only to stderr (stdout may be a stdio wire).
# Usage: sh tools/bootstrap.sh [--dev]
set -eu
cd "$(dirname "$0")/.."
want="runtime"
[ "${1:-}" = "--dev" ] && want="dev"
python="${PYTHON:-python3}"
"$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null || {
    echo "mcp-memory needs Python >= 3.11 (found: $("$python" --version 2>&1)); set PYTHON=/path/to/python3.11" >&2
    exit 1
}
stamp=".venv/.mcp-memory-$want"
digest=$("$python" -c 'import hashlib,sys; print(hashlib.sha256(open("pyproject.toml","rb").read()).hexdigest())')
# A dev install includes everything the runtime needs.
for ready in "$stamp" .venv/.mcp-memory-dev; do
    if [ -f "$ready" ] && [ "$(cat "$ready")" = "$digest" ]; then
        exit 0
    fi
done
echo "setting up .venv ($want dependencies; first run takes a minute)..." >&2
[ -x .venv/bin/python ] || "$python" -m venv .venv >&2
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade "pip>=25.1" >&2
if [ "$want" = "dev" ]; then
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -e . --group dev >&2
else
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -e . >&2
fi
echo "$digest" > "$stamp"
