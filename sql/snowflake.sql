/*
 * snowflake.sql: the full install script of the current version, the one
 * source of its SQL.  The Makefile copies it to snowflake--VERSION.sql
 * (VERSION: default_version in snowflake.control), and makes the update
 * script from the last release from that script's template, which takes
 * the sections marked "-- @begin NAME" ... "-- @end NAME" here: an object
 * new or changed since the last release is in such a section, and the
 * template copies it (sql/compose.pl).  test/t/upgrade_extension.pl
 * checks that both give the same extension.
 */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION snowflake" to load this file. \quit

--
-- The schema.  Every object lives in the schema snowflake (the control
-- file names it), which the function bodies below name and which a column
-- default or a caller's search_path resolves to.  Only a superuser may own
-- it or create in it: a schema made beforehand by another role, or one
-- where another role may create, could hold or later receive look-alike
-- objects that a superuser's call would run.  CREATE EXTENSION makes the
-- schema when it is missing, owned by the installing superuser.
--
DO $$
DECLARE
	path text := pg_catalog.current_setting('search_path');
	bad text;
BEGIN
	PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
	SELECT string_agg(format('%s %s', CASE WHEN e.grantee = 0 THEN 'PUBLIC'
											ELSE quote_ident(r.rolname) END,
							 CASE WHEN e.privilege_type IS NULL THEN 'owns it'
								  ELSE 'may create in it' END), ', ')
	INTO bad
	FROM pg_namespace n
		 CROSS JOIN LATERAL (SELECT n.nspowner AS grantee, NULL::text AS privilege_type
							 UNION ALL
							 SELECT a.grantee, a.privilege_type FROM aclexplode(n.nspacl) a
							 WHERE a.privilege_type = 'CREATE') e
		 LEFT JOIN pg_roles r ON r.oid = e.grantee
	WHERE n.nspname = 'snowflake' AND NOT coalesce(r.rolsuper, false);
	IF bad IS NOT NULL THEN
		RAISE EXCEPTION 'schema "snowflake" is not safe for the extension snowflake'
			USING ERRCODE = 'insufficient_privilege',
				  DETAIL = format('Only superusers may own or create in it, but %s.', bad),
				  HINT = 'Drop or rename that schema (or revoke CREATE on it), then run the command again as a superuser; CREATE EXTENSION makes the schema itself.';
	END IF;
	PERFORM pg_catalog.set_config('search_path', path, true);
END $$;

-- its objects are for every role to call, as their privileges allow
GRANT USAGE ON SCHEMA @extschema@ TO PUBLIC;

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

-- @begin next_id
-- snowflake_nextval() by a name without "nextval", for the tools that take
-- any column default holding that word for a sequence (MikroORM's schema
-- diff, which then changes the column's type on every run)
CREATE FUNCTION snowflake_next_id()
RETURNS bigint
AS 'MODULE_PATHNAME', 'snowflake_nextval'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION snowflake_next_id() IS
'snowflake_nextval() by another name, for column defaults of tools that take a default naming nextval for a sequence';
-- @end next_id

CREATE FUNCTION snowflake_currval()
RETURNS bigint
AS 'MODULE_PATHNAME', 'snowflake_currval'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION snowflake_currval() IS
'last ID that snowflake_nextval() returned in this session';

-- @begin blocks
--
-- Blocks of IDs, for keys assigned before the insert (Hibernate's pooled
-- optimizers, HiLo, a batch of parents and children): n consecutive
-- sequence numbers of one tick, claimed at once.  Marked as
-- snowflake_nextval() is, so that every generating call of a query runs
-- in the leader.
--
CREATE FUNCTION snowflake_nextval_block(n integer)
RETURNS bigint
AS 'MODULE_PATHNAME', 'snowflake_nextval_block'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

COMMENT ON FUNCTION snowflake_nextval_block(integer) IS
'reserves n consecutive IDs of this node, first to first + n - 1, all greater than every ID it issued before, and returns the first';

-- the planner's row estimate: n, when it is known
CREATE FUNCTION snowflake_nextval_series_support(internal)
RETURNS internal
AS 'MODULE_PATHNAME', 'snowflake_nextval_series_support'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION snowflake_nextval_series_support(internal) IS
'planner support for snowflake_nextval_series(): estimates n rows';

CREATE FUNCTION snowflake_nextval_series(n integer)
RETURNS SETOF bigint
AS 'MODULE_PATHNAME', 'snowflake_nextval_series'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED
ROWS 100 SUPPORT snowflake_nextval_series_support;

COMMENT ON FUNCTION snowflake_nextval_series(integer) IS
'the n IDs of one block of this node, in ascending order, reserved at once as by snowflake_nextval_block()';
-- @end blocks

--
-- Decoding under the server's layout.  snowflake.layout is fixed while the
-- server runs but may change across restarts, so these are STABLE; the
-- variants that name a layout are IMMUTABLE and fit indexes and generated
-- columns: they take a preset or a custom layout named with its
-- parameters ('custom:41/10/12/1ms/2016-11-01'), never plain 'custom',
-- which follows settings.
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

-- @begin comment_decode
COMMENT ON FUNCTION snowflake_decode(bigint, text) IS
'time, worker id and sequence number of an ID of the named layout (a preset, ''shardingsphere@ZONE'' or ''custom:T/W/S/Nms/EPOCH'')';
-- @end comment_decode

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

-- @begin comment_timestamp
COMMENT ON FUNCTION snowflake_timestamp(bigint, text) IS
'time at which an ID of the named layout (a preset, ''shardingsphere@ZONE'' or ''custom:T/W/S/Nms/EPOCH'') was generated, to the tick';
-- @end comment_timestamp

CREATE FUNCTION snowflake_from_timestamp(ts timestamptz)
RETURNS bigint
AS 'MODULE_PATHNAME', 'snowflake_from_timestamp'
LANGUAGE C STABLE STRICT PARALLEL SAFE;

-- @begin comment_from_timestamp
COMMENT ON FUNCTION snowflake_from_timestamp(timestamptz) IS
'smallest ID of the tick that holds that time, in the server''s layout: a bound for range scans on the key';
-- @end comment_from_timestamp

CREATE FUNCTION snowflake_from_timestamp(ts timestamptz, layout text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'snowflake_from_timestamp_layout'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- @begin comment_from_timestamp_layout
COMMENT ON FUNCTION snowflake_from_timestamp(timestamptz, text) IS
'smallest ID of the tick that holds that time, in the named layout (a preset, ''shardingsphere@ZONE'' or ''custom:T/W/S/Nms/EPOCH'')';
-- @end comment_from_timestamp_layout

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

-- @begin node_model
-- The node's model as the library holds it: each reason (its state and
-- SQLSTATE), and each transition of the node's durable state (an event,
-- the reasons it acts in, the state and reason it leads to).  Fixed by the
-- library loaded, so STABLE; DESIGN.md's tables are checked against it.
CREATE FUNCTION snowflake_node_model(
	OUT kind text, OUT name text, OUT from_reasons text[],
	OUT to_state text, OUT to_reason text, OUT sqlstate text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'snowflake_node_model'
LANGUAGE C STABLE PARALLEL SAFE;

COMMENT ON FUNCTION snowflake_node_model() IS
'the node''s reasons and the transitions of its state, as the library holds them';
-- @end node_model

-- @begin status
-- The counters change with every call: VOLATILE.  They live in shared
-- memory, so any process, a parallel worker too, reads the same values.
CREATE FUNCTION snowflake_status(
	OUT state text, OUT reason text,
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
-- @end status

-- The node's worker id in force: the one its IDs carry.  It follows
-- snowflake.worker_id after a reload, as one event for the whole node.
CREATE FUNCTION snowflake_worker_id()
RETURNS integer
AS 'MODULE_PATHNAME', 'snowflake_worker_id_fn'
LANGUAGE C VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION snowflake_worker_id() IS
'the worker id this node writes into its IDs; an error if the node cannot generate';

-- @begin repair_state
-- The operator's way out of a damaged state file.  Superuser only: it
-- decides above which ID the node continues.  A value ahead of the clock
-- by more than the policy allows, or in the layout's last tick, needs
-- force, which also lets a repair lower the state again.
CREATE FUNCTION snowflake_repair_state(above bigint DEFAULT 0, force boolean DEFAULT false)
RETURNS bigint
AS 'MODULE_PATHNAME', 'snowflake_repair_state'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION snowflake_repair_state(bigint, boolean) IS
'rewrite a damaged snowflake.state: continue above the given ID and every reservation replayed from WAL since the server started; force accepts a value far ahead of the clock, and undoes an earlier repair while no ID was issued above it';

REVOKE ALL ON FUNCTION snowflake_repair_state(bigint, boolean) FROM PUBLIC;
-- @end repair_state

--
-- The other schemes of the source documents.
--
CREATE FUNCTION decimal_id_nextval()
RETURNS bigint
AS 'MODULE_PATHNAME', 'decimal_id_nextval'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION decimal_id_nextval() IS
'next DecimalId of this node: counter * 10^10 + generator_id * 10^5 + launch_id';

-- @begin decimal_id_grant
-- Each call spends a share of the node's generator ids, which every role
-- and every restart draw from: only the roles granted it may call it.
REVOKE ALL ON FUNCTION decimal_id_nextval() FROM PUBLIC;
-- @end decimal_id_grant

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

SELECT pg_catalog.pg_extension_config_dump('@extschema@.snowflake_workers', '');

-- @begin claim_worker
CREATE FUNCTION snowflake_claim_worker(node_name text DEFAULT NULL)
RETURNS @extschema@.snowflake_workers
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	me bigint := (SELECT system_identifier FROM pg_control_system());
	w integer := @extschema@.snowflake_identity_claimable();
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
	-- the node keeps the worker ids its system claimed, this one too, also
	-- where the claim was there already (a superuser's call: the one that
	-- may claim)
	IF EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = current_user AND rolsuper) THEN
		PERFORM @extschema@.snowflake_identity_claim_seen(w, me);
	END IF;
	RETURN claim;
END $$;
-- @end claim_worker

COMMENT ON FUNCTION snowflake_claim_worker(text) IS
'record that this system uses its snowflake.worker_id; fails if another system claimed it';

-- @begin convert_column
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
	kind "char";
	mine boolean;
	seq text;
	owned boolean := false;
	old_default text;
	max_value bigint;
	floor_id bigint;
	report text[] := '{}';
BEGIN
	-- a node that cannot generate must not be handed a column to fill
	PERFORM @extschema@.snowflake_worker_id();
	-- a regclass need not name a relation (0, a dropped one's OID)
	IF NOT EXISTS (SELECT FROM pg_class WHERE oid = tbl) THEN
		RAISE EXCEPTION 'relation with OID % does not exist', tbl::oid
			USING ERRCODE = 'undefined_table';
	END IF;
	-- Only a table the caller owns, checked before the lock and again under
	-- it: reading a view, a foreign table or another role's table runs code
	-- its owner chose, with the caller's rights.  The lock keeps any writer
	-- from slipping in between the checks and the change.
	FOR pass IN 1 .. 2 LOOP
		SELECT c.relkind, pg_has_role(c.relowner, 'USAGE') INTO kind, mine
		FROM pg_class c WHERE c.oid = tbl;
		IF kind IS NULL OR kind NOT IN ('r', 'p') THEN
			RAISE EXCEPTION '% is not a table', tbl
				USING ERRCODE = 'wrong_object_type',
					  DETAIL = format('It is %s; snowflake_convert_column() converts ordinary and partitioned tables only.',
									  CASE kind WHEN 'v' THEN 'a view' WHEN 'm' THEN 'a materialized view'
									  WHEN 'f' THEN 'a foreign table' WHEN 'S' THEN 'a sequence'
									  WHEN 'i' THEN 'an index' WHEN 'I' THEN 'a partitioned index'
									  WHEN 'c' THEN 'a composite type' WHEN 't' THEN 'a TOAST table'
									  ELSE 'gone' END);
		END IF;
		IF NOT mine THEN
			RAISE EXCEPTION 'must be owner of table %', tbl
				USING ERRCODE = 'insufficient_privilege',
					  HINT = 'Its owner (or a member of the owning role) converts it.';
		END IF;
		IF pass = 1 THEN
			EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', tbl);
		END IF;
	END LOOP;

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
	ELSIF att.def = '@extschema@.snowflake_nextval()' THEN
		RETURN format('%s.%I already defaults to snowflake.snowflake_nextval(); nothing changed', tbl, col);
	ELSE
		RAISE EXCEPTION 'column "%" of relation % is not filled by a sequence or an identity', col, tbl
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  DETAIL = format('Its default is %s.', coalesce(att.def, 'none')),
				  HINT = 'Set the default by hand: ALTER TABLE ... ALTER COLUMN ... SET DEFAULT snowflake.snowflake_nextval();';
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
	RETURN format('%s.%I now defaults to snowflake.snowflake_nextval(): %s', tbl, col, array_to_string(report, '; '));
END $$;
-- @end convert_column

COMMENT ON FUNCTION snowflake_convert_column(regclass, name) IS
'switch a bigserial, nextval() or identity column to DEFAULT snowflake_nextval(), after checking its values';

-- @begin narrow_defaults
--
-- Columns too narrow for the IDs.  A column whose default generates IDs
-- and whose type holds no bigint exactly either fails on its first insert
-- (smallint, integer, oid, numeric with fewer than 19 digits before the
-- point: "out of range", "numeric field overflow") or rounds the IDs (real,
-- double precision: IDs that collide).  Such a default is refused when it
-- is declared, by an event trigger at the end of the command.  It refuses
-- only what the command itself wrote (a default, or a column's type,
-- changed in this transaction), so that other commands on a table made
-- before keep working, and only a warning while a dump is loaded
-- (check_function_bodies off, as pg_dump and pg_upgrade set it), so that a
-- restore of such a schema completes.  The check a user runs lists every
-- one.  A default that makes something narrower of the ID, as
-- (snowflake_nextval() % 1000)::integer, is refused as well: the check
-- sees which functions a default calls, not what it does with their result.
--
-- snowflake_narrow_defaults_among() finds them without deparsing a single
-- default: deparsing one locks its table, and the trigger must lock
-- nothing the command did not.
--
CREATE FUNCTION snowflake_narrow_defaults_among(relations oid[], domains oid[])
RETURNS TABLE (relation regclass, attnum smallint, domain regtype, data_type text, rounds boolean,
			   recent boolean, expr pg_node_tree)
LANGUAGE sql STABLE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp
AS $$
WITH RECURSIVE
	-- the defaults of those relations and domains (every one for NULL)
	found(classid, objid, relation, attnum, domain, typ, typmod, recent, expr) AS (
		SELECT 'pg_catalog.pg_attrdef'::pg_catalog.regclass, ad.oid, ad.adrelid, ad.adnum, NULL::oid,
			   a.atttypid, a.atttypmod, pg_catalog.age(ad.xmin) <= 0, ad.adbin
		FROM pg_catalog.pg_attrdef ad
			 JOIN pg_catalog.pg_attribute a ON a.attrelid = ad.adrelid AND a.attnum = ad.adnum
		WHERE (relations IS NULL OR ad.adrelid = ANY (relations)) AND NOT a.attisdropped
		UNION ALL
		SELECT 'pg_catalog.pg_type'::pg_catalog.regclass, t.oid, NULL, NULL, t.oid,
			   t.typbasetype, t.typtypmod, pg_catalog.age(t.xmin) <= 0, t.typdefaultbin
		FROM pg_catalog.pg_type t
		WHERE t.typtype = 'd' AND t.typdefaultbin IS NOT NULL
		  AND (domains IS NULL OR t.oid = ANY (domains))),
	-- the type each is stored as, through any domains
	base(classid, objid, typ, typmod) AS (
		SELECT classid, objid, typ, typmod FROM found
		UNION ALL
		SELECT b.classid, b.objid, t.typbasetype, t.typtypmod
		FROM base b JOIN pg_catalog.pg_type t ON t.oid = b.typ
		WHERE t.typtype = 'd'),
	-- those that hold no bigint exactly; numeric's typmod holds its
	-- precision and (signed, 11 bits) scale
	narrow(classid, objid, rounds) AS (
		SELECT b.classid, b.objid, b.typ IN ('pg_catalog.float4'::pg_catalog.regtype,
											 'pg_catalog.float8'::pg_catalog.regtype)
		FROM base b JOIN pg_catalog.pg_type t ON t.oid = b.typ
		WHERE t.typtype <> 'd'
		  AND (b.typ IN ('pg_catalog.int2'::pg_catalog.regtype, 'pg_catalog.int4'::pg_catalog.regtype,
						 'pg_catalog.oid'::pg_catalog.regtype, 'pg_catalog.float4'::pg_catalog.regtype,
						 'pg_catalog.float8'::pg_catalog.regtype)
			   OR (b.typ = 'pg_catalog.numeric'::pg_catalog.regtype AND b.typmod >= 4
				   AND ((((b.typmod - 4) & 2047) # 1024) - 1024 < 0
						OR ((b.typmod - 4) >> 16) - ((((b.typmod - 4) & 2047) # 1024) - 1024) < 19))))
SELECT f.relation::pg_catalog.regclass, f.attnum, f.domain::pg_catalog.regtype,
	   pg_catalog.format_type(f.typ, f.typmod),
	   n.rounds, f.recent, f.expr
FROM found f JOIN narrow n ON n.classid = f.classid AND n.objid = f.objid
WHERE EXISTS (SELECT FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_proc p ON p.oid = d.refobjid
			  WHERE d.classid = f.classid AND d.objid = f.objid
				AND d.refclassid = 'pg_catalog.pg_proc'::pg_catalog.regclass
				AND p.pronamespace = 'snowflake'::pg_catalog.regnamespace
				AND p.proname IN ('snowflake_nextval', 'snowflake_next_id', 'snowflake_nextval_block',
								  'snowflake_node_nextval', 'decimal_id_nextval'))
ORDER BY f.relation, f.attnum, f.domain
$$;

COMMENT ON FUNCTION snowflake_narrow_defaults_among(oid[], oid[]) IS
'internal: the defaults of these relations and domains (all for NULL) that generate snowflake IDs into a type holding no bigint exactly, not deparsed';

CREATE FUNCTION snowflake_narrow_defaults()
RETURNS TABLE (relation regclass, column_name name, domain regtype, data_type text, column_default text)
LANGUAGE sql STABLE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp
AS $$
SELECT f.relation, a.attname, f.domain, f.data_type, pg_catalog.pg_get_expr(f.expr, coalesce(f.relation, 0))
FROM snowflake.snowflake_narrow_defaults_among(NULL, NULL) f
	 LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = f.relation AND a.attnum = f.attnum
$$;

COMMENT ON FUNCTION snowflake_narrow_defaults() IS
'columns and domains of a type that holds no bigint exactly (narrower than bigint, floating point) whose default generates snowflake IDs (or DecimalIds, node-partitioned IDs): each fails on its first insert, or rounds the IDs';

-- It runs as the extension's owner (a superuser), so that a role without
-- USAGE on the extension's schema runs its commands as before.  That is
-- safe: it reads catalogs and raises, calls nothing a user chose (a
-- default is deparsed, never run), and names everything by schema with
-- search_path pinned, so no role below superuser can put an object of its
-- own in the way.
CREATE FUNCTION snowflake_narrow_defaults_check()
RETURNS event_trigger
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	rels oid[];
	doms oid[];
	loading boolean := pg_catalog.current_setting('check_function_bodies') = 'off';
	n record;
	def text;
BEGIN
	-- only what this command made or changed
	SELECT coalesce(pg_catalog.array_agg(c.objid) FILTER (WHERE c.classid = 'pg_catalog.pg_class'::pg_catalog.regclass), '{}'),
		   coalesce(pg_catalog.array_agg(c.objid) FILTER (WHERE c.classid = 'pg_catalog.pg_type'::pg_catalog.regclass), '{}')
	INTO rels, doms
	FROM pg_catalog.pg_event_trigger_ddl_commands() c;
	IF rels = '{}' AND doms = '{}' THEN
		RETURN;
	END IF;
	FOR n IN
		SELECT f.*, a.attname
		FROM snowflake.snowflake_narrow_defaults_among(rels, doms) f
			 LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = f.relation AND a.attnum = f.attnum
		WHERE f.recent
	LOOP
		-- the command holds a lock on each relation named here already
		def := pg_catalog.pg_get_expr(n.expr, coalesce(n.relation, 0));
		IF n.domain IS NULL AND loading THEN
			RAISE WARNING 'column "%" of relation % is of type %, too narrow for snowflake IDs',
				n.attname, n.relation, n.data_type
				USING DETAIL = CASE WHEN n.rounds
							   THEN pg_catalog.format('Its default %s makes bigint values, which that type rounds: different IDs will be stored as one.', def)
							   ELSE pg_catalog.format('Its default %s makes bigint values: its first insert will fail.', def) END,
					  HINT = pg_catalog.format('Widen it: ALTER TABLE %s ALTER COLUMN %I TYPE bigint;', n.relation, n.attname);
		ELSIF n.domain IS NULL THEN
			RAISE EXCEPTION 'column "%" of relation % is of type %, too narrow for snowflake IDs',
				n.attname, n.relation, n.data_type
				USING ERRCODE = 'datatype_mismatch',
					  DETAIL = CASE WHEN n.rounds
							   THEN pg_catalog.format('Its default %s makes bigint values, which that type rounds: different IDs would be stored as one.', def)
							   ELSE pg_catalog.format('Its default %s makes bigint values: its first insert would fail.', def) END,
					  HINT = 'Use bigint for the column (for an existing one, ALTER TABLE ... ALTER COLUMN ... TYPE bigint before the default).';
		ELSIF loading THEN
			RAISE WARNING 'domain % is of type %, too narrow for snowflake IDs', n.domain, n.data_type
				USING DETAIL = CASE WHEN n.rounds
							   THEN pg_catalog.format('Its default %s makes bigint values, which that type rounds: different IDs will be stored as one.', def)
							   ELSE pg_catalog.format('Its default %s makes bigint values: the first insert that uses it will fail.', def) END,
					  HINT = 'Use bigint as the domain''s type.';
		ELSE
			RAISE EXCEPTION 'domain % is of type %, too narrow for snowflake IDs', n.domain, n.data_type
				USING ERRCODE = 'datatype_mismatch',
					  DETAIL = CASE WHEN n.rounds
							   THEN pg_catalog.format('Its default %s makes bigint values, which that type rounds: different IDs would be stored as one.', def)
							   ELSE pg_catalog.format('Its default %s makes bigint values: the first insert that uses it would fail.', def) END,
					  HINT = 'Use bigint as the domain''s type.';
		END IF;
	END LOOP;
END $$;

COMMENT ON FUNCTION snowflake_narrow_defaults_check() IS
'event trigger: refuses a default that generates snowflake IDs on a column or domain of a type that holds no bigint exactly (a warning while a dump is loaded)';

CREATE EVENT TRIGGER snowflake_narrow_defaults_check ON ddl_command_end
WHEN TAG IN ('CREATE TABLE', 'ALTER TABLE', 'CREATE FOREIGN TABLE', 'ALTER FOREIGN TABLE',
			 'ALTER VIEW', 'CREATE DOMAIN', 'ALTER DOMAIN', 'CREATE SCHEMA', 'IMPORT FOREIGN SCHEMA')
EXECUTE FUNCTION snowflake_narrow_defaults_check();

COMMENT ON EVENT TRIGGER snowflake_narrow_defaults_check IS
'refuses a default that generates snowflake IDs on a column or domain of a type that holds no bigint exactly';
-- @end narrow_defaults

-- @begin identity
--
-- The node's identity: a copy, an upgrade or a restore of a node is held
-- back until it gets a worker id of its own or is confirmed as that node.
--
CREATE FUNCTION snowflake_identity_confirm(above bigint, old_data_directory text, stopped_at timestamptz)
RETURNS bigint
AS 'MODULE_PATHNAME', 'snowflake_identity_confirm'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION snowflake_identity_confirm(bigint, text, timestamptz) IS
'internal: mark this data directory as the node of its worker id, above the given floor';

REVOKE ALL ON FUNCTION snowflake_identity_confirm(bigint, text, timestamptz) FROM PUBLIC;

-- A node that is not the one that issued IDs under its worker id cannot
-- know how far they went: the confirmation always names a floor.
CREATE FUNCTION snowflake_confirm_node(above bigint DEFAULT NULL, old_data_directory text DEFAULT NULL,
									   stopped_at timestamptz DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	floor_id bigint := @extschema@.snowflake_identity_confirm(above, old_data_directory, stopped_at);
BEGIN
	-- the node's claim follows it to its new system identifier (the worker
	-- id it runs as: released at commit, it refuses until then)
	UPDATE @extschema@.snowflake_workers
	SET system_identifier = (SELECT system_identifier FROM pg_control_system())
	WHERE worker_id = pg_catalog.current_setting('snowflake.worker_id')::integer
	  AND system_identifier <> (SELECT system_identifier FROM pg_control_system());
	-- other systems' claims the table holds (pg_upgrade carried the rows,
	-- not the node's record of them) are kept, as claims that arrive are
	PERFORM @extschema@.snowflake_identity_claim_seen(w.worker_id, w.system_identifier)
	FROM @extschema@.snowflake_workers w
	WHERE w.system_identifier <> (SELECT system_identifier FROM pg_control_system());
	RETURN floor_id;
END $$;

COMMENT ON FUNCTION snowflake_confirm_node(bigint, text, timestamptz) IS
'this server is the node of its worker id (restored, upgraded, moved): continue above the given ID, the old data directory''s state or every ID up to the time the node stopped, and generate';

REVOKE ALL ON FUNCTION snowflake_confirm_node(bigint, text, timestamptz) FROM PUBLIC;

CREATE FUNCTION snowflake_identity_installed()
RETURNS void
AS 'MODULE_PATHNAME', 'snowflake_identity_installed'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION snowflake_identity_installed() IS
'internal: the install script ran here, so a data directory without snowflake state is a fresh node';

REVOKE ALL ON FUNCTION snowflake_identity_installed() FROM PUBLIC;

CREATE FUNCTION snowflake_identity_claimable()
RETURNS integer
AS 'MODULE_PATHNAME', 'snowflake_identity_claimable'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- as snowflake_worker_id(), everyone may ask it (snowflake_claim_worker()
-- returns an existing claim to a role that may read the table)
COMMENT ON FUNCTION snowflake_identity_claimable() IS
'internal: the worker id a claim is made for; refuses as snowflake_worker_id() does, but where the claim is the step';

CREATE FUNCTION snowflake_identity_claim_seen(worker_id integer, system_identifier bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'snowflake_identity_claim_seen'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION snowflake_identity_claim_seen(integer, bigint) IS
'internal: another system''s claim of this node''s worker id holds the node back';

REVOKE ALL ON FUNCTION snowflake_identity_claim_seen(integer, bigint) FROM PUBLIC;

CREATE FUNCTION snowflake_workers_arrived()
RETURNS trigger
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM @extschema@.snowflake_identity_claim_seen(NEW.worker_id, NEW.system_identifier);
	RETURN NULL;
END $$;

COMMENT ON FUNCTION snowflake_workers_arrived() IS
'trigger: another system''s claim that arrives (a restored dump, replication) holds this node back whenever it names its worker id';

REVOKE ALL ON FUNCTION snowflake_workers_arrived() FROM PUBLIC;

CREATE TRIGGER snowflake_workers_arrived AFTER INSERT OR UPDATE OF worker_id, system_identifier
ON snowflake_workers
FOR EACH ROW EXECUTE FUNCTION snowflake_workers_arrived();

-- also where triggers are off for replication (session_replication_role =
-- replica: a restore run so, logical replication's apply): a claim that
-- arrives by any of them is kept
ALTER TABLE snowflake_workers ENABLE ALWAYS TRIGGER snowflake_workers_arrived;
-- @end identity

-- @begin workers_guard
--
-- Only superusers change the claims, whatever privileges a role holds on
-- the table: pg_write_all_data grants INSERT, UPDATE and DELETE on every
-- table.  Enabled ALWAYS, so that it also fires when a subscription
-- applies changes: a subscription writes claims only as a superuser.
--
CREATE FUNCTION snowflake_workers_guard()
RETURNS trigger
AS 'MODULE_PATHNAME', 'snowflake_workers_guard'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION snowflake_workers_guard() IS
'trigger: only a superuser inserts, updates, deletes or truncates claims in snowflake_workers, also through logical replication';

REVOKE ALL ON FUNCTION snowflake_workers_guard() FROM PUBLIC;

CREATE TRIGGER snowflake_workers_guard BEFORE INSERT OR UPDATE OR DELETE ON snowflake_workers
FOR EACH ROW EXECUTE FUNCTION snowflake_workers_guard();

CREATE TRIGGER snowflake_workers_guard_truncate BEFORE TRUNCATE ON snowflake_workers
FOR EACH STATEMENT EXECUTE FUNCTION snowflake_workers_guard();

ALTER TABLE snowflake_workers ENABLE ALWAYS TRIGGER snowflake_workers_guard;
ALTER TABLE snowflake_workers ENABLE ALWAYS TRIGGER snowflake_workers_guard_truncate;
-- @end workers_guard

-- a fresh install: a data directory without snowflake state is a new node
SELECT @extschema@.snowflake_identity_installed();

-- @begin mesh
--
-- The mesh.  What each node does in a change of an active-active mesh
-- (scripts/snowflake-mesh sequences these calls across the nodes, one
-- session per node).  A mesh is named by its publication, and a node by
-- its worker id: on worker V, the subscription to worker W is
-- <publication>_from_wW, and its slot on W is <publication>_wW_to_wV.
-- Superuser only, as the commands they run are.
--

-- a change of the mesh under way on this node, or one whose helper
-- stopped before it was done: kept until it is finished or cleared
CREATE TABLE snowflake_mesh_changes (
	publication name PRIMARY KEY,
	change text NOT NULL,
	run text NOT NULL,
	since timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE snowflake_mesh_changes IS
'the change of the mesh under way on this node, or left unfinished, by publication';

-- only superusers write it, whatever privileges a role holds on the table
-- (pg_write_all_data): a row there steers the mesh's lock and its abort
CREATE FUNCTION snowflake_mesh_changes_guard()
RETURNS trigger
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user) THEN
		RAISE EXCEPTION 'permission denied for table snowflake_mesh_changes'
			USING ERRCODE = 'insufficient_privilege',
				  DETAIL = 'Only superusers may record a change of the mesh.';
	END IF;
	RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
END $$;

COMMENT ON FUNCTION snowflake_mesh_changes_guard() IS
'trigger: only a superuser inserts, updates, deletes or truncates rows of snowflake_mesh_changes';

REVOKE ALL ON FUNCTION snowflake_mesh_changes_guard() FROM PUBLIC;

CREATE TRIGGER snowflake_mesh_changes_guard BEFORE INSERT OR UPDATE OR DELETE ON snowflake_mesh_changes
FOR EACH ROW EXECUTE FUNCTION @extschema@.snowflake_mesh_changes_guard();

CREATE TRIGGER snowflake_mesh_changes_guard_truncate BEFORE TRUNCATE ON snowflake_mesh_changes
FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.snowflake_mesh_changes_guard();

ALTER TABLE snowflake_mesh_changes ENABLE ALWAYS TRIGGER snowflake_mesh_changes_guard;
ALTER TABLE snowflake_mesh_changes ENABLE ALWAYS TRIGGER snowflake_mesh_changes_guard_truncate;

-- this node's worker id, once the mesh's name is one the mesh's object
-- names have room for.  A node held back from generating (a copy, a claim
-- of another system) is still the node of the worker id it is set to:
-- its state must be read, and its subscriptions taken back.
CREATE FUNCTION snowflake_mesh_node(publication name)
RETURNS integer
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	w integer;
BEGIN
	-- not STRICT: a null name must not skip the check of every caller
	IF publication IS NULL OR publication !~ '^[a-z_][a-z0-9_]{0,39}$' THEN
		RAISE EXCEPTION 'invalid mesh publication name "%"', publication
			USING ERRCODE = 'invalid_name',
				  DETAIL = 'A mesh''s publication has a plain lower-case name of at most 40 characters.';
	END IF;
	BEGIN
		RETURN @extschema@.snowflake_worker_id();
	EXCEPTION WHEN object_not_in_prerequisite_state THEN
		w := current_setting('snowflake.worker_id', true)::integer;
		IF w IS NULL OR w < 0 OR pg_is_in_recovery() THEN
			RAISE;
		END IF;
		RETURN w;
	END;
END $$;

COMMENT ON FUNCTION snowflake_mesh_node(name) IS
'internal: this node''s worker id, after checking the mesh''s publication name';

REVOKE ALL ON FUNCTION snowflake_mesh_node(name) FROM PUBLIC;

-- the sessions that hold an advisory lock of this database, for a message
CREATE FUNCTION snowflake_mesh_holders(key1 integer, key2 integer)
RETURNS text
LANGUAGE sql VOLATILE STRICT PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT string_agg(format('pid %s (role %s, application %L)', l.pid, a.usename, a.application_name),
					  ', ' ORDER BY l.pid)
	FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
	WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
	  AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
	  AND l.classid = (key1::bigint & 4294967295)::oid
	  AND l.objid = (key2::bigint & 4294967295)::oid
$$;

COMMENT ON FUNCTION snowflake_mesh_holders(integer, integer) IS
'internal: the sessions that hold an advisory lock, for messages';

REVOKE ALL ON FUNCTION snowflake_mesh_holders(integer, integer) FROM PUBLIC;

--
-- One change at a time: a session-level advisory lock of the mesh, held
-- by the helper's session on every node it changes, and a row in
-- snowflake_mesh_changes that outlives a helper that is killed, so that
-- nobody builds on a change left half made.  Any role could take the
-- advisory lock too: the message names who holds it.
--
CREATE FUNCTION snowflake_mesh_lock(change text, run text, publication name DEFAULT 'snowflake_mesh')
RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	key integer := hashtext(publication);
	held @extschema@.snowflake_mesh_changes;
BEGIN
	PERFORM @extschema@.snowflake_mesh_node(publication);
	SELECT * INTO held FROM @extschema@.snowflake_mesh_changes c WHERE c.publication = snowflake_mesh_lock.publication;
	IF NOT pg_try_advisory_lock(1397640531, key) THEN
		RAISE EXCEPTION 'this node is in another change of the mesh'
			USING ERRCODE = 'lock_not_available',
				  DETAIL = format('The mesh''s lock is held by %s; the change recorded: %s.',
								  coalesce(@extschema@.snowflake_mesh_holders(1397640531, key), 'a session that just ended'),
								  coalesce(format('%s, run %s, since %s', held.change, held.run, held.since), 'none')),
				  HINT = 'Wait for it to end; a session that holds the lock by hand (pg_advisory_lock) can be ended with pg_terminate_backend().';
	END IF;
	IF held.run IS NOT NULL AND held.run <> run THEN
		PERFORM pg_advisory_unlock(1397640531, key);
		RAISE EXCEPTION 'this node is in an unfinished change of the mesh'
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  DETAIL = format('%s, run %s, since %s, was not finished.', held.change, held.run, held.since),
				  HINT = 'Check the mesh with snowflake-mesh status; take an unfinished join back with snowflake-mesh abort, or clear the record with snowflake-mesh unlock.';
	END IF;
	INSERT INTO @extschema@.snowflake_mesh_changes (publication, change, run)
	VALUES (publication, change, run)
	ON CONFLICT ON CONSTRAINT snowflake_mesh_changes_pkey DO NOTHING;
END $$;

COMMENT ON FUNCTION snowflake_mesh_lock(text, text, name) IS
'takes the mesh''s lock on this node for this session and records the change, or fails if another change holds it or was left unfinished';

REVOKE ALL ON FUNCTION snowflake_mesh_lock(text, text, name) FROM PUBLIC;

CREATE FUNCTION snowflake_mesh_unlock(run text, publication name DEFAULT 'snowflake_mesh')
RETURNS text
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	key integer := hashtext(publication);
	mine boolean;
	ended text;
	t regclass;
BEGIN
	PERFORM @extschema@.snowflake_mesh_node(publication);
	mine := EXISTS (SELECT FROM pg_locks l
					WHERE l.locktype = 'advisory' AND l.pid = pg_backend_pid() AND l.objsubid = 2
					  AND l.classid = 1397640531::oid AND l.objid = (key::bigint & 4294967295)::oid);
	-- a change left unfinished is cleared only while no session runs one
	IF run IS NULL AND NOT mine THEN
		IF NOT pg_try_advisory_lock(1397640531, key) THEN
			RAISE EXCEPTION 'a change of the mesh is under way on this node'
				USING ERRCODE = 'lock_not_available',
					  DETAIL = format('The mesh''s lock is held by %s.',
									  coalesce(@extschema@.snowflake_mesh_holders(1397640531, key), 'a session that just ended')),
					  HINT = 'Wait for it to end.';
		END IF;
		mine := true;
	END IF;
	DELETE FROM @extschema@.snowflake_mesh_changes c
	WHERE c.publication = snowflake_mesh_unlock.publication
	  AND (snowflake_mesh_unlock.run IS NULL OR c.run = snowflake_mesh_unlock.run)
	RETURNING c.change INTO ended;
	IF run IS NULL THEN
		-- the holds an add-table left on its tables go too
		FOR t IN SELECT tg.tgrelid::regclass FROM pg_trigger tg
				 WHERE tg.tgname = 'snowflake_mesh_hold'
				   AND tg.tgfoid = '@extschema@.snowflake_mesh_held()'::regprocedure
				   AND tg.tgparentid = 0 LOOP
			EXECUTE format('DROP TRIGGER snowflake_mesh_hold ON %s', t);
		END LOOP;
	END IF;
	IF mine THEN
		PERFORM pg_advisory_unlock(1397640531, key);
	END IF;
	RETURN ended;
END $$;

COMMENT ON FUNCTION snowflake_mesh_unlock(text, name) IS
'ends this run''s change of the mesh on this node and drops its lock; with run NULL, clears a change left unfinished';

REVOKE ALL ON FUNCTION snowflake_mesh_unlock(text, name) FROM PUBLIC;

--
-- Publications and tables.  A table name without a schema means schema
-- public, on every node alike.
--
CREATE FUNCTION snowflake_mesh_table(tbl text)
RETURNS regclass
LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	parts text[] := parse_ident(btrim(tbl));
	found regclass;
BEGIN
	IF cardinality(parts) > 2 THEN
		RAISE EXCEPTION 'improper table name "%"', tbl
			USING ERRCODE = 'invalid_name',
				  HINT = 'Name a table as schema.table, or table for one in schema public.';
	END IF;
	SELECT c.oid INTO found
	FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE n.nspname = CASE WHEN cardinality(parts) = 1 THEN 'public' ELSE parts[1] END
	  AND c.relname = parts[cardinality(parts)];
	IF found IS NULL THEN
		RAISE EXCEPTION 'relation "%" does not exist', tbl
			USING ERRCODE = 'undefined_table',
				  HINT = 'Create it on every node first, the same; a name without a schema means schema public.';
	END IF;
	RETURN found;
END $$;

COMMENT ON FUNCTION snowflake_mesh_table(text) IS
'the relation a mesh names: schema.table, or table in schema public';

REVOKE ALL ON FUNCTION snowflake_mesh_table(text) FROM PUBLIC;

-- the owner of a mesh table, which reads it: a plain or partitioned table
-- read as its owner runs nothing of anyone else's, where a view, a
-- foreign table or policies forced on the owner would run code their
-- owner chose, as the caller, or hide rows
CREATE FUNCTION snowflake_mesh_reader(tbl regclass)
RETURNS name
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	c pg_class;
BEGIN
	FOR pass IN 1 .. 2 LOOP
		SELECT * INTO c FROM pg_class WHERE oid = tbl;
		IF c.relkind IS NULL OR c.relkind NOT IN ('r', 'p') THEN
			RAISE EXCEPTION '% is not a table', tbl
				USING ERRCODE = 'wrong_object_type',
					  DETAIL = format('It is %s; the mesh replicates tables, and reading anything else could run code its owner chose.',
									  CASE c.relkind WHEN 'v' THEN 'a view' WHEN 'm' THEN 'a materialized view'
									  WHEN 'f' THEN 'a foreign table' WHEN 'S' THEN 'a sequence'
									  ELSE 'gone' END);
		END IF;
		IF c.relforcerowsecurity THEN
			RAISE EXCEPTION 'table % forces row level security on its owner', tbl
				USING ERRCODE = 'insufficient_privilege',
					  DETAIL = 'Its policies could hide rows from the mesh.',
					  HINT = format('ALTER TABLE %s NO FORCE ROW LEVEL SECURITY;', tbl);
		END IF;
		-- checked again under the lock: nothing is swapped in between
		IF pass = 1 THEN
			EXECUTE format('LOCK TABLE %s IN ACCESS SHARE MODE', tbl);
		END IF;
	END LOOP;
	RETURN c.relowner::regrole::name;
END $$;

COMMENT ON FUNCTION snowflake_mesh_reader(regclass) IS
'internal: the owner a mesh table is read as, once it is checked to be a table and locked';

REVOKE ALL ON FUNCTION snowflake_mesh_reader(regclass) FROM PUBLIC;

CREATE FUNCTION snowflake_mesh_empty(tbl regclass)
RETURNS boolean
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	caller text := current_setting('role');
	empty boolean;
BEGIN
	PERFORM set_config('role', @extschema@.snowflake_mesh_reader(tbl), true);
	EXECUTE format('SELECT NOT EXISTS (SELECT FROM %s)', tbl) INTO empty;
	-- a role set in a function outlives it: back to the caller's
	PERFORM set_config('role', caller, true);
	RETURN empty;
END $$;

COMMENT ON FUNCTION snowflake_mesh_empty(regclass) IS
'whether a mesh table has no rows, read as its owner';

REVOKE ALL ON FUNCTION snowflake_mesh_empty(regclass) FROM PUBLIC;

CREATE FUNCTION snowflake_mesh_digest(tbl regclass)
RETURNS text
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	caller text := current_setting('role');
	digest text;
BEGIN
	PERFORM set_config('role', @extschema@.snowflake_mesh_reader(tbl), true);
	EXECUTE format('SELECT count(*) || '' rows, md5 '' || coalesce(md5(string_agg((r.*)::text, '','' ORDER BY (r.*)::text)), ''-'') FROM %s r', tbl)
	INTO digest;
	PERFORM set_config('role', caller, true);
	RETURN digest;
END $$;

COMMENT ON FUNCTION snowflake_mesh_digest(regclass) IS
'a mesh table''s rows, counted and summed whole (md5 of every row as text, in order), read as its owner';

REVOKE ALL ON FUNCTION snowflake_mesh_digest(regclass) FROM PUBLIC;

-- the mesh's publication: made with the tables named and
-- snowflake_workers, or the tables named added to it; inserts, updates
-- and deletes, not TRUNCATE (a TRUNCATE racing others' writes would leave
-- each node a different remainder)
CREATE FUNCTION snowflake_mesh_publish(tables text[], publication name DEFAULT 'snowflake_mesh')
RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	list text;
BEGIN
	PERFORM @extschema@.snowflake_mesh_node(publication);
	SELECT string_agg(@extschema@.snowflake_mesh_table(t)::text, ', ') INTO list FROM unnest(tables) t;
	IF NOT EXISTS (SELECT FROM pg_publication p WHERE p.pubname = publication) THEN
		EXECUTE format('CREATE PUBLICATION %I FOR TABLE %s WITH (publish = %L)', publication,
					   concat_ws(', ', list, '@extschema@.snowflake_workers'), 'insert, update, delete');
	ELSIF list IS NOT NULL THEN
		EXECUTE format('ALTER PUBLICATION %I ADD TABLE %s', publication, list);
	END IF;
END $$;

COMMENT ON FUNCTION snowflake_mesh_publish(text[], name) IS
'makes the mesh''s publication of the tables named and snowflake_workers, or adds the tables to it';

REVOKE ALL ON FUNCTION snowflake_mesh_publish(text[], name) FROM PUBLIC;

CREATE FUNCTION snowflake_mesh_unpublish(tables text[], publication name DEFAULT 'snowflake_mesh')
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM @extschema@.snowflake_mesh_node(publication);
	IF tables IS NULL THEN
		EXECUTE format('DROP PUBLICATION IF EXISTS %I', publication);
	ELSE
		EXECUTE format('ALTER PUBLICATION %I DROP TABLE %s', publication,
					   (SELECT string_agg(@extschema@.snowflake_mesh_table(t)::text, ', ') FROM unnest(tables) t));
	END IF;
END $$;

COMMENT ON FUNCTION snowflake_mesh_unpublish(text[], name) IS
'drops the tables named from the mesh''s publication, or the publication when tables is NULL';

REVOKE ALL ON FUNCTION snowflake_mesh_unpublish(text[], name) FROM PUBLIC;

--
-- A table joins the mesh held: its writers wait while every publication
-- and every subscription takes it, so that no row is written where a
-- subscription would skip it.  The hold is this session's advisory lock;
-- a writer takes it shared in a trigger that logical replication's apply
-- does not fire.
--
CREATE FUNCTION snowflake_mesh_held()
RETURNS trigger
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM pg_advisory_xact_lock_shared(1397640532, (TG_RELID::bigint - 2147483648)::integer);
	RETURN CASE TG_OP WHEN 'DELETE' THEN OLD ELSE NEW END;
END $$;

COMMENT ON FUNCTION snowflake_mesh_held() IS
'trigger: a write to a table being added to the mesh waits until every node has it in the mesh';

REVOKE ALL ON FUNCTION snowflake_mesh_held() FROM PUBLIC;

CREATE FUNCTION snowflake_mesh_hold(tbl regclass)
RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	key integer := (tbl::oid::bigint - 2147483648)::integer;
BEGIN
	PERFORM @extschema@.snowflake_mesh_reader(tbl);
	IF NOT pg_try_advisory_lock(1397640532, key) THEN
		RAISE EXCEPTION 'table % is held by another session', tbl
			USING ERRCODE = 'lock_not_available',
				  DETAIL = format('Its hold is taken by %s.',
								  coalesce(@extschema@.snowflake_mesh_holders(1397640532, key), 'a session that just ended'));
	END IF;
	-- a trigger of that name that is not ours would leave writes unheld
	IF EXISTS (SELECT FROM pg_trigger t WHERE t.tgrelid = tbl AND t.tgname = 'snowflake_mesh_hold'
			   AND t.tgfoid <> '@extschema@.snowflake_mesh_held()'::regprocedure) THEN
		PERFORM pg_advisory_unlock(1397640532, key);
		RAISE EXCEPTION 'table % has a trigger named "snowflake_mesh_hold" of its own', tbl
			USING ERRCODE = 'duplicate_object',
				  HINT = 'Rename that trigger on this node.';
	END IF;
	IF NOT EXISTS (SELECT FROM pg_trigger t WHERE t.tgrelid = tbl AND t.tgname = 'snowflake_mesh_hold') THEN
		EXECUTE format('CREATE TRIGGER snowflake_mesh_hold BEFORE INSERT OR UPDATE OR DELETE ON %s '
					   'FOR EACH ROW EXECUTE FUNCTION @extschema@.snowflake_mesh_held()', tbl);
	END IF;
END $$;

COMMENT ON FUNCTION snowflake_mesh_hold(regclass) IS
'makes writes to the table wait until snowflake_mesh_release() in this session';

REVOKE ALL ON FUNCTION snowflake_mesh_hold(regclass) FROM PUBLIC;

CREATE FUNCTION snowflake_mesh_release(tbl regclass)
RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	-- the writers waiting go on first; the trigger's drop waits for them
	PERFORM pg_advisory_unlock(1397640532, (tbl::oid::bigint - 2147483648)::integer);
	IF EXISTS (SELECT FROM pg_trigger t WHERE t.tgrelid = tbl AND t.tgname = 'snowflake_mesh_hold'
			   AND t.tgfoid = '@extschema@.snowflake_mesh_held()'::regprocedure) THEN
		EXECUTE format('DROP TRIGGER snowflake_mesh_hold ON %s', tbl);
	END IF;
END $$;

COMMENT ON FUNCTION snowflake_mesh_release(regclass) IS
'lets the writes that snowflake_mesh_hold() made wait go on';

REVOKE ALL ON FUNCTION snowflake_mesh_release(regclass) FROM PUBLIC;

--
-- Slots and subscriptions.  A subscription is made without a slot, on
-- one made beforehand on its publisher: the start of a stream is a
-- position the caller knows, and neither command is refused inside a
-- transaction, as CREATE and DROP SUBSCRIPTION with a slot are.
--
CREATE FUNCTION snowflake_mesh_create_slot(for_worker integer, failover boolean,
										   publication name DEFAULT 'snowflake_mesh')
RETURNS pg_lsn
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	slot name := format('%s_w%s_to_w%s', publication, @extschema@.snowflake_mesh_node(publication), for_worker);
	pos pg_lsn;
BEGIN
	IF for_worker < 0 THEN
		RAISE EXCEPTION 'worker id % is out of range', for_worker USING ERRCODE = 'invalid_parameter_value';
	END IF;
	-- failover slots (17 and later) are synchronized to a standby that
	-- keeps them, so that the mesh follows this node there
	IF failover AND current_setting('server_version_num')::integer >= 170000 THEN
		EXECUTE 'SELECT lsn FROM pg_create_logical_replication_slot($1, ''pgoutput'', false, false, true)'
		INTO pos USING slot;
	ELSE
		SELECT s.lsn INTO pos FROM pg_create_logical_replication_slot(slot, 'pgoutput') s;
	END IF;
	RETURN pos;
END $$;

COMMENT ON FUNCTION snowflake_mesh_create_slot(integer, boolean, name) IS
'makes the slot on this node that feeds for_worker, and returns where its stream starts';

REVOKE ALL ON FUNCTION snowflake_mesh_create_slot(integer, boolean, name) FROM PUBLIC;

CREATE FUNCTION snowflake_mesh_drop_slot(for_worker integer, timeout interval DEFAULT '60 s',
										 publication name DEFAULT 'snowflake_mesh')
RETURNS boolean
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	slot name := format('%s_w%s_to_w%s', publication, @extschema@.snowflake_mesh_node(publication), for_worker);
	deadline timestamptz := clock_timestamp() + timeout;
	busy boolean;
BEGIN
	-- a walsender lingers a moment after its subscription is gone
	LOOP
		SELECT s.active INTO busy FROM pg_replication_slots s WHERE s.slot_name = slot;
		IF busy IS NULL THEN
			RETURN false;
		END IF;
		EXIT WHEN NOT busy OR clock_timestamp() > deadline;
		PERFORM pg_sleep(0.1);
	END LOOP;
	PERFORM pg_drop_replication_slot(slot);
	RETURN true;
END $$;

COMMENT ON FUNCTION snowflake_mesh_drop_slot(integer, interval, name) IS
'drops the slot on this node that feeds for_worker, once no walsender uses it; false if there is none';

REVOKE ALL ON FUNCTION snowflake_mesh_drop_slot(integer, interval, name) FROM PUBLIC;

CREATE FUNCTION snowflake_mesh_subscribe(from_worker integer, conninfo text, copy_data boolean,
										 enabled boolean, failover boolean,
										 publication name DEFAULT 'snowflake_mesh')
RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	me integer := @extschema@.snowflake_mesh_node(publication);
	options text;
BEGIN
	IF from_worker < 0 THEN
		RAISE EXCEPTION 'worker id % is out of range', from_worker USING ERRCODE = 'invalid_parameter_value';
	END IF;
	-- origin = none: each row travels once, from the node that wrote it
	options := format('slot_name = %L, create_slot = false, origin = none, copy_data = %s, enabled = %s',
					  format('%s_w%s_to_w%s', publication, from_worker, me), copy_data::text, enabled::text);
	IF failover AND current_setting('server_version_num')::integer >= 170000 THEN
		options := options || ', failover = true';
	END IF;
	-- a node with a synchronous standby confirms only rows its standby
	-- has, so that the standby, promoted, misses none of them
	IF current_setting('synchronous_standby_names') <> '' THEN
		options := options || ', synchronous_commit = on';
	END IF;
	EXECUTE format('CREATE SUBSCRIPTION %I CONNECTION %L PUBLICATION %I WITH (%s)',
				   format('%s_from_w%s', publication, from_worker), conninfo, publication, options);
END $$;

COMMENT ON FUNCTION snowflake_mesh_subscribe(integer, text, boolean, boolean, boolean, name) IS
'subscribes this node to from_worker''s rows, on the slot snowflake_mesh_create_slot() made there';

REVOKE ALL ON FUNCTION snowflake_mesh_subscribe(integer, text, boolean, boolean, boolean, name) FROM PUBLIC;

CREATE FUNCTION snowflake_mesh_unsubscribe(from_worker integer, publication name DEFAULT 'snowflake_mesh')
RETURNS name
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	sub name := format('%s_from_w%s', publication, from_worker);
	slot name;
BEGIN
	PERFORM @extschema@.snowflake_mesh_node(publication);
	SELECT s.subslotname INTO slot FROM pg_subscription s
	WHERE s.subname = sub AND s.subdbid = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database());
	IF NOT FOUND THEN
		RETURN NULL;
	END IF;
	EXECUTE format('ALTER SUBSCRIPTION %I DISABLE', sub);
	EXECUTE format('ALTER SUBSCRIPTION %I SET (slot_name = NONE)', sub);
	EXECUTE format('DROP SUBSCRIPTION %I', sub);
	RETURN slot;
END $$;

COMMENT ON FUNCTION snowflake_mesh_unsubscribe(integer, name) IS
'drops this node''s subscription to from_worker and returns the name of its slot there, to be dropped there';

REVOKE ALL ON FUNCTION snowflake_mesh_unsubscribe(integer, name) FROM PUBLIC;

-- starts or stops a subscription; with conninfo, it follows another
-- server (a member's promoted standby)
CREATE FUNCTION snowflake_mesh_enable(from_worker integer, enabled boolean, conninfo text DEFAULT NULL,
									  publication name DEFAULT 'snowflake_mesh')
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	sub name := format('%s_from_w%s', publication, from_worker);
BEGIN
	PERFORM @extschema@.snowflake_mesh_node(publication);
	IF from_worker IS NULL OR enabled IS NULL THEN
		RAISE EXCEPTION 'from_worker and enabled must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF conninfo IS NOT NULL THEN
		EXECUTE format('ALTER SUBSCRIPTION %I DISABLE', sub);
		EXECUTE format('ALTER SUBSCRIPTION %I CONNECTION %L', sub, conninfo);
	END IF;
	EXECUTE format('ALTER SUBSCRIPTION %I %s', sub, CASE WHEN enabled THEN 'ENABLE' ELSE 'DISABLE' END);
END $$;

COMMENT ON FUNCTION snowflake_mesh_enable(integer, boolean, text, name) IS
'starts or stops this node''s subscription to from_worker, pointed at conninfo when given';

REVOKE ALL ON FUNCTION snowflake_mesh_enable(integer, boolean, text, name) FROM PUBLIC;

-- where this node's subscription to from_worker stands (its replication
-- origin), or, with advance_to, moved there
CREATE FUNCTION snowflake_mesh_origin(from_worker integer, advance_to pg_lsn DEFAULT NULL,
									  publication name DEFAULT 'snowflake_mesh')
RETURNS pg_lsn
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	origin text;
BEGIN
	PERFORM @extschema@.snowflake_mesh_node(publication);
	SELECT 'pg_' || s.oid INTO origin FROM pg_subscription s
	WHERE s.subname = format('%s_from_w%s', publication, from_worker)
	  AND s.subdbid = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database());
	IF origin IS NULL THEN
		RAISE EXCEPTION 'subscription "%" does not exist', format('%s_from_w%s', publication, from_worker)
			USING ERRCODE = 'undefined_object';
	END IF;
	IF advance_to IS NOT NULL THEN
		PERFORM pg_replication_origin_advance(origin, advance_to);
	END IF;
	RETURN pg_replication_origin_progress(origin, false);
END $$;

COMMENT ON FUNCTION snowflake_mesh_origin(integer, pg_lsn, name) IS
'the position this node''s subscription to from_worker has applied up to, after moving it to advance_to if given';

REVOKE ALL ON FUNCTION snowflake_mesh_origin(integer, pg_lsn, name) FROM PUBLIC;

--
-- Waiting.  Each waits at most timeout, checking every 100 ms, and reads
-- the catalogs and the statistics afresh each time, which takes READ
-- COMMITTED.
--
CREATE FUNCTION snowflake_mesh_wait_stopped(from_worker integer, timeout interval DEFAULT '300 s',
											publication name DEFAULT 'snowflake_mesh')
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	deadline timestamptz := clock_timestamp() + timeout;
BEGIN
	PERFORM @extschema@.snowflake_mesh_node(publication);
	WHILE EXISTS (SELECT FROM pg_stat_subscription st JOIN pg_subscription s ON s.oid = st.subid
				  WHERE st.pid IS NOT NULL
					AND s.subdbid = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
					AND CASE WHEN from_worker IS NULL
							 THEN starts_with(s.subname::text, publication || '_from_w')
							 ELSE s.subname = format('%s_from_w%s', publication, from_worker) END) LOOP
		IF clock_timestamp() > deadline THEN
			RAISE EXCEPTION 'gave up after % waiting for the workers of the subscriptions to stop', timeout
				USING ERRCODE = 'query_canceled';
		END IF;
		PERFORM pg_sleep(0.1);
	END LOOP;
END $$;

COMMENT ON FUNCTION snowflake_mesh_wait_stopped(integer, interval, name) IS
'waits until no worker runs for this node''s subscription to from_worker (every mesh subscription when NULL)';

REVOKE ALL ON FUNCTION snowflake_mesh_wait_stopped(integer, interval, name) FROM PUBLIC;

CREATE FUNCTION snowflake_mesh_wait_copied(from_worker integer, timeout interval DEFAULT '300 s',
										   publication name DEFAULT 'snowflake_mesh')
RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	sub name := format('%s_from_w%s', publication, from_worker);
	deadline timestamptz := clock_timestamp() + timeout;
	errors bigint;
BEGIN
	PERFORM @extschema@.snowflake_mesh_node(publication);
	IF current_setting('transaction_isolation') <> 'read committed' THEN
		RAISE EXCEPTION 'snowflake_mesh_wait_copied() waits only at isolation level READ COMMITTED'
			USING ERRCODE = 'invalid_transaction_state';
	END IF;
	IF NOT EXISTS (SELECT FROM pg_subscription s
				   WHERE s.subname = sub AND s.subdbid = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())) THEN
		RAISE EXCEPTION 'subscription "%" does not exist', sub USING ERRCODE = 'undefined_object';
	END IF;
	LOOP
		PERFORM pg_stat_clear_snapshot();
		-- a copy that fails is tried again and again: it does not heal by
		-- waiting (16-18 count sync_error_count, 19 its table and sequence
		-- parts)
		SELECT coalesce(sum(e.value::bigint), 0) INTO errors
		FROM pg_stat_subscription_stats ss, jsonb_each_text(to_jsonb(ss)) e
		WHERE ss.subname = sub AND e.key LIKE '%error_count';
		IF errors > 0 THEN
			RAISE EXCEPTION 'the copy of subscription "%" failed', sub
				USING ERRCODE = 'object_not_in_prerequisite_state',
					  HINT = 'This node''s server log says why (a table that differs, a key that conflicts).';
		END IF;
		EXIT WHEN NOT EXISTS (SELECT FROM pg_subscription_rel r JOIN pg_subscription s ON s.oid = r.srsubid
							  WHERE s.subname = sub AND r.srsubstate <> 'r'
								AND s.subdbid = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database()));
		IF clock_timestamp() > deadline THEN
			RAISE EXCEPTION 'gave up after % waiting for the copy of subscription "%"', timeout, sub
				USING ERRCODE = 'query_canceled',
					  HINT = 'See pg_subscription_rel, pg_stat_subscription and the server log.';
		END IF;
		PERFORM pg_sleep(0.1);
	END LOOP;
END $$;

COMMENT ON FUNCTION snowflake_mesh_wait_copied(integer, interval, name) IS
'waits until every table of this node''s subscription to from_worker is copied and taken over by its apply worker (state r)';

REVOKE ALL ON FUNCTION snowflake_mesh_wait_copied(integer, interval, name) FROM PUBLIC;

CREATE FUNCTION snowflake_mesh_wait_received(for_worker integer, upto pg_lsn, timeout interval DEFAULT '300 s',
											 publication name DEFAULT 'snowflake_mesh')
RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	slot name := format('%s_w%s_to_w%s', publication, @extschema@.snowflake_mesh_node(publication), for_worker);
	deadline timestamptz := clock_timestamp() + timeout;
	s record;
BEGIN
	IF current_setting('transaction_isolation') <> 'read committed' THEN
		RAISE EXCEPTION 'snowflake_mesh_wait_received() waits only at isolation level READ COMMITTED'
			USING ERRCODE = 'invalid_transaction_state';
	END IF;
	LOOP
		SELECT r.confirmed_flush_lsn AS confirmed, r.wal_status INTO s
		FROM pg_replication_slots r WHERE r.slot_name = slot;
		IF NOT FOUND THEN
			RAISE EXCEPTION 'replication slot "%" does not exist', slot USING ERRCODE = 'undefined_object';
		END IF;
		IF s.wal_status = 'lost' THEN
			RAISE EXCEPTION 'replication slot "%" is invalidated', slot
				USING ERRCODE = 'object_not_in_prerequisite_state',
					  HINT = 'Its subscriber can no longer receive this node''s rows: it must leave the mesh and join again.';
		END IF;
		EXIT WHEN s.confirmed >= upto;
		IF clock_timestamp() > deadline THEN
			RAISE EXCEPTION 'gave up after % waiting for worker % to receive this node''s changes up to %', timeout, for_worker, upto
				USING ERRCODE = 'query_canceled',
					  HINT = 'See pg_stat_subscription there and both server logs; a subscriber reports its progress every wal_receiver_status_interval.';
		END IF;
		PERFORM pg_sleep(0.1);
	END LOOP;
END $$;

COMMENT ON FUNCTION snowflake_mesh_wait_received(integer, pg_lsn, interval, name) IS
'waits until for_worker has confirmed this node''s changes up to upto';

REVOKE ALL ON FUNCTION snowflake_mesh_wait_received(integer, pg_lsn, interval, name) FROM PUBLIC;

-- the changes this node's mesh subscriptions skipped because the row was
-- not there (update_missing, delete_missing); NULL before 18, which does
-- not count them.  Counters of a running worker reach the statistics
-- within about a second; a stopped worker has flushed its own.
CREATE FUNCTION snowflake_mesh_missing(publication name DEFAULT 'snowflake_mesh')
RETURNS bigint
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	missed bigint;
BEGIN
	PERFORM @extschema@.snowflake_mesh_node(publication);
	IF current_setting('server_version_num')::integer < 180000 THEN
		RETURN NULL;
	END IF;
	PERFORM pg_stat_clear_snapshot();
	SELECT coalesce(sum(e.value::bigint), 0) INTO missed
	FROM pg_stat_subscription_stats ss JOIN pg_subscription s ON s.oid = ss.subid,
		 jsonb_each_text(to_jsonb(ss)) e
	WHERE s.subdbid = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
	  AND starts_with(s.subname::text, publication || '_from_w')
	  AND e.key IN ('confl_update_missing', 'confl_delete_missing');
	RETURN missed;
END $$;

COMMENT ON FUNCTION snowflake_mesh_missing(name) IS
'update_missing and delete_missing conflicts of this node''s mesh subscriptions (18 and later; NULL before)';

REVOKE ALL ON FUNCTION snowflake_mesh_missing(name) FROM PUBLIC;

--
-- The node's state, as snowflake-mesh status reports it: one row per
-- subscription, slot, published table, subscribed table, claim, change
-- of the mesh and leftover hold, and one row per fault found here, with
-- its class: lost (changes skipped, a slot that can no longer feed its
-- subscriber), failing (replication stopped or erring) or shape (the
-- mesh's objects or records are not as a mesh's are).  What only a
-- comparison across the nodes shows, and how far behind a subscriber is,
-- the helper finds.
--
CREATE FUNCTION snowflake_mesh_state(publication name DEFAULT 'snowflake_mesh')
RETURNS TABLE (kind text, name text, detail text, class text)
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	me integer;
	refusal text;
	db oid := (SELECT d.oid FROM pg_database d WHERE d.datname = current_database());
	r record;
	c @extschema@.snowflake_mesh_changes;
BEGIN
	me := @extschema@.snowflake_mesh_node(publication);
	BEGIN
		PERFORM @extschema@.snowflake_worker_id();
	EXCEPTION WHEN object_not_in_prerequisite_state THEN
		GET STACKED DIAGNOSTICS refusal = MESSAGE_TEXT;
		RETURN QUERY SELECT 'fault', 'node', 'refuses to generate IDs: ' || refusal, 'shape';
	END;
	PERFORM pg_stat_clear_snapshot();
	FOR r IN
		SELECT s.oid, s.subname, s.subenabled,
			   EXISTS (SELECT FROM pg_stat_subscription st
					   WHERE st.subid = s.oid AND st.relid IS NULL AND st.pid IS NOT NULL) AS running,
			   (SELECT count(*) FROM pg_subscription_rel sr WHERE sr.srsubid = s.oid AND sr.srsubstate <> 'r') AS syncing,
			   (SELECT st.latest_end_lsn FROM pg_stat_subscription st
				WHERE st.subid = s.oid AND st.relid IS NULL) AS received,
			   coalesce(x.apply_errors, 0) AS apply_errors, coalesce(x.sync_errors, 0) AS sync_errors,
			   x.missing, x.differs
		FROM pg_subscription s
		LEFT JOIN (SELECT ss.subid,
						  sum(e.value::bigint) FILTER (WHERE e.key = 'apply_error_count') AS apply_errors,
						  sum(e.value::bigint) FILTER (WHERE e.key LIKE 'sync%error_count') AS sync_errors,
						  sum(e.value::bigint) FILTER (WHERE e.key IN ('confl_update_missing', 'confl_delete_missing')) AS missing,
						  sum(e.value::bigint) FILTER (WHERE e.key LIKE 'confl_%' AND e.key NOT IN ('confl_update_missing', 'confl_delete_missing')) AS differs
				   FROM pg_stat_subscription_stats ss, jsonb_each_text(to_jsonb(ss)) e
				   GROUP BY ss.subid) x ON x.subid = s.oid
		WHERE s.subdbid = db AND starts_with(s.subname::text, publication || '_from_w')
		ORDER BY s.subname
	LOOP
		RETURN QUERY SELECT 'subscription', r.subname::text,
			format('%s, %s, %s apply errors, %s sync errors, %s, %s tables not ready, received up to %s',
				   CASE WHEN r.subenabled THEN 'enabled' ELSE 'disabled' END,
				   CASE WHEN r.running THEN 'running' ELSE 'not running' END,
				   r.apply_errors, r.sync_errors,
				   CASE WHEN r.missing IS NULL THEN 'changes skipped not counted'
						ELSE format('%s changes skipped', r.missing) END,
				   r.syncing, coalesce(r.received::text, '-')), NULL::text;
		IF NOT r.subenabled THEN
			RETURN QUERY SELECT 'fault', r.subname::text, 'is disabled', 'failing';
		ELSIF NOT r.running THEN
			RETURN QUERY SELECT 'fault', r.subname::text, 'is not running', 'failing';
		END IF;
		IF r.apply_errors > 0 THEN
			RETURN QUERY SELECT 'fault', r.subname::text, format('had %s apply errors', r.apply_errors), 'failing';
		END IF;
		IF r.sync_errors > 0 THEN
			RETURN QUERY SELECT 'fault', r.subname::text, format('had %s table synchronization errors', r.sync_errors), 'failing';
		END IF;
		IF r.syncing > 0 THEN
			RETURN QUERY SELECT 'fault', r.subname::text, format('has %s tables not yet synchronized', r.syncing), 'failing';
		END IF;
		IF r.missing > 0 THEN
			RETURN QUERY SELECT 'fault', r.subname::text,
				format('skipped %s changes to rows it did not have (update_missing, delete_missing): the nodes differ', r.missing), 'lost';
		END IF;
		-- 18 counts every change to a row another node changed last
		-- (*_origin_differs), at once or not: a hint, not a fault
		IF r.differs > 0 THEN
			RETURN QUERY SELECT 'hint', r.subname::text,
				format('met %s conflicts: changes to rows another node had changed last; if two nodes changed one row at once, they may differ (compare with --rows)', r.differs), NULL::text;
		END IF;
		RETURN QUERY SELECT 'subscribed', r.subname::text, format('%I.%I', n.nspname, cl.relname), NULL::text
			FROM pg_subscription_rel sr JOIN pg_class cl ON cl.oid = sr.srrelid
			JOIN pg_namespace n ON n.oid = cl.relnamespace
			WHERE sr.srsubid = r.oid ORDER BY 3;
	END LOOP;

	FOR r IN
		SELECT s.slot_name, s.active,
			   coalesce(s.wal_status, '') = 'lost' OR coalesce(to_jsonb(s) ->> 'invalidation_reason', '') <> '' AS invalidated,
			   pg_wal_lsn_diff(pg_current_wal_lsn(), s.confirmed_flush_lsn)::bigint AS behind
		FROM pg_replication_slots s
		WHERE s.datoid = db AND s.slot_name ~ ('^' || publication || '_w' || me || '_to_w[0-9]+$')
		ORDER BY s.slot_name
	LOOP
		RETURN QUERY SELECT 'slot', r.slot_name::text,
			format('%s, %s, %s bytes behind', CASE WHEN r.active THEN 'active' ELSE 'inactive' END,
				   CASE WHEN r.invalidated THEN 'invalidated' ELSE 'valid' END, r.behind),
			NULL::text;
		IF r.invalidated THEN
			RETURN QUERY SELECT 'fault', 'slot ' || r.slot_name,
				'is invalidated: its subscriber can no longer get the rows; that node must leave and join again', 'lost';
		ELSIF NOT r.active THEN
			RETURN QUERY SELECT 'fault', 'slot ' || r.slot_name, 'is inactive', 'failing';
		END IF;
	END LOOP;

	IF NOT EXISTS (SELECT FROM pg_publication p WHERE p.pubname = publication) THEN
		RETURN QUERY SELECT 'fault', 'publication ' || publication, 'is missing', 'shape';
	END IF;
	RETURN QUERY SELECT 'fault', 'publication ' || p.pubname, 'is owned by a role that is not a superuser', 'shape'
		FROM pg_publication p JOIN pg_roles o ON o.oid = p.pubowner
		WHERE p.pubname = publication AND NOT o.rolsuper;
	RETURN QUERY SELECT 'hint', 'publication ' || p.pubname,
		format('publishes TRUNCATE; ALTER PUBLICATION %I SET (publish = ''insert, update, delete'')', p.pubname), NULL::text
		FROM pg_publication p WHERE p.pubname = publication AND p.pubtruncate;
	-- from the catalogs, not pg_publication_tables, which locks each
	-- table: a table locked by a session must not stop status
	RETURN QUERY SELECT 'published', publication::text, format('%I.%I', n.nspname, t.relname), NULL::text
		FROM pg_publication p JOIN pg_class t ON t.relkind IN ('r', 'p')
		JOIN pg_namespace n ON n.oid = t.relnamespace
		WHERE p.pubname = publication
		  AND (p.puballtables AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname !~ '^pg_toast'
			   OR EXISTS (SELECT FROM pg_publication_rel pr WHERE pr.prpubid = p.oid AND pr.prrelid = t.oid)
			   OR EXISTS (SELECT FROM pg_publication_namespace pn WHERE pn.pnpubid = p.oid AND pn.pnnspid = n.oid))
		ORDER BY 3;
	RETURN QUERY SELECT 'claim', w.worker_id::text, w.system_identifier::text, NULL::text
		FROM @extschema@.snowflake_workers w ORDER BY w.worker_id;

	SELECT * INTO c FROM @extschema@.snowflake_mesh_changes x WHERE x.publication = snowflake_mesh_state.publication;
	IF FOUND THEN
		RETURN QUERY SELECT 'change', c.run, c.change, NULL::text;
		IF @extschema@.snowflake_mesh_holders(1397640531, hashtext(publication)) IS NULL THEN
			RETURN QUERY SELECT 'fault', 'change', format('%s, run %s, since %s, was not finished', c.change, c.run, c.since), 'shape';
		ELSE
			RETURN QUERY SELECT 'fault', 'change', format('%s, run %s, since %s, is under way', c.change, c.run, c.since), 'shape';
		END IF;
	END IF;
	RETURN QUERY SELECT 'fault', 'table ' || tg.tgrelid::regclass::text,
		'is held by an add-table that did not finish: its writes wait while a session holds the hold, or pay for a trigger', 'shape'
		FROM pg_trigger tg
		WHERE tg.tgname = 'snowflake_mesh_hold' AND tg.tgparentid = 0
		  AND tg.tgfoid = '@extschema@.snowflake_mesh_held()'::regprocedure;
	IF NOT current_setting('track_commit_timestamp')::boolean THEN
		RETURN QUERY SELECT 'hint', 'track_commit_timestamp', 'is off: a row updated on two nodes at once is not detected', NULL::text;
	END IF;
END $$;

COMMENT ON FUNCTION snowflake_mesh_state(name) IS
'this node''s part of the mesh: subscriptions, slots, tables, claims, changes, and the faults found here';

REVOKE ALL ON FUNCTION snowflake_mesh_state(name) FROM PUBLIC;
-- @end mesh

-- @begin schema_check
--
-- Last, the schema the extension ended up in, by OID: it was checked by
-- name at the start, but another role might have made or swapped it since
-- (a schema made between two statements, a rename and back).  Only
-- superusers may own it or create in it, and it holds nothing that is not
-- the extension's own.
--
DO $$
DECLARE
	ext oid;
	nsp oid;
	bad text;
	foreign_objects text;
BEGIN
	PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
	SELECT e.oid, e.extnamespace INTO ext, nsp FROM pg_extension e WHERE e.extname = 'snowflake';
	SELECT string_agg(format('%s %s', CASE WHEN e.grantee = 0 THEN 'PUBLIC'
											ELSE quote_ident(r.rolname) END,
							 CASE WHEN e.privilege_type IS NULL THEN 'owns it'
								  ELSE 'may create in it' END), ', ')
	INTO bad
	FROM pg_namespace n
		 CROSS JOIN LATERAL (SELECT n.nspowner AS grantee, NULL::text AS privilege_type
							 UNION ALL
							 SELECT a.grantee, a.privilege_type FROM aclexplode(n.nspacl) a
							 WHERE a.privilege_type = 'CREATE') e
		 LEFT JOIN pg_roles r ON r.oid = e.grantee
	WHERE n.oid = nsp AND NOT coalesce(r.rolsuper, false);
	SELECT string_agg(pg_describe_object(d.classid, d.objid, d.objsubid), ', ')
	INTO foreign_objects
	FROM pg_depend d
	WHERE d.refclassid = 'pg_namespace'::regclass AND d.refobjid = nsp
	  AND NOT (d.classid = 'pg_extension'::regclass AND d.objid = ext)
	  AND NOT EXISTS (SELECT FROM pg_depend m
					  WHERE m.classid = d.classid AND m.objid = d.objid
						AND m.refclassid = 'pg_extension'::regclass AND m.refobjid = ext
						AND m.deptype = 'e');
	IF bad IS NOT NULL OR foreign_objects IS NOT NULL THEN
		RAISE EXCEPTION 'schema % is not safe for the extension snowflake', nsp::regnamespace
			USING ERRCODE = 'insufficient_privilege',
				  DETAIL = CASE WHEN bad IS NOT NULL
							   THEN format('Only superusers may own or create in it, but %s.', bad)
							   ELSE format('It holds objects that are not the extension''s: %s.', foreign_objects) END,
				  HINT = 'Drop or rename that schema (or move those objects out of it), then run the command again as a superuser; CREATE EXTENSION makes the schema itself.';
	END IF;
END $$;
-- @end schema_check
