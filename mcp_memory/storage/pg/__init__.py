"""The PostgreSQL backend (issue 16, ADR 19), under construction: its schema and migrations so far."""
