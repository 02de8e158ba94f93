-- Schema 7: each vector row carries what recall's visibility filter reads of its memory (its
-- namespace, whether it is live: active and not superseded, and when it expires), beside its script
-- (schema 5), so that with pgvector the dense search filters the vectors alone (ADR 25, sixth pass):
-- the HNSW probes' iterative scan looked each candidate's memory up to filter it (about 400 look-ups
-- a recall at 10,000), and the spread's sample its 1,875 rows'; now only the best rows' memories are
-- read, for their ids. The columns are kept by triggers, as the script is, so the storage code (the
-- same for SQLite, ADR 20) writes vectors as before, in either order with their memory: a vector
-- takes its memory's figures as it is written (one look-up by key, as schema 5's did), a memory
-- gives them to its vector when it is written with other than the defaults (a vector written first
-- took them) and whenever one of them changes. Older code may still use the database: it writes
-- none of the columns and the triggers fill them in.
ALTER TABLE vectors ADD COLUMN namespace text;
ALTER TABLE vectors ADD COLUMN live boolean NOT NULL DEFAULT true;
ALTER TABLE vectors ADD COLUMN expires_at double precision;
COMMENT ON COLUMN vectors.namespace IS 'the memory''s namespace: kept by triggers, read by the pgvector search''s filter';
COMMENT ON COLUMN vectors.live IS 'the memory is active and not superseded: kept by triggers, read by the pgvector search''s filter';
COMMENT ON COLUMN vectors.expires_at IS 'the memory''s expiry: kept by triggers, read by the pgvector search''s filter';

CREATE OR REPLACE FUNCTION mcp_vector_script() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_custom_plan AS $$
BEGIN
    SELECT m.language IN ('zh', 'ja', 'ko'), m.namespace, m.tier = 'active' AND m.superseded_by IS NULL, m.expires_at
    INTO NEW.cjk, NEW.namespace, NEW.live, NEW.expires_at
    FROM public.memories m WHERE m.principal = NEW.principal AND m.n = NEW.memory_n;
    IF NOT found THEN  -- its memory comes later, and gives it its figures (mcp_memory_script)
        NEW.cjk := false;
        NEW.namespace := NULL;
        NEW.live := true;
        NEW.expires_at := NULL;
    END IF;
    RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION mcp_memory_script() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET plan_cache_mode = force_custom_plan AS $$
BEGIN
    UPDATE public.vectors SET cjk = (NEW.language IN ('zh', 'ja', 'ko')), namespace = NEW.namespace,
        live = (NEW.tier = 'active' AND NEW.superseded_by IS NULL), expires_at = NEW.expires_at
    WHERE principal = NEW.principal AND memory_n = NEW.n AND (cjk, namespace, live, expires_at) IS DISTINCT FROM
        (NEW.language IN ('zh', 'ja', 'ko'), NEW.namespace, NEW.tier = 'active' AND NEW.superseded_by IS NULL, NEW.expires_at);
    RETURN NULL;
END $$;

DROP TRIGGER memory_script ON memories;
DROP TRIGGER memory_script_changed ON memories;
-- only a memory whose figures are not a vector's defaults can find a vector written before it wrong
CREATE TRIGGER memory_script AFTER INSERT ON memories
    FOR EACH ROW WHEN (NEW.language IN ('zh', 'ja', 'ko') OR NEW.namespace IS NOT NULL OR NEW.tier <> 'active'
                       OR NEW.superseded_by IS NOT NULL OR NEW.expires_at IS NOT NULL)
    EXECUTE FUNCTION mcp_memory_script();
CREATE TRIGGER memory_script_changed AFTER UPDATE OF language, namespace, tier, superseded_by, expires_at ON memories
    FOR EACH ROW WHEN (OLD.language IS DISTINCT FROM NEW.language OR OLD.namespace IS DISTINCT FROM NEW.namespace
                       OR OLD.tier IS DISTINCT FROM NEW.tier OR OLD.superseded_by IS DISTINCT FROM NEW.superseded_by
                       OR OLD.expires_at IS DISTINCT FROM NEW.expires_at)
    EXECUTE FUNCTION mcp_memory_script();

-- The vectors already written take their memory's figures, each principal's bound to it (row-level
-- security binds the owner too).
DO $$
DECLARE
    p text;
BEGIN
    FOR p IN SELECT principal FROM public.principals LOOP
        PERFORM set_config('mcp.principal', p, true);
        EXECUTE format(
            'UPDATE public.%I v SET namespace = m.namespace, live = (m.tier = ''active'' AND m.superseded_by IS NULL), '
            'expires_at = m.expires_at FROM public.%I m WHERE m.n = v.memory_n '
            'AND (m.namespace IS NOT NULL OR m.tier <> ''active'' OR m.superseded_by IS NOT NULL OR m.expires_at IS NOT NULL)',
            'vectors_' || p, 'memories_' || p);
    END LOOP;
    PERFORM set_config('mcp.principal', '', true);
END $$;
