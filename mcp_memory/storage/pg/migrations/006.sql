-- Schema 6: schema 5's script triggers plan their look-up afresh on every row. PL/pgSQL keeps a
-- statement's plan for the session, and after five runs settles on a generic plan made with the
-- sizes the tables had then: a connection whose first vectors went into a nearly empty partition
-- kept a plan that read the memory through memories_occurred (principal alone) and filtered on `n`,
-- a scan of the whole partition for every vector written (2.2 ms at 4,000 memories against 0.02 by
-- the key; filling 10,000 memories took 61 s against 36 without the triggers, 15.3 s of it in
-- mcp_vector_script). A custom plan costs a planning per row and is made with the partition's size.
ALTER FUNCTION mcp_vector_script() SET plan_cache_mode = force_custom_plan;
ALTER FUNCTION mcp_memory_script() SET plan_cache_mode = force_custom_plan;
