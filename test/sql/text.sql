--
-- IDs as text: base32 and base62 against a reference written here in SQL,
-- their prefixes, their order, the time bounds as text, their use in
-- generated columns, indexes and JSON, and every refusal with its
-- SQLSTATE.  The opaque form needs a key in the server's configuration:
-- t/text_opaque.pl.
--
SET timezone = 'UTC';
\set SHOW_CONTEXT never

-- the reference: the number in base 32 (Crockford's digits) and in base 62,
-- left-padded, computed by arithmetic on numeric
CREATE FUNCTION ref_base(id numeric, base int, width int) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
	SELECT string_agg(substr(CASE base WHEN 32 THEN '0123456789abcdefghjkmnpqrstvwxyz'
		ELSE '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz' END,
		(mod(div(id, power(base::numeric, width - i)), base))::int + 1, 1), '' ORDER BY i)
	FROM generate_series(1, width) i $$;

-- IDs across the range: the edges, powers of two and a spread between
CREATE TEMP TABLE ids AS
	SELECT DISTINCT id FROM (
		SELECT unnest(ARRAY[1, 2, 31, 32, 61, 62, 63, 1331055398945320985,
			175928847299117063, 9007199254740991, 9223372036854775806,
			9223372036854775807]::bigint[]) AS id
		UNION ALL SELECT (1::bigint << n) - 1 FROM generate_series(1, 62) n
		UNION ALL SELECT 1::bigint << n FROM generate_series(0, 62) n
		UNION ALL SELECT (n * 7919::numeric * 1000000000037 % 9223372036854775807)::bigint + 1
			FROM generate_series(1, 2000) n) s;

SELECT count(*) AS ids,
	   count(*) FILTER (WHERE snowflake_base32(id) <> ref_base(id, 32, 13)) AS base32_differs,
	   count(*) FILTER (WHERE snowflake_base62(id) <> ref_base(id, 62, 11)) AS base62_differs,
	   count(*) FILTER (WHERE snowflake_from_base32(snowflake_base32(id)) <> id) AS base32_not_back,
	   count(*) FILTER (WHERE snowflake_from_base62(snowflake_base62(id)) <> id) AS base62_not_back,
	   count(*) FILTER (WHERE length(snowflake_base32(id)) <> 13 OR length(snowflake_base62(id)) <> 11) AS other_widths
FROM ids;

-- the edges, and IDs of the README and the Discord documentation
SELECT id, snowflake_base32(id), snowflake_base62(id)
FROM unnest(ARRAY[1, 1331055398945320985, 175928847299117063, 9223372036854775807]::bigint[]) id;

-- read in either case, with Crockford's confusables: I and L are 1, O is 0
SELECT snowflake_from_base32('7ZZZZZZZZZZZZ') AS upper, snowflake_from_base32('7zZzZzZzZzZzZ') AS mixed,
	   snowflake_from_base32('OOOOOOOOOOOOI') AS o_and_i, snowflake_from_base32('ooooooooooool') AS o_and_l,
	   snowflake_from_base32('0000000000001') = snowflake_from_base32('oOoOoOoOoOoOL') AS same;
-- base62 is case-sensitive: a and A are different digits
SELECT snowflake_from_base62('0000000000a') AS a, snowflake_from_base62('0000000000A') AS "A";

-- order: byte-wise (COLLATE "C"), the text forms sort as the IDs do
SELECT count(*) AS pairs,
	   count(*) FILTER (WHERE (a.id < b.id) <> (snowflake_base32(a.id) COLLATE "C" < snowflake_base32(b.id) COLLATE "C")) AS base32_misordered,
	   count(*) FILTER (WHERE (a.id < b.id) <> (snowflake_base62(a.id) COLLATE "C" < snowflake_base62(b.id) COLLATE "C")) AS base62_misordered,
	   count(*) FILTER (WHERE (a.id < b.id) <> (snowflake_base32(a.id, 'user') COLLATE "C" < snowflake_base32(b.id, 'user') COLLATE "C")) AS prefixed_misordered
FROM ids a, ids b;

-- prefixes, as TypeID has them
SELECT snowflake_base32(1331055398945320985, 'user') AS user_id,
	   snowflake_base62(1331055398945320985, 'api_key') AS api_key,
	   snowflake_base32(1331055398945320985, '') AS no_prefix,
	   snowflake_from_base32('user_14y6vtn380w0s', 'user') AS back,
	   snowflake_from_base62('api_key_1aKFMjGt39t', 'api_key') AS back62,
	   snowflake_from_base32('14Y6VTN380W0S', '') AS back_no_prefix;
SELECT length(snowflake_base32(1, repeat('a', 63))) AS longest;

-- every layout: the forms take what the layout holds, and refuse beyond it
SELECT name, max_id, snowflake_base32(max_id, '', name) AS base32, snowflake_base62(max_id, '', name) AS base62,
	   snowflake_from_base32(snowflake_base32(max_id), '', name) = max_id AND
	   snowflake_from_base62(snowflake_base62(max_id), '', name) = max_id AS back
FROM snowflake_layouts() ORDER BY name;
SELECT snowflake_base32(1000, 'x', 'custom:10/2/2/1ms/2020-01-01') AS custom,
	   snowflake_from_base32('x_00000000000z8', 'x', 'custom:10/2/2/1ms/2020-01-01') AS back;

-- a time range on the text form: the bounds of a time as text
CREATE TEMP TABLE orders AS
	SELECT snowflake_from_timestamp('2026-01-01 00:00+00'::timestamptz + n * interval '1 hour') + n AS id
	FROM generate_series(0, 99) n;
ALTER TABLE orders ADD COLUMN public_id text COLLATE "C"
	GENERATED ALWAYS AS (snowflake_base32(id, 'order')) STORED;
CREATE INDEX ON orders (public_id);
SELECT count(*) AS by_text,
	   (SELECT count(*) FROM orders WHERE id >= snowflake_from_timestamp('2026-01-02 00:00+00')
		  AND id < snowflake_from_timestamp('2026-01-03 00:00+00')) AS by_id
FROM orders
WHERE public_id >= snowflake_base32(snowflake_from_timestamp('2026-01-02 00:00+00'), 'order')
  AND public_id < snowflake_base32(snowflake_from_timestamp('2026-01-03 00:00+00'), 'order');
-- a public ID finds its row through the key
SELECT count(*) AS found FROM orders o
WHERE o.id = snowflake_from_base32((SELECT public_id FROM orders ORDER BY id OFFSET 42 LIMIT 1), 'order');
-- and in JSON, a string that JavaScript keeps exactly
SELECT json_build_object('id', snowflake_base32(id, 'order'), 'hour', snowflake_timestamp(id)) AS j
FROM orders ORDER BY id LIMIT 2;
SELECT to_jsonb(o) - 'id' AS j FROM orders o ORDER BY id LIMIT 1;

--
-- Refusals, each with its SQLSTATE.
--
-- IDs no layout has (22003)
SELECT snowflake_base32(0);
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_base62(-1);
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_base32(9007199254740992, '', 'javascript');
\echo :LAST_ERROR_SQLSTATE
-- wrong length (22P02)
SELECT snowflake_from_base32('');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_base32('000000000001');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_base32('00000000000001');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_base62('0000000001');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_base32('user_000000000001', 'user');
\echo :LAST_ERROR_SQLSTATE
-- a character outside the alphabet (22P02), named with its position
SELECT snowflake_from_base32('000000000000u');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_base32('U000000000000');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_base32('000000-000000');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_base32('00000 0000000');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_base32('0000é00000000');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_base62('00000_00000');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_base62('0000000000+');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_base32('user_00000000000!1', 'user');
\echo :LAST_ERROR_SQLSTATE
-- hyphens, which Crockford lets a reader skip, are refused by name, not
-- for the length they change
SELECT snowflake_from_base32('0000-0000-0001');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_base32('user_0000-0000-0001', 'user');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_base62('00000-00001');
\echo :LAST_ERROR_SQLSTATE
-- past the range (22003): 0, 2^63, 2^64 and beyond, and past a layout's
SELECT snowflake_from_base32('0000000000000');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_base32('8000000000000');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_base32('zzzzzzzzzzzzz');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_base62('AzL8n0Y58m8');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_base62('zzzzzzzzzzz');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_base62('00000000000');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_base32('0080000000000', '', 'javascript');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_base62('x_0000000g000', 'x', 'custom:10/2/2/1ms/2020-01-01');
\echo :LAST_ERROR_SQLSTATE
-- the wrong prefix, one where none is expected, none where one is (22P02)
SELECT snowflake_from_base32('usr_14y6vtn380w0s', 'user');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_base32('user_14y6vtn380w0s');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_base32('14y6vtn380w0s', 'user');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_base32('USER_14y6vtn380w0s', 'user');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_base62('user_1aKFMjGt39t', 'users');
\echo :LAST_ERROR_SQLSTATE
-- a prefix where none is expected: the hint's call takes it, and names it
-- only when it is one a call can take
SELECT snowflake_from_base32('user_account_14y6vtn380w0s');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_base32('user_account_14y6vtn380w0s', 'user_account');
SELECT snowflake_from_base32('USER_14y6vtn380w0s');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_base62('it''s_1aKFMjGt39t');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_base32('order_000000000001');
\echo :LAST_ERROR_SQLSTATE
-- a prefix TypeID does not allow (22023)
SELECT snowflake_base32(1, '_user');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_base32(1, 'user_');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_base32(1, 'User');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_base62(1, 'us-er');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_base32('0000000000001', repeat('a', 64));
\echo :LAST_ERROR_SQLSTATE
-- an unknown layout (22023)
SELECT snowflake_from_base32('0000000000001', '', 'nonesuch');
\echo :LAST_ERROR_SQLSTATE
-- a long string is echoed only in part
SELECT snowflake_from_base32(repeat('0', 100));
\echo :LAST_ERROR_SQLSTATE

DROP FUNCTION ref_base(numeric, int, int);
