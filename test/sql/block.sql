--
-- Blocks of IDs: n consecutive sequence numbers of one tick, claimed at
-- once, above every ID issued before and below every ID issued after.
--
-- how many IDs one tick of the server's layout holds
SELECT 1 << seq_bits AS capacity
FROM snowflake_layouts() WHERE name = (SELECT layout FROM snowflake_status) \gset

-- a block of 1 is an ID like any other
SELECT snowflake_nextval() AS before \gset
SELECT snowflake_nextval_block(1) AS one \gset
SELECT :one > :before AS above_before, snowflake_nextval() > :one AS below_after;

-- a block of 1000: its IDs are first .. first + 999, between the IDs
-- issued just before and just after it
SELECT snowflake_nextval() AS before \gset
SELECT snowflake_nextval_block(1000) AS first \gset
SELECT snowflake_nextval() AS after \gset
SELECT :first > :before AS above_before, :first + 999 < :after AS below_after;
-- one tick, this node's worker id, consecutive sequence numbers
SELECT count(DISTINCT d.ts) AS ticks, min(d.worker_id) = max(d.worker_id) AS one_worker,
	   bool_and(d.worker_id = snowflake_worker_id()) AS this_node,
	   max(d.seq) - min(d.seq) AS seq_span, count(DISTINCT d.seq) AS seqs
FROM generate_series(0, 999) g, snowflake_decode(:first + g) d;

-- a block of the whole capacity of a tick, twice in a row: the second
-- moves to the next tick
SELECT snowflake_nextval_block(:capacity) AS a \gset
SELECT snowflake_nextval_block(:capacity) AS b \gset
SELECT (snowflake_decode(:a)).seq AS a_first_seq,
	   (snowflake_decode(:a + :capacity - 1)).seq = :capacity - 1 AS a_ends_the_tick,
	   :b > :a + :capacity - 1 AS b_above_a,
	   (snowflake_decode(:b)).ts > (snowflake_decode(:a)).ts AS b_in_a_later_tick;

-- the series form: n distinct rows, consecutive, above what came before
SELECT snowflake_nextval() AS before \gset
CREATE TEMP TABLE s AS
	SELECT row_number() OVER () AS n, id FROM snowflake_nextval_series(500) id;
SELECT snowflake_nextval() AS after \gset
SELECT count(*) AS ids, count(DISTINCT id) AS distinct_ids,
	   max(id) - min(id) AS span, min(id) > :before AS above_before,
	   max(id) < :after AS below_after
FROM s;
SELECT count(*) AS out_of_order
FROM (SELECT id, lag(id) OVER (ORDER BY n) AS prev FROM s) x
WHERE id <> prev + 1;
-- one block per call: three calls, three blocks that never overlap
SELECT count(*) AS ids, count(DISTINCT id) AS distinct_ids
FROM (SELECT snowflake_nextval_series(7) AS id FROM generate_series(1, 3)) s;
-- one block per row from the select list, also where the sizes repeat
SELECT count(*) AS ids, count(DISTINCT id) AS distinct_ids
FROM (SELECT snowflake_nextval_series(g % 2 + 1) AS id FROM generate_series(1, 1000) g) s;
SELECT count(*) AS blocks, count(DISTINCT first) AS distinct_blocks
FROM (SELECT snowflake_nextval_block(g % 2 + 1) AS first FROM generate_series(1, 1000) g) s;
-- for INSERT ... SELECT
CREATE TEMP TABLE parents (id bigint PRIMARY KEY, name text);
INSERT INTO parents SELECT id, 'p' || id FROM snowflake_nextval_series(3) id;
SELECT count(*) FROM parents;
-- a series of the whole capacity: one tick, its sequence numbers from 0
-- to the last, in order
SELECT count(DISTINCT id) = :capacity AS full_tick,
	   count(DISTINCT (snowflake_decode(id)).ts) AS ticks,
	   bool_and((snowflake_decode(id)).seq = n - 1) AS seqs_in_order
FROM snowflake_nextval_series(:capacity) WITH ORDINALITY s(id, n);

-- the planner expects n rows
DO $$
DECLARE
	plan json;
BEGIN
	EXECUTE 'EXPLAIN (FORMAT JSON) SELECT * FROM snowflake_nextval_series(7)' INTO plan;
	RAISE NOTICE 'estimated rows: %', plan->0->'Plan'->'Plan Rows';
END $$;

-- sizes one tick cannot hold, or none
SELECT snowflake_nextval_block(:capacity + 1);
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_nextval_block(0);
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_nextval_block(-5);
SELECT * FROM snowflake_nextval_series(:capacity + 1);
SELECT * FROM snowflake_nextval_series(0);
-- STRICT: no size, no block
SELECT snowflake_nextval_block(NULL) IS NULL AS null_block;
SELECT count(*) FROM snowflake_nextval_series(NULL);

-- the counters count every ID of a block
SELECT ids_issued AS issued FROM snowflake_status \gset
SELECT snowflake_nextval_block(50) > 0 AS issued_block;
SELECT ids_issued - :issued AS counted FROM snowflake_status;
