--
-- ShardingSphere's layout for a JVM in a named time zone: the epoch is
-- local midnight of 2016-11-01 in the JVM's default zone, at the offset the
-- zone had that day (releases up to 5.3), or at the offset in force when
-- the JVM started (from 5.4: ZONE@DAY, the day it started).  The table of
-- known values is what ShardingSphere's algorithm computes in a JVM
-- (test/shardingsphere/ShardingSphereIds.java); make test checks that it
-- still does.
--
SET timezone = 'UTC';

-- known values: the epoch, and the ID of worker 0, sequence 0 at
-- 2026-01-01 00:00 UTC, in JVMs in UTC, +8, -4 (daylight saving time on
-- 2016-11-01), +1 (standard time by then), -7, -2, +5:30, +11, +0
-- (Casablanca), -2:30, +13:45 and fixed offsets; and in JVMs of 5.4 or
-- later started in July and November 2025, when St. John's, Chatham, Lord
-- Howe, Sao Paulo and Casablanca had other offsets than on 2016-11-01
SELECT zone, snowflake_timestamp(1, 'shardingsphere@' || zone) AS epoch,
	   (extract(epoch FROM snowflake_timestamp(1, 'shardingsphere@' || zone)) * 1000)::bigint AS epoch_ms,
	   snowflake_from_timestamp('2026-01-01 00:00:00+00', 'shardingsphere@' || zone) AS id_2026
FROM (VALUES ('UTC'), ('Asia/Shanghai'), ('America/New_York'), ('Europe/Berlin'),
			 ('America/Los_Angeles'), ('America/Sao_Paulo'), ('Asia/Kolkata'),
			 ('Australia/Lord_Howe'), ('Africa/Casablanca'), ('America/St_Johns'),
			 ('Pacific/Chatham'), ('+08:00'), ('-04:00'), ('+05:45'),
			 ('America/St_Johns@2025-07-15'), ('America/St_Johns@2025-11-15'),
			 ('Pacific/Chatham@2025-07-15'), ('Australia/Lord_Howe@2025-07-15'),
			 ('America/Sao_Paulo@2025-11-15'), ('Africa/Casablanca@2025-11-15'),
			 ('Asia/Shanghai@2025-07-15')) z(zone);

-- plain "shardingsphere" is a JVM in UTC
SELECT snowflake_from_timestamp('2026-01-01 00:00:00+00', 'shardingsphere')
	 = snowflake_from_timestamp('2026-01-01 00:00:00+00', 'shardingsphere@UTC') AS utc;

-- a JVM of 5.4 or later: the layout of the day it started is that fixed
-- offset's; the day is any day of the season (noon local time decides),
-- and with a fixed offset it changes nothing
SELECT name, snowflake_timestamp(1, name) = snowflake_timestamp(1, offset_name) AS same_layout
FROM (VALUES ('shardingsphere@America/St_Johns@2025-11-15', 'shardingsphere@-03:30'),
			 ('shardingsphere@America/St_Johns@2025-07-15', 'shardingsphere@-02:30'),
			 ('shardingsphere@america/st_johns@2025-03-09', 'shardingsphere@-02:30'),
			 ('shardingsphere@America/New_York@2025-03-08', 'shardingsphere@-05:00'),
			 ('shardingsphere@Pacific/Chatham@2025-07-15', 'shardingsphere@+12:45'),
			 ('shardingsphere@Europe/Dublin@2025-01-15', 'shardingsphere@+00:00'),
			 ('shardingsphere@+08:00@2025-07-15', 'shardingsphere@+08:00')) n(name, offset_name);

-- one ID, three zones: the same bits are eight hours apart between
-- Shanghai and UTC, and four hours the other way for New York
SELECT layout, d.*
FROM (VALUES ('shardingsphere'), ('shardingsphere@Asia/Shanghai'), ('shardingsphere@America/New_York')) l(layout),
	 snowflake_decode(1331055398945320985, layout) d;

-- names are case-insensitive; offsets are written several ways; the tz
-- database's Etc/GMT-8 is eight hours east, as in Java
SELECT name, snowflake_timestamp(1, name)
FROM (VALUES ('SHARDINGSPHERE@asia/shanghai'), ('ShardingSphere@+8'), ('shardingsphere@+0800'),
			 ('shardingsphere@-4'), ('shardingsphere@-00:00'), ('shardingsphere@Etc/GMT-8')) n(name);

-- the IDs of one zone sort by time, and round-trip to the tick
SELECT bool_and(snowflake_timestamp(snowflake_from_timestamp(t, 'shardingsphere@America/New_York'), 'shardingsphere@America/New_York')
				= date_trunc('milliseconds', t)) AS round_trip
FROM generate_series('2026-03-08 06:59:59+00'::timestamptz, '2026-03-08 07:00:01+00', interval '250.5 ms') t;

-- bad names: an unknown zone, a POSIX zone string (whose sign is the
-- opposite of Java's "GMT+8"), Java's own spelling of an offset, offsets
-- out of range or malformed, the machine's zone, no zone, and a name too
-- long for the state file
SELECT snowflake_timestamp(1, 'shardingsphere@Mars/Olympus');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_timestamp(1, 'shardingsphere@UTC+8');
SELECT snowflake_decode(1, 'shardingsphere@GMT+08:00');
SELECT snowflake_from_timestamp(now(), 'shardingsphere@+24:00');
SELECT snowflake_timestamp(1, 'shardingsphere@+08:60');
SELECT snowflake_timestamp(1, 'shardingsphere@+8:0');
SELECT snowflake_timestamp(1, 'shardingsphere@localtime');
SELECT snowflake_timestamp(1, 'shardingsphere@');
SELECT snowflake_timestamp(1, 'shardingsphere@America/Argentina/ComodRivadavia/' || repeat('x', 20));
-- and the day a JVM started: not a day of the calendar, not written
-- YYYY-MM-DD, before the epoch, no zone before it, an unknown zone
SELECT snowflake_timestamp(1, 'shardingsphere@America/St_Johns@2026-02-30');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_timestamp(1, 'shardingsphere@America/St_Johns@2026-7-1');
SELECT snowflake_timestamp(1, 'shardingsphere@America/St_Johns@2026-07-01@x');
SELECT snowflake_timestamp(1, 'shardingsphere@Pacific/Chatham@2016-10-31');
-- nor after the layout's end of life, in a zone or at a fixed offset
SELECT snowflake_timestamp(1, 'shardingsphere@Asia/Shanghai@2099-01-01');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_timestamp(1, 'shardingsphere@+08:00@2086-07-09');
-- its last day is one
SELECT snowflake_timestamp(1, 'shardingsphere@+08:00@2086-07-08') = snowflake_timestamp(1, 'shardingsphere@+08:00@2026-07-01') AS same_epoch;
SELECT snowflake_timestamp(1, 'shardingsphere@@2026-07-01');
SELECT snowflake_timestamp(1, 'shardingsphere@Mars/Olympus@2026-07-01');
SELECT snowflake_timestamp(1, 'shardingsphere');
SELECT snowflake_timestamp(1, 'sharding');

-- IMMUTABLE, as PostgreSQL's own conversion to a named time zone is: an
-- index and a generated column can name a zone layout
SELECT p.oid::regprocedure AS function, p.provolatile
FROM pg_proc p
WHERE p.oid IN ('snowflake_decode(bigint, text)'::regprocedure,
				'snowflake_timestamp(bigint, text)'::regprocedure,
				'snowflake_from_timestamp(timestamptz, text)'::regprocedure,
				'pg_catalog.timezone(text, timestamptz)'::regprocedure)
ORDER BY function::text;
CREATE TABLE jvm_orders (
	id bigint PRIMARY KEY,
	made timestamptz GENERATED ALWAYS AS (snowflake_timestamp(id, 'shardingsphere@Asia/Shanghai')) STORED
);
CREATE INDEX ON jvm_orders (snowflake_timestamp(id, 'shardingsphere@Asia/Shanghai'));
CREATE INDEX ON jvm_orders (snowflake_timestamp(id, 'shardingsphere@America/St_Johns@2025-11-15'));
INSERT INTO jvm_orders VALUES (1331055398945320985);
SELECT made FROM jvm_orders WHERE snowflake_timestamp(id, 'shardingsphere@Asia/Shanghai') > '2026-01-01';
SELECT snowflake_timestamp(id, 'shardingsphere@America/St_Johns@2025-11-15') FROM jvm_orders;
DROP TABLE jvm_orders;
