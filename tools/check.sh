#!/bin/sh
# The whole gate, as CI runs it: format, lint, types, import contracts, the docs site, tests.
# Extra arguments go to pytest, e.g. `sh tools/check.sh -k recall`.
set -eu
cd "$(dirname "$0")/.."
sh tools/bootstrap.sh --dev
bin=.venv/bin
echo "== format" >&2; $bin/ruff format --check mcp_memory tests tools examples
echo "== lint" >&2; $bin/ruff check mcp_memory tests tools examples
echo "== types" >&2; $bin/mypy
echo "== import contracts" >&2; $bin/lint-imports
# Not --quiet: it hides the warnings --strict counts, and the build then passes whatever they say.
echo "== docs" >&2; NO_MKDOCS_2_WARNING=1 $bin/mkdocs build --strict --site-dir "$(mktemp -d)"
echo "== tests" >&2; $bin/python -m pytest --durations=15 "$@"
