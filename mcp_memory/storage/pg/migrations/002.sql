-- Schema 2: the keyword index holds each English word also as its stem, behind a private-use mark
-- (text.segment_for_index). No table changes; migrations.py writes every principal's postings again
-- from the memories' text in the same transaction. Older code may still use the database: the
-- memories it writes have no stems and are found by their words as written.
COMMENT ON TABLE postings IS 'each token of a memory''s segmented text (text.segment_for_index), English words also as their marked stems';
