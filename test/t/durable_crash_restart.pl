# Never the same ID twice across a crash, a clean restart with the clock set
# back, a standby promotion and a point-in-time restore; and a server that
# refuses to recover without the library while its WAL needs it.  Every
# check is on the IDs.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SnowflakeTest;

sub max_id
{
	my ($node) = @_;
	return $node->safe_psql('postgres', 'SELECT max(id) FROM t');
}

sub reload_with
{
	my ($node, %set) = @_;
	$node->safe_psql('postgres', "ALTER SYSTEM SET $_ = '$set{$_}'") for keys %set;
	$node->reload;
	for (1 .. 100)
	{
		my $ok = 1;
		for (keys %set)
		{
			$ok = 0 if $node->safe_psql('postgres',
				"SELECT setting FROM pg_settings WHERE name = '$_'") ne $set{$_};
		}
		return if $ok;
		select(undef, undef, undef, 0.05);
	}
	die 'settings did not arrive';
}

# Power loss: the postmaster and every child die at once, nobody writes.
sub hard_crash
{
	my ($node) = @_;
	my ($pm) = split /\n/, slurp_file($node->data_dir . '/postmaster.pid');
	my @children = split /\s+/, `pgrep -P $pm`;
	kill 'KILL', $pm, grep { /^\d+$/ } @children;
	# the pid file stays behind, as after a power loss
	$node->{_pid} = undef;
	# wait until the children are gone and shared memory is free
	for (1 .. 100)
	{
		last unless grep { kill 0, $_ } grep { /^\d+$/ } @children;
		select(undef, undef, undef, 0.05);
	}
	return;
}

sub insert_rows
{
	my ($node, $n) = @_;
	$node->safe_psql('postgres',
		"INSERT INTO t (n) SELECT g FROM generate_series(1, $n) g");
}

my $node = snowflake_node('durable', worker_id => 5, has_archiving => 1, allows_streaming => 1);
start_faked($node, '+0');
$node->safe_psql('postgres', q{
	CREATE EXTENSION snowflake;
	CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), n int);
});
insert_rows($node, 5000);

my ($hwm, $last) = split /\|/, $node->safe_psql('postgres',
	'SELECT high_water_mark, last_id FROM snowflake_status');
ok($hwm > $last, 'the durable mark is reserved ahead of the last ID');
ok(-f $node->data_dir . '/snowflake.state', 'and kept in snowflake.state');

# 1. A crash, then a restart with the clock one hour behind.
# An ID that left without a commit is covered too.
my $escaped = $node->safe_psql('postgres', 'SELECT snowflake_nextval()');
my $before = max_id($node);
$before = $escaped if $escaped > $before;
$node->stop('immediate');
start_faked($node, '-1h');

# 5. The default policy refuses, saying how far behind the clock is.
my ($code, $err) = refusal($node);
is($code, '55S05', 'crash + clock 1 h back: refused, the clock having moved backwards');
my ($ms) = $err =~ /55S05: \D*(\d+)/;
ok($ms >= 3_590_000 && $ms <= 3_610_000, "by about an hour ($ms ms)");
my (undef, $clock_reads, $until) = detail_times($err);
my $wait = $node->safe_psql('postgres',
	"SELECT extract(epoch FROM '$until'::timestamptz - '$clock_reads'::timestamptz)");
ok($wait >= 3590 && $wait <= 3610, "saying until when: the clock reads $clock_reads, IDs again at $until");

# run ahead from the mark instead
reload_with($node, 'snowflake.max_run_ahead_ms' => '-1');
insert_rows($node, 1000);
my $min_after = $node->safe_psql('postgres', "SELECT min(id) FROM t WHERE id > $before");
is($node->safe_psql('postgres', "SELECT count(*) FROM t WHERE id > $before"), '1000',
	'after the crash every new ID is above every ID issued before it');

# A hard crash: only the reservation on disk is left, and new IDs start
# above it.
$before = max_id($node);
$hwm = $node->safe_psql('postgres', 'SELECT high_water_mark FROM snowflake_status');
hard_crash($node);
start_faked($node, '-1h');
insert_rows($node, 100);
$min_after = $node->safe_psql('postgres', "SELECT min(id) FROM t WHERE id > $before");
is($node->safe_psql('postgres', "SELECT count(*) FROM t WHERE id > $before"), '100',
	'after a hard crash every new ID is above every earlier one');
ok($min_after > $hwm, 'and above the durable reservation')
  or diag("min after crash $min_after, reservation $hwm, max before $before");

# 2. A clean restart with the clock set back further.
$before = max_id($node);
$node->stop('fast');
start_faked($node, '-2h');
insert_rows($node, 1000);
is($node->safe_psql('postgres', "SELECT count(*) FROM t WHERE id > $before"), '1000',
	'clean restart, clock 2 h back: new IDs above all earlier ones');

# a small step back across a restart is waited out
reload_with($node, 'snowflake.max_run_ahead_ms' => '0',
	'snowflake.max_clock_backward_ms' => '5000');
$node->stop('fast');
set_clock_offset($node, '+0');
start_faked($node, '+0');
$before = max_id($node);
insert_rows($node, 10);
is($node->safe_psql('postgres', "SELECT count(*) FROM t WHERE id > $before"), '10',
	'back on the real clock, IDs continue above');

# 3. A streaming standby, its clock an hour behind, promoted after the
# primary dies.
reload_with($node, 'snowflake.max_run_ahead_ms' => '0',
	'snowflake.max_clock_backward_ms' => '10');
$node->backup('base');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($node, 'base', has_streaming => 1);
start_faked($standby, '-1h');
is(refusal($standby), '25006', 'a hot standby refuses to generate');

# IDs a second after the last ones need a reservation of their own, logged
# after the backup began: the restores below replay it
$hwm = $node->safe_psql('postgres', 'SELECT high_water_mark FROM snowflake_status');
select(undef, undef, undef, 1.2);
insert_rows($node, 3000);
$node->poll_query_until('postgres', "SELECT high_water_mark > $hwm FROM snowflake_status")
  or die 'no reservation was made after the backup';
$node->wait_for_catchup($standby);
my $primary_max = max_id($node);
# archive the WAL holding those rows, for the restore below
my $walfile = $node->safe_psql('postgres', 'SELECT pg_walfile_name(pg_switch_wal())');
$node->poll_query_until('postgres',
	"SELECT last_archived_wal >= '$walfile' FROM pg_stat_archiver")
  or die 'WAL was not archived';
# an ID issued after the standby caught up never reaches it; the highest
# ID the primary may have issued, for the restore that replaces it below
my $primary_hwm = $node->safe_psql('postgres', 'SELECT high_water_mark FROM snowflake_status');
$node->stop('immediate');
my $primary_stopped = wall_time();
$standby->promote;

is(refusal($standby), '55S05',
	'promoted with its clock an hour behind: refused under the default policy');
reload_with($standby, 'snowflake.max_run_ahead_ms' => '-1');
insert_rows($standby, 1000);
is($standby->safe_psql('postgres', "SELECT count(*) FROM t WHERE id > $primary_max"), '1000',
	'the promoted standby issues IDs above every ID of the old primary that reached it');
my $standby_max = max_id($standby);

# and it keeps that promise across its own crash right after promotion
$standby->stop('immediate');
start_faked($standby, '-1h');
insert_rows($standby, 100);
is($standby->safe_psql('postgres', "SELECT count(*) FROM t WHERE id > $standby_max"), '100',
	'a crash of the promoted node keeps the mark');
$standby->stop('fast');

# 4. Point-in-time recovery: the old primary's base backup and archived WAL,
# restored on a node whose clock is an hour behind.
my $restored = PostgreSQL::Test::Cluster->new('restored');
$restored->init_from_backup($node, 'base', has_restoring => 1, standby => 0);
$restored->append_conf('postgresql.conf', "recovery_target_timeline = 'current'\n");
start_faked($restored, '-1h');
$restored->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'restore did not finish';
my $restored_max = max_id($restored);
is($restored_max, $primary_max, 'the restore replayed the archived rows');
is(refusal($restored), '55S01 recovery_signal', 'a restore started as a primary is held back');
is(refusal($restored, 'postgres', 'SELECT snowflake_confirm_node()'), '22004',
	'confirming it needs a floor');
# the time the primary stopped, which its clock, an hour behind, has not
# reached: taken, and the node is ahead of its clock
$restored->safe_psql('postgres', "SELECT snowflake_confirm_node(stopped_at => '$primary_stopped')");
is(refusal($restored), '55S05',
	'confirmed with the time the primary stopped, an hour ahead of its clock: refused under the default policy');
reload_with($restored, 'snowflake.max_run_ahead_ms' => '-1');
insert_rows($restored, 500);
is($restored->safe_psql('postgres', "SELECT count(*) FROM t WHERE id > $primary_hwm"), '500',
	'after a restore, new IDs are above every ID the lost primary may have issued');
ok($restored->safe_psql('postgres', 'SELECT min(id) FROM t WHERE n <= 500 AND id > ' . $restored_max) > 0,
	'the restored node generates');
$restored->stop('fast');

# 7. Without the library in shared_preload_libraries, recovery through WAL
# that holds reservations stops at the first one and says what is missing;
# with the library back it finishes and IDs continue above.
my $plain = PostgreSQL::Test::Cluster->new('plain');
$plain->init_from_backup($node, 'base', has_restoring => 1, standby => 0);
$plain->append_conf('postgresql.conf',
	"shared_preload_libraries = ''\nrecovery_target_timeline = 'current'\n");
# pg_ctl may see the server accept read-only connections before replay
# reaches the first record, and the server may be gone again before the
# harness reads its pid: start it by hand and wait for it to go
system_log('pg_ctl', '-w', '-D', $plain->data_dir, '-l', $plain->logfile, 'start');
for (1 .. 600)
{
	last unless -f $plain->data_dir . '/postmaster.pid';
	select(undef, undef, undef, 0.1);
}
ok(!-f $plain->data_dir . '/postmaster.pid',
	'without the library, recovery through its records stops');
$plain->_update_pid(-1);
like(slurp_file($plain->logfile),
	qr/resource manager with ID 187 not registered(.*\n)*.*HINT:  Include the extension module that implements this resource manager in "?shared_preload_libraries/,
	'and the log says which library is missing');
$plain->append_conf('postgresql.conf', "shared_preload_libraries = 'snowflake'\n");
$plain->start;
$plain->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'restore did not finish';
is($plain->safe_psql('postgres', 'SELECT count(*) > 0 FROM t'), 't',
	'with the library back, recovery finishes');
is(refusal($plain), '55S01 recovery_signal', 'a restore started as a primary is held back');
is(refusal($plain, 'postgres', 'SELECT snowflake_confirm_node()'), '22004',
	'confirming it needs a floor');
$plain->safe_psql('postgres', "SELECT snowflake_confirm_node(stopped_at => '$primary_stopped')");
insert_rows($plain, 10);
is($plain->safe_psql('postgres', "SELECT count(*) FROM t WHERE id > $primary_hwm"), '10',
	'with the library back and the time the primary stopped, IDs continue above every ID it may have issued');
$plain->stop('fast');

done_testing();
