--
-- Without shared_preload_libraries: the extension installs and decodes,
-- and the generator says exactly what is missing.
--
SET timezone = 'UTC';
CREATE EXTENSION snowflake;
SELECT * FROM snowflake_decode(4194324483);
SELECT snowflake_from_timestamp('2016-11-01 00:00:01+00');
SELECT snowflake_nextval();
-- the view says why, as a call does
SELECT state, reason, worker_id, layout, ids_issued, started_at FROM snowflake_status;
SELECT snowflake_currval();
-- everything that generates, or depends on the node's worker id, refuses
SELECT snowflake_worker_id();
CREATE SEQUENCE np_seq;
SELECT snowflake_node_nextval('np_seq');
SELECT decimal_id_nextval();
SELECT snowflake_claim_worker('np');
CREATE TABLE np (id bigserial PRIMARY KEY);
SELECT snowflake_convert_column('np', 'id');
SELECT pg_get_expr(adbin, adrelid) AS default_kept FROM pg_attrdef WHERE adrelid = 'np'::regclass;
-- the text forms need nothing of the node; the opaque form needs its key,
-- which only a preloaded library keeps from other roles
SELECT snowflake_base32(4194324483) AS base32, snowflake_from_base62(snowflake_base62(4194324483, 'o'), 'o') AS back;
SELECT snowflake_opaque(4194324483);
