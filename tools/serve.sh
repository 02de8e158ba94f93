#!/bin/sh
# Set up (first run only) and run the server on its embedded default, over stdio.
# Extra arguments go to `mcp-memory serve`, e.g. `sh tools/serve.sh --namespace myproject`.
set -eu
here="$(cd "$(dirname "$0")/.." && pwd)"
sh "$here/tools/bootstrap.sh"
exec "$here/.venv/bin/mcp-memory" serve "$@"
