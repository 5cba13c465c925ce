--
-- The mesh's steps on one node (snowflake_mesh_*): who may call them, what
-- they refuse, the lock and its record, tables read as their owners, the
-- publication and its records, the hold of a table being added, the fence
-- of a node that joins or leaves, and the node's state.
-- What takes several nodes is checked by the TAP tests t/mesh_*.pl.
--
\set VERBOSITY default
\set SHOW_CONTEXT never
SET client_min_messages = error;

-- superuser only
CREATE ROLE regress_mesh_nobody;
SET ROLE regress_mesh_nobody;
SELECT snowflake.snowflake_mesh_lock('join of worker 9', 'run-a');
SELECT * FROM snowflake.snowflake_mesh_state();
SELECT snowflake.snowflake_mesh_subscribe(1, 'host=elsewhere', 'snowflake_mesh', true, true, false);
SELECT * FROM snowflake.snowflake_mesh_changes;
RESET ROLE;
DROP ROLE regress_mesh_nobody;
-- nor a role that may write every table: a record of a change steers the
-- lock and the abort
CREATE ROLE regress_mesh_writer IN ROLE pg_write_all_data;
SET ROLE regress_mesh_writer;
INSERT INTO snowflake.snowflake_mesh_changes (publication, change, run)
VALUES ('snowflake_mesh', 'join of worker 9', 'run-x');
-- nor one of the mesh's objects: what the helper takes for the mesh's
INSERT INTO snowflake.snowflake_mesh_objects VALUES ('snowflake_mesh', 'subscription', 1, NULL, 9, 1);
RESET ROLE;
DROP ROLE regress_mesh_writer;

-- the mesh's name must leave room for the names made from it
SELECT snowflake_mesh_lock('join of worker 9', 'run-a', 'Mesh-1');
SELECT snowflake_mesh_state(publication => repeat('m', 41));
SELECT snowflake_mesh_enable(NULL, true);
SELECT snowflake_mesh_unlock('run-a', NULL);

-- the lock, and the record that outlives a session
SELECT snowflake_mesh_lock('join of worker 9', 'run-a');
SELECT snowflake_mesh_lock('join of worker 9', 'run-a');
SELECT publication, change, run FROM snowflake_mesh_changes;
\set VERBOSITY terse
SELECT snowflake_mesh_lock('leave of worker 3', 'run-b');
\set VERBOSITY default
SELECT snowflake_mesh_unlock('run-a');
SELECT count(*) FROM snowflake_mesh_changes;
SELECT snowflake_mesh_lock('join of worker 9', 'run-c');
\c
SET client_min_messages = error;
-- the session before \c ends on its own time: wait until its lock is gone
DO $$
BEGIN
	WHILE EXISTS (SELECT FROM pg_locks l WHERE l.locktype = 'advisory' AND l.classid = 1397640531
				  AND l.pid <> pg_backend_pid()) LOOP
		PERFORM pg_sleep(0.01);
	END LOOP;
END $$;
\set SHOW_CONTEXT never
\set VERBOSITY terse
SELECT snowflake_mesh_lock('leave of worker 3', 'run-d');
\set VERBOSITY default
SELECT kind, name, regexp_replace(detail, 'since .*,', 'since ...,') AS detail, class
FROM snowflake_mesh_state() WHERE kind IN ('change', 'fault') ORDER BY 1, 2;
-- an unfinished change is cleared only on purpose
SELECT snowflake_mesh_unlock('run-d');
SELECT snowflake_mesh_unlock(NULL);
SELECT snowflake_mesh_unlock(NULL);
SELECT count(*) FROM snowflake_mesh_changes;

-- table names: schema public unless named
CREATE TABLE mesh_t (id bigint PRIMARY KEY, v text);
SELECT snowflake_mesh_table('mesh_t') = 'public.mesh_t'::regclass AS resolved,
	   snowflake_mesh_table('"public"."mesh_t"') = 'public.mesh_t'::regclass AS quoted;
SELECT snowflake_mesh_table('no_such_table');
SELECT snowflake_mesh_table('a.b.c');
SET search_path = snowflake, pg_catalog;
SELECT snowflake_mesh_table('mesh_t')::oid = 'public.mesh_t'::regclass::oid AS not_by_search_path;
RESET search_path;

-- read as the owner, and only tables
CREATE ROLE regress_mesh_owner;
ALTER TABLE mesh_t OWNER TO regress_mesh_owner;
SELECT snowflake_mesh_empty('mesh_t');
INSERT INTO mesh_t VALUES (1, 'one'), (2, 'two');
BEGIN;
SELECT snowflake_mesh_empty('mesh_t'), snowflake_mesh_digest('mesh_t');
SELECT current_user = session_user AS role_back;
COMMIT;
ALTER TABLE mesh_t ENABLE ROW LEVEL SECURITY;
SELECT snowflake_mesh_digest('mesh_t');
ALTER TABLE mesh_t FORCE ROW LEVEL SECURITY;
SELECT snowflake_mesh_digest('mesh_t');
ALTER TABLE mesh_t NO FORCE ROW LEVEL SECURITY, DISABLE ROW LEVEL SECURITY;
-- the whole row, also where a column is named as the row is
ALTER TABLE mesh_t ADD COLUMN r int;
SELECT rows, digest AS digest FROM snowflake_mesh_digest('mesh_t') \gset
UPDATE mesh_t SET v = 'changed' WHERE id = 2;
SELECT digest <> :'digest' AS a_changed_row_changes_it FROM snowflake_mesh_digest('mesh_t');
UPDATE mesh_t SET v = 'two' WHERE id = 2;
ALTER TABLE mesh_t DROP COLUMN r;
-- by column name, whatever their order, and whatever the session's
-- settings: the same rows sum the same
CREATE TABLE mesh_a (id bigint PRIMARY KEY, t timestamptz, d date, f float8, i interval, b bytea, m money, n text);
CREATE TABLE mesh_b (n text, m money, b bytea, i interval, f float8, d date, t timestamptz, id bigint PRIMARY KEY);
INSERT INTO mesh_a VALUES (1, '2024-03-01 12:00:00+00', '2024-03-01', 0.1, '1 day 02:03:04', '\x00ff', 12.5, 'x'),
	(2, NULL, NULL, 1e300, NULL, NULL, NULL, NULL);
INSERT INTO mesh_b SELECT n, m, b, i, f, d, t, id FROM mesh_a;
SELECT (SELECT digest FROM snowflake_mesh_digest('mesh_a')) = (SELECT digest FROM snowflake_mesh_digest('mesh_b'))
	AS same_columns_other_order;
SELECT digest AS digest FROM snowflake_mesh_digest('mesh_a') \gset
SET TimeZone = 'Asia/Kathmandu';
SET DateStyle = 'SQL, DMY';
SET IntervalStyle = 'sql_standard';
SET extra_float_digits = -3;
SET bytea_output = 'escape';
SELECT rows, digest = :'digest' AS same_under_other_settings FROM snowflake_mesh_digest('mesh_a');
RESET TimeZone;
RESET DateStyle;
RESET IntervalStyle;
RESET extra_float_digits;
RESET bytea_output;
UPDATE mesh_b SET f = 0.1000000000000001 WHERE id = 1;
SELECT (SELECT digest FROM snowflake_mesh_digest('mesh_a')) <> (SELECT digest FROM snowflake_mesh_digest('mesh_b'))
	AS a_float_apart_in_its_last_digit;
DROP TABLE mesh_a, mesh_b;
-- the worker ids of the generated keys
CREATE TABLE mesh_g (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), other bigint);
SELECT snowflake_mesh_workers('mesh_g') AS none_yet, snowflake_mesh_workers('mesh_t') AS no_generated_column;
INSERT INTO mesh_g (other) VALUES (1), (2);
INSERT INTO mesh_g (id) SELECT id + (1 << 12) FROM mesh_g WHERE other = 1;
SELECT snowflake_mesh_workers('mesh_g') AS workers;
-- a key below the time of the first claim (a value a converted sequence
-- left) is no ID of the layout: whatever worker id it decodes to, it counts
-- for none (with no claim, as here, every key counts)
INSERT INTO mesh_g (id) VALUES (1);
SELECT snowflake_mesh_workers('mesh_g') AS every_key,
	snowflake_mesh_workers('mesh_g', now() - interval '1 day') AS keys_since;
DROP TABLE mesh_g;
CREATE VIEW mesh_v AS SELECT * FROM mesh_t;
SELECT snowflake_mesh_empty('mesh_v');
DROP VIEW mesh_v;

-- the publication: the tables named and the registry, without TRUNCATE,
-- partitioned tables as their root; recorded
SELECT snowflake_mesh_publish(ARRAY['mesh_t']);
SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = 'snowflake_mesh' ORDER BY 1, 2;
SELECT pubinsert, pubupdate, pubdelete, pubtruncate, pubviaroot FROM pg_publication WHERE pubname = 'snowflake_mesh';
SELECT kind, count(*) FROM snowflake_mesh_objects GROUP BY kind ORDER BY kind;
CREATE TABLE mesh_u (id bigint PRIMARY KEY);
SELECT snowflake_mesh_publish(ARRAY['mesh_u']);
SELECT kind, name, detail FROM snowflake_mesh_state() WHERE kind IN ('published', 'publication') ORDER BY 1, 3;
SELECT snowflake_mesh_unpublish(ARRAY['mesh_u']);
SELECT count(*) FROM pg_publication_tables WHERE pubname = 'snowflake_mesh';
-- a table that cannot replicate its updates and deletes is refused, and
-- so is one whose partition cannot
CREATE TABLE mesh_nokey (v text);
SELECT snowflake_mesh_publish(ARRAY['mesh_nokey']);
ALTER TABLE mesh_nokey REPLICA IDENTITY FULL;
SELECT snowflake_mesh_replicable('mesh_nokey');
DROP TABLE mesh_nokey;
CREATE TABLE mesh_p (id bigint, k int, PRIMARY KEY (id, k)) PARTITION BY LIST (k);
CREATE TABLE mesh_p1 PARTITION OF mesh_p FOR VALUES IN (1);
CREATE TABLE mesh_p2 (id bigint NOT NULL, k int NOT NULL);
ALTER TABLE mesh_p ATTACH PARTITION mesh_p2 FOR VALUES IN (2);
ALTER TABLE mesh_p2 REPLICA IDENTITY NOTHING;
SELECT snowflake_mesh_publish(ARRAY['mesh_p']);
ALTER TABLE mesh_p2 REPLICA IDENTITY DEFAULT;
SELECT snowflake_mesh_publish(ARRAY['mesh_p']);
SELECT kind, name, detail FROM snowflake_mesh_state() WHERE kind = 'published' ORDER BY 3;
-- what drops changes is a fault: publish actions, a row filter, a column
-- list, a table put in by hand (until recorded)
ALTER PUBLICATION snowflake_mesh SET (publish = 'insert');
ALTER PUBLICATION snowflake_mesh SET TABLE mesh_t (id), mesh_p WHERE (k > 0), snowflake.snowflake_workers;
SELECT name, detail, class FROM snowflake_mesh_state() WHERE kind = 'fault' ORDER BY 2;
SELECT snowflake_mesh_record() AS recorded;
ALTER PUBLICATION snowflake_mesh SET (publish = 'insert, update, delete');
ALTER PUBLICATION snowflake_mesh SET TABLE mesh_t, snowflake.snowflake_workers;
SELECT name, detail, class FROM snowflake_mesh_state() WHERE kind = 'fault' ORDER BY 2;
SELECT snowflake_mesh_record() AS recorded;
SELECT name, detail, class FROM snowflake_mesh_state() WHERE kind = 'fault' ORDER BY 2;
DROP TABLE mesh_p;
-- another role's publication under the mesh's name is not the mesh's: the
-- mesh's takes the name with a suffix
SELECT snowflake_mesh_unpublish(NULL);
CREATE ROLE regress_mesh_squatter;
GRANT CREATE ON DATABASE contrib_regression TO regress_mesh_squatter;
SET ROLE regress_mesh_squatter;
CREATE PUBLICATION snowflake_mesh;
RESET ROLE;
SELECT snowflake_mesh_publish(ARRAY['mesh_t']);
SELECT kind, name FROM snowflake_mesh_state() WHERE kind = 'publication';
SELECT snowflake_mesh_unpublish(NULL);
DROP PUBLICATION snowflake_mesh;
REVOKE CREATE ON DATABASE contrib_regression FROM regress_mesh_squatter;
DROP ROLE regress_mesh_squatter;
-- a superuser's publication under the name, not recorded, is refused
CREATE PUBLICATION snowflake_mesh;
SELECT snowflake_mesh_publish(ARRAY['mesh_t']);
DROP PUBLICATION snowflake_mesh;
SELECT snowflake_mesh_publish(ARRAY['mesh_t']);

-- the hold of a table being added: a trigger that apply does not fire
SELECT snowflake_mesh_hold('mesh_u');
SELECT tgname, tgenabled FROM pg_trigger WHERE tgrelid = 'mesh_u'::regclass;
SELECT kind, name, detail, class FROM snowflake_mesh_state() WHERE kind = 'fault' ORDER BY 2;
INSERT INTO mesh_u VALUES (1);
SELECT snowflake_mesh_release('mesh_u');
SELECT count(*) FROM pg_trigger WHERE tgrelid = 'mesh_u'::regclass;
-- a trigger of the hold's name that is not the hold: refused, and kept
CREATE FUNCTION mesh_noop() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END$$;
CREATE TRIGGER snowflake_mesh_hold BEFORE INSERT ON mesh_u FOR EACH ROW EXECUTE FUNCTION mesh_noop();
SELECT snowflake_mesh_hold('mesh_u');
SELECT snowflake_mesh_release('mesh_u');
SELECT tgname, tgfoid::regproc FROM pg_trigger WHERE tgrelid = 'mesh_u'::regclass;
DROP TRIGGER snowflake_mesh_hold ON mesh_u;
DROP FUNCTION mesh_noop();

-- the fence of a node that joins, leaves or left: writes refused
-- (SM002), the apply of a subscription not
SELECT snowflake_mesh_fence('mesh_u', 'join');
\set VERBOSITY sqlstate
INSERT INTO mesh_u VALUES (2);
\set VERBOSITY default
INSERT INTO mesh_u VALUES (2);
TRUNCATE mesh_u;
SET session_replication_role = replica;
INSERT INTO mesh_u VALUES (2);
RESET session_replication_role;
SELECT snowflake_mesh_fence('mesh_u', 'left');
DELETE FROM mesh_u;
SELECT name, detail, class FROM snowflake_mesh_state() WHERE kind = 'fault' ORDER BY 2;
SELECT snowflake_mesh_fence('mesh_u', 'elsewhere');
-- unlock keeps a left node's fence; the fence of a join or a leave that
-- did not finish goes only on a member both ways: this node, which is
-- none, keeps refusing writes (a join's as one taken back), TRUNCATE aside
SELECT snowflake_mesh_unlock(NULL);
SELECT tbl, why FROM snowflake_mesh_fences();
SELECT snowflake_mesh_unfence() AS unfenced;
SELECT snowflake_mesh_fence('mesh_u', 'leave');
SELECT snowflake_mesh_unlock(NULL);
SELECT tbl, why FROM snowflake_mesh_fences();
SELECT snowflake_mesh_unfence() AS unfenced;
SELECT snowflake_mesh_fence('mesh_u', 'join');
SELECT snowflake_mesh_unlock(NULL);
SELECT tbl, why FROM snowflake_mesh_fences();
\set VERBOSITY sqlstate
INSERT INTO mesh_u VALUES (3);
\set VERBOSITY default
TRUNCATE mesh_u;
SELECT snowflake_mesh_unfence() AS unfenced;
DELETE FROM mesh_u;

-- what there is not
SELECT snowflake_mesh_origin(9);
SELECT snowflake_mesh_wait_copied(9, '1 s');
SELECT snowflake_mesh_wait_received(9, '0/0', '1 s');
SELECT snowflake_mesh_drop_slot(9);
SELECT snowflake_mesh_unsubscribe(9);
SELECT snowflake_mesh_wait_stopped(NULL, '1 s');
SELECT count(*) AS nothing_missing FROM snowflake_mesh_missing();
SELECT snowflake_mesh_create_slot(-1, false);
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT snowflake_mesh_wait_copied(9, '1 s');
ROLLBACK;

-- a subscription made by hand under the mesh's name: not the mesh's until
-- recorded, and then every way it is not one is a fault; a wait on it
-- gives up with the mesh's own SQLSTATE, SM001
CREATE SUBSCRIPTION snowflake_mesh_from_w9 CONNECTION 'host=/nonexistent' PUBLICATION other WITH (connect = false);
SELECT name, detail, class FROM snowflake_mesh_state() WHERE kind = 'fault' ORDER BY 1, 2;
SELECT snowflake_mesh_record() AS recorded;
SELECT kind, name, CASE WHEN kind = 'fault' THEN detail END AS fault, class, worker, publications
FROM snowflake_mesh_state() WHERE kind IN ('fault', 'subscription') AND name LIKE '%from_w9' ORDER BY 1, 3;
\set VERBOSITY sqlstate
SELECT snowflake_mesh_wait_applied(9, '1/0', '0.2 s');
\set VERBOSITY default
SELECT snowflake_mesh_subscribe(9, 'host=/nonexistent', 'snowflake_mesh', false, false, false);
SELECT snowflake_mesh_unsubscribe(9);
SELECT count(*) FROM pg_subscription;

-- the node's own claim, as the state reports it
SELECT snowflake_claim_worker('regress') IS NOT NULL AS claimed;
SELECT kind, name, detail = (SELECT system_identifier::text FROM pg_control_system()) AS mine
FROM snowflake_mesh_state() WHERE kind = 'claim';
DELETE FROM snowflake_workers;

SELECT snowflake_mesh_unpublish(NULL);
SELECT count(*) FROM pg_publication;
SELECT count(*) FROM snowflake_mesh_objects;
DROP TABLE mesh_t, mesh_u;
DROP ROLE regress_mesh_owner;
