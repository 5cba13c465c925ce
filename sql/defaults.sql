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
	small integer DEFAULT 7);
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
-- later commands that leave that column alone go on
ALTER TABLE narrow_loaded ADD COLUMN w text;
COMMENT ON TABLE narrow_loaded IS 'loaded';
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
DROP ROLE regress_narrow_owner;

DROP VIEW narrow_view;
DROP TABLE narrow_serial, narrow_wide, wide_ok, narrow_loaded;
DROP DOMAIN wide_dom;
DROP DOMAIN narrow_upper;
DROP DOMAIN narrow_base;
DROP SEQUENCE narrow_seq;
