/* snowflake 1.1 -> 1.2 */
\echo Use "ALTER EXTENSION snowflake UPDATE TO '1.2'" to load this file. \quit

-- 1.1 lived where CREATE EXTENSION put it (README said public); 1.2 lives
-- in the schema snowflake.  @extschema@ in this script is 1.1's schema;
-- the blocks at the start move every member of the extension into
-- snowflake, and the one at the end checks that schema again.  A function
-- body written here names snowflake., never @extschema@.

--
-- Into the schema snowflake, which only superusers may own or create in:
-- the same check as a fresh install, then every member moves there, and
-- the extension with them.  Nothing in 1.1's schema is trusted: every name
-- is qualified.
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

DO $$
DECLARE
	ext oid;
	from_nsp oid;
	to_nsp oid;
	m record;
BEGIN
	PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
	SELECT e.oid, e.extnamespace INTO ext, from_nsp FROM pg_extension e WHERE e.extname = 'snowflake';
	to_nsp := to_regnamespace('snowflake');
	IF to_nsp IS NULL THEN
		-- made by the installing superuser, not a member: as a fresh install has it
		CREATE SCHEMA snowflake;
		ALTER EXTENSION snowflake DROP SCHEMA snowflake;
		to_nsp := to_regnamespace('snowflake');
	END IF;
	IF from_nsp = to_nsp THEN
		RETURN;
	END IF;
	FOR m IN
		SELECT d.classid, d.objid, c.relkind
		FROM pg_depend d LEFT JOIN pg_class c ON d.classid = 'pg_class'::regclass AND c.oid = d.objid
		WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext AND d.deptype = 'e'
		ORDER BY d.classid, d.objid
	LOOP
		IF m.classid = 'pg_proc'::regclass THEN
			EXECUTE format('ALTER ROUTINE %s SET SCHEMA snowflake', m.objid::regprocedure);
		ELSIF m.relkind = 'r' THEN
			EXECUTE format('ALTER TABLE %s SET SCHEMA snowflake', m.objid::regclass);
		ELSIF m.relkind = 'v' THEN
			EXECUTE format('ALTER VIEW %s SET SCHEMA snowflake', m.objid::regclass);
		ELSIF m.classid = 'pg_type'::regclass THEN
			-- a row type or an array type (a member on some versions) moves
			-- with its relation or element type
			IF NOT EXISTS (SELECT FROM pg_type t WHERE t.oid = m.objid
						   AND (t.typrelid <> 0 OR t.typelem <> 0)) THEN
				EXECUTE format('ALTER TYPE %s SET SCHEMA snowflake', m.objid::regtype);
			END IF;
		ELSE
			RAISE EXCEPTION 'cannot move %', pg_describe_object(m.classid, m.objid, 0);
		END IF;
	END LOOP;
	UPDATE pg_extension SET extnamespace = to_nsp WHERE oid = ext;
	UPDATE pg_depend SET refobjid = to_nsp
	WHERE classid = 'pg_extension'::regclass AND objid = ext
	  AND refclassid = 'pg_namespace'::regclass AND refobjid = from_nsp;
END $$;

GRANT USAGE ON SCHEMA snowflake TO PUBLIC;

REVOKE ALL ON FUNCTION snowflake.decimal_id_nextval() FROM PUBLIC;

--
-- Functions tell the truth (issue 20).  The variants that name a layout
-- take a custom layout only by a name that carries its parameters, and
-- ShardingSphere's for a JVM's time zone as shardingsphere@ZONE (issue 26);
-- the range bound's comment states its tick rounding.
--
COMMENT ON FUNCTION snowflake.snowflake_decode(bigint, text) IS
'time, worker id and sequence number of an ID of the named layout (a preset, ''shardingsphere@ZONE'' or ''custom:T/W/S/Nms/EPOCH'')';

COMMENT ON FUNCTION snowflake.snowflake_timestamp(bigint, text) IS
'time at which an ID of the named layout (a preset, ''shardingsphere@ZONE'' or ''custom:T/W/S/Nms/EPOCH'') was generated, to the tick';

COMMENT ON FUNCTION snowflake.snowflake_from_timestamp(timestamptz) IS
'smallest ID of the tick that holds that time, in the server''s layout: a bound for range scans on the key';

COMMENT ON FUNCTION snowflake.snowflake_from_timestamp(timestamptz, text) IS
'smallest ID of the tick that holds that time, in the named layout (a preset, ''shardingsphere@ZONE'' or ''custom:T/W/S/Nms/EPOCH'')';

-- A repair far ahead of the clock needs force, which also lowers the state.
DROP FUNCTION snowflake.snowflake_repair_state(bigint);

CREATE FUNCTION snowflake.snowflake_repair_state(above bigint DEFAULT 0, force boolean DEFAULT false)
RETURNS bigint
AS 'MODULE_PATHNAME', 'snowflake_repair_state'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION snowflake.snowflake_repair_state(bigint, boolean) IS
'rewrite a damaged snowflake.state: continue above the given ID and every reservation replayed from WAL since the server started; force accepts a value far ahead of the clock, and undoes an earlier repair while no ID was issued above it';

REVOKE ALL ON FUNCTION snowflake.snowflake_repair_state(bigint, boolean) FROM PUBLIC;

-- The node's state, and why, first in snowflake_status.  The counters
-- change with every call: VOLATILE.  They live in shared memory, so any
-- process, a parallel worker too, reads the same values.
DROP VIEW snowflake.snowflake_status;
DROP FUNCTION snowflake.snowflake_status();

CREATE FUNCTION snowflake.snowflake_status(
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

COMMENT ON FUNCTION snowflake.snowflake_status() IS
'state and counters of this node''s generator since the server started';

CREATE VIEW snowflake.snowflake_status AS SELECT * FROM snowflake.snowflake_status();

COMMENT ON VIEW snowflake.snowflake_status IS
'state and counters of this node''s generator since the server started';

GRANT SELECT ON snowflake.snowflake_status TO PUBLIC;

-- the bodies that named 1.1's schema, and the checks of 1.2
CREATE OR REPLACE FUNCTION snowflake.snowflake_claim_worker(node_name text DEFAULT NULL)
RETURNS snowflake.snowflake_workers
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	me bigint := (SELECT system_identifier FROM pg_control_system());
	w integer := snowflake.snowflake_worker_id();
	claim snowflake.snowflake_workers;
BEGIN
	SELECT * INTO claim FROM snowflake.snowflake_workers WHERE worker_id = w;
	IF FOUND AND claim.system_identifier <> me THEN
		RAISE EXCEPTION 'worker id % is already claimed by another system', w
			USING ERRCODE = 'unique_violation',
				  DETAIL = format('System %s (node %s) claimed it at %s; this system is %s.',
								  claim.system_identifier, coalesce(claim.node_name, 'unnamed'),
								  claim.claimed_at, me),
				  HINT = 'Give this node a worker id of its own in snowflake.worker_id.';
	END IF;
	IF NOT FOUND THEN
		INSERT INTO snowflake.snowflake_workers (worker_id, system_identifier, node_name)
		VALUES (w, me, snowflake_claim_worker.node_name)
		RETURNING * INTO claim;
	END IF;
	RETURN claim;
END $$;

CREATE OR REPLACE FUNCTION snowflake.snowflake_convert_column(tbl regclass, col name)
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
	PERFORM snowflake.snowflake_worker_id();
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
	ELSIF att.def = 'snowflake.snowflake_nextval()' THEN
		RETURN format('%s.%I already defaults to snowflake.snowflake_nextval(); nothing changed', tbl, col);
	ELSE
		RAISE EXCEPTION 'column "%" of relation % is not filled by a sequence or an identity', col, tbl
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  DETAIL = format('Its default is %s.', coalesce(att.def, 'none')),
				  HINT = 'Set the default by hand: ALTER TABLE ... ALTER COLUMN ... SET DEFAULT snowflake.snowflake_nextval();';
	END IF;

	-- every existing value must be below the IDs the generator will issue
	EXECUTE format('SELECT max(%I) FROM %s', col, tbl) INTO max_value;
	floor_id := snowflake.snowflake_from_timestamp(clock_timestamp());
	IF max_value >= floor_id THEN
		RAISE EXCEPTION 'existing values of %.% reach into the range of snowflake IDs', tbl, col
			USING ERRCODE = 'numeric_value_out_of_range',
				  DETAIL = format('The largest value is %s; snowflake IDs issued now start at %s.', max_value, floor_id);
	END IF;

	IF att.attidentity IN ('a', 'd') THEN
		EXECUTE format('ALTER TABLE %s ALTER COLUMN %I DROP IDENTITY', tbl, col);
		report := report || format('dropped %s and its sequence %s', old_default, seq);
	END IF;
	EXECUTE format('ALTER TABLE %s ALTER COLUMN %I SET DEFAULT snowflake.snowflake_nextval()', tbl, col);
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

--
-- The node's identity: a copy, an upgrade or a restore of a node is held
-- back until it gets a worker id of its own or is confirmed as that node.
--
CREATE FUNCTION snowflake.snowflake_identity_confirm(above bigint, old_data_directory text, stopped_at timestamptz)
RETURNS bigint
AS 'MODULE_PATHNAME', 'snowflake_identity_confirm'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION snowflake.snowflake_identity_confirm(bigint, text, timestamptz) IS
'internal: mark this data directory as the node of its worker id, above the given floor';

REVOKE ALL ON FUNCTION snowflake.snowflake_identity_confirm(bigint, text, timestamptz) FROM PUBLIC;

-- A node that is not the one that issued IDs under its worker id cannot
-- know how far they went: the confirmation always names a floor.
CREATE FUNCTION snowflake.snowflake_confirm_node(above bigint DEFAULT NULL, old_data_directory text DEFAULT NULL,
												 stopped_at timestamptz DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	floor_id bigint := snowflake.snowflake_identity_confirm(above, old_data_directory, stopped_at);
BEGIN
	-- the node's claim follows it to its new system identifier (the worker
	-- id it runs as: released at commit, it refuses until then)
	UPDATE snowflake.snowflake_workers
	SET system_identifier = (SELECT system_identifier FROM pg_control_system())
	WHERE worker_id = pg_catalog.current_setting('snowflake.worker_id')::integer
	  AND system_identifier <> (SELECT system_identifier FROM pg_control_system());
	-- other systems' claims the table holds (pg_upgrade carried the rows,
	-- not the node's record of them) are kept, as claims that arrive are
	PERFORM snowflake.snowflake_identity_claim_seen(w.worker_id, w.system_identifier)
	FROM snowflake.snowflake_workers w
	WHERE w.system_identifier <> (SELECT system_identifier FROM pg_control_system());
	RETURN floor_id;
END $$;

COMMENT ON FUNCTION snowflake.snowflake_confirm_node(bigint, text, timestamptz) IS
'this server is the node of its worker id (restored, upgraded, moved): continue above the given ID, the old data directory''s state or every ID up to the time the node stopped, and generate';

REVOKE ALL ON FUNCTION snowflake.snowflake_confirm_node(bigint, text, timestamptz) FROM PUBLIC;

CREATE FUNCTION snowflake.snowflake_identity_installed()
RETURNS void
AS 'MODULE_PATHNAME', 'snowflake_identity_installed'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION snowflake.snowflake_identity_installed() IS
'internal: the install script ran here, so a data directory without snowflake state is a fresh node';

REVOKE ALL ON FUNCTION snowflake.snowflake_identity_installed() FROM PUBLIC;

CREATE FUNCTION snowflake.snowflake_identity_claim_seen(worker_id integer, system_identifier bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'snowflake_identity_claim_seen'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION snowflake.snowflake_identity_claim_seen(integer, bigint) IS
'internal: another system''s claim of this node''s worker id holds the node back';

REVOKE ALL ON FUNCTION snowflake.snowflake_identity_claim_seen(integer, bigint) FROM PUBLIC;

CREATE FUNCTION snowflake.snowflake_workers_arrived()
RETURNS trigger
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM snowflake.snowflake_identity_claim_seen(NEW.worker_id, NEW.system_identifier);
	RETURN NULL;
END $$;

COMMENT ON FUNCTION snowflake.snowflake_workers_arrived() IS
'trigger: another system''s claim that arrives (a restored dump, replication) holds this node back whenever it names its worker id';

REVOKE ALL ON FUNCTION snowflake.snowflake_workers_arrived() FROM PUBLIC;

CREATE TRIGGER snowflake_workers_arrived AFTER INSERT ON snowflake.snowflake_workers
FOR EACH ROW EXECUTE FUNCTION snowflake.snowflake_workers_arrived();

-- also where triggers are off for replication (session_replication_role =
-- replica: a restore run so, logical replication's apply): a claim that
-- arrives by any of them is kept
ALTER TABLE snowflake.snowflake_workers ENABLE ALWAYS TRIGGER snowflake_workers_arrived;

-- the claims already in the table (a dump of 1.1 restored, then updated):
-- other systems' are kept as if they arrived now
SELECT snowflake.snowflake_identity_claim_seen(worker_id, system_identifier)
FROM snowflake.snowflake_workers;

--
-- Only superusers change the claims, whatever privileges a role holds on
-- the table: pg_write_all_data grants INSERT, UPDATE and DELETE on every
-- table.  Enabled ALWAYS, so that it also fires when a subscription
-- applies changes: a subscription writes claims only as a superuser.
--
CREATE FUNCTION snowflake.snowflake_workers_guard()
RETURNS trigger
AS 'MODULE_PATHNAME', 'snowflake_workers_guard'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION snowflake.snowflake_workers_guard() IS
'trigger: only a superuser inserts, updates, deletes or truncates claims in snowflake_workers, also through logical replication';

REVOKE ALL ON FUNCTION snowflake.snowflake_workers_guard() FROM PUBLIC;

CREATE TRIGGER snowflake_workers_guard BEFORE INSERT OR UPDATE OR DELETE ON snowflake.snowflake_workers
FOR EACH ROW EXECUTE FUNCTION snowflake.snowflake_workers_guard();

CREATE TRIGGER snowflake_workers_guard_truncate BEFORE TRUNCATE ON snowflake.snowflake_workers
FOR EACH STATEMENT EXECUTE FUNCTION snowflake.snowflake_workers_guard();

ALTER TABLE snowflake.snowflake_workers ENABLE ALWAYS TRIGGER snowflake_workers_guard;
ALTER TABLE snowflake.snowflake_workers ENABLE ALWAYS TRIGGER snowflake_workers_guard_truncate;

--
-- Blocks of IDs, for keys assigned before the insert (Hibernate's pooled
-- optimizers, HiLo, a batch of parents and children): n consecutive
-- sequence numbers of one tick, claimed at once.  Marked as
-- snowflake_nextval() is, so that every generating call of a query runs
-- in the leader.
--
CREATE FUNCTION snowflake.snowflake_nextval_block(n integer)
RETURNS bigint
AS 'MODULE_PATHNAME', 'snowflake_nextval_block'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED;

COMMENT ON FUNCTION snowflake.snowflake_nextval_block(integer) IS
'reserves n consecutive IDs of this node, first to first + n - 1, all greater than every ID it issued before, and returns the first';

-- the planner's row estimate: n, when it is known
CREATE FUNCTION snowflake.snowflake_nextval_series_support(internal)
RETURNS internal
AS 'MODULE_PATHNAME', 'snowflake_nextval_series_support'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION snowflake.snowflake_nextval_series_support(internal) IS
'planner support for snowflake_nextval_series(): estimates n rows';

CREATE FUNCTION snowflake.snowflake_nextval_series(n integer)
RETURNS SETOF bigint
AS 'MODULE_PATHNAME', 'snowflake_nextval_series'
LANGUAGE C VOLATILE STRICT PARALLEL RESTRICTED
ROWS 100 SUPPORT snowflake.snowflake_nextval_series_support;

COMMENT ON FUNCTION snowflake.snowflake_nextval_series(integer) IS
'the n IDs of one block of this node, in ascending order, reserved at once as by snowflake_nextval_block()';

-- snowflake_nextval() by a name without "nextval", for the tools that take
-- any column default holding that word for a sequence (MikroORM's schema
-- diff, which then changes the column's type on every run)
CREATE FUNCTION snowflake.snowflake_next_id()
RETURNS bigint
AS 'MODULE_PATHNAME', 'snowflake_nextval'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

COMMENT ON FUNCTION snowflake.snowflake_next_id() IS
'snowflake_nextval() by another name, for column defaults of tools that take a default naming nextval for a sequence';

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
CREATE FUNCTION snowflake.snowflake_narrow_defaults_among(relations oid[], domains oid[])
RETURNS TABLE (relation regclass, attnum smallint, domain regtype, data_type text, rounds boolean,
			   recent boolean, expr pg_node_tree)
LANGUAGE sql STABLE PARALLEL SAFE
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

COMMENT ON FUNCTION snowflake.snowflake_narrow_defaults_among(oid[], oid[]) IS
'internal: the defaults of these relations and domains (all for NULL) that generate snowflake IDs into a type holding no bigint exactly, not deparsed';

CREATE FUNCTION snowflake.snowflake_narrow_defaults()
RETURNS TABLE (relation regclass, column_name name, domain regtype, data_type text, column_default text)
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT f.relation, a.attname, f.domain, f.data_type, pg_catalog.pg_get_expr(f.expr, coalesce(f.relation, 0))
FROM snowflake.snowflake_narrow_defaults_among(NULL, NULL) f
	 LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = f.relation AND a.attnum = f.attnum
$$;

COMMENT ON FUNCTION snowflake.snowflake_narrow_defaults() IS
'columns and domains of a type that holds no bigint exactly (narrower than bigint, floating point) whose default generates snowflake IDs (or DecimalIds, node-partitioned IDs): each fails on its first insert, or rounds the IDs';

-- It runs as the extension's owner (a superuser), so that a role without
-- USAGE on the extension's schema runs its commands as before.  That is
-- safe: it reads catalogs and raises, calls nothing a user chose (a
-- default is deparsed, never run), and names everything by schema with
-- search_path pinned, so no role below superuser can put an object of its
-- own in the way.
CREATE FUNCTION snowflake.snowflake_narrow_defaults_check()
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

COMMENT ON FUNCTION snowflake.snowflake_narrow_defaults_check() IS
'event trigger: refuses a default that generates snowflake IDs on a column or domain of a type that holds no bigint exactly (a warning while a dump is loaded)';

CREATE EVENT TRIGGER snowflake_narrow_defaults_check ON ddl_command_end
WHEN TAG IN ('CREATE TABLE', 'ALTER TABLE', 'CREATE FOREIGN TABLE', 'ALTER FOREIGN TABLE',
			 'ALTER VIEW', 'CREATE DOMAIN', 'ALTER DOMAIN')
EXECUTE FUNCTION snowflake.snowflake_narrow_defaults_check();

COMMENT ON EVENT TRIGGER snowflake_narrow_defaults_check IS
'refuses a default that generates snowflake IDs on a column or domain of a type that holds no bigint exactly';

-- defaults declared before 1.2 refused them: said once, here
DO $$
DECLARE
	n record;
BEGIN
	FOR n IN SELECT * FROM snowflake.snowflake_narrow_defaults() LOOP
		RAISE WARNING '% is of type %, too narrow for snowflake IDs',
			CASE WHEN n.domain IS NULL THEN format('column "%s" of relation %s', n.column_name, n.relation)
				 ELSE format('domain %s', n.domain) END,
			n.data_type
			USING DETAIL = format('Its default %s makes bigint values: its first insert will fail.', n.column_default),
				  HINT = 'Use bigint for it; SELECT * FROM snowflake.snowflake_narrow_defaults() lists every such column and domain.';
	END LOOP;
END $$;

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
