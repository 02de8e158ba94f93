"""The PostgreSQL backend (issue 16, ADR 19), under construction: its schema and migrations so far."""

# What `serve`, `doctor` and every command that opens the store say until PostgresStore exists.
NOT_SERVED = (
    "storage.backend = 'postgres': serving from PostgreSQL is not built yet (issue 16); this version makes and "
    "checks its schema only (`mcp-memory database migrate | status`). Set storage.backend = 'sqlite' to serve"
)
