--
-- Layout presets: published IDs decode to their documented times, and
-- every preset round-trips through snowflake_from_timestamp().
--
SET timezone = 'UTC';

-- Discord's documentation: 175928847299117063 was made 2016-04-30
-- 11:18:25.796 UTC by worker 1, process 0, increment 7.
SELECT ts, worker_id >> 5 AS discord_worker, worker_id & 31 AS discord_process, seq
FROM snowflake_decode(175928847299117063, 'discord');

-- Twitter's documentation: tweet 1050118621198921728 was created
-- 2018-10-10 20:19:24 UTC.
SELECT ts, worker_id >> 5 AS datacenter, worker_id & 31 AS worker, seq
FROM snowflake_decode(1050118621198921728, 'twitter');

-- the fields land where each format puts them
SELECT name,
	   snowflake_decode(snowflake_from_timestamp('2030-01-01 00:00:00+00', name) + 1, name) AS first_id_plus_one
FROM snowflake_layouts() ORDER BY name;

-- Sonyflake puts the sequence above the 16-bit machine id
SELECT * FROM snowflake_decode((1::bigint << 40) | (3 << 16) | 9, 'sonyflake');

-- round trip under every preset, to the tick
SELECT name, bool_and(snowflake_timestamp(snowflake_from_timestamp(t, name), name) <= t
					  AND snowflake_timestamp(snowflake_from_timestamp(t, name), name) > t - tick_ms * interval '1 ms') AS round_trip
FROM snowflake_layouts(),
	 (VALUES ('2025-03-04 05:06:07.891234+00'::timestamptz),
			 ('2026-11-22 23:59:59.999999+00'),
			 ('2040-01-01 00:00:00.005+00')) v(t)
GROUP BY name ORDER BY name;

-- IDs of a layout sort by time across workers
SELECT name, bool_and(a < b) AS ordered
FROM snowflake_layouts(),
	 LATERAL (SELECT snowflake_from_timestamp('2030-01-01 00:00:00+00', name) + max_id % 1000 AS a,
					 snowflake_from_timestamp('2030-01-01 00:00:00.01+00', name) AS b) s
GROUP BY name ORDER BY name;

-- the javascript layout stays a safe integer for JavaScript
SELECT max_id = 9007199254740991 AS safe, end_of_life > '2090-01-01' AS lasts
FROM snowflake_layouts() WHERE name = 'javascript';

-- two-argument decoding is IMMUTABLE: it can be indexed
CREATE TABLE foreign_ids (id bigint);
CREATE INDEX ON foreign_ids (snowflake_timestamp(id, 'discord'));
INSERT INTO foreign_ids VALUES (175928847299117063);
SELECT count(*) FROM foreign_ids WHERE snowflake_timestamp(id, 'discord') < '2017-01-01';
DROP TABLE foreign_ids;

-- out of range for the layout
SELECT snowflake_timestamp(9007199254740992, 'javascript');
SELECT snowflake_from_timestamp('2046-06-28 00:00:00+00', 'instagram');
SELECT snowflake_from_timestamp('2014-08-31 00:00:00+00', 'sonyflake');
SELECT snowflake_decode(1, 'custom');

-- two-argument functions are IMMUTABLE: plain 'custom', which follows
-- settings, is refused; a custom layout is named with its parameters
SELECT snowflake_timestamp(1, 'custom');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM snowflake_decode((5::bigint << 22) | (3 << 12) | 9, 'custom:41/10/12/1ms/2016-11-01');
SELECT * FROM snowflake_decode((5::bigint << 22) | (3 << 12) | 9, 'shardingsphere');
SELECT * FROM snowflake_decode((1::bigint << 40) | (3 << 16) | 9, 'custom:39/16/8/10ms/2014-09-01/seq_above_worker');
SELECT snowflake_timestamp(1 << 10, 'CUSTOM:20/4/6/86400000ms/1409529600000');
SELECT snowflake_from_timestamp('2024-01-01 12:00:00.250+00', 'custom:40/8/15/2ms/2024-01-01 12:00:00.250');
-- names that describe no layout, and a long one, echoed in part
SELECT snowflake_timestamp(1, 'custom:41/10/12/1ms');
SELECT snowflake_timestamp(1, 'custom:41/10/12/1ms/2016-11-01/sideways');
SELECT snowflake_timestamp(1, 'custom:50/10/12/1ms/2016-11-01');
SELECT snowflake_timestamp(1, 'custom:41/10/12/1ms/2016-02-30');
SELECT snowflake_timestamp(1, 'custom:41/10/12/1ms/99999999999999999999');
SELECT snowflake_timestamp(1, repeat('x', 1000000));
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_timestamp(1, 'custom:' || repeat('9', 1000000));

-- the first and last tick of every layout, and its largest ID
SELECT name,
	   snowflake_from_timestamp(epoch, name) = 1 AS first_is_1,
	   snowflake_from_timestamp(epoch + (tick_ms - 0.5) * interval '1 ms', name) = 1 AS first_tick_all_1,
	   snowflake_timestamp(1, name) = epoch AS id_1_at_epoch,
	   snowflake_timestamp(max_id, name) = end_of_life - tick_ms * interval '1 ms' AS max_id_in_last_tick,
	   snowflake_from_timestamp(end_of_life - interval '1 microsecond', name)
		 = snowflake_from_timestamp(end_of_life - tick_ms * interval '1 ms', name) AS last_tick_one_bound,
	   snowflake_from_timestamp(end_of_life - interval '1 microsecond', name) <= max_id AS max_id_selected
FROM snowflake_layouts()
UNION ALL
SELECT 'custom:20/4/6/86400000ms/2014-09-01',
	   snowflake_from_timestamp('2014-09-01+00', c) = 1,
	   snowflake_from_timestamp('2014-09-01 23:59:59.999999+00', c) = 1,
	   snowflake_timestamp(1, c) = '2014-09-01+00',
	   snowflake_timestamp((1::bigint << 30) - 1, c) = '2014-09-01+00'::timestamptz + ((1 << 20) - 1) * interval '1 day',
	   snowflake_from_timestamp('2014-09-01+00'::timestamptz + (1 << 20) * interval '1 day' - interval '1 microsecond', c)
		 = ((1::bigint << 20) - 1) << 10,
	   true
FROM (VALUES ('custom:20/4/6/86400000ms/2014-09-01')) v(c)
ORDER BY 1;
SELECT snowflake_from_timestamp(end_of_life, name) FROM snowflake_layouts() WHERE name = 'sonyflake';
SELECT snowflake_timestamp(max_id + 1, name) FROM snowflake_layouts() WHERE name = 'javascript';
