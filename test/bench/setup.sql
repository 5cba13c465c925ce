-- The generators the benchmark compares, in the database "bench".  The
-- UUIDv7 peer is PostgreSQL's own uuidv7() where the server has one (18
-- and later); only older servers get the one written in SQL below.
CREATE EXTENSION snowflake;
CREATE EXTENSION pgstattuple;

CREATE FUNCTION bench_counter() RETURNS bigint
AS '$libdir/bench_floor', 'bench_counter' LANGUAGE C VOLATILE;

CREATE SEQUENCE bench_seq;

-- UUIDv7 (RFC 9562) in SQL, the widely used way for servers without one
-- built in: take a random UUID, write the Unix time in ms over its first
-- 48 bits and set the version nibble to 7 (the variant bits of
-- gen_random_uuid() are already right).
CREATE FUNCTION bench_uuidv7() RETURNS uuid LANGUAGE sql VOLATILE AS $$
	SELECT encode(
		set_bit(set_bit(
			overlay(uuid_send(gen_random_uuid())
					placing substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
					FROM 1 FOR 6),
			52, 1), 53, 1), 'hex')::uuid
$$;

-- Instagram's next_id() as its engineering blog published it (2012):
-- 41 bits of ms since 2011-08-24 21:07:01.721, 13-bit shard id, and a
-- sequence taken modulo 1024.
CREATE SEQUENCE insta_seq;
CREATE FUNCTION insta_next_id(OUT result bigint) LANGUAGE plpgsql AS $$
DECLARE
	our_epoch bigint := 1314220021721;
	seq_id bigint;
	now_millis bigint;
	shard_id int := 5;
BEGIN
	SELECT nextval('insta_seq') % 1024 INTO seq_id;
	SELECT floor(extract(epoch FROM clock_timestamp()) * 1000) INTO now_millis;
	result := (now_millis - our_epoch) << 23;
	result := result | (shard_id << 10);
	result := result | (seq_id);
END $$;

-- time one statement, server side, in ms
CREATE FUNCTION bench_time(q text) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
	t0 timestamptz := clock_timestamp();
BEGIN
	EXECUTE q;
	RETURN extract(epoch FROM clock_timestamp() - t0) * 1000;
END $$;

-- the UUIDv7 every section measures: the built-in one if there is one
CREATE FUNCTION bench_uuidv7_expr() RETURNS text LANGUAGE sql STABLE AS $$
	SELECT CASE WHEN to_regprocedure('pg_catalog.uuidv7()') IS NOT NULL
		THEN 'pg_catalog.uuidv7()' ELSE 'bench_uuidv7()' END
$$;

-- sequences for blocks of n: one nextval() hands out n numbers
CREATE SEQUENCE bench_seq_1 INCREMENT BY 1 CACHE 64;
CREATE SEQUENCE bench_seq_16 INCREMENT BY 16 CACHE 64;
CREATE SEQUENCE bench_seq_256 INCREMENT BY 256 CACHE 64;
CREATE SEQUENCE bench_seq_4096 INCREMENT BY 4096 CACHE 64;

-- k_*: single-row inserts and the index after them; l_*: bulk loads
DO $$
DECLARE
	t text;
BEGIN
	FOREACH t IN ARRAY ARRAY['k', 'l'] LOOP
		EXECUTE format('CREATE TABLE %I (id bigserial PRIMARY KEY, v int)', t || '_bigserial');
		EXECUTE format('CREATE TABLE %I (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), v int)', t || '_snowflake');
		EXECUTE format('CREATE TABLE %I (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), v int)', t || '_uuid');
		EXECUTE format('CREATE TABLE %I (id uuid PRIMARY KEY DEFAULT %s, v int)', t || '_uuidv7', bench_uuidv7_expr());
	END LOOP;
END $$;
