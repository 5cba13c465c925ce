# The worker id registry: servers without snowflake.worker_id, naming one
# registry database in snowflake.registry, lease distinct worker ids and
# generate under them; a restart keeps the lease with the registry down,
# and a standby promoted then generates under its primary's lease; a
# node without a lease refuses while the registry is down (55S10, never a
# wrong worker id) and generates once it is back; a worker id released
# with a floor goes to its next holder, whose IDs are all above the floor;
# many leases at once never share a worker id; a copy of a node made
# before it leased never leases (held_copy), and of servers made from one
# data directory image only one leases (55S11 for the others); a node
# whose lease the registry lost renews it at its start, and one whose
# worker id the registry leased to another server meanwhile refuses
# (55S12) until that lease is released, then continues above its floor.
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
GRANT EXECUTE ON FUNCTION snowflake.snowflake_registry_lease(bigint, bigint, text, integer, integer) TO fleet;
-- a right on the table that the guard trigger must still refuse
GRANT INSERT, UPDATE, DELETE ON snowflake.snowflake_registry TO fleet;
});
my $conninfo = 'host=' . $reg->host . ' port=' . $reg->port . ' dbname=postgres user=fleet';

# the role leases, and may not write the table, even granted INSERT
my ($ret, $out, $err) = $reg->psql('postgres',
	"SET ROLE fleet; \\set VERBOSITY verbose\nINSERT INTO snowflake.snowflake_registry (worker_id, system_identifier, token) VALUES (7, 7, 7)");
like($err, qr/ERROR:  42501:.*snowflake_registry_guard/s,
	'the fleet role granted INSERT cannot change the registry table: the guard refuses');

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
# a copy of a node taken before it leased (the registry down) and started
# as a primary beside it: it stays held, while its source leases
my $e = fleet_node('e', streaming => 1);
is(refusal($e), '55S10', 'e has no lease with the registry down');
$e->backup('ebk');
$reg->start;
my $we = leased($e);
my $e2 = PostgreSQL::Test::Cluster->new('e2');
$e2->init_from_backup($e, 'ebk');
$e2->start;
ok($e2->poll_query_until('postgres', "SELECT state = 'held_copy' FROM snowflake_status"),
	'the copy of e is held');
$e->safe_psql('postgres', 'INSERT INTO t (n) SELECT g FROM generate_series(1, 100) g');
like(refusal($e2), qr/^55S01/, 'with the registry up, the copy stays held (55S01)');
is($e2->safe_psql('postgres', "SELECT coalesce(worker_id_source, 'none') FROM snowflake_status"),
	'none', 'and has no worker id from the registry');
is(workers($e), $we, 'its source generates under its own lease');
$e2->stop;

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
# the fleet role's sessions default to SERIALIZABLE, where the lease
# refuses (SR003): the keeper's session runs at READ COMMITTED all the same
$reg->safe_psql('postgres', "ALTER ROLE fleet SET default_transaction_isolation = 'serializable'");
my $d = fleet_node('d', conf => "snowflake.max_run_ahead_ms = -1\n");
my $wd = leased($d);
is($wd, $wa, 'the next node leases the released worker id');
is($d->safe_psql('postgres', "SELECT count(*) FROM t WHERE id <= $floor"), '0',
	'every ID of its new holder is above the floor its last holder reached');
is(workers($d), $wa, 'and carries the worker id');
$reg->safe_psql('postgres', 'ALTER ROLE fleet RESET default_transaction_isolation');

# 60 leases at once, for 60 systems, from 30 sessions
$reg->safe_psql('postgres', 'CREATE TABLE got (sys bigint, worker_id integer)');
my $script = PostgreSQL::Test::Utils::tempdir() . '/lease.sql';
PostgreSQL::Test::Utils::append_to_file($script, q{
\set sys 1000000 + :client_id * 10 + random(0, 1) * 5 + 1
INSERT INTO got SELECT :sys, worker_id FROM snowflake.snowflake_registry_lease(:sys, :sys, 'bench', 1023, 0);
});
$reg->command_ok(['pgbench', '-n', '-c', '30', '-j', '2', '-t', '2', '-f', $script, 'postgres'],
	'60 leases at once');
# and 30 sessions at once for one system (one server): one worker id
my $same = PostgreSQL::Test::Utils::tempdir() . '/same.sql';
PostgreSQL::Test::Utils::append_to_file($same, q{
INSERT INTO got SELECT 777, worker_id FROM snowflake.snowflake_registry_lease(777, 42, 'same', 1023, 0);
});
$reg->command_ok(['pgbench', '-n', '-c', '30', '-j', '2', '-t', '1', '-f', $same, 'postgres'],
	'30 leases at once for one system');
is($reg->safe_psql('postgres', 'SELECT count(*) || \'/\' || count(DISTINCT worker_id) FROM got WHERE sys = 777'),
	'30/1', 'all of them got the same worker id');
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
	"\\set VERBOSITY verbose\nSELECT * FROM snowflake.snowflake_registry_lease(4242, 1, 'full', 1, 0)");
like($err, qr/ERROR:  SR001:/, 'a registry with no free worker id up to max_worker refuses with SR001');
($ret, $out, $err) = $reg->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT * FROM snowflake.snowflake_registry_lease(4242, 1, 'big', 2147483647, 0)");
like($err, qr/ERROR:  22023:/, 'max_worker above 65535 is refused with 22023');
($ret, $out, $err) = $reg->psql('postgres',
	"\\set VERBOSITY verbose\nBEGIN ISOLATION LEVEL REPEATABLE READ;\nSELECT * FROM snowflake.snowflake_registry_lease(777, 42, 'rr', 1023, 0)");
like($err, qr/ERROR:  SR003:/, 'a lease under REPEATABLE READ is refused with SR003');
($ret, $out, $err) = $reg->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT * FROM snowflake.snowflake_registry_lease(777, 43, 'other', 1023, 0)");
like($err, qr/ERROR:  SR002:/, "another token for a system's live lease is refused with SR002");
($ret, $out, $err) = $reg->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT * FROM snowflake.snowflake_registry_lease(777, 42, 'held', 1023, $wb)");
like($err, qr/ERROR:  SR005:/, 'a renewal of a worker id other than the live lease of its server is refused with SR005');

# two servers from one data directory image that never leased: one leases,
# the other refuses with 55S11; never both under one worker id
my $p1 = snowflake_node('p1', worker_id => -1, conf => "snowflake.registry = '$conninfo'\n");
my $p2 = snowflake_node('p2', worker_id => -1, conf => "snowflake.registry = '$conninfo'\n");
my $p2conf = slurp_file($p2->data_dir . '/postgresql.conf');
PostgreSQL::Test::Utils::system_or_bail('rm', '-rf', $p2->data_dir);
PostgreSQL::Test::Utils::system_or_bail('cp', '-a', $p1->data_dir, $p2->data_dir);
unlink($p2->data_dir . '/backup_label');
open my $fh, '>', $p2->data_dir . '/postgresql.conf' or die $!;
print $fh $p2conf;
close $fh;
for my $p ($p1, $p2)
{
	$p->start;
	$p->safe_psql('postgres', 'CREATE EXTENSION snowflake;
CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), n int)');
}
is($p1->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()'),
	$p2->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()'),
	'p1 and p2 share a system identifier');
my $heard = "SELECT worker_id_source = 'registry' OR reason = 'lease_taken' FROM snowflake_status";
ok($p1->poll_query_until('postgres', $heard) && $p2->poll_query_until('postgres', $heard),
	'both servers of the image heard from the registry');
my ($one, $other) = ($p1, $p2);
($one, $other) = ($p2, $p1)
  if $p1->safe_psql('postgres', "SELECT coalesce(reason, '') FROM snowflake_status") eq 'lease_taken';
my $wone = leased($one);
is(refusal($other), '55S11', 'the other server of the image refuses with 55S11');
is($other->safe_psql('postgres', 'SELECT state || \'/\' || reason FROM snowflake_status'),
	'blocked/lease_taken', 'and its view says why');
is($other->safe_psql('postgres', 'SELECT count(*) FROM t'), '0', 'and it issued no ID');
is(workers($one), $wone, 'the one that leased generates under its worker id');

# renewal: the registry loses b's lease (as a restore of an older backup
# would); b's next start takes its worker id back
my $bsys = $b->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()');
my $live_b = "SELECT count(*) FROM snowflake.snowflake_registry WHERE worker_id = $wb AND released_at IS NULL AND system_identifier = $bsys";
$reg->safe_psql('postgres', "DELETE FROM snowflake.snowflake_registry WHERE worker_id = $wb");
$b->restart;
ok($reg->poll_query_until('postgres', "SELECT ($live_b) = 1"),
	"the registry lost b's lease: b's restart renews it");
$b->safe_psql('postgres', 'INSERT INTO t (n) SELECT g FROM generate_series(1, 100) g');
is(workers($b), $wb, 'b generates under it');

# the registry leased it to another server meanwhile: b refuses (55S12)
$reg->safe_psql('postgres',
	"UPDATE snowflake.snowflake_registry SET system_identifier = 4343, token = 4343 WHERE worker_id = $wb");
$b->restart;
ok($b->poll_query_until('postgres', "SELECT state || '/' || reason = 'blocked/lease_lost' FROM snowflake_status"),
	'b, whose worker id the registry leased to another server, refuses: blocked/lease_lost');
my $b_rows = $b->safe_psql('postgres', 'SELECT count(*) FROM t');
is(refusal($b), '55S12', 'with SQLSTATE 55S12');
is($b->safe_psql('postgres', 'SELECT count(*) FROM t'), $b_rows, 'and issues no ID');
# the record keeps the lost lease: restarted with the registry down, b
# still refuses
$reg->stop;
$b->restart;
is(refusal($b), '55S12', 'restarted with the registry down, b still refuses with 55S12');
$reg->start;
# the hint's step: the other server stopped, its lease released with the
# floor its IDs reached (here the present, above every ID b issued)
my $b_floor = $b->safe_psql('postgres',
	'SELECT greatest(max(id), snowflake_from_timestamp(now() + interval \'200 ms\')) FROM t');
is($reg->safe_psql('postgres', "SELECT snowflake.snowflake_registry_release($wb, $b_floor)"),
	't', "the other server's lease of $wb released with floor $b_floor");
ok($b->poll_query_until('postgres', "SELECT state = 'ready' FROM snowflake_status"),
	'b renews its lease by itself and is ready');
is($reg->safe_psql('postgres', $live_b), '1', 'the registry leases the worker id to b again');
$b->safe_psql('postgres', 'INSERT INTO t (n) SELECT g FROM generate_series(1, 100) g');
is($b->safe_psql('postgres', "SELECT count(*) FROM t WHERE id > $b_floor AND (snowflake_decode(id)).worker_id = $wb"),
	'100', 'its new IDs are all above the floor the release gave');

# a standby made before its primary's first request (no token file) is
# promoted: its renewal, under a token of its own, is its system's lease
my $g = fleet_node('g', streaming => 1);
my $wg = leased($g);
$g->backup('gbk');
my $g2 = PostgreSQL::Test::Cluster->new('g2');
$g2->init_from_backup($g, 'gbk', has_streaming => 1);
unlink($g2->data_dir . '/snowflake.lease_token');
$g2->start;
$g->safe_psql('postgres', 'INSERT INTO t (n) SELECT g FROM generate_series(1, 100) g');
$g->wait_for_catchup($g2);
$g->stop;
$g2->promote;
ok($g2->poll_query_until('postgres', "SELECT state = 'ready' FROM snowflake_status")
	  && -f $g2->data_dir . '/snowflake.lease_token',
	'a standby made without its primary\'s token, promoted, renews and is ready');
$g2->safe_psql('postgres', 'INSERT INTO t (n) SELECT g FROM generate_series(1, 100) g');
is(workers($g2), $wg, 'and generates under its primary\'s lease');

done_testing();
