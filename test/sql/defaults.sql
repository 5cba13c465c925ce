--
-- A default that generates IDs on a column or domain narrower than bigint
-- is refused where it is declared, saying to use bigint: the first insert
-- would fail with "integer out of range".  While a dump is loaded
-- (check_function_bodies off) it is a warning, and the command completes.
-- snowflake_narrow_defaults() lists every such column and domain.
--
\set SHOW_CONTEXT never

CREATE TABLE narrow_int (id integer PRIMARY KEY DEFAULT snowflake.snowflake_nextval(), v text);
CREATE TABLE narrow_small (id smallint DEFAULT snowflake.snowflake_nextval());
CREATE TABLE narrow_next_id (id integer DEFAULT snowflake.snowflake_next_id());
CREATE SEQUENCE narrow_seq;
CREATE TABLE narrow_node (id integer DEFAULT snowflake.snowflake_node_nextval('narrow_seq'));

-- a serial given the extension's default, a bigint column narrowed
CREATE TABLE narrow_serial (id serial PRIMARY KEY, v text);
ALTER TABLE narrow_serial ALTER COLUMN id SET DEFAULT snowflake.snowflake_nextval();
CREATE TABLE narrow_wide (id bigint PRIMARY KEY DEFAULT snowflake.snowflake_nextval(), n integer);
ALTER TABLE narrow_wide ALTER COLUMN id TYPE integer;
ALTER TABLE narrow_wide ADD COLUMN m integer DEFAULT snowflake.snowflake_nextval_block(2);
CREATE VIEW narrow_view AS SELECT id, n FROM narrow_wide;
ALTER VIEW narrow_view ALTER COLUMN n SET DEFAULT snowflake.snowflake_nextval();

-- types that hold no bigint exactly: out of range, or rounding the IDs
CREATE TABLE narrow_oid (id oid DEFAULT snowflake.snowflake_nextval());
CREATE TABLE narrow_real (id real DEFAULT snowflake.snowflake_nextval());
CREATE TABLE narrow_double (id double precision DEFAULT snowflake.snowflake_nextval());
CREATE TABLE narrow_numeric (id numeric(18) DEFAULT snowflake.snowflake_nextval());
CREATE TABLE narrow_scaled (id numeric(20,2) DEFAULT snowflake.snowflake_nextval());
CREATE TABLE narrow_rounded (id numeric(25,-2) DEFAULT snowflake.snowflake_nextval());
CREATE DOMAIN narrow_num_dom AS numeric(10) DEFAULT snowflake.snowflake_nextval();
CREATE DOMAIN narrow_float_dom AS float8 DEFAULT snowflake.snowflake_nextval();
CREATE DOMAIN narrow_num AS numeric(12);
CREATE TABLE narrow_via_dom (id narrow_num DEFAULT snowflake.snowflake_nextval());

-- a default that keeps only part of the ID fits, but is refused too: the
-- check sees that it calls the generator, not what it makes of the result
CREATE TABLE narrow_part (shard integer DEFAULT (snowflake.snowflake_nextval() % 1000)::integer);
-- what to do instead: call it through a function of one's own
CREATE FUNCTION narrow_shard() RETURNS integer LANGUAGE sql VOLATILE
	AS 'SELECT (snowflake.snowflake_nextval() % 1000)::integer';
CREATE TABLE narrow_part (shard integer DEFAULT narrow_shard());
INSERT INTO narrow_part DEFAULT VALUES RETURNING shard BETWEEN 0 AND 999 AS fits;
DROP TABLE narrow_part;
DROP FUNCTION narrow_shard();

-- domains, also one over another
CREATE DOMAIN narrow_dom AS integer DEFAULT snowflake.snowflake_nextval();
CREATE DOMAIN narrow_base AS integer;
CREATE DOMAIN narrow_upper AS narrow_base;
ALTER DOMAIN narrow_upper SET DEFAULT snowflake.snowflake_nextval();

-- what is wide enough, or makes something else of the ID, is accepted
CREATE TABLE wide_ok (
	id bigint PRIMARY KEY DEFAULT snowflake.snowflake_nextval(),
	t text DEFAULT snowflake.snowflake_nextval()::text,
	n numeric DEFAULT snowflake.snowflake_nextval(),
	n19 numeric(19) DEFAULT snowflake.snowflake_nextval(),
	n21 numeric(21,2) DEFAULT snowflake.snowflake_nextval(),
	small integer DEFAULT 7);
INSERT INTO wide_ok DEFAULT VALUES RETURNING n19 > id AND n21 > n19 AS fits;
CREATE DOMAIN wide_dom AS bigint DEFAULT snowflake.snowflake_nextval();
ALTER TABLE narrow_serial ALTER COLUMN id TYPE bigint;
ALTER TABLE narrow_serial ALTER COLUMN id SET DEFAULT snowflake.snowflake_nextval();
INSERT INTO narrow_serial (v) VALUES ('fits') RETURNING id > 0 AS fits;
SELECT * FROM snowflake.snowflake_narrow_defaults();

-- a dump being loaded: a warning, the table made
SET check_function_bodies = off;
CREATE TABLE narrow_loaded (id integer PRIMARY KEY DEFAULT snowflake.snowflake_nextval(), v text);
CREATE DOMAIN narrow_loaded_dom AS smallint DEFAULT snowflake.snowflake_nextval();
RESET check_function_bodies;
SELECT * FROM snowflake.snowflake_narrow_defaults();
-- later commands that leave that default alone go on, also those that
-- change the column otherwise
ALTER TABLE narrow_loaded ADD COLUMN w text;
COMMENT ON TABLE narrow_loaded IS 'loaded';
ALTER TABLE narrow_loaded ALTER COLUMN id SET STATISTICS 200;
ALTER TABLE narrow_loaded RENAME COLUMN id TO key;
ALTER TABLE narrow_loaded RENAME COLUMN key TO id;
BEGIN;
ALTER TABLE narrow_loaded ALTER COLUMN id SET STORAGE PLAIN;
ALTER TABLE narrow_loaded ADD COLUMN x integer;
COMMIT;
-- but not a default written again
ALTER TABLE narrow_loaded ALTER COLUMN id SET DEFAULT snowflake.snowflake_nextval();
-- widened, it is no longer listed
ALTER TABLE narrow_loaded ALTER COLUMN id TYPE bigint;
DROP DOMAIN narrow_loaded_dom;
SELECT * FROM snowflake.snowflake_narrow_defaults();

-- a role that is not a superuser: the same
CREATE ROLE regress_narrow_owner;
GRANT CREATE ON SCHEMA public TO regress_narrow_owner;
SET ROLE regress_narrow_owner;
CREATE TABLE narrow_theirs (id integer DEFAULT snowflake.snowflake_nextval());
CREATE TABLE wide_theirs (id bigint DEFAULT snowflake.snowflake_nextval());
DROP TABLE wide_theirs;
RESET ROLE;
REVOKE CREATE ON SCHEMA public FROM regress_narrow_owner;

-- a role without USAGE on the extension's schema: its commands as before
REVOKE USAGE ON SCHEMA snowflake FROM PUBLIC;
SET ROLE regress_narrow_owner;
CREATE TEMP TABLE plain_theirs (id integer, v text);
ALTER TABLE plain_theirs ADD COLUMN w bigint DEFAULT 7;
ALTER TABLE plain_theirs ALTER COLUMN id TYPE smallint;
CREATE DOMAIN pg_temp.plain_dom AS integer DEFAULT 7;
DROP TABLE plain_theirs;
DROP DOMAIN pg_temp.plain_dom;
RESET ROLE;
GRANT USAGE ON SCHEMA snowflake TO PUBLIC;
DROP ROLE regress_narrow_owner;

DROP VIEW narrow_view;
DROP TABLE narrow_serial, narrow_wide, wide_ok, narrow_loaded;
DROP DOMAIN wide_dom;
DROP DOMAIN narrow_num;
DROP DOMAIN narrow_upper;
DROP DOMAIN narrow_base;
DROP SEQUENCE narrow_seq;

-- a table made inside CREATE SCHEMA is checked too
CREATE SCHEMA narrow_schema CREATE TABLE narrow_inner (id integer DEFAULT snowflake.snowflake_nextval());
SELECT count(*) FROM pg_namespace WHERE nspname = 'narrow_schema';
