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
	OUT started_at timestamptz, OUT worker_id_source text)
RETURNS record
AS 'MODULE_PATHNAME', 'snowflake_status'
LANGUAGE C VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION snowflake_status() IS
'state and counters of this node''s generator since the server started';
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

-- @begin text_forms
--
-- IDs as text (text.c), for APIs and browsers that cannot hold a 64-bit
-- number.  Base32 (Crockford's digits, 13 of them, written in lower case,
-- read in either case) and base62 (11 digits, 0-9A-Za-z): numbers of fixed
-- width that sort as the IDs do byte-wise (COLLATE "C"; many languages'
-- collations do not keep that order), both ways, with an optional type prefix
-- ('' for none).  The variants without a layout take every ID of every
-- layout, 1 to 2^63-1; those that name one refuse what it cannot hold.
-- Nothing but their arguments decides their answer: IMMUTABLE, fit for
-- generated columns and indexes.
--
CREATE FUNCTION snowflake_base32(id bigint)
RETURNS text
AS 'MODULE_PATHNAME', 'snowflake_base32'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION snowflake_base32(bigint) IS
'an ID as 13 Crockford base32 digits, lower case, sorting as the IDs do under COLLATE "C"';

CREATE FUNCTION snowflake_base32(id bigint, prefix text)
RETURNS text
AS 'MODULE_PATHNAME', 'snowflake_base32'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION snowflake_base32(bigint, text) IS
'an ID as prefix_ and 13 Crockford base32 digits (a prefix of lower-case letters and underscores, as TypeID has it; '''' for none)';

CREATE FUNCTION snowflake_base32(id bigint, prefix text, layout text)
RETURNS text
AS 'MODULE_PATHNAME', 'snowflake_base32'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION snowflake_base32(bigint, text, text) IS
'an ID of the named layout as prefix_ and 13 Crockford base32 digits; an ID beyond the layout is refused';

CREATE FUNCTION snowflake_from_base32(id_text text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'snowflake_from_base32'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION snowflake_from_base32(text) IS
'the ID that 13 Crockford base32 digits without a prefix stand for (either case; I and L read as 1, O as 0)';

CREATE FUNCTION snowflake_from_base32(id_text text, prefix text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'snowflake_from_base32'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION snowflake_from_base32(text, text) IS
'the ID of a base32 text form that has exactly that prefix ('''' for none)';

CREATE FUNCTION snowflake_from_base32(id_text text, prefix text, layout text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'snowflake_from_base32'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION snowflake_from_base32(text, text, text) IS
'the ID of a base32 text form with that prefix, refused beyond the named layout';

CREATE FUNCTION snowflake_base62(id bigint)
RETURNS text
AS 'MODULE_PATHNAME', 'snowflake_base62'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION snowflake_base62(bigint) IS
'an ID as 11 base62 digits (0-9A-Za-z), sorting as the IDs do under COLLATE "C"';

CREATE FUNCTION snowflake_base62(id bigint, prefix text)
RETURNS text
AS 'MODULE_PATHNAME', 'snowflake_base62'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION snowflake_base62(bigint, text) IS
'an ID as prefix_ and 11 base62 digits ('''' for no prefix)';

CREATE FUNCTION snowflake_base62(id bigint, prefix text, layout text)
RETURNS text
AS 'MODULE_PATHNAME', 'snowflake_base62'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION snowflake_base62(bigint, text, text) IS
'an ID of the named layout as prefix_ and 11 base62 digits; an ID beyond the layout is refused';

CREATE FUNCTION snowflake_from_base62(id_text text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'snowflake_from_base62'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION snowflake_from_base62(text) IS
'the ID that 11 base62 digits without a prefix stand for';

CREATE FUNCTION snowflake_from_base62(id_text text, prefix text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'snowflake_from_base62'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION snowflake_from_base62(text, text) IS
'the ID of a base62 text form that has exactly that prefix ('''' for none)';

CREATE FUNCTION snowflake_from_base62(id_text text, prefix text, layout text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'snowflake_from_base62'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION snowflake_from_base62(text, text, text) IS
'the ID of a base62 text form with that prefix, refused beyond the named layout';

-- The opaque form: the key is snowflake.opaque_key, a setting that a
-- reload changes, so these are STABLE, and fit no index or generated
-- column; a query reads a public ID back to its key instead.  PARALLEL
-- RESTRICTED: the key lives in each process, never in the setting's text,
-- which is all a parallel worker gets of the leader's settings.
CREATE FUNCTION snowflake_opaque(id bigint)
RETURNS text
AS 'MODULE_PATHNAME', 'snowflake_opaque'
LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;

COMMENT ON FUNCTION snowflake_opaque(bigint) IS
'an ID encrypted under snowflake.opaque_key, authenticated, as 26 base32 digits that show neither its time nor its order';

CREATE FUNCTION snowflake_opaque(id bigint, prefix text)
RETURNS text
AS 'MODULE_PATHNAME', 'snowflake_opaque'
LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;

COMMENT ON FUNCTION snowflake_opaque(bigint, text) IS
'an ID encrypted under snowflake.opaque_key and bound to the prefix, as prefix_ and 26 base32 digits';

CREATE FUNCTION snowflake_from_opaque(id_text text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'snowflake_from_opaque'
LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;

COMMENT ON FUNCTION snowflake_from_opaque(text) IS
'the ID of an opaque form made with this server''s key and no prefix; anything else is refused';

CREATE FUNCTION snowflake_from_opaque(id_text text, prefix text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'snowflake_from_opaque'
LANGUAGE C STABLE STRICT PARALLEL RESTRICTED;

COMMENT ON FUNCTION snowflake_from_opaque(text, text) IS
'the ID of an opaque form made with this server''s key and that prefix; anything else is refused';
-- @end text_forms

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
-- The mesh's objects on a node are those recorded in
-- snowflake_mesh_objects, by OID, and owned by a superuser: another
-- role's object under a mesh's name is not the mesh's (the mesh's own
-- then takes the name with a suffix, _1, _2 ...), and an object a
-- superuser made or made again by hand is named by status until it is
-- recorded.  Superuser only, as the commands they run are.
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

-- the mesh's objects on this node: its publication, each table the
-- helper put into it (by the row of pg_publication_rel, so that a table
-- taken out and put back by hand is told apart), and its subscriptions,
-- recorded by the system that made them (after pg_upgrade or on a copy
-- they are another system's and must be recorded again); and the worker
-- id the mesh gave this node (kind 'worker', the id in from_worker,
-- object 0), which status compares with snowflake.worker_id
CREATE TABLE snowflake_mesh_objects (
	publication name NOT NULL,
	kind text NOT NULL CHECK (kind IN ('publication', 'table', 'subscription', 'worker')),
	object oid NOT NULL,
	relation oid,
	from_worker integer,
	system_identifier bigint NOT NULL,
	PRIMARY KEY (publication, kind, object)
);

COMMENT ON TABLE snowflake_mesh_objects IS
'the mesh''s publication, published tables and subscriptions on this node, by OID, as the helper made them, and the worker id the mesh gave it';

-- only superusers write them, whatever privileges a role holds on the
-- tables (pg_write_all_data): a row there steers the mesh's lock, its
-- abort and what the helper takes for the mesh's objects
CREATE FUNCTION snowflake_mesh_guard()
RETURNS trigger
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user) THEN
		RAISE EXCEPTION 'permission denied for table %', TG_TABLE_NAME
			USING ERRCODE = 'insufficient_privilege',
				  DETAIL = 'Only superusers may change the mesh''s records.';
	END IF;
	RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
END $$;

COMMENT ON FUNCTION snowflake_mesh_guard() IS
'trigger: only a superuser inserts, updates, deletes or truncates rows of the mesh''s records';

REVOKE ALL ON FUNCTION snowflake_mesh_guard() FROM PUBLIC;

CREATE TRIGGER snowflake_mesh_guard BEFORE INSERT OR UPDATE OR DELETE ON snowflake_mesh_changes
FOR EACH ROW EXECUTE FUNCTION @extschema@.snowflake_mesh_guard();

CREATE TRIGGER snowflake_mesh_guard_truncate BEFORE TRUNCATE ON snowflake_mesh_changes
FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.snowflake_mesh_guard();

ALTER TABLE snowflake_mesh_changes ENABLE ALWAYS TRIGGER snowflake_mesh_guard;
ALTER TABLE snowflake_mesh_changes ENABLE ALWAYS TRIGGER snowflake_mesh_guard_truncate;

CREATE TRIGGER snowflake_mesh_guard BEFORE INSERT OR UPDATE OR DELETE ON snowflake_mesh_objects
FOR EACH ROW EXECUTE FUNCTION @extschema@.snowflake_mesh_guard();

CREATE TRIGGER snowflake_mesh_guard_truncate BEFORE TRUNCATE ON snowflake_mesh_objects
FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.snowflake_mesh_guard();

ALTER TABLE snowflake_mesh_objects ENABLE ALWAYS TRIGGER snowflake_mesh_guard;
ALTER TABLE snowflake_mesh_objects ENABLE ALWAYS TRIGGER snowflake_mesh_guard_truncate;

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

-- the mesh's publication on this node: the one recorded, while a
-- superuser owns it; NULL if there is none
CREATE FUNCTION snowflake_mesh_publication(publication name)
RETURNS name
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT p.pubname
	FROM @extschema@.snowflake_mesh_objects o
	JOIN pg_publication p ON p.oid = o.object
	JOIN pg_roles r ON r.oid = p.pubowner
	WHERE o.publication = snowflake_mesh_publication.publication AND o.kind = 'publication' AND r.rolsuper
	  AND o.system_identifier = (SELECT s.system_identifier FROM pg_control_system() s)
$$;

COMMENT ON FUNCTION snowflake_mesh_publication(name) IS
'internal: the name of this node''s publication of the mesh, as recorded and owned by a superuser';

REVOKE ALL ON FUNCTION snowflake_mesh_publication(name) FROM PUBLIC;

-- this node's subscription of the mesh to from_worker: the one recorded,
-- while a superuser owns it; NULL if there is none
CREATE FUNCTION snowflake_mesh_subscription(from_worker integer, publication name)
RETURNS name
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT s.subname
	FROM @extschema@.snowflake_mesh_objects o
	JOIN pg_subscription s ON s.oid = o.object
	JOIN pg_roles r ON r.oid = s.subowner
	WHERE o.publication = snowflake_mesh_subscription.publication AND o.kind = 'subscription'
	  AND o.from_worker = snowflake_mesh_subscription.from_worker AND r.rolsuper
	  AND o.system_identifier = (SELECT c.system_identifier FROM pg_control_system() c)
	  AND s.subdbid = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
$$;

COMMENT ON FUNCTION snowflake_mesh_subscription(integer, name) IS
'internal: the name of this node''s subscription of the mesh to from_worker, as recorded and owned by a superuser';

REVOKE ALL ON FUNCTION snowflake_mesh_subscription(integer, name) FROM PUBLIC;

-- the name of the mesh's subscription to from_worker, or of a mesh's
-- publication (from_worker NULL), that a new one takes: the plain name,
-- or with a suffix where another role's object has it.  A superuser's
-- object under the name that is not recorded is refused: it may be the
-- mesh's, made by hand or by an earlier helper.
CREATE FUNCTION snowflake_mesh_free_name(from_worker integer, publication name)
RETURNS name
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	base name := CASE WHEN from_worker IS NULL THEN publication
					  ELSE format('%s_from_w%s', publication, from_worker) END;
	candidate name;
	owner_super boolean;
BEGIN
	FOR i IN 0 .. 99 LOOP
		candidate := CASE WHEN i = 0 THEN base ELSE format('%s_%s', base, i) END;
		IF from_worker IS NULL THEN
			SELECT r.rolsuper INTO owner_super FROM pg_publication p JOIN pg_roles r ON r.oid = p.pubowner
			WHERE p.pubname = candidate;
		ELSE
			SELECT r.rolsuper INTO owner_super FROM pg_subscription s JOIN pg_roles r ON r.oid = s.subowner
			WHERE s.subname = candidate
			  AND s.subdbid = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database());
		END IF;
		IF NOT FOUND THEN
			RETURN candidate;
		END IF;
		IF owner_super AND i = 0 THEN
			RAISE EXCEPTION '% "%" exists but is not recorded as the mesh''s',
				CASE WHEN from_worker IS NULL THEN 'publication' ELSE 'subscription' END, candidate
				USING ERRCODE = 'duplicate_object',
					  DETAIL = 'A superuser made it by hand, or an earlier snowflake-mesh did.',
					  HINT = 'If it is this node''s part of the mesh, record it with SELECT snowflake.snowflake_mesh_record(); otherwise drop it.';
		END IF;
	END LOOP;
	RAISE EXCEPTION 'no free name for the mesh''s % "%"',
		CASE WHEN from_worker IS NULL THEN 'publication' ELSE 'subscription' END, base
		USING ERRCODE = 'duplicate_object',
			  DETAIL = 'Other roles hold that name with 99 suffixes.';
END $$;

COMMENT ON FUNCTION snowflake_mesh_free_name(integer, name) IS
'internal: the name a new publication or subscription of the mesh takes, beside other roles'' objects';

REVOKE ALL ON FUNCTION snowflake_mesh_free_name(integer, name) FROM PUBLIC;

-- records this node's part of a mesh made without records (by an earlier
-- snowflake-mesh), or after pg_upgrade or a copy, which give the objects
-- new OIDs: the superuser's publication of the mesh's name and its
-- tables, and the superuser's subscriptions named as the mesh's
CREATE FUNCTION snowflake_mesh_record(publication name DEFAULT 'snowflake_mesh')
RETURNS integer
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	sys bigint := (SELECT c.system_identifier FROM pg_control_system() c);
	pub oid;
	n integer;
BEGIN
	PERFORM @extschema@.snowflake_mesh_node(publication);
	DELETE FROM @extschema@.snowflake_mesh_objects o
	WHERE o.publication = snowflake_mesh_record.publication AND o.kind <> 'worker';
	SELECT p.oid INTO pub FROM pg_publication p JOIN pg_roles r ON r.oid = p.pubowner
	WHERE p.pubname = publication AND r.rolsuper;
	IF pub IS NOT NULL THEN
		INSERT INTO @extschema@.snowflake_mesh_objects VALUES (publication, 'publication', pub, NULL, NULL, sys);
		INSERT INTO @extschema@.snowflake_mesh_objects
		SELECT publication, 'table', pr.oid, pr.prrelid, NULL, sys
		FROM pg_publication_rel pr WHERE pr.prpubid = pub;
	END IF;
	INSERT INTO @extschema@.snowflake_mesh_objects
	SELECT publication, 'subscription', s.oid, NULL,
		   substring(s.subname FROM '^' || publication || '_from_w([0-9]+)$')::integer, sys
	FROM pg_subscription s JOIN pg_roles r ON r.oid = s.subowner
	WHERE r.rolsuper AND s.subname ~ ('^' || publication || '_from_w[0-9]+$')
	  AND s.subdbid = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database());
	SELECT count(*) INTO n FROM @extschema@.snowflake_mesh_objects o WHERE o.publication = snowflake_mesh_record.publication;
	RETURN n;
END $$;

COMMENT ON FUNCTION snowflake_mesh_record(name) IS
'records the superuser''s publication of the mesh, its tables and the subscriptions named as the mesh''s as this node''s part of it (a mesh made by an earlier helper, or after pg_upgrade); returns how many';

REVOKE ALL ON FUNCTION snowflake_mesh_record(name) FROM PUBLIC;

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

-- whether this node takes part in the mesh both ways: it subscribes, and
-- every node it subscribes to streams from a slot here.  A stream that
-- restarts is given 5 s to come back, so that a member is not taken for
-- a node outside the mesh.
CREATE FUNCTION snowflake_mesh_member(publication name DEFAULT 'snowflake_mesh')
RETURNS boolean
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	me integer := @extschema@.snowflake_mesh_node(publication);
	sys bigint := (SELECT c.system_identifier FROM pg_control_system() c);
	subs integer;
	streaming integer;
BEGIN
	FOR i IN 1 .. 50 LOOP
		SELECT count(*), count(*) FILTER (WHERE EXISTS (SELECT FROM pg_replication_slots r
														 WHERE r.slot_name = format('%s_w%s_to_w%s', snowflake_mesh_member.publication, me, o.from_worker)
														   AND r.active))
		INTO subs, streaming
		FROM @extschema@.snowflake_mesh_objects o JOIN pg_subscription s ON s.oid = o.object
		WHERE o.publication = snowflake_mesh_member.publication AND o.kind = 'subscription'
		  AND o.system_identifier = sys;
		-- (no subscription, or a slot missing for one: no stream comes back)
		IF subs = 0 OR streaming = subs
		   OR EXISTS (SELECT FROM @extschema@.snowflake_mesh_objects o
					  WHERE o.publication = snowflake_mesh_member.publication AND o.kind = 'subscription'
						AND o.system_identifier = sys
						AND NOT EXISTS (SELECT FROM pg_replication_slots r
										WHERE r.slot_name = format('%s_w%s_to_w%s', snowflake_mesh_member.publication, me, o.from_worker))) THEN
			EXIT;
		END IF;
		PERFORM pg_sleep(0.1);
	END LOOP;
	RETURN subs > 0 AND streaming = subs;
END $$;

COMMENT ON FUNCTION snowflake_mesh_member(name) IS
'internal: whether this node subscribes in the mesh and every node it subscribes to streams from a slot here';

REVOKE ALL ON FUNCTION snowflake_mesh_member(name) FROM PUBLIC;

CREATE FUNCTION snowflake_mesh_unlock(run text, publication name DEFAULT 'snowflake_mesh')
RETURNS text
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	key integer := hashtext(publication);
	mine boolean;
	member boolean;
	ended text;
	f record;
BEGIN
	PERFORM @extschema@.snowflake_mesh_node(publication);
	mine := @extschema@.snowflake_mesh_holding(1397640531, key);
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
		-- the holds a change left on its tables go
		FOR f IN SELECT DISTINCT tg.tgrelid::regclass AS tbl FROM pg_trigger tg
				 WHERE tg.tgname = 'snowflake_mesh_hold'
				   AND tg.tgfoid = '@extschema@.snowflake_mesh_held()'::regprocedure LOOP
			PERFORM @extschema@.snowflake_mesh_release(f.tbl);
		END LOOP;
		-- the fences of a join or a leave that did not finish: what the
		-- node is decides.  A member both ways takes writes again; any
		-- other keeps refusing them, as a node that left or whose join was
		-- taken back (its writes would reach no member, or not all)
		member := @extschema@.snowflake_mesh_member(publication);
		FOR f IN SELECT * FROM @extschema@.snowflake_mesh_fences() x WHERE x.why IN ('join', 'leave') LOOP
			IF member THEN
				EXECUTE format('DROP TRIGGER snowflake_mesh_fence ON %s', f.tbl);
			ELSE
				PERFORM @extschema@.snowflake_mesh_fence(f.tbl, CASE f.why WHEN 'join' THEN 'failed' ELSE 'left' END);
			END IF;
		END LOOP;
	END IF;
	IF mine THEN
		PERFORM pg_advisory_unlock(1397640531, key);
	END IF;
	RETURN ended;
END $$;

COMMENT ON FUNCTION snowflake_mesh_unlock(text, name) IS
'ends this run''s change of the mesh on this node and drops its lock; with run NULL, clears a change left unfinished: its holds go, and its fences go only where the node is a member both ways';

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

-- refuses a table whose updates and deletes cannot be replicated: one
-- without a replica identity (no primary key, REPLICA IDENTITY NOTHING, or
-- an identity index that is gone), itself or any partition of it.  Once
-- published, every UPDATE and DELETE of it would fail on its node.
CREATE FUNCTION snowflake_mesh_replicable(tbl regclass)
RETURNS void
LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	bad regclass;
BEGIN
	SELECT c.oid INTO bad
	-- (pg_partition_tree() lists nothing for a table that is not partitioned)
	FROM (SELECT tbl AS relid, 0 AS level UNION SELECT p.relid, p.level FROM pg_partition_tree(tbl) p) t
	JOIN pg_class c ON c.oid = t.relid
	WHERE c.relkind = 'r'
	  AND NOT (c.relreplident = 'f'
			   OR c.relreplident = 'd' AND EXISTS (SELECT FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary)
			   OR c.relreplident = 'i' AND EXISTS (SELECT FROM pg_index i WHERE i.indrelid = c.oid AND i.indisreplident))
	ORDER BY t.level, c.oid
	LIMIT 1;
	IF bad IS NOT NULL THEN
		RAISE EXCEPTION 'table % has no replica identity', bad
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  DETAIL = 'The mesh could not replicate its updates and deletes: each would fail on the node it runs on.',
				  HINT = format('Give it a primary key (ALTER TABLE %s ADD PRIMARY KEY (...)), or ALTER TABLE %s REPLICA IDENTITY FULL.', bad, bad);
	END IF;
END $$;

COMMENT ON FUNCTION snowflake_mesh_replicable(regclass) IS
'internal: refuses a table, or a partition of it, without a replica identity';

REVOKE ALL ON FUNCTION snowflake_mesh_replicable(regclass) FROM PUBLIC;

-- A mesh table's rows summed whole, the same on every node that has the
-- same rows whatever its settings: each column is read by its name (the
-- same columns in another order are the same table), under DateStyle,
-- IntervalStyle, extra_float_digits, bytea_output, TimeZone and
-- lc_monetary pinned, each value hashed alone (no row's text, which can
-- pass 1 GB), and the rows' hashes added up, so that neither their order
-- nor the table's size matters.
CREATE FUNCTION snowflake_mesh_digest(tbl regclass, OUT rows bigint, OUT digest text)
RETURNS record
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
SET DateStyle = 'ISO, YMD'
SET IntervalStyle = 'postgres'
SET extra_float_digits = 3
SET bytea_output = 'hex'
SET TimeZone = 'UTC'
SET lc_monetary = 'C'
AS $$
DECLARE
	caller text := current_setting('role');
	owner name := @extschema@.snowflake_mesh_reader(tbl);
	cols text;
	a numeric;
	b numeric;
BEGIN
	SELECT string_agg(CASE WHEN t.oid = 'bytea'::regtype
						   THEN format('coalesce(sha256(r.%I), ''\x00''::bytea)', at.attname)
						   ELSE format('coalesce(sha256(convert_to(r.%I::text, ''UTF8'')), ''\x00''::bytea)', at.attname) END,
					  ' || ' ORDER BY at.attname COLLATE "C")
	INTO cols
	FROM pg_attribute at JOIN pg_type t ON t.oid = at.atttypid
	WHERE at.attrelid = tbl AND at.attnum > 0 AND NOT at.attisdropped;
	PERFORM set_config('role', owner, true);
	EXECUTE format('SELECT count(*), coalesce(sum((''x'' || encode(substr(h, 1, 8), ''hex''))::bit(64)::bigint), 0),'
				   ' coalesce(sum((''x'' || encode(substr(h, 9, 8), ''hex''))::bit(64)::bigint), 0)'
				   ' FROM (SELECT sha256(%s) AS h FROM %s r) s', coalesce(cols, '''\x00''::bytea'), tbl)
	INTO rows, a, b;
	-- a role set in a function outlives it: back to the caller's
	PERFORM set_config('role', caller, true);
	digest := substr(encode(sha256(convert_to(a::text || '/' || b::text, 'UTF8')), 'hex'), 1, 32);
END $$;

COMMENT ON FUNCTION snowflake_mesh_digest(regclass) IS
'a mesh table''s rows, counted and summed by column name with the settings pinned (the same on every node that has the same rows), read as its owner';

REVOKE ALL ON FUNCTION snowflake_mesh_digest(regclass) FROM PUBLIC;

-- the worker ids that the IDs in a mesh table carry, in the columns whose
-- default is the extension's generator: a worker id no member claims
-- there was used by a node without a claim.  Only IDs from the time of the
-- first claim this node holds on (or from since) count: a key below it is
-- no ID the mesh's nodes issued in the layout in force (the values a
-- converted sequence left, below the floor snowflake_convert_column()
-- kept them under; a small key a client supplied), whatever worker id it
-- would decode to.  The bound is a range of the key, which its index
-- answers.  NULL where there is no such column, or one holds a key beyond
-- the layout's IDs (supplied by a client).
CREATE FUNCTION snowflake_mesh_workers(tbl regclass, since timestamptz DEFAULT NULL)
RETURNS integer[]
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	caller text := current_setting('role');
	owner name := @extschema@.snowflake_mesh_reader(tbl);
	first timestamptz := coalesce(since, (SELECT min(w.claimed_at) FROM @extschema@.snowflake_workers w));
	floor_id bigint := 1;
	ids text;
	workers integer[];
BEGIN
	IF first IS NOT NULL THEN
		BEGIN
			floor_id := @extschema@.snowflake_from_timestamp(first);
		EXCEPTION WHEN datetime_field_overflow THEN
			-- (a time the layout does not cover: every key counts)
			floor_id := 1;
		END;
	END IF;
	SELECT string_agg(format('SELECT (@extschema@.snowflake_decode(r.%1$I)).worker_id AS w FROM %2$s r WHERE r.%1$I >= $1',
							 at.attname, tbl), ' UNION ')
	INTO ids
	FROM pg_attribute at JOIN pg_attrdef ad ON ad.adrelid = at.attrelid AND ad.adnum = at.attnum
	WHERE at.attrelid = tbl AND at.attnum > 0 AND NOT at.attisdropped
	  AND at.atttypid = 'int8'::regtype
	  AND EXISTS (SELECT FROM pg_depend d
				  WHERE d.classid = 'pg_attrdef'::regclass AND d.objid = ad.oid
					AND d.refclassid = 'pg_proc'::regclass
					AND d.refobjid IN ('@extschema@.snowflake_nextval()'::regprocedure,
									   '@extschema@.snowflake_next_id()'::regprocedure));
	IF ids IS NULL THEN
		RETURN NULL;
	END IF;
	PERFORM set_config('role', owner, true);
	BEGIN
		EXECUTE format('SELECT coalesce(array_agg(DISTINCT w ORDER BY w), ''{}'') FROM (%s) s', ids)
		INTO workers USING floor_id;
	EXCEPTION WHEN numeric_value_out_of_range THEN
		workers := NULL;
	END;
	PERFORM set_config('role', caller, true);
	RETURN workers;
END $$;

COMMENT ON FUNCTION snowflake_mesh_workers(regclass, timestamptz) IS
'the worker ids of the IDs a mesh table''s generated keys hold, from the first claim''s time (or since) on, read as its owner';

REVOKE ALL ON FUNCTION snowflake_mesh_workers(regclass, timestamptz) FROM PUBLIC;

-- the mesh's publication: made with the tables named and
-- snowflake_workers, or the tables named added to it; inserts, updates
-- and deletes, not TRUNCATE (a TRUNCATE racing others' writes would leave
-- each node a different remainder), partitioned tables as their root (the
-- members' partitions need not match).  Each table must replicate updates
-- and deletes.  Recorded as the mesh's.
CREATE FUNCTION snowflake_mesh_publish(tables text[], publication name DEFAULT 'snowflake_mesh')
RETURNS name
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	sys bigint := (SELECT c.system_identifier FROM pg_control_system() c);
	rels oid[];
	list text;
	pub name;
	t oid;
BEGIN
	PERFORM @extschema@.snowflake_mesh_node(publication);
	SELECT array_agg(@extschema@.snowflake_mesh_table(x)::oid ORDER BY o) INTO rels FROM unnest(tables) WITH ORDINALITY u(x, o);
	FOREACH t IN ARRAY coalesce(rels, '{}') LOOP
		PERFORM @extschema@.snowflake_mesh_reader(t::regclass);
		PERFORM @extschema@.snowflake_mesh_replicable(t::regclass);
	END LOOP;
	SELECT string_agg(r::regclass::text, ', ') INTO list FROM unnest(rels) r;
	pub := @extschema@.snowflake_mesh_publication(publication);
	IF pub IS NULL THEN
		pub := @extschema@.snowflake_mesh_free_name(NULL, publication);
		-- the records of a publication that is gone go with it
		DELETE FROM @extschema@.snowflake_mesh_objects o
		WHERE o.publication = snowflake_mesh_publish.publication AND o.kind IN ('publication', 'table');
		EXECUTE format('CREATE PUBLICATION %I FOR TABLE %s WITH (publish = %L, publish_via_partition_root = true)', pub,
					   concat_ws(', ', list, '@extschema@.snowflake_workers'), 'insert, update, delete');
		INSERT INTO @extschema@.snowflake_mesh_objects
		SELECT publication, 'publication', p.oid, NULL, NULL, sys FROM pg_publication p WHERE p.pubname = pub;
		rels := rels || '@extschema@.snowflake_workers'::regclass::oid;
	ELSIF list IS NOT NULL THEN
		EXECUTE format('ALTER PUBLICATION %I ADD TABLE %s', pub, list);
	END IF;
	INSERT INTO @extschema@.snowflake_mesh_objects
	SELECT publication, 'table', pr.oid, pr.prrelid, NULL, sys
	FROM pg_publication_rel pr JOIN pg_publication p ON p.oid = pr.prpubid
	WHERE p.pubname = pub AND pr.prrelid = ANY (rels)
	ON CONFLICT DO NOTHING;
	RETURN pub;
END $$;

COMMENT ON FUNCTION snowflake_mesh_publish(text[], name) IS
'makes the mesh''s publication of the tables named and snowflake_workers, or adds the tables to it, and records them; returns its name';

REVOKE ALL ON FUNCTION snowflake_mesh_publish(text[], name) FROM PUBLIC;

CREATE FUNCTION snowflake_mesh_unpublish(tables text[], publication name DEFAULT 'snowflake_mesh')
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	pub name;
BEGIN
	PERFORM @extschema@.snowflake_mesh_node(publication);
	pub := @extschema@.snowflake_mesh_publication(publication);
	IF tables IS NULL THEN
		IF pub IS NOT NULL THEN
			EXECUTE format('DROP PUBLICATION %I', pub);
		END IF;
		DELETE FROM @extschema@.snowflake_mesh_objects o
		WHERE o.publication = snowflake_mesh_unpublish.publication AND o.kind IN ('publication', 'table');
	ELSIF pub IS NOT NULL THEN
		EXECUTE format('ALTER PUBLICATION %I DROP TABLE %s', pub,
					   (SELECT string_agg(@extschema@.snowflake_mesh_table(t)::text, ', ') FROM unnest(tables) t));
		DELETE FROM @extschema@.snowflake_mesh_objects o
		WHERE o.publication = snowflake_mesh_unpublish.publication AND o.kind = 'table'
		  AND NOT EXISTS (SELECT FROM pg_publication_rel pr WHERE pr.oid = o.object);
	END IF;
END $$;

COMMENT ON FUNCTION snowflake_mesh_unpublish(text[], name) IS
'drops the tables named from the mesh''s publication, or the publication when tables is NULL, with their records';

REVOKE ALL ON FUNCTION snowflake_mesh_unpublish(text[], name) FROM PUBLIC;

--
-- Holds: writes wait.  A table joins the mesh held, its writers waiting
-- while every publication and every subscription takes it, so that no row
-- is written where a subscription would skip it.  And every table of the
-- mesh is held on every member while a change of membership switches
-- streams or reads the members' counters: the writers wait while
-- replication's apply goes on, so that every member catches up with every
-- other, and no stream starts behind another with a backlog whose changes
-- could then arrive before the rows they change.  A hold is an advisory
-- lock of the helper's session (1397640532 and the table, or 1397640533
-- and the mesh); a writer takes it shared, once a statement, in a trigger
-- that logical replication's apply does not fire.
--
CREATE FUNCTION snowflake_mesh_held()
RETURNS trigger
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM pg_advisory_xact_lock_shared(TG_ARGV[0]::integer, TG_ARGV[1]::integer);
	RETURN NULL;
END $$;

COMMENT ON FUNCTION snowflake_mesh_held() IS
'trigger: a write waits while a change of the mesh holds the table';

REVOKE ALL ON FUNCTION snowflake_mesh_held() FROM PUBLIC;

-- snowflake_mesh_trigger_on(TBL, NAME, FN, EVENTS, ARGS): the statement
-- trigger NAME before EVENTS on the table and on each of its partitions,
-- calling FN(ARGS); made with a lock that waits for the writes under way.
-- A trigger of that name that is not FN would leave writes open.
CREATE FUNCTION snowflake_mesh_trigger_on(tbl regclass, name text, fn regprocedure, events text, args text)
RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	part regclass;
BEGIN
	PERFORM @extschema@.snowflake_mesh_reader(tbl);
	-- (pg_partition_tree() lists nothing for a table that is not partitioned)
	FOR part IN SELECT tbl UNION SELECT p.relid FROM pg_partition_tree(tbl) p LOOP
		IF EXISTS (SELECT FROM pg_trigger t WHERE t.tgrelid = part AND t.tgname = name AND t.tgfoid <> fn) THEN
			RAISE EXCEPTION 'table % has a trigger named "%" of its own', part, name
				USING ERRCODE = 'duplicate_object',
					  HINT = 'Rename that trigger on this node.';
		END IF;
		EXECUTE format('DROP TRIGGER IF EXISTS %I ON %s', name, part);
		EXECUTE format('CREATE TRIGGER %I BEFORE %s ON %s FOR EACH STATEMENT EXECUTE FUNCTION %s(%s)',
					   name, events, part, fn::oid::regproc, args);
	END LOOP;
END $$;

COMMENT ON FUNCTION snowflake_mesh_trigger_on(regclass, text, regprocedure, text, text) IS
'internal: makes the statement trigger of the hold or the fence on the table and its partitions';

REVOKE ALL ON FUNCTION snowflake_mesh_trigger_on(regclass, text, regprocedure, text, text) FROM PUBLIC;

-- the hold's trigger on the table and on each of its partitions, taking
-- the lock key1, key2; the trigger's lock waits for the writes under way
CREATE FUNCTION snowflake_mesh_hold_on(tbl regclass, key1 integer, key2 integer)
RETURNS void
LANGUAGE sql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT @extschema@.snowflake_mesh_trigger_on(tbl, 'snowflake_mesh_hold', '@extschema@.snowflake_mesh_held()',
		'INSERT OR UPDATE OR DELETE', format('%L, %L', key1, key2))
$$;

COMMENT ON FUNCTION snowflake_mesh_hold_on(regclass, integer, integer) IS
'internal: the trigger that makes writes to the table and its partitions wait while the advisory lock key1, key2 is held';

REVOKE ALL ON FUNCTION snowflake_mesh_hold_on(regclass, integer, integer) FROM PUBLIC;

-- a table being added: held at once, by this session
CREATE FUNCTION snowflake_mesh_hold(tbl regclass)
RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	key integer := (tbl::oid::bigint - 2147483648)::integer;
BEGIN
	IF NOT pg_try_advisory_lock(1397640532, key) THEN
		RAISE EXCEPTION 'table % is held by another session', tbl
			USING ERRCODE = 'lock_not_available',
				  DETAIL = format('Its hold is taken by %s.',
								  coalesce(@extschema@.snowflake_mesh_holders(1397640532, key), 'a session that just ended'));
	END IF;
	BEGIN
		PERFORM @extschema@.snowflake_mesh_hold_on(tbl, 1397640532, key);
	EXCEPTION WHEN OTHERS THEN
		PERFORM pg_advisory_unlock(1397640532, key);
		RAISE;
	END;
END $$;

COMMENT ON FUNCTION snowflake_mesh_hold(regclass) IS
'makes writes to the table wait until snowflake_mesh_release() in this session';

REVOKE ALL ON FUNCTION snowflake_mesh_hold(regclass) FROM PUBLIC;

-- a table of the mesh, armed: its writes wait whenever a session holds
-- the mesh's writes (snowflake_mesh_hold_writes()).  One table at a time,
-- each in a transaction of its own, so that the trigger's lock never
-- waits for one table's writers while it keeps another's waiting.
CREATE FUNCTION snowflake_mesh_arm(tbl regclass, publication name DEFAULT 'snowflake_mesh')
RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM @extschema@.snowflake_mesh_node(publication);
	PERFORM @extschema@.snowflake_mesh_hold_on(tbl, 1397640533, hashtext(publication));
END $$;

COMMENT ON FUNCTION snowflake_mesh_arm(regclass, name) IS
'makes writes to the table wait whenever a session holds the mesh''s writes';

REVOKE ALL ON FUNCTION snowflake_mesh_arm(regclass, name) FROM PUBLIC;

-- the mesh's writes held on this node, by this session: waits for the
-- writes under way, at most timeout, each try shorter than
-- deadlock_timeout (a writer that waits for the hold while another waits
-- for it is left alone); one that gives up ends with SQLSTATE SM001
CREATE FUNCTION snowflake_mesh_hold_writes(timeout interval DEFAULT '300 s', publication name DEFAULT 'snowflake_mesh')
RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	key integer := hashtext(publication);
	deadline timestamptz := clock_timestamp() + timeout;
	try text := greatest(10, least(200, 500 * extract(epoch FROM current_setting('deadlock_timeout')::interval)))::integer::text;
BEGIN
	PERFORM @extschema@.snowflake_mesh_node(publication);
	IF @extschema@.snowflake_mesh_holding(1397640533, key) THEN
		RETURN;
	END IF;
	LOOP
		BEGIN
			-- (a setting made in a block that fails goes with it)
			PERFORM set_config('lock_timeout', try, true);
			PERFORM pg_advisory_lock(1397640533, key);
			RETURN;
		EXCEPTION WHEN lock_not_available THEN
			IF clock_timestamp() > deadline THEN
				RAISE EXCEPTION 'gave up after % waiting for the writes under way to end', timeout
					USING ERRCODE = 'SM001',
						  DETAIL = format('Writes of the mesh''s tables are under way in %s.',
										  coalesce(@extschema@.snowflake_mesh_holders(1397640533, key), 'sessions that just ended')),
						  HINT = 'A transaction that stays open after it wrote a table of the mesh keeps the change waiting.';
			END IF;
		END;
	END LOOP;
END $$;

COMMENT ON FUNCTION snowflake_mesh_hold_writes(interval, name) IS
'makes the writes of the mesh''s armed tables on this node wait, once those under way ended, until snowflake_mesh_release_writes() in this session';

REVOKE ALL ON FUNCTION snowflake_mesh_hold_writes(interval, name) FROM PUBLIC;

-- whether this session holds the advisory lock key1, key2
CREATE FUNCTION snowflake_mesh_holding(key1 integer, key2 integer)
RETURNS boolean
LANGUAGE sql VOLATILE STRICT PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT EXISTS (SELECT FROM pg_locks l
				   WHERE l.locktype = 'advisory' AND l.pid = pg_backend_pid() AND l.objsubid = 2 AND l.granted
					 AND l.classid = (key1::bigint & 4294967295)::oid AND l.objid = (key2::bigint & 4294967295)::oid)
$$;

COMMENT ON FUNCTION snowflake_mesh_holding(integer, integer) IS
'internal: whether this session holds an advisory lock';

REVOKE ALL ON FUNCTION snowflake_mesh_holding(integer, integer) FROM PUBLIC;

CREATE FUNCTION snowflake_mesh_release_writes(publication name DEFAULT 'snowflake_mesh')
RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM @extschema@.snowflake_mesh_node(publication);
	WHILE @extschema@.snowflake_mesh_holding(1397640533, hashtext(publication)) LOOP
		PERFORM pg_advisory_unlock(1397640533, hashtext(publication));
	END LOOP;
END $$;

COMMENT ON FUNCTION snowflake_mesh_release_writes(name) IS
'lets the writes that snowflake_mesh_hold_writes() made wait go on';

REVOKE ALL ON FUNCTION snowflake_mesh_release_writes(name) FROM PUBLIC;

-- a table's hold, or an armed table, undone: the writers waiting on this
-- session's hold of the table go on first, the triggers' drop waits for
-- them
CREATE FUNCTION snowflake_mesh_release(tbl regclass)
RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	key integer := (tbl::oid::bigint - 2147483648)::integer;
	t regclass;
BEGIN
	IF @extschema@.snowflake_mesh_holding(1397640532, key) THEN
		PERFORM pg_advisory_unlock(1397640532, key);
	END IF;
	FOR t IN SELECT tg.tgrelid::regclass FROM pg_trigger tg
			 WHERE tg.tgname = 'snowflake_mesh_hold'
			   AND tg.tgfoid = '@extschema@.snowflake_mesh_held()'::regprocedure
			   AND (tg.tgrelid = tbl OR tg.tgrelid IN (SELECT p.relid FROM pg_partition_tree(tbl) p)) LOOP
		EXECUTE format('DROP TRIGGER snowflake_mesh_hold ON %s', t);
	END LOOP;
END $$;

COMMENT ON FUNCTION snowflake_mesh_release(regclass) IS
'lets the writes to the table go on: ends this session''s hold of it, and drops the triggers of any hold there';

REVOKE ALL ON FUNCTION snowflake_mesh_release(regclass) FROM PUBLIC;


--
-- A node's tables refuse writes while it joins the mesh (its rows come
-- from the mesh, and a write accepted there would be lost if the join were
-- taken back), while it leaves (every member must have every row it
-- wrote), once it has left, and once a join of it was taken back (a row
-- written there would reach no member).  The fence is a statement trigger
-- on the table and on each of its partitions, which logical replication's
-- apply does not fire.  A node that left or whose join was taken back
-- lets TRUNCATE through, which empties it before it joins again (the
-- mesh never carries a TRUNCATE).
--
CREATE FUNCTION snowflake_mesh_fenced()
RETURNS trigger
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	tbl text := format('%I.%I', TG_TABLE_SCHEMA, TG_TABLE_NAME);
BEGIN
	IF TG_ARGV[0] = 'join' THEN
		RAISE EXCEPTION 'table % takes no writes while its node joins the mesh', tbl
			USING ERRCODE = 'SM002',
				  DETAIL = 'Its rows come from the members until the join ends.',
				  HINT = 'Write on a member of the mesh meanwhile; this node takes writes once it is one.';
	ELSIF TG_ARGV[0] = 'leave' THEN
		RAISE EXCEPTION 'table % takes no writes while its node leaves the mesh', tbl
			USING ERRCODE = 'SM002',
				  DETAIL = 'Every member receives every row this node wrote before it leaves.',
				  HINT = 'Write on a member that stays in the mesh.';
	ELSIF TG_ARGV[0] = 'failed' THEN
		RAISE EXCEPTION 'table % takes no writes: a join of its node was taken back', tbl
			USING ERRCODE = 'SM002',
				  DETAIL = 'A row written here would reach no member.',
				  HINT = 'Write on a member of the mesh.  Empty the mesh''s tables here (TRUNCATE) and join the node again; to use the table on this node alone, SELECT snowflake.snowflake_mesh_unfence() there.';
	END IF;
	RAISE EXCEPTION 'table % takes no writes: its node left the mesh', tbl
		USING ERRCODE = 'SM002',
			  DETAIL = 'A row written here would reach no member.',
			  HINT = 'Write on a member of the mesh.  To join the node again, empty the mesh''s tables here (TRUNCATE); to use the table on this node alone, SELECT snowflake.snowflake_mesh_unfence() there.';
END $$;

COMMENT ON FUNCTION snowflake_mesh_fenced() IS
'trigger: refuses a write to a table of a node that joins the mesh, leaves it, left it, or whose join was taken back';

REVOKE ALL ON FUNCTION snowflake_mesh_fenced() FROM PUBLIC;

-- the fences on this node: the table or partition, why, and whether its
-- trigger fires for this node's writes
CREATE FUNCTION snowflake_mesh_fences()
RETURNS TABLE (tbl regclass, why text, enabled boolean)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT tg.tgrelid::regclass,
		   convert_from(substring(tg.tgargs FROM 1 FOR position('\x00'::bytea IN tg.tgargs) - 1), 'SQL_ASCII'),
		   tg.tgenabled IN ('O', 'A')
	FROM pg_trigger tg
	WHERE tg.tgname = 'snowflake_mesh_fence' AND tg.tgfoid = '@extschema@.snowflake_mesh_fenced()'::regprocedure
	ORDER BY 1
$$;

COMMENT ON FUNCTION snowflake_mesh_fences() IS
'internal: the tables and partitions fenced on this node, why, and whether the fence fires';

REVOKE ALL ON FUNCTION snowflake_mesh_fences() FROM PUBLIC;

CREATE FUNCTION snowflake_mesh_fence(tbl regclass, why text)
RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF why NOT IN ('join', 'leave', 'left', 'failed') THEN
		RAISE EXCEPTION 'invalid fence "%"', why
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'A fence is for a join, a leave, a node that left, or one whose join was taken back: join, leave, left or failed.';
	END IF;
	-- once the trigger is made, every write that was accepted is committed
	PERFORM @extschema@.snowflake_mesh_trigger_on(tbl, 'snowflake_mesh_fence', '@extschema@.snowflake_mesh_fenced()',
		CASE WHEN why IN ('join', 'leave') THEN 'INSERT OR UPDATE OR DELETE OR TRUNCATE'
			 ELSE 'INSERT OR UPDATE OR DELETE' END, quote_literal(why));
END $$;

COMMENT ON FUNCTION snowflake_mesh_fence(regclass, text) IS
'makes the table and its partitions refuse writes, for a join, a leave, a node that left the mesh, or one whose join was taken back';

REVOKE ALL ON FUNCTION snowflake_mesh_fence(regclass, text) FROM PUBLIC;

CREATE FUNCTION snowflake_mesh_unfence(tbl regclass DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	t regclass;
	n integer := 0;
BEGIN
	FOR t IN SELECT f.tbl FROM @extschema@.snowflake_mesh_fences() f
			 WHERE snowflake_mesh_unfence.tbl IS NULL OR f.tbl = snowflake_mesh_unfence.tbl
				OR f.tbl IN (SELECT p.relid FROM pg_partition_tree(snowflake_mesh_unfence.tbl) p) LOOP
		EXECUTE format('DROP TRIGGER snowflake_mesh_fence ON %s', t);
		n := n + 1;
	END LOOP;
	RETURN n;
END $$;

COMMENT ON FUNCTION snowflake_mesh_unfence(regclass) IS
'lets the table (every table when NULL) and its partitions take writes again; returns how many fences went';

REVOKE ALL ON FUNCTION snowflake_mesh_unfence(regclass) FROM PUBLIC;

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

-- this node's subscription to from_worker's publication remote_publication
-- (its name for the mesh's publication), on the slot
-- snowflake_mesh_create_slot() made there, recorded as the mesh's.  origin
-- none takes only the rows from_worker wrote (each row travels once, from
-- the node that wrote it); origin any also those it applied, while a new
-- node catches up with its copy source.
CREATE FUNCTION snowflake_mesh_subscribe(from_worker integer, conninfo text, remote_publication name,
										 copy_data boolean, enabled boolean, failover boolean,
										 origin text DEFAULT 'none', publication name DEFAULT 'snowflake_mesh')
RETURNS name
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	me integer := @extschema@.snowflake_mesh_node(publication);
	sub name;
	options text;
BEGIN
	IF from_worker < 0 THEN
		RAISE EXCEPTION 'worker id % is out of range', from_worker USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF origin NOT IN ('none', 'any') THEN
		RAISE EXCEPTION 'invalid origin "%"', origin
			USING ERRCODE = 'invalid_parameter_value', HINT = 'A mesh subscribes with origin none or any.';
	END IF;
	sub := @extschema@.snowflake_mesh_subscription(from_worker, publication);
	IF sub IS NOT NULL THEN
		RAISE EXCEPTION 'this node already subscribes to worker % in mesh %', from_worker, publication
			USING ERRCODE = 'duplicate_object',
				  DETAIL = format('Its subscription is %s.', sub);
	END IF;
	sub := @extschema@.snowflake_mesh_free_name(from_worker, publication);
	options := format('slot_name = %L, create_slot = false, origin = %s, copy_data = %s, enabled = %s',
					  format('%s_w%s_to_w%s', publication, from_worker, me), origin, copy_data::text, enabled::text);
	IF failover AND current_setting('server_version_num')::integer >= 170000 THEN
		options := options || ', failover = true';
	END IF;
	-- a node with a synchronous standby confirms only rows its standby
	-- has, so that the standby, promoted, misses none of them
	IF current_setting('synchronous_standby_names') <> '' THEN
		options := options || ', synchronous_commit = on';
	END IF;
	EXECUTE format('CREATE SUBSCRIPTION %I CONNECTION %L PUBLICATION %I WITH (%s)',
				   sub, conninfo, remote_publication, options);
	INSERT INTO @extschema@.snowflake_mesh_objects
	SELECT publication, 'subscription', s.oid, NULL, from_worker, c.system_identifier
	FROM pg_subscription s, pg_control_system() c
	WHERE s.subname = sub AND s.subdbid = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database());
	RETURN sub;
END $$;

COMMENT ON FUNCTION snowflake_mesh_subscribe(integer, text, name, boolean, boolean, boolean, text, name) IS
'subscribes this node to from_worker''s rows, on the slot snowflake_mesh_create_slot() made there, and records it; returns its name';

REVOKE ALL ON FUNCTION snowflake_mesh_subscribe(integer, text, name, boolean, boolean, boolean, text, name) FROM PUBLIC;

-- the mesh's subscription to from_worker, or an error
CREATE FUNCTION snowflake_mesh_subscription_of(from_worker integer, publication name)
RETURNS name
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	sub name := @extschema@.snowflake_mesh_subscription(from_worker, publication);
BEGIN
	IF sub IS NULL THEN
		RAISE EXCEPTION 'this node has no subscription to worker % in mesh %', from_worker, publication
			USING ERRCODE = 'undefined_object';
	END IF;
	RETURN sub;
END $$;

COMMENT ON FUNCTION snowflake_mesh_subscription_of(integer, name) IS
'internal: the name of this node''s subscription of the mesh to from_worker, or an error if there is none';

REVOKE ALL ON FUNCTION snowflake_mesh_subscription_of(integer, name) FROM PUBLIC;

CREATE FUNCTION snowflake_mesh_unsubscribe(from_worker integer, publication name DEFAULT 'snowflake_mesh')
RETURNS name
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	sub name;
	slot name;
BEGIN
	PERFORM @extschema@.snowflake_mesh_node(publication);
	sub := @extschema@.snowflake_mesh_subscription(from_worker, publication);
	IF sub IS NULL THEN
		RETURN NULL;
	END IF;
	SELECT s.subslotname INTO slot FROM pg_subscription s
	WHERE s.subname = sub AND s.subdbid = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database());
	EXECUTE format('ALTER SUBSCRIPTION %I DISABLE', sub);
	EXECUTE format('ALTER SUBSCRIPTION %I SET (slot_name = NONE)', sub);
	EXECUTE format('DROP SUBSCRIPTION %I', sub);
	DELETE FROM @extschema@.snowflake_mesh_objects o
	WHERE o.publication = snowflake_mesh_unsubscribe.publication AND o.kind = 'subscription'
	  AND o.from_worker = snowflake_mesh_unsubscribe.from_worker;
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
	sub name;
BEGIN
	PERFORM @extschema@.snowflake_mesh_node(publication);
	IF from_worker IS NULL OR enabled IS NULL THEN
		RAISE EXCEPTION 'from_worker and enabled must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	sub := @extschema@.snowflake_mesh_subscription_of(from_worker, publication);
	IF conninfo IS NOT NULL THEN
		EXECUTE format('ALTER SUBSCRIPTION %I DISABLE', sub);
		EXECUTE format('ALTER SUBSCRIPTION %I CONNECTION %L', sub, conninfo);
	END IF;
	EXECUTE format('ALTER SUBSCRIPTION %I %s', sub, CASE WHEN enabled THEN 'ENABLE' ELSE 'DISABLE' END);
END $$;

COMMENT ON FUNCTION snowflake_mesh_enable(integer, boolean, text, name) IS
'starts or stops this node''s subscription to from_worker, pointed at conninfo when given';

REVOKE ALL ON FUNCTION snowflake_mesh_enable(integer, boolean, text, name) FROM PUBLIC;

-- which changes this node's subscription to from_worker takes: none (the
-- rows from_worker wrote) or any (also those it applied); the walsender
-- reads it when the subscription starts
CREATE FUNCTION snowflake_mesh_set_origin(from_worker integer, origin text,
										  publication name DEFAULT 'snowflake_mesh')
RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM @extschema@.snowflake_mesh_node(publication);
	IF origin NOT IN ('none', 'any') THEN
		RAISE EXCEPTION 'invalid origin "%"', origin
			USING ERRCODE = 'invalid_parameter_value', HINT = 'A mesh subscribes with origin none or any.';
	END IF;
	EXECUTE format('ALTER SUBSCRIPTION %I SET (origin = %s)',
				   @extschema@.snowflake_mesh_subscription_of(from_worker, publication), origin);
END $$;

COMMENT ON FUNCTION snowflake_mesh_set_origin(integer, text, name) IS
'sets which changes this node''s subscription to from_worker takes: none (those from_worker wrote) or any';

REVOKE ALL ON FUNCTION snowflake_mesh_set_origin(integer, text, name) FROM PUBLIC;

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
	WHERE s.subname = @extschema@.snowflake_mesh_subscription_of(from_worker, publication)
	  AND s.subdbid = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database());
	IF advance_to IS NOT NULL THEN
		PERFORM pg_replication_origin_advance(origin, advance_to);
	END IF;
	RETURN pg_replication_origin_progress(origin, false);
END $$;

COMMENT ON FUNCTION snowflake_mesh_origin(integer, pg_lsn, name) IS
'the position this node''s subscription to from_worker has applied up to, after moving it to advance_to if given';

REVOKE ALL ON FUNCTION snowflake_mesh_origin(integer, pg_lsn, name) FROM PUBLIC;

-- a change of this node that reaches every subscriber of it: its own
-- claim written again as it is.  A subscriber whose replication origin for
-- this node has passed a position taken before it has applied everything
-- this node committed before that position.
CREATE FUNCTION snowflake_mesh_mark(publication name DEFAULT 'snowflake_mesh')
RETURNS boolean
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	UPDATE @extschema@.snowflake_workers w SET node_name = w.node_name
	WHERE w.worker_id = @extschema@.snowflake_mesh_node(publication)
	  AND w.system_identifier = (SELECT c.system_identifier FROM pg_control_system() c);
	RETURN FOUND;
END $$;

COMMENT ON FUNCTION snowflake_mesh_mark(name) IS
'writes this node''s claim again as it is, a change every subscriber of the mesh applies; false if the node has no claim';

REVOKE ALL ON FUNCTION snowflake_mesh_mark(name) FROM PUBLIC;

--
-- Waiting.  Each waits at most timeout, checking every 100 ms, and reads
-- the catalogs and the statistics afresh each time, which takes READ
-- COMMITTED.  One that gives up ends with SQLSTATE SM001, the mesh's own:
-- the caller may wait again.
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
	WHILE EXISTS (SELECT FROM pg_stat_subscription st
				  JOIN @extschema@.snowflake_mesh_objects o ON o.object = st.subid
				  WHERE st.pid IS NOT NULL AND o.publication = snowflake_mesh_wait_stopped.publication
					AND o.kind = 'subscription'
					AND (snowflake_mesh_wait_stopped.from_worker IS NULL
						 OR o.from_worker = snowflake_mesh_wait_stopped.from_worker)) LOOP
		IF clock_timestamp() > deadline THEN
			RAISE EXCEPTION 'gave up after % waiting for the workers of the subscriptions to stop', timeout
				USING ERRCODE = 'SM001';
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
	sub name;
	deadline timestamptz := clock_timestamp() + timeout;
	errors bigint;
BEGIN
	PERFORM @extschema@.snowflake_mesh_node(publication);
	IF current_setting('transaction_isolation') <> 'read committed' THEN
		RAISE EXCEPTION 'snowflake_mesh_wait_copied() waits only at isolation level READ COMMITTED'
			USING ERRCODE = 'invalid_transaction_state';
	END IF;
	sub := @extschema@.snowflake_mesh_subscription_of(from_worker, publication);
	LOOP
		PERFORM pg_stat_clear_snapshot();
		-- a copy that fails is tried again and again: it does not heal by
		-- waiting (16-18 count sync_error_count, 19 its table and sequence
		-- parts)
		SELECT coalesce(sum(e.value::bigint), 0) INTO errors
		FROM pg_stat_subscription_stats ss, jsonb_each_text(to_jsonb(ss)) e
		WHERE ss.subname = sub AND e.key LIKE 'sync%error_count';
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
				USING ERRCODE = 'SM001',
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
				USING ERRCODE = 'SM001',
					  HINT = 'See pg_stat_subscription there and both server logs; a subscriber reports its progress every wal_receiver_status_interval.';
		END IF;
		PERFORM pg_sleep(0.1);
	END LOOP;
END $$;

COMMENT ON FUNCTION snowflake_mesh_wait_received(integer, pg_lsn, interval, name) IS
'waits until for_worker has confirmed this node''s changes up to upto';

REVOKE ALL ON FUNCTION snowflake_mesh_wait_received(integer, pg_lsn, interval, name) FROM PUBLIC;

-- the subscriber's side: its replication origin moves as each
-- transaction is applied, without waiting for a report to the publisher
CREATE FUNCTION snowflake_mesh_wait_applied(from_worker integer, upto pg_lsn, timeout interval DEFAULT '300 s',
											publication name DEFAULT 'snowflake_mesh')
RETURNS void
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	deadline timestamptz := clock_timestamp() + timeout;
	at pg_lsn;
BEGIN
	LOOP
		at := @extschema@.snowflake_mesh_origin(from_worker, NULL, publication);
		EXIT WHEN at >= upto;
		IF clock_timestamp() > deadline THEN
			RAISE EXCEPTION 'gave up after % waiting to apply the changes of worker % up to %', timeout, from_worker, upto
				USING ERRCODE = 'SM001',
					  HINT = 'See pg_stat_subscription and this node''s server log.';
		END IF;
		PERFORM pg_sleep(0.05);
	END LOOP;
END $$;

COMMENT ON FUNCTION snowflake_mesh_wait_applied(integer, pg_lsn, interval, name) IS
'waits until this node has applied from_worker''s changes up to upto';

REVOKE ALL ON FUNCTION snowflake_mesh_wait_applied(integer, pg_lsn, interval, name) FROM PUBLIC;

-- the changes each of this node's mesh subscriptions skipped because the
-- row was not there (update_missing, delete_missing, and every other
-- *_missing counter); NULL before 18, which does not count them.
-- Counters of a running worker reach the statistics within about a
-- second; a stopped worker has flushed its own.
CREATE FUNCTION snowflake_mesh_missing(publication name DEFAULT 'snowflake_mesh')
RETURNS TABLE (subscription name, from_worker integer, missing bigint)
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM @extschema@.snowflake_mesh_node(publication);
	PERFORM pg_stat_clear_snapshot();
	RETURN QUERY
	SELECT s.subname, o.from_worker,
		   CASE WHEN current_setting('server_version_num')::integer >= 180000
				THEN (SELECT coalesce(sum(e.value::bigint), 0)
					  FROM pg_stat_subscription_stats ss, jsonb_each_text(to_jsonb(ss)) e
					  WHERE ss.subid = s.oid AND e.key LIKE 'confl\_%\_missing')::bigint END
	FROM @extschema@.snowflake_mesh_objects o JOIN pg_subscription s ON s.oid = o.object
	WHERE o.publication = snowflake_mesh_missing.publication AND o.kind = 'subscription'
	ORDER BY o.from_worker;
END $$;

COMMENT ON FUNCTION snowflake_mesh_missing(name) IS
'changes each of this node''s mesh subscriptions skipped for a missing row (*_missing conflicts, 18 and later; NULL before)';

REVOKE ALL ON FUNCTION snowflake_mesh_missing(name) FROM PUBLIC;

--
-- The node's state, as snowflake-mesh status reports it: one row per
-- publication, published table, subscription, subscribed table, slot,
-- claim and change of the mesh, and one row per fault found here, with its
-- class: lost (changes skipped, a slot that can no longer feed its
-- subscriber), failing (replication stopped or erring) or shape (the
-- mesh's objects, their settings or records are not as a mesh's are).
-- worker is the worker id a row is about (a subscription's publisher, a
-- claim's), publications a subscription's.  What only a comparison across
-- the nodes shows, and how far behind a subscriber is, the helper finds.
--
CREATE FUNCTION snowflake_mesh_state(publication name DEFAULT 'snowflake_mesh')
RETURNS TABLE (kind text, name text, detail text, class text, worker integer, publications text[])
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	me integer;
	sys bigint := (SELECT s.system_identifier FROM pg_control_system() s);
	refusal text;
	db oid := (SELECT d.oid FROM pg_database d WHERE d.datname = current_database());
	pattern text;
	pub pg_publication;
	pub_super boolean;
	r record;
	chg @extschema@.snowflake_mesh_changes;
BEGIN
	me := @extschema@.snowflake_mesh_node(publication);
	pattern := '^' || publication || '_from_w[0-9]+(_[0-9]+)?$';
	BEGIN
		PERFORM @extschema@.snowflake_worker_id();
	EXCEPTION WHEN object_not_in_prerequisite_state THEN
		GET STACKED DIAGNOSTICS refusal = MESSAGE_TEXT;
		RETURN QUERY SELECT 'fault', 'node', 'refuses to generate IDs: ' || refusal, 'shape', me, NULL::text[];
	END;
	RETURN QUERY SELECT 'fault', 'the records of mesh ' || snowflake_mesh_state.publication,
		format('were made by system %s, not by this one (%s): after pg_upgrade or on a copy the objects are not the ones recorded; compare the members with status --rows, then SELECT snowflake.snowflake_mesh_record(%L) here',
			   min(o.system_identifier), sys, snowflake_mesh_state.publication), 'shape', me, NULL::text[]
		FROM @extschema@.snowflake_mesh_objects o
		WHERE o.publication = snowflake_mesh_state.publication AND o.system_identifier <> sys
		HAVING count(*) > 0;
	PERFORM pg_stat_clear_snapshot();

	-- the publication, recorded, with what it publishes
	SELECT p.* INTO pub FROM @extschema@.snowflake_mesh_objects o JOIN pg_publication p ON p.oid = o.object
	WHERE o.publication = snowflake_mesh_state.publication AND o.kind = 'publication' AND o.system_identifier = sys;
	IF pub.oid IS NULL THEN
		IF EXISTS (SELECT FROM pg_publication p JOIN pg_roles o ON o.oid = p.pubowner
				   WHERE p.pubname = publication AND o.rolsuper) THEN
			RETURN QUERY SELECT 'fault', 'publication ' || publication,
				format('is not recorded as the mesh''s (made by hand, or by an earlier snowflake-mesh): compare the members with status --rows, then SELECT snowflake.snowflake_mesh_record(%L) here', publication),
				'shape', me, NULL::text[];
		ELSE
			RETURN QUERY SELECT 'fault', 'publication ' || publication, 'is missing', 'shape', me, NULL::text[];
		END IF;
	ELSE
		SELECT o.rolsuper INTO pub_super FROM pg_roles o WHERE o.oid = pub.pubowner;
		-- given to another role, it is no longer the mesh's: not shown as one
		IF pub_super THEN
			RETURN QUERY SELECT 'publication', pub.pubname::text,
				concat_ws(', ', CASE WHEN pub.pubinsert THEN 'insert' END, CASE WHEN pub.pubupdate THEN 'update' END,
						  CASE WHEN pub.pubdelete THEN 'delete' END, CASE WHEN pub.pubtruncate THEN 'truncate' END),
				NULL::text, me, NULL::text[];
		ELSE
			RETURN QUERY SELECT 'fault', 'publication ' || pub.pubname,
				format('is owned by role %s, not a superuser: it is not the mesh''s', pub.pubowner::regrole), 'shape', me, NULL::text[];
		END IF;
		IF NOT (pub.pubinsert AND pub.pubupdate AND pub.pubdelete) THEN
			RETURN QUERY SELECT 'fault', 'publication ' || pub.pubname,
				format('publishes only %s: the other changes of this node reach no member; ALTER PUBLICATION %I SET (publish = ''insert, update, delete'')',
					   coalesce(nullif(concat_ws(', ', CASE WHEN pub.pubinsert THEN 'insert' END,
												 CASE WHEN pub.pubupdate THEN 'update' END,
												 CASE WHEN pub.pubdelete THEN 'delete' END), ''), 'nothing'), pub.pubname),
				'shape', me, NULL::text[];
		END IF;
		IF pub.pubtruncate THEN
			RETURN QUERY SELECT 'hint', 'publication ' || pub.pubname,
				format('publishes TRUNCATE; ALTER PUBLICATION %I SET (publish = ''insert, update, delete'')', pub.pubname),
				NULL::text, me, NULL::text[];
		END IF;
		IF pub.puballtables THEN
			RETURN QUERY SELECT 'fault', 'publication ' || pub.pubname, 'publishes every table of the database', 'shape', me, NULL::text[];
		END IF;
		RETURN QUERY SELECT 'fault', 'publication ' || pub.pubname,
			format('publishes every table of schema %I', n.nspname), 'shape', me, NULL::text[]
			FROM pg_publication_namespace pn JOIN pg_namespace n ON n.oid = pn.pnnspid
			WHERE pn.pnpubid = pub.oid;
		-- from the catalogs, not pg_publication_tables, which locks each
		-- table: a table locked by a session must not stop status
		FOR r IN
			SELECT pr.oid, t.oid AS rel, format('%I.%I', n.nspname, t.relname) AS tbl, t.relkind,
				   pr.prqual IS NOT NULL AS filtered, pr.prattrs IS NOT NULL AS columns,
				   EXISTS (SELECT FROM @extschema@.snowflake_mesh_objects o
						   WHERE o.publication = snowflake_mesh_state.publication AND o.kind = 'table'
							 AND o.object = pr.oid AND o.system_identifier = sys) AS recorded,
				   (SELECT c.oid
					FROM (SELECT t.oid AS relid, 0 AS level UNION SELECT p.relid, p.level FROM pg_partition_tree(t.oid) p) x
					JOIN pg_class c ON c.oid = x.relid
					WHERE c.relkind = 'r'
					  AND NOT (c.relreplident = 'f'
							   OR c.relreplident = 'd' AND EXISTS (SELECT FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary)
							   OR c.relreplident = 'i' AND EXISTS (SELECT FROM pg_index i WHERE i.indrelid = c.oid AND i.indisreplident))
					ORDER BY x.level, c.oid LIMIT 1)::regclass::text AS no_identity
			FROM pg_publication_rel pr JOIN pg_class t ON t.oid = pr.prrelid
			JOIN pg_namespace n ON n.oid = t.relnamespace
			WHERE pr.prpubid = pub.oid
			ORDER BY 3
		LOOP
			RETURN QUERY SELECT 'published', pub.pubname::text, r.tbl, NULL::text, me, NULL::text[];
			IF r.filtered THEN
				RETURN QUERY SELECT 'fault', 'publication ' || pub.pubname,
					format('publishes only the rows of %s that its row filter lets through: the others reach no member', r.tbl),
					'shape', me, NULL::text[];
			END IF;
			IF r.columns THEN
				RETURN QUERY SELECT 'fault', 'publication ' || pub.pubname,
					format('publishes only some columns of %s (a column list): the others reach no member', r.tbl),
					'shape', me, NULL::text[];
			END IF;
			IF NOT r.recorded THEN
				RETURN QUERY SELECT 'fault', 'publication ' || pub.pubname,
					format('has %s, put in by hand, not by snowflake-mesh add-table: rows written while it was out of the mesh may differ; compare the members with status --rows, then SELECT snowflake.snowflake_mesh_record(%L) here', r.tbl, publication),
					'shape', me, NULL::text[];
			END IF;
			IF r.no_identity IS NOT NULL THEN
				RETURN QUERY SELECT 'fault', 'table ' || r.tbl,
					format('has no replica identity%s: every UPDATE and DELETE of it fails on this node',
						   CASE WHEN r.no_identity <> r.rel::regclass::text THEN format(' (its partition %s)', r.no_identity) ELSE '' END),
					'shape', me, NULL::text[];
			END IF;
			-- a trigger of the table's owner that fires for the rows the
			-- apply writes can change or drop them on this node alone
			RETURN QUERY SELECT 'hint', 'table ' || r.tbl,
				format('has trigger %I enabled %s on %s: it fires for the rows replication applies here, and if it changes or drops them the members differ',
					   tg.tgname, CASE tg.tgenabled WHEN 'A' THEN 'ALWAYS' ELSE 'REPLICA' END, tg.tgrelid::regclass),
				NULL::text, me, NULL::text[]
				FROM pg_trigger tg
				WHERE tg.tgenabled IN ('A', 'R') AND NOT tg.tgisinternal
				  AND tg.tgrelid IN (SELECT r.rel UNION SELECT p.relid FROM pg_partition_tree(r.rel) p)
				  AND r.rel <> '@extschema@.snowflake_workers'::regclass;
			IF r.relkind = 'p' AND NOT pub.pubviaroot THEN
				RETURN QUERY SELECT 'fault', 'publication ' || pub.pubname,
					format('publishes the partitions of %s apart (publish_via_partition_root is off): ALTER PUBLICATION %I SET (publish_via_partition_root = true)', r.tbl, pub.pubname),
					'shape', me, NULL::text[];
			END IF;
		END LOOP;
		RETURN QUERY SELECT 'fault', 'publication ' || pub.pubname,
			format('no longer has %s, which snowflake-mesh put in: its changes on this node reach no member', coalesce(o.relation::regclass::text, o.relation::text)),
			'shape', me, NULL::text[]
			FROM @extschema@.snowflake_mesh_objects o
			WHERE o.publication = snowflake_mesh_state.publication AND o.kind = 'table' AND o.system_identifier = sys
			  AND NOT EXISTS (SELECT FROM pg_publication_rel pr WHERE pr.oid = o.object);
		IF NOT EXISTS (SELECT FROM pg_publication_rel pr
					   WHERE pr.prpubid = pub.oid AND pr.prrelid = '@extschema@.snowflake_workers'::regclass) THEN
			RETURN QUERY SELECT 'fault', 'publication ' || pub.pubname,
				'does not publish snowflake.snowflake_workers: this node''s claims reach no member', 'shape', me, NULL::text[];
		END IF;
	END IF;

	-- the subscriptions recorded as the mesh's
	FOR r IN
		SELECT s.oid, s.subname, s.subenabled, o.from_worker, s.subpublications, s.subslotname,
			   s.subowner::regrole::text AS owner, ow.rolsuper,
			   coalesce(to_jsonb(s) ->> 'suborigin', 'any') AS origin,
			   coalesce((to_jsonb(s) ->> 'subskiplsn')::pg_lsn, '0/0'::pg_lsn) AS skiplsn,
			   EXISTS (SELECT FROM pg_stat_subscription st
					   WHERE st.subid = s.oid AND st.relid IS NULL AND st.pid IS NOT NULL) AS running,
			   (SELECT count(*) FROM pg_subscription_rel sr WHERE sr.srsubid = s.oid AND sr.srsubstate <> 'r') AS syncing,
			   (SELECT st.latest_end_lsn FROM pg_stat_subscription st
				WHERE st.subid = s.oid AND st.relid IS NULL) AS received,
			   coalesce(x.apply_errors, 0) AS apply_errors, coalesce(x.sync_errors, 0) AS sync_errors,
			   x.missing, x.differs
		FROM @extschema@.snowflake_mesh_objects o
		JOIN pg_subscription s ON s.oid = o.object
		JOIN pg_roles ow ON ow.oid = s.subowner
		LEFT JOIN (SELECT ss.subid,
						  sum(e.value::bigint) FILTER (WHERE e.key = 'apply_error_count') AS apply_errors,
						  sum(e.value::bigint) FILTER (WHERE e.key LIKE 'sync%error_count') AS sync_errors,
						  sum(e.value::bigint) FILTER (WHERE e.key LIKE 'confl\_%\_missing') AS missing,
						  sum(e.value::bigint) FILTER (WHERE e.key LIKE 'confl\_%' AND e.key NOT LIKE 'confl\_%\_missing') AS differs
				   FROM pg_stat_subscription_stats ss, jsonb_each_text(to_jsonb(ss)) e
				   GROUP BY ss.subid) x ON x.subid = s.oid
		WHERE o.publication = snowflake_mesh_state.publication AND o.kind = 'subscription'
		  AND o.system_identifier = sys AND s.subdbid = db
		ORDER BY o.from_worker, s.subname
	LOOP
		RETURN QUERY SELECT 'subscription', r.subname::text,
			format('%s, %s, %s apply errors, %s sync errors, %s, %s tables not ready, received up to %s',
				   CASE WHEN r.subenabled THEN 'enabled' ELSE 'disabled' END,
				   CASE WHEN r.running THEN 'running' ELSE 'not running' END,
				   r.apply_errors, r.sync_errors,
				   CASE WHEN r.missing IS NULL THEN 'changes skipped not counted'
						ELSE format('%s changes skipped', r.missing) END,
				   r.syncing, coalesce(r.received::text, '-')), NULL::text, r.from_worker, r.subpublications;
		IF NOT r.rolsuper THEN
			RETURN QUERY SELECT 'fault', r.subname::text,
				format('is owned by role %s, not a superuser: it is not the mesh''s', r.owner), 'shape', r.from_worker, NULL::text[];
		END IF;
		IF NOT r.subenabled THEN
			RETURN QUERY SELECT 'fault', r.subname::text, 'is disabled', 'failing', r.from_worker, NULL::text[];
		ELSIF NOT r.running THEN
			RETURN QUERY SELECT 'fault', r.subname::text, 'is not running', 'failing', r.from_worker, NULL::text[];
		END IF;
		IF r.apply_errors > 0 THEN
			RETURN QUERY SELECT 'fault', r.subname::text, format('had %s apply errors', r.apply_errors), 'failing', r.from_worker, NULL::text[];
		END IF;
		IF r.sync_errors > 0 THEN
			RETURN QUERY SELECT 'fault', r.subname::text, format('had %s table synchronization errors', r.sync_errors), 'failing', r.from_worker, NULL::text[];
		END IF;
		IF r.syncing > 0 THEN
			RETURN QUERY SELECT 'fault', r.subname::text, format('has %s tables not yet synchronized', r.syncing), 'failing', r.from_worker, NULL::text[];
		END IF;
		IF r.missing > 0 THEN
			RETURN QUERY SELECT 'fault', r.subname::text,
				format('skipped %s changes to rows it did not have (update_missing, delete_missing): the nodes differ', r.missing),
				'lost', r.from_worker, NULL::text[];
		END IF;
		-- 18 counts every change to a row another node changed last
		-- (*_origin_differs), at once or not: a hint, not a fault
		IF r.differs > 0 THEN
			RETURN QUERY SELECT 'hint', r.subname::text,
				format('met %s conflicts: changes to rows another node had changed last; if two nodes changed one row at once, they may differ (compare with --rows)', r.differs),
				NULL::text, r.from_worker, NULL::text[];
		END IF;
		IF r.origin <> 'none' THEN
			RETURN QUERY SELECT 'fault', r.subname::text,
				format('takes the changes of every origin (origin = %s), so rows come twice; ALTER SUBSCRIPTION %I SET (origin = none)', r.origin, r.subname),
				'shape', r.from_worker, NULL::text[];
		END IF;
		IF r.skiplsn <> '0/0'::pg_lsn THEN
			RETURN QUERY SELECT 'fault', r.subname::text,
				format('is set to skip the transaction that ends at %s (ALTER SUBSCRIPTION ... SKIP): its changes would be lost', r.skiplsn),
				'shape', r.from_worker, NULL::text[];
		END IF;
		IF r.subslotname IS DISTINCT FROM format('%s_w%s_to_w%s', publication, r.from_worker, me)::name THEN
			RETURN QUERY SELECT 'fault', r.subname::text,
				format('uses slot %s, not %s', coalesce(r.subslotname::text, 'NONE'), format('%s_w%s_to_w%s', publication, r.from_worker, me)),
				'shape', r.from_worker, NULL::text[];
		END IF;
		RETURN QUERY SELECT 'subscribed', r.subname::text, format('%I.%I', n.nspname, cl.relname), NULL::text, r.from_worker, NULL::text[]
			FROM pg_subscription_rel sr JOIN pg_class cl ON cl.oid = sr.srrelid
			JOIN pg_namespace n ON n.oid = cl.relnamespace
			WHERE sr.srsubid = r.oid ORDER BY 3;
	END LOOP;
	-- others named like the mesh's: a superuser's, not recorded, may be
	-- one made again by hand; another role's is not the mesh's
	FOR r IN
		SELECT s.subname, s.subowner::regrole::text AS owner, ow.rolsuper
		FROM pg_subscription s JOIN pg_roles ow ON ow.oid = s.subowner
		WHERE s.subdbid = db AND s.subname ~ pattern
		  AND NOT EXISTS (SELECT FROM @extschema@.snowflake_mesh_objects o
						  WHERE o.publication = snowflake_mesh_state.publication AND o.kind = 'subscription'
							AND o.object = s.oid AND o.system_identifier = sys)
		ORDER BY s.subname
	LOOP
		IF r.rolsuper THEN
			RETURN QUERY SELECT 'fault', r.subname::text,
				format('is named as the mesh''s but is not recorded as one (made by hand, or by an earlier snowflake-mesh): compare the members with status --rows, then SELECT snowflake.snowflake_mesh_record(%L) here, or drop it', publication),
				'shape', NULL::integer, NULL::text[];
		ELSE
			RETURN QUERY SELECT 'hint', r.subname::text,
				format('is owned by role %s, not a superuser: it is not the mesh''s, and the mesh leaves it alone', r.owner),
				NULL::text, NULL::integer, NULL::text[];
		END IF;
	END LOOP;

	FOR r IN
		SELECT s.slot_name, s.active,
			   coalesce(s.wal_status, '') = 'lost' OR coalesce(to_jsonb(s) ->> 'invalidation_reason', '') <> '' AS invalidated,
			   pg_wal_lsn_diff(pg_current_wal_lsn(), s.confirmed_flush_lsn)::bigint AS behind,
			   substring(s.slot_name FROM '_to_w([0-9]+)$')::integer AS for_worker
		FROM pg_replication_slots s
		WHERE s.datoid = db AND s.slot_name ~ ('^' || publication || '_w' || me || '_to_w[0-9]+$')
		ORDER BY s.slot_name
	LOOP
		RETURN QUERY SELECT 'slot', r.slot_name::text,
			format('%s, %s, %s bytes behind', CASE WHEN r.active THEN 'active' ELSE 'inactive' END,
				   CASE WHEN r.invalidated THEN 'invalidated' ELSE 'valid' END, r.behind),
			NULL::text, r.for_worker, NULL::text[];
		IF r.invalidated THEN
			RETURN QUERY SELECT 'fault', 'slot ' || r.slot_name,
				'is invalidated: its subscriber can no longer get the rows; that node must leave and join again', 'lost',
				r.for_worker, NULL::text[];
		ELSIF NOT r.active THEN
			RETURN QUERY SELECT 'fault', 'slot ' || r.slot_name, 'is inactive', 'failing', r.for_worker, NULL::text[];
		END IF;
	END LOOP;

	RETURN QUERY SELECT 'claim', w.worker_id::text, w.system_identifier::text, NULL::text, w.worker_id, NULL::text[]
		FROM @extschema@.snowflake_workers w ORDER BY w.worker_id;
	-- where the worker id in force came from: the mesh's record of the id
	-- it gave this system, or a person
	RETURN QUERY SELECT 'worker', me::text,
		CASE WHEN EXISTS (SELECT FROM @extschema@.snowflake_mesh_objects o
						  WHERE o.publication = snowflake_mesh_state.publication AND o.kind = 'worker'
							AND o.from_worker = me AND o.system_identifier = sys)
			 THEN 'given by the mesh' ELSE 'set by hand' END,
		NULL::text, me, NULL::text[];

	SELECT * INTO chg FROM @extschema@.snowflake_mesh_changes x WHERE x.publication = snowflake_mesh_state.publication;
	IF FOUND THEN
		RETURN QUERY SELECT 'change', chg.run, chg.change, NULL::text, me, NULL::text[];
		IF @extschema@.snowflake_mesh_holders(1397640531, hashtext(publication)) IS NULL THEN
			RETURN QUERY SELECT 'fault', 'change', format('%s, run %s, since %s, was not finished', chg.change, chg.run, chg.since), 'shape', me, NULL::text[];
		ELSE
			RETURN QUERY SELECT 'fault', 'change', format('%s, run %s, since %s, is under way', chg.change, chg.run, chg.since), 'shape', me, NULL::text[];
		END IF;
	END IF;
	RETURN QUERY SELECT 'fault', 'table ' || tg.tgrelid::regclass::text,
		'is held by a change of the mesh: its writes wait while the change holds them, and pay for a trigger (snowflake-mesh abort or unlock, if the change did not finish)',
		'shape', me, NULL::text[]
		FROM pg_trigger tg
		WHERE tg.tgname = 'snowflake_mesh_hold' AND tg.tgfoid = '@extschema@.snowflake_mesh_held()'::regprocedure;
	RETURN QUERY SELECT 'fence', f.tbl::text, f.why, NULL::text, me, NULL::text[] FROM @extschema@.snowflake_mesh_fences() f;
	RETURN QUERY SELECT 'fault', 'table ' || f.tbl::text,
		CASE f.why
			WHEN 'left' THEN 'refuses writes: this node left the mesh (SELECT snowflake.snowflake_mesh_unfence() lets it write alone)'
			WHEN 'failed' THEN 'refuses writes: a join of this node was taken back (empty its tables and join it again, or SELECT snowflake.snowflake_mesh_unfence() to let it write alone)'
			ELSE 'refuses writes: a join or a leave of this node is under way or did not finish (snowflake-mesh abort or unlock)' END
		|| CASE WHEN f.enabled THEN '' ELSE ', but its fence''s trigger is disabled: it takes writes all the same' END,
		'shape', me, NULL::text[]
		FROM @extschema@.snowflake_mesh_fences() f;
	IF NOT current_setting('track_commit_timestamp')::boolean THEN
		RETURN QUERY SELECT 'hint', 'track_commit_timestamp', 'is off: a row updated on two nodes at once is not detected',
			NULL::text, me, NULL::text[];
	END IF;
END $$;

COMMENT ON FUNCTION snowflake_mesh_state(name) IS
'this node''s part of the mesh: publication, subscriptions, slots, tables, claims, where its worker id came from, changes, and the faults found here';

REVOKE ALL ON FUNCTION snowflake_mesh_state(name) FROM PUBLIC;
-- @end mesh

-- @begin registry
--
-- The worker id registry: in a database that a fleet of servers names in
-- snowflake.registry, a lease of one worker id per system (by its system
-- identifier), so that servers without snowflake.worker_id take one each.
-- The constraints keep two live leases off one worker id and one system
-- off two: a lease that loses a race to another meets a unique violation
-- and looks again, never a read-then-write.
--
CREATE TABLE snowflake_registry (
	worker_id integer PRIMARY KEY CHECK (worker_id >= 0),
	system_identifier bigint NOT NULL,
	-- the random token of the one server of that system that holds it
	token bigint NOT NULL,
	node_name text,
	leased_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
	released_at timestamptz,
	floor bigint NOT NULL DEFAULT 0 CHECK (floor >= 0)
);

COMMENT ON TABLE snowflake_registry IS
'worker ids leased to the systems of a fleet: one live lease per system and per worker id; a released id goes to its next holder with the floor its last holder reached';

-- one live lease per system
CREATE UNIQUE INDEX snowflake_registry_live ON snowflake_registry (system_identifier)
WHERE released_at IS NULL;

SELECT pg_catalog.pg_extension_config_dump('@extschema@.snowflake_registry', '');

-- Only superusers change the leases (the lease function runs as its
-- owner), whatever privileges a role holds: pg_write_all_data grants
-- INSERT, UPDATE and DELETE on every table.
CREATE FUNCTION snowflake_registry_guard()
RETURNS trigger
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = current_user AND rolsuper) THEN
		RAISE EXCEPTION 'permission denied to change the worker id registry'
			USING ERRCODE = 'insufficient_privilege',
				  DETAIL = 'Leases change only through snowflake_registry_lease() and, for a superuser, snowflake_registry_release().';
	END IF;
	RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
END $$;

COMMENT ON FUNCTION snowflake_registry_guard() IS
'trigger: only a superuser (or the lease function, which runs as its owner) changes snowflake_registry';

REVOKE ALL ON FUNCTION snowflake_registry_guard() FROM PUBLIC;

-- (TRUNCATE needs its own privilege, which no predefined role grants)
CREATE TRIGGER snowflake_registry_guard BEFORE INSERT OR UPDATE OR DELETE ON snowflake_registry
FOR EACH ROW EXECUTE FUNCTION snowflake_registry_guard();
-- also when a subscription applies a change (session_replication_role =
-- replica), as snowflake_workers' guard is
ALTER TABLE snowflake_registry ENABLE ALWAYS TRIGGER snowflake_registry_guard;

-- The lease of a server: its system's live lease if the server holds it
-- (the token it sent with its first request: a restart or a crash before
-- its node recorded the lease gets the same worker id), else the lowest
-- released worker id up to max_worker, with the floor its last holder
-- reached, else the lowest never given, from 1 up (0 is left to nodes set
-- by hand, as the mesh does).  A live lease of the system under another
-- token is another server's (a copy, or a server made from one data
-- directory image): SR002, never the same worker id.  Runs as its owner:
-- a role the registry's admin grants EXECUTE to leases without any right
-- on the table.  Only READ COMMITTED sees the row a concurrent lease
-- committed after a unique violation; the retries are bounded all the same.
-- max_worker is at most 65535, the widest worker field of the named layouts.
-- held, when not 0, is the worker id the server holds in its own record
-- (its renewal, at each start of the server and every five minutes): the
-- registry confirms it, or takes it back for the server where the
-- registry lost the lease (restored from an older backup, failed over to
-- a standby without its commit) or a superuser released it meanwhile,
-- with the floor the release gave; where another lease holds it now,
-- SR005, and the node refuses (55S12).
CREATE FUNCTION snowflake_registry_lease(system_identifier bigint, token bigint,
										 node_name text, max_worker integer,
										 held integer)
RETURNS TABLE (worker_id integer, floor bigint)
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- a lease some session holds uncommitted does not stall every other
SET lock_timeout = '5s'
AS $$
#variable_conflict use_column
DECLARE
	held_token bigint;
	held_worker integer;
	held_floor bigint;
	other bigint;
BEGIN
	IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
		RAISE EXCEPTION 'snowflake_registry_lease() runs only at isolation level READ COMMITTED'
			USING ERRCODE = 'SR003',
				  DETAIL = pg_catalog.format('The transaction runs at %s, whose snapshot does not see a lease committed meanwhile.',
											pg_catalog.current_setting('transaction_isolation')),
				  HINT = 'Call it outside an explicit transaction, or in one at READ COMMITTED.';
	END IF;
	IF $4 < 0 OR $4 > 65535 THEN
		RAISE EXCEPTION 'max_worker % is out of range', $4
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = 'It must be between 0 and 65535, the widest worker field of the named layouts.';
	END IF;
	IF $5 < 0 OR $5 > $4 THEN
		RAISE EXCEPTION 'held worker id % is out of range', $5
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = 'It must be between 0 (none) and max_worker.';
	END IF;
	FOR attempt IN 1..100 LOOP
		IF $5 <> 0 THEN
			-- a renewal, judged by its worker id's row first: live for this
			-- system, confirmed (under any token: a standby made before its
			-- primary's first request holds the lease through WAL, without
			-- the token; servers of one system that run at once are the
			-- node's copy detection's to hold); live for another, SR005
			SELECT r.system_identifier, r.floor INTO other, held_floor
				FROM @extschema@.snowflake_registry r
				WHERE r.worker_id = $5 AND r.released_at IS NULL;
			IF FOUND AND other = $1 THEN
				RETURN QUERY SELECT $5, held_floor;
				RETURN;
			ELSIF FOUND THEN
				RAISE EXCEPTION 'worker id % is leased to another server', $5
					USING ERRCODE = 'SR005',
						  DETAIL = pg_catalog.format('The server holds it in its own record; the registry leases it to a server of system %s.', other),
						  HINT = 'Set snowflake.worker_id on the server that asked; or, once the other server is gone for good with every standby of it, release its lease of this worker id with snowflake_registry_release(), giving the floor its IDs reached.';
			END IF;
			-- not live: lost by the registry or released; this system's
			-- lease held by another server, or another lease of this server,
			-- stands in the way
			SELECT r.worker_id INTO held_worker FROM @extschema@.snowflake_registry r
				WHERE r.system_identifier = $1 AND r.released_at IS NULL;
			IF FOUND AND held_worker = $5 THEN
				-- its system leased it meanwhile: the first look confirms it
				CONTINUE;
			ELSIF FOUND THEN
				RAISE EXCEPTION 'worker id % cannot be renewed: its system holds another lease', $5
					USING ERRCODE = 'SR005',
						  DETAIL = pg_catalog.format('The server holds worker id %s in its own record; the registry leases worker id %s to its system now.', $5, held_worker),
						  HINT = 'Set snowflake.worker_id on the server that asked; or, once no server runs under the system''s other lease with every standby of it gone, release that lease with snowflake_registry_release(), giving the floor its IDs reached.';
			END IF;
			BEGIN
				RETURN QUERY UPDATE @extschema@.snowflake_registry r
					SET system_identifier = $1, token = $2, node_name = $3,
						leased_at = pg_catalog.now(), released_at = NULL
					WHERE r.worker_id = $5 AND r.released_at IS NOT NULL
					RETURNING r.worker_id, r.floor;
				IF FOUND THEN
					RETURN;
				END IF;
				RETURN QUERY INSERT INTO @extschema@.snowflake_registry AS r
					(worker_id, system_identifier, token, node_name)
					VALUES ($5, $1, $2, $3)
					RETURNING r.worker_id, r.floor;
				RETURN;
			EXCEPTION WHEN unique_violation THEN
				-- a lease took it meanwhile, or this system leased: look again
				NULL;
			END;
			CONTINUE;
		END IF;
		-- one statement: the lease returned is the one whose token was read
		SELECT r.token, r.worker_id, r.floor INTO held_token, held_worker, held_floor
			FROM @extschema@.snowflake_registry r
			WHERE r.system_identifier = $1 AND r.released_at IS NULL;
		IF FOUND THEN
			IF held_token <> $2 THEN
				RAISE EXCEPTION 'another server of system % holds its lease', $1
					USING ERRCODE = 'SR002',
						  DETAIL = 'Its live lease was given to a server with another token: this server is a copy or a restore of that server, or both were made from the same data directory image.',
						  HINT = 'If the server that holds the lease is gone for good, with every standby of it, and this one is its restore, release the holder''s worker id with snowflake_registry_release(), giving the floor its IDs reached; otherwise set snowflake.worker_id on this server, or initdb it afresh.';
			END IF;
			RETURN QUERY SELECT held_worker, held_floor;
			RETURN;
		END IF;
		BEGIN
			-- the lowest released one; a concurrent taker of the same row
			-- finds it live once it waited, and takes none
			RETURN QUERY UPDATE @extschema@.snowflake_registry r
				SET system_identifier = $1, token = $2, node_name = $3,
					leased_at = pg_catalog.now(), released_at = NULL
				WHERE r.worker_id = (SELECT pg_catalog.min(x.worker_id)
									 FROM @extschema@.snowflake_registry x
									 WHERE x.released_at IS NOT NULL AND x.worker_id <= $4)
				  AND r.released_at IS NOT NULL
				RETURNING r.worker_id, r.floor;
			IF FOUND THEN
				RETURN;
			END IF;
			IF NOT EXISTS (SELECT FROM @extschema@.snowflake_registry x
						   WHERE x.released_at IS NOT NULL AND x.worker_id <= $4) THEN
				RETURN QUERY INSERT INTO @extschema@.snowflake_registry AS r
					(worker_id, system_identifier, token, node_name)
					SELECT pg_catalog.min(g), $1, $2, $3
					FROM pg_catalog.generate_series(1, $4) g
					WHERE NOT EXISTS (SELECT FROM @extschema@.snowflake_registry x
									  WHERE x.worker_id = g)
					HAVING pg_catalog.min(g) IS NOT NULL
					RETURNING r.worker_id, r.floor;
				IF FOUND THEN
					RETURN;
				END IF;
				RAISE EXCEPTION 'the worker id registry has no free worker id up to %', $4
					USING ERRCODE = 'SR001',
						  DETAIL = 'Every worker id from 1 up to it is leased, and none is released.',
						  HINT = 'Release the worker id of a server that is gone with snowflake_registry_release(), with the floor its IDs reached.';
			END IF;
		EXCEPTION WHEN unique_violation THEN
			-- another lease took that worker id, or this system leased meanwhile
			NULL;
		END;
	END LOOP;
	RAISE EXCEPTION 'snowflake_registry_lease() gave up after 100 concurrent changes'
		USING ERRCODE = 'SR004',
			  DETAIL = 'Each try met a lease that other sessions committed meanwhile.',
			  HINT = 'Call it again.';
END $$;

COMMENT ON FUNCTION snowflake_registry_lease(bigint, bigint, text, integer, integer) IS
'lease a worker id to a server (a system and its token): its live lease, the lowest released one (with its floor), or the lowest never given, up to max_worker; with held, renew the lease the server holds';

REVOKE ALL ON FUNCTION snowflake_registry_lease(bigint, bigint, text, integer, integer) FROM PUBLIC;

-- A superuser gives a worker id back, with the highest ID its holder may
-- have issued (its snowflake_status.high_water_mark, or an ID of a time
-- after it stopped): the next holder issues only above it.  false: no
-- live lease of that worker id.
CREATE FUNCTION snowflake_registry_release(worker_id integer, floor bigint)
RETURNS boolean
LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
	IF $2 < 0 THEN
		RAISE EXCEPTION 'floor must not be negative'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	UPDATE @extschema@.snowflake_registry r
	SET released_at = pg_catalog.now(), floor = GREATEST(r.floor, $2)
	WHERE r.worker_id = $1 AND r.released_at IS NULL;
	RETURN FOUND;
END $$;

COMMENT ON FUNCTION snowflake_registry_release(integer, bigint) IS
'release a leased worker id, with the floor its holder''s IDs reached: its next holder issues only above it';

REVOKE ALL ON FUNCTION snowflake_registry_release(integer, bigint) FROM PUBLIC;
-- @end registry

-- @begin status_view
-- The function's row, with a worker id that snowflake-mesh set in the
-- configuration shown as the mesh's: the mesh records the id it gave in
-- snowflake_mesh_objects (kind 'worker'), and an id changed by hand
-- afterwards reads as configured.  After the mesh's table, which it reads
-- with the view owner's rights.
CREATE VIEW snowflake_status AS
SELECT s.state, s.reason, s.worker_id, s.layout, s.last_id, s.last_id_time,
	s.ids_issued, s.waits, s.clock_back_events, s.clock_back_max_ms,
	s.run_ahead_ids, s.run_ahead_ms, s.refused, s.high_water_mark,
	s.high_water_mark_time, s.started_at,
	CASE WHEN s.worker_id_source = 'configured' AND
			  EXISTS (SELECT FROM @extschema@.snowflake_mesh_objects o
					  WHERE o.kind = 'worker' AND o.from_worker = s.worker_id)
		 THEN 'mesh' ELSE s.worker_id_source END AS worker_id_source
FROM @extschema@.snowflake_status() s;

COMMENT ON VIEW snowflake_status IS
'state and counters of this node''s generator since the server started, and where its worker id came from';

GRANT SELECT ON snowflake_status TO PUBLIC;
-- @end status_view

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
