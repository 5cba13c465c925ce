-- The generators the benchmark compares, in the database "bench".
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

CREATE TABLE k_bigserial (id bigserial PRIMARY KEY, v int);
CREATE TABLE k_snowflake (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), v int);
CREATE TABLE k_uuid (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), v int);
CREATE TABLE k_uuidv7 (id uuid PRIMARY KEY DEFAULT bench_uuidv7(), v int);
