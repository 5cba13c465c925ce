# Several nodes joined by logical replication: three writers with worker
# ids 1, 2, 3 fan in to one aggregator.  Uniqueness under concurrent load,
# ordering across nodes within the clock skew, a node that reuses a worker
# id caught by the registry, and a writer's standby promoted mid-stream.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use SnowflakeTest;

my $schema = q{
	CREATE EXTENSION snowflake;
	CREATE TABLE events (
		id bigint PRIMARY KEY DEFAULT snowflake_nextval(),
		node int NOT NULL,
		round int,
		payload text);
};

my @writers;
for my $w (1 .. 3)
{
	my $n = snowflake_node("writer$w", worker_id => $w, allows_streaming => 'logical',
		conf => "max_wal_senders = 10\nmax_replication_slots = 10");
	start_faked($n, '+0');
	$n->safe_psql('postgres', $schema);
	$n->safe_psql('postgres', "SELECT snowflake_claim_worker('writer$w')");
	$n->safe_psql('postgres',
		'CREATE PUBLICATION fanin FOR TABLE events, snowflake_workers');
	push @writers, $n;
}

my $agg = snowflake_node('aggregator', worker_id => 100,
	conf => "max_logical_replication_workers = 10\nmax_worker_processes = 16");
$agg->start;
$agg->safe_psql('postgres', $schema);
for my $w (1 .. 3)
{
	my $conn = $writers[ $w - 1 ]->connstr . ' dbname=postgres';
	$agg->safe_psql('postgres',
		"CREATE SUBSCRIPTION from_writer$w CONNECTION '$conn' PUBLICATION fanin");
}
$writers[$_ - 1]->wait_for_catchup("from_writer$_") for 1 .. 3;
# PostgreSQL 19 counts table and sequence synchronization errors apart
my $sync_errors = $agg->pg_version->major >= 19
  ? '(sync_table_error_count + sync_seq_error_count)' : 'sync_error_count';

# 1. fan-in under concurrent load
my $per_client = 5000;
my $clients = 4;
my @runs;
for my $w (1 .. 3)
{
	my $script = $writers[ $w - 1 ]->basedir . '/insert.sql';
	open my $fh, '>', $script or die;
	print $fh "INSERT INTO events (node, payload) VALUES ($w, 'load');\n";
	close $fh;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'pgbench', '-n', '-c', $clients, '-j', 2, '-t', $per_client, '-f', $script,
		  $writers[ $w - 1 ]->connstr('postgres') ],
		'>', \$out, '2>', \$err);
	push @runs, [ $h, \$err ];
}
ok($_->[0]->finish, 'pgbench on a writer finished') or diag(${ $_->[1] }) for @runs;
$writers[$_ - 1]->wait_for_catchup("from_writer$_") for 1 .. 3;

my $expected = 3 * $clients * $per_client;
is($agg->safe_psql('postgres', "SELECT count(*), count(DISTINCT id) FROM events WHERE payload = 'load'"),
	"$expected|$expected", "the aggregator holds all $expected rows, each ID once");
is($agg->safe_psql('postgres',
	"SELECT coalesce(sum(apply_error_count + $sync_errors), 0) FROM pg_stat_subscription_stats"),
	'0', 'no subscription reported an error');
is($agg->safe_psql('postgres',
	'SELECT count(*) FROM events WHERE (snowflake_decode(id)).worker_id <> node'),
	'0', 'every row\'s worker id names the node it came from');
is($agg->safe_psql('postgres',
	'SELECT string_agg(worker_id || \':\' || node_name, \',\' ORDER BY worker_id) FROM snowflake_workers'),
	'1:writer1,2:writer2,3:writer3', 'the aggregator sees every writer\'s claim');

# 2. ordering across nodes: rounds 40 ms apart, one row per writer a round;
# ordered by id, a row never comes before one of an earlier round by more
# than the clock skew
my $settle = sub { $writers[$_ - 1]->wait_for_catchup("from_writer$_") for 1 .. 3 };
my ($lag, $disorder, $longest) = id_order_lag(\@writers, $agg, 'synced', 25, $settle);
note(sprintf 'clocks in step: id order runs behind insert order by %d rounds', $lag);
ok($lag <= 1, "with clocks in step, id order follows insert order (behind by $lag rounds)");

set_clock_offset($writers[2], '+0.5');
($lag, $disorder, $longest) = id_order_lag(\@writers, $agg, 'skewed', 25, $settle);
note(sprintf 'writer3 500 ms ahead: id order runs behind insert order by %d rounds, %.0f ms; '
	  . 'the longest round took %.0f ms', $lag, $disorder, $longest);
ok($lag >= 1 && $disorder <= 500 + $longest + 20,
	sprintf('one clock 500 ms ahead: disorder %.0f ms, bounded by the skew and a round of %.0f ms',
		$disorder, $longest));
is($agg->safe_psql('postgres', "SELECT count(*), count(DISTINCT id) FROM events WHERE payload = 'skewed'"),
	'75|75', 'and nothing collides');

# 3. a fourth node misconfigured with writer2's worker id, set up the way
# README says: subscribe, then claim, then write
my $dup = snowflake_node('writer4', worker_id => 2, allows_streaming => 'logical');
$dup->start;
$dup->safe_psql('postgres', $schema);
$dup->safe_psql('postgres', 'CREATE PUBLICATION fanin FOR TABLE events, snowflake_workers');
$agg->safe_psql('postgres',
	"CREATE SUBSCRIPTION from_writer4 CONNECTION '" . $dup->connstr . " dbname=postgres' PUBLICATION fanin");
$agg->wait_for_subscription_sync($dup, 'from_writer4');
$dup->safe_psql('postgres', "SELECT snowflake_claim_worker('writer4')");
$dup->safe_psql('postgres', "INSERT INTO events (node, payload) SELECT 4, 'dup' FROM generate_series(1, 100)");
$agg->poll_query_until('postgres', qq{
	SELECT apply_error_count + $sync_errors > 0 FROM pg_stat_subscription_stats
	WHERE subname = 'from_writer4'})
  or die 'the second claim was not refused';
# PostgreSQL 18 and later report the key violation as a conflict
my @refused = $agg->pg_version->major >= 18
  ? ('conflict detected on relation "snowflake.snowflake_workers": conflict=insert_exists',
	'Key already exists in unique index "snowflake_workers_pkey"')
  : ('duplicate key value violates unique constraint "snowflake_workers_pkey"');
ok((grep { $agg->log_contains($_) } @refused) == @refused,
	'the second claim of worker id 2 stops its subscription');
is($agg->safe_psql('postgres', "SELECT count(*) FROM events WHERE payload = 'dup'"), '0',
	'before any of its rows arrive');
is($agg->safe_psql('postgres', "SELECT node_name FROM snowflake_workers WHERE worker_id = 2"),
	'writer2', 'the first claim stands');
# a node that sees another system's claim refuses to claim
$dup->safe_psql('postgres', q{
	DELETE FROM snowflake_workers WHERE worker_id = 2;
	INSERT INTO snowflake_workers VALUES (2, 1, 'someone else', now())});
# the claim that arrived holds the node back, which refuses first
is(refusal($dup, 'postgres', 'SELECT snowflake_claim_worker()'), '55S03 claimed_elsewhere',
	'claiming a taken worker id fails');
$agg->safe_psql('postgres', 'DROP SUBSCRIPTION from_writer4');
$dup->stop;

# 4. writer1's streaming standby is promoted while writer1 dies
my $w1 = $writers[0];
$w1->backup('w1');
my $standby = PostgreSQL::Test::Cluster->new('writer1_standby');
$standby->init_from_backup($w1, 'w1', has_streaming => 1);
$standby->start;
$w1->safe_psql('postgres', "INSERT INTO events (node, payload) SELECT 1, 'before' FROM generate_series(1, 500)");
$w1->wait_for_catchup($standby);
$w1->wait_for_catchup('from_writer1');
my $w1_max = $w1->safe_psql('postgres', 'SELECT max(id) FROM events WHERE node = 1');
$w1->stop('immediate');
$standby->promote;

# the old slot died with writer1: subscribe to the promoted node afresh
$agg->safe_psql('postgres', q{
	ALTER SUBSCRIPTION from_writer1 DISABLE;
	ALTER SUBSCRIPTION from_writer1 SET (slot_name = NONE);
	DROP SUBSCRIPTION from_writer1});
$standby->safe_psql('postgres', 'SELECT 1');
$agg->safe_psql('postgres',
	"CREATE SUBSCRIPTION from_writer1 CONNECTION '" . $standby->connstr . ' dbname=postgres'
	  . "' PUBLICATION fanin WITH (copy_data = false)");
$standby->wait_for_catchup('from_writer1');
$standby->safe_psql('postgres', "INSERT INTO events (node, payload) SELECT 1, 'after' FROM generate_series(1, 500)");
$writers[1]->safe_psql('postgres', "INSERT INTO events (node, payload) SELECT 2, 'after' FROM generate_series(1, 500)");
$standby->wait_for_catchup('from_writer1');
$writers[1]->wait_for_catchup('from_writer2');
is($agg->safe_psql('postgres', "SELECT count(*), count(DISTINCT id) FROM events WHERE payload = 'after'"),
	'1000|1000', 'after the failover the fan-in goes on');
is($agg->safe_psql('postgres', "SELECT count(*) FROM events WHERE payload = 'after' AND node = 1 AND id <= $w1_max"),
	'0', 'the promoted node issues IDs above everything writer1 issued');
is($agg->safe_psql('postgres',
	'SELECT coalesce(sum(apply_error_count), 0) FROM pg_stat_subscription_stats WHERE subname <> \'from_writer4\''),
	'0', 'without a collision');

$_->stop for $standby, $writers[1], $writers[2], $agg;
done_testing();
