--
-- Generating IDs: uniqueness, order, worker id, currval, defaults.
--
CREATE EXTENSION snowflake;

-- nothing generated yet in this session
SELECT snowflake_currval();

CREATE TEMP TABLE ids AS
	SELECT g AS n, snowflake_nextval() AS id FROM generate_series(1, 20000) g;

-- unique, positive, strictly increasing in call order
SELECT count(*) AS ids, count(DISTINCT id) AS distinct_ids, min(id) > 0 AS positive
FROM ids;
SELECT count(*) AS out_of_order
FROM (SELECT id, lag(id) OVER (ORDER BY n) AS prev FROM ids) s
WHERE id <= prev;

-- every ID carries this server's worker id (snowflake.worker_id = 7)
SELECT DISTINCT (snowflake_decode(id)).worker_id FROM ids;

-- and the time it was made, to within the run of this test
SELECT bool_and(snowflake_timestamp(id) BETWEEN now() - interval '1 minute'
				AND clock_timestamp()) AS timestamps_are_now
FROM ids;

-- currval is the last ID of this session
SELECT snowflake_currval() = (SELECT max(id) FROM ids) AS currval_is_last;
SELECT snowflake_nextval() = snowflake_currval() AS currval_follows;

-- as the default of a primary key
CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), item text);
INSERT INTO orders (item) VALUES ('book'), ('pen'), ('ink');
SELECT count(*) AS orders, bool_and(id > (SELECT max(id) FROM ids)) AS above_earlier_ids
FROM orders;
SELECT item FROM orders ORDER BY id;

-- snowflake_next_id() is snowflake_nextval() by another name (for tools
-- that take a default naming nextval for a sequence): the same generator,
-- marked alike
CREATE TABLE next_id_orders (id bigint PRIMARY KEY DEFAULT snowflake.snowflake_next_id(), item text);
INSERT INTO next_id_orders (item) VALUES ('book'), ('pen');
SELECT count(*) AS orders, bool_and(id > (SELECT max(id) FROM orders)) AS above_earlier_ids,
	   bool_and((snowflake_decode(id)).worker_id = 7) AS this_worker
FROM next_id_orders;
SELECT snowflake_next_id() = snowflake_currval() AS currval_follows,
	   snowflake_nextval() > (SELECT max(id) FROM next_id_orders) AS one_generator;
SELECT a.provolatile = b.provolatile AND a.proparallel = b.proparallel AND a.proisstrict = b.proisstrict
	   AND a.prosrc = b.prosrc AND a.probin = b.probin AS marked_alike
FROM pg_proc a, pg_proc b
WHERE a.oid = 'snowflake.snowflake_next_id()'::regprocedure AND b.oid = 'snowflake.snowflake_nextval()'::regprocedure;
DROP TABLE next_id_orders;

-- a new session continues above every ID the node issued
\c
SELECT snowflake_currval();
SELECT snowflake_nextval() > (SELECT max(id) FROM orders) AS above_other_sessions;

-- at one ID per tick the low bits still vary (no all-even IDs)
CREATE TEMP TABLE slow (id bigint);
DO $$
BEGIN
	FOR i IN 1..40 LOOP
		INSERT INTO slow VALUES (snowflake_nextval());
		PERFORM pg_sleep(0.002);
	END LOOP;
END $$;
SELECT count(DISTINCT id % 2) AS parities, count(DISTINCT (snowflake_decode(id)).seq) > 1 AS seqs_vary
FROM slow;

DROP TABLE orders;
