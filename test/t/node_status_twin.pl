# The status view is the refusals' twin, checked both ways over random
# configurations and events: whenever snowflake_nextval() refuses, the
# view says the node is not ready, with a reason whose SQLSTATE (as
# docs/reference.md's table of refusals gives it) is the call's; and
# whenever the view says ready, the call generates.  The one state in
# which a call waits and then generates is starting.
#
# A primary, its standby and now and then a copy of it started beside it;
# the configuration drawn each step: the worker id (valid, unset, out of
# range), the layout (a preset, misspelt, an unusable custom one), a
# misspelt setting name, a setting out of range, the library preloaded or
# not; the events: reloads, restarts, crashes, the clock stepped back,
# another system's claim of the worker id, a damaged state file and its
# repair, the state files removed, a copy given a worker id of its own.
#
# The draws come from SNOWFLAKE_TWIN_SEED (1 unless given), so a failure
# replays; it prints the command.
use strict;
use warnings;
use File::Basename qw(dirname);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SnowflakeTest;

my $seed = $ENV{SNOWFLAKE_TWIN_SEED} || 1;
my $steps = $ENV{SNOWFLAKE_TWIN_STEPS} || 24;
srand($seed);
my $replay = "SNOWFLAKE_TWIN_SEED=$seed SNOWFLAKE_TWIN_STEPS=$steps PROVE_TESTS=t/node_status_twin.pl";
my @log;

# reason => SQLSTATE, from the table of refusals in docs/reference.md
my %code_of;
my @states = qw(ready starting held_copy held_floor held_claimed held_file broken disabled standby blocked);
my %is_state = map { $_ => 1 } @states;
for my $line (split /\n/, slurp_file(dirname(__FILE__) . '/../../docs/reference.md'))
{
	my ($code, undef, $shown) = $line =~ /^\| ([0-9A-Z]{5}) \| ([^|]*) \| ([^|]*) \|/ or next;
	$code_of{$_} = $code for grep { !$is_state{$_} } $shown =~ /`([a-z_0-9]+)`/g;
}
ok(keys %code_of >= 30, 'docs/reference.md gives the SQLSTATE of every reason (' . scalar(keys %code_of) . ')');

# the configuration the history sets, in a file of its own
my %conf = (worker => 1, layout => 'shardingsphere', unknown => 0, bad => 0, preload => 1);
sub write_conf
{
	my ($node, %c) = @_;
	my $text = '';
	$text .= "snowflake.worker_id = $c{worker}\n" if $c{worker} ne 'unset';
	if ($c{layout} eq 'unusable')
	{
		$text .= "snowflake.layout = custom\nsnowflake.custom_epoch = '2999-01-01'\n";
	}
	else
	{
		$text .= "snowflake.layout = '$c{layout}'\n";
	}
	$text .= "snowflake.max_clock_backwrd_ms = 5\n" if $c{unknown};
	$text .= "snowflake.max_run_ahead_ms = -5\n" if $c{bad};
	$text .= "shared_preload_libraries = ''\n" unless $c{preload};
	# a value each reload changes, to see that it was read
	$text .= 'work_mem = ' . (1000 + int(rand(100000))) . "kB\n";
	open my $fh, '>', $node->data_dir . '/twin.conf' or die "cannot write twin.conf: $!";
	print $fh $text;
	close $fh;
	return $text =~ /work_mem = (\w+)/ ? $1 : '';
}

sub say_step
{
	my ($what) = @_;
	push @log, sprintf('%2d %s', scalar @log, $what);
	note($log[-1]);
	return;
}

# view(NODE): the view's state/reason, or undef when it cannot be read
sub view
{
	my ($node) = @_;
	my ($ret, $out) = $node->psql('postgres',
		"SELECT state || '/' || coalesce(reason, '') FROM snowflake.snowflake_status");
	return $ret == 0 ? $out : undef;
}

# call(NODE): 'generated', or the SQLSTATE a call of snowflake_nextval() ended with
sub call
{
	my ($node) = @_;
	my ($ret, $out, $err) = $node->psql('postgres',
		"\\set VERBOSITY verbose\nSELECT snowflake.snowflake_nextval()");
	return 'generated' if $ret == 0;
	return $err =~ /ERROR:  ([0-9A-Z]{5}):/ ? $1 : "no SQLSTATE: $err";
}

# twin(NODE, WHAT): the view, a call, the view again; judged once the two
# views agree (a transition between them, the keeper's floor applied say,
# is read again)
my $failures = 0;
my %shown;
sub twin
{
	my ($node, $what) = @_;
	my ($before, $call, $after);
	for (1 .. 20)
	{
		$before = view($node);
		$call = call($node);
		$after = view($node);
		last if defined $before && defined $after && $before eq $after;
		select(undef, undef, undef, 0.2);
	}
	my ($state, $reason) = split m{/}, $before // '/', 2;
	my $fail;
	if (!defined $before || $before ne ($after // ''))
	{
		$fail = "the view did not settle: '" . ($before // 'unreadable') . "', then '" . ($after // 'unreadable') . "'";
	}
	elsif ($call eq 'generated')
	{
		$fail = "a call generated while the view says $before" unless $state eq 'ready' || $state eq 'starting';
	}
	elsif ($state eq 'ready' || $state eq 'starting')
	{
		$fail = "a call was refused ($call) while the view says $before";
	}
	elsif (($code_of{$reason} // '') ne $call)
	{
		$fail = "a call was refused with $call, and the view says $before, whose SQLSTATE is "
		  . ($code_of{$reason} // 'not in docs/reference.md');
	}
	if ($fail)
	{
		$failures++;
		fail("step $#log, $what: $fail");
	}
	else
	{
		pass("step $#log, $what: $before, the call " . ($call eq 'generated' ? 'generated' : "refused ($call)"));
		$shown{$before}++;
	}
	return;
}

# reload, and wait until a new session has the values read
sub reload_with
{
	my ($node, %c) = @_;
	my $tag = write_conf($node, %c);
	$node->reload;
	$node->poll_query_until('postgres', "SELECT pg_size_bytes(current_setting('work_mem')) = pg_size_bytes('$tag')")
	  or die 'the reload did not take';
	return;
}

my $p = snowflake_node('twin_p', worker_id => 1, allows_streaming => 1,
	conf => "include_if_exists = 'twin.conf'\nrestart_after_crash = on\nwal_keep_size = '256MB'\n");
write_conf($p, %conf);
start_faked($p, '+0');
$p->safe_psql('postgres', 'CREATE EXTENSION snowflake; CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake.snowflake_nextval())');
$p->safe_psql('postgres', 'INSERT INTO t SELECT FROM generate_series(1, 100)');
$p->backup('twin_b', backup_options => ['--no-slot']);
my $sb = PostgreSQL::Test::Cluster->new('twin_s');
$sb->init_from_backup($p, 'twin_b', has_streaming => 1);
$sb->start;
my $copy;
my $copies = 0;
twin($p, 'the primary at start');
twin($sb, 'its standby');

my @events = qw(reload-worker reload-worker restart-settings restart-settings crash clock-back
  claim damage remove-files copy copy-own-worker standby-restart operator operator);
for my $step (1 .. $steps)
{
	my $ev = $events[ int(rand(@events)) ];
	if ($ev eq 'reload-worker')
	{
		$conf{worker} = (1, 2, 3, 'unset', 5000)[ int(rand(5)) ];
		say_step("snowflake.worker_id = $conf{worker}, reload");
		reload_with($p, %conf);
	}
	elsif ($ev eq 'restart-settings')
	{
		# each setting drawn afresh, mostly good
		$conf{layout} = ('shardingsphere', 'shardingsphere', 'shardingsphere', 'twitter', 'shardingspere',
			'unusable')[ int(rand(6)) ];
		$conf{unknown} = rand() < 0.15 ? 1 : 0;
		$conf{bad} = rand() < 0.15 ? 1 : 0;
		$conf{preload} = rand() < 0.85 ? 1 : 0;
		say_step('restart with ' . join(', ', map { "$_ $conf{$_}" } sort keys %conf));
		write_conf($p, %conf);
		$p->stop('fast');
		start_faked($p, '+0');
	}
	elsif ($ev eq 'crash')
	{
		say_step('the primary killed (immediate), started again');
		$p->stop('immediate');
		start_faked($p, '+0');
	}
	elsif ($ev eq 'clock-back')
	{
		say_step('IDs, then the clock 5 s back, then home again after a look');
		$p->psql('postgres', 'INSERT INTO t SELECT FROM generate_series(1, 100)');
		set_clock_offset($p, '-5');
		twin($p, 'the clock back');
		set_clock_offset($p, '+0');
	}
	elsif ($ev eq 'claim')
	{
		say_step('another system claims the worker id in force');
		$p->psql('postgres', q{INSERT INTO snowflake.snowflake_workers (worker_id, system_identifier)
			SELECT snowflake.snowflake_worker_id(), 4242 + (random() * 1000)::int
			ON CONFLICT DO NOTHING});
	}
	elsif ($ev eq 'damage')
	{
		say_step('the state file emptied while stopped; later repaired');
		$p->stop('fast');
		open my $fh, '>', $p->data_dir . '/snowflake.state' or die;
		close $fh;
		start_faked($p, '+0');
		twin($p, 'damaged');
		$p->psql('postgres', 'SELECT snowflake.snowflake_repair_state(above => (SELECT coalesce(max(id), 0) FROM t))');
	}
	elsif ($ev eq 'remove-files')
	{
		say_step('both state files removed while stopped; later confirmed');
		$p->stop('fast');
		unlink map { $p->data_dir . "/snowflake.$_" } qw(state identity);
		start_faked($p, '+0');
		twin($p, 'files removed');
		$p->psql('postgres', 'SELECT snowflake.snowflake_confirm_node(above => (SELECT coalesce(max(id), 0) FROM t))');
	}
	elsif ($ev eq 'copy' || ($ev eq 'copy-own-worker' && !$copy))
	{
		next if $copy || !$conf{preload};
		say_step('a base backup of the primary started beside it, as a primary');
		my $name = 'twin_c' . $copies++;
		$p->backup($name, backup_options => ['--no-slot']);
		$copy = PostgreSQL::Test::Cluster->new($name);
		$copy->init_from_backup($p, $name);
		$copy->start;
	}
	elsif ($ev eq 'copy-own-worker')
	{
		say_step('the copy given a worker id of its own, reloaded; then stopped');
		$copy->append_conf('twin.conf', "snowflake.worker_id = 77\n");
		$copy->reload;
		$copy->poll_query_until('postgres', "SELECT current_setting('snowflake.worker_id') = '77'");
		twin($copy, 'the copy with a worker id of its own');
		$copy->stop('fast');
		$copy = undef;
	}
	elsif ($ev eq 'operator')
	{
		# the step the view's reason calls for, where the history has one
		my $shown = view($p) // '';
		my $max = '(SELECT coalesce(max(id), 0) FROM t)';
		my %step = (
			'held_floor/never_installed' => "SELECT snowflake.snowflake_confirm_node(above => $max)",
			'held_claimed/claimed_elsewhere' => "SELECT snowflake.snowflake_confirm_node(above => $max)",
			'broken/state_damaged' => "SELECT snowflake.snowflake_repair_state(above => $max)");
		next unless $step{$shown};
		say_step("the operator's step for $shown");
		$p->psql('postgres', $step{$shown});
	}
	elsif ($ev eq 'standby-restart')
	{
		say_step('the standby restarted');
		$sb->restart;
	}
	twin($p, 'the primary');
	twin($sb, 'the standby');
	twin($copy, 'the copy') if $copy;
}
# both halves were played: calls that generated, and refusals of several kinds
my $met = join(', ', map { "$_ x$shown{$_}" } sort keys %shown);
ok($shown{'ready/'} && (grep { !m{^(ready|starting)/} } keys %shown) >= 4,
	"the history met ready and at least four other states: $met");
diag("seed $seed: $met");
diag("replay with: $replay\n" . join("\n", @log)) if $failures;
$copy->stop('fast') if $copy;
done_testing();
