# A first day's mistakes get errors that say the fix, on servers set up as
# README recommends (no snowflake in search_path): a worker id out of range
# in postgresql.conf is refused to the client with its range, the status
# view says why the node is not ready, and README's fix (set it, reload)
# works; a misspelt layout shows no layout in force; a call
# without the schema, and one in a database without the extension, fail as
# docs/troubleshooting.md says.  A default that generates IDs on a column
# narrower than bigint is refused when declared (test/sql/defaults.sql), but
# never stops PostgreSQL's own machinery: a dump of a schema that has one
# (made while 1.1 was installed, or loaded so) restores, with pg_restore
# and with psql, and pg_upgrade carries it over; the update from 1.1 says
# which it found, and commands on that table that leave its default alone
# go on.
use strict;
use warnings;
use File::Basename qw(dirname);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SnowflakeTest;

my $troubleshooting = slurp_file(dirname(__FILE__) . '/../../docs/troubleshooting.md');

# node(NAME, CONF): a server as README recommends it
sub node
{
	my ($name, $conf) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$node->append_conf('postgresql.conf', "shared_preload_libraries = 'snowflake'\n$conf");
	return $node;
}

# error(NODE, SQL, DB): the error SQL gives, '' if none
sub error
{
	my ($node, $sql, $db) = @_;
	my ($ret, $out, $err) = $node->psql($db // 'postgres', $sql);
	return $ret == 0 ? '' : $err;
}

# status(NODE): the view's state and reason, and its layout
sub status
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		"SELECT state || '/' || coalesce(reason, '') || ' ' || coalesce(layout, 'none') FROM snowflake.snowflake_status");
}

# 1. A worker id out of range, in postgresql.conf: the client is told the
# range, not only the server log, and the status view says so too; the
# fix is README's, a reload.
my $node = node('first', "snowflake.worker_id = 5000\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION snowflake');
for my $call ('snowflake.snowflake_nextval()', 'snowflake.snowflake_worker_id()')
{
	like(error($node, "SELECT $call"),
		qr/snowflake.worker_id = '5000' was rejected\nDETAIL:  Worker ids run from 0 to 1023 in the "shardingsphere" layout/,
		"worker id 5000: $call names the range");
}
is(status($node), 'disabled/worker_id_rejected shardingsphere', '... and the view says it is not ready, and why');
$node->append_conf('postgresql.conf', "snowflake.layout = 'javascript'\nsnowflake.worker_id = 100\n");
$node->restart;
like(error($node, 'SELECT snowflake.snowflake_nextval()'),
	qr/snowflake.worker_id = '100' was rejected\nDETAIL:  Worker ids run from 0 to 63 in the "javascript" layout/,
	'worker id 100 in the javascript layout: its range');
$node->append_conf('postgresql.conf', "snowflake.layout = 'shardingsphere'\nsnowflake.worker_id = 5000\n");
$node->restart;
is(status($node), 'disabled/worker_id_rejected shardingsphere', 'rejected at start again');
$node->safe_psql('postgres', 'ALTER SYSTEM SET snowflake.worker_id = 7');
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
$node->poll_query_until('postgres', "SELECT state = 'ready' FROM snowflake.snowflake_status")
  or die 'the reload did not fix the worker id';
is(error($node, 'SELECT snowflake.snowflake_nextval()'), '', 'set and reloaded, as README says, the node generates');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET snowflake.worker_id');

# 2. A misspelt layout: no layout is in force, and the view does not show
# the default as if it were; the fix is a restart, as the hint says.
$node->append_conf('postgresql.conf', "snowflake.layout = 'shardingspere'\nsnowflake.worker_id = 7\n");
$node->restart;
my ($code, $words) = refusal($node, 'postgres', 'SELECT snowflake.snowflake_nextval()');
is($code, 'F0000 layout_rejected', 'a misspelt layout: the call is refused, naming the layout');
like($words, qr/snowflake.layout = 'shardingspere' was rejected at server start/, '... with the value given');
is(status($node), 'disabled/layout_rejected none', '... and the view shows no layout in force');
$node->append_conf('postgresql.conf', "snowflake.layout = 'shardingsphere'\n");
$node->restart;
is(error($node, 'SELECT snowflake.snowflake_nextval()'), '', 'fixed, the node generates');
is(status($node), 'ready/ shardingsphere', '... and the view says ready');

# 3. No worker id at all: the view says not ready, and why.
$node->append_conf('postgresql.conf', "snowflake.worker_id = -1\n");
$node->reload;
$node->poll_query_until('postgres', "SELECT reason = 'worker_id_unset' FROM snowflake.snowflake_status")
  or die 'the view did not say the worker id is unset';
my ($unset, $unset_words) = refusal($node, 'postgres', 'SELECT snowflake.snowflake_nextval()');
is($unset, '55S09', 'unset: the call is refused (55S09)');
like($unset_words, qr/HINT:  Set snowflake.worker_id = 7 in postgresql.conf and reload/,
	'... and the hint names the worker id the node ran as');
$node->append_conf('postgresql.conf', "snowflake.worker_id = 7\n");
$node->reload;
$node->poll_query_until('postgres', "SELECT state = 'ready' FROM snowflake.snowflake_status")
  or die 'set again, the view did not say ready';
is(error($node, 'SELECT snowflake.snowflake_nextval()'), '', 'set again and reloaded, it generates');

# 4. The schema left out, and the extension not created: PostgreSQL's
# errors, which Troubleshooting names with the fix.
like(error($node, 'SELECT snowflake_nextval()'), qr/function snowflake_nextval\(\) does not exist/,
	'a call without the schema');
ok(index($troubleshooting, 'function snowflake_nextval() does not exist') >= 0,
	'... is in Troubleshooting');
$node->safe_psql('postgres', 'CREATE DATABASE plain');
like(error($node, 'SELECT snowflake.snowflake_nextval()', 'plain'), qr/schema "snowflake" does not exist/,
	'a database without CREATE EXTENSION');
ok(index($troubleshooting, 'schema "snowflake" does not exist') >= 0, '... is in Troubleshooting');
like(error($node, 'CREATE TABLE t (id integer PRIMARY KEY DEFAULT snowflake.snowflake_nextval())'),
	qr/column "id" of relation public.t is of type integer, too narrow for snowflake IDs/,
	'an integer key with the default is refused when declared');
ok(index($troubleshooting, 'too narrow for snowflake IDs') >= 0
	  && index($troubleshooting, 'snowflake.snowflake_narrow_defaults()') >= 0,
	'... and Troubleshooting names it, and the check');

# 5. A schema that has such a column: loaded as a dump loads (so) and
# dumped, it restores in both ways, saying what it found.
$node->safe_psql('postgres', q{
	SET check_function_bodies = off;
	CREATE TABLE narrow (id integer PRIMARY KEY DEFAULT snowflake.snowflake_nextval(), v text);
	RESET check_function_bodies;
	CREATE TABLE wide (id bigint PRIMARY KEY DEFAULT snowflake.snowflake_nextval(), v text);
	INSERT INTO narrow VALUES (1, 'by hand');
	INSERT INTO wide (v) VALUES ('made');});
is($node->safe_psql('postgres', 'SELECT relation || \'.\' || column_name FROM snowflake.snowflake_narrow_defaults()'),
	'narrow.id', 'the check lists the column');
my $dir = $node->basedir;
command_ok([ 'pg_dump', '-Fc', '-d', $node->connstr('postgres'), '-f', "$dir/db.dump" ], 'pg_dump -Fc');
command_ok([ 'pg_dump', '-d', $node->connstr('postgres'), '-f', "$dir/db.sql" ], 'pg_dump, plain');
for my $how ('pg_restore', 'psql')
{
	$node->safe_psql('postgres', "CREATE DATABASE by_$how");
	# pg_restore shows the server's warnings only with --verbose
	my ($out, $err) = run_command($how eq 'pg_restore'
		? [ 'pg_restore', '--exit-on-error', '--verbose', '-d', $node->connstr("by_$how"), "$dir/db.dump" ]
		: [ 'psql', '-X', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr("by_$how"), '-f', "$dir/db.sql" ]);
	is($node->safe_psql("by_$how", 'SELECT count(*) FROM narrow'), '1', "restored with $how");
	like($err, qr/WARNING:  column "id" of relation public.narrow is of type integer, too narrow for snowflake IDs/,
		"... with a warning naming the column");
	is($node->safe_psql("by_$how", 'SELECT count(*) FROM snowflake.snowflake_narrow_defaults()'), '1',
		'... which the check lists');
}

# 6. The update from 1.1, where nothing refused it, says what it finds.
$node->safe_psql('postgres', 'CREATE DATABASE old');
$node->safe_psql('old', q{
	CREATE EXTENSION snowflake VERSION '1.1';
	CREATE TABLE legacy (id serial PRIMARY KEY);
	ALTER TABLE legacy ALTER COLUMN id SET DEFAULT public.snowflake_nextval();});
my ($ret, $out, $err) = $node->psql('old', 'ALTER EXTENSION snowflake UPDATE');
is($ret, 0, 'the update from 1.1 goes on');
like($err, qr/WARNING:  column "id" of relation public.legacy is of type integer, too narrow for snowflake IDs/,
	'... and names the column too narrow');
# Later commands on that table that leave its default alone go on, also
# those that change the column otherwise; a default written again does not.
($ret, $out, $err) = $node->psql('old', q{
	ALTER TABLE legacy ALTER COLUMN id SET STATISTICS 200;
	ALTER TABLE legacy RENAME COLUMN id TO key;
	ALTER TABLE legacy ADD COLUMN note text;}, on_error_stop => 1);
is($ret, 0, 'the table the update found narrow takes other commands');
is($err, '', '... without a word');
($ret, $out, $err) = $node->psql('old',
	'ALTER TABLE legacy ALTER COLUMN key SET DEFAULT snowflake.snowflake_nextval()');
like($err, qr/ERROR:  column "key" of relation public.legacy is of type integer, too narrow for snowflake IDs/,
	'... but not its default written again');
$node->stop;

# 7. pg_upgrade carries such a schema over.
my $new = node('first_upgraded', "snowflake.worker_id = 7\n");
pg_upgrade_ok($node, $new, 'pg_upgrade of a cluster with a column too narrow');
$new->start;
is($new->safe_psql('postgres', 'SELECT count(*) FROM narrow'), '1', 'the upgraded cluster has its rows');
$new->stop;

done_testing();
