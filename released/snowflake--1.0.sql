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

--
-- The other schemes of the source documents.
--
CREATE FUNCTION decimal_id_nextval()
RETURNS bigint
AS 'MODULE_PATHNAME', 'decimal_id_nextval'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION decimal_id_nextval() IS
'next DecimalId of this node: counter * 10^10 + generator_id * 10^5 + launch_id';

CREATE FUNCTION decimal_id_decode(id bigint,
	OUT counter bigint, OUT generator_id integer, OUT launch_id integer)
RETURNS record
AS 'MODULE_PATHNAME', 'decimal_id_decode'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION decimal_id_decode(bigint) IS
'counter, generator id and launch id of a DecimalId';

-- nextval() on the sequence is PARALLEL UNSAFE; so is this.
CREATE FUNCTION snowflake_node_nextval(seq regclass)
RETURNS bigint
AS 'MODULE_PATHNAME', 'snowflake_node_nextval'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION snowflake_node_nextval(regclass) IS
'next value of the sequence in this node''s range: worker id in the top 13 bits, the value in the low 50';

CREATE FUNCTION snowflake_node_decode(id bigint,
	OUT node_id integer, OUT counter bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'snowflake_node_decode'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION snowflake_node_decode(bigint) IS
'node id and counter of a node-partitioned ID';

CREATE FUNCTION snowflake_obfuscate(id bigint, key bigint)
RETURNS bigint
AS 'MODULE_PATHNAME', 'snowflake_obfuscate'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION snowflake_obfuscate(bigint, bigint) IS
'keyed permutation of [1, 2^63-1] that hides time and volume in public IDs (obfuscation, not encryption)';

CREATE FUNCTION snowflake_deobfuscate(id bigint, key bigint)
RETURNS bigint
AS 'MODULE_PATHNAME', 'snowflake_deobfuscate'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION snowflake_deobfuscate(bigint, bigint) IS
'inverse of snowflake_obfuscate() with the same key';

--
-- The worker id registry.  Each node claims its worker id here, with its
-- system identifier; publish this table with the data.  A second system
-- claiming the same worker id then fails on the primary key wherever both
-- claims meet (on an aggregator: the subscription stops before any of the
-- second node's rows are applied), and snowflake_claim_worker() refuses
-- locally when it sees a claim by another system.
--
CREATE TABLE snowflake_workers (
	worker_id integer PRIMARY KEY,
	system_identifier bigint NOT NULL,
	node_name text,
	claimed_at timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE snowflake_workers IS
'which system claimed which worker id; publish it with the data to catch two nodes with one worker id';

SELECT pg_catalog.pg_extension_config_dump('snowflake_workers', '');

CREATE FUNCTION snowflake_claim_worker(node_name text DEFAULT NULL)
RETURNS snowflake_workers
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	me bigint := (SELECT system_identifier FROM pg_control_system());
	w integer := current_setting('snowflake.worker_id')::integer;
	claim @extschema@.snowflake_workers;
BEGIN
	SELECT * INTO claim FROM @extschema@.snowflake_workers WHERE worker_id = w;
	IF FOUND AND claim.system_identifier <> me THEN
		RAISE EXCEPTION 'worker id % is already claimed by another system', w
			USING ERRCODE = 'unique_violation',
				  DETAIL = format('System %s (node %s) claimed it at %s; this system is %s.',
								  claim.system_identifier, coalesce(claim.node_name, 'unnamed'),
								  claim.claimed_at, me),
				  HINT = 'Give this node a worker id of its own in snowflake.worker_id.';
	END IF;
	IF NOT FOUND THEN
		INSERT INTO @extschema@.snowflake_workers (worker_id, system_identifier, node_name)
		VALUES (w, me, snowflake_claim_worker.node_name)
		RETURNING * INTO claim;
	END IF;
	RETURN claim;
END $$;

COMMENT ON FUNCTION snowflake_claim_worker(text) IS
'record that this system uses its snowflake.worker_id; fails if another system claimed it';

--
-- Converting an existing key column to snowflake_nextval(), through ALTER
-- TABLE only, in the caller's transaction.
--
CREATE FUNCTION snowflake_convert_column(tbl regclass, col name)
RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	att record;
	seq text;
	owned boolean := false;
	old_default text;
	max_value bigint;
	floor_id bigint;
	report text[] := '{}';
BEGIN
	-- no writer may slip in between the check and the change
	EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', tbl);

	SELECT a.attnum, a.atttypid::regtype AS typ, a.attidentity,
		   pg_get_expr(d.adbin, d.adrelid) AS def
	INTO att
	FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
	WHERE a.attrelid = tbl AND a.attname = col AND a.attnum > 0 AND NOT a.attisdropped;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'column "%" of relation % does not exist', col, tbl
			USING ERRCODE = 'undefined_column';
	END IF;
	IF att.typ IN ('integer'::regtype, 'smallint'::regtype) THEN
		RAISE EXCEPTION 'column "%" of relation % is of type %, too narrow for snowflake IDs', col, tbl, att.typ
			USING ERRCODE = 'datatype_mismatch',
				  HINT = format('Widen it first: ALTER TABLE %s ALTER COLUMN %I TYPE bigint;', tbl, col);
	END IF;
	IF att.typ <> 'bigint'::regtype THEN
		RAISE EXCEPTION 'column "%" of relation % is of type %, not bigint', col, tbl, att.typ
			USING ERRCODE = 'datatype_mismatch';
	END IF;

	IF att.attidentity IN ('a', 'd') THEN
		seq := pg_get_serial_sequence(tbl::text, col);
		old_default := CASE att.attidentity WHEN 'a' THEN 'GENERATED ALWAYS AS IDENTITY'
					   ELSE 'GENERATED BY DEFAULT AS IDENTITY' END;
	ELSIF att.def LIKE 'nextval(%' THEN
		seq := pg_get_serial_sequence(tbl::text, col);
		owned := seq IS NOT NULL;
		old_default := 'DEFAULT ' || att.def;
	ELSIF att.def = 'snowflake_nextval()' OR att.def LIKE '%.snowflake_nextval()' THEN
		RETURN format('%s.%I already defaults to snowflake_nextval(); nothing changed', tbl, col);
	ELSE
		RAISE EXCEPTION 'column "%" of relation % is not filled by a sequence or an identity', col, tbl
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  DETAIL = format('Its default is %s.', coalesce(att.def, 'none')),
				  HINT = 'Set the default by hand: ALTER TABLE ... ALTER COLUMN ... SET DEFAULT snowflake_nextval();';
	END IF;

	-- every existing value must be below the IDs the generator will issue
	EXECUTE format('SELECT max(%I) FROM %s', col, tbl) INTO max_value;
	floor_id := @extschema@.snowflake_from_timestamp(clock_timestamp());
	IF max_value >= floor_id THEN
		RAISE EXCEPTION 'existing values of %.% reach into the range of snowflake IDs', tbl, col
			USING ERRCODE = 'numeric_value_out_of_range',
				  DETAIL = format('The largest value is %s; snowflake IDs issued now start at %s.', max_value, floor_id);
	END IF;

	IF att.attidentity IN ('a', 'd') THEN
		EXECUTE format('ALTER TABLE %s ALTER COLUMN %I DROP IDENTITY', tbl, col);
		report := report || format('dropped %s and its sequence %s', old_default, seq);
	END IF;
	EXECUTE format('ALTER TABLE %s ALTER COLUMN %I SET DEFAULT @extschema@.snowflake_nextval()', tbl, col);
	IF att.attidentity NOT IN ('a', 'd') THEN
		report := report || format('replaced %s', old_default);
	END IF;
	IF owned THEN
		EXECUTE format('DROP SEQUENCE %s', seq);
		report := report || format('dropped the sequence %s it owned', seq);
	END IF;
	report := report || format('existing values up to %s stay below the first snowflake ID %s',
							   coalesce(max_value::text, '(none)'), floor_id);
	RETURN format('%s.%I now defaults to snowflake_nextval(): %s', tbl, col, array_to_string(report, '; '));
END $$;

COMMENT ON FUNCTION snowflake_convert_column(regclass, name) IS
'switch a bigserial, nextval() or identity column to DEFAULT snowflake_nextval(), after checking its values';

-- An install here makes a data directory without snowflake state a fresh
-- node, as the later versions' scripts do (the library is the one of the
-- newest version): the function is temporary, named by its schema.
CREATE FUNCTION pg_temp.snowflake_identity_installed()
RETURNS void
AS 'MODULE_PATHNAME', 'snowflake_identity_installed'
LANGUAGE C VOLATILE PARALLEL UNSAFE;
SELECT pg_temp.snowflake_identity_installed();
DROP FUNCTION pg_temp.snowflake_identity_installed();
