--
-- The mesh's steps on one node (snowflake_mesh_*): who may call them, what
-- they refuse, the lock and its record, tables read as their owners, the
-- publication, the hold of a table being added, and the node's state.
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
SELECT snowflake.snowflake_mesh_subscribe(1, 'host=elsewhere', true, true, false);
SELECT * FROM snowflake.snowflake_mesh_changes;
RESET ROLE;
DROP ROLE regress_mesh_nobody;
-- nor a role that may write every table: a record of a change steers the
-- lock and the abort
CREATE ROLE regress_mesh_writer IN ROLE pg_write_all_data;
SET ROLE regress_mesh_writer;
INSERT INTO snowflake.snowflake_mesh_changes (publication, change, run)
VALUES ('snowflake_mesh', 'join of worker 9', 'run-x');
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
SELECT snowflake_mesh_digest('mesh_t') AS digest \gset
UPDATE mesh_t SET v = 'changed' WHERE id = 2;
SELECT snowflake_mesh_digest('mesh_t') <> :'digest' AS a_changed_row_changes_it;
UPDATE mesh_t SET v = 'two' WHERE id = 2;
ALTER TABLE mesh_t DROP COLUMN r;
CREATE VIEW mesh_v AS SELECT * FROM mesh_t;
SELECT snowflake_mesh_empty('mesh_v');
DROP VIEW mesh_v;

-- the publication: the tables named and the registry, without TRUNCATE
SELECT snowflake_mesh_publish(ARRAY['mesh_t']);
SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = 'snowflake_mesh' ORDER BY 1, 2;
SELECT pubinsert, pubupdate, pubdelete, pubtruncate FROM pg_publication WHERE pubname = 'snowflake_mesh';
CREATE TABLE mesh_u (id bigint PRIMARY KEY);
SELECT snowflake_mesh_publish(ARRAY['mesh_u']);
SELECT kind, name, detail FROM snowflake_mesh_state() WHERE kind = 'published' ORDER BY 3;
SELECT snowflake_mesh_unpublish(ARRAY['mesh_u']);
SELECT count(*) FROM pg_publication_tables WHERE pubname = 'snowflake_mesh';

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

-- what there is not
SELECT snowflake_mesh_origin(9);
SELECT snowflake_mesh_wait_copied(9, '1 s');
SELECT snowflake_mesh_wait_received(9, '0/0', '1 s');
SELECT snowflake_mesh_drop_slot(9);
SELECT snowflake_mesh_unsubscribe(9);
SELECT snowflake_mesh_wait_stopped(NULL, '1 s');
SELECT snowflake_mesh_missing() IS NULL OR snowflake_mesh_missing() = 0 AS nothing_missing;
SELECT snowflake_mesh_create_slot(-1, false);
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT snowflake_mesh_wait_copied(9, '1 s');
ROLLBACK;

-- the node's own claim, as the state reports it
SELECT snowflake_claim_worker('regress') IS NOT NULL AS claimed;
SELECT kind, name, detail = (SELECT system_identifier::text FROM pg_control_system()) AS mine
FROM snowflake_mesh_state() WHERE kind = 'claim';
DELETE FROM snowflake_workers;

SELECT snowflake_mesh_unpublish(NULL);
SELECT count(*) FROM pg_publication;
DROP TABLE mesh_t, mesh_u;
DROP ROLE regress_mesh_owner;
