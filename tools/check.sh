#!/bin/sh
# The whole gate, as CI runs it: format, lint, types, import contracts, tests.
# Extra arguments go to pytest, e.g. `sh tools/check.sh -k recall`.
set -eu
cd "$(dirname "$0")/.."
sh tools/bootstrap.sh --dev
bin=.venv/bin
echo "== format" >&2; $bin/ruff format --check mcp_memory tests tools examples
echo "== lint" >&2; $bin/ruff check mcp_memory tests tools examples
echo "== types" >&2; $bin/mypy
echo "== import contracts" >&2; $bin/lint-imports
echo "== tests" >&2; $bin/python -m pytest --durations=15 "$@"
