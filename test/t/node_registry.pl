# The worker id registry: servers without snowflake.worker_id, naming one
# registry database in snowflake.registry, lease distinct worker ids and
# generate under them; a restart keeps the lease with the registry down,
# and a standby promoted then generates under its primary's lease; a
# node without a lease refuses while the registry is down (55S10, never a
# wrong worker id) and generates once it is back; a worker id released
# with a floor goes to its next holder, whose IDs are all above the floor;
# many leases at once never share a worker id.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SnowflakeTest;

my $reg = snowflake_node('registry', worker_id => 0, conf => "max_connections = 80\n");
$reg->start;
$reg->safe_psql('postgres', q{
CREATE EXTENSION snowflake;
CREATE ROLE fleet LOGIN;
GRANT EXECUTE ON FUNCTION snowflake.snowflake_registry_lease(bigint, text, integer) TO fleet;
});
my $conninfo = 'host=' . $reg->host . ' port=' . $reg->port . ' dbname=postgres user=fleet';

# the role leases, and may not write the table
my ($ret, $out, $err) = $reg->psql('postgres',
	"SET ROLE fleet; \\set VERBOSITY verbose\nDELETE FROM snowflake.snowflake_registry");
like($err, qr/42501/, 'the fleet role cannot change the registry table');

sub fleet_node
{
	my ($name, %o) = @_;
	my $n = snowflake_node($name, worker_id => -1, allows_streaming => $o{streaming},
		conf => "snowflake.registry = '$conninfo'\n" . ($o{conf} // ''));
	$n->start;
	$n->safe_psql('postgres', 'CREATE EXTENSION snowflake;
CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), n int)');
	return $n;
}

sub workers
{
	my ($n) = @_;
	return $n->safe_psql('postgres',
		'SELECT string_agg(DISTINCT (snowflake_decode(id)).worker_id::text, \',\') FROM t');
}

sub leased
{
	my ($n) = @_;
	ok($n->poll_query_until('postgres',
			"SELECT worker_id_source = 'registry' AND state = 'ready' FROM snowflake_status"),
		$n->name . ' leased a worker id and is ready');
	$n->safe_psql('postgres', 'INSERT INTO t (n) SELECT g FROM generate_series(1, 100) g');
	return $n->safe_psql('postgres', 'SELECT worker_id FROM snowflake_status');
}

my $a = fleet_node('a', streaming => 1);
my $b = fleet_node('b');
my $wa = leased($a);
my $wb = leased($b);
isnt($wa, $wb, "two nodes lease two worker ids ($wa, $wb)");
is(workers($a), $wa, 'the IDs of a carry its leased worker id');
is(workers($b), $wb, 'the IDs of b carry its leased worker id');
is($reg->safe_psql('postgres',
		"SELECT count(*) FROM snowflake.snowflake_registry WHERE released_at IS NULL AND worker_id IN ($wa, $wb)"),
	'2', 'the registry holds both leases');

# the registry down: a restart keeps the lease, from the node's record
$reg->stop;
$a->restart;
$a->safe_psql('postgres', 'INSERT INTO t (n) SELECT g FROM generate_series(1, 100) g');
is($a->safe_psql('postgres', 'SELECT worker_id_source || worker_id FROM snowflake_status'),
	"registry$wa", 'restarted without its registry, a keeps its worker id');
is(workers($a), $wa, 'and its IDs carry it');

# a standby made after the lease inherits it: promoted while the registry
# is down, it generates under it, above every ID of its primary
$a->backup('bk');
my $a2 = PostgreSQL::Test::Cluster->new('a2');
$a2->init_from_backup($a, 'bk', has_streaming => 1);
$a2->start;
$a->safe_psql('postgres', 'INSERT INTO t (n) SELECT g FROM generate_series(1, 100) g');
$a->wait_for_catchup($a2);
my $a_last = $a->safe_psql('postgres', 'SELECT max(id) FROM t');
$a->stop;
$a2->promote;
ok($a2->poll_query_until('postgres', "SELECT state = 'ready' FROM snowflake_status"),
	'the promoted standby is ready without the registry');
$a2->safe_psql('postgres', 'INSERT INTO t (n) SELECT g FROM generate_series(1, 100) g');
is($a2->safe_psql('postgres', "SELECT worker_id_source || worker_id FROM snowflake_status"),
	"registry$wa", "it runs under its primary's lease");
is($a2->safe_psql('postgres',
		"SELECT count(*) FROM t WHERE id > $a_last AND (snowflake_decode(id)).worker_id = $wa"),
	'100', 'its IDs carry it, above every ID of its primary');

# a node without a lease refuses while the registry is down, then leases
# (c's setting holds a password, which no message shows)
my $c = fleet_node('c', conf => "snowflake.registry = '$conninfo password=s3cr3t'\n");
is(refusal($c), '55S10', 'without a lease and with the registry down, c refuses with 55S10');
($ret, $out, $err) = $c->psql('postgres', 'SELECT snowflake_nextval()');
unlike($err, qr/s3cr3t/, 'the refusal names the registry without its password');
$c->wait_for_log(qr/55S10|could not lease/);
unlike(slurp_file($c->logfile), qr/s3cr3t/, 'and so does the server log');
is($c->safe_psql('postgres', 'SELECT state || \'/\' || reason FROM snowflake_status'),
	'blocked/no_lease', 'the view shows the same reason');
is($c->safe_psql('postgres', 'SELECT count(*) FROM t'), '0', 'and no ID was issued');
$reg->start;
my $wc = leased($c);
ok($wc ne $wa && $wc ne $wb, "once the registry is back, c leases a worker id of its own ($wc)");
is(workers($c), $wc, 'and generates under it');

# release and reuse: the next holder issues only above the floor, here an
# ID 3 s ahead of the clock (as if a's clock had run ahead)
my $a_max = $a2->safe_psql('postgres', 'SELECT max(id) FROM t');
my $floor = $a2->safe_psql('postgres',
	"SELECT greatest($a_max, snowflake_from_timestamp(now() + interval '3 s'))");
$a2->stop;
is($reg->safe_psql('postgres', "SELECT snowflake.snowflake_registry_release($wa, $floor)"),
	't', "worker id $wa released with floor $floor");
my $d = fleet_node('d', conf => "snowflake.max_run_ahead_ms = -1\n");
my $wd = leased($d);
is($wd, $wa, 'the next node leases the released worker id');
is($d->safe_psql('postgres', "SELECT count(*) FROM t WHERE id <= $floor"), '0',
	'every ID of its new holder is above the floor its last holder reached');
is(workers($d), $wa, 'and carries the worker id');

# 60 leases at once, for 60 systems, from 30 sessions
$reg->safe_psql('postgres', 'CREATE TABLE got (sys bigint, worker_id integer)');
my $script = PostgreSQL::Test::Utils::tempdir() . '/lease.sql';
PostgreSQL::Test::Utils::append_to_file($script, q{
\set sys 1000000 + :client_id * 10 + random(0, 1) * 5 + 1
INSERT INTO got SELECT :sys, worker_id FROM snowflake.snowflake_registry_lease(:sys, 'bench', 1023);
});
$reg->command_ok(['pgbench', '-n', '-c', '30', '-j', '2', '-t', '2', '-f', $script, 'postgres'],
	'60 leases at once');
is($reg->safe_psql('postgres', q{
SELECT count(*) FROM got g
WHERE NOT EXISTS (SELECT FROM snowflake.snowflake_registry r
				  WHERE r.system_identifier = g.sys AND r.worker_id = g.worker_id
					AND r.released_at IS NULL)}),
	'0', 'every lease returned is the live lease of its system');
is($reg->safe_psql('postgres', q{
SELECT count(DISTINCT sys) = count(DISTINCT worker_id) FROM got}),
	't', 'no two systems were given one worker id');
is($reg->safe_psql('postgres', qq{
SELECT count(*) FROM got g JOIN snowflake.snowflake_registry r USING (worker_id)
WHERE r.system_identifier <> g.sys OR r.worker_id IN ($wa, $wb, $wc)}),
	'0', 'none of them took a worker id leased before');

# full: no worker id above max_worker is given
($ret, $out, $err) = $reg->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT * FROM snowflake.snowflake_registry_lease(4242, 'full', 1)");
like($err, qr/ERROR:  SR001:/, 'a registry with no free worker id up to max_worker refuses with SR001');

done_testing();
