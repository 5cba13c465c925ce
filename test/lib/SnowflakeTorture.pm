# SnowflakeTorture: plays a random history of operations and faults on a
# small cluster, from a seed, and checks the promise after every step:
# every ID a node issues (or the node it took over from, for what reached
# it) is unique and greater than every ID issued before it; where the node
# cannot keep that, it refuses with a known error.  No call hangs past its
# policy; no process crashes but those the history kills.
#
# The history is drawn from the seed alone (Perl's rand, seeded), so a
# failing seed replays the same operations; the interleaving of concurrent
# sessions is the only thing left to the machine.
package SnowflakeTorture;

use strict;
use warnings;
use Exporter 'import';
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SnowflakeTest;

our @EXPORT = qw(play_history);

# Errors a call may end with: the node refusing, or the history's faults.
my @known_errors = (
	qr/system clock moved backwards by \d+ ms/,
	qr/snowflake generator is \d+ ms ahead of the system clock/,
	qr/snowflake layout "[^"]+" cannot continue above the IDs issued under layout/,
	qr/snowflake state file "snowflake.state" cannot be used/,
	qr/snowflake reservation was not renewed within \d+ ms/,
	qr/snowflake cannot generate IDs: /,
	qr/snowflake.worker_id is not set/,
	qr/cannot generate snowflake IDs during recovery/,
	# a copy, an upgrade or a restore held back until told which node it is
	qr/snowflake data directory is a copy of the node with worker id \d+/,
	qr/snowflake does not know which IDs (were issued before this data directory|the cluster issued before pg_upgrade)/,
	qr/snowflake worker id \d+ is claimed by another system/,
	qr/could not (open|write|fsync|create) file "snowflake.state/,
	qr/could not rename file "snowflake.state.new"/,
	# a repair above an ID the layout in force cannot exceed
	qr/snowflake ID \d+ is out of range for the "[^"]+" layout/,
	# the history's own kills and restarts
	qr/server closed the connection unexpectedly/,
	qr/terminating connection because of crash of another server process/,
	qr/terminating connection due to (administrator command|unexpected postmaster exit)/,
	qr/the database system is (starting up|shutting down|in recovery mode|not yet accepting connections)/,
	qr/connection to server .* failed/,
	qr/could not connect to server/,
	qr/no connection to the server/,
	qr/connection to server was lost/,
	qr/SSL SYSCALL error|could not send data to server|could not receive data from server/,
);

# ShardingSphere's for JVMs in Shanghai and New York: epochs 8 hours before
# and 4 hours after plain shardingsphere's
my @layouts = qw(shardingsphere twitter discord instagram sonyflake javascript custom broken
  shardingsphere@Asia/Shanghai shardingsphere@America/New_York);

sub new_history
{
	my ($seed, $steps, $dir) = @_;
	my $h = {
		seed => $seed,
		steps => $steps,
		dir => $dir,
		log => [],				# the operations played, for the report
		record => "$dir/ids.$seed",
		seen => {},				# every ID of the current lineage
		floor => 0,				# every ID issued before is at most this
		ids => 0,
		faults => 0,
		ops => 0,
		violations => [],
		offset_ms => 0,			# the primary's clock offset
		layout => 'shardingsphere',
		worker => 1,
		backward_ms => 10,
		ahead_ms => 0,
		keeper_stopped => 0,
		standby => undef,
		backup => 0,
		unwritable => 0,
	};
	open my $fh, '>', $h->{record} or die "cannot write $h->{record}: $!";
	close $fh;
	return $h;
}

sub say_op
{
	my ($h, $what) = @_;
	push @{ $h->{log} }, sprintf('%3d %s', scalar @{ $h->{log} }, $what);
	return;
}

sub violation
{
	my ($h, $what) = @_;
	push @{ $h->{violations} }, "step " . (scalar(@{ $h->{log} }) - 1) . ": $what";
	return;
}

sub pick { return $_[ int(rand(scalar @_)) ]; }

sub conf_lines
{
	my ($h) = @_;
	my $layout = $h->{layout};
	my $extra = '';
	if ($layout eq 'custom')
	{
		$extra = "snowflake.custom_time_bits = 40\nsnowflake.custom_worker_bits = 8\n"
		  . "snowflake.custom_seq_bits = 14\nsnowflake.custom_epoch = '2020-01-01'\n";
		$layout = 'custom';
	}
	elsif ($layout eq 'broken')
	{
		# an epoch in the future: the layout is unusable
		$extra = "snowflake.custom_epoch = '2999-01-01'\n";
		$layout = 'custom';
	}
	return "snowflake.layout = '$layout'\n$extra";
}

# Rewrite the settings the history controls, in a file of their own.
sub write_settings
{
	my ($h, $node) = @_;
	my $file = $node->data_dir . '/torture.conf';
	open my $fh, '>', $file or die "cannot write $file: $!";
	print $fh conf_lines($h);
	print $fh "snowflake.worker_id = $h->{worker}\n";
	print $fh "snowflake.max_clock_backward_ms = $h->{backward_ms}\n";
	print $fh "snowflake.max_run_ahead_ms = $h->{ahead_ms}\n";
	close $fh;
	return;
}

sub set_offset
{
	my ($node, $ms) = @_;
	set_clock_offset($node, sprintf('%+.3f', $ms / 1000));
	return;
}

sub node_pids
{
	my ($node) = @_;
	my $pidfile = $node->data_dir . '/postmaster.pid';
	return () unless -f $pidfile;
	my ($pm) = split /\n/, slurp_file($pidfile);
	return () unless $pm && kill 0, $pm;
	my @children = grep { /^\d+$/ } split /\s+/, `pgrep -P $pm`;
	return ($pm, @children);
}

sub keeper_pid
{
	my ($node) = @_;
	my ($pm) = node_pids($node);
	return undef unless $pm;
	my ($pid) = grep { /^\d+$/ } split /\s+/, `pgrep -P $pm -f 'snowflake keeper'`;
	return $pid;
}

sub wake_keeper
{
	my ($h, $node) = @_;
	if ($h->{keeper_stopped})
	{
		kill 'CONT', $h->{keeper_stopped};
		$h->{keeper_stopped} = 0;
	}
	return;
}

# Run one statement; never dies, whatever the server does meanwhile.
sub try_sql
{
	my ($node, $sql, $timeout) = @_;
	my ($out, $err) = ('', '');
	my $ok = eval {
		IPC::Run::run(
			[ 'psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'), '-c', $sql ],
			'<', \undef, '>', \$out, '2>', \$err, IPC::Run::timeout($timeout // 60));
	};
	$err .= $@ if $@;
	chomp $out;
	return ($ok ? 0 : 1, $out, $err);
}

sub wait_up
{
	my ($node) = @_;
	for (1 .. 300)
	{
		my ($ret) = try_sql($node, 'SELECT 1', 10);
		return 1 if $ret == 0;
		select(undef, undef, undef, 0.1);
	}
	return 0;
}

# Power loss: the postmaster and every child die at once, nobody writes.
sub hard_kill
{
	my ($node) = @_;
	my @pids = node_pids($node);
	kill 'KILL', @pids if @pids;
	for (1 .. 100)
	{
		last unless grep { kill 0, $_ } @pids;
		select(undef, undef, undef, 0.05);
	}
	$node->{_pid} = undef;
	return;
}

sub start_node
{
	my ($h, $node, $offset_ms) = @_;
	write_settings($h, $node);
	set_offset($node, $offset_ms);
	start_faked($node, sprintf('%+.3f', $offset_ms / 1000), fail_ok => 1);
	return wait_up($node);
}

sub check_error
{
	my ($h, $err, $what) = @_;
	for my $line (grep { /ERROR|FATAL|PANIC|error|failed|closed|lost/ } split /\n/, $err)
	{
		next if grep { $line =~ $_ } @known_errors;
		next if $line =~ /^\s*(DETAIL|HINT|CONTEXT):/;
		violation($h, "$what: unexpected error: $line");
	}
	return;
}

# Record IDs in the file outside the cluster, and check them.
sub check_ids
{
	my ($h, $sessions, $what) = @_;
	my $max_before = $h->{floor};
	my $max_now = $max_before;
	open my $fh, '>>', $h->{record} or die;
	for my $s (@$sessions)
	{
		my $prev = 0;
		for my $id (@$s)
		{
			print $fh "$id\n";
			$h->{ids}++;
			if ($id !~ /^\d+$/ || $id <= 0)
			{
				violation($h, "$what: not a positive ID: $id");
				next;
			}
			violation($h, "$what: ID $id issued twice") if $h->{seen}{$id}++;
			violation($h, "$what: ID $id not above $max_before, issued before it")
			  if $id <= $max_before;
			violation($h, "$what: ID $id not above $prev in the same session")
			  if $id <= $prev;
			$prev = $id;
			$max_now = $id if $id > $max_now;
		}
	}
	close $fh;
	$h->{floor} = $max_now;
	return;
}

# Several sessions ask for IDs at once; COPY streams each ID to the client
# as it is made, so an ID handed out before a failure is recorded too.
# During the burst the clock may step, or a backend be killed.
sub burst
{
	my ($h, $node) = @_;
	my $nsess = 1 + int(rand(3));
	my $n = pick(1, 10, 200, 2000);
	my $kind = pick('escape', 'escape', 'commit', 'rollback');
	my $during = pick('nothing', 'nothing', 'nothing', 'clock', 'kill');
	my $step_ms = pick(-3, -30, -300, -3000, +50);
	# single IDs, or blocks: of a few, of many, or of a whole tick
	my $block = pick(1, 1, 1, 2, 17, 300, 'capacity');
	my $form = pick('block', 'series');
	say_op($h, "burst $nsess x $n ($kind)" .
		  ($block eq '1' ? '' : " in blocks of $block ($form)") .
		  ($during eq 'clock' ? ", clock ${step_ms} ms during it" :
		   $during eq 'kill' ? ', a backend killed during it' : ''));

	# every ID of a block is streamed and recorded, in ascending order
	my $ids = "SELECT snowflake_nextval() AS id FROM generate_series(1, $n)";
	if ($block ne '1')
	{
		# a tick's capacity, in the layout in force; no block is larger
		# (sonyflake's tick holds 256)
		my $capacity = "(SELECT coalesce((SELECT 1 << seq_bits FROM snowflake_layouts() WHERE name = split_part(current_setting('snowflake.layout'), '\@', 1)), "
		  . "1 << current_setting('snowflake.custom_seq_bits')::int))";
		my $size = $block eq 'capacity' ? $capacity : "least($block, $capacity)";
		my $calls = "generate_series(1, greatest($n / $size, 1))";
		# the first of a block stands for first .. first + n - 1 only
		# where the sequence is the lowest field; sonyflake takes the series
		$form = 'series' if $h->{layout} eq 'sonyflake';
		$ids = $form eq 'block' ?
		  "SELECT f + generate_series(0, s - 1) AS id FROM (SELECT snowflake_nextval_block(s) AS f, s FROM $calls, (SELECT $size AS s) z OFFSET 0) b" :
		  "SELECT snowflake_nextval_series(s) AS id FROM $calls, (SELECT $size AS s) z";
	}
	my $query = $kind eq 'commit' ?
	  "COPY (INSERT INTO t $ids RETURNING id) TO STDOUT" :
	  "COPY ($ids) TO STDOUT";
	$query = "BEGIN; $query; ROLLBACK" if $kind eq 'rollback';

	my @runs;
	for my $i (1 .. $nsess)
	{
		my ($out, $err) = ('', '');
		my $t = IPC::Run::timeout(60);
		my $run = IPC::Run::start(
			[ 'psql', '-X', '-q', '-A', '-t', '-d', $node->connstr('postgres') . " application_name=torture_burst",
			  '-c', $query ],
			'<', \undef, '>', \$out, '2>', \$err, $t);
		push @runs, [ $run, \$out, \$err, $t ];
	}
	if ($during eq 'clock')
	{
		select(undef, undef, undef, rand(0.05));
		$h->{offset_ms} += $step_ms;
		set_offset($node, $h->{offset_ms});
		$h->{faults}++;
	}
	elsif ($during eq 'kill')
	{
		select(undef, undef, undef, rand(0.05));
		my (undef, $pids) = try_sql($node, "SELECT pid FROM pg_stat_activity WHERE application_name = 'torture_burst'", 10);
		my @p = grep { /^\d+$/ } split /\s+/, $pids;
		if (@p)
		{
			kill 'KILL', $p[0];
			$h->{faults}++;
			$h->{crashed_on_purpose} = 1;
		}
	}
	my @sessions;
	for my $r (@runs)
	{
		my ($run, $out, $err, $t) = @$r;
		eval { $run->finish; };
		if ($@ && $@ =~ /timeout/)
		{
			$run->kill_kill;
			violation($h, "burst: a call hung for 60 s");
		}
		check_error($h, $$err, 'burst');
		push @sessions, [ grep { length } split /\n/, $$out ];
	}
	check_ids($h, \@sessions, 'burst');
	wait_up($node) if $during eq 'kill';
	return;
}

sub clock_step
{
	my ($h, $node) = @_;
	my $kind = pick('small back', 'back', 'back', 'far back', 'far back', 'forward', 'home', 'glitch');
	$h->{faults}++;
	if ($kind eq 'glitch')
	{
		# far ahead and back, with no ID issued: nothing may be reserved,
		# even with a checkpoint taken meanwhile (no clock reading is a floor)
		my $checkpoint = rand() < 0.6;
		say_op($h, 'clock glitch: a day ahead for 0.3 s' . ($checkpoint ? ', a checkpoint meanwhile' : ''));
		set_offset($node, $h->{offset_ms} + 86_400_000);
		select(undef, undef, undef, 0.3);
		try_sql($node, 'CHECKPOINT') if $checkpoint;
		set_offset($node, $h->{offset_ms});
		return;
	}
	my $d = $kind eq 'small back' ? -(1 + int(rand(20))) :
	  $kind eq 'back' ? -(100 + int(rand(2000))) :
	  $kind eq 'far back' ? -3_600_000 :
	  $kind eq 'forward' ? 1 + int(rand(3000)) : -$h->{offset_ms};
	$h->{offset_ms} += $d;
	say_op($h, "clock $kind: ${d} ms, offset now $h->{offset_ms} ms");
	set_offset($node, $h->{offset_ms});
	return;
}

sub reload_settings
{
	my ($h, $node) = @_;
	my $what = pick('worker', 'backward', 'ahead', 'ahead');
	$h->{worker} = pick(1, 2, 3) if $what eq 'worker';
	$h->{backward_ms} = pick(0, 10, 100, 2000) if $what eq 'backward';
	$h->{ahead_ms} = pick(-1, -1, 0, 50, 5000) if $what eq 'ahead';
	say_op($h, "reload: worker $h->{worker}, max_clock_backward_ms $h->{backward_ms}, max_run_ahead_ms $h->{ahead_ms}");
	write_settings($h, $node);
	$node->reload;
	# the backends and the keeper take it a moment later
	select(undef, undef, undef, 0.3);
	return;
}

sub restart
{
	my ($h, $node) = @_;
	my $how = pick('fast', 'immediate', 'hard kill', 'hard kill', 'keeper kill', 'keeper stop', 'layout');
	wake_keeper($h, $node) unless $how eq 'keeper stop';
	$h->{faults}++;
	if ($how eq 'keeper kill' || $how eq 'keeper stop')
	{
		my $pid = keeper_pid($node);
		say_op($h, $how);
		return unless $pid;
		if ($how eq 'keeper kill')
		{
			kill 'KILL', $pid;
			# a child's SIGKILL restarts every process
			wait_up($node);
		}
		else
		{
			kill 'STOP', $pid;
			$h->{keeper_stopped} = $pid;
		}
		return;
	}
	if ($how eq 'layout')
	{
		$h->{layout} = pick(@layouts);
		$h->{layout} = 'shardingsphere' if rand() < 0.4;
	}
	say_op($h, "restart: $how" . ($how eq 'layout' ? " to $h->{layout}" : ''));
	if ($how eq 'hard kill')
	{
		hard_kill($node);
	}
	else
	{
		$node->stop($how eq 'immediate' ? 'immediate' : 'fast', fail_ok => 1);
	}
	start_node($h, $node, $h->{offset_ms}) or violation($h, 'the node did not come back');
	return;
}

# Damage the state file while the node is down, or make it unwritable
# while it runs.
sub damage
{
	my ($h, $node) = @_;
	my $how = pick('truncate', 'zero', 'torn', 'torn', 'unwritable');
	my $file = $node->data_dir . '/snowflake.state';
	say_op($h, "state file: $how");
	$h->{faults}++;
	wake_keeper($h, $node);
	if ($how eq 'unwritable')
	{
		if ($h->{unwritable})
		{
			chmod 0600, $file;
			$h->{unwritable} = 0;
		}
		elsif (-f $file)
		{
			chmod 0400, $file;
			$h->{unwritable} = 1;
		}
		return;
	}
	chmod 0600, $file if -f $file;
	$h->{unwritable} = 0;
	$node->stop('immediate', fail_ok => 1);
	if (-f $file && $how eq 'torn' && -s $file == 1024)
	{
		tear_state_file($file);
	}
	elsif (-f $file)
	{
		open my $fh, '+<', $file or die "cannot open $file: $!";
		binmode $fh;
		if ($how eq 'truncate') { truncate $fh, 0; }
		else { print $fh "\0" x 1024; }
		close $fh;
	}
	start_node($h, $node, $h->{offset_ms}) or violation($h, 'the node did not come back');
	return;
}

# A damaged file must be refused; the operator then repairs it above the
# largest ID it knows of.
sub repair_if_refused
{
	my ($h, $node) = @_;
	my ($ret, $out, $err) = try_sql($node, 'SELECT snowflake_nextval()');
	return unless $ret != 0 &&
	  $err =~ /state file "snowflake.state" cannot be used/;
	say_op($h, "repair above $h->{floor}");
	($ret, $out, $err) = try_sql($node, "SELECT snowflake_repair_state($h->{floor})");
	# a value far ahead of the clock is refused as a likely typo; this
	# operator knows it is the largest ID issued, the clock is what is behind
	if ($ret != 0 && $err =~ /is \d+ ms ahead of the system clock|is in the last tick/)
	{
		say_op($h, "repair above $h->{floor}, forced: the clock is behind it");
		($ret, $out, $err) = try_sql($node,
			"SELECT snowflake_repair_state($h->{floor}, force => true)");
	}
	check_error($h, $err, 'repair') if $ret != 0;
	return;
}

sub standby_op
{
	my ($h, $node) = @_;
	wake_keeper($h, $node);
	$h->{faults}++;
	if (!$h->{standby})
	{
		# few or no replication slots (and origins): replay needs none
		my $slots = pick(0, 1, 10);
		say_op($h, "standby: base backup, start replaying, max_replication_slots = $slots");
		my $name = "b$h->{seed}_" . $h->{backup}++;
		# a promoted standby may have no slot to spare for the backup
		$node->backup($name, backup_options => ['--no-slot']);
		my $sb = PostgreSQL::Test::Cluster->new("sb$h->{seed}_$h->{backup}");
		$sb->init_from_backup($node, $name, has_streaming => 1);
		$sb->append_conf('postgresql.conf', "max_replication_slots = $slots\n"
			  . ($sb->pg_version >= 18 ? "max_active_replication_origins = $slots\n" : ''));
		$h->{standby} = $sb;
		$h->{standby_offset_ms} = pick(0, -2000, -3_600_000);
		write_settings($h, $sb);
		set_offset($sb, $h->{standby_offset_ms});
		start_faked($sb, sprintf('%+.3f', $h->{standby_offset_ms} / 1000), fail_ok => 1);
		return;
	}
	my $sb = $h->{standby};
	my $how = pick('checkpoint', 'crash', 'kill backend', 'promote', 'promote');
	if ($how eq 'checkpoint')
	{
		say_op($h, 'standby: checkpoint on both');
		try_sql($node, 'CHECKPOINT');
		try_sql($sb, 'CHECKPOINT');
	}
	elsif ($how eq 'crash')
	{
		say_op($h, 'standby: hard kill and restart');
		hard_kill($sb);
		start_faked($sb, sprintf('%+.3f', $h->{standby_offset_ms} / 1000), fail_ok => 1);
	}
	elsif ($how eq 'kill backend')
	{
		say_op($h, 'standby: a backend killed');
		my $run = IPC::Run::start(
			[ 'psql', '-X', '-d', $sb->connstr('postgres') . " application_name=torture_victim", '-c', 'SELECT pg_sleep(10)' ],
			'<', \undef, '>', \my $o, '2>', \my $e);
		my $pid;
		for (1 .. 50)
		{
			(undef, $pid) = try_sql($sb, "SELECT pid FROM pg_stat_activity WHERE application_name = 'torture_victim'");
			last if $pid;
			select(undef, undef, undef, 0.05);
		}
		kill 'KILL', $pid if $pid;
		eval { $run->finish; };
		wait_up($sb);
		# a standby refuses to generate
		my ($ret, $out, $err) = try_sql($sb, 'SELECT snowflake_nextval()');
		violation($h, "a standby generated $out") if $ret == 0;
	}
	else
	{
		say_op($h, 'standby: the primary dies, the standby is promoted');
		my $catch_up = rand() < 0.5;
		wait_up($sb);
		if ($catch_up)
		{
			my (undef, $lsn) = try_sql($node, 'SELECT pg_current_wal_lsn()');
			for (1 .. 100)
			{
				my (undef, $done) = try_sql($sb, "SELECT pg_last_wal_replay_lsn() >= '$lsn'");
				last if !$lsn || $done eq 't';
				select(undef, undef, undef, 0.1);
			}
		}
		hard_kill($node);
		$sb->promote;
		for (1 .. 300)
		{
			my (undef, $r) = try_sql($sb, 'SELECT pg_is_in_recovery()');
			last if $r eq 'f';
			select(undef, undef, undef, 0.1);
		}
		# the promise now: above every ID of the old primary that reached it
		my (undef, $reached) = try_sql($sb, 'SELECT coalesce(max(id), 0) FROM t');
		$h->{seen} = {};
		$h->{floor} = $reached;
		$h->{offset_ms} = $h->{standby_offset_ms};
		$h->{standby} = undef;
		$h->{node} = $sb;
		return;
	}
	return;
}

# A subscription beside the node, to a publisher of its own: added,
# dropped, or dropped while the publisher hangs (DROP SUBSCRIPTION then
# waits on it, holding the lock on pg_replication_origin) with IDs issued
# meanwhile.  None of it may stop or disturb the IDs.
sub subscription_op
{
	my ($h, $node) = @_;
	$h->{faults}++;
	if (!$h->{pub})
	{
		my $pub = PostgreSQL::Test::Cluster->new("pub$h->{seed}");
		$pub->init(allows_streaming => 'logical');
		$pub->start;
		$pub->safe_psql('postgres',
			'CREATE TABLE r (k serial PRIMARY KEY); CREATE PUBLICATION p FOR TABLE r');
		$h->{pub} = $pub;
	}
	my $pub = $h->{pub};
	my (undef, $has) = try_sql($node, "SELECT count(*) FROM pg_subscription WHERE subname = 's'");
	if (!$has)
	{
		say_op($h, 'subscription: added beside the node');
		try_sql($node, 'CREATE TABLE IF NOT EXISTS r (k int PRIMARY KEY)');
		try_sql($node, "CREATE SUBSCRIPTION s CONNECTION '" . $pub->connstr
			  . " dbname=postgres' PUBLICATION p WITH (copy_data = false)");
		try_sql($pub, 'INSERT INTO r SELECT FROM generate_series(1, 10)');
		return;
	}
	if (rand() < 0.5)
	{
		say_op($h, 'subscription: dropped');
		try_sql($node, 'DROP SUBSCRIPTION s');
		return;
	}
	say_op($h, 'subscription: its publisher hangs, DROP SUBSCRIPTION waits on it, IDs meanwhile');
	my @pids = node_pids($pub);
	kill 'STOP', @pids;
	my $drop = IPC::Run::start(
		[ 'psql', '-X', '-d', $node->connstr('postgres'), '-c', 'DROP SUBSCRIPTION s' ],
		'<', \undef, '>', \my $o, '2>', \my $e);
	select(undef, undef, undef, 0.5);
	burst($h, $node);
	# the keeper must not wait on the hung command: with the keeper running
	# and the file writable, reservations go on
	for (1 .. 3)
	{
		my ($ret, $out, $err) = try_sql($node,
			'SELECT count(snowflake_nextval()) FROM generate_series(1, 5000)');
		violation($h, "while DROP SUBSCRIPTION hung: $err")
		  if $err =~ /reservation was not renewed/ && !$h->{keeper_stopped} && !$h->{unwritable};
		select(undef, undef, undef, 0.4);
	}
	kill 'CONT', @pids;
	eval { $drop->finish; };
	return;
}

# Wait until a node has left recovery; false if it never does.
sub wait_primary
{
	my ($node) = @_;
	for (1 .. 300)
	{
		my (undef, $r) = try_sql($node, 'SELECT pg_is_in_recovery()', 10);
		return 1 if $r eq 'f';
		select(undef, undef, undef, 0.1);
	}
	return 0;
}

# A copy of the node (or the node upgraded, or restored from a dump) must
# refuse before its first ID under the source's worker id.
sub expect_held_back
{
	my ($h, $node, $what) = @_;
	my ($ret, $out, $err) = try_sql($node, 'SELECT snowflake_nextval()');
	if ($ret == 0)
	{
		violation($h, "$what: generated $out before it was told which node it is");
		return;
	}
	check_error($h, $err, $what);
	return;
}

# The node's life beyond one server: pg_upgrade, a dump restored into a new
# cluster with the same worker id, a clone started standalone, a restore to
# a point in time (the end of a base backup).  Each new server must refuse
# until the documented step; a clone either gets a worker id of its own
# (the source goes on) or replaces its source (the source dies first).
sub lifecycle_op
{
	my ($h, $node) = @_;
	my $how = pick('pg_upgrade', 'dump and restore', 'clone', 'pitr');
	my $name = "l$h->{seed}_" . $h->{backup}++;
	my $conf = "include_if_exists = 'torture.conf'\nrestart_after_crash = on\n";
	my ($ret, $out, $err);
	wake_keeper($h, $node);
	$h->{faults}++;
	if ($how eq 'clone' || $how eq 'pitr')
	{
		my $replace = rand() < 0.5;
		say_op($h, ($how eq 'clone' ? 'clone: a base backup started as a primary' :
					'PITR: a base backup restored to its end, started as a primary') .
			   ($replace ? ', replacing the node' : ', given worker 99'));
		$node->backup($name);
		my $copy = PostgreSQL::Test::Cluster->new($name);
		$copy->init_from_backup($node, $name);
		if ($how eq 'pitr')
		{
			$copy->append_conf('postgresql.conf',
				"restore_command = 'false'\nrecovery_target = 'immediate'\nrecovery_target_action = 'promote'\n");
			open my $fh, '>', $copy->data_dir . '/recovery.signal' or die;
			close $fh;
		}
		start_node($h, $copy, $h->{offset_ms}) && wait_primary($copy)
		  or return violation($h, "$how: the copy did not start");
		expect_held_back($h, $copy, $how);
		if (!$replace)
		{
			my %own = (%$h, worker => 99);
			write_settings(\%own, $copy);
			$copy->reload;
			select(undef, undef, undef, 0.3);
			($ret, $out, $err) = try_sql($copy,
				'SELECT (snowflake_decode(snowflake_nextval())).worker_id');
			violation($h, "$how: with worker 99 it issued an ID of worker $out")
			  if $ret == 0 && $out ne '99';
			check_error($h, $err, $how);
			$copy->stop('immediate', fail_ok => 1);
			return;
		}
		# the node dies; the copy is confirmed as the same node
		hard_kill($node);
		if ($h->{standby})
		{
			$h->{standby}->stop('immediate', fail_ok => 1);
			$h->{standby} = undef;
		}
		($ret, $out, $err) = try_sql($copy, 'SELECT snowflake_confirm_node()');
		check_error($h, $err, "$how: confirm");
		# the promise now: above every ID of the node that reached the copy
		my (undef, $reached) = try_sql($copy, 'SELECT coalesce(max(id), 0) FROM t');
		$h->{seen} = {};
		$h->{floor} = $reached;
		$h->{node} = $copy;
		return;
	}

	my $new = snowflake_node($name, worker_id => $h->{worker}, allows_streaming => 1,
		conf => $conf);
	write_settings($h, $new);
	if ($h->{standby})
	{
		$h->{standby}->stop('immediate', fail_ok => 1);
		$h->{standby} = undef;
	}
	my $floor_sql;
	if ($how eq 'pg_upgrade')
	{
		say_op($h, 'pg_upgrade to a new cluster, started on the same clock');
		$node->stop('fast', fail_ok => 1);
		my $bindir = $new->config_data('--bindir');
		my $ok = eval {
			IPC::Run::run(
				[ 'sh', '-c', 'cd "$1" && shift && exec "$@"', 'sh', $new->basedir,
				  'pg_upgrade', '--no-sync', '-d', $node->data_dir, '-D', $new->data_dir,
				  '-b', $bindir, '-B', $bindir, '-p', $node->port, '-P', $new->port,
				  '-s', $new->host ],
				'<', \undef, '>', \$out, '2>', \$err, IPC::Run::timeout(300));
		};
		return violation($h, "pg_upgrade failed: $out $err $@") unless $ok;
		$floor_sql = "SELECT snowflake_confirm_node(old_data_directory => '" . $node->data_dir . "')";
	}
	else
	{
		say_op($h, 'dump, restored into a new cluster with the same worker id');
		# README: a node claims its worker id; the claim travels in the dump
		($ret, $out, $err) = try_sql($node, 'SELECT worker_id FROM snowflake_claim_worker()');
		if ($ret != 0)
		{
			check_error($h, $err, 'claim');
			return;
		}
		my (undef, $hwm) = try_sql($node, 'SELECT high_water_mark FROM snowflake_status');
		my $dump = $new->basedir . '/db.dump';
		my $ok = eval {
			IPC::Run::run([ 'pg_dump', '-Fc', '-d', $node->connstr('postgres'), '-f', $dump ],
				'<', \undef, '>', \$out, '2>', \$err, IPC::Run::timeout(120));
		};
		return violation($h, "pg_dump failed: $err $@") unless $ok;
		hard_kill($node);
		start_node($h, $new, $h->{offset_ms}) or return violation($h, 'the new cluster did not start');
		$ok = eval {
			IPC::Run::run([ 'pg_restore', '--exit-on-error', '-d', $new->connstr('postgres'), $dump ],
				'<', \undef, '>', \$out, '2>', \$err, IPC::Run::timeout(120));
		};
		return violation($h, "pg_restore failed: $err $@") unless $ok;
		$floor_sql = "SELECT snowflake_confirm_node(above => $hwm)";
	}
	$h->{node} = $new;
	start_node($h, $new, $h->{offset_ms}) if $how eq 'pg_upgrade';
	wait_up($new) or return violation($h, 'the new cluster did not start');
	expect_held_back($h, $new, $how);
	($ret, $out, $err) = try_sql($new, $floor_sql);
	if ($ret != 0 && $how eq 'pg_upgrade')
	{
		# a damaged or unusable old state file: the highest ID known
		check_error($h, $err, "$how: confirm from the old data directory");
		($ret, $out, $err) = try_sql($new, "SELECT snowflake_confirm_node(above => $h->{floor})");
	}
	check_error($h, $err, "$how: confirm");
	return;
}

sub play_history
{
	my ($seed, $steps, $dir) = @_;
	srand($seed);
	my $h = new_history($seed, $steps, $dir);
	my $node = snowflake_node("t$seed", worker_id => 1, allows_streaming => 1,
		conf => "include_if_exists = 'torture.conf'\nrestart_after_crash = on\n");
	$h->{node} = $node;
	start_node($h, $node, 0) or die 'the node did not start';
	$node->safe_psql('postgres', 'CREATE EXTENSION snowflake');
	$node->safe_psql('postgres', 'CREATE TABLE t (id bigint PRIMARY KEY)');

	for my $step (1 .. $steps)
	{
		$node = $h->{node};
		my $r = rand();
		eval {
			if ($r < 0.40) { burst($h, $node); }
			elsif ($r < 0.58) { clock_step($h, $node); }
			elsif ($r < 0.68) { reload_settings($h, $node); }
			elsif ($r < 0.84) { restart($h, $node); }
			elsif ($r < 0.88) { damage($h, $node); }
			elsif ($r < 0.92) { subscription_op($h, $node); }
			elsif ($r < 0.97) { standby_op($h, $node); }
			else { lifecycle_op($h, $node); }
			repair_if_refused($h, $h->{node});
			1;
		} or violation($h, "the step failed: $@");
		$h->{ops}++;
		last if @{ $h->{violations} } > 20;
	}

	$node = $h->{node};
	wake_keeper($h, $node);
	# no crash but the ones the history caused
	for my $n (grep { defined } $node, $h->{standby})
	{
		my $log = slurp_file($n->logfile);
		for my $line (grep { /PANIC|TRAP:|terminated by signal (?!9)/ } split /\n/, $log)
		{
			violation($h, "server log: $line");
		}
	}
	$h->{standby}->stop('immediate', fail_ok => 1) if $h->{standby};
	$h->{pub}->stop('immediate', fail_ok => 1) if $h->{pub};
	$node->stop('immediate', fail_ok => 1);
	return $h;
}

1;
