--
-- DecimalId, node-partitioned sequences and obfuscated IDs.
--

-- seed 001's example: 14150009200065 is counter 1415, generator 92, launch 65
SELECT * FROM decimal_id_decode(14150009200065);
SELECT * FROM decimal_id_decode(9223372036854775807);
SELECT * FROM decimal_id_decode(9999999999);

-- generated DecimalIds: the counter counts, the launch id is the setting
CREATE TEMP TABLE d AS
	SELECT n, decimal_id_nextval() AS id FROM generate_series(1, 1000) n;
SELECT count(DISTINCT id) AS ids,
	   count(DISTINCT (decimal_id_decode(id)).generator_id) AS generators,
	   bool_and((decimal_id_decode(id)).launch_id = 0) AS launch_id_0,
	   max((decimal_id_decode(id)).counter) - min((decimal_id_decode(id)).counter) AS counter_span
FROM d;
SELECT count(*) AS out_of_order
FROM (SELECT id, lag(id) OVER (ORDER BY n) AS prev FROM d) s WHERE id <= prev;

-- node-partitioned: worker id 7 above the sequence's value
CREATE SEQUENCE orders_seq;
SELECT id, (snowflake_node_decode(id)).*
FROM (SELECT snowflake_node_nextval('orders_seq') AS id FROM generate_series(1, 3)) s;

-- at the top of the 50-bit range, and past it: an error, never a wrap
CREATE SEQUENCE near_end START 1125899906842622;
SELECT * FROM snowflake_node_decode(snowflake_node_nextval('near_end'));
SELECT * FROM snowflake_node_decode(snowflake_node_nextval('near_end'));
SELECT snowflake_node_nextval('near_end');
CREATE SEQUENCE downwards INCREMENT -1;
SELECT snowflake_node_nextval('downwards');
SELECT snowflake_node_nextval('no_such_sequence');
SELECT * FROM snowflake_node_decode(0);
SELECT * FROM snowflake_node_decode(7::bigint << 50);

-- obfuscation is a bijection of [1, 2^63-1]: a million sequential IDs,
-- a million from the top of the range, the edges
CREATE TEMP TABLE o AS
	SELECT x, snowflake_obfuscate(x, 42) AS y
	FROM (SELECT generate_series(1, 1000000) AS x
		  UNION ALL
		  SELECT 9223372036854775807 - generate_series(0, 999999)) s;
SELECT count(*) AS ids, count(DISTINCT y) AS distinct_images,
	   bool_and(y BETWEEN 1 AND 9223372036854775807) AS in_domain,
	   bool_and(snowflake_deobfuscate(y, 42) = x) AS inverts
FROM o;
-- nothing sequential is left: neighbours land far apart
SELECT count(*) FILTER (WHERE abs(y2 - y1) < 1000000) AS close_neighbours
FROM (SELECT y AS y1, lead(y) OVER (ORDER BY x) AS y2 FROM o WHERE x <= 1000000) s
WHERE y2 IS NOT NULL;
-- another key, another permutation
SELECT count(*) FILTER (WHERE snowflake_obfuscate(x, 43) = y) AS same_under_other_key
FROM o WHERE x <= 100000;
SELECT snowflake_deobfuscate(snowflake_obfuscate(1, -1), -1) AS one,
	   snowflake_deobfuscate(snowflake_obfuscate(9223372036854775807, 0), 0) AS max;
SELECT snowflake_obfuscate(0, 42);
SELECT snowflake_deobfuscate(-5, 42);
DROP TABLE o;
