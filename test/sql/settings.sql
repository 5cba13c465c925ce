--
-- Settings: values, validation when set, reload, reserved prefix.
--
SHOW snowflake.layout;
SHOW snowflake.worker_id;
SHOW snowflake.max_clock_backward_ms;
SHOW snowflake.max_run_ahead_ms;

-- server-wide: not settable in a session, not even by a superuser
SET snowflake.worker_id = 3;
SET snowflake.max_run_ahead_ms = -1;
SET snowflake.layout = 'twitter';

-- out of range values are refused when set
ALTER SYSTEM SET snowflake.worker_id = 1024;
ALTER SYSTEM SET snowflake.worker_id = -2;
ALTER SYSTEM SET snowflake.max_run_ahead_ms = -2;
ALTER SYSTEM SET snowflake.max_clock_backward_ms = -1;
ALTER SYSTEM SET snowflake.max_clock_backward_ms = '2h';
ALTER SYSTEM SET snowflake.layout = 'uuid';

-- snowflake.layout takes the presets, custom, and ShardingSphere's layout
-- for a JVM's time zone, whose zone must be known and its name short
-- enough for the state file
ALTER SYSTEM SET snowflake.layout = 'shardingsphere@Mars/Olympus';
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET snowflake.layout = 'shardingsphere@+24:00';
ALTER SYSTEM SET snowflake.layout = 'shardingsphere@UTC+8';
ALTER SYSTEM SET snowflake.layout = 'shardingsphere@America/Argentina/ComodRivadavia/xxxxxxxxxxxxxxxx';
ALTER SYSTEM SET snowflake.layout = 'shardingsphere@America/St_Johns@2026-02-30';
ALTER SYSTEM SET snowflake.layout = 'shardingsphere@Pacific/Chatham@2016-10-31';
ALTER SYSTEM SET snowflake.layout = 'custom:41/10/12/1ms/2016-11-01';
ALTER SYSTEM SET snowflake.layout = 'shardingsphere@asia/shanghai';
ALTER SYSTEM SET snowflake.layout = 'shardingsphere@-04:00';
ALTER SYSTEM SET snowflake.layout = 'shardingsphere@America/St_Johns@2025-11-15';
ALTER SYSTEM SET snowflake.layout = 'Twitter';
ALTER SYSTEM SET snowflake.layout = 'custom';
ALTER SYSTEM RESET snowflake.layout;
SET snowflake.layout = 'shardingsphere@Asia/Shanghai';

-- a typo under the prefix is an error, not a silent placeholder
SET snowflake.workerid = 3;
ALTER SYSTEM SET snowflake.workerid = 3;

-- ordinary users cannot change them at all
CREATE ROLE regress_snowflake_user;
SET ROLE regress_snowflake_user;
ALTER SYSTEM SET snowflake.worker_id = 3;
RESET ROLE;
DROP ROLE regress_snowflake_user;

-- ALTER SYSTEM and a reload change the worker id of new IDs (a backend
-- takes a reload between statements)
ALTER SYSTEM SET snowflake.worker_id = 1023;
ALTER SYSTEM SET snowflake.max_run_ahead_ms = '1s';
SELECT pg_reload_conf();
SELECT pg_sleep(0.5);
SHOW snowflake.worker_id;
SHOW snowflake.max_run_ahead_ms;
SELECT (snowflake_decode(snowflake_nextval())).worker_id;

ALTER SYSTEM RESET snowflake.worker_id;
ALTER SYSTEM RESET snowflake.max_run_ahead_ms;
SELECT pg_reload_conf();
SELECT pg_sleep(0.5);
SHOW snowflake.worker_id;
SELECT (snowflake_decode(snowflake_nextval())).worker_id;

-- the worker id in force is the node's, changed in one step by a reload
SELECT snowflake_worker_id();

-- -1 means not set: the node refuses to generate rather than guess
ALTER SYSTEM SET snowflake.worker_id = -1;
SELECT pg_reload_conf();
SELECT pg_sleep(0.5);
SELECT snowflake_nextval();
SELECT snowflake_worker_id();
SELECT worker_id IS NULL AS unset FROM snowflake_status;
ALTER SYSTEM RESET snowflake.worker_id;
SELECT pg_reload_conf();
SELECT pg_sleep(0.5);
SELECT snowflake_worker_id();
