# pg_dump and pg_restore: a database using the extension (defaults, a
# converted column, the worker registry, the status view) restores into a
# fresh cluster, and new rows get IDs above the restored ones.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SnowflakeTest;

my $old = snowflake_node('old', worker_id => 1);
$old->start;
$old->safe_psql('postgres', q{
	CREATE DATABASE shop;
});
$old->safe_psql('shop', q{
	CREATE EXTENSION snowflake;
	SET search_path = public;
	CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake.snowflake_nextval(), item text);
	CREATE TABLE legacy (id bigserial PRIMARY KEY, item text);
	INSERT INTO legacy (item) SELECT 'old' FROM generate_series(1, 1000);
	SELECT snowflake.snowflake_convert_column('legacy', 'id');
	INSERT INTO orders (item) SELECT 'o' || g FROM generate_series(1, 1000) g;
	INSERT INTO legacy (item) SELECT 'converted' FROM generate_series(1, 10);
	SELECT snowflake.snowflake_claim_worker('old');
});
my $dump = $old->basedir . '/shop.dump';
$old->command_ok([ 'pg_dump', '-Fc', '-d', $old->connstr('shop'), '-f', $dump ], 'pg_dump');
my $before = $old->safe_psql('shop',
	'SELECT greatest((SELECT max(id) FROM orders), (SELECT max(id) FROM legacy))');

my $new = snowflake_node('new', worker_id => 2);
$new->start;
$new->safe_psql('postgres', 'CREATE DATABASE shop');
$new->command_ok([ 'pg_restore', '--exit-on-error', '-d', $new->connstr('shop'), $dump ],
	'pg_restore into a fresh cluster, without an error');

is($new->safe_psql('shop', 'SELECT count(*) FROM orders') . '/' .
   $new->safe_psql('shop', 'SELECT count(*) FROM legacy'), '1000/1010', 'every row came back');
is($new->safe_psql('shop', q{
	SET search_path = public;
	SELECT string_agg(c.relname || '=' || pg_get_expr(d.adbin, d.adrelid), ', ' ORDER BY c.relname)
	FROM pg_attrdef d JOIN pg_class c ON c.oid = d.adrelid
	WHERE c.relname IN ('orders', 'legacy')}),
	'legacy=snowflake.snowflake_nextval(), orders=snowflake.snowflake_nextval()',
	'the defaults, the converted one too, point at the generator');
is($new->safe_psql('shop', 'SELECT worker_id, node_name FROM snowflake.snowflake_workers'),
	'1|old', 'the worker registry came along');
is($new->safe_psql('shop', 'SELECT worker_id FROM snowflake.snowflake_status'), '2',
	'the status view works on the new cluster');

$new->safe_psql('shop', q{
	INSERT INTO orders (item) SELECT 'new' FROM generate_series(1, 100);
	INSERT INTO legacy (item) SELECT 'new' FROM generate_series(1, 100)});
is($new->safe_psql('shop', qq{
	SELECT count(*) FROM (SELECT id FROM orders WHERE item = 'new'
						  UNION ALL SELECT id FROM legacy WHERE item = 'new') s
	WHERE id > $before AND (snowflake.snowflake_decode(id)).worker_id = 2}),
	'200', 'new rows get IDs above every restored one, with the new worker id');

# A dump of 1.1, whose defaults name public.snowflake_nextval(), restores
# as README's Upgrading says: 1.1 in public first, then the update.
$old->safe_psql('postgres', 'CREATE DATABASE shop11');
$old->safe_psql('shop11', q{
	CREATE EXTENSION snowflake VERSION '1.1';
	CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT public.snowflake_nextval(), item text);
	INSERT INTO orders (item) SELECT 'o' || g FROM generate_series(1, 100) g;
	SELECT public.snowflake_claim_worker('old');
});
my $dump11 = $old->basedir . '/shop11.dump';
$old->command_ok([ 'pg_dump', '-Fc', '-d', $old->connstr('shop11'), '-f', $dump11 ], 'pg_dump of 1.1');
$new->safe_psql('postgres', 'CREATE DATABASE shop11');
$new->safe_psql('shop11', "CREATE EXTENSION snowflake VERSION '1.1' SCHEMA public");
$new->command_ok([ 'pg_restore', '--exit-on-error', '-d', $new->connstr('shop11'), $dump11 ],
	'pg_restore of 1.1 into 1.1 made first');
$new->safe_psql('shop11', 'ALTER EXTENSION snowflake UPDATE');
is($new->safe_psql('shop11', q{
	SET search_path = public;
	SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef WHERE adrelid = 'orders'::regclass}),
	'snowflake.snowflake_nextval()', 'updated, its default calls the generator in snowflake');
is($new->safe_psql('shop11', 'SELECT worker_id, node_name FROM snowflake.snowflake_workers'),
	'1|old', 'with its claims');
ok($new->safe_psql('shop11', "INSERT INTO orders (item) VALUES ('new') RETURNING id") > 0,
	'and generates');

$old->stop;
$new->stop;
done_testing();
