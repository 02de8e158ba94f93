-- 1: the whole store of ADR 19. Run by the owner role; {server} is the role the server connects as.
--
-- Per-principal tables hold `principal` (a key, never the name), are partitioned by it (one
-- partition per principal, made by mcp_open_principal and dropped by mcp_drop_principal) and have
-- row-level security, enabled and forced: whatever a query forgets, it sees and writes only the
-- transaction's principal (set_config('mcp.principal', ..., true)). Shared tables (tokens, switches,
-- LLM budgets, leases, pass records, inspector sessions, forget_user codes) have no principal wall:
-- the server reads them before it knows a principal. Times are seconds since the epoch, as in the
-- SQLite files, so the two backends move rows across unchanged.
CREATE TABLE schema_version (version int NOT NULL, min_code int NOT NULL, written_by text NOT NULL);
INSERT INTO schema_version VALUES (0, 0, '');

-- The deployment's random id: a principal's key is a digest of it with the name, so two
-- deployments sharing a Qdrant never share a key, and a key cannot be guessed from a name.
CREATE TABLE deployment (id text NOT NULL);
INSERT INTO deployment VALUES (gen_random_uuid()::text);

CREATE TABLE principals (
    principal text PRIMARY KEY,  -- the key
    name text NOT NULL,  -- as the transport names it (the scheduler walks them)
    opened_at timestamptz NOT NULL DEFAULT now()
);

-- ----- per principal ------------------------------------------------------------------------

CREATE TABLE meta (
    principal text NOT NULL DEFAULT current_setting('mcp.principal', true),
    key text NOT NULL,
    value text NOT NULL,
    PRIMARY KEY (principal, key)
) PARTITION BY LIST (principal);

CREATE SEQUENCE memories_n_seq;
CREATE TABLE memories (
    principal text NOT NULL DEFAULT current_setting('mcp.principal', true),
    n bigint NOT NULL DEFAULT nextval('memories_n_seq'),  -- ADR 13's order of writing (MemoryRecord.rowid); one sequence for all principals, so a partition made apart numbers as the parent does
    id text NOT NULL,
    namespace text,
    kind text NOT NULL,
    content text NOT NULL,
    key text,
    tags text NOT NULL DEFAULT '[]',
    metadata text NOT NULL DEFAULT '{}',
    importance double precision NOT NULL,
    pinned integer NOT NULL DEFAULT 0,  -- 0 or 1, as in SQLite: one SQL reads both (ADR 20)
    occurred_at double precision NOT NULL,
    created_at double precision NOT NULL,
    last_accessed_at double precision,
    access_count integer NOT NULL DEFAULT 0,
    valid_from double precision NOT NULL,
    valid_to double precision,
    superseded_by text,
    expires_at double precision,
    tier text NOT NULL DEFAULT 'active',
    level integer NOT NULL DEFAULT 0,
    language text NOT NULL,
    session_key text,
    task_id text,
    client_name text,
    client_version text,
    transport text,
    content_hash text NOT NULL,
    doc_len integer NOT NULL DEFAULT 0,  -- keyword tokens of the indexed text (BM25's document length)
    PRIMARY KEY (principal, n),
    UNIQUE (principal, id)
) PARTITION BY LIST (principal);
CREATE INDEX memories_key ON memories (principal, key, namespace) WHERE key IS NOT NULL;
CREATE INDEX memories_hash ON memories (principal, content_hash);
CREATE INDEX memories_occurred ON memories (principal, occurred_at);
CREATE INDEX memories_task ON memories (principal, task_id) WHERE task_id IS NOT NULL;
CREATE INDEX memories_pinned ON memories (principal) WHERE pinned = 1;
CREATE INDEX memories_session ON memories (principal, session_key, n) WHERE session_key IS NOT NULL;
-- One live copy of a text per scope (SQLite's schema 8): two replicas never store it twice.
CREATE UNIQUE INDEX memories_live_copy ON memories (principal, content_hash)
    WHERE superseded_by IS NULL AND tier = 'active' AND key IS NULL AND level = 0;

CREATE TABLE memory_tags (
    principal text NOT NULL DEFAULT current_setting('mcp.principal', true),
    tag text NOT NULL,
    memory_n bigint NOT NULL,
    PRIMARY KEY (principal, tag, memory_n)
) PARTITION BY LIST (principal);
CREATE INDEX memory_tags_memory ON memory_tags (principal, memory_n);

CREATE TABLE occurrences (
    principal text NOT NULL DEFAULT current_setting('mcp.principal', true),
    id text NOT NULL,
    memory_n bigint NOT NULL,
    session_key text,
    occurred_at double precision NOT NULL,
    created_at double precision NOT NULL,
    metadata text NOT NULL DEFAULT '{}',
    client_name text,
    transport text,
    PRIMARY KEY (principal, id)
) PARTITION BY LIST (principal);
CREATE INDEX occurrences_memory ON occurrences (principal, memory_n);

-- The first model's vector (float32, little-endian, as in SQLite) and the second model's (ADR 14).
CREATE TABLE vectors (
    principal text NOT NULL DEFAULT current_setting('mcp.principal', true),
    memory_n bigint NOT NULL,
    vec bytea NOT NULL,
    PRIMARY KEY (principal, memory_n)
) PARTITION BY LIST (principal);

CREATE TABLE second_vectors (
    principal text NOT NULL DEFAULT current_setting('mcp.principal', true),
    memory_n bigint NOT NULL,
    vec bytea NOT NULL,
    PRIMARY KEY (principal, memory_n)
) PARTITION BY LIST (principal);

-- The keyword index: the tokens SQLite's FTS5 sees (text.segment_for_index, then its unicode61
-- rule), with their positions so a phrase ("inv-767") matches as FTS5 matches it. BM25 is computed
-- from these (storage/pg/keyword.py), with FTS5's formula and statistics: the memories' token counts
-- (memories.doc_len), and their number and total in `meta` (keyword_docs, keyword_tokens), kept in
-- each writing transaction. `ts_rank` would ignore the document frequencies that the recall's
-- word weighting needs (ADR 10).
CREATE TABLE postings (
    principal text NOT NULL DEFAULT current_setting('mcp.principal', true),
    term text NOT NULL,
    memory_n bigint NOT NULL,
    positions integer[] NOT NULL,
    PRIMARY KEY (principal, term, memory_n)
) PARTITION BY LIST (principal);
CREATE INDEX postings_memory ON postings (principal, memory_n);

CREATE TABLE memory_entities (
    principal text NOT NULL DEFAULT current_setting('mcp.principal', true),
    entity text NOT NULL,
    memory_n bigint NOT NULL,
    PRIMARY KEY (principal, entity, memory_n)
) PARTITION BY LIST (principal);
CREATE INDEX memory_entities_memory ON memory_entities (principal, memory_n);

-- What changed, in order: exact indexes, caches and the Qdrant engine of other replicas follow it.
CREATE SEQUENCE changes_seq_seq;
CREATE TABLE changes (
    principal text NOT NULL DEFAULT current_setting('mcp.principal', true),
    seq bigint NOT NULL DEFAULT nextval('changes_seq_seq'),
    memory_n bigint NOT NULL,
    op text NOT NULL CHECK (op IN ('put', 'del')),
    PRIMARY KEY (principal, seq)
) PARTITION BY LIST (principal);

CREATE TABLE tasks (
    principal text NOT NULL DEFAULT current_setting('mcp.principal', true),
    task_id text NOT NULL,
    namespace text,
    title text NOT NULL,
    goal text NOT NULL,
    constraints text NOT NULL DEFAULT '[]',
    head bytea NOT NULL,
    head_seq integer NOT NULL,
    created_at double precision NOT NULL,
    updated_at double precision NOT NULL,
    latest_checkpoint_id text,
    PRIMARY KEY (principal, task_id)
) PARTITION BY LIST (principal);
CREATE INDEX tasks_updated ON tasks (principal, updated_at, task_id);

CREATE TABLE checkpoints (
    principal text NOT NULL DEFAULT current_setting('mcp.principal', true),
    id text NOT NULL,
    task_id text NOT NULL,
    seq integer NOT NULL,
    parent_id text,
    reason text NOT NULL,
    created_at double precision NOT NULL,
    size integer NOT NULL,
    checksum text NOT NULL,
    envelope bytea NOT NULL,
    PRIMARY KEY (principal, id),
    UNIQUE (principal, task_id, seq)
) PARTITION BY LIST (principal);

CREATE SEQUENCE erasures_n_seq;
CREATE TABLE erasures (
    principal text NOT NULL DEFAULT current_setting('mcp.principal', true),
    n bigint NOT NULL DEFAULT nextval('erasures_n_seq'),
    erased_at double precision NOT NULL,
    receipt text NOT NULL,
    PRIMARY KEY (principal, n)
) PARTITION BY LIST (principal);

CREATE TABLE conflicts (
    principal text NOT NULL DEFAULT current_setting('mcp.principal', true),
    memory_id text NOT NULL,
    other_id text NOT NULL,
    created_at double precision NOT NULL,
    judged_at double precision,
    judge_failures integer NOT NULL DEFAULT 0,
    PRIMARY KEY (principal, memory_id, other_id)
) PARTITION BY LIST (principal);
CREATE INDEX conflicts_other ON conflicts (principal, other_id);

CREATE TABLE summary_sources (
    principal text NOT NULL DEFAULT current_setting('mcp.principal', true),
    summary_id text NOT NULL,
    source_id text NOT NULL,
    PRIMARY KEY (principal, summary_id, source_id)
) PARTITION BY LIST (principal);
CREATE INDEX summary_sources_source ON summary_sources (principal, source_id);

CREATE TABLE compression_failures (
    principal text NOT NULL DEFAULT current_setting('mcp.principal', true),
    memory_id text NOT NULL,
    failures integer NOT NULL,
    PRIMARY KEY (principal, memory_id)
) PARTITION BY LIST (principal);

CREATE SEQUENCE memory_events_n_seq;
CREATE TABLE memory_events (
    principal text NOT NULL DEFAULT current_setting('mcp.principal', true),
    n bigint NOT NULL DEFAULT nextval('memory_events_n_seq'),
    memory_id text NOT NULL,
    at double precision NOT NULL,
    event text NOT NULL,
    detail text NOT NULL DEFAULT '{}',
    PRIMARY KEY (principal, n)
) PARTITION BY LIST (principal);
CREATE INDEX memory_events_memory ON memory_events (principal, memory_id, n);

CREATE TABLE golden_queries (
    principal text NOT NULL DEFAULT current_setting('mcp.principal', true),
    id text NOT NULL,
    namespace text,
    query text NOT NULL,
    memory_id text NOT NULL,
    created_at double precision NOT NULL,
    PRIMARY KEY (principal, id)
) PARTITION BY LIST (principal);
CREATE INDEX golden_queries_memory ON golden_queries (principal, memory_id);

CREATE SEQUENCE golden_checks_n_seq;
CREATE TABLE golden_checks (
    principal text NOT NULL DEFAULT current_setting('mcp.principal', true),
    n bigint NOT NULL DEFAULT nextval('golden_checks_n_seq'),
    at double precision NOT NULL,
    queries integer NOT NULL,
    before double precision NOT NULL,
    after double precision NOT NULL,
    rolled_back integer NOT NULL,
    detail text NOT NULL DEFAULT '{}',
    PRIMARY KEY (principal, n)
) PARTITION BY LIST (principal);

-- The per-principal tables, each partitioned by principal.
CREATE FUNCTION mcp_principal_tables() RETURNS text[]
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT ARRAY['meta', 'memories', 'memory_tags', 'occurrences', 'vectors', 'second_vectors', 'postings',
                 'memory_entities', 'changes', 'tasks', 'checkpoints', 'erasures', 'conflicts',
                 'summary_sources', 'compression_failures', 'memory_events', 'golden_queries', 'golden_checks']
$$;

-- The second wall, on every one of them; the server may read and write through the parent only.
DO $$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY mcp_principal_tables() LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format(
            'CREATE POLICY own_principal ON %I USING (principal = current_setting(''mcp.principal'', true)) '
            'WITH CHECK (principal = current_setting(''mcp.principal'', true))', t);
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I TO {server}', t);
    END LOOP;
END $$;

-- What the partition functions may be asked for: a principal key, and only the transaction's own.
CREATE FUNCTION mcp_own_principal(p text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF p IS NULL OR p !~ '^[0-9a-f]{32}$' THEN
        RAISE EXCEPTION 'a principal key is 32 hexadecimal digits';
    END IF;
    IF p IS DISTINCT FROM current_setting('mcp.principal', true) THEN
        RAISE EXCEPTION 'only the transaction''s own principal (mcp.principal)';
    END IF;
END $$;

-- Partitions are made and emptied by the owner's functions; the server may only call them. Each
-- partition carries the parent's policy, forced, so a query that names a partition (as the store's
-- do, ADR 20) is walled as one through the parent. A
-- partition is made apart and then attached, which locks the parent only against other schema
-- changes (SHARE UPDATE EXCLUSIVE): other principals read and write on. CREATE TABLE ... PARTITION
-- OF, DETACH and DROP would take the parent whole (ACCESS EXCLUSIVE), so the first write of a new
-- principal, or a forget_user, would wait for every open transaction of every principal and stall
-- all those after it. For the same reason no per-principal table references another: a foreign key
-- between partitioned tables makes attaching lock the referenced parent and forbids TRUNCATE. The
-- store deletes a memory's rows in every table itself, in the transaction that deletes it.
CREATE FUNCTION mcp_open_principal(p text, named text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t text;
    part text;
BEGIN
    PERFORM public.mcp_own_principal(p);
    IF EXISTS (SELECT 1 FROM public.principals WHERE principal = p) THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('mcp_open_principal'), hashtext(p));  -- two replicas, one principal
    IF EXISTS (SELECT 1 FROM public.principals WHERE principal = p) THEN
        RETURN;  -- made while this one waited
    END IF;
    -- Each step only when it is missing: ALTER TABLE takes the partition whole, and a reader of the
    -- principal that holds one partition while it waits for another would deadlock with it.
    FOREACH t IN ARRAY public.mcp_principal_tables() LOOP
        part := t || '_' || p;
        IF to_regclass(format('public.%I', part)) IS NULL THEN
            EXECUTE format('CREATE TABLE public.%I (LIKE public.%I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', part, t);
        END IF;
        IF NOT EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = format('public.%I', part)::regclass) THEN
            EXECUTE format('ALTER TABLE public.%I ATTACH PARTITION public.%I FOR VALUES IN (%L)', t, part, p);
        END IF;
        -- The store names the partition itself (ADR 20): the same wall stands on it as on the parent.
        IF NOT (SELECT relrowsecurity AND relforcerowsecurity FROM pg_class WHERE oid = format('public.%I', part)::regclass) THEN
            EXECUTE format('ALTER TABLE public.%I ENABLE ROW LEVEL SECURITY', part);
            EXECUTE format('ALTER TABLE public.%I FORCE ROW LEVEL SECURITY', part);
        END IF;
        IF NOT EXISTS (SELECT 1 FROM pg_policy WHERE polrelid = format('public.%I', part)::regclass) THEN
            EXECUTE format(
                'CREATE POLICY own_principal ON public.%I USING (principal = current_setting(''mcp.principal'', true)) '
                'WITH CHECK (principal = current_setting(''mcp.principal'', true))', part);
        END IF;
        IF NOT has_table_privilege('{server}', format('public.%I', part), 'SELECT, INSERT, UPDATE, DELETE') THEN
            EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON public.%I TO {server}', part);
        END IF;
    END LOOP;
    INSERT INTO public.principals (principal, name) VALUES (p, named) ON CONFLICT DO NOTHING;
END $$;

-- forget_user: TRUNCATE gives each of the principal's partitions new, empty files and removes the
-- old ones when the transaction commits (their length is cut to zero at once, the name unlinked
-- after the next checkpoint), so no tuple of the principal's stays in a page, and it locks only the
-- principal's own partitions. `meta` (the model's name, the log's epoch, counters) and `erasures`
-- (the content-free receipts) hold no memory's words and stay; so do the empty partitions and the
-- principal's row, for a principal that comes back and for the scheduler. WAL segments and the
-- operator's archive and backups keep what they keep (the receipt says so).
CREATE FUNCTION mcp_drop_principal(p text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE parts text;
BEGIN
    PERFORM public.mcp_own_principal(p);
    SELECT string_agg(format('public.%I', t || '_' || p), ', ') INTO parts
    FROM unnest(public.mcp_principal_tables()) AS t
    WHERE t NOT IN ('meta', 'erasures') AND to_regclass(format('public.%I', t || '_' || p)) IS NOT NULL;
    IF parts IS NOT NULL THEN
        EXECUTE 'TRUNCATE ' || parts;
    END IF;
END $$;

REVOKE ALL ON FUNCTION mcp_own_principal(text), mcp_open_principal(text, text), mcp_drop_principal(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_open_principal(text, text), mcp_drop_principal(text) TO {server};
GRANT SELECT ON deployment, principals TO {server};
GRANT USAGE ON SEQUENCE memories_n_seq, changes_seq_seq, erasures_n_seq, memory_events_n_seq, golden_checks_n_seq TO {server};

-- ----- shared by every principal and every replica -------------------------------------------

CREATE TABLE tokens (
    id text PRIMARY KEY,
    hash text NOT NULL UNIQUE,
    principal text NOT NULL,  -- the principal's name: the token is what names it
    namespace text,
    label text,
    created_at double precision NOT NULL,
    expires_at double precision,
    revoked_at double precision
);

CREATE TABLE switches (
    target text PRIMARY KEY,
    state text NOT NULL CHECK (state IN ('on', 'off')),
    changed_at double precision NOT NULL,
    source text NOT NULL
);

CREATE TABLE llm_usage (
    principal_hash text NOT NULL,
    day integer NOT NULL,
    calls integer NOT NULL DEFAULT 0,
    tokens integer NOT NULL DEFAULT 0,
    failures integer NOT NULL DEFAULT 0,
    PRIMARY KEY (principal_hash, day)
);

-- A lifecycle pass's lease: taken with INSERT ... ON CONFLICT DO UPDATE ... WHERE expires_at < now,
-- renewed while the pass runs; a replica killed mid-pass stops renewing and another takes it over.
CREATE TABLE leases (
    name text PRIMARY KEY,
    holder text NOT NULL,
    expires_at double precision NOT NULL
);

CREATE TABLE passes (
    n bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text NOT NULL,
    holder text NOT NULL,
    started_at double precision NOT NULL,
    finished_at double precision NOT NULL,
    outcome text NOT NULL,
    details text NOT NULL
);

CREATE TABLE ui_sessions (
    hash text PRIMARY KEY,
    principal text NOT NULL,
    namespace text,
    token_id text NOT NULL,
    csrf text NOT NULL,
    created_at double precision NOT NULL,
    expires_at double precision NOT NULL
);

-- forget_user's confirmation codes, so the second call may reach another replica than the first.
CREATE TABLE forget_codes (
    principal text PRIMARY KEY,  -- the principal key
    code_hash text NOT NULL,
    expires_at double precision NOT NULL
);

GRANT SELECT, INSERT, UPDATE, DELETE ON tokens, switches, llm_usage, leases, passes, ui_sessions, forget_codes
    TO {server};
