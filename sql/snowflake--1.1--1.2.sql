/* snowflake 1.1 -> 1.2 */
\echo Use "ALTER EXTENSION snowflake UPDATE TO '1.2'" to load this file. \quit
