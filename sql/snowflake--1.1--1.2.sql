/* snowflake 1.1 -> 1.2 */
\echo Use "ALTER EXTENSION snowflake UPDATE TO '1.2'" to load this file. \quit

-- Floors come from reservations only, no longer from the clock.
COMMENT ON FUNCTION snowflake_repair_state(bigint) IS
'rewrite a damaged snowflake.state: continue above the given ID and every reservation replayed from WAL since the server started';
