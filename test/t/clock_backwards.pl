# The clock going backwards while the server runs, under each policy:
# refuse, wait, run ahead without limit, run ahead within a bound; and a
# stopped clock whose ticks run out.  Every step asserts on the IDs.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use POSIX qw(strftime);
use SnowflakeTest;

my $node = snowflake_node('clock', worker_id => 3);
start_faked($node, '+0');
$node->safe_psql('postgres', 'CREATE EXTENSION snowflake');

sub nextval { return $node->safe_psql('postgres', 'SELECT snowflake_nextval()'); }

# an ID, or undef with what refused it (SQLSTATE) and the whole error
sub try_nextval
{
	my ($ret, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\nSELECT snowflake_nextval()");
	my ($code) = $err =~ /ERROR:  ([0-9A-Z]{5}):/;
	return ($ret == 0 ? $out : undef, $code // $err, $err);
}

sub status
{
	my @cols = qw(last_id ids_issued waits clock_back_events clock_back_max_ms
	  run_ahead_ids run_ahead_ms refused);
	my @vals = split /\|/, $node->safe_psql('postgres',
		'SELECT ' . join(', ', @cols) . ' FROM snowflake_status');
	my %s;
	@s{@cols} = @vals;
	return \%s;
}

# epoch ms of the ID's time
sub id_ms
{
	my ($id) = @_;
	return $node->safe_psql('postgres',
		"SELECT (extract(epoch FROM snowflake_timestamp($id)) * 1000)::bigint");
}

sub reload_with
{
	my (%set) = @_;
	$node->safe_psql('postgres', "ALTER SYSTEM SET $_ = '$set{$_}'") for keys %set;
	$node->reload;
	# a new session reads the new values; wait until the postmaster has them
	for (1 .. 100)
	{
		my $ok = 1;
		for (keys %set)
		{
			my $v = $node->safe_psql('postgres',
				"SELECT setting FROM pg_settings WHERE name = '$_'");
			$ok = 0 if $v ne $set{$_};
		}
		return if $ok;
		select(undef, undef, undef, 0.05);
	}
	die "settings did not reach the server";
}

# Defaults (wait up to 10 ms, never run ahead): a 5 s step back is refused.
my $id1 = nextval();
set_clock_offset($node, '-5');
my ($id, $code, $err) = try_nextval();
is($id, undef, 'default policy: 5 s back refuses');
is($code, '55S05', 'as the clock moved backwards');
my ($back) = $err =~ /55S05: \D*(\d+)/;
ok($back >= 4000 && $back <= 6000, "the error gives the step: $back ms");
is((detail_times($err))[0], $node->safe_psql('postgres', "SELECT snowflake_timestamp($id1)"),
	'and the time of the last ID, which the clock must reach');
like($err, qr/HINT:  .*snowflake\.max_run_ahead_ms/, 'and which setting to change');
my $s = status();
is($s->{last_id}, $id1, 'nothing was issued while refusing');
ok($s->{refused} >= 1 && $s->{clock_back_events} >= 1 && $s->{clock_back_max_ms} >= 4000,
	'status counts the refusal and the step back');

# The clock comes back: generation resumes above the last ID.
set_clock_offset($node, '+0');
my $id2 = nextval();
ok($id2 > $id1, 'after the clock recovers, IDs go on increasing');

# A step back within max_clock_backward_ms is waited out.  The step is
# larger than a loaded machine takes between two statements, so that the
# clock is still behind the last ID when the next one is asked for.
reload_with('snowflake.max_clock_backward_ms' => '10000');
$s = status();
set_clock_offset($node, '-4');
my $id3 = nextval();
my $s3 = status();
ok($id3 > $id2, 'a 4 s step back within a 10 s tolerance still gives a greater ID');
ok($s3->{waits} > $s->{waits}, 'it waited for the clock');
is($s3->{run_ahead_ids}, $s->{run_ahead_ids}, 'and did not run ahead');
ok(id_ms($id3) >= id_ms($id2), 'its time is not before the last ID\'s');

# Unlimited run-ahead: a logical clock, no waiting, no error.
reload_with('snowflake.max_clock_backward_ms' => '0', 'snowflake.max_run_ahead_ms' => '-1');
set_clock_offset($node, '-20');
$s = status();
my ($n, $distinct, $min, $sorted) = split /\|/, $node->safe_psql('postgres', q{
	WITH g AS (SELECT n, snowflake_nextval() AS id FROM generate_series(1, 10000) n)
	SELECT count(*), count(DISTINCT id), min(id),
		   bool_and(id > coalesce(prev, 0))
	FROM (SELECT n, id, lag(id) OVER (ORDER BY n) AS prev FROM g) s});
is($distinct, 10000, 'run-ahead: 10000 distinct IDs');
ok($min > $id3 && $sorted eq 't', 'above the last ID and strictly increasing');
my $s4 = status();
ok($s4->{run_ahead_ids} - $s->{run_ahead_ids} >= 10000, 'all of them ran ahead of the clock');
ok($s4->{run_ahead_ms} >= 3000, "the generator reports how far ahead: $s4->{run_ahead_ms} ms");
is($s4->{waits}, $s->{waits}, 'without waiting');

# Bounded run-ahead: within the bound runs ahead, beyond it refuses.
reload_with('snowflake.max_run_ahead_ms' => '10000');
set_clock_offset($node, '-30');
($id, $code, $err) = try_nextval();
is($id, undef, 'a step back beyond max_run_ahead_ms is refused');
is($code, '55S05', 'as the clock moved backwards');
like($err, qr/HINT:  .*snowflake\.max_run_ahead_ms" \(10000 ms\)/, 'naming the bound');
set_clock_offset($node, '-4');
my $id5 = nextval();
ok($id5 > $s4->{last_id}, 'within the bound it runs ahead above the last ID');

# Back to the real clock, default policy.
reload_with('snowflake.max_clock_backward_ms' => '10', 'snowflake.max_run_ahead_ms' => '0');
set_clock_offset($node, '+0');
my $id6 = nextval();
ok($id6 > $id5, 'real clock again: above every earlier ID');
is(status()->{run_ahead_ms}, 0, 'no longer ahead of the clock');

# Under the default policy a tick never holds more than its 4096 sequence
# numbers and no ID runs ahead, however fast IDs are asked for.
$s = status();
my $over = $node->safe_psql('postgres', q{
	SELECT count(*) FROM (
		SELECT snowflake_timestamp(id) AS t, count(*) AS c
		FROM (SELECT snowflake_nextval() AS id FROM generate_series(1, 200000)) g
		GROUP BY 1) s
	WHERE c > 4096 OR t > clock_timestamp()});
is($over, '0', 'no tick overfilled, no ID from the future');
is(status()->{run_ahead_ids}, $s->{run_ahead_ids}, 'no ID ran ahead');

# A stopped clock: with unlimited run-ahead, IDs borrow the next ticks.
reload_with('snowflake.max_run_ahead_ms' => '-1');
my $frozen = time() + 60;
set_clock_offset($node, strftime('%Y-%m-%d %H:%M:%S', gmtime($frozen)));
my ($ticks, $count, $first_ms) = split /\|/, $node->safe_psql('postgres', q{
	SELECT count(DISTINCT snowflake_timestamp(id)), count(DISTINCT id),
		   (extract(epoch FROM min(snowflake_timestamp(id))) * 1000)::bigint
	FROM (SELECT snowflake_nextval() AS id FROM generate_series(1, 10000)) g});
is($count, 10000, 'stopped clock: 10000 distinct IDs');
is($first_ms, $frozen * 1000, 'starting at the stopped time');
ok($ticks >= 3, "spread over the following ticks ($ticks ticks)");

$node->stop;
done_testing();
