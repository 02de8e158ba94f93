-- Schema 5: each vector row carries its text's script (`cjk`: the memory's language is zh, ja or
-- ko), so that with pgvector a principal's HNSW index is one graph per script, two partial indexes
-- (ADR 25, made by vector_layout's mcp_vector_index): recall's centred search probes each script
-- apart (ADR 10), and a probe of one script then walks only that script's graph, where through one
-- graph of every script it walked past the other script's rows and dropped them afterwards.
-- The column is kept by two triggers, so the storage code (the same for SQLite, ADR 20) writes
-- vectors as before, in either order with their memory (a move between backends copies tables in
-- its own order): a vector takes its memory's script as it is written, a memory its vectors' as it
-- is written or its language changes. Partitions made later take the column (LIKE ... INCLUDING
-- DEFAULTS) and the triggers (cloned from the parent as a partition is attached). Older code may
-- still use the database: it writes neither column nor script and the triggers fill it in.
ALTER TABLE vectors ADD COLUMN cjk boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN vectors.cjk IS 'whether the memory''s language is zh, ja or ko (its script): kept by triggers, read by the per-script HNSW indexes';

CREATE FUNCTION mcp_vector_script() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    NEW.cjk := EXISTS (
        SELECT 1 FROM public.memories m
        WHERE m.principal = NEW.principal AND m.n = NEW.memory_n AND m.language IN ('zh', 'ja', 'ko'));
    RETURN NEW;
END $$;
CREATE TRIGGER vector_script BEFORE INSERT OR UPDATE OF memory_n ON vectors
    FOR EACH ROW EXECUTE FUNCTION mcp_vector_script();

CREATE FUNCTION mcp_memory_script() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    UPDATE public.vectors SET cjk = (NEW.language IN ('zh', 'ja', 'ko'))
    WHERE principal = NEW.principal AND memory_n = NEW.n AND cjk IS DISTINCT FROM (NEW.language IN ('zh', 'ja', 'ko'));
    RETURN NULL;
END $$;
-- only a CJK memory can find a vector of the wrong script (a vector written first took `false`)
CREATE TRIGGER memory_script AFTER INSERT ON memories
    FOR EACH ROW WHEN (NEW.language IN ('zh', 'ja', 'ko')) EXECUTE FUNCTION mcp_memory_script();
CREATE TRIGGER memory_script_changed AFTER UPDATE OF language ON memories
    FOR EACH ROW WHEN (OLD.language IS DISTINCT FROM NEW.language) EXECUTE FUNCTION mcp_memory_script();

-- The vectors already written take their memory's script, each principal's bound to it (row-level
-- security binds the owner too); a partition's one HNSW graph of every script (schemas 3 and 4) is dropped:
-- the next search past the threshold makes the per-script ones in the background.
DO $$
DECLARE
    p text;
    old text;
BEGIN
    FOR p IN SELECT principal FROM public.principals LOOP
        PERFORM set_config('mcp.principal', p, true);
        EXECUTE format(
            'UPDATE public.%I v SET cjk = true FROM public.%I m '
            'WHERE m.n = v.memory_n AND m.language IN (''zh'', ''ja'', ''ko'')', 'vectors_' || p, 'memories_' || p);
        FOR old IN SELECT indexname FROM pg_indexes
                   WHERE schemaname = 'public' AND tablename = 'vectors_' || p AND indexname ~ '_hnsw_[0-9]+$' LOOP
            EXECUTE format('DROP INDEX public.%I', old);
        END LOOP;
    END LOOP;
    PERFORM set_config('mcp.principal', '', true);
END $$;
