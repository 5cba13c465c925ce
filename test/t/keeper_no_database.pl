# The keeper holds no database: with the library preloaded, the database
# "postgres" can be used as a template, renamed and dropped, and pg_upgrade
# (to the same major version, which it accepts) succeeds with the library
# preloaded in both clusters.  Checking the IDs after pg_upgrade is another
# test's business; this one checks that it runs.  A cluster without
# "postgres" generates IDs too, and 1.1's origin that the server cannot
# read keeps it from generating until it can.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SnowflakeTest;

my $node = snowflake_node('old');
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION snowflake;
	CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), n int);
	INSERT INTO t (n) SELECT g FROM generate_series(1, 1000) g;
});
ok($node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'snowflake keeper' AND datname IS NULL"),
	'the keeper runs, connected to no database');

$node->safe_psql('template1', 'CREATE DATABASE copy_of_postgres TEMPLATE postgres');
is($node->safe_psql('copy_of_postgres', 'SELECT count(*) FROM t'), '1000',
	'CREATE DATABASE ... TEMPLATE postgres works with the library preloaded');
$node->safe_psql('template1', 'ALTER DATABASE postgres RENAME TO postgres_renamed');
$node->safe_psql('template1', 'DROP DATABASE postgres_renamed');
is($node->safe_psql('template1', "SELECT count(*) FROM pg_database WHERE datname LIKE 'postgres%'"),
	'0', 'ALTER DATABASE postgres RENAME and DROP DATABASE postgres work');
$node->safe_psql('template1', 'CREATE DATABASE postgres TEMPLATE copy_of_postgres');
$node->safe_psql('postgres', 'INSERT INTO t (n) SELECT g FROM generate_series(1, 100) g');
is($node->safe_psql('postgres', 'SELECT count(*) FROM t'), '1100',
	'the node generates IDs in the database made again');
$node->stop;

# pg_upgrade, both clusters preloading the library (Debian's
# pg_upgradecluster copies the old configuration).
my $new = snowflake_node('new');
pg_upgrade_ok($node, $new, 'pg_upgrade succeeds with the library preloaded in both clusters');
$new->start;
is($new->safe_psql('postgres', 'SELECT count(*) FROM t'), '1100',
	'the upgraded cluster holds the rows');
# the one step after pg_upgrade (see node_identity)
$new->safe_psql('postgres',
	"SELECT snowflake_confirm_node(old_data_directory => '" . $node->data_dir . "')");
$new->safe_psql('postgres', 'INSERT INTO t (n) VALUES (1)');
is($new->safe_psql('postgres', 'SELECT count(*) FROM t'), '1101',
	'and generates IDs');
$new->stop;

# A cluster without the database "postgres", preloading the library for
# the first time: the one look for 1.1's origin connects to another
# database, and IDs are issued.
my $lone = snowflake_node('nopostgres');
$lone->append_conf('postgresql.conf', "shared_preload_libraries = ''");
$lone->start;
$lone->safe_psql('template1', 'CREATE DATABASE app');
$lone->safe_psql('template1', 'DROP DATABASE postgres');
$lone->stop;
$lone->append_conf('postgresql.conf', "shared_preload_libraries = 'snowflake'");
$lone->start;
$lone->safe_psql('app', 'CREATE EXTENSION snowflake');
is($lone->safe_psql('app', 'SELECT snowflake_nextval() > 0'), 't',
	'without the database "postgres", IDs are issued');
ok($lone->poll_query_until('app',
	"SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'snowflake origin check'"),
	'and the worker that looked for the origin is gone');

# 1.1's origin on a server with no state slots for origins: its progress
# was not restored, so it bounds nothing the server can see.  The node
# refuses until it can read it, and then continues above it.
my $slots = $lone->safe_psql('app', 'SHOW server_version_num') >= 180000 ?
  'max_active_replication_origins' : 'max_replication_slots';
my $last = $lone->safe_psql('app', 'SELECT snowflake_nextval()');
my $high = $last + (300 << 22);	# 300 ms of ID time ahead
$lone->safe_psql('app', "SELECT pg_replication_origin_create('snowflake_high_water_mark')");
$lone->safe_psql('app', sprintf(
	"SELECT pg_replication_origin_advance('snowflake_high_water_mark', '%X/%X')",
	$high >> 32, $high & 0xffffffff));
$lone->stop;
unlink $lone->data_dir . '/snowflake.state';
$lone->append_conf('postgresql.conf', "$slots = 0");
$lone->start;
my ($code, $err) = refusal($lone, 'app');
is($code, '55S08', "1.1's origin unreadable ($slots = 0): IDs are refused, the reservation not renewed");
like($err, qr/DETAIL:  .*"snowflake_high_water_mark"/, 'naming the replication origin the floor needs');
ok($lone->log_contains(qr/cannot read the progress of replication origin "snowflake_high_water_mark".*\n.*DETAIL: .*no state slots.*\n.*HINT: +Set $slots to at least 1/),
	'and the server log says why, and what to set');
$lone->append_conf('postgresql.conf', "$slots = 10");
$lone->restart;
is($lone->safe_psql('app', "SELECT snowflake_nextval() > $high"), 't',
	"with state slots again, new IDs continue above the origin's reservation");
$lone->stop;

done_testing();
