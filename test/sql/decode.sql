--
-- Decoding IDs of the server's layout (shardingsphere: 41-bit ms since
-- 2016-11-01, 10-bit worker, 12-bit sequence) and of named layouts.
--
SET timezone = 'UTC';

-- tick 1000, worker 5, sequence 3: 1000 << 22 | 5 << 12 | 3
SELECT * FROM snowflake_decode(4194324483);
SELECT snowflake_timestamp(4194324483);

-- the smallest and the largest ID
SELECT * FROM snowflake_decode(1);
SELECT * FROM snowflake_decode(9223372036854775807);

-- decoding is the inverse of generating
SELECT (d).worker_id = 7 AS worker, (d).ts = snowflake_timestamp(id) AS ts
FROM (SELECT id, snowflake_decode(id) AS d FROM (SELECT snowflake_nextval() AS id) s) t;

-- the default layout can be named
SELECT * FROM snowflake_decode(4194324483, 'shardingsphere');
SELECT snowflake_timestamp(4194324483, 'ShardingSphere');

-- bad input
SELECT * FROM snowflake_decode(0);
SELECT * FROM snowflake_decode(-42);
SELECT snowflake_timestamp(-1);
SELECT * FROM snowflake_decode(1, 'uuid');
SELECT snowflake_decode(NULL) IS NULL AS strict;
