# The mesh benchmark (make bench-mesh): throughput and apply lag of three
# nodes that all write, joined by scripts/snowflake-mesh, against one node
# alone, and a bigserial table in the same mesh, whose sequences clash.
# Figures only, no timing is asserted; the tests check that each phase ran
# as it must.  Writes MESH_RESULTS (a Markdown file).
use strict;
use warnings;
use FindBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time sleep);
use SnowflakeTest;

my $seconds = $ENV{MESH_SECONDS} // 20;
my $clients = 4;
my $results = $ENV{MESH_RESULTS} // "$FindBin::RealBin/results/mesh.md";
my $mesh_script = "$FindBin::RealBin/../../scripts/snowflake-mesh";

my @nodes;
for my $w (1 .. 3)
{
	my $n = snowflake_node("bench$w", worker_id => $w, allows_streaming => 'logical',
		conf => "max_wal_senders = 20\nmax_replication_slots = 20\n"
		  . "max_logical_replication_workers = 12\nmax_worker_processes = 24\n"
		  . "wal_receiver_status_interval = 1\nshared_buffers = '256MB'\nmax_wal_size = '2GB'\n"
		  # what the test harness turns off or up for tests, as in production
		  . "fsync = on\nlog_statement = none\nlog_min_duration_statement = -1");
	$n->start;
	$n->safe_psql('postgres', q{
		CREATE EXTENSION snowflake;
		CREATE TABLE events (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), node int, payload text);
		CREATE TABLE serial_events (id bigserial PRIMARY KEY, node int, payload text);
	});
	push @nodes, $n;
}
sub conn { return $_[0]->connstr . ' dbname=postgres'; }
my $version = $nodes[0]->safe_psql('postgres', 'SHOW server_version');

# pgbench(NODE, TABLE, SECONDS): a timed insert run in the background
sub pgbench
{
	my ($node, $table, $secs) = @_;
	my $script = $node->basedir . "/insert-$table.sql";
	open my $fh, '>', $script or die;
	print $fh "INSERT INTO $table (node, payload) VALUES (0, 'bench');\n";
	close $fh;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'pgbench', '-n', '-c', $clients, '-j', $clients, '-T', $secs, '-f', $script,
		  conn($node) ], '>', \$out, '2>', \$err);
	return { h => $h, out => \$out, err => \$err, node => $node };
}

# the committed rows per second of a finished run
sub tps
{
	my ($run) = @_;
	my $ok = $run->{h}->finish;
	my ($n) = ${ $run->{out} } =~ /number of transactions actually processed: (\d+)/;
	my ($t) = ${ $run->{out} } =~ /tps = ([\d.]+) \(without initial connection time\)/;
	ok($ok && $n, 'pgbench ran on ' . $run->{node}->name) or diag(${ $run->{err} });
	return $t // 0;
}

sub counts { return join ' / ', map { $_->safe_psql('postgres', "SELECT count(*) FROM $_[0]") } @nodes; }

# 1. one node alone, each table
my %alone = map { $_ => tps(pgbench($nodes[0], $_, $seconds)) } qw(events serial_events);

# 2. the mesh; node 1's rows are copied to the others
$nodes[0]->safe_psql('postgres', 'TRUNCATE serial_events RESTART IDENTITY');
my ($out, $err) = ('', '');
IPC::Run::run([ $^X, $mesh_script, '--tables', 'events', 'create', map { conn($_) } @nodes ],
	'>', \$out, '2>', \$err);
is($?, 0, 'the mesh is made') or diag($err);

# 3. all three write; apply lag sampled each second on every node's
# walsenders to the mesh
my @runs = map { pgbench($_, 'events', $seconds) } @nodes;
my ($lag_max, $lag_sum, $lag_n, $bytes_max) = (0, 0, 0, 0);
my $until = time() + $seconds - 1;
while (time() < $until)
{
	for my $n (@nodes)
	{
		my ($l, $b) = split /\|/, $n->safe_psql('postgres', q{
			SELECT coalesce(max(extract(epoch FROM replay_lag)), 0),
			       coalesce(max(pg_current_wal_lsn() - r.flush_lsn), 0)
			FROM pg_stat_replication r WHERE application_name LIKE 'snowflake_mesh_from_w%'});
		$lag_max = $l if $l > $lag_max;
		$bytes_max = $b if $b > $bytes_max;
		$lag_sum += $l;
		$lag_n++;
	}
	sleep 1;
}
my @mesh = map { tps($_) } @runs;
my $t0 = time();
my $expected = $nodes[0]->safe_psql('postgres', 'SELECT count(*) FROM events');
my $drain;
while (1)
{
	my @c = map { $_->safe_psql('postgres', 'SELECT count(*) FROM events') } @nodes;
	my $max = (sort { $b <=> $a } @c)[0];
	if (!grep { $_ != $max } @c) { $drain = time() - $t0; last; }
	last if time() - $t0 > 600;
	sleep 0.2;
}
ok(defined $drain, 'the mesh converged after the load') or diag(counts('events'));
my $errors = join ' / ', map { $_->safe_psql('postgres',
	'SELECT coalesce(sum(apply_error_count), 0) FROM pg_stat_subscription_stats') } @nodes;
is($errors, '0 / 0 / 0', 'without an apply error');

# 4. the same with bigserial keys: every node's sequence hands out 1, 2, ...
for my $n (@nodes)
{
	$n->safe_psql('postgres', 'ALTER PUBLICATION snowflake_mesh ADD TABLE serial_events');
}
for my $n (@nodes)
{
	for my $s (split /\n/, $n->safe_psql('postgres', 'SELECT subname FROM pg_subscription'))
	{
		$n->safe_psql('postgres', "ALTER SUBSCRIPTION $s REFRESH PUBLICATION WITH (copy_data = false)");
	}
}
# every node's sequence hands out 1, 2, ...: rows from the others take
# the values a node's own sequence is about to hand out, and its own rows
# take values that the others then cannot apply
my @serial_runs = map { pgbench($_, 'serial_events', 5) } @nodes;
my @aborted;
for my $run (@serial_runs)
{
	$run->{h}->finish;
	push @aborted, scalar(() = ${ $run->{err} } =~ /client \d+ script \d+ aborted/g);
}
sleep 5;
my @apply_errors = map { $_->safe_psql('postgres',
	'SELECT coalesce(sum(apply_error_count), 0) FROM pg_stat_subscription_stats') } @nodes;
my $serial_errors = join ' / ', @apply_errors;
# three sequences that all start at 1 must meet: where a node's own insert
# did not fail, applying the same key from another node does
my $clashes = 0;
$clashes += $_ for @aborted, @apply_errors;
ok($clashes > 0, 'with bigserial keys the mesh clashes');
my ($message) = map { slurp_file($_->logfile)
	=~ /ERROR:\s+(conflict detected on relation "public.serial_events": conflict=insert_exists|duplicate key value violates unique constraint "serial_events_pkey")/ } @nodes;
ok($message, 'and the logs say so') or diag('no key conflict in the logs');
$message //= '';
my $serial_counts = counts('serial_events');
my $agree = (keys %{ { map { $_ => 1 } split / \/ /, $serial_counts } }) == 1
  ? 'they agree only because the other nodes\' inserts failed'
  : 'they no longer agree';
my $aborted = join ' / ', @aborted;

my $sum = 0;
$sum += $_ for @mesh;
my $cpus = `nproc`;
chomp $cpus;
my $md = <<"EOF";
# The mesh, measured

PostgreSQL $version, three nodes on one machine of $cpus cores, $clients
pgbench clients a node inserting one row a transaction, $seconds s a run,
fsync and synchronous_commit on.  The machine hosts all three nodes, and
in the mesh each node also applies the other two's rows and decodes its
WAL for them, so it does about three times the work per row of one node
alone.  Made by `make bench-mesh`.

| | rows/s |
|---|---:|
| one node alone, snowflake_nextval() keys | @{[ sprintf '%.0f', $alone{events} ]} |
| one node alone, bigserial keys | @{[ sprintf '%.0f', $alone{serial_events} ]} |
| mesh, node 1 | @{[ sprintf '%.0f', $mesh[0] ]} |
| mesh, node 2 | @{[ sprintf '%.0f', $mesh[1] ]} |
| mesh, node 3 | @{[ sprintf '%.0f', $mesh[2] ]} |
| mesh, all three | @{[ sprintf '%.0f', $sum ]} |

Apply lag while all three wrote (replay_lag of the walsenders to the mesh,
sampled each second on every node): mean @{[ sprintf '%.3f', $lag_n ? $lag_sum / $lag_n : 0 ]} s, max
@{[ sprintf '%.3f', $lag_max ]} s; at most @{[ sprintf '%.1f', $bytes_max / 1024 / 1024 ]} MB of WAL not yet applied.
After the load stopped every node held all $expected rows within
@{[ sprintf '%.1f', $drain // -1 ]} s.  Apply errors: $errors.

With bigserial keys in the same mesh (5 s, all three inserting), every
node's sequence starts at 1, and the keys clash. pgbench clients aborted
on "duplicate key value violates unique constraint", because their node's
next key had already arrived from another node, per node: $aborted of
$clients. Subscriptions that met a key their node had already used
(apply errors, retried in a loop), per node: $serial_errors. The first
such error in the logs: `$message`. Rows of serial_events per node:
$serial_counts: $agree.
EOF
open my $fh, '>', $results or die "cannot write $results: $!";
print $fh $md;
close $fh;
note($md);

$_->stop for @nodes;
done_testing();
