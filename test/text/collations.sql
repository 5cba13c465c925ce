--
-- test/text/collations.sql: in which collations of this server the base32
-- and base62 forms sort as the IDs do, for docs/text-ids.md's list.  Run it
-- by hand in a database with the extension (psql -X -f ...), on a server
-- with ICU and whichever system locales you generated; it takes about a
-- minute.  Not part of make test.
--
-- The IDs: 1 to 32767, whose forms end in every pair and triple of digits
-- (where contractions such as Czech "ch" or Danish "aa" show), and 20000
-- random ones.  A collation keeps the order when no ID sorts after a
-- greater one.
--
SELECT setseed(0.39);
CREATE TEMP TABLE forms AS
	SELECT id, snowflake.snowflake_base32(id) AS b32, snowflake.snowflake_base62(id) AS b62
	FROM (SELECT generate_series(1, 32767)::bigint AS id
		  UNION
		  SELECT ((floor(random() * 2147483648)::bigint << 32) | floor(random() * 4294967296)::bigint) + 1
		  FROM generate_series(1, 20000)) s;

CREATE FUNCTION pg_temp.misordered(form text, coll name) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
	n bigint;
BEGIN
	EXECUTE format('SELECT count(*) FROM (SELECT id, lag(id) OVER (ORDER BY %I COLLATE %I) AS prev FROM forms) s
					WHERE prev > id', form, coll) INTO n;
	RETURN n;
END $$;

-- every collation this database can use: those that break base32's order,
-- then a count of those that keep it, by provider
CREATE TEMP TABLE verdicts AS
	SELECT collname, collprovider, pg_temp.misordered('b32', collname) AS base32,
		   pg_temp.misordered('b62', collname) AS base62
	FROM pg_collation
	WHERE collencoding IN (-1, pg_char_to_encoding(getdatabaseencoding()))
	  AND (collprovider <> 'i' OR collname LIKE '%-x-icu' OR collname = 'unicode');

SELECT version();
SELECT collname, collprovider, base32 AS base32_misordered, base62 AS base62_misordered
FROM verdicts WHERE base32 > 0 ORDER BY collprovider, collname;
SELECT collprovider, count(*) FILTER (WHERE base32 = 0) AS base32_kept, count(*) FILTER (WHERE base32 > 0) AS base32_broken,
	   count(*) FILTER (WHERE base62 = 0) AS base62_kept, string_agg(collname, ' ' ORDER BY collname) FILTER (WHERE base62 = 0) AS base62_kept_in
FROM verdicts GROUP BY collprovider ORDER BY collprovider;
