# Reservations reach WAL as records of the extension's own resource manager:
# they take no replication capacity and wait on no lock that users'
# replication holds.  A standby with max_replication_slots = 0 replays
# them; a subscriber with one slot and one subscription keeps applying
# while it issues IDs; a session holding a replication origin, or a lock on
# pg_replication_origin, stops no ID.  And a clock reading the node never
# issued IDs at is no floor after a crash.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SnowflakeTest;

sub burst
{
	my ($node, $n) = @_;
	return $node->safe_psql('postgres',
		"INSERT INTO t SELECT FROM generate_series(1, $n); SELECT max(id) FROM t");
}

my $primary = snowflake_node('primary', allows_streaming => 1);
$primary->start;
$primary->safe_psql('postgres', q{
	CREATE EXTENSION snowflake;
	CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_nextval());
});
my $v18 = $primary->pg_version >= 18;

# 1. A standby with no replication slots (nor origins) replays every record.
$primary->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'b', has_streaming => 1);
$standby->append_conf('postgresql.conf',
	"max_replication_slots = 0\n" . ($v18 ? "max_active_replication_origins = 0\n" : ''));
$standby->start;
my $max;
for (1 .. 4)
{
	$max = burst($primary, 20000);
	select(undef, undef, undef, 0.3);
}
$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres', 'SELECT max(id) FROM t'), $max,
	'a standby with max_replication_slots = 0 replays the reservations');
ok($standby->safe_psql('postgres', "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'startup'") == 1,
	'and its startup process runs');
my $hwm = $primary->safe_psql('postgres', 'SELECT high_water_mark FROM snowflake_status');
ok($hwm >= $max, 'the primary reserved above its IDs');

# The record shows by name in the server's own WAL tools.
$primary->safe_psql('postgres', 'CREATE EXTENSION pg_walinspect');
my $lsn0 = $primary->safe_psql('postgres', 'SELECT pg_current_wal_insert_lsn()');
burst($primary, 20000);
select(undef, undef, undef, 1.2);
burst($primary, 20000);
like($primary->safe_psql('postgres',
	"SELECT record_type || ' ' || description FROM pg_get_wal_records_info('$lsn0', pg_current_wal_flush_lsn()) WHERE resource_manager = 'snowflake' LIMIT 1"),
	qr/^RESERVE up to \d+, layout \w+$/, 'pg_walinspect shows the record as snowflake/RESERVE');
note('records, their length in bytes, between the two bursts: ' . $primary->safe_psql('postgres',
	"SELECT count(*) || ', ' || max(record_length) FROM pg_get_wal_records_info('$lsn0', pg_current_wal_flush_lsn()) WHERE resource_manager = 'snowflake'"));

# 2. A standby that replays a reservation holds it in its state file at
# once: promoted after an immediate stop, it continues above the primary.
$primary->wait_for_catchup($standby);
my $pmax = $primary->safe_psql('postgres', 'SELECT max(id) FROM t');
$primary->stop('immediate');
$standby->stop('immediate');
$standby->start;
$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()');
burst($standby, 100);
is($standby->safe_psql('postgres', "SELECT count(*) FROM t WHERE id > $pmax"), '100',
	'the promoted standby (no slots) continues above the old primary');

# 3. A subscriber with one replication slot and one subscription issues IDs
# and keeps applying.
my $pub = PostgreSQL::Test::Cluster->new('pub');
$pub->init(allows_streaming => 'logical');
$pub->start;
$pub->safe_psql('postgres', q{
	CREATE TABLE r (k int PRIMARY KEY);
	CREATE PUBLICATION p FOR TABLE r;
});
my $sub = snowflake_node('sub', worker_id => 3,
	conf => "max_replication_slots = 1\n" . ($v18 ? "max_active_replication_origins = 1\n" : ''));
$sub->start;
$sub->safe_psql('postgres', q{
	CREATE EXTENSION snowflake;
	CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_nextval());
	CREATE TABLE r (k int PRIMARY KEY);
});
$sub->safe_psql('postgres',
	"CREATE SUBSCRIPTION s CONNECTION '" . $pub->connstr
	  . " dbname=postgres' PUBLICATION p WITH (copy_data = false)");
# no table synchronization: its worker would need an origin slot of its own
$pub->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_replication WHERE application_name = 's' AND state = 'streaming'")
  or die 'the subscription did not start streaming';
for my $round (1 .. 3)
{
	burst($sub, 20000);
	$pub->safe_psql('postgres', "INSERT INTO r SELECT g FROM generate_series($round * 100, $round * 100 + 99) g");
	select(undef, undef, undef, 0.4);
}
$pub->wait_for_catchup('s');
is($sub->safe_psql('postgres', 'SELECT count(*) FROM r'), '300',
	'a subscriber with max_replication_slots = 1 applies while it issues IDs');
is($sub->safe_psql('postgres', 'SELECT count(*) FROM t'), '60000', 'and it issued them');
unlike(slurp_file($sub->logfile), qr/could not find free replication state/,
	'no apply worker ran out of origin state slots');

# 4. A session holding a replication origin, and one holding the lock on
# pg_replication_origin, stop no ID.
$sub->safe_psql('postgres', "SELECT pg_replication_origin_create('held')");
my ($o1, $e1, $o2, $e2) = ('', '', '', '');
my $holder = IPC::Run::start(
	[ 'psql', '-X', '-d', $sub->connstr('postgres'), '-c',
	  "SELECT pg_replication_origin_session_setup('held'); SELECT pg_sleep(7)" ],
	'<', \undef, '>', \$o1, '2>', \$e1);
my $locker = IPC::Run::start(
	[ 'psql', '-X', '-d', $sub->connstr('postgres'), '-c',
	  'BEGIN; LOCK TABLE pg_replication_origin IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(7); COMMIT' ],
	'<', \undef, '>', \$o2, '2>', \$e2);
$sub->poll_query_until('postgres',
	"SELECT count(*) > 0 FROM pg_locks WHERE relation = 'pg_replication_origin'::regclass AND mode = 'AccessExclusiveLock' AND granted");
my $before = $sub->safe_psql('postgres', 'SELECT max(id) FROM t');
my ($ret, $out, $err) = (0, '', '');
for (1 .. 8)
{
	($ret, $out, $err) = $sub->psql('postgres', 'INSERT INTO t SELECT FROM generate_series(1, 20000)');
	last if $ret;
	select(undef, undef, undef, 0.5);
}
is($ret, 0, 'IDs flow while pg_replication_origin is locked and an origin is held')
  or diag($err);
ok($sub->safe_psql('postgres', 'SELECT high_water_mark FROM snowflake_status') >
	$sub->safe_psql('postgres', "SELECT $before + (1500::bigint << 22)"),
	'reservations went on meanwhile');
$holder->finish;
$locker->finish;

# 5. A clock a day ahead with no ID issued, a checkpoint, the clock back,
# IDs, a crash: IDs flow at once, without refusal.
my $node = snowflake_node('glitch', worker_id => 4);
start_faked($node, '+0');
$node->safe_psql('postgres', q{
	CREATE EXTENSION snowflake;
	CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_nextval());
});
burst($node, 100);
set_clock_offset($node, '+1d');
select(undef, undef, undef, 0.2);
$node->safe_psql('postgres', 'CHECKPOINT');
set_clock_offset($node, '+0');
select(undef, undef, undef, 0.2);
my $m5 = burst($node, 1000);
$node->stop('immediate');
start_faked($node, '+0');
($ret, $out, $err) = $node->psql('postgres', 'INSERT INTO t SELECT FROM generate_series(1, 1000)');
is($ret, 0, 'after a day-ahead glitch with no ID issued and a crash, IDs flow') or diag($err);
is($node->safe_psql('postgres', "SELECT count(*) FROM t WHERE id > $m5"), '1000',
	'above the IDs issued before the crash');
ok($node->safe_psql('postgres', 'SELECT run_ahead_ms FROM snowflake_status') < 2000,
	'and not a day ahead of the clock');
$node->stop;

done_testing();
