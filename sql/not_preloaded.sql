--
-- Without shared_preload_libraries: the extension installs and decodes,
-- and the generator says exactly what is missing.
--
SET timezone = 'UTC';
CREATE EXTENSION snowflake;
SELECT * FROM snowflake_decode(4194324483);
SELECT snowflake_from_timestamp('2016-11-01 00:00:01+00');
SELECT snowflake_nextval();
SELECT * FROM snowflake_status;
SELECT snowflake_currval();
