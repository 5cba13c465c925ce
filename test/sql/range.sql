--
-- snowflake_from_timestamp: range bounds on the key.
--
SET timezone = 'UTC';

SELECT snowflake_from_timestamp('2016-11-01 00:00:00+00');
SELECT snowflake_from_timestamp('2016-11-01 00:00:00.001+00');
SELECT snowflake_from_timestamp('2016-11-01 00:00:00.0019+00');
SELECT snowflake_from_timestamp('2024-02-29 12:34:56.789+00');

-- round trip to the millisecond
SELECT t, snowflake_timestamp(snowflake_from_timestamp(t)) = date_trunc('milliseconds', t) AS round_trip
FROM (VALUES ('2016-11-01 00:00:00+00'::timestamptz),
			 ('2020-01-01 00:00:00.123456+00'),
			 ('2026-11-22 08:15:00.999999+00'),
			 ('2086-07-07 12:00:00+00')) v(t);

-- the whole range: first and last instants
SELECT snowflake_from_timestamp('2086-07-08 15:47:35.551+00');
SELECT snowflake_from_timestamp('2086-07-08 15:47:35.552+00');
SELECT snowflake_from_timestamp('2016-10-31 23:59:59.999+00');
SELECT snowflake_from_timestamp('infinity');
SELECT snowflake_from_timestamp('-infinity');

-- [from_timestamp(a), from_timestamp(b)) selects exactly the IDs made in [a, b)
CREATE TABLE events (id bigint PRIMARY KEY, made timestamptz NOT NULL);
INSERT INTO events
SELECT snowflake_from_timestamp(t) + ((g * 7919) % 1024 << 12) + (g * 104729) % 4096, t
FROM (SELECT g, '2025-06-01 00:00:00+00'::timestamptz + g * interval '250 microseconds' AS t
	  FROM generate_series(0, 19999) g) s;
SELECT a, b,
	   (SELECT count(*) FROM events
		WHERE id >= snowflake_from_timestamp(a) AND id < snowflake_from_timestamp(b)) AS by_id,
	   (SELECT count(*) FROM events WHERE made >= a AND made < b) AS by_time
FROM (VALUES ('2025-06-01 00:00:00+00'::timestamptz, '2025-06-01 00:00:01+00'::timestamptz),
			 ('2025-06-01 00:00:00.5+00', '2025-06-01 00:00:02.25+00'),
			 ('2025-06-01 00:00:03.001+00', '2025-06-01 00:00:03.002+00'),
			 ('2025-06-01 00:00:04.999+00', '2025-06-01 00:00:09+00')) v(a, b);

-- the bounds are computed once, so the primary key index serves the query
SET enable_seqscan = off;
EXPLAIN (COSTS OFF)
SELECT * FROM events WHERE id >= snowflake_from_timestamp(now() - interval '1 hour');
RESET enable_seqscan;
DROP TABLE events;

-- bounds between ticks round down to the tick: the rows selected are those
-- whose ID time (snowflake_timestamp) lies in [a, b) rounded down to the
-- millisecond, so rows made in a's millisecond before a are in, rows made
-- in b's millisecond before b are out
CREATE TABLE events (id bigint PRIMARY KEY, made timestamptz NOT NULL);
INSERT INTO events
SELECT snowflake_from_timestamp(t) + ((g * 7919) % 1024 << 12) + (g * 104729) % 4096, t
FROM (SELECT g, '2025-06-01 00:00:00+00'::timestamptz + g * interval '130 microseconds' AS t
	  FROM generate_series(0, 19999) g) s;
SELECT a, b, by_id, by_tick, by_id = by_tick AS exact, by_time
FROM (SELECT a, b,
			 (SELECT count(*) FROM events
			  WHERE id >= snowflake_from_timestamp(a) AND id < snowflake_from_timestamp(b)) AS by_id,
			 (SELECT count(*) FROM events
			  WHERE snowflake_timestamp(id) >= date_trunc('milliseconds', a)
				AND snowflake_timestamp(id) < date_trunc('milliseconds', b)) AS by_tick,
			 (SELECT count(*) FROM events WHERE made >= a AND made < b) AS by_time
	  FROM (VALUES ('2025-06-01 00:00:00.0005+00'::timestamptz, '2025-06-01 00:00:01.0005+00'::timestamptz),
				   ('2025-06-01 00:00:00.000131+00', '2025-06-01 00:00:00.001261+00'),
				   ('2025-06-01 00:00:01.999999+00', '2025-06-01 00:00:02.000001+00')) v(a, b)) s;
-- every row is below the bound taken just after it was made, rounded up a tick
SELECT count(*) FILTER (WHERE id >= snowflake_from_timestamp(made + interval '1 ms')) AS above_bound
FROM events;
DROP TABLE events;
