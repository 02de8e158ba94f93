-- Schema 4: each posting carries its memory's token count (postings.doc_len, the same number as
-- memories.doc_len), so a keyword search sums BM25 from the postings alone and looks up only the
-- memories it returns, not every memory holding a common word (storage/pg/keyword.py). The column
-- is added on the parent, so every principal's partition gets it and mcp_open_principal's
-- CREATE TABLE ... (LIKE postings) gives it to new ones. migrations.py copies the lengths into the
-- existing postings, one principal at a time under its own wall, in the same transaction. Code of
-- schema 3 would write postings without their length, so the database then needs code of schema 4.
ALTER TABLE postings ADD COLUMN doc_len integer NOT NULL DEFAULT 0;
COMMENT ON COLUMN postings.doc_len IS 'the memory''s keyword tokens (memories.doc_len): BM25''s document length, read with the posting';
