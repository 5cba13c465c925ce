# SnowflakeTorture: plays a random history of operations and faults on a
# small cluster, from a seed, and checks both halves of the promise after
# every step:
#
#  - every ID a node issues (or the node it took over from, for what reached
#    it) is unique and greater than every ID issued before it, and carries a
#    time no further ahead of the clock than the policy lets it; a node that
#    replaces a lost one (a restore, a copy, an upgrade, a dump restored) is
#    released only above every ID the lost node issued, those its WAL never
#    had included;
#  - the node refuses only where it must: a model of what the node knows
#    (the IDs it issued and may have reserved, the clock it read, its
#    settings, its state file, which node its data directory is, what the
#    operator did) decides for every call whether a refusal is allowed and
#    with which SQLSTATE and, for a node held back, broken or disabled,
#    which reason snowflake_status gives; a refusal it does not allow, or
#    with another SQLSTATE or reason, is a violation like a repeated ID.
#    No message's words are read: the node's words are its own to change.
#
# No call hangs past its policy; no process crashes but those the history
# kills; a node the history restarts comes back.  The checker's own calls
# never count as the node's: a connection the history cut (a kill, a
# restart, the crash recovery after them) excuses only calls made while it
# lasted.
#
# The history is drawn from the seed alone (Perl's rand, seeded), and from
# the event kinds it is told to include (force), so a failing seed replays
# the same operations; the interleaving of concurrent sessions is the only
# thing left to the machine.
package SnowflakeTorture;

use strict;
use warnings;
use Exporter 'import';
use Digest::MD5 ();
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();
use SnowflakeTest;

our @EXPORT = qw(play_history event_kinds);

# Every kind of event a history can hold; the histories of `make test`
# together must hold each at least once.
my @event_kinds = qw(
  burst block-burst series-burst burst-clock-step burst-backend-kill
  clock-back clock-far-back clock-forward clock-home clock-glitch
  reload-worker reload-backward reload-ahead
  restart-fast restart-immediate hard-kill keeper-kill keeper-stop
  layout-change layout-broken worker-broken
  state-truncate state-zero state-torn state-unwritable repair
  subscription-add subscription-drop subscription-hung
  standby standby-few-slots standby-checkpoint standby-crash standby-backend-kill
  promote cascade promote-cascade second-promotion
  standby-before-extension preload-added-later preload-removed promote-before-preload
  extension-1.1-updated
  extension-recreated second-database bad-setting-before-first-id
  pg_upgrade pg_upgrade-without-preload dump-restore clone pitr
  hint-settings hint-layout hint-clock hint-keeper
  copy-first-start promote-while-rejected restore-after-claim
  pitr-target archive-lost-segment run-ahead-unarchived worker-retired held-file-removed
  release-write-fails
);

sub event_kinds { return @event_kinds; }

# The node's refusals, by SQLSTATE (MODEL-SPEC): the checker judges each
# from its code and, for a node held back, broken or disabled, the reason
# snowflake_status gives; never from a message's words.
my %refusal_codes = map { $_ => 1 } qw(55S01 55S02 55S03 58030 XX001 55S04 55S05 55S06 55S07
  55S08 55S09 F0000 55000 25006 2200H 22008);
# the codes of a node's state, whose reason snowflake_status shows
my %state_codes = map { $_ => 1 } qw(55S01 55S02 55S03 58030 XX001 55S04 F0000);
# what a node held back refuses with, by what the model says it is
my %held = (
	copy => [ '55S01', qw(backup_label recovery_signal recovery_target archive_standby other_directory files_removed) ],
	upgraded => [ '55S02', 'upgraded' ],
	new => [ '55S02', qw(new_as_standby never_installed) ],
	inherited => [ '55S03', 'claimed_elsewhere' ],
	retired => [ '55S03', 'worker_retired' ],
);
# the longest a node may run ahead of its clock, whatever its settings
my $cap_ms = 86_400_000;

# ShardingSphere's for JVMs in Shanghai and New York: epochs 8 hours before
# and 4 hours after plain shardingsphere's
my @zone_layouts = qw(shardingsphere@Asia/Shanghai shardingsphere@America/New_York);
my @layouts = (qw(shardingsphere twitter discord instagram sonyflake javascript custom broken), @zone_layouts);

# How far a timing may be off before the model calls a refusal unjustified:
# the time between the model's clock reading and the node's, on a loaded
# machine.
my $slack_ms = 250;

# A standby is made from a base backup without a slot: its primary keeps
# WAL enough for it to follow across the primary's restarts (seed 13201
# on 15 lost its stream at a restart's checkpoint)
my $KEEP_WAL = "wal_keep_size = '256MB'\n";

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
		violations => [],		# the first ones
		nviolations => 0,		# all of them
		allowed => 0,			# refusals the model allowed
		unjustified => 0,		# refusals it did not
		releases => 0,			# releases judged (snowflake_confirm_node())
		want => {},				# event kinds to play at the next chance
		kinds => {},			# event kinds played
		offset_ms => 0,			# the primary's clock offset
		layout => 'shardingsphere',
		worker => 1,
		backward_ms => 10,
		ahead_ms => 0,
		keeper_stopped => 0,
		standby => undef,
		cascade => undef,
		promotions => 0,
		backup => 0,
		dbs => ['postgres'],
		# what the node knows, for judging its refusals
		model => {
			identity => 'ok',	# ok, or held back: copy, upgraded, new,
								# inherited, retired (%held)
			held_reason => undef,	# the one reason a hold must give
			settings_bad => 0,	# the layout rejected at the last start
			worker_bad => 0,	# the file gives a worker id out of range
			worker_rejected => 0,	# the node's worker id was rejected: at
								# start, and no reload fixed it since
			file_broken => 0,	# the state file cannot be trusted
			preloaded => 1,
			extension => 1,		# the extension exists in every database used
			hi => 0,			# the largest ID the lineage may have issued
			hi_layout => 'shardingsphere',	# the layout it was issued in
			unclean => 0,		# the state may be a reservation ahead of hi
			seen_ms => 0,		# the latest clock reading of the node
			system => 0,		# which system identifier the node has: a
								# new one after pg_upgrade or a dump
			claims => {},		# worker id => the system that claimed it
			rows => {},			# the same, as postgres' snowflake_workers
								# holds them (DROP EXTENSION empties it)
		},
	};
	open my $fh, '>', $h->{record} or die "cannot write $h->{record}: $!";
	close $fh;
	return $h;
}

sub say_op
{
	my ($h, $what) = @_;
	push @{ $h->{log} }, sprintf('%3d %s', scalar @{ $h->{log} }, $what);
	# in the test's log as it happens, beside the servers' own
	note("history $h->{seed}: $h->{log}[-1]");
	return;
}

sub kind
{
	my ($h, @kinds) = @_;
	$h->{kinds}{$_}++ for @kinds;
	return;
}

# The node claimed its worker id in snowflake_workers (in the database
# the history calls, postgres).
sub claimed
{
	my ($h) = @_;
	$h->{model}{claims}{ configured_worker($h) } = $h->{model}{system};
	$h->{model}{rows}{ configured_worker($h) } = $h->{model}{system};
	return;
}

# The worker id the node's configuration gives: 5000 while the file gives
# that (in force where the layout's worker field holds it).
sub configured_worker
{
	my ($h) = @_;
	return $h->{model}{worker_bad} ? 5000 : $h->{worker};
}

# Held back for a worker id its system has not claimed, where it claimed
# others: a worker id rejected at start is none, and holds nothing.
sub held_unclaimed
{
	my ($h) = @_;
	return !$h->{model}{worker_rejected} && unclaimed($h, configured_worker($h));
}

# Whether this system claimed worker ids, and not this one: the node is
# held back under it (unclaimed) until it claims it too.
sub unclaimed
{
	my ($h, $worker) = @_;
	my $m = $h->{model};
	my @own = grep { $m->{claims}{$_} == $m->{system} } keys %{ $m->{claims} };
	return (@own && !grep({ $_ == $worker } @own)) ? 1 : 0;
}

# The step of that hold, which a mesh's helper takes: the worker id in
# force claimed.
sub claim_in_force
{
	my ($h, $node, $what) = @_;
	say_op($h, "$what: snowflake_claim_worker() for worker id " . configured_worker($h));
	claimed($h)
	  if defined((one_call($h, $node, 'claim', sql => 'SELECT worker_id FROM snowflake_claim_worker()',
			no_ids => 1))[0]);
	return;
}

# A violation, in the history's list; past the first 50 (a burst's every
# ID, say) only counted.
sub violation
{
	my ($h, $what) = @_;
	$h->{nviolations}++;
	push @{ $h->{violations} }, "step " . (scalar(@{ $h->{log} }) - 1) . ": $what"
	  if @{ $h->{violations} } < 50;
	return;
}

sub pick { return $_[ int(rand(scalar @_)) ]; }

sub now_ms { return int(Time::HiRes::time() * 1000); }

# ---------------------------------------------------------------- layouts

# The layouts as the model computes them: time bits, worker bits, sequence
# bits, tick and epoch; the presets as the node lists them, the custom one
# as the history configures it.
sub layout_params
{
	my ($h, $name) = @_;
	return $h->{layouts}{$name};
}

sub load_layouts
{
	my ($h, $node) = @_;
	my $out = $node->safe_psql('postgres', q{
		SELECT name, time_bits, worker_bits, seq_bits, tick_ms,
			   (extract(epoch FROM epoch) * 1000)::bigint
		FROM snowflake.snowflake_layouts()});
	for my $line (split /\n/, $out)
	{
		my ($name, $t, $w, $s, $tick, $epoch) = split /\|/, $line;
		$h->{layouts}{$name} = { shift => $w + $s, bits => $t + $w + $s, tick => $tick, epoch => $epoch };
	}
	# custom: 40/8/14, 1 ms, 2020-01-01 (conf_lines)
	$h->{layouts}{custom} = { shift => 22, bits => 62, tick => 1, epoch => 1577836800000 };
	# a zone's: shardingsphere's bits, the epoch the time of ID 1 says
	for my $z (@zone_layouts)
	{
		my $epoch = $node->safe_psql('postgres',
			"SELECT (extract(epoch FROM snowflake.snowflake_timestamp(1, '$z')) * 1000)::bigint");
		$h->{layouts}{$z} = { %{ $h->{layouts}{shardingsphere} }, epoch => $epoch };
	}
	return;
}

# The time an ID carries in a layout, in Unix ms; undef beyond the layout.
sub id_time_ms
{
	my ($h, $id, $layout) = @_;
	my $p = layout_params($h, $layout) or return undef;
	return undef if $p->{bits} < 63 && $id >= (1 << $p->{bits});
	return $p->{epoch} + ($id >> $p->{shift}) * $p->{tick};
}

# The largest ID of the tick a second after the one that holds time ms: the
# furthest a reservation made then reaches.
sub reservation_after
{
	my ($h, $ms, $layout) = @_;
	my $p = layout_params($h, $layout) or return 0;
	my $tick = int(($ms - $p->{epoch}) / $p->{tick}) + int(1000 / $p->{tick}) + 1;
	return 0 if $tick < 0;
	my $id = (($tick + 1) << $p->{shift}) - 1;
	return $id >= 0 && ($p->{bits} >= 63 || $id < (1 << $p->{bits})) ? $id : (1 << $p->{bits}) - 1;
}

# ---------------------------------------------------------------- the node

sub conf_lines
{
	my ($h) = @_;
	my $layout = $h->{layout};
	my $extra = '';
	if ($layout eq 'custom')
	{
		$extra = "snowflake.custom_time_bits = 40\nsnowflake.custom_worker_bits = 8\n"
		  . "snowflake.custom_seq_bits = 14\nsnowflake.custom_epoch = '2020-01-01'\n";
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
	my ($h, $node, %opt) = @_;
	my $file = $node->data_dir . '/torture.conf';
	my $worker = $opt{worker} // ($h->{model}{worker_bad} ? 5000 : $h->{worker});
	open my $fh, '>', $file or die "cannot write $file: $!";
	print $fh conf_lines($h);
	print $fh "snowflake.worker_id = $worker\n";
	print $fh "snowflake.max_clock_backward_ms = $h->{backward_ms}\n";
	print $fh "snowflake.max_run_ahead_ms = $h->{ahead_ms}\n";
	print $fh "shared_preload_libraries = ''\n" unless $opt{preload} // $h->{model}{preloaded};
	close $fh;
	# what this node runs with, once it is the primary
	$node->{torture_settings} = { map { $_ => $h->{$_} } qw(layout backward_ms ahead_ms) };
	$node->{torture_settings}{worker} = $opt{worker} // $h->{worker};
	$node->{torture_settings}{worker_bad} = $h->{model}{worker_bad};
	# a worker id its primary gave up, which it keeps (worker_retired)
	delete $node->{torture_retired};
	return;
}

# Whether a start with these settings rejects the layout (one that cannot
# work): the node is disabled until a restart fixes it.
sub settings_rejected
{
	my ($layout) = @_;
	return $layout eq 'broken' ? 1 : 0;
}

# Whether it rejects the worker id: 5000 where the layout's worker field is
# narrower than 13 bits (instagram's and sonyflake's hold it).  A reload
# with a valid one fixes it.
my %worker_bits = (instagram => 13, sonyflake => 16, javascript => 6, custom => 8);
sub worker_rejected
{
	my ($layout, $worker_bad) = @_;
	return $worker_bad && ($worker_bits{$layout} // 10) < 13 ? 1 : 0;
}

# A standby starts (again) on its own clock, with the layout its file
# gives then: a later change of the file reaches it at its next start.
sub start_standby
{
	my ($sb) = @_;
	start_faked($sb, sprintf('%+.3f', $sb->{torture_offset_ms} / 1000), fail_ok => 1);
	# what it starts with; a reload does not replace a good worker id by a
	# bad one
	$sb->{torture_layout} = $sb->{torture_settings}{layout};
	$sb->{torture_worker_bad} = $sb->{torture_settings}{worker_bad};
	return;
}

# A promoted node runs with the settings it was given (reloaded), in the
# layout it started with.
sub adopt_settings
{
	my ($h, $node) = @_;
	my $st = $node->{torture_settings} or return;
	$h->{$_} = $st->{$_} for qw(worker backward_ms ahead_ms);
	$h->{layout} = $node->{torture_layout} // $st->{layout};
	$h->{model}{worker_bad} = $node->{torture_worker_bad} // $st->{worker_bad};
	$h->{model}{settings_bad} = settings_rejected($h->{layout});
	$h->{model}{worker_rejected} = worker_rejected($h->{layout}, $h->{model}{worker_bad});
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
	my ($h) = @_;
	if ($h->{keeper_stopped})
	{
		kill 'CONT', $h->{keeper_stopped};
		$h->{keeper_stopped} = 0;
	}
	return;
}

# Run one statement; never dies, whatever the server does meanwhile.  Its
# errors carry their SQLSTATE (see error_of).
sub try_sql
{
	my ($node, $sql, $timeout, $db) = @_;
	my ($out, $err) = ('', '');
	my $ok = eval {
		IPC::Run::run(
			[ 'psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-v', 'VERBOSITY=verbose',
			  '-d', $node->connstr($db // 'postgres'), '-c', $sql ],
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

# A child of the node killed: the postmaster restarts every process, the
# keeper included.  A keeper the history stopped would hold the restart
# until the postmaster's SIGKILL (not seen to come under libfaketime): it
# runs again to take the SIGQUIT, and the keeper after the restart is a new
# one.  Once the postmaster has reaped the child, the restart refuses
# connections until recovery ends, so the node is waited for from then on,
# not from before the postmaster saw the death.
sub wait_restarted
{
	my ($h, $node, $pid) = @_;
	wake_keeper($h) if $node == $h->{node};
	for (1 .. 200)
	{
		last unless kill 0, $pid;
		select(undef, undef, undef, 0.05);
	}
	wait_up($node) or violation($h, 'the node did not come back after a crash');
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

# The node stops without recording its exact last ID: its state may be the
# reservation, a second ahead of its IDs.
sub unclean
{
	my ($h) = @_;
	$h->{model}{unclean} = 1;
	return;
}

# Every process of the node restarts after a crash: nothing was issued
# since this start, so a clean stop now keeps the reservation as it is.
sub crashed
{
	my ($h) = @_;
	unclean($h);
	$h->{issued_since_start} = 0;
	return;
}

# A start with the settings the history wrote: the model learns whether
# the node can trust them.
sub start_node
{
	my ($h, $node, $offset_ms) = @_;
	write_settings($h, $node);
	set_offset($node, $offset_ms);
	start_faked($node, sprintf('%+.3f', $offset_ms / 1000), fail_ok => 1);
	$h->{model}{settings_bad} = settings_rejected($h->{layout});
	$h->{model}{worker_rejected} = worker_rejected($h->{layout}, $h->{model}{worker_bad});
	return wait_up($node);
}

sub start_or_violation
{
	my ($h, $node, $offset_ms) = @_;
	start_node($h, $node, $offset_ms) or violation($h, 'the node did not come back');
	return;
}

# ---------------------------------------------------------------- judging

# The furthest ahead of the clock (at Unix ms $now) the node's state may be
# in the layout in force, from what the model knows; undef if the state
# does not fit the layout.
sub lead_bound_ms
{
	my ($h, $now) = @_;
	my $m = $h->{model};
	my $hi = $m->{hi};
	if ($m->{unclean} && $hi > 0)
	{
		# a reservation reaches a second past the latest ID asked for: at
		# most the latest ID issued, or the clock then, a tick on
		my $t = id_time_ms($h, $hi, $m->{hi_layout}) // 0;
		my $tick = (layout_params($h, $m->{hi_layout}) // { tick => 1 })->{tick};
		$t = $m->{seen_ms} if $m->{seen_ms} > $t;
		my $r = reservation_after($h, $t + $tick, $m->{hi_layout});
		$hi = $r if $r > $hi;
	}
	my $t = id_time_ms($h, $hi, $h->{layout});
	return undef unless defined $t;
	return $t - $now;
}

sub allowed_lead_ms
{
	my ($h) = @_;
	return $h->{ahead_ms} < 0 ? $cap_ms : $h->{ahead_ms};
}

# The error a call ended with: the first error the server sent, with its
# SQLSTATE (psql prints it with VERBOSITY verbose); or, with no SQLSTATE,
# the client's own (a connection it could not make, or lost: the server's
# message then came before the session's settings); or a timeout.
sub error_of
{
	my ($err) = @_;
	return { timeout => 1, line => $1 } if $err =~ /(IPC::Run: timeout[^\n]*)/;
	for my $line (split /\n/, $err)
	{
		return { code => $1, line => $line } if $line =~ /(?:ERROR|FATAL|PANIC):  ([0-9A-Z]{5}): /;
	}
	my ($line) = grep { /\S/ && !/^(WARNING|NOTICE|INFO|LOG|DETAIL|HINT|CONTEXT|LOCATION):/ } split /\n/, $err;
	return { line => $line // '(no message)' };
}

sub is_cut
{
	my ($e) = @_;
	return !defined $e->{code} || $e->{code} =~ /^08|^57P0[123]$/;
}

# The node's reason, as snowflake_status gives it now ('' for none; undef
# if it cannot be read).
sub status_reason
{
	my ($node, $db) = @_;
	my ($ret, $out) = try_sql($node, 'SELECT coalesce(reason, \'\') FROM snowflake_status', 30, $db);
	return $ret == 0 ? $out : undef;
}

# Why the model lets the node refuse a call with this error ($e: its
# SQLSTATE, and the node's reason where the code is a state's), or undef
# if it does not.  $ctx: the call's clock (lo_ms, the earliest the clock
# read during it), whether the history cut connections during it, whether
# it went to a standby, whether it is a repair or a release.
sub justified
{
	my ($h, $e, $ctx) = @_;
	my $m = $h->{model};
	my ($code, $reason) = ($e->{code}, $e->{reason});
	my $reason_in = sub {
		my %ok = map { $_ => 1 } @_;
		return defined $reason && $ok{$reason};
	};

	return $ctx->{cut} ? 'connection cut by the history' : undef if is_cut($e);
	# a stop time further ahead of this server's clock than a clock may be
	# off (a day)
	return $ctx->{stopped_at_ms} > $ctx->{lo_ms} + $cap_ms - $slack_ms ?
	  'the stop time is a day ahead of the clock' : undef
	  if $code eq '22023' && defined $ctx->{stopped_at_ms};
	return $ctx->{standby} ? 'a standby' : undef if $code eq '25006';
	return $m->{preloaded} ? undef : 'not preloaded' if $code eq '55000';
	return undef if !$m->{preloaded};
	# the node's order (node.c): its configuration, its hold, its state
	# file, its worker id, then the clock
	# (1.1's snowflake_status has no reason)
	return 'a setting rejected at start'
	  if $code eq 'F0000' && $m->{settings_bad} &&
	  ($reason_in->('layout_unusable') || !defined $reason && $m->{at_1_1});
	return undef if $m->{settings_bad};
	# a standby's own hold: its worker id one its primary gave up
	return 'a standby whose worker id its primary gave up'
	  if $ctx->{standby} && $ctx->{retired} && $code eq '55S03' && $reason_in->('worker_retired');

	if ($m->{identity} ne 'ok')
	{
		my ($held_code, @reasons) = @{ $held{ $m->{identity} } };
		@reasons = ref $m->{held_reason} ? @{ $m->{held_reason} } : ($m->{held_reason})
		  if defined $m->{held_reason};
		return $code eq $held_code && $reason_in->(@reasons) ? "held back: $m->{identity}" : undef;
	}
	# a worker id the system this node was before claimed (pg_upgrade, a
	# dump): a copy of that system shares its identifier, so the claim may
	# be the copy's
	my $claim = $m->{claims}{ $h->{worker} };
	return 'the worker id was claimed by the system the node was before'
	  if $code eq '55S03' && $reason_in->('claimed_elsewhere') && defined $claim && $claim != $m->{system};
	# a worker id this system has not claimed, where it claimed others
	return 'a worker id this system has not claimed'
	  if $code eq '55S03' && $reason_in->('unclaimed') && held_unclaimed($h);
	return undef if held_unclaimed($h);
	return undef if $code =~ /^55S0[1239]$/ || $code eq '58030';
	return $m->{file_broken} && $reason_in->('state_damaged') ? 'the state file is damaged' : undef
	  if $code eq 'XX001';
	return 'a worker id rejected'
	  if $code eq 'F0000' && $m->{worker_rejected} &&
	  ($reason_in->('worker_id_rejected') || !defined $reason && $m->{at_1_1});
	return undef if $m->{worker_rejected} || $code eq 'F0000';

	my $now = $ctx->{lo_ms};
	my $lead = lead_bound_ms($h, $now);
	my $p = layout_params($h, $h->{layout}) // { tick => 1 };
	my $tick = $p->{tick};
	my $allowed = allowed_lead_ms($h);
	if ($code eq '55S04')
	{
		# the state (or the floor a repair gives) beyond the layout, or the
		# layout's IDs of now below the old layout's last one
		return 'the state is beyond the new layout'
		  if !defined $lead && $reason_in->('state_beyond_layout', 'floor_beyond_layout', '');
		# (the view reads the clock again: by then it may have caught up)
		return undef if !$reason_in->('layout_below', '') || $m->{hi_layout} eq $h->{layout};
		return $lead > $allowed + max($h->{backward_ms}, $tick) - $slack_ms ?
		  'the new layout is below the last ID' : undef;
	}
	return $ctx->{repair} && !defined $lead ? 'the floor is beyond the layout' : undef
	  if $code eq '22003';
	return $ctx->{keeper_stopped} ? 'the keeper is stopped' : undef if $code eq '55S08';
	if ($code eq '22008' || $code eq '2200H')
	{
		# the clock before the layout's epoch, or past its last tick
		my $end = $p->{epoch} + (2**($p->{bits} - $p->{shift})) * $tick;
		return $code eq '22008' ? ($now < $p->{epoch} + $slack_ms ? 'the clock is before the epoch' : undef) :
		  ($ctx->{hi_ms} > $end - $slack_ms ? 'the layout ran out of time' : undef);
	}
	return undef if !defined $lead;
	if ($code eq '55S05')
	{
		return undef unless $m->{seen_ms} > $now;
		return $lead > $allowed + max($h->{backward_ms}, $tick) - $slack_ms ?
		  'the clock went back further than the policy waits' : undef;
	}
	if ($code eq '55S06')
	{
		my $wait = $m->{seen_ms} > $now ? max($h->{backward_ms}, $tick) : max($h->{backward_ms}, 1000);
		return $lead > $allowed + $wait - $slack_ms ?
		  'the node is further ahead than the policy waits' : undef;
	}
	# the next tick further than a call waits: none of the layouts played
	return $tick > 1000 - $slack_ms ? 'the tick is used up' : undef if $code eq '55S07';
	return undef;
}

sub max { return $_[0] > $_[1] ? $_[0] : $_[1]; }

# Judge the error a call ended with: a refusal the model allows is
# counted, one it does not is a violation, and so is an error that is no
# refusal of the node (nor a release's or repair's bad argument the model
# expects).  Returns the refusal's cause, or 'unjustified'.
sub judge
{
	my ($h, $err, $what, $ctx) = @_;
	my $e = error_of($err);
	if ($e->{timeout})
	{
		violation($h, "$what: a call hung: $e->{line}");
		return 'unjustified';
	}
	my $code = $e->{code};
	if (defined $code && !$refusal_codes{$code} && !is_cut($e) &&
		!($code eq '22003' && $ctx->{repair}) && !($code eq '22023' && defined $ctx->{stopped_at_ms}))
	{
		violation($h, "$what: an error that is no refusal: $e->{line}");
		return 'unjustified';
	}
	$e->{reason} = status_reason($ctx->{node} // $h->{node}, $ctx->{db})
	  if defined $code && $state_codes{$code};
	my $why = justified($h, $e, $ctx);
	note("history $h->{seed}: $what: refused ($e->{line}"
		  . (defined $e->{reason} && length $e->{reason} ? ", reason $e->{reason}" : '') . '): '
		  . ($why // 'without cause'));
	if (defined $why)
	{
		$h->{allowed}++;
		return $why;
	}
	$h->{unjustified}++;
	violation($h, "$what: a refusal the node knew enough to avoid, or with the wrong reason: $e->{line}"
		  . (defined $e->{reason} ? " (reason '$e->{reason}')" : ''));
	return 'unjustified';
}

# The context of a call made now on the primary (or on node, in db).
sub ctx_now
{
	my ($h, %extra) = @_;
	my $now = now_ms() + $h->{offset_ms};
	return { lo_ms => $now, hi_ms => $now, keeper_stopped => $h->{keeper_stopped} ? 1 : 0, %extra };
}

# One call (snowflake_nextval() unless sql) on node, judged: the IDs it
# gave checked, or its refusal.  Returns its output (undef if it failed),
# the refusal's cause and the error.
sub one_call
{
	my ($h, $node, $what, %opt) = @_;
	my $ctx = ctx_now($h, node => $node, db => $opt{db}, %{ $opt{ctx} // {} });
	my ($ret, $out, $err) = try_sql($node, $opt{sql} // 'SELECT snowflake_nextval()', 60, $opt{db});
	# the call may wait for the clock, within the policy
	$ctx->{hi_ms} = now_ms() + $h->{offset_ms};
	my $why;
	if ($ret == 0)
	{
		check_ids($h, [ [ grep { length } split /\n/, $out ] ], $what, $ctx) unless $opt{no_ids};
	}
	else
	{
		$why = judge($h, $err, $what, $ctx);
	}
	saw_clock($h, $ctx);
	return ($ret == 0 ? $out : undef, $why, $err);
}

# The model's view of which node this is: ok, or held back as a copy, as
# upgraded, as new, as inheriting another system's claim, as promoted with
# the worker id its primary gave up (%held); reason: the one reason the
# node must give (a hold seen before, kept; or a list of them), or any of
# the kind's.
sub set_identity
{
	my ($h, $identity, $reason) = @_;
	$h->{model}{identity} = $identity;
	$h->{model}{held_reason} = $reason;
	return;
}

# A call that must have been refused, by what the model says
sub must_refuse
{
	my ($h, $what) = @_;
	my $m = $h->{model};
	return "$what: the node generated with a setting rejected at start" if $m->{settings_bad};
	return "$what: the node generated with its worker id rejected" if $m->{worker_rejected};
	return "$what: the node generated under worker id " . configured_worker($h) . ', which its system has not claimed'
	  if held_unclaimed($h);
	return "$what: the node generated without the library preloaded" if !$m->{preloaded};
	return "$what: the node generated before it was told which node it is ($m->{identity})"
	  if $m->{identity} ne 'ok';
	return undef;
}

# Record IDs in the file outside the cluster, and check them: unique,
# above every ID before, increasing in a session, and no further ahead of
# the clock than the policy lets them be.
sub check_ids
{
	my ($h, $sessions, $what, $ctx) = @_;
	my $max_before = $h->{floor};
	my $max_now = $max_before;
	my $m = $h->{model};
	my $ahead = allowed_lead_ms($h);
	open my $fh, '>>', $h->{record} or die;
	for my $s (@$sessions)
	{
		my $prev = 0;
		if (@$s && (my $why = must_refuse($h, $what)))
		{
			violation($h, $why);
		}
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
			my $t = id_time_ms($h, $id, $h->{layout});
			violation($h, sprintf('%s: ID %s carries a time %d ms ahead of the clock, more than max_run_ahead_ms allows',
					$what, $id, $t - $ctx->{hi_ms}))
			  if defined $t && $ctx && $t - $ctx->{hi_ms} > $ahead + $slack_ms + 1000;
			$prev = $id;
			$max_now = $id if $id > $max_now;
		}
	}
	close $fh;
	$h->{issued_since_start} = 1 if $max_now > $max_before;
	$h->{floor} = $max_now;
	# the node's state is the largest ID, whatever layout it was made in
	if ($max_now > $m->{hi})
	{
		$m->{hi} = $max_now;
		$m->{hi_layout} = $h->{layout};
	}
	return;
}

# After a call: the clock the node read.
sub saw_clock
{
	my ($h, $ctx) = @_;
	$h->{model}{seen_ms} = $ctx->{hi_ms} if $ctx->{hi_ms} > $h->{model}{seen_ms};
	return;
}

# ---------------------------------------------------------------- steps

# Several sessions ask for IDs at once; COPY streams each ID to the client
# as it is made, so an ID handed out before a failure is recorded too.
# During the burst the clock may step, or a backend be killed.
sub burst
{
	my ($h, $node, %opt) = @_;
	my $nsess = 1 + int(rand(3));
	my $n = $opt{n} // pick(1, 10, 200, 2000);
	my $kind = pick('escape', 'escape', 'commit', 'rollback');
	my $during = $opt{during} // pick('nothing', 'nothing', 'nothing', 'clock', 'kill');
	my $step_ms = pick(-3, -30, -300, -3000, +50);
	# single IDs, or blocks: of a few, of many, or of a whole tick
	my $block = $opt{block} // pick(1, 1, 1, 2, 17, 300, 'capacity');
	my $form = $opt{form} // pick('block', 'series');
	my $db = pick(@{ $h->{dbs} });
	# an extension in a schema of its own is in one database: a second
	# database made after it has its own, of the current version
	$db = 'postgres' if $opt{schema};
	$block = 1 if $opt{single};
	$form = 'series' if $h->{layout} eq 'sonyflake';
	say_op($h, "burst $nsess x $n ($kind)" .
		  ($block eq '1' ? '' : " in blocks of $block ($form)") .
		  ($db eq 'postgres' ? '' : " in $db") .
		  ($during eq 'clock' ? ", clock ${step_ms} ms during it" :
		   $during eq 'kill' ? ', a backend killed during it' : ''));
	kind($h, $block eq '1' ? 'burst' : "$form-burst");
	kind($h, 'burst-clock-step') if $during eq 'clock';
	kind($h, 'burst-backend-kill') if $during eq 'kill';

	# every ID of a block is streamed and recorded, in ascending order
	my $nextval = $opt{schema} ? "$opt{schema}.snowflake_nextval()" : 'snowflake_nextval()';
	my $ids = "SELECT $nextval AS id FROM generate_series(1, $n)";
	if ($block ne '1')
	{
		my $capacity = capacity_sql();
		my $size = $block eq 'capacity' ? $capacity : "least($block, $capacity)";
		my $calls = "generate_series(1, greatest($n / $size, 1))";
		# the first of a block stands for first .. first + n - 1 only
		# where the sequence is the lowest field; sonyflake takes the series
		$ids = $form eq 'block' ?
		  "SELECT f + generate_series(0, s - 1) AS id FROM (SELECT snowflake_nextval_block(s) AS f, s FROM $calls, (SELECT $size AS s) z OFFSET 0) b" :
		  "SELECT snowflake_nextval_series(s) AS id FROM $calls, (SELECT $size AS s) z";
	}
	my $query = $kind eq 'commit' ?
	  "COPY (INSERT INTO t $ids RETURNING id) TO STDOUT" :
	  "COPY ($ids) TO STDOUT";
	$query = "BEGIN; $query; ROLLBACK" if $kind eq 'rollback';

	my $ctx = ctx_now($h, cut => $during eq 'kill');
	my @runs;
	for my $i (1 .. $nsess)
	{
		my ($out, $err) = ('', '');
		my $t = IPC::Run::timeout(60);
		my $run = IPC::Run::start(
			[ 'psql', '-X', '-q', '-A', '-t', '-v', 'VERBOSITY=verbose',
			  '-d', $node->connstr($db) . " application_name=torture_burst", '-c', $query ],
			'<', \undef, '>', \$out, '2>', \$err, $t);
		push @runs, [ $run, \$out, \$err, $t ];
	}
	if ($during eq 'clock')
	{
		select(undef, undef, undef, rand(0.05));
		$h->{offset_ms} += $step_ms;
		set_offset($node, $h->{offset_ms});
		$h->{faults}++;
		my $now = now_ms() + $h->{offset_ms};
		$ctx->{lo_ms} = $now if $now < $ctx->{lo_ms};
		# a wait that a step back prolongs may run out
		$ctx->{clock_stepped} = 1;
	}
	elsif ($during eq 'kill')
	{
		select(undef, undef, undef, rand(0.05));
		my (undef, $pids) = try_sql($node, "SELECT pid FROM pg_stat_activity WHERE application_name = 'torture_burst'", 10);
		my @p = grep { /^\d+$/ } split /\s+/, $pids;
		if (@p && kill 'KILL', $p[0])
		{
			$h->{faults}++;
			$ctx->{killed} = $p[0];
		}
	}
	my @sessions;
	my @failed;
	my $why;
	for my $r (@runs)
	{
		my ($run, $out, $err, $t) = @$r;
		my $ok = eval { $run->finish; };
		if (!$ok && $@ && $@ =~ /timeout/)
		{
			$run->kill_kill;
			violation($h, "burst: a call hung for 60 s");
		}
		elsif (!$ok)
		{
			push @failed, $$err;
		}
		push @sessions, [ grep { length } split /\n/, $$out ];
		my $end = now_ms() + $h->{offset_ms};
		$ctx->{hi_ms} = $end if $end > $ctx->{hi_ms};
	}
	# what the burst issued, and the clock it read, bound its own refusals
	check_ids($h, \@sessions, 'burst', $ctx);
	saw_clock($h, $ctx);
	# the node's reasons are read once it is back
	wait_restarted($h, $node, $ctx->{killed}) if $ctx->{killed};
	$why = judge($h, $_, 'burst', { %$ctx, node => $node, db => $db }) for @failed;
	crashed($h) if $ctx->{killed};
	# the operator takes the step the refusal's hint names, now and then
	follow_hint($h, $node, $why) if $why && ($opt{follow} || rand() < 0.5);
	return;
}

# A tick's capacity, in the layout in force; no block is larger
# (sonyflake's tick holds 256).  The custom layout's setting exists once the
# library is loaded.
sub capacity_sql
{
	return "(SELECT coalesce((SELECT 1 << seq_bits FROM snowflake_layouts() WHERE name = split_part(current_setting('snowflake.layout'), '\@', 1)), "
	  . "1 << current_setting('snowflake.custom_seq_bits', true)::int))";
}

# IDs for $ms of ticks, as fast as the node gives them (blocks of a whole
# tick, or series where the layout has none), so that a node whose policy
# lets it run ahead runs that far ahead of its clock.  They are too many
# to keep one by one: the highest is checked and kept as the floor.
sub run_ahead
{
	my ($h, $node, $ms) = @_;
	my $p = layout_params($h, $h->{layout}) // { tick => 1 };
	my $n = int($ms / $p->{tick}) + 1;
	my $cap = capacity_sql();
	my $sql = $h->{layout} eq 'sonyflake' ?
	  "SELECT max(id), count(*) FROM (SELECT snowflake_nextval_series(s) AS id FROM generate_series(1, $n), (SELECT $cap AS s) z) b" :
	  "SELECT max(f) + min(s) - 1, count(*) * min(s) FROM (SELECT snowflake_nextval_block(s) AS f, s FROM generate_series(1, $n), (SELECT $cap AS s) z OFFSET 0) b";
	my $ctx = ctx_now($h, node => $node);
	my ($ret, $out, $err) = try_sql($node, $sql);
	$ctx->{hi_ms} = now_ms() + $h->{offset_ms};
	if ($ret != 0)
	{
		judge($h, $err, 'running ahead', $ctx);
	}
	else
	{
		my ($max, $count) = split /\|/, $out;
		say_op($h, "$count IDs for $ms ms of ticks at once, the highest $max");
		if (my $why = must_refuse($h, 'running ahead'))
		{
			violation($h, $why);
		}
		violation($h, "running ahead: ID $max not above $h->{floor}, issued before it") if $max <= $h->{floor};
		open my $fh, '>>', $h->{record} or die;
		print $fh "$max\n";
		close $fh;
		$h->{issued_since_start} = 1;
		$h->{floor} = $max if $max > $h->{floor};
		if ($max > $h->{model}{hi})
		{
			$h->{model}{hi} = $max;
			$h->{model}{hi_layout} = $h->{layout};
		}
	}
	saw_clock($h, $ctx);
	return;
}

# The step a refusal's hint names, taken: it must release the refusal.
sub follow_hint
{
	my ($h, $node, $why) = @_;
	my $m = $h->{model};
	my $step;
	if ($why eq 'a setting rejected at start')
	{
		$step = 'hint-settings';
		say_op($h, 'hint: fix the snowflake.* settings and restart');
		$h->{layout} = $m->{hi_layout} if $h->{layout} eq 'broken';
		$h->{layout} = 'shardingsphere' if $h->{layout} eq 'broken';
		$m->{worker_bad} = 0;
		stop_node($h, $node, 'fast');
		start_or_violation($h, $node, $h->{offset_ms});
		# and on its standbys, which a reload of the rejected value left on
		# the one they had
		for my $sb (grep { defined } $h->{standby}, $h->{cascade})
		{
			write_settings($h, $sb);
			$sb->stop('fast', fail_ok => 1);
			start_standby($sb);
		}
		retired_after_fix($h, $node);
	}
	elsif ($why eq 'a worker id rejected')
	{
		# README's step: a worker id in range, and a reload
		$step = 'hint-settings';
		say_op($h, "hint: snowflake.worker_id = $h->{worker}, reload");
		$m->{worker_bad} = 0;
		for my $n (grep { defined } $node, $h->{standby}, $h->{cascade})
		{
			write_settings($h, $n);
			$n->reload;
			$n->{torture_worker_bad} = 0;
		}
		for (1 .. 100)
		{
			my (undef, $w) = try_sql($node, "SELECT current_setting('snowflake.worker_id')", 10);
			last if $w eq $h->{worker};
			select(undef, undef, undef, 0.1);
		}
		$m->{worker_rejected} = 0;
		retired_after_fix($h, $node);
	}
	elsif ($why =~ /new layout/)
	{
		$step = 'hint-layout';
		say_op($h, "hint: back to snowflake.layout = '$m->{hi_layout}', restart");
		$h->{layout} = $m->{hi_layout};
		stop_node($h, $node, 'fast');
		start_or_violation($h, $node, $h->{offset_ms});
	}
	elsif ($why =~ /the clock went back|further ahead than the policy/ && hint_raises($h))
	{
		$step = 'hint-clock';
		say_op($h, 'hint: raise snowflake.max_run_ahead_ms (to -1) and reload');
		$h->{ahead_ms} = -1;
		write_settings($h, $_) for grep { defined } $node, $h->{standby}, $h->{cascade};
		$_->reload for grep { defined } $h->{standby}, $h->{cascade};
		reload_and_wait($h, $node);
	}
	elsif ($why eq 'the keeper is stopped')
	{
		$step = 'hint-keeper';
		say_op($h, 'hint: the keeper runs again');
		wake_keeper($h);
	}
	elsif ($why eq 'a worker id this system has not claimed')
	{
		$step = 'claim';
		claim_in_force($h, $node, 'hint');
	}
	return unless $step;
	kind($h, $step) unless $step eq 'claim';
	# released: the next call generates, or is refused for another cause
	my (undef, $again, $err) = one_call($h, $node, "after the hint's step");
	violation($h, "the hint's step did not release the refusal ($why): " . error_of($err)->{line})
	  if defined $again && $again eq $why;
	return;
}

# A promoted standby whose own worker id was rejected, fixed now: if it is
# the one its primary gave up, it is held for that (worker_retired), and
# the step of that hint is taken.
sub retired_after_fix
{
	my ($h, $node) = @_;
	my $r = $h->{retired_pending};
	return if !$r || $h->{model}{worker_rejected};
	$h->{retired_pending} = undef;
	return unless $h->{worker} == $r->[0];
	set_identity($h, 'retired');
	one_call($h, $node, 'fixed, with the worker id its primary gave up');
	follow_retired_hint($h, $node, $r->[1]);
	return;
}

# Whether the clock's refusal names the step of raising
# snowflake.max_run_ahead_ms: where the last ID is further ahead of the
# clock than any setting lets the node run (a day), it names the clock
# instead.  The model's lead is the most the node's can be.
sub hint_raises
{
	my ($h) = @_;
	my $lead = lead_bound_ms($h, now_ms() + $h->{offset_ms});
	return defined $lead && $lead < $cap_ms - 1000;
}

sub clock_step
{
	my ($h, $node, $kind) = @_;
	$kind //= pick('small back', 'back', 'back', 'far back', 'far back', 'forward', 'home', 'glitch');
	$h->{faults}++;
	if ($kind eq 'glitch')
	{
		# far ahead and back, with no ID issued: nothing may be reserved,
		# even with a checkpoint taken meanwhile (no clock reading is a floor)
		my $checkpoint = rand() < 0.6;
		say_op($h, 'clock glitch: a day ahead for 0.3 s' . ($checkpoint ? ', a checkpoint meanwhile' : ''));
		kind($h, 'clock-glitch');
		set_offset($node, $h->{offset_ms} + 86_400_000);
		# catch_up: a walsender started from now on may run a day ahead
		$node->{torture_glitched} = 1;
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
	kind($h, $kind eq 'far back' ? 'clock-far-back' : $kind eq 'forward' ? 'clock-forward' :
		  $kind eq 'home' ? 'clock-home' : 'clock-back');
	set_offset($node, $h->{offset_ms});
	return;
}

# Reload a node and wait until a new session sees the settings written.
sub reload_and_wait
{
	my ($h, $node) = @_;
	$node->reload;
	my $want = "$h->{ahead_ms}|$h->{backward_ms}";
	for (1 .. 100)
	{
		# in ms, as written (current_setting() would say 5s for 5000)
		my ($ret, $out) = try_sql($node,
			"SELECT string_agg(setting, '|' ORDER BY name DESC) FROM pg_settings "
			  . "WHERE name IN ('snowflake.max_run_ahead_ms', 'snowflake.max_clock_backward_ms')", 10);
		return if $ret == 0 && $out eq $want;
		select(undef, undef, undef, 0.1);
	}
	return;
}

sub reload_settings
{
	my ($h, $node, $what) = @_;
	$what //= pick('worker', 'backward', 'ahead', 'ahead');
	$h->{worker} = pick(1, 2, 3) if $what eq 'worker';
	$h->{backward_ms} = pick(0, 10, 100, 2000) if $what eq 'backward';
	$h->{ahead_ms} = pick(-1, -1, 0, 50, 5000) if $what eq 'ahead';
	say_op($h, "reload: worker $h->{worker}, max_clock_backward_ms $h->{backward_ms}, max_run_ahead_ms $h->{ahead_ms}");
	kind($h, "reload-$what");
	write_settings($h, $node);
	reload_and_wait($h, $node);
	# README: a standby has its primary's clock policy (the worker id too)
	for my $sb (grep { defined } $h->{standby}, $h->{cascade})
	{
		write_settings($h, $sb);
		$sb->reload;
		# a worker id rejected at its start is fixed by a reload of a good
		# one, as README says (a good one is never replaced by a bad one)
		$sb->{torture_worker_bad} = 0 unless $h->{model}{worker_bad};
	}
	# the keeper takes the worker id a moment later
	select(undef, undef, undef, 0.3) if $what eq 'worker';
	# where this system claimed others, one not claimed holds the node back
	# until it is: claimed now and then at once, as a mesh's helper does
	claim_in_force($h, $node, 'reload') if held_unclaimed($h) && rand() < 0.5;
	return;
}

sub restart
{
	my ($h, $node, $how, $layout) = @_;
	$how //= pick('fast', 'immediate', 'hard kill', 'hard kill', 'keeper kill', 'keeper stop', 'layout', 'layout', 'worker');
	wake_keeper($h) unless $how eq 'keeper stop';
	$h->{faults}++;
	if ($how eq 'keeper kill' || $how eq 'keeper stop')
	{
		my $pid = keeper_pid($node);
		say_op($h, $how);
		kind($h, $how eq 'keeper kill' ? 'keeper-kill' : 'keeper-stop');
		return unless $pid;
		if ($how eq 'keeper kill')
		{
			kill 'KILL', $pid;
			crashed($h);
			# a child's SIGKILL restarts every process
			wait_restarted($h, $node, $pid);
		}
		else
		{
			kill 'STOP', $pid;
			$h->{keeper_stopped} = $pid;
		}
		return;
	}
	my $m = $h->{model};
	if ($how eq 'layout')
	{
		$h->{layout} = $layout // pick(@layouts);
		$h->{layout} = 'shardingsphere' if !$layout && rand() < 0.4;
		kind($h, $h->{layout} eq 'broken' ? 'layout-broken' : 'layout-change');
	}
	elsif ($how eq 'worker')
	{
		# a worker id out of range, rejected at start; fixed at a later
		# restart
		$m->{worker_bad} = !$m->{worker_bad};
		kind($h, 'worker-broken') if $m->{worker_bad};
	}
	say_op($h, "restart: $how" . ($how eq 'layout' ? " to $h->{layout}" :
								  $how eq 'worker' ? ($m->{worker_bad} ? ' with worker id 5000' : ' with the worker id fixed') : ''));
	if ($how eq 'hard kill')
	{
		kind($h, 'hard-kill');
		hard_kill($node);
		crashed($h);
	}
	else
	{
		kind($h, $how eq 'immediate' ? 'restart-immediate' : 'restart-fast');
		stop_node($h, $node, $how eq 'immediate' ? 'immediate' : 'fast');
	}
	start_or_violation($h, $node, $h->{offset_ms});
	retired_after_fix($h, $node);
	return;
}

# Stop a node; a fast stop records the exact last ID, unless nothing was
# issued since the last start (the file then keeps what it held).
sub stop_node
{
	my ($h, $node, $mode) = @_;
	# a stopped process would keep the server from shutting down
	wake_keeper($h);
	kill 'CONT', node_pids($node);
	$node->stop($mode, fail_ok => 1);
	if ($mode eq 'immediate')
	{
		crashed($h);
	}
	elsif ($h->{issued_since_start})
	{
		$h->{model}{unclean} = 0;
	}
	$h->{issued_since_start} = 0;
	return;
}

# Damage the state file while the node is down, or make it unwritable
# while it runs.
sub damage
{
	my ($h, $node, $how) = @_;
	$how //= pick('truncate', 'zero', 'torn', 'torn', 'unwritable');
	my $file = $node->data_dir . '/snowflake.state';
	say_op($h, "state file: $how");
	kind($h, "state-$how");
	$h->{faults}++;
	wake_keeper($h);
	if ($how eq 'unwritable')
	{
		# the node writes such a file anew beside it: nothing is refused
		chmod 0400, $file if -f $file;
		return;
	}
	chmod 0600, $file if -f $file;
	stop_node($h, $node, 'immediate');
	if (-f $file && $how eq 'torn' && -s $file == 1024)
	{
		# the newest record stays whole: nothing is lost, nothing refused.
		# A file not written since the last tear is torn there again (a
		# crash can tear only the slot being written), which it already is.
		my $digest = Digest::MD5::md5_hex(slurp_file($file));
		tear_state_file($file) unless ($h->{torn_digest} // '') eq $digest;
		$h->{torn_digest} = Digest::MD5::md5_hex(slurp_file($file));
	}
	elsif (-f $file)
	{
		open my $fh, '+<', $file or die "cannot open $file: $!";
		binmode $fh;
		if ($how eq 'truncate') { truncate $fh, 0; }
		else { print $fh "\0" x 1024; }
		close $fh;
		$h->{model}{file_broken} = 1;
	}
	start_or_violation($h, $node, $h->{offset_ms});
	return;
}

# A damaged file must be refused; the operator then repairs it above the
# largest ID it knows of, the step the refusal's hint names.
sub repair_if_refused
{
	my ($h, $node) = @_;
	my $m = $h->{model};
	return unless $m->{file_broken} && $m->{preloaded} && !$m->{settings_bad} && $m->{identity} eq 'ok';
	my $ctx = ctx_now($h, repair => 1, node => $node);
	my ($ret, $out, $err) = try_sql($node, 'SELECT snowflake_nextval()');
	if ($ret == 0)
	{
		violation($h, "a damaged state file was not refused: it issued $out");
		return;
	}
	# the hint of a damaged file (XX001, state_damaged) names the repair
	my $why = judge($h, $err, 'damaged state file', $ctx);
	return unless $why eq 'the state file is damaged';
	say_op($h, "repair above $h->{floor}");
	kind($h, 'repair');
	($ret, $out, $err) = try_sql($node, "SELECT snowflake_repair_state($h->{floor})");
	# a value far ahead of the clock (22023) is refused as a likely typo;
	# this operator knows it is the largest ID issued, the clock is what is
	# behind
	if ($ret != 0 && (error_of($err)->{code} // '') eq '22023')
	{
		say_op($h, "repair above $h->{floor}, forced: the clock is behind it");
		($ret, $out, $err) = try_sql($node,
			"SELECT snowflake_repair_state($h->{floor}, force => true)");
	}
	if ($ret == 0)
	{
		$m->{file_broken} = 0;
		# the repaired state is the floor given, or what the node held,
		# and the damaged file took the layout it was in with it: the new
		# file is the layout's in force, whatever layout made the floor
		$m->{hi_layout} = $h->{layout};
		unclean($h);
	}
	else
	{
		judge($h, $err, 'repair', $ctx);
	}
	return;
}

sub standby_conf
{
	my ($h, $sb) = @_;
	# few or no replication slots (and origins): replay of the extension's
	# records needs none (a subscription on the primary needs one: its
	# commits name their origin, see subscription_op)
	my $slots = pick(0, 1, 10);
	$slots = 0 if $h->{force}{'standby-few-slots'};
	$slots = 1 if $slots == 0 && has_subscription($h);
	$sb->{torture_slots} = $slots;
	$sb->append_conf('postgresql.conf', "max_replication_slots = $slots\n"
		  . ($sb->pg_version >= 18 ? "max_active_replication_origins = $slots\n" : ''));
	kind($h, 'standby-few-slots') if $slots < 10;
	return $slots;
}

# A base backup, taken without a slot (a promoted standby may have none
# to spare); false if it failed, which the history reports.
sub take_backup
{
	my ($h, $from, $name) = @_;
	my ($out, $err) = ('', '');
	my $ok = eval {
		IPC::Run::run(
			[ 'pg_basebackup', '-D', $from->backup_dir . "/$name", '-h', $from->host, '-p', $from->port,
			  '--checkpoint', 'fast', '--no-sync', '--no-slot' ],
			'<', \undef, '>', \$out, '2>', \$err, IPC::Run::timeout(120));
	};
	violation($h, "a base backup of a running node failed: $err $@") unless $ok;
	return $ok;
}

sub has_subscription
{
	my ($h) = @_;
	return 0 unless $h->{pub};
	my (undef, $has) = try_sql($h->{node}, "SELECT count(*) FROM pg_subscription WHERE subname = 's'");
	return $has && $has ne '0';
}

# A streaming standby of a node, from a base backup of it.
sub make_standby
{
	my ($h, $from, $what) = @_;
	my $name = "b$h->{seed}_" . $h->{backup}++;
	# a standby takes connections once it is consistent
	wait_up($from);
	take_backup($h, $from, $name) or die "no base backup of the node\n";
	my $sb = PostgreSQL::Test::Cluster->new("sb$h->{seed}_$h->{backup}");
	$sb->init_from_backup($from, $name, has_streaming => 1);
	# the backup copies the state file as it is: a damaged one stays
	# damaged on the standby (replay does not rewrite a file it cannot
	# trust), until a repair there
	$sb->{torture_file_broken} = $from == $h->{node} ? $h->{model}{file_broken} : ($from->{torture_file_broken} // 0);
	my $slots = standby_conf($h, $sb);
	my $offset = pick(0, -2000, -3_600_000);
	$sb->{torture_offset_ms} = $offset;
	write_settings($h, $sb);
	set_offset($sb, $offset);
	start_standby($sb);
	say_op($h, "$what: base backup, start replaying, max_replication_slots = $slots, clock $offset ms");
	return $sb;
}

# Wait until a standby has replayed what its upstream has flushed now.
# Returns whether it did, within 30 s (a deadline, not a count of tries:
# on a busy machine each try is slow).
#
# A walsender that started while its server's clock was a day ahead (a
# glitch: the old one ended on "replication timeout" and the standby
# reconnected at once) was seen on 16 behind a standby that waited, before
# the target became the flush position (below); as a fallback, after 5 s
# a walsender of an upstream that
# had such a glitch, serving this standby, behind, and started under a
# clock ahead of the present, is ended (the standby reconnects), said in
# the log.  Anything else that keeps the standby behind is reported with
# what both servers show.
sub catch_up
{
	my ($up, $sb) = @_;
	# a walsender sends only what its server flushed, and a primary's
	# walwriter flushes partial pages by the wall clock, which a glitch
	# set a day ahead: WAL written since (the target, were it the write
	# position) may wait unflushed for a day.  A commit flushes it all.
	try_sql($up, 'SELECT CASE WHEN pg_is_in_recovery() THEN 0 ELSE pg_catalog.txid_current() END', 10);
	my (undef, $lsn) = try_sql($up, 'SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_flush_lsn() END');
	return 1 unless $lsn;
	my $start = time;
	my $nudged = 0;
	while (1)
	{
		my (undef, $done) = try_sql($sb, "SELECT pg_last_wal_replay_lsn() >= '$lsn'", 10);
		return 1 if $done eq 't';
		if (!$nudged && $up->{torture_glitched} && time > $start + 5)
		{
			$nudged = 1;
			my $name = $sb->name;
			my (undef, $ended) = try_sql($up,
				"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_replication WHERE application_name = '$name' AND sent_lsn < '$lsn' AND backend_start > now()", 10);
			note("catch_up: $ended walsender(s) of " . $up->name . " started under a clock ahead of now, ended")
			  if $ended;
		}
		if (time > $start + 30)
		{
			for my $n ($up, $sb)
			{
				for my $q ('SELECT pid, backend_type, backend_start, wait_event FROM pg_stat_activity',
					'SELECT pid, backend_start, sent_lsn, flush_lsn, replay_lsn, reply_time FROM pg_stat_replication',
					'SELECT pid, status, flushed_lsn, latest_end_lsn FROM pg_stat_wal_receiver',
					'SELECT now(), CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END')
				{
					my (undef, $o, $e) = try_sql($n, $q, 10);
					diag("catch_up, " . $n->name . ": $q\n$o$e");
				}
			}
			return 0;
		}
		select(undef, undef, undef, 0.1);
	}
}

sub standby_op
{
	my ($h, $node, $how) = @_;
	wake_keeper($h);
	$h->{faults}++;
	if (!$h->{standby})
	{
		$h->{standby} = make_standby($h, $node, 'standby');
		kind($h, 'standby');
		return unless $how;
		# the standby catches up before the operation asked for
		catch_up($node, $h->{standby});
	}
	my $sb = $h->{standby};
	$how //= pick('checkpoint', 'crash', 'kill backend', 'cascade', 'promote', 'promote', 'worker-retired');
	return worker_retired($h, $node) if $how eq 'worker-retired';
	if ($how eq 'cascade' || ($how eq 'promote-cascade' && !$h->{cascade}))
	{
		$h->{cascade} = make_standby($h, $sb, 'cascading standby of the standby') unless $h->{cascade};
		kind($h, 'cascade');
		return if $how eq 'cascade';
	}
	if ($how eq 'checkpoint')
	{
		say_op($h, 'standby: checkpoint on both');
		kind($h, 'standby-checkpoint');
		try_sql($node, 'CHECKPOINT');
		try_sql($sb, 'CHECKPOINT');
	}
	elsif ($how eq 'crash')
	{
		say_op($h, 'standby: hard kill and restart');
		kind($h, 'standby-crash');
		hard_kill($sb);
		start_standby($sb);
	}
	elsif ($how eq 'kill backend')
	{
		say_op($h, 'standby: a backend killed');
		kind($h, 'standby-backend-kill');
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
		$pid ? wait_restarted($h, $sb, $pid) : wait_up($sb);
		# a standby refuses to generate, and says why
		my ($ret, $out, $err) = try_sql($sb, 'SELECT snowflake_nextval()');
		if ($ret == 0)
		{
			violation($h, "a standby generated $out");
		}
		elsif ($h->{model}{preloaded})
		{
			# a standby with its layout rejected at its start says that
			# first; one held back says its hold (its primary's, or its own
			# worker id that its primary gave up); the others are standbys
			local $h->{model}{settings_bad} = settings_rejected($sb->{torture_layout} // '');
			judge($h, $err, 'standby', ctx_now($h, standby => 1, node => $sb, retired => standby_retired($sb)));
		}
	}
	else
	{
		my $cascade = $how eq 'promote-cascade';
		my $new = $cascade ? $h->{cascade} : $sb;
		say_op($h, 'standby: the primary dies, the ' . ($cascade ? 'cascading standby' : 'standby') . ' is promoted');
		kind($h, $cascade ? 'promote-cascade' : 'promote');
		kind($h, 'second-promotion') if $h->{promotions}++;
		wait_up($new);
		if (rand() < 0.5)
		{
			catch_up($node, $sb);
			catch_up($sb, $h->{cascade}) if $cascade;
		}
		hard_kill($node);
		if ($cascade)
		{
			$sb->stop('immediate', fail_ok => 1);
			$h->{standby} = undef;
		}
		my ($pout, $perr) = ('', '');
		eval {
			IPC::Run::run([ 'pg_ctl', '-D', $new->data_dir, '-w', 'promote' ],
				'<', \undef, '>', \$pout, '2>', \$perr, IPC::Run::timeout(120));
		};
		wait_primary($new) or violation($h, "the standby did not leave recovery: $perr");
		# the promise now: above every ID of the old primary that reached it
		my (undef, $reached) = try_sql($new, 'SELECT coalesce(max(id), 0) FROM t');
		$h->{seen} = {};
		$h->{floor} = $reached || 0;
		$h->{offset_ms} = $new->{torture_offset_ms};
		adopt_settings($h, $new);
		# configured with the worker id its primary gave up, it refuses
		my $retired = $new->{torture_retired};
		set_identity($h, 'retired') if $retired && $h->{worker} == $retired->[0] && !$h->{model}{worker_rejected};
		# with its worker id rejected it has none: fixed by a reload to the
		# one given up, it is held then
		$h->{retired_pending} = $retired && $h->{model}{worker_rejected} ? $retired : undef;
		# what the old primary may have reserved bounds what it replayed
		unclean($h);
		$h->{issued_since_start} = 0;
		if ($cascade)
		{
			$h->{cascade} = undef;
		}
		else
		{
			# a cascade of it goes on following it, now a standby of the primary
			$h->{standby} = $h->{cascade};
			$h->{cascade} = undef;
		}
		$h->{node} = $new;
		$h->{model}{file_broken} = $new->{torture_file_broken} // 0;
		# refusals there are judged as the primary's: it is that node now
		one_call($h, $new, 'first call after promotion');
		follow_retired_hint($h, $new, $retired->[1]) if $h->{model}{identity} eq 'retired';
	}
	return;
}

# The primary moves to another worker id (a reload, README's remedy for a
# clash), and claims it now and then; its standby's own configuration keeps
# the old one.  The standby says so once it has replayed the change
# (held_claimed, worker_retired), and promoted it refuses (55S03) until its
# snowflake.worker_id is the new one: never an ID under the worker id the
# primary gave up.
sub worker_retired
{
	my ($h, $node) = @_;
	my $m = $h->{model};
	if ($m->{settings_bad} || $m->{file_broken} || !$m->{preloaded} || $m->{identity} ne 'ok' ||
		!defined((one_call($h, $node, 'worker-id change: before it'))[0]))
	{
		say_op($h, 'worker-id change: skipped, the node cannot generate now');
		return;
	}
	kind($h, 'worker-retired');
	my $sb = $h->{standby};
	catch_up($node, $sb);
	my $old = $h->{worker};
	my $new = pick(grep { $_ != $old } 1, 2, 3);
	my $claim = rand() < 0.5;
	say_op($h, "worker id $old -> $new on the primary, reloaded" . ($claim ? ' and claimed' : '')
		  . "; its standbys keep $old in their own configuration");
	$h->{worker} = $new;
	write_settings($h, $node);
	reload_and_wait($h, $node);
	for my $s (grep { defined } $sb, $h->{cascade})
	{
		write_settings($h, $s, worker => $old);
		$s->{torture_retired} = [ $old, $new ];
	}
	# this system claimed others: the new one is claimed, its step
	if (unclaimed($h, $new))
	{
		claim_in_force($h, $node, 'worker-id change');
		$claim = 0;
	}
	# the keeper applies it: the primary's worker id in force is the new one
	my $w = '';
	for (1 .. 100)
	{
		(undef, $w) = try_sql($node, 'SELECT snowflake_worker_id()', 10);
		last if $w eq $new;
		select(undef, undef, undef, 0.1);
	}
	violation($h, "worker-id change: the primary's worker id in force is '$w', not $new") unless $w eq $new;
	burst($h, $node, during => 'nothing');
	if ($claim)
	{
		claimed($h)
		  if defined((one_call($h, $node, 'claim', sql => 'SELECT worker_id FROM snowflake_claim_worker()',
				no_ids => 1))[0]);
	}
	# the standby says so, having replayed it; one whose own setting was
	# rejected at its start says that first (the first state that holds),
	# as its calls do: it has no worker id of its own in force that its
	# primary could have given up
	if (!catch_up($node, $sb))
	{
		# the history's fault, not the node's: the standby lost its stream
		violation($h, 'worker-id change: the standby did not replay its primary\'s WAL in 30 s (the checker keeps wal_keep_size for it)');
		return;
	}
	my $want = settings_rejected($sb->{torture_layout} // '') ? 'disabled/layout_unusable' :
	  standby_retired($sb) ? 'held_claimed/worker_retired' : 'standby/in_recovery';
	my $shown = '';
	for (1 .. 100)
	{
		(undef, $shown) = try_sql($sb, "SELECT state || '/' || coalesce(reason, '') FROM snowflake_status", 10);
		last if $shown eq $want;
		select(undef, undef, undef, 0.1);
	}
	violation($h, "worker-id change: the standby that replayed it shows '$shown', not $want")
	  unless $shown eq $want;
	# failover: the promoted standby refuses, and its hint's step is taken
	# (standby_op)
	standby_op($h, $node, 'promote');
	return;
}

# Whether a standby runs with the worker id its primary gave up: one its
# start did not reject (a rejected one is no worker id at all).
sub standby_retired
{
	my ($sb) = @_;
	my $retired = $sb->{torture_retired} or return 0;
	return 0 if worker_rejected($sb->{torture_layout} // '', $sb->{torture_worker_bad});
	return ($sb->{torture_settings}{worker} // -1) == $retired->[0] ? 1 : 0;
}

# A node promoted with the worker id its primary gave up refuses (judged
# as the first call after the promotion); the hint's step: the worker id
# the primary moved to, reloaded.  Then it generates, under that one.
sub follow_retired_hint
{
	my ($h, $node, $new) = @_;
	say_op($h, "hint: snowflake.worker_id = $new, reload");
	$h->{worker} = $new;
	write_settings($h, $node);
	$node->reload;
	for (1 .. 100)
	{
		my (undef, $w) = try_sql($node, "SELECT current_setting('snowflake.worker_id')", 10);
		last if $w eq $new;
		select(undef, undef, undef, 0.1);
	}
	set_identity($h, 'ok');
	my ($out) = one_call($h, $node, "after the hint's step");
	if (defined $out)
	{
		my (undef, $w) = try_sql($node, "SELECT (snowflake_decode($out)).worker_id");
		violation($h, "after the hint's step, an ID of worker $w, not $new") if $w ne $new;
	}
	return;
}

# A subscription beside the node, to a publisher of its own: added,
# dropped, or dropped while the publisher hangs (DROP SUBSCRIPTION then
# waits on it, holding the lock on pg_replication_origin) with IDs issued
# meanwhile.  None of it may stop or disturb the IDs.
sub subscription_op
{
	my ($h, $node, $want) = @_;
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
	if (!$has || ($want && $want eq 'subscription-add'))
	{
		return if $has;
		# a standby replaying a subscriber's commits needs a slot per
		# origin: the operator gives one to a standby that has none
		for my $sb (grep { $_ && !$_->{torture_slots} } $h->{standby}, $h->{cascade})
		{
			say_op($h, 'a standby gets a replication slot for the subscription\'s origin');
			$sb->append_conf('postgresql.conf', "max_replication_slots = 1\n"
				  . ($sb->pg_version >= 18 ? "max_active_replication_origins = 1\n" : ''));
			$sb->{torture_slots} = 1;
			$sb->stop('fast', fail_ok => 1);
			start_standby($sb);
		}
		say_op($h, 'subscription: added beside the node');
		kind($h, 'subscription-add');
		try_sql($node, 'CREATE TABLE IF NOT EXISTS r (k int PRIMARY KEY)');
		try_sql($node, "CREATE SUBSCRIPTION s CONNECTION '" . $pub->connstr
			  . " dbname=postgres' PUBLICATION p WITH (copy_data = false)");
		try_sql($pub, 'INSERT INTO r SELECT FROM generate_series(1, 10)');
		return unless $want;
	}
	if ($want ? $want eq 'subscription-drop' : rand() < 0.5)
	{
		say_op($h, 'subscription: dropped');
		kind($h, 'subscription-drop');
		try_sql($node, 'DROP SUBSCRIPTION s');
		return;
	}
	say_op($h, 'subscription: its publisher hangs, DROP SUBSCRIPTION waits on it, IDs meanwhile');
	kind($h, 'subscription-hung');
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
		one_call($h, $node, 'while DROP SUBSCRIPTION hung',
			sql => 'COPY (SELECT snowflake_nextval() FROM generate_series(1, 5000)) TO STDOUT');
		select(undef, undef, undef, 0.4);
	}
	kill 'CONT', @pids;
	eval { $drop->finish; };
	return;
}

# A copy of the node (or the node upgraded, or restored from a dump) must
# refuse before its first ID under the source's worker id, saying why.
# Returns the refusal's cause.
sub expect_held_back
{
	my ($h, $node, $what) = @_;
	my $ctx = ctx_now($h, node => $node);
	my ($ret, $out, $err) = try_sql($node, 'SELECT snowflake_nextval()');
	if ($ret == 0)
	{
		violation($h, "$what: generated $out before it was told which node it is");
		return 'generated';
	}
	return judge($h, $err, $what, $ctx);
}

# Whether the history plays an event kind now: forced (once), or drawn.
sub wanted
{
	my ($h, $k, $p) = @_;
	return delete $h->{want}{$k} || rand() < $p;
}

# One of the node's files removed from a data directory held back, while
# the server is stopped (snowflake.identity or snowflake.state: each holds
# the whole record), and the server started again: it is held back for the
# same reason.  Or, from a copy, both: it is held back as one that may be a
# copy (the extension ran there: its sign in the catalog stays), whatever
# install script runs.
sub remove_held_file
{
	my ($h, $node, $what) = @_;
	my $reason = status_reason($node);
	if (!defined $reason || $reason eq '')
	{
		return violation($h, "$what: held back, but snowflake_status gives no reason");
	}
	my $copy = $what eq 'clone' || $what eq 'pitr';
	my $file = pick('snowflake.identity', 'snowflake.state', $copy ? ('both', 'both') : ());
	say_op($h, "$what: " . ($file eq 'both' ? 'both files' : $file)
		  . " removed while the server is stopped (held back: $reason), started again");
	kind($h, 'held-file-removed');
	$h->{faults}++;
	$node->stop('fast', fail_ok => 1);
	unlink map { $node->data_dir . "/$_" } $file eq 'both' ? ('snowflake.identity', 'snowflake.state') : ($file);
	start_node($h, $node, $h->{offset_ms}) && wait_primary($node)
	  or return violation($h, "$what: the server did not start again");
	local $h->{model}{held_reason} = $file eq 'both' ? 'files_removed' : $reason;
	expect_held_back($h, $node, "$what, $file removed");
	if ($file eq 'both')
	{
		# no install script releases it
		say_op($h, "$what: CREATE EXTENSION in a new database, DROP and CREATE EXTENSION again");
		my ($ret, $out, $err) = try_sql($node, 'CREATE DATABASE held_again');
		($ret, $out, $err) = try_sql($node, 'CREATE EXTENSION snowflake', 30, 'held_again') if $ret == 0;
		($ret, $out, $err) = try_sql($node, 'DROP EXTENSION snowflake CASCADE; CREATE EXTENSION snowflake')
		  if $ret == 0;
		violation($h, "$what: the install scripts failed: $err") if $ret != 0;
		expect_held_back($h, $node, "$what, both files removed, the extension created again");
	}
	return;
}

# The time the lost node stopped, as its operator gives it: the latest its
# clock read (a clock stepped back since its last IDs reads less).
sub lost_node_time
{
	my ($h) = @_;
	return max(now_ms() + $h->{offset_ms}, $h->{model}{seen_ms});
}

sub timestamptz_of
{
	my ($ms) = @_;
	return sprintf("to_timestamp(%d / 1000.0)", $ms);
}

# The record of a release cannot be written: $PGDATA and the node's files
# read-only for the server's account, or snowflake.state made a directory.
# The release must fail and change nothing: the node refuses as before,
# for the same reason, also once the fault is undone.
sub release_write_fails
{
	my ($h, $node, $what, $sql) = @_;
	my $dir = $node->data_dir;
	my $how = pick('read-only', 'directory');
	my $reason = status_reason($node) // '';
	say_op($h, "$what: the release while its record cannot be written ("
		  . ($how eq 'read-only' ? 'the data directory and the files read-only' : 'snowflake.state a directory')
		  . "), then again once it can");
	kind($h, 'release-write-fails');
	$h->{faults}++;
	my @files = grep { -f "$dir/$_" } 'snowflake.state', 'snowflake.identity';
	if ($how eq 'read-only')
	{
		chmod 0400, map { "$dir/$_" } @files;
		chmod 0500, $dir;
	}
	else
	{
		rename "$dir/snowflake.state", "$dir/snowflake.state.aside";
		mkdir "$dir/snowflake.state";
	}
	my ($ret, $out, $err) = try_sql($node, $sql);
	my $e = error_of($err);
	violation($h, "$what: released ($out) though its record could not be written") if $ret == 0;
	violation($h, "$what: the failed write ended the session: $e->{line}") if $ret != 0 && is_cut($e);
	local $h->{model}{held_reason} = $reason;
	expect_held_back($h, $node, "$what, after a release that could not be written");
	if ($how eq 'read-only')
	{
		chmod 0700, $dir;
		chmod 0600, map { "$dir/$_" } @files;
	}
	else
	{
		rmdir "$dir/snowflake.state";
		rename "$dir/snowflake.state.aside", "$dir/snowflake.state";
	}
	expect_held_back($h, $node, "$what, the fault undone, before the release");
	return;
}

# A node that replaces a lost one (a copy, a restore, an upgrade, a dump
# restored) released as its hint says, and judged: the floor it continues
# above must cover every ID the lost node issued, all of them recorded
# ($h->{floor}).  how: stopped_at (the lost node's time, lost_node_time),
# above (an ID), old (the old cluster's data directory).  The node is then
# the history's, and the model's state is the floor.  Returns whether it
# was released.
sub release
{
	my ($h, $node, $what, %how) = @_;
	my $m = $h->{model};
	my $prefix = $how{prefix} // '';
	my $sql = sub {
		my (%a) = @_;
		return "${prefix}SELECT snowflake.snowflake_confirm_node("
		  . join(', ', map { "$_ => $a{$_}" } sort keys %a) . ')';
	};
	my %args = defined $how{old} ? (old_data_directory => "'$how{old}'") :
	  defined $how{stopped_at} ? (stopped_at => timestamptz_of($how{stopped_at})) :
	  (above => $how{above});
	# without a floor: refused, and nothing changes
	if (rand() < 0.2)
	{
		my ($ret, $out, $err) = try_sql($node, $sql->());
		my $code = error_of($err)->{code} // '';
		violation($h, "$what: released without a floor") if $ret == 0;
		violation($h, "$what: a release without a floor refused with " . error_of($err)->{line} . ', not 22004')
		  if $ret != 0 && $code ne '22004';
	}
	release_write_fails($h, $node, $what, $sql->(%args)) if wanted($h, 'release-write-fails', 0.15);
	say_op($h, "$what: released, " . join(', ', map { "$_ => $args{$_}" } sort keys %args));
	my $ctx = ctx_now($h, node => $node, stopped_at_ms => $how{stopped_at});
	my ($ret, $out, $err) = try_sql($node, $sql->(%args));
	if ($ret != 0 && defined $how{stopped_at})
	{
		# a stop time a day ahead of this server's clock is refused
		# (22023): the operator gives the highest ID then
		my $why = judge($h, $err, "$what: release", $ctx);
		return 0 if $why eq 'unjustified';
		%args = (above => $h->{floor});
		say_op($h, "$what: released, above => $h->{floor}");
		($ret, $out, $err) = try_sql($node, $sql->(%args));
	}
	if ($ret != 0)
	{
		violation($h, "$what: the hint's step failed: " . error_of($err)->{line});
		return 0;
	}
	$h->{releases}++;
	# the claim of the worker id it runs as moves to this system
	claimed($h) if defined $m->{rows}{ $h->{worker} };
	violation($h, "$what: released above $out, not above ID $h->{floor} the lost node issued")
	  if $out !~ /^\d+$/ || $out < $h->{floor};
	set_identity($h, 'ok');
	$h->{node} = $node;
	# IDs continue above the floor it says, its state, in the layout in force
	if ($out =~ /^\d+$/)
	{
		$h->{floor} = $out if $out > $h->{floor};
		$m->{hi} = $out if $out > $m->{hi};
	}
	$m->{hi_layout} = $h->{layout};
	$h->{issued_since_start} = 0;
	unclean($h);
	return 1;
}

# How the operator releases a node that replaces a lost one: the time the
# lost node stopped, or its highest ID (where the node's IDs of now are in
# another layout than its last ones, the time says nothing of those).
sub release_lost
{
	my ($h, $node, $what, $lost_ms, $by_time) = @_;
	my $m = $h->{model};
	return release($h, $node, $what, above => $h->{floor})
	  if (!$by_time && rand() < 0.4) || $m->{hi_layout} ne $h->{layout};
	return release($h, $node, $what, stopped_at => $lost_ms);
}

# The node's life beyond one server: pg_upgrade (the library preloaded
# during it, or only after), a dump restored into a new cluster with the
# same worker id, a clone started standalone, a restore to a point in time
# (the end of a base backup; a target time from an archive; an archive
# that lacks its last segment).  Each new server must refuse until the
# documented step, with the reason it detected; a clone either gets a
# worker id of its own (the source goes on) or replaces its source (the
# source dies first, and the clone is released above every ID it issued).
sub lifecycle_op
{
	my ($h, $node, $how, $first, %opt) = @_;
	$how //= pick('pg_upgrade', 'pg_upgrade-without-preload', 'dump-restore', 'clone', 'pitr',
		pick('pitr-target', 'archive-lost-segment'));
	my $name = "l$h->{seed}_" . $h->{backup}++;
	my $conf = "include_if_exists = 'torture.conf'\nrestart_after_crash = on\n$KEEP_WAL";
	my $m = $h->{model};
	my ($ret, $out, $err);
	wake_keeper($h);
	$h->{faults}++;
	# the operator does this to a node that works
	if ($m->{settings_bad} || $m->{file_broken} || !$m->{preloaded} || $m->{identity} ne 'ok' ||
		!defined((one_call($h, $node, "$how: before it"))[0]))
	{
		say_op($h, "$how: skipped, the node cannot generate now");
		return;
	}
	kind($h, $how);
	return archive_restore($h, $node, $how) if $how eq 'pitr-target' || $how eq 'archive-lost-segment';
	if ($how eq 'clone' || $how eq 'pitr')
	{
		my $replace = $opt{replace} // rand() < 0.5;
		# its first start may be with a setting it rejects or with no
		# worker id, fixed after; recovery uses up its backup_label and
		# recovery.signal at that start all the same
		$first //= pick('', '', '', 'rejected', 'unset');
		my %first = (rejected => [ "snowflake.tpyo = 1", 'F0000' ],
			# held back as a copy first: the hint's first step is a
			# worker id of its own
			unset => [ "snowflake.worker_id = -1", '55S01' ]);
		say_op($h, ($how eq 'clone' ? 'clone: a base backup started as a primary' :
					'PITR: a base backup restored to its end, started as a primary') .
			   ($replace ? ', replacing the node' : ', given worker 99') .
			   (!$first ? '' : $first eq 'rejected' ? ', first started with a setting it rejects' :
				 ', first started with no worker id'));
		take_backup($h, $node, $name) or return;
		my $copy = PostgreSQL::Test::Cluster->new($name);
		$copy->init_from_backup($node, $name);
		if ($how eq 'pitr')
		{
			$copy->append_conf('postgresql.conf',
				"restore_command = 'false'\nrecovery_target = 'immediate'\nrecovery_target_action = 'promote'\n");
			open my $fh, '>', $copy->data_dir . '/recovery.signal' or die;
			close $fh;
		}
		$copy->append_conf('postgresql.conf', "$first{$first}[0]\n") if $first;
		# the copy is judged as a copy; the node goes on as it was.  A base
		# backup started as a primary has its backup_label; restored, its
		# recovery.signal too (and it is a new directory)
		set_identity($h, 'copy', $how eq 'clone' ? [qw(backup_label other_directory)] : undef);
		my $started = start_node($h, $copy, $h->{offset_ms}) && wait_primary($copy);
		if (!$started)
		{
			set_identity($h, 'ok');
			return violation($h, "$how: the copy did not start");
		}
		if ($first)
		{
			kind($h, 'copy-first-start');
			($ret, $out, $err) = try_sql($copy, 'SELECT snowflake_nextval()');
			return violation($h, "$how: generated $out at its first start, with $first{$first}[0]")
			  if $ret == 0;
			my $code = error_of($err)->{code} // '';
			violation($h, "$how: at its first start, with $first{$first}[0], refused for another reason: "
				  . error_of($err)->{line})
			  unless $code eq $first{$first}[1];
			# the fix: the line goes, and a restart or a reload takes it
			my $file = $copy->data_dir . '/postgresql.conf';
			my $text = slurp_file($file);
			$text =~ s/^\Q$first{$first}[0]\E\n//m;
			open my $fh, '>', $file or die "cannot write $file: $!";
			print $fh $text;
			close $fh;
			if ($first eq 'rejected')
			{
				$copy->stop('fast', fail_ok => 1);
				start_node($h, $copy, $h->{offset_ms}) && wait_primary($copy)
				  or return violation($h, "$how: the copy did not start again");
			}
			else
			{
				$copy->reload;
				for (1 .. 100)
				{
					my (undef, $w) = try_sql($copy, "SELECT current_setting('snowflake.worker_id')");
					last if $w eq $h->{worker};
					select(undef, undef, undef, 0.1);
				}
			}
		}
		expect_held_back($h, $copy, $how);
		remove_held_file($h, $copy, $how) if wanted($h, 'held-file-removed', 0.15);
		if (!$replace)
		{
			# the hint's first step: a worker id of its own (claimed too,
			# where its system claimed others)
			write_settings($h, $copy, worker => 99);
			$copy->reload;
			select(undef, undef, undef, 0.3);
			set_identity($h, 'ok');
			local $h->{worker} = 99;
			local $m->{worker_bad} = 0;
			local $m->{worker_rejected} = 0;
			local $h->{model}{claims} = { %{ $m->{claims} } };
			if (unclaimed($h, 99))
			{
				expect_held_back($h, $copy, "$how with worker 99, unclaimed");
				claim_in_force($h, $copy, "$how with worker 99");
			}
			my $ctx = ctx_now($h, node => $copy);
			($ret, $out, $err) = try_sql($copy,
				'SELECT (snowflake_decode(snowflake_nextval())).worker_id');
			if ($ret != 0)
			{
				judge($h, $err, "$how with worker 99", $ctx);
			}
			elsif ($out ne '99')
			{
				violation($h, "$how: with worker 99 it issued an ID of worker $out");
			}
			$copy->stop('immediate', fail_ok => 1);
			return;
		}
		# the node dies; the copy is confirmed as the same node, the hint's
		# other step, above every ID the node issued
		my $lost_ms = lost_node_time($h);
		hard_kill($node);
		drop_standbys($h);
		release_lost($h, $copy, $how, $lost_ms) or return;
		# the restore is over: its standbys must not stop at its target
		$copy->append_conf('postgresql.conf', "recovery_target = ''\nrecovery_target_action = 'pause'\n")
		  if $how eq 'pitr';
		return;
	}

	my $late = $how eq 'pg_upgrade-without-preload';
	my $new = snowflake_node($name, worker_id => $h->{worker}, allows_streaming => 1,
		conf => $conf);
	write_settings($h, $new, preload => !$late);
	drop_standbys($h);
	my (%release, $identity);
	if ($how =~ /^pg_upgrade/)
	{
		say_op($h, 'pg_upgrade to a new cluster, started on the same clock' .
			  ($late ? ', the library preloaded only after it' : ''));
		stop_node($h, $node, 'fast');
		my $bindir = $new->config_data('--bindir');
		my $ok = eval {
			IPC::Run::run(
				[ 'sh', '-c', 'cd "$1" && shift && exec "$@"', 'sh', $new->basedir,
				  'pg_upgrade', '--no-sync', '-d', $node->data_dir, '-D', $new->data_dir,
				  '-b', $bindir, '-B', $bindir, '-p', $node->port, '-P', $new->port,
				  '-s', $new->host,
				  # before 17, pg_upgrade's start of the old cluster runs its
				  # subscription's apply worker, whose transaction IDs the new
				  # cluster then hands out again (docs/upgrading.md)
				  $new->pg_version < 17 ? ('-o', '-c max_logical_replication_workers=0') : () ],
				'<', \undef, '>', \$out, '2>', \$err, IPC::Run::timeout(300));
		};
		return violation($h, "pg_upgrade failed: $out $err $@") unless $ok;
		# the old cluster's file, which pg_upgrade does not carry over
		%release = (old => $node->data_dir);
		# the library loaded by pg_upgrade's restore records the upgrade
		$identity = 'upgraded';
		write_settings($h, $new);
	}
	else
	{
		# the new cluster may have claimed the worker id first, as README
		# tells a node to before its first write
		$first //= pick('', '', 'claimed');
		say_op($h, 'dump, restored into a new cluster with the same worker id' .
			  ($first ? ', which claimed it first' : ''));
		# README: a node claims its worker id; the claim travels in the dump
		my $ctx = ctx_now($h, node => $node);
		($ret, $out, $err) = try_sql($node, 'SELECT worker_id FROM snowflake_claim_worker()');
		if ($ret != 0)
		{
			judge($h, $err, 'claim', $ctx);
			return;
		}
		claimed($h);
		my (undef, $hwm) = try_sql($node, 'SELECT high_water_mark FROM snowflake_status');
		my $dump = $new->basedir . '/db.dump';
		my $ok = eval {
			IPC::Run::run([ 'pg_dump', '-Fc', '-d', $node->connstr('postgres'), '-f', $dump ],
				'<', \undef, '>', \$out, '2>', \$err, IPC::Run::timeout(120));
		};
		return violation($h, "pg_dump failed: $err $@") unless $ok;
		hard_kill($node);
		start_node($h, $new, $h->{offset_ms}) or return violation($h, 'the new cluster did not start');
		if ($first)
		{
			kind($h, 'restore-after-claim');
			($ret, $out, $err) = try_sql($new, 'CREATE EXTENSION snowflake; SELECT worker_id FROM snowflake_claim_worker()');
			return violation($h, "the new cluster did not claim its worker id: $err") if $ret != 0;
		}
		$ok = eval {
			IPC::Run::run([ 'pg_restore', $first ? () : ('--exit-on-error'), '-d', $new->connstr('postgres'), $dump ],
				'<', \undef, '>', \$out, '2>', \$err, IPC::Run::timeout(120));
		};
		# into a database that has the extension: only its schema is in the way
		$ok = 1 if $first && !$@ && !grep { /error/ && !/already exists|errors ignored on restore: 1$/ && !/^Command was/ } split /\n/, $err;
		return violation($h, "pg_restore failed: $err $@") unless $ok;
		%release = (above => $hwm);
		$identity = 'inherited';
		$m->{hi} = $hwm if $hwm && $hwm > $m->{hi};
	}
	$h->{node} = $new;
	# a new system identifier: the claims the tables carry name the old one,
	# but for one the new cluster made before the restore
	$m->{system}++;
	claimed($h) if $first && $how eq 'dump-restore';
	# a dump holds one database; pg_upgrade carries them all
	$h->{dbs} = ['postgres'] if $how eq 'dump-restore';
	set_identity($h, $identity);
	start_node($h, $new, $h->{offset_ms}) if $how =~ /^pg_upgrade/;
	wait_up($new) or return violation($h, 'the new cluster did not start');
	expect_held_back($h, $new, $how);
	remove_held_file($h, $new, $how) if wanted($h, 'held-file-removed', 0.15);
	release($h, $new, $how, %release);
	return;
}

# A restore from WAL archived while the node ran, the node lost after IDs
# that did not all reach the restore: to a target time with IDs issued
# after it (pitr-target), or to the end of an archive that lacks its last
# segment (archive-lost-segment).  The restored node is held back as a
# copy, and released as its hint says: above every ID the lost node
# issued, those after the target or in the lost segment too.  The host it
# is restored on may run a few seconds behind.
sub archive_restore
{
	my ($h, $node, $how) = @_;
	my $m = $h->{model};
	my $n = $h->{backup}++;
	my $archive = $node->basedir . "/archive_$n";
	my $name = "a$h->{seed}_$n";
	drop_standbys($h);
	mkdir $archive or die "cannot make $archive: $!";
	say_op($h, ($how eq 'pitr-target' ? 'PITR to a target time' : 'a restore from an archive without its last segment')
		  . ': WAL archived from a restart on, a base backup');
	$node->append_conf('postgresql.conf', "archive_mode = on\narchive_command = 'cp \"%p\" \"$archive/%f\"'\n");
	stop_node($h, $node, 'fast');
	start_node($h, $node, $h->{offset_ms}) or return violation($h, 'the node did not come back');
	take_backup($h, $node, $name) or return;
	my $ids = sub {
		my ($what, $n) = @_;
		one_call($h, $node, $what,
			sql => "COPY (INSERT INTO t SELECT snowflake_nextval() FROM generate_series(1, $n) RETURNING id) TO STDOUT");
	};
	my ($target, $by_time);
	$ids->('IDs before the target', 1000);
	if ($how eq 'pitr-target')
	{
		select(undef, undef, undef, 0.1);
		my $t = now_ms() + $h->{offset_ms};
		my @tm = gmtime(int($t / 1000));
		$target = sprintf('%04d-%02d-%02d %02d:%02d:%02d.%03d+00', $tm[5] + 1900, $tm[4] + 1, @tm[ 3, 2, 1, 0 ],
			$t % 1000);
		select(undef, undef, undef, 0.1);
		# IDs for a second after the target, committed; the archive has
		# them, the restore stops before them
		for (1 .. 2)
		{
			$ids->('IDs after the target', 1000);
			select(undef, undef, undef, 0.5);
		}
		say_op($h, "target $target, IDs for a second after it, archived");
		try_sql($node, 'SELECT txid_current()');
		switch_and_archive($h, $node) or return;
	}
	else
	{
		switch_and_archive($h, $node) or return;
		$ids->('IDs in the last segment archived', 1000);
		my $last = switch_and_archive($h, $node) or return;
		unlink "$archive/$last";
		say_op($h, "the archive loses its last segment, $last");
	}
	# and some that never reach the archive; now and then after the lost
	# node's policy let it run ahead (which its WAL that the restore has
	# does not say)
	$ids->('IDs never archived', 1000);
	if (wanted($h, 'run-ahead-unarchived', 0.4))
	{
		kind($h, 'run-ahead-unarchived');
		say_op($h, 'max_run_ahead_ms -1 on the node, reloaded, IDs that run ahead of its clock');
		$h->{ahead_ms} = -1;
		write_settings($h, $node);
		reload_and_wait($h, $node);
		run_ahead($h, $node, 5000);
		$by_time = 1;
	}
	my $lost_ms = lost_node_time($h);
	hard_kill($node);

	my $copy = PostgreSQL::Test::Cluster->new($name);
	$copy->init_from_backup($node, $name);
	$copy->append_conf('postgresql.conf', "archive_mode = off\nrestore_command = 'cp \"$archive/%f\" \"%p\"'\n"
		  . ($target ? "recovery_target_time = '$target'\nrecovery_target_action = 'promote'\n" : ''));
	open my $fh, '>', $copy->data_dir . '/recovery.signal' or die;
	close $fh;
	my $behind = pick(0, 0, 3000);
	$h->{offset_ms} -= $behind;
	say_op($h, "the node lost; restored from the base backup and the archive, on a clock ${behind} ms behind");
	set_identity($h, 'copy');
	start_node($h, $copy, $h->{offset_ms}) && wait_primary($copy)
	  or return violation($h, "$how: the restore did not start");
	$h->{node} = $copy;
	expect_held_back($h, $copy, $how);
	remove_held_file($h, $copy, $how) if wanted($h, 'held-file-removed', 0.15);
	release_lost($h, $copy, $how, $lost_ms, $by_time) or return;
	# the restore is over: its standbys must not stop at its target or read
	# the lost node's archive
	$copy->append_conf('postgresql.conf', "recovery_target_time = ''\nrecovery_target_action = 'pause'\nrestore_command = ''\n");
	burst($h, $copy, during => 'nothing');
	return;
}

# Switch to a new WAL segment and wait until the archiver has the one
# before; returns its name.
sub switch_and_archive
{
	my ($h, $node) = @_;
	my (undef, $seg) = try_sql($node, 'SELECT pg_walfile_name(pg_switch_wal())');
	for (1 .. 300)
	{
		my (undef, $done) = try_sql($node,
			"SELECT coalesce(last_archived_wal, '') >= '$seg' FROM pg_stat_archiver", 10);
		return $seg if $done eq 't';
		select(undef, undef, undef, 0.1);
	}
	violation($h, "WAL segment $seg was not archived in 30 s");
	return undef;
}

sub drop_standbys
{
	my ($h) = @_;
	for my $k ('cascade', 'standby')
	{
		next unless $h->{$k};
		$h->{$k}->stop('immediate', fail_ok => 1);
		$h->{$k} = undef;
	}
	return;
}

# DROP EXTENSION and CREATE EXTENSION again, in one database: the node goes
# on above its IDs, with no step.
sub recreate_extension
{
	my ($h, $node) = @_;
	my $db = pick(@{ $h->{dbs} });
	say_op($h, "DROP EXTENSION and CREATE EXTENSION again in $db");
	kind($h, 'extension-recreated');
	my ($ret, $out, $err) = try_sql($node,
		'DROP EXTENSION snowflake CASCADE; CREATE EXTENSION snowflake', 60, $db);
	violation($h, "DROP and CREATE EXTENSION failed: $err") if $ret != 0;
	# the claims table went with it (the node's record keeps what it knew)
	$h->{model}{rows} = {} if $db eq 'postgres' && $ret == 0;
	return;
}

# The library taken out of shared_preload_libraries (a clean stop, as
# README's Uninstalling says), a call refused for it, then put back.
sub preload_removed
{
	my ($h, $node) = @_;
	my $m = $h->{model};
	say_op($h, 'shared_preload_libraries without snowflake for a while, then with it again');
	kind($h, 'preload-removed');
	wake_keeper($h);
	drop_standbys($h);
	stop_node($h, $node, 'fast');
	$m->{preloaded} = 0;
	start_or_violation($h, $node, $h->{offset_ms});
	my $ctx = ctx_now($h);
	my ($ret, $out, $err) = try_sql($node, 'SELECT snowflake_nextval()');
	$ret == 0 ? violation($h, "without the library preloaded it issued $out") :
	  judge($h, $err, 'not preloaded', $ctx);
	stop_node($h, $node, 'fast');
	$m->{preloaded} = 1;
	start_or_violation($h, $node, $h->{offset_ms});
	return;
}

# ---------------------------------------------------------------- a history

# Before the first ID: how the node came to have the extension.  Each part
# is drawn from the seed, or forced.
sub prelude
{
	my ($h, $node, $force) = @_;
	my $m = $h->{model};
	my %p = (
		'preload-added-later' => rand() < 0.2,
		'standby-before-extension' => rand() < 0.25,
		'extension-1.1-updated' => rand() < 0.25,
		'bad-setting-before-first-id' => rand() < 0.2,
		'second-database' => rand() < 0.3,
		'promote-before-preload' => 0,
	);
	$p{$_} = 1 for grep { exists $p{$_} } @$force;
	# a standby of a primary that never preloads the library
	$p{'preload-added-later'} = $p{'standby-before-extension'} = 1 if $p{'promote-before-preload'};
	kind($h, grep { $p{$_} } keys %p);

	$m->{preloaded} = !$p{'preload-added-later'};
	# with the promotion, the setting is rejected on the promoted node, before
	# its first ID too
	if ($p{'bad-setting-before-first-id'} && !$p{'promote-before-preload'})
	{
		$h->{layout} = pick('broken', 'broken');
		$m->{worker_bad} = rand() < 0.5;
		$h->{layout} = 'shardingsphere' if $m->{worker_bad};
	}
	start_node($h, $node, 0) or die 'the node did not start';
	if ($p{'standby-before-extension'})
	{
		$h->{standby} = make_standby($h, $node, 'standby made before CREATE EXTENSION');
		kind($h, 'standby');
	}
	if ($p{'extension-1.1-updated'})
	{
		say_op($h, "CREATE EXTENSION snowflake VERSION '1.1'");
		$node->safe_psql('postgres', "CREATE EXTENSION snowflake VERSION '1.1'");
	}
	else
	{
		say_op($h, 'CREATE EXTENSION snowflake');
		$node->safe_psql('postgres', 'CREATE EXTENSION snowflake');
	}
	$node->safe_psql('postgres', 'CREATE TABLE t (id bigint PRIMARY KEY)');
	if ($p{'second-database'})
	{
		say_op($h, 'a second database with the extension');
		$node->safe_psql('postgres', 'CREATE DATABASE db2');
		$node->safe_psql('db2', 'CREATE EXTENSION snowflake; CREATE TABLE t (id bigint PRIMARY KEY)');
		push @{ $h->{dbs} }, 'db2';
	}
	if ($p{'extension-1.1-updated'})
	{
		# 1.1 lived in public and had no blocks: single IDs, then the update
		$m->{at_1_1} = 1;
		burst($h, $node, single => 1, schema => 'public', during => 'nothing') if $m->{preloaded};
		say_op($h, 'ALTER EXTENSION snowflake UPDATE');
		$node->safe_psql('postgres', 'ALTER EXTENSION snowflake UPDATE');
		$m->{at_1_1} = 0;
	}
	if (!$m->{preloaded})
	{
		burst($h, $node, during => 'nothing');
		say_op($h, 'snowflake added to shared_preload_libraries, restart' .
			  ($h->{standby} ? ' (the standby first)' : ''));
		$m->{preloaded} = 1;
		if (my $sb = $h->{standby})
		{
			catch_up($node, $sb);
			write_settings($h, $sb);
			$sb->stop('fast', fail_ok => 1);
			start_standby($sb);
		}
		if ($p{'promote-before-preload'} && $h->{standby})
		{
			# the primary is lost before it ever ran the library: its standby
			# cannot know, says so, and the hint's step releases it
			say_op($h, 'the primary dies before its restart, the standby is promoted');
			set_identity($h, 'new');
			standby_op($h, $node, 'promote');
			$node = $h->{node};
			# the hint: the primary issued no ID
			release($h, $node, 'promoted before the library', above => 0,
				prefix => 'SET search_path = "$user", public; ');
		}
		else
		{
			stop_node($h, $node, 'fast');
			start_or_violation($h, $node, 0);
			# its standby learns what the node is from the record the node
			# logs as the library starts: the history goes on once it has
			# (the primary lost before that is promote-before-preload)
			if (my $sb = $h->{standby})
			{
				my $reason;
				for (1 .. 100)
				{
					$reason = status_reason($sb);
					last if defined $reason && $reason ne 'new_as_standby';
					select(undef, undef, undef, 0.1);
				}
				violation($h, 'the standby made before CREATE EXTENSION did not learn, in 10 s, '
					  . 'that its primary runs the library: ' . ($reason // 'no status'))
				  if !defined $reason || $reason eq 'new_as_standby';
			}
		}
	}
	if ($p{'bad-setting-before-first-id'} && $p{'promote-before-preload'})
	{
		$m->{worker_bad} = 1;
		say_op($h, 'restart with worker id 5000');
		stop_node($h, $node, 'fast');
		start_or_violation($h, $node, $h->{offset_ms});
	}
	if ($p{'bad-setting-before-first-id'})
	{
		burst($h, $node, during => 'nothing');
		say_op($h, 'the setting fixed, restart');
		$h->{layout} = 'shardingsphere';
		$m->{worker_bad} = 0;
		stop_node($h, $node, 'fast');
		start_or_violation($h, $node, $h->{offset_ms});
	}
	load_layouts($h, $node);
	return;
}

sub play_history
{
	my ($seed, $steps, $dir, %opt) = @_;
	srand($seed);
	my @force = @{ $opt{force} // [] };
	my $h = new_history($seed, $steps, $dir);
	$h->{force} = { map { $_ => 1 } @force };
	my $node = snowflake_node("t$seed", worker_id => 1, allows_streaming => 1,
		conf => "include_if_exists = 'torture.conf'\nrestart_after_crash = on\n$KEEP_WAL");
	$h->{node} = $node;
	# layouts for the prelude's checks, before the extension is there
	$h->{layouts} = {};
	prelude($h, $node, \@force);

	# the forced events of the steps, each at a step of its own
	my %at;
	for my $k (grep { !/^(preload-added-later|standby-before-extension|extension-1.1-updated|bad-setting-before-first-id|second-database|promote-before-preload)$/ } @force)
	{
		my $s = 1 + int(rand($steps));
		$s = 1 + int(rand($steps)) while exists $at{$s} && keys %at < $steps;
		$at{$s} = $k;
	}

	for my $step (1 .. $steps)
	{
		$node = $h->{node};
		my $r = rand();
		my $f = $at{$step};
		eval {
			if ($f) { forced($h, $node, $f); }
			elsif ($r < 0.38) { burst($h, $node); }
			elsif ($r < 0.54) { clock_step($h, $node); }
			elsif ($r < 0.63) { reload_settings($h, $node); }
			elsif ($r < 0.79) { restart($h, $node); }
			elsif ($r < 0.83) { damage($h, $node); }
			elsif ($r < 0.87) { subscription_op($h, $node); }
			elsif ($r < 0.93) { standby_op($h, $node); }
			elsif ($r < 0.95) { recreate_extension($h, $node); }
			elsif ($r < 0.96) { preload_removed($h, $node); }
			else { lifecycle_op($h, $node); }
			repair_if_refused($h, $h->{node});
			1;
		} or violation($h, "the step failed: $@");
		$h->{ops}++;
		last if @{ $h->{violations} } > 20;
	}

	# A forced event the node could not take at its step (it refused then,
	# with cause: a layout it could not yet continue in, say, whose end
	# depends on how fast the machine ran) is played again after the last
	# step, so that every kind a history is dealt is played on a busy
	# machine too.
	for my $k (sort grep { !($h->{kinds}{$_} // 0) } values %at)
	{
		for my $try (1 .. 3)
		{
			last if @{ $h->{violations} } > 20;
			say_op($h, "$k again, not played at its step (try $try)");
			eval {
				forced($h, $h->{node}, $k);
				repair_if_refused($h, $h->{node});
				1;
			} or violation($h, "the step failed: $@");
			$h->{ops}++;
			last if $h->{kinds}{$k};
		}
	}

	$node = $h->{node};
	wake_keeper($h);
	# no crash but the ones the history caused
	for my $n (grep { defined } $node, $h->{standby}, $h->{cascade})
	{
		my $log = slurp_file($n->logfile);
		# a restore_command that immediate shutdown quits is PostgreSQL's own
		for my $line (grep { /PANIC|TRAP:|terminated by signal (?!9)/ && !/could not restore file/ } split /\n/, $log)
		{
			violation($h, "server log: $line");
		}
	}
	drop_standbys($h);
	$h->{pub}->stop('immediate', fail_ok => 1) if $h->{pub};
	$node->stop('immediate', fail_ok => 1);
	return $h;
}

# Before a forced hint's case: a node that generates, as the operator
# leaves it after the steps of earlier refusals.
sub working
{
	my ($h, $node) = @_;
	my $m = $h->{model};
	wake_keeper($h);
	claim_in_force($h, $node, 'the worker id in force unclaimed') if held_unclaimed($h);
	if ($m->{settings_bad} || $h->{layout} eq 'broken' || $m->{worker_bad})
	{
		follow_hint($h, $node, 'a setting rejected at start');
	}
	repair_if_refused($h, $node);
	if ($h->{offset_ms} != 0)
	{
		say_op($h, "clock home: offset now 0 ms");
		$h->{offset_ms} = 0;
		set_offset($node, 0);
	}
	# IDs ahead of the clock, further than the policy lets the node go on:
	# a few seconds are waited for, more take the clock hint's step
	my $lead = lead_bound_ms($h, now_ms());
	if (defined $lead && $lead > allowed_lead_ms($h))
	{
		if ($lead < 5000)
		{
			say_op($h, "the clock catches up with the last ID, $lead ms ahead at most");
			select(undef, undef, undef, $lead / 1000);
		}
		else
		{
			follow_hint($h, $node, 'the node is further ahead than the policy waits');
		}
	}
	return;
}

# An event the history must hold, played at its step.
sub forced
{
	my ($h, $node, $k) = @_;
	my %restart = ('restart-fast' => 'fast', 'restart-immediate' => 'immediate', 'hard-kill' => 'hard kill',
		'keeper-kill' => 'keeper kill', 'keeper-stop' => 'keeper stop', 'worker-broken' => 'worker');
	my %standby = (promote => 'promote', 'promote-cascade' => 'promote-cascade', cascade => 'cascade',
		'standby-checkpoint' => 'checkpoint', 'standby-crash' => 'crash',
		'standby-backend-kill' => 'kill backend', standby => 'checkpoint', 'standby-few-slots' => 'checkpoint');
	my %clock = ('clock-back' => 'back', 'clock-far-back' => 'far back', 'clock-forward' => 'forward',
		'clock-home' => 'home', 'clock-glitch' => 'glitch');
	my %burst = (burst => [], 'block-burst' => [ block => 17, form => 'block' ],
		'series-burst' => [ block => 300, form => 'series' ], 'burst-clock-step' => [ during => 'clock' ],
		'burst-backend-kill' => [ during => 'kill' ]);

	return restart($h, $node, $restart{$k}) if $restart{$k};
	return restart($h, $node, 'layout', 'twitter') if $k eq 'layout-change';
	return restart($h, $node, 'layout', 'broken') if $k eq 'layout-broken';
	return clock_step($h, $node, $clock{$k}) if $clock{$k};
	return burst($h, $node, @{ $burst{$k} }) if $burst{$k};
	return reload_settings($h, $node, $1) if $k =~ /^reload-(\w+)$/;
	return damage($h, $node, $1) if $k =~ /^state-(\w+)$/;
	return damage($h, $node, 'zero') if $k eq 'repair';
	return subscription_op($h, $node, $k) if $k =~ /^subscription-/;
	if ($k eq 'second-promotion')
	{
		standby_op($h, $node, 'promote');
		return standby_op($h, $h->{node}, 'promote');
	}
	return standby_op($h, $node, $standby{$k}) if $standby{$k};
	# the node's life beyond one server starts from a node that works; a
	# refusal on the way takes its step, and the case is played again
	my %life = map { $_ => 1 } qw(restore-after-claim copy-first-start pg_upgrade pg_upgrade-without-preload
	  dump-restore clone pitr pitr-target archive-lost-segment run-ahead-unarchived held-file-removed
	  release-write-fails worker-retired);
	if ($life{$k})
	{
		my $before = $h->{kinds}{$k} // 0;
		for (1 .. 2)
		{
			working($h, $h->{node});
			local $h->{want}{$k} = 1;
			if ($k eq 'worker-retired')
			{
				standby_op($h, $h->{node}, 'worker-retired');
			}
			else
			{
				my @args = $k eq 'restore-after-claim' ? ('dump-restore', 'claimed') :
				  $k eq 'copy-first-start' ? (pick('clone', 'pitr'), pick('rejected', 'unset')) :
				  # (drawn in the others too, in longer runs)
				  $k eq 'held-file-removed' ? (pick('clone', 'pitr', 'dump-restore')) :
				  $k eq 'run-ahead-unarchived' ? (pick('pitr-target', 'archive-lost-segment')) :
				  # a release to fail: a copy replaces the node
				  $k eq 'release-write-fails' ?
				  (pick('clone', 'pitr', 'dump-restore'), undef, replace => 1) :
				  ($k);
				lifecycle_op($h, $h->{node}, @args);
			}
			last if ($h->{kinds}{$k} // 0) > $before;
		}
		return;
	}
	if ($k eq 'promote-while-rejected')
	{
		# a standby made while the node's layout is rejected replays with
		# it rejected from its first start, is promoted so, and is fixed
		# then: it is its primary's node, with no other step
		working($h, $node);
		drop_standbys($h);
		restart($h, $node, 'layout', 'broken');
		kind($h, 'promote-while-rejected');
		standby_op($h, $h->{node}, 'promote');
		return burst($h, $h->{node}, during => 'nothing', follow => 1);
	}
	return recreate_extension($h, $node) if $k eq 'extension-recreated';
	return preload_removed($h, $node) if $k eq 'preload-removed';
	if ($k =~ /^hint-/)
	{
		# a refusal for another cause on the way takes its own step, and
		# the case is played again
		my $before = $h->{kinds}{$k} // 0;
		for (1 .. 2)
		{
			hint_case($h, $h->{node}, $k);
			last if ($h->{kinds}{$k} // 0) > $before;
		}
		return;
	}
	die "no way to force event kind $k";
}

# The clock policy by default (max_clock_backward_ms 10, max_run_ahead_ms
# 0), reloaded.
sub default_policy
{
	my ($h, $node) = @_;
	return unless $h->{ahead_ms} != 0 || $h->{backward_ms} > 1000;
	$h->{ahead_ms} = 0;
	$h->{backward_ms} = 10;
	say_op($h, 'reload: max_clock_backward_ms 10, max_run_ahead_ms 0');
	write_settings($h, $node);
	reload_and_wait($h, $node);
	return;
}

# A hint's case: a node that generates meets the refusal, and the step of
# its hint is taken.
sub hint_case
{
	my ($h, $node, $k) = @_;
	working($h, $node);
	if ($k eq 'hint-settings')
	{
		restart($h, $node, 'layout', 'broken');
		return burst($h, $node, during => 'nothing', follow => 1);
	}
	if ($k eq 'hint-layout')
	{
		# twitter's IDs of now are above shardingsphere's
		restart($h, $node, 'layout', 'twitter');
		burst($h, $node, during => 'nothing');
		restart($h, $node, 'layout', 'shardingsphere');
		return burst($h, $node, during => 'nothing', follow => 1);
	}
	if ($k eq 'hint-clock')
	{
		# the default policy: a clock an hour back is refused
		default_policy($h, $node);
		burst($h, $node, during => 'nothing');
		clock_step($h, $node, 'far back');
		return burst($h, $node, during => 'nothing', follow => 1);
	}
	if ($k eq 'hint-keeper')
	{
		# IDs of a time a few seconds on need a reservation only the keeper
		# makes (a node that may run ahead may have one already)
		default_policy($h, $node);
		burst($h, $node, during => 'nothing');
		restart($h, $node, 'keeper stop');
		# a few seconds past the last ID, which may be ahead of the clock (a
		# release's floor covers the lost node's run-ahead)
		my $lead = lead_bound_ms($h, now_ms() + $h->{offset_ms}) // 0;
		my $step = 3000 + ($lead > 0 ? $lead : 0);
		$h->{offset_ms} += $step;
		say_op($h, "clock forward: $step ms, offset now $h->{offset_ms} ms");
		set_offset($node, $h->{offset_ms});
		return burst($h, $node, during => 'nothing', n => 1, single => 1, follow => 1);
	}
	return;
}

1;
