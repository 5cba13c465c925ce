# The mesh under random histories.  From a seed, snowflake-mesh joins new
# nodes and nodes that were members before, leaves (the leaving node
# writing too), two joins at once, a join beside a leave, a join whose
# helper is killed and taken back with abort, a table added, a member
# stopped and started, and faults set on purpose (a subscription disabled,
# a change skipped on one node, a configuration that would drop changes),
# all while every member inserts, updates and deletes (each its own share
# of the rows made before the step, and its own rows), and a joining node
# tries to write too (refused until it is a member).  Every row a node
# that left wrote is on every member, and it refuses writes.  After every step: every member holds the same rows,
# compared by content, in every table; and status is judged against what
# the test knows to be true: whole (exit 0) when the rows agree and no
# fault is set, and otherwise the exit status of the fault, never 0 while
# rows differ.  MESH_SEED replays a history (the interleaving of
# concurrent sessions is left to the machine); MESH_STEPS bounds it, and
# no step starts after MESH_SECONDS.
use strict;
use warnings;
use FindBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use SnowflakeTest;
use SnowflakeMesh;

# (set but empty, as test/chroot.sh passes them, means the default)
my $steps = ($ENV{MESH_STEPS} // '') ne '' ? $ENV{MESH_STEPS} : 8;
my $budget = ($ENV{MESH_SECONDS} // '') ne '' ? $ENV{MESH_SECONDS} : 150;
my @log;

sub say_op { push @log, sprintf('%3d %s', scalar @log, $_[0]); note($log[-1]); return; }

my @pool = map { mesh_node("hist$_", $_) } 1 .. 4;
if ($pool[0]->pg_version->major < 16)
{
	$_->stop for @pool;
	plan skip_all => 'a mesh needs PostgreSQL 16';
}
my $counts = $pool[0]->pg_version->major >= 18;
# make test replays a fixed seed, one for each version; make torture-mesh
# plays new ones
my $seed = $ENV{MESH_SEED} || 1000 + $pool[0]->pg_version->major;
diag("mesh history: seed $seed, at most $steps steps (replay: MESH_SEED=$seed MESH_STEPS=$steps)");
srand($seed);
my $started = time;

my %members;						# worker => node
my %was;							# workers that were members once
my @tables = ('events');
my $violations = 0;
my $made = 0;						# rows made before the steps, k = 1 .. $made

sub members { return map { $members{$_} } sort keys %members; }
sub spares { return grep { !$members{ wid($_) } } @pool; }

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

# writers on the members: each changes its own share of the rows made
# before, and its own rows, in every table
sub writers
{
	my @m = @_;
	my @w;
	for my $i (0 .. $#m)
	{
		push @w, writer_start($m[$i], part => [ scalar @m, $i ], rows => $made);
		push @w, writer_start($m[$i], table => $_) for @tables[ 1 .. $#tables ];
	}
	return \@w;
}

sub writers_done
{
	my ($w) = @_;
	my ($errors) = writers_stop(@$w);
	check('every writer ran without an error', $errors eq '', $errors);
	return;
}

# a node that left, or was refused, made empty again for a later join:
# its fence lifted (a node that left refuses writes), the copy of a join
# taken back emptied
sub empty_spare
{
	my ($n) = @_;
	$n->safe_psql('postgres', join ";\n", 'SELECT pg_stat_reset_subscription_stats(NULL)',
		'SELECT snowflake.snowflake_mesh_unfence()', (map { "TRUNCATE $_" } @tables),
		'DELETE FROM snowflake_workers', 'SELECT snowflake.snowflake_mesh_unpublish(NULL)');
	return;
}

# every row WHO wrote or changed (its own, and its part PART of the rows
# made before) is on each of the MEMBERS as on WHO, in every table
sub kept
{
	my ($who, $part, @members) = @_;
	my $w = wid($who);
	my ($mod, $rem) = @$part;
	for my $t (@tables)
	{
		# (the rows made before the steps carry node 1: only k tells whose
		# part they are)
		my $where = "node = $w AND k IS NULL" . ($t eq 'events' ? " OR k % $mod = $rem" : '');
		my $want = content($who, $t, $where);
		check("every row worker $w wrote in $t is on worker " . wid($_), content($_, $t, $where) eq $want)
		  for @members;
	}
	return;
}

# the truth, and status judged against it: EXPECT is the exit status the
# fault set on purpose gives (0 for none); where the rows differ without
# one, 4
sub judged
{
	my ($expect, $pattern) = @_;
	my @m = members();
	my $apart = converged([@m], \@tables, $expect ? 20 : 180);
	check('every member holds the same rows, by content', $apart eq '' || $expect, $apart);
	my $truth = $apart ne '' ? 4 : $expect;
	my ($rc, $out, $err);
	# the counters of the connections a stopped member lost are history,
	# and a fault set on purpose may restart an apply worker (ALTER
	# SUBSCRIPTION does), which status rightly names first (exit 5, the
	# lowest code) until the worker runs again; never 0 over a fault
	for (1 .. 30)
	{
		($rc, $out, $err) = mesh('--rows', 'status', map { conn($_) } @m);
		last if $rc == $truth || ($truth && $rc == 0);
		wake_subscriptions(@m);
		sleep 1;
	}
	check("status of the mesh of workers " . join(' ', sort keys %members) . " exits $truth", $rc == $truth, "$out\n$err");
	check('and names the fault', $err =~ $pattern, $err) if $pattern;
	return;
}

sub join_started
{
	my ($new, $write) = @_;
	my $r = mesh_start('join', conn($new), map { conn($_) } members());
	return ($r, []) unless $write;
	# the joining node writes once its join has begun
	my $deadline = time + 60;
	usleep(50_000)
	  until $new->safe_psql('postgres', 'SELECT count(*) FROM pg_subscription') > 0
	  || time > $deadline || !mesh_running($r);
	return ($r, [ mesh_running($r) ? writer_start($new) : () ]);
}

sub joined
{
	my ($new, $rc, $out, $err) = @_;
	if ($rc == 0)
	{
		$members{ wid($new) } = $new;
		$was{ wid($new) } = 1;
		return 1;
	}
	check('a refused join says why', $err =~ /in another change of the mesh|the nodes named are not the mesh/, $err);
	check('and leaves no subscription on the node refused',
		$new->safe_psql('postgres', 'SELECT count(*) FROM pg_subscription') eq '0');
	# the rows it took during the join stay there alone: empty it
	empty_spare($new);
	return 0;
}

my ($rc, $out, $err) = mesh('--tables', 'events', 'create', map { conn($_) } @pool[ 0, 1 ]);
die "create failed: $err" if $rc;
%members = (1 => $pool[0], 2 => $pool[1]);
%was = (1 => 1, 2 => 1);
$made = 2000;
$pool[0]->safe_psql('postgres', "INSERT INTO events (node, k) SELECT 1, g FROM generate_series(1, $made) g");
say_op('create workers 1 2, with 2000 rows');
judged(0);

my $step = 0;
while (++$step <= $steps && time - $started < $budget)
{
	my @m = members();
	my @s = spares();
	my @ops = ('add-table', 'down', 'disabled', 'skipped', 'drops changes');
	push @ops, 'join', 'join', 'killed join' if @s;
	push @ops, 'two joins' if @s >= 2;
	push @ops, 'leave' if @m > 2;
	push @ops, 'join and leave' if @m > 2 && @s;
	my $op = $ops[ int(rand(@ops)) ];
	my ($expect, $pattern) = (0, undef);
	if ($op eq 'join')
	{
		my $new = $s[ int(rand(@s)) ];
		my $write = rand() < 0.5;
		say_op(($was{ wid($new) } ? 'rejoin' : 'join') . ' of worker ' . wid($new)
			  . ($write ? ', which writes during its join' : ''));
		my $w = writers(@m);
		my ($r, $own) = join_started($new, $write);
		my @res = mesh_finish($r);
		check('the join succeeds', $res[0] == 0, $res[2]);
		push @$w, @$own;
		writers_done($w);
		joined($new, @res);
		check('18+: the node that joined skipped no change', missing_conflicts($new) eq '0')
		  if $counts && $res[0] == 0;
	}
	elsif ($op eq 'two joins')
	{
		my @two = @s[ 0, 1 ];
		@two = reverse @two if rand() < 0.5;
		say_op('workers ' . join(' and ', map { wid($_) } @two) . ' join at once');
		my $w = writers(@m);
		my @r = map { mesh_start('join', conn($_), map { conn($_) } @m) } @two;
		my @res = map { [ mesh_finish($_) ] } @r;
		writers_done($w);
		my $won = 0;
		$won += joined($two[$_], @{ $res[$_] }) for 0, 1;
		check('at least one of two joins at once succeeds', $won >= 1);
	}
	elsif ($op eq 'killed join')
	{
		my $new = $s[ int(rand(@s)) ];
		my $delay = rand(4);
		say_op(sprintf('join of worker %d, its helper killed %.1f s after it locks the mesh', wid($new), $delay));
		my $w = writers(@m);
		my $r = mesh_start('join', conn($new), map { conn($_) } @m);
		my $deadline = time + 60;
		usleep(100_000)
		  until time > $deadline || !mesh_running($r)
		  || $new->safe_psql('postgres', 'SELECT count(*) FROM snowflake.snowflake_mesh_changes') > 0;
		usleep($delay * 1e6);
		kill 'KILL', -$r->{h}{KIDS}[0]{PID} if mesh_running($r);
		my ($krc) = mesh_finish($r);
		writers_done($w);
		if ($krc == 0)
		{
			say_op('  the join ended before the kill');
			joined($new, 0);
		}
		else
		{
			mesh_locks_gone(@m, $new);
			# killed after its fence stood, the node refuses writes until the
			# join is taken back
			check('the node of the killed join refuses writes',
				sqlstate_of($new, 'INSERT INTO events (node) VALUES (0)') eq 'SM002')
			  if $new->safe_psql('postgres', q{SELECT count(*) FROM pg_trigger WHERE tgname = 'snowflake_mesh_fence'}) > 0;
			my ($arc, $aout, $aerr) = mesh('abort', conn($new), map { conn($_) } @m);
			say_op("  abort: exit $arc");
			if ($arc != 0 && $aerr =~ /is not in a join/)
			{
				# killed as it unlocked the nodes, the join done: what is
				# left is a record on the nodes it had not unlocked
				my ($urc, $uout, $uerr) = mesh('unlock', map { conn($_) } @m, $new);
				check('unlock clears what the killed run left', $urc == 0, $uerr);
				($arc) = mesh('status', map { conn($_) } @m, $new);
				check('the join was complete', $arc == 0);
				say_op('  the join was complete');
				joined($new, 0);
			}
			else
			{
				check('abort takes the unfinished join back', $arc == 0, $aerr);
				check('the node taken back subscribes to nobody',
					$new->safe_psql('postgres', 'SELECT count(*) FROM pg_subscription') eq '0');
				check('and refuses writes',
					sqlstate_of($new, 'INSERT INTO events (node) VALUES (0)') eq 'SM002')
				  if $arc == 0;
				# the claim the join made reached no member, or was taken
				# back from each (one that was a member before keeps its own)
				my $sys = $new->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()');
				check('no member keeps the claim of the join taken back',
					!grep { $_->safe_psql('postgres', 'SELECT count(*) FROM snowflake_workers WHERE worker_id = '
							  . wid($new) . " AND system_identifier = $sys") ne '0' } @m)
				  unless $was{ wid($new) };
				empty_spare($new);
			}
		}
	}
	elsif ($op eq 'leave')
	{
		my $i = int(rand(@m));
		my $go = $m[$i];
		say_op('worker ' . wid($go) . ' leaves while every member writes, itself too');
		my $w = writers(@m);
		($rc, $out, $err) = mesh('leave', conn($go), map { conn($_) } grep { $_ != $go } @m);
		check('the leave succeeds', $rc == 0, $err);
		writers_done($w);
		if ($rc == 0)
		{
			delete $members{ wid($go) };
			check('the node that left refuses writes', sqlstate_of($go, 'INSERT INTO events (node) VALUES (0)') eq 'SM002');
			kept($go, [ scalar @m, $i ], members());
			empty_spare($go);
		}
	}
	elsif ($op eq 'drops changes')
	{
		# a member's configuration that would drop changes: status names it
		# (6); then it is put back (set while nobody writes, so that the
		# members stay the same)
		my $x = $m[ int(rand(@m)) ];
		my $y = (grep { $_ != $x } @m)[0];
		my @how = (
			[ 'publishes inserts only', q{ALTER PUBLICATION snowflake_mesh SET (publish = 'insert')},
			  q{ALTER PUBLICATION snowflake_mesh SET (publish = 'insert, update, delete')},
			  qr/worker ${\ wid($x)}: publication snowflake_mesh publishes only insert/ ],
			[ 'subscribes to worker ' . wid($y) . ' with origin any',
			  'ALTER SUBSCRIPTION snowflake_mesh_from_w' . wid($y) . ' SET (origin = any)',
			  'ALTER SUBSCRIPTION snowflake_mesh_from_w' . wid($y) . ' SET (origin = none)',
			  qr/worker ${\ wid($x)}: snowflake_mesh_from_w${\ wid($y)} takes the changes of every origin/ ],
			[ 'has a row filter on events',
			  'ALTER PUBLICATION snowflake_mesh DROP TABLE events; ALTER PUBLICATION snowflake_mesh ADD TABLE events WHERE (id > 0)',
			  'ALTER PUBLICATION snowflake_mesh DROP TABLE events; ALTER PUBLICATION snowflake_mesh ADD TABLE events; '
				. 'SELECT snowflake.snowflake_mesh_record()',
			  qr/worker ${\ wid($x)}: publication snowflake_mesh publishes only the rows of public\.events/ ]);
		my $how = $how[ int(rand(@how)) ];
		say_op('worker ' . wid($x) . " $how->[0]");
		$x->safe_psql('postgres', $how->[1]);
		judged(6, $how->[3]);
		$x->safe_psql('postgres', $how->[2]);
	}
	elsif ($op eq 'join and leave')
	{
		my $new = $s[ int(rand(@s)) ];
		my $go = $m[ int(rand(@m)) ];
		say_op('worker ' . wid($new) . ' joins while worker ' . wid($go) . ' leaves');
		my $w = writers(grep { $_ != $go } @m);
		my $j = mesh_start('join', conn($new), map { conn($_) } @m);
		my $l = mesh_start('leave', conn($go), map { conn($_) } grep { $_ != $go } @m);
		my @jr = mesh_finish($j);
		my @lr = mesh_finish($l);
		writers_done($w);
		say_op("  join: exit $jr[0], leave: exit $lr[0]");
		check('a refused leave says why', $lr[0] == 0 || $lr[2] =~ /in another change of the mesh|not the mesh/, $lr[2]);
		check('one of them at least succeeds', $jr[0] == 0 || $lr[0] == 0);
		joined($new, @jr);
		if ($lr[0] == 0)
		{
			delete $members{ wid($go) };
			empty_spare($go);
		}
	}
	elsif ($op eq 'add-table')
	{
		my $t = 'extra' . (scalar @tables);
		say_op("add-table $t, written on every member meanwhile");
		$_->safe_psql('postgres', "CREATE TABLE $t (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), "
			  . 'node int NOT NULL, k int, n int NOT NULL DEFAULT 0, payload text)') for @pool;
		my $w = writers(@m);
		my $r = mesh_start('add-table', $t, map { conn($_) } @m);
		# each member writes to the table once it is held there
		my %on;
		while (mesh_running($r))
		{
			for my $x (grep { !$on{ wid($_) } } @m)
			{
				next unless $x->safe_psql('postgres',
					"SELECT count(*) FROM pg_trigger WHERE tgname = 'snowflake_mesh_hold'") > 0;
				push @$w, writer_start($x, table => $t);
				$on{ wid($x) } = 1;
			}
			usleep(20_000);
		}
		($rc, $out, $err) = mesh_finish($r);
		check('add-table succeeds', $rc == 0, $err);
		push @$w, map { writer_start($_, table => $t) } grep { !$on{ wid($_) } } @m;
		writes_more($_, wid($_), 5, $t) for @m;
		writers_done($w);
		push @tables, $t;
	}
	elsif ($op eq 'down')
	{
		my $x = $m[ int(rand(@m)) ];
		say_op('worker ' . wid($x) . ' stops; status; it starts again');
		my $w = writers(grep { $_ != $x } @m);
		$x->stop('immediate');
		($rc, $out, $err) = mesh('status', map { conn($_) } @m);
		check('status with a member down exits 3', $rc == 3, "$out\n$err");
		check('and reports every member it reaches',
			(() = $out =~ /^worker \d+ at /mg) == @m - 1 && $out =~ /cannot be reached/, $out);
		$x->start;
		writers_done($w);
		# the lost connections counted as apply errors: reset, as docs/mesh.md says
		$_->safe_psql('postgres', 'SELECT pg_stat_reset_subscription_stats(NULL)') for @m;
	}
	elsif ($op eq 'disabled')
	{
		my $x = $m[ int(rand(@m)) ];
		my $from = wid((grep { $_ != $x } @m)[0]);
		say_op('worker ' . wid($x) . "'s subscription to worker $from disabled while all write");
		my $w = writers(@m);
		$x->safe_psql('postgres', "ALTER SUBSCRIPTION snowflake_mesh_from_w$from DISABLE");
		writes_more($_, wid($_), 5) for @m;
		writers_done($w);
		judged(5, qr/worker ${\ wid($x)}: snowflake_mesh_from_w$from is disabled/);
		$x->safe_psql('postgres', "ALTER SUBSCRIPTION snowflake_mesh_from_w$from ENABLE");
	}
	elsif ($op eq 'skipped')
	{
		# a row deleted on one member alone (under an origin of its own,
		# which origin = none does not send), then changed by another
		my ($x, $y) = @m[ 0, 1 ];
		($x, $y) = ($y, $x) if rand() < 0.5;
		my $row = $y->safe_psql('postgres', 'SELECT max(id) FROM events');
		say_op('worker ' . wid($x) . " loses row $row alone; worker " . wid($y) . ' updates it');
		$x->safe_psql('postgres', qq{
			SELECT pg_replication_origin_create('hist_local') WHERE NOT EXISTS
				(SELECT FROM pg_replication_origin WHERE roname = 'hist_local');
			SELECT pg_replication_origin_session_setup('hist_local');
			DELETE FROM events WHERE id = $row});
		$y->safe_psql('postgres', "UPDATE events SET payload = 'lost on one' WHERE id = $row");
		$_->poll_query_until('postgres', "SELECT count(*) = 1 FROM events WHERE id = $row AND payload = 'lost on one'")
		  for grep { $_ != $x } @m;
		$x->poll_query_until('postgres', 'SELECT sum(confl_update_missing) > 0 FROM pg_stat_subscription_stats')
		  if $counts;
		judged(4, $counts ? qr/worker ${\ wid($x)}: snowflake_mesh_from_w${\ wid($y)} skipped 1 changes/
			: qr/the nodes' rows differ/);
		# repaired as docs/mesh.md says: the row written again on one node
		$y->safe_psql('postgres', "DELETE FROM events WHERE id = $row");
		$y->safe_psql('postgres', "INSERT INTO events (id, node, payload) VALUES ($row, 0, 'written again')");
		$_->poll_query_until('postgres', "SELECT count(*) = 1 FROM events WHERE id = $row AND payload = 'written again'")
		  for @m;
		$x->poll_query_until('postgres', 'SELECT sum(confl_delete_missing) > 0 FROM pg_stat_subscription_stats')
		  if $counts;
		$_->safe_psql('postgres', 'SELECT pg_stat_reset_subscription_stats(NULL)') for @m;
	}
	judged(0);
}
ok($violations == 0, "history $seed: " . (@log) . ' operations, no violation')
  or diag(join "\n", "history (replay with MESH_SEED=$seed MESH_STEPS=$steps):", @log);
diag(sprintf('mesh history %d: %d operations in %.0f s', $seed, scalar @log, time - $started));
$_->stop for @pool;
done_testing();
