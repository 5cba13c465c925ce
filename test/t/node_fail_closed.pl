# The holes that review found in 1.0, each kept closed: settings that fail
# open, a worker id that changes per backend, an unusable layout that
# reaches the state file, reservations made for the clock alone, waits that
# do not judge again, overflowing layouts, a status view that shows a
# reservation as an issued ID, a torn or empty state file, a renewal that
# fails for a caller with room left, and the keeper's visibility.
use strict;
use warnings;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SnowflakeTest;


sub restart_with
{
	my ($node, $conf) = @_;
	$node->stop('fast');
	open my $fh, '>', $node->data_dir . '/test.conf' or die;
	print $fh $conf;
	close $fh;
	start_faked($node, '+0');
	return;
}

my $node = snowflake_node('closed', worker_id => 4,
	conf => "include_if_exists = 'test.conf'\nrestart_after_crash = on\n");
start_faked($node, '+0');
$node->safe_psql('postgres', 'CREATE EXTENSION snowflake');

ok($node->log_contains('snowflake generates as worker id 4 in layout "shardingsphere"'),
	'the server log says at start which worker id and layout are in force');
is($node->safe_psql('postgres',
	"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'snowflake keeper'"),
	'1', 'the keeper shows in pg_stat_activity');

# 1. Settings fail closed at server start: each refused (F0000), naming
# the setting and the value it rejected, and the status view says so;
# fixed and reloaded, a worker id generates (README's fix), the others
# stay refused, as only a restart reads them again.
my @bad = (
	[ "snowflake.custom_worker_bits = 40\nsnowflake.layout = custom\n", 'settings_rejected',
	  qr/snowflake\.custom_worker_bits\b.*'40'/s ],
	[ "snowflake.layout = 'javascript'\nsnowflake.worker_id = 100\n", 'worker_id_rejected',
	  qr/snowflake\.worker_id\b.*'100'/s ],
	[ "snowflake.layout = 'shardingsphere\@America/St_Johns\@2026-02-30'\n", 'layout_rejected',
	  qr/snowflake\.layout\b.*'shardingsphere\@America\/St_Johns\@2026-02-30'/s ],
	[ "snowflake.layout = 'shardingsphere\@Pacific/Chatham\@2016-10-31'\n", 'layout_rejected',
	  qr/snowflake\.layout\b.*'shardingsphere\@Pacific\/Chatham\@2016-10-31'/s ],
	[ "snowflake.layout = 'twiter'\n", 'layout_rejected', qr/snowflake\.layout\b.*'twiter'/s ],
	[ "snowflake.layout = custom\nsnowflake.custom_epoch = '2024-02-31'\n", 'layout_unusable',
	  qr/custom_epoch\b.*"2024-02-31"/s ],
	[ "snowflake.layout = custom\nsnowflake.custom_epoch = '2999-01-01'\n", 'layout_unusable',
	  qr/snowflake\.custom_epoch\b/s ],
	[ "snowflake.layout = custom\nsnowflake.custom_time_bits = 40\nsnowflake.custom_worker_bits = 1\nsnowflake.custom_seq_bits = 1\nsnowflake.custom_tick_ms = '1d'\n",
	  'layout_unusable', qr/"custom".*timestamp with time zone/s ],
	[ "snowflake.worker_id = 1024\n", 'worker_id_rejected', qr/snowflake\.worker_id\b.*'1024'/s ],
	[ "snowflake.wroker_id = 3\n", 'setting_unknown', qr/"snowflake\.wroker_id"/s ],
);
for my $case (@bad)
{
	my ($conf, $reason, $words) = @$case;
	my $shown = $conf =~ s/\n/; /gr;
	restart_with($node, $conf);
	my ($code, $err) = refusal($node);
	is($code, "F0000 $reason", "refused after a start with: $shown");
	like($err, qr/ERROR:  F0000: .*$words/s, '... naming the setting');
	is($node->safe_psql('postgres', "SELECT state || '/' || reason FROM snowflake_status"), "disabled/$reason",
		'... and the status view says so');
	# the fix, and a setting that shows the reload arrived
	open my $fh, '>', $node->data_dir . '/test.conf' or die;
	print $fh "work_mem = '5MB'\n";
	close $fh;
	$node->reload;
	$node->poll_query_until('postgres', "SELECT current_setting('work_mem') = '5MB'")
	  or die 'the reload did not take';
	if ($reason eq 'worker_id_rejected')
	{
		$node->poll_query_until('postgres', "SELECT state = 'ready' FROM snowflake_status")
		  or die 'the reload did not fix the worker id';
		is(refusal($node), 'generated', '... and after a reload that fixed it, it generates');
		# every process restarted after a crash keeps the fix: the postmaster read it
		my $keeper = $node->safe_psql('postgres',
			"SELECT pid FROM pg_stat_activity WHERE backend_type = 'snowflake keeper'");
		kill 'KILL', $keeper if $keeper;
		# (a query sent while the server restarts can find psql gone before
		# it read its input, which IPC::Run reports by dying: polled in eval)
		my $ready = 0;
		for (1 .. $PostgreSQL::Test::Utils::timeout_default)
		{
			$ready = eval { $node->safe_psql('postgres', "SELECT state = 'ready' FROM snowflake_status") } // '';
			last if $ready eq 't';
			sleep 1;
		}
		$ready eq 't' or die 'the node did not come back ready from the crash';
		is(refusal($node), 'generated', '... also after a crash restarted every process');
	}
	else
	{
		is(refusal($node), "F0000 $reason", '... and after a reload that fixed it, until a restart');
	}
}
ok($node->log_contains('"2026-02-30" is not a day written as YYYY-MM-DD')
	  && $node->log_contains('No ShardingSphere generator started before its epoch, 2016-11-01; 2016-10-31 is earlier.'),
	'the server log says why a ShardingSphere layout named with a day was rejected');
restart_with($node, "snowflake.worker_id = -1\n");
is(refusal($node), '55S09', 'an unset worker id refuses');
ok($node->log_contains(qr/WARNING:  snowflake\.worker_id is not set\n[^\n]*DETAIL:  This server generates no snowflake IDs/),
	'and the server log says so at start');

# 2. An unusable layout computes nothing that reaches the state file: after
# it is fixed, the node continues as before.
restart_with($node, '');
my $before = $node->safe_psql('postgres', 'SELECT max(snowflake_nextval()) FROM generate_series(1, 1000)');
$node->stop('fast');
my $state = slurp_file($node->data_dir . '/snowflake.state');
start_faked($node, '+0');
restart_with($node, "snowflake.layout = custom\nsnowflake.custom_epoch = '2999-01-01'\n");
my ($code, $err) = refusal($node);
is($code, 'F0000 layout_unusable', 'an epoch in the future is unusable');
like($err, qr/ERROR:  F0000: .*snowflake\.custom_epoch\b/s, '... naming the setting');
$node->stop('fast');
is(slurp_file($node->data_dir . '/snowflake.state'), $state,
	'the unusable layout left the state file as it was');
restart_with($node, '');
my $after = $node->safe_psql('postgres', 'SELECT snowflake_nextval()');
ok($after > $before, 'fixed, the node continues above its last ID');

# 3. The worker id is the node's: a reload changes it once for every
# backend, even for a statement that is running.
$node->safe_psql('postgres', "ALTER SYSTEM SET snowflake.max_run_ahead_ms = -1");
$node->reload;
$node->poll_query_until('postgres', "SELECT current_setting('snowflake.max_run_ahead_ms') = '-1'");
my $out = '';
$err = '';
my $long = IPC::Run::start(
	[ 'psql', '-X', '-A', '-t', '-d', $node->connstr('postgres'), '-c',
	  'SELECT count(*) FILTER (WHERE w IS DISTINCT FROM p), min(w), max(w) FROM ('
	  . 'SELECT w, lag(w) OVER (ORDER BY n) AS p FROM ('
	  . 'SELECT n, (snowflake_decode(snowflake_nextval())).worker_id AS w FROM generate_series(1, 400000) n) a) b' ],
	'<', \undef, '>', \$out, '2>', \$err);
select(undef, undef, undef, 0.5);
$node->safe_psql('postgres', "ALTER SYSTEM SET snowflake.worker_id = 9");
$node->reload;
for (1 .. 5)
{
	select(undef, undef, undef, 0.1);
	$node->safe_psql('postgres', 'SELECT count(snowflake_nextval()) FROM generate_series(1, 10000)');
}
$long->finish;
chomp $out;
my ($changes, $minw, $maxw) = split /\|/, $out;
is($changes, 2, 'a running statement saw the worker id change once (first row counts as one)')
  or diag($err);
is("$minw-$maxw", '4-9', 'from the old worker id to the new');
my $ahead = $node->safe_psql('postgres', 'SELECT run_ahead_ms FROM snowflake_status');
ok($ahead < 1000, "the change did not make the node run ahead ($ahead ms)");
is($node->safe_psql('postgres', 'SELECT snowflake_worker_id()'), '9', 'snowflake_worker_id() follows');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET ALL');
$node->reload;

# 4. A forward clock glitch with no ID issued reserves nothing: after a
# crash the node does not refuse for a day.
$node->safe_psql('postgres', 'SELECT snowflake_nextval()');
my $hwm = $node->safe_psql('postgres', 'SELECT high_water_mark FROM snowflake_status');
set_clock_offset($node, '+1d');
select(undef, undef, undef, 0.5);
set_clock_offset($node, '+0');
# (the keeper may still renew the reservation the last call asked for,
# by a window of ID time: a day's reservation is far beyond that)
is($node->safe_psql('postgres', qq{
	SELECT (snowflake_decode(high_water_mark)).ts - (snowflake_decode($hwm)).ts < interval '10 seconds'
	FROM snowflake_status}), 't',
	'a clock a day ahead with no ID issued reserves nothing');
$node->stop('immediate');
start_faked($node, '+0');
is(refusal($node), 'generated', 'after a crash the node generates at once');

# 5. The status view shows what was issued and what is reserved.
$node->stop('immediate');
start_faked($node, '+0');
is($node->safe_psql('postgres', 'SELECT last_id IS NULL FROM snowflake_status'), 't',
	'after a crash, no ID is shown as issued until one is');
my $id = $node->safe_psql('postgres', 'SELECT snowflake_nextval()');
is($node->safe_psql('postgres', "SELECT last_id = $id AND high_water_mark >= last_id FROM snowflake_status"),
	't', 'then the last ID, with the reservation at or above it');

# 6. A wait is judged again when the clock steps back further, is visible
# as a wait event, and a statement timeout cancels it.
$node->safe_psql('postgres', "ALTER SYSTEM SET snowflake.max_clock_backward_ms = '10s'");
$node->reload;
$node->safe_psql('postgres', 'SELECT snowflake_nextval()');
set_clock_offset($node, '-3');
($out, $err) = ('', '');
my $waiter = IPC::Run::start(
	[ 'psql', '-X', '-A', '-t', '-v', 'VERBOSITY=verbose',
	  '-d', $node->connstr('postgres') . ' application_name=waiter', '-c', 'SELECT snowflake_nextval()' ],
	'<', \undef, '>', \$out, '2>', \$err);
ok($node->poll_query_until('postgres',
	"SELECT wait_event_type = 'Extension' FROM pg_stat_activity WHERE application_name = 'waiter'"),
	'a call waiting for the clock shows an Extension wait event');
set_clock_offset($node, '-1h');
$waiter->finish;
like($err, qr/ERROR:  55S05:/,
	'a further step back during the wait is judged again and refused, as the clock moved backwards');
set_clock_offset($node, '-3');
is(refusal($node, 'postgres', "SET statement_timeout = '300ms'; SELECT snowflake_nextval()"), '57014',
	'a statement timeout cancels a wait');
set_clock_offset($node, '+0');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET ALL');
$node->reload;
select(undef, undef, undef, 3.5);

# 7. A state file that cannot be written in place is written anew beside
# it; one that cannot be written at all (nor a file made beside it): a
# caller with room left gets its ID; one without room gets a clear error;
# nothing is issued beyond the reservation.
my $file = $node->data_dir . '/snowflake.state';
$node->safe_psql('postgres', 'SELECT snowflake_nextval()');
chmod 0400, $file;
select(undef, undef, undef, 1.5);
is(refusal($node), 'generated', 'a read-only state file is written anew: the node goes on');
ok($node->log_contains(qr/could not open file "snowflake\.state": Permission denied\n[^\n]*DETAIL:  The file is written anew/),
	'and the server log says so');
ok((stat $file)[2] & 0200, 'the new file is writable');
# no file can be made beside it: a directory where it would go
chmod 0400, $file;
mkdir "$file.new" or die "mkdir: $!";
$node->safe_psql('postgres', 'SELECT snowflake_nextval()');
is(refusal($node), 'generated', 'a state file that cannot be written: a call within the reservation succeeds');
select(undef, undef, undef, 1.5);
is(refusal($node), '55S08', 'beyond it, a clear error after a bounded wait: the reservation was not renewed');
ok($node->log_contains('could not create file "snowflake.state.new": Is a directory'),
	'and the server log says why');
rmdir "$file.new";
is(refusal($node), 'generated', 'writable again, the node generates');

# 8. A torn write damages one slot only; an empty or zeroed file is
# refused, and the operator's repair continues above the ID given.
my $last = $node->safe_psql('postgres', 'SELECT max(snowflake_nextval()) FROM generate_series(1, 100)');
$node->stop('immediate');
tear_state_file($file);
start_faked($node, '+0');
my $next = $node->safe_psql('postgres', 'SELECT snowflake_nextval()');
ok($next > $last, 'one torn slot: the other holds the mark, IDs continue above');
for my $how ('empty', 'zeroed')
{
	$last = $node->safe_psql('postgres', 'SELECT max(snowflake_nextval()) FROM generate_series(1, 100)');
	$node->stop('immediate');
	open my $fh, '+<', $file or die;
	if ($how eq 'empty') { truncate $fh, 0; }
	else { print $fh "\0" x 1024; }
	close $fh;
	start_faked($node, '+0');
	my ($code, $err) = refusal($node);
	is($code, 'XX001 state_damaged', "an $how state file is refused");
	like($err, qr/HINT:  .*snowflake\.snowflake_repair_state\(above => /, '... naming the repair');
	my $above = $last + 1_000_000_000;
	is($node->safe_psql('postgres', "SELECT snowflake_repair_state($above) >= $above"), 't',
		'the repair continues above the ID given');
	ok($node->safe_psql('postgres', 'SELECT snowflake_nextval()') > $above, 'and IDs follow above it');
}
$node->safe_psql('postgres', 'CREATE ROLE plain LOGIN');
is(refusal($node, 'postgres', 'SET ROLE plain; SELECT snowflake_repair_state(1)'), '42501',
	'only a superuser repairs');

# 9. Failover: the standby learns every reservation of its primary from
# WAL, so it continues above the primary's IDs even when the primary's
# clock stepped back after it committed them, even with no bound on
# running ahead, and also after its own crash in between.
my $primary = snowflake_node('primary9', worker_id => 5, allows_streaming => 1,
	conf => "snowflake.max_run_ahead_ms = -1\n");
start_faked($primary, '+0');
$primary->safe_psql('postgres', 'CREATE EXTENSION snowflake; CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_nextval()); CREATE TABLE other (n int)');
$primary->backup('b9');
my $standby = PostgreSQL::Test::Cluster->new('standby9');
$standby->init_from_backup($primary, 'b9', has_streaming => 1);
start_faked($standby, '-1h');
$primary->safe_psql('postgres', 'INSERT INTO t SELECT FROM generate_series(1, 20000)');
# the primary's clock steps back; it commits once more, with no ID
set_clock_offset($primary, '-1h');
$primary->safe_psql('postgres', 'INSERT INTO other VALUES (1)');
$primary->wait_for_catchup($standby);
my $max9 = $standby->safe_psql('postgres', 'SELECT max(id) FROM t');
$primary->stop('immediate');
$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()');
$standby->stop('immediate');
start_faked($standby, '-1h');
$standby->safe_psql('postgres', 'INSERT INTO t SELECT FROM generate_series(1, 20000)');
is($standby->safe_psql('postgres', "SELECT count(*) FROM t WHERE id > $max9"), '20000',
	'promoted, crashed and restarted an hour behind: every new ID is above the old primary\'s');

# 9b. A promoted node stopped cleanly before its keeper raised the state
# still raises it at the next start.
my $max9b = $standby->safe_psql('postgres', 'SELECT max(id) FROM t');
my $standby2 = PostgreSQL::Test::Cluster->new('standby9b');
$standby->backup('b9b');
$standby2->init_from_backup($standby, 'b9b', has_streaming => 1);
start_faked($standby2, '-1h');
$standby->safe_psql('postgres', 'INSERT INTO t SELECT FROM generate_series(1, 5000)');
$standby->wait_for_catchup($standby2);
$max9b = $standby2->safe_psql('postgres', 'SELECT max(id) FROM t');
$standby->stop('immediate');
# promote and stop at once, as a failover script that restarts may
$standby2->promote;
$standby2->stop('fast');
start_faked($standby2, '-1h');
$standby2->safe_psql('postgres', 'INSERT INTO t SELECT FROM generate_series(1, 100)');
is($standby2->safe_psql('postgres', "SELECT count(*) FROM t WHERE id > $max9b"), '100',
	'promoted and stopped at once: after the restart, still above the old primary');
$standby2->stop('fast');
start_faked($standby, '-1h');

# 9c. Moving from 1.1, which logged each reservation as the progress of the
# replication origin snowflake_high_water_mark: the origin made here by
# hand at a mark above every ID, on a node whose state file is then
# removed.  The node continues above the mark, and drops the origin once a
# record of its own covers it.
my $max9c = $standby->safe_psql('postgres', 'SELECT max(id) FROM t');
my $high9c = $max9c + (300 << 22);	# 300 ms of ID time ahead
$standby->safe_psql('postgres', "SELECT pg_replication_origin_create('snowflake_high_water_mark')");
$standby->safe_psql('postgres', sprintf(
	"SELECT pg_replication_origin_advance('snowflake_high_water_mark', '%X/%X')",
	$high9c >> 32, $high9c & 0xffffffff));
$standby->stop('fast');
unlink $standby->data_dir . '/snowflake.state';
start_faked($standby, '-1h');
$standby->safe_psql('postgres', 'INSERT INTO t SELECT FROM generate_series(1, 100)');
is($standby->safe_psql('postgres', "SELECT count(*) FROM t WHERE id > $high9c"), '100',
	"1.1's origin: new IDs continue above its reservation");
ok($standby->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM pg_replication_origin WHERE roname = 'snowflake_high_water_mark'"),
	'and the origin is dropped');
ok($standby->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'snowflake origin check'"),
	'the worker that read it, connected to "postgres", is gone');

# 10. A state file that is gone after a crash: the reservations replayed
# from WAL still bound the IDs.
my $max10 = $standby->safe_psql('postgres', 'SELECT max(id) FROM t');
$standby->stop('immediate');
unlink $standby->data_dir . '/snowflake.state';
start_faked($standby, '-1h');
$standby->safe_psql('postgres', 'INSERT INTO t SELECT FROM generate_series(1, 100)');
is($standby->safe_psql('postgres', "SELECT count(*) FROM t WHERE id > $max10"), '100',
	'with the state file deleted, new IDs stay above the old ones');

# 11. The worker id follows a reload even while the keeper is stopped.
my ($kpid) = $standby->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'snowflake keeper'");
kill 'STOP', $kpid;
$standby->safe_psql('postgres', 'ALTER SYSTEM SET snowflake.worker_id = 6');
$standby->reload;
$standby->poll_query_until('postgres', 'SELECT snowflake_worker_id() = 6');
is($standby->safe_psql('postgres', 'SELECT snowflake_worker_id()'), '6',
	'a stopped keeper does not hold back a new worker id');
kill 'CONT', $kpid;

done_testing();
