-- Schema 3: the memories' vectors may be kept in pgvector's `vector` type and searched in the
-- database (ADR 25). No table changes here: `database migrate` moves `vectors.vec` between bytea and
-- vector (storage/pg/vector_layout.py) after the numbered migrations, and a database in the pgvector
-- layout is marked as needing code of schema 3 (schema_version.min_code), which knows the type.
COMMENT ON TABLE vectors IS 'each memory''s vector: bytea (float32, little-endian) or pgvector''s vector, as vector_layout.py keeps it';
