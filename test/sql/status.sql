--
-- The status view counts what the generator did.
--
SELECT worker_id, layout, started_at <= now() AS started FROM snowflake_status;

SELECT ids_issued AS before FROM snowflake_status \gset
SELECT count(snowflake_nextval()) FROM generate_series(1, 5000);
SELECT ids_issued - :before AS issued_now,
	   last_id = snowflake_currval() AS last_is_currval,
	   last_id_time = snowflake_timestamp(last_id) AS last_time,
	   refused, clock_back_events
FROM snowflake_status;

-- the layouts, for reference
SET timezone = 'UTC';
SELECT name, time_bits, worker_bits, seq_bits, tick_ms, epoch, end_of_life, max_id
FROM snowflake_layouts();

-- everybody may read the view
CREATE ROLE regress_snowflake_reader;
SET ROLE regress_snowflake_reader;
SELECT worker_id, ids_issued > 0 AS counting FROM snowflake_status;
RESET ROLE;
DROP ROLE regress_snowflake_reader;
