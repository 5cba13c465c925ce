/* snowflake--1.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION snowflake" to load this file. \quit

--
-- Generating.  Both functions keep the last ID in backend memory for
-- snowflake_currval(), so they run only in the leader of a parallel query
-- (PARALLEL RESTRICTED).  They take no arguments, so strictness does not
-- apply.
--
CREATE FUNCTION snowflake_nextval()
RETURNS bigint
AS 'MODULE_PATHNAME', 'snowflake_nextval'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION snowflake_nextval() IS
'next Snowflake ID of this node: unique across the node, greater than every ID it issued before';

CREATE FUNCTION snowflake_currval()
RETURNS bigint
AS 'MODULE_PATHNAME', 'snowflake_currval'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION snowflake_currval() IS
'last ID that snowflake_nextval() returned in this session';

--
-- Decoding under the server's layout.  snowflake.layout is fixed while the
-- server runs but may change across restarts, so these are STABLE; the
-- variants that name a layout are IMMUTABLE and fit indexes and generated
-- columns.
--
CREATE FUNCTION snowflake_decode(id bigint,
	OUT ts timestamptz, OUT worker_id integer, OUT seq integer)
RETURNS record
AS 'MODULE_PATHNAME', 'snowflake_decode'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION snowflake_decode(bigint) IS
'time, worker id and sequence number of an ID of the server''s layout';

CREATE FUNCTION snowflake_decode(id bigint, layout text,
	OUT ts timestamptz, OUT worker_id integer, OUT seq integer)
RETURNS record
AS 'MODULE_PATHNAME', 'snowflake_decode_layout'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION snowflake_decode(bigint, text) IS
'time, worker id and sequence number of an ID of the named layout';

CREATE FUNCTION snowflake_timestamp(id bigint)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'snowflake_timestamp'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION snowflake_timestamp(bigint) IS
'time at which an ID of the server''s layout was generated, to the tick';

CREATE FUNCTION snowflake_timestamp(id bigint, layout text)
RETURNS timestamptz
AS 'MODULE_PATHNAME', 'snowflake_timestamp_layout'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION snowflake_timestamp(bigint, text) IS
'time at which an ID of the named layout was generated, to the tick';

CREATE FUNCTION snowflake_from_timestamp(ts timestamptz)
RETURNS bigint
AS 'MODULE_PATHNAME', 'snowflake_from_timestamp'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION snowflake_from_timestamp(timestamptz) IS
'smallest ID of the server''s layout that can carry that time: a bound for range scans on the key';

CREATE FUNCTION snowflake_from_timestamp(ts timestamptz, layout text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'snowflake_from_timestamp_layout'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION snowflake_from_timestamp(timestamptz, text) IS
'smallest ID of the named layout that can carry that time';

--
-- Reference and monitoring.
--
CREATE FUNCTION snowflake_layouts(
	OUT name text, OUT time_bits integer, OUT worker_bits integer,
	OUT seq_bits integer, OUT tick_ms bigint, OUT epoch timestamptz,
	OUT end_of_life timestamptz, OUT max_id bigint, OUT description text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'snowflake_layouts'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION snowflake_layouts() IS
'the layout presets: field widths, time unit, epoch and end of life';

-- The counters change with every call: VOLATILE.  They live in shared
-- memory, so any process, a parallel worker too, reads the same values.
CREATE FUNCTION snowflake_status(
	OUT worker_id integer, OUT layout text, OUT last_id bigint,
	OUT last_id_time timestamptz, OUT ids_issued bigint, OUT waits bigint,
	OUT clock_back_events bigint, OUT clock_back_max_ms bigint,
	OUT run_ahead_ids bigint, OUT run_ahead_ms bigint, OUT refused bigint,
	OUT high_water_mark bigint, OUT high_water_mark_time timestamptz,
	OUT started_at timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'snowflake_status'
LANGUAGE C VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION snowflake_status() IS
'state and counters of this node''s generator since the server started';

CREATE VIEW snowflake_status AS SELECT * FROM snowflake_status();

COMMENT ON VIEW snowflake_status IS
'state and counters of this node''s generator since the server started';

GRANT SELECT ON snowflake_status TO PUBLIC;
