-- 1: principals, and their memories in one partition each behind row-level security (ADR 19).
-- Run by the owner role; {server} is the role the server connects as.
CREATE TABLE schema_version (version int NOT NULL, min_code int NOT NULL, written_by text NOT NULL);
INSERT INTO schema_version VALUES (0, 0, '');

CREATE TABLE principals (
    principal text PRIMARY KEY,
    opened_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE memories (
    principal text NOT NULL,
    n bigint GENERATED ALWAYS AS IDENTITY,
    id text NOT NULL,
    namespace text,
    kind text NOT NULL,
    content text NOT NULL,
    key text,
    tags jsonb NOT NULL DEFAULT '[]',
    metadata jsonb NOT NULL DEFAULT '{}',
    importance double precision NOT NULL,
    pinned boolean NOT NULL DEFAULT false,
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
    PRIMARY KEY (principal, n),
    UNIQUE (principal, id)
) PARTITION BY LIST (principal);
CREATE INDEX memories_hash ON memories (principal, content_hash);

-- The second wall: whatever a query forgets, it sees and writes only the transaction's principal.
ALTER TABLE memories ENABLE ROW LEVEL SECURITY;
ALTER TABLE memories FORCE ROW LEVEL SECURITY;
CREATE POLICY own_principal ON memories
    USING (principal = current_setting('mcp.principal', true))
    WITH CHECK (principal = current_setting('mcp.principal', true));

-- What either function may be asked for: a principal key, and only the transaction's own.
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

-- Partitions are made and dropped by the owner's functions; the server may only call them, and
-- has no right on a partition itself (a query must go through the parent and its policy).
CREATE FUNCTION mcp_open_principal(p text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM public.mcp_own_principal(p);
    EXECUTE format('CREATE TABLE IF NOT EXISTS public.%I PARTITION OF public.memories FOR VALUES IN (%L)', 'memories_' || p, p);
    INSERT INTO public.principals (principal) VALUES (p) ON CONFLICT DO NOTHING;
END $$;

CREATE FUNCTION mcp_drop_principal(p text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM public.mcp_own_principal(p);
    EXECUTE format('DROP TABLE IF EXISTS public.%I', 'memories_' || p);
    DELETE FROM public.principals WHERE principal = p;
END $$;

REVOKE ALL ON FUNCTION mcp_own_principal(text), mcp_open_principal(text), mcp_drop_principal(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION mcp_open_principal(text), mcp_drop_principal(text) TO {server};
GRANT SELECT, INSERT, UPDATE, DELETE ON memories TO {server};
