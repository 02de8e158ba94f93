"""Storage: the SQLite system of record and the indexes derived from it."""
