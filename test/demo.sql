-- make demo: README's getting started, on a throwaway server set up as
-- README recommends (postgresql.conf: shared_preload_libraries =
-- 'snowflake', snowflake.worker_id = 7; search_path as PostgreSQL has
-- it, without snowflake), so every call names the schema and can be
-- pasted as it is shown.
\set ECHO queries
SET timezone = 'UTC';
CREATE EXTENSION IF NOT EXISTS snowflake;

CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake.snowflake_nextval(), item text);
INSERT INTO orders (item) VALUES ('book'), ('pen'), ('ink') RETURNING id;

-- each ID carries its time, the node's worker id and a sequence number
SELECT o.id, d.* FROM orders o, snowflake.snowflake_decode(o.id) d;

-- a time range is a range of the primary key
EXPLAIN (COSTS OFF)
SELECT * FROM orders WHERE id >= snowflake.snowflake_from_timestamp(now() - interval '1 hour');
SELECT count(*) AS last_hour FROM orders
WHERE id >= snowflake.snowflake_from_timestamp(now() - interval '1 hour');

-- a million IDs, and what the generator did meanwhile
\timing on
SELECT count(snowflake.snowflake_nextval()) FROM generate_series(1, 1000000);
\timing off
SELECT worker_id, layout, last_id, last_id_time, ids_issued, waits, run_ahead_ids, refused
FROM snowflake.snowflake_status;

-- IDs made elsewhere decode too: a Discord ID from its documentation
SELECT * FROM snowflake.snowflake_decode(175928847299117063, 'discord');
