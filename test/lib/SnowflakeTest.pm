# SnowflakeTest: nodes with the extension preloaded, optionally under a
# clock that the test moves with libfaketime.
package SnowflakeTest;

use strict;
use warnings;
use SnowflakeCap;
use Exporter 'import';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Time::HiRes ();

our @EXPORT = qw(snowflake_node start_faked set_clock_offset tear_state_file id_order_lag
  session_ids refusal set_worker pg_upgrade_ok wall_time detail_times state_mark wake_subscriptions);

my $libfaketime = (glob('/usr/lib/*/faketime/libfaketime.so.1'))[0];

# snowflake_node(NAME, worker_id => N, conf => "extra lines", %init_opts)
sub snowflake_node
{
	my ($name, %opts) = @_;
	my $worker = delete $opts{worker_id} // 1;
	my $conf = delete $opts{conf} // '';
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init(%opts);
	$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'snowflake'
snowflake.worker_id = $worker
search_path = '"\$user", public, snowflake'
$conf
});
	return $node;
}

# The file libfaketime reads on every clock call of the server.
sub clock_file
{
	my ($node) = @_;
	return $node->basedir . '/faketime';
}

# Move the server's clock: OFFSET as libfaketime takes it ("+0", "-5",
# "-1h"); seconds may have decimals.
sub set_clock_offset
{
	my ($node, $offset) = @_;
	my $file = clock_file($node);
	open my $fh, '>', "$file.tmp" or die "cannot write $file.tmp: $!";
	print $fh "$offset\n";
	close $fh;
	rename "$file.tmp", $file or die "cannot rename to $file: $!";
	return;
}

# The shell commands the server runs (archive_command, restore_command)
# would inherit libfaketime, under which cp was seen to hang on some
# versions; run them without it.
sub keep_commands_real
{
	my ($node) = @_;
	my $conf = $node->data_dir . '/postgresql.conf';
	my $text = slurp_file($conf);
	my @add;
	for my $name ('archive_command', 'restore_command')
	{
		my @lines = $text =~ /^\s*$name\s*=\s*'(.*)'\s*$/mg;
		next unless @lines;
		my $cmd = $lines[-1];
		next if $cmd eq '' || $cmd =~ /^env -u LD_PRELOAD /;
		push @add, "$name = 'env -u LD_PRELOAD $cmd'";
	}
	$node->append_conf('postgresql.conf', join("\n", @add) . "\n") if @add;
	return;
}

# Start the node with libfaketime preloaded into the server only.
sub start_faked
{
	my ($node, $offset, %start_opts) = @_;
	die "libfaketime is not installed (Debian package faketime)"
	  unless $libfaketime;
	set_clock_offset($node, $offset // '+0');
	keep_commands_real($node);
	# before whatever is preloaded already: after the sanitizers' runtime
	# of make sanitize, libfaketime deadlocks the runtime's start-up (which
	# make sanitize lets come second)
	local $ENV{LD_PRELOAD} =
	  join(':', grep { defined && $_ ne '' } $libfaketime, $ENV{LD_PRELOAD});
	local $ENV{FAKETIME_TIMESTAMP_FILE} = clock_file($node);
	local $ENV{FAKETIME_NO_CACHE} = '1';
	# keep the server's own timers (checkpoints, timeouts) on real time
	local $ENV{FAKETIME_DONT_FAKE_MONOTONIC} = '1';
	return $node->start(%start_opts);
}

# What a crash in the middle of writing the next record leaves: half of the
# slot that does not hold the newest record (the one the next write goes
# to) overwritten with garbage.  The newest record stays intact, as it does
# after a real torn write.
sub tear_state_file
{
	my ($file) = @_;
	open my $fh, '+<', $file or die "cannot open $file: $!";
	binmode $fh;
	read($fh, my $buf, 1024) == 1024 or die "$file is not a two-slot state file";
	my @writes = map { (unpack('V V V V Q<', substr($buf, $_ * 512, 24)))[4] } 0, 1;
	my $older = $writes[0] < $writes[1] ? 0 : 1;
	seek $fh, $older * 512 + 16, 0;
	print $fh join '', map { chr(($_ * 131 + 7) % 256) } 1 .. 256;
	close $fh;
	return;
}

# state_mark(FILE): the mark of the newest record a two-slot state file
# holds: its first 96 bytes (the highest ID the node may have issued, the
# clock it saw, the layout, flags and undo floor), without the slot's
# counter or the node's part, which every start writes anew.
sub state_mark
{
	my ($file) = @_;
	open my $fh, '<', $file or die "cannot open $file: $!";
	binmode $fh;
	read($fh, my $buf, 1024) == 1024 or die "$file is not a two-slot state file";
	close $fh;
	my @writes = map { (unpack('V V V V Q<', substr($buf, $_ * 512, 24)))[4] } 0, 1;
	my $newest = $writes[0] > $writes[1] ? 0 : 1;
	return substr($buf, $newest * 512 + 24, 96);
}

# id_order_lag(WRITERS, READER, TAG, ROUNDS, SETTLE): ROUNDS rounds about
# 40 ms apart; in each, every writer (a node, in the order given) inserts
# one row into events with node = its place (from 1), round and payload
# TAG.  SETTLE waits until READER has every row.  Returns by how many
# rounds id order runs behind insert order at most; how far, in ms between
# the rounds' starts, a row comes after one of a later round at most; and
# the longest a round's inserts took, in ms.  A row of round r follows one
# of round r' in id order only if the clocks' skew exceeds the time from
# r's insert to r''s: the disorder is at most the skew plus the longest
# round, whatever stalls the machine had between rounds.
sub id_order_lag
{
	my ($writers, $reader, $tag, $rounds, $settle) = @_;
	my (@start, $longest_ms);
	$longest_ms = 0;
	for my $r (1 .. $rounds)
	{
		$start[$r] = Time::HiRes::time();
		$writers->[ $_ - 1 ]->safe_psql('postgres',
			"INSERT INTO events (node, round, payload) VALUES ($_, $r, '$tag')")
		  for 1 .. @$writers;
		my $took = (Time::HiRes::time() - $start[$r]) * 1000;
		$longest_ms = $took if $took > $longest_ms;
		Time::HiRes::usleep(40_000);
	}
	$settle->();
	my ($lag, $disorder_ms, $latest) = (0, 0, 0);
	for my $round (split /\n/, $reader->safe_psql('postgres',
		"SELECT round FROM events WHERE payload = '$tag' ORDER BY id"))
	{
		$latest = $round if $round > $latest;
		$lag = $latest - $round if $latest - $round > $lag;
		my $behind = ($start[$latest] - $start[$round]) * 1000;
		$disorder_ms = $behind if $behind > $disorder_ms;
	}
	return ($lag, $disorder_ms, $longest_ms);
}

# session_ids(NODE, TABLE): of the IDs sessions wrote into TABLE (session,
# n, id: n counting each session's calls), how many there are, how many
# repeat one before, and how many are not above their session's previous
# one.
sub session_ids
{
	my ($node, $table) = @_;
	return split /\|/, $node->safe_psql('postgres', qq{
		SELECT count(*), count(*) - count(DISTINCT id), count(*) FILTER (WHERE id <= prev)
		FROM (SELECT id, lag(id) OVER (PARTITION BY session ORDER BY n) AS prev FROM $table) s});
}

# refusal(NODE, DB, SQL): what one call (snowflake_nextval() by default) in
# DB (postgres by default) gave: 'generated', or its SQLSTATE and, where
# the node is held back, broken or disabled, the reason snowflake_status
# gives ("55S01 backup_label").  Never the message's words: the tests key
# on these.  In list context also the whole error, for its hint.
sub refusal
{
	my ($node, $db, $sql) = @_;
	$db //= 'postgres';
	my ($ret, $out, $err) = $node->psql($db,
		"\\set VERBOSITY verbose\n" . ($sql // 'SELECT snowflake_nextval()'));
	return wantarray ? ('generated', '') : 'generated' if $ret == 0;
	my ($code) = $err =~ /(?:ERROR|FATAL):  ([0-9A-Z]{5}):/;
	my $what = $code // $err;
	# the refusals of a node's state: held back, broken, disabled
	if (defined $code && $code =~ /^(55S0[1-4]|58030|XX001|F0000|55000)$/)
	{
		# the extension's schema, wherever the session's search_path is
		my ($r2, $reason) = $node->psql($db,
			'SET search_path = public, snowflake; SELECT reason FROM snowflake_status WHERE reason IS NOT NULL');
		$what .= " $reason" if $r2 == 0 && $reason ne '';
	}
	return wantarray ? ($what, $err) : $what;
}

# wall_time(): the time now, as a timestamptz literal (UTC, microseconds):
# the stopped_at a confirmation gives once the node it replaces stopped.
sub wall_time
{
	my $t = Time::HiRes::time();
	my @g = gmtime(int $t);
	return sprintf('%04d-%02d-%02d %02d:%02d:%02d.%06d+00', $g[5] + 1900, $g[4] + 1,
		@g[ 3, 2, 1, 0 ], ($t - int $t) * 1_000_000);
}

# detail_times(ERROR): the timestamps the DETAIL of an error names, in
# order (the values the message carries, not its words).
sub detail_times
{
	my ($err) = @_;
	my ($detail) = $err =~ /^DETAIL:  (.*)$/m;
	return () unless defined $detail;
	return $detail =~ /(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?[+-]\d\d(?::\d\d)?)/g;
}

# set_worker(NODE, WORKER): snowflake.worker_id by ALTER SYSTEM and a
# reload, waited for.
sub set_worker
{
	my ($node, $worker) = @_;
	$node->safe_psql('postgres', "ALTER SYSTEM SET snowflake.worker_id = $worker");
	$node->reload;
	$node->poll_query_until('postgres', "SELECT current_setting('snowflake.worker_id') = '$worker'")
	  or die "worker id $worker did not take";
	return;
}

# pg_upgrade_ok(OLD, NEW, NAME): pg_upgrade from OLD's stopped data
# directory into NEW's, run from NEW's base directory, as one test.
sub pg_upgrade_ok
{
	my ($old, $new, $name) = @_;
	my $bindir = $new->config_data('--bindir');
	chdir $new->basedir or die;
	command_ok([ 'pg_upgrade', '--no-sync', '-d', $old->data_dir, '-D', $new->data_dir,
		'-b', $bindir, '-B', $bindir, '-p', $old->port, '-P', $new->port,
		'-s', $new->host ], $name);
	return;
}


# wake_subscriptions(NODES): on PostgreSQL 16, an ENABLE of each enabled
# subscription of the postgres database that has no apply worker, for a
# test that waits for a mesh to be whole.  16's launcher (16.2 at least)
# can miss that a worker ended as it started (its publisher down) and
# start it again only 3 minutes later; an ENABLE wakes it, as
# docs/mesh.md says.
sub wake_subscriptions
{
	for my $node (@_)
	{
		next if $node->pg_version->major != 16;
		# psql, not safe_psql: a node down is the caller's to report
		$node->psql('postgres', q{
			SELECT format('ALTER SUBSCRIPTION %I ENABLE', s.subname) FROM pg_subscription s
			 WHERE s.subenabled
			   AND s.subdbid = (SELECT oid FROM pg_database WHERE datname = current_database())
			   AND NOT EXISTS (SELECT FROM pg_stat_subscription st
			                    WHERE st.subid = s.oid AND st.relid IS NULL AND st.pid IS NOT NULL)
			\gexec});
	}
	return;
}

1;
