# The mesh under random histories: from a seed, snowflake-mesh joins,
# leaves, two joins at once, a join beside a leave, a join whose helper is
# killed and taken back with abort, a table added, a member stopped and
# started, all while every member writes (inserts, and updates of its own
# rows) and a joining node writes too.  After every step: every member
# holds the same rows, compared whole, in every table; every insert
# pgbench committed anywhere is on every member; status finds the mesh
# whole.  MESH_SEED replays a history (the interleaving of concurrent
# sessions is left to the machine); MESH_STEPS bounds it, and no step
# starts after MESH_SECONDS.
use strict;
use warnings;
use FindBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time usleep);
use SnowflakeTest;

my $seed = $ENV{MESH_SEED} || int(time() * 1000) % 1000000;
# (set but empty, as test/chroot.sh passes them, means the default)
my $steps = ($ENV{MESH_STEPS} // '') ne '' ? $ENV{MESH_STEPS} : 8;
my $budget = ($ENV{MESH_SECONDS} // '') ne '' ? $ENV{MESH_SECONDS} : 120;
my $mesh_script = "$FindBin::RealBin/../../scripts/snowflake-mesh";
my $started = time;
my @log;

sub say_op { push @log, sprintf('%3d %s', scalar @log, $_[0]); note($log[-1]); return; }

my @pool = map {
	my $n = snowflake_node("hist$_", worker_id => $_, allows_streaming => 'logical',
		conf => "max_wal_senders = 20\nmax_replication_slots = 20\n"
		  . "max_logical_replication_workers = 12\nmax_worker_processes = 24\n"
		  . "wal_receiver_status_interval = 1\ntrack_commit_timestamp = on\n");
	$n->start;
	$n->safe_psql('postgres', q{
		CREATE EXTENSION snowflake;
		CREATE TABLE events (id bigint PRIMARY KEY DEFAULT snowflake_nextval(),
			node int NOT NULL, n int NOT NULL DEFAULT 0, payload text)});
	$n
} 1 .. 4;
if ($pool[0]->pg_version->major < 16)
{
	$_->stop for @pool;
	plan skip_all => 'a mesh needs PostgreSQL 16';
}
diag("mesh history: seed $seed, at most $steps steps (replay: MESH_SEED=$seed MESH_STEPS=$steps)");
srand($seed);
# the budget counts from here, the nodes made
$started = time;

sub conn { return $_[0]->connstr . ' dbname=postgres'; }
sub w { return $_[0]->name =~ s/\D//gr; }

sub mesh
{
	my ($out, $err) = ('', '');
	IPC::Run::run([ $^X, $mesh_script, '--timeout', '120', @_ ], '>', \$out, '2>', \$err);
	return ($? >> 8, $out, $err);
}

sub mesh_start
{
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start([ 'setsid', $^X, $mesh_script, '--timeout', '120', @_ ],
		'>', \$out, '2>', \$err);
	return { h => $h, out => \$out, err => \$err };
}

sub mesh_finish
{
	my ($r) = @_;
	$r->{h}->finish;
	# a helper killed by a signal has no exit code: never take it for 0
	my $rc = ($? & 127) ? 128 + ($? & 127) : $? >> 8;
	return ($rc, ${ $r->{out} }, ${ $r->{err} });
}

my %members;						# worker => node
my @tables = ('events');
my %inserted;						# worker => inserts committed
my $violations = 0;

sub members { return map { $members{$_} } sort keys %members; }
sub spares { return grep { !$members{ w($_) } } @pool; }

sub check
{
	my ($what, $ok, $detail) = @_;
	ok($ok, "step " . (@log - 1) . ": $what") or do
	{
		$violations++;
		diag($detail) if defined $detail;
	};
	return $ok;
}

# load: on each node given, one client inserting and updating its own rows
sub load
{
	my @runs;
	for my $n (@_)
	{
		my $script = $n->basedir . '/load.sql';
		open my $fh, '>', $script or die;
		printf $fh "INSERT INTO events (node, payload) VALUES (%d, 'load');\n"
		  . "UPDATE events SET n = n + 1 WHERE id = (SELECT max(id) FROM events WHERE node = %d);\n", w($n), w($n);
		close $fh;
		my ($out, $err) = ('', '');
		my $h = IPC::Run::start([ 'pgbench', '-n', '-c', 1, '-t', 150 + int(rand(150)), '-R', 40,
				'-f', $script, '-d', conn($n) ], '>', \$out, '2>', \$err);
		push @runs, { h => $h, out => \$out, err => \$err, w => w($n) };
	}
	return \@runs;
}

sub load_done
{
	my ($runs) = @_;
	for my $r (@$runs)
	{
		$r->{h}->finish;
		my ($n) = ${ $r->{out} } =~ /number of transactions actually processed: (\d+)/;
		check("pgbench on worker $r->{w} committed every transaction", $? == 0, ${ $r->{err} });
		$inserted{ $r->{w} } += $n // 0;
	}
	return;
}

sub digest
{
	my ($n, $t) = @_;
	return $n->safe_psql('postgres',
		"SELECT count(*) || ' ' || coalesce(md5(string_agg(r::text, ',' ORDER BY r::text)), '-') FROM $t r");
}

# every member holds the same rows, whole, in every table
sub converged
{
	my @m = members();
	my $deadline = time + 180;
	my @bad;
	while (1)
	{
		@bad = ();
		for my $t (@tables, 'snowflake_workers')
		{
			my @d = map { digest($_, $t) } @m;
			push @bad, "$t: " . join(' / ', map { "w" . w($m[$_]) . " $d[$_]" } 0 .. $#m)
			  if grep { $_ ne $d[0] } @d;
		}
		last if !@bad || time > $deadline;
		sleep 1;
	}
	check('every member holds the same rows, whole', !@bad, join("\n", @bad));
	my $want = join ',', map { "$_:$inserted{$_}" } sort grep { $inserted{$_} } keys %inserted;
	for my $n (@m)
	{
		my $have = $n->safe_psql('postgres',
			"SELECT string_agg(node || ':' || c, ',' ORDER BY node::text) FROM (SELECT node, count(*) AS c FROM events WHERE payload = 'load' GROUP BY node) s");
		check('every insert is on worker ' . w($n), $have eq $want, "have $have, want $want");
	}
	my ($rc, $out, $err);
	for (1 .. 30)
	{
		($rc, $out, $err) = mesh('status', map { conn($_) } @m);
		last if $rc == 0;
		sleep 1;
	}
	check('status finds the mesh of workers ' . join(' ', sort keys %members) . ' whole', $rc == 0, "$out\n$err");
	return;
}

# a node that left, or was refused, made empty again for a later join
sub empty_spare
{
	my ($n) = @_;
	$n->safe_psql('postgres', join ";\n",
		(map { "TRUNCATE $_" } @tables), 'DELETE FROM snowflake_workers',
		'DROP PUBLICATION IF EXISTS snowflake_mesh');
	return;
}

sub join_one
{
	my ($new, $write) = @_;
	my @m = members();
	my $r = mesh_start('join', conn($new), map { conn($_) } @m);
	my $wrote = 0;
	if ($write)
	{
		# rows written on the joining node once its join has begun
		my $deadline = time + 60;
		until ($new->safe_psql('postgres', 'SELECT count(*) FROM pg_subscription') > 0 || time > $deadline
			  || !$r->{h}->pumpable)
		{
			usleep(100_000);
		}
		if ($new->safe_psql('postgres', 'SELECT count(*) FROM pg_subscription') > 0)
		{
			$new->safe_psql('postgres', sprintf(
				"INSERT INTO events (node, payload) SELECT %d, 'load' FROM generate_series(1, 20)", w($new)));
			$wrote = 20;
		}
	}
	return ($r, $wrote);
}

sub joined
{
	my ($new, $rc, $out, $err, $wrote) = @_;
	if ($rc == 0)
	{
		$members{ w($new) } = $new;
		$inserted{ w($new) } += $wrote;
		return 1;
	}
	check('a refused join says why', $err =~ /in another change of the mesh|the nodes named are not the mesh/, $err);
	check('and leaves no subscription on the node refused',
		$new->safe_psql('postgres', 'SELECT count(*) FROM pg_subscription') eq '0');
	# the rows it took during the join stay there alone: empty it
	empty_spare($new);
	return 0;
}

my $step = 0;
mesh('--tables', 'events', 'create', map { conn($_) } @pool[ 0, 1 ]) == 0 or die 'create failed';
%members = (1 => $pool[0], 2 => $pool[1]);
say_op('create workers 1 2');
converged();

while (++$step <= $steps && time - $started < $budget)
{
	my @m = members();
	my @s = spares();
	my @ops = ('add-table', 'down');
	push @ops, 'join', 'join', 'killed join' if @s;
	push @ops, 'two joins' if @s >= 2;
	push @ops, 'leave' if @m > 2;
	push @ops, 'join and leave' if @m > 2 && @s;
	my $op = $ops[ int(rand(@ops)) ];
	my $quiet = $m[ int(rand(@m)) ];	# a member that does not write this step
	my @writers = grep { $_ != $quiet } @m;
	if ($op eq 'join')
	{
		my $new = $s[ int(rand(@s)) ];
		my $write = rand() < 0.5;
		say_op('join worker ' . w($new) . ($write ? ', which writes during its join' : ''));
		my $runs = load(@writers);
		my ($r, $wrote) = join_one($new, $write);
		my ($rc, $out, $err) = mesh_finish($r);
		check('the join succeeds', $rc == 0, $err);
		joined($new, $rc, $out, $err, $wrote);
		load_done($runs);
	}
	elsif ($op eq 'two joins')
	{
		my @two = @s[ 0, 1 ];
		@two = reverse @two if rand() < 0.5;
		say_op('workers ' . join(' and ', map { w($_) } @two) . ' join at once');
		my $runs = load(@writers);
		my @r = map { mesh_start('join', conn($_), map { conn($_) } @m) } @two;
		my @rc = map { [ mesh_finish($_) ] } @r;
		my $won = 0;
		$won += joined($two[$_], @{ $rc[$_] }, 0) for 0, 1;
		check('at least one of two joins at once succeeds', $won >= 1);
		load_done($runs);
	}
	elsif ($op eq 'killed join')
	{
		my $new = $s[ int(rand(@s)) ];
		my $delay = rand(4);
		say_op(sprintf('join worker %d, its helper killed %.1f s after it locks the mesh', w($new), $delay));
		my $runs = load(@writers);
		my $r = mesh_start('join', conn($new), map { conn($_) } @m);
		my $deadline = time + 60;
		until (time > $deadline || !$r->{h}->pumpable || $new->safe_psql('postgres',
			"SELECT count(*) FROM snowflake.snowflake_mesh_changes") > 0)
		{
			usleep(100_000);
		}
		usleep($delay * 1e6);
		my $pid = $r->{h}{KIDS}[0]{PID};
		kill 'KILL', -$pid if $r->{h}->pumpable;
		my ($rc) = mesh_finish($r);
		if ($rc == 0)
		{
			say_op('  the join ended before the kill');
			joined($new, 0, '', '', 0);
		}
		else
		{
			sleep 1;
			my ($arc, $aout, $aerr) = mesh('abort', conn($new), map { conn($_) } @m);
			say_op("  abort: exit $arc");
			check('abort takes the interrupted join back', $arc == 0 || $aerr =~ /is not in a join/, $aerr);
			# killed after the join was done, as it dropped its lock
			if ($arc != 0 && (mesh('status', map { conn($_) } @m, $new))[0] == 0)
			{
				say_op('  the join was complete');
				joined($new, 0, '', '', 0);
			}
			else
			{
				check('the node taken back subscribes to nobody',
					$new->safe_psql('postgres', 'SELECT count(*) FROM pg_subscription') eq '0');
				empty_spare($new);
			}
		}
		load_done($runs);
	}
	elsif ($op eq 'leave')
	{
		my $go = $quiet;
		say_op('worker ' . w($go) . ' leaves');
		my $runs = load(@writers);
		my ($rc, $out, $err) = mesh('leave', conn($go), map { conn($_) } grep { $_ != $go } @m);
		check('the leave succeeds', $rc == 0, $err);
		delete $members{ w($go) } if $rc == 0;
		load_done($runs);
		empty_spare($go) if $rc == 0;
	}
	elsif ($op eq 'join and leave')
	{
		my $new = $s[ int(rand(@s)) ];
		my $go = $quiet;
		say_op('worker ' . w($new) . ' joins while worker ' . w($go) . ' leaves');
		my $runs = load(@writers);
		my $j = mesh_start('join', conn($new), map { conn($_) } @m);
		my $l = mesh_start('leave', conn($go), map { conn($_) } grep { $_ != $go } @m);
		my @jr = mesh_finish($j);
		my @lr = mesh_finish($l);
		say_op("  join: exit $jr[0], leave: exit $lr[0]");
		check('a refused leave says why', $lr[0] == 0 || $lr[2] =~ /in another change of the mesh|not the mesh/, $lr[2]);
		check('one of them at least succeeds', $jr[0] == 0 || $lr[0] == 0);
		joined($new, @jr, 0);
		load_done($runs);
		if ($lr[0] == 0)
		{
			delete $members{ w($go) };
			empty_spare($go);
		}
	}
	elsif ($op eq 'add-table')
	{
		my $t = 'extra' . (scalar @tables);
		say_op("add-table $t");
		$_->safe_psql('postgres', "CREATE TABLE $t (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), body text)")
		  for @pool;
		my $runs = load(@writers);
		my ($rc, $out, $err) = mesh('add-table', $t, map { conn($_) } @m);
		check('add-table succeeds', $rc == 0, $err);
		push @tables, $t;
		$_->safe_psql('postgres', "INSERT INTO $t (body) SELECT 'from ' || current_setting('port') FROM generate_series(1, 10)")
		  for @m;
		load_done($runs);
	}
	elsif ($op eq 'down')
	{
		say_op('worker ' . w($quiet) . ' stops; status; it starts again');
		my $runs = load(@writers);
		$quiet->stop('immediate');
		my ($rc, $out, $err) = mesh('status', map { conn($_) } @m);
		check('status with a member down exits non-zero', $rc != 0);
		check('and reports every member it reaches',
			(() = $out =~ /^worker \d+ at /mg) == @m - 1 && $out =~ /cannot be reached/, $out);
		$quiet->start;
		load_done($runs);
		# the lost connections counted as apply errors: reset, as README says
		$_->safe_psql('postgres', 'SELECT pg_stat_reset_subscription_stats(NULL)') for @m;
	}
	converged();
}
ok($violations == 0, "history $seed: " . (@log) . ' operations, no violation')
  or diag(join "\n", "history (replay with MESH_SEED=$seed MESH_STEPS=$steps):", @log);
diag(sprintf('mesh history %d: %d steps in %.0f s', $seed, scalar @log, time - $started));
$_->stop for @pool;
done_testing();
