# Generating under every layout preset, ShardingSphere's for a JVM's time
# zone and a custom layout, changing the layout of a node that already
# issued IDs (between zones too), and DecimalId's generator id across
# restarts.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SnowflakeTest;

my $node = snowflake_node('layouts', worker_id => 5);
my $nodes = 0;

# fresh: a new node, with no IDs issued yet (the reservations a node logged
# in WAL outlive its state file, so removing the file is not a new start)
sub restart_with
{
	my ($conf, %opt) = @_;
	$node->stop('fast') if $node->{_pid};
	if ($opt{fresh})
	{
		$node = snowflake_node('layouts' . ++$nodes, worker_id => 5);
		$node->append_conf('postgresql.conf', $conf);
		$node->start;
		$node->safe_psql('postgres', 'CREATE EXTENSION snowflake');
		return;
	}
	$node->append_conf('postgresql.conf', $conf);
	$node->start;
	return;
}

# 'generated' (it ran), or what refused the statement: its SQLSTATE (and
# the node's reason, where it is held, broken or disabled); and the error
sub try_sql
{
	my ($sql) = @_;
	return refusal($node, 'postgres', $sql);
}

restart_with('');
$node->safe_psql('postgres', 'CREATE EXTENSION snowflake');
$node->stop;

my ($code, $err);

# every preset generates IDs that its own decoder reads back
for my $layout (qw(shardingsphere twitter discord instagram sonyflake javascript))
{
	restart_with("snowflake.layout = '$layout'\n", fresh => 1);
	my $r = $node->safe_psql('postgres', qq{
		WITH g AS (SELECT n, snowflake_nextval() AS id FROM generate_series(1, 3000) n)
		SELECT count(DISTINCT id),
			   bool_and((snowflake_decode(id, '$layout')).worker_id = 5),
			   bool_and(snowflake_decode(id) = snowflake_decode(id, '$layout')),
			   bool_and(abs(extract(epoch FROM snowflake_timestamp(id, '$layout') - now())) < 10),
			   bool_and(id > coalesce(prev, 0)),
			   max(id) <= (SELECT max_id FROM snowflake_layouts() WHERE name = '$layout')
		FROM (SELECT n, id, lag(id) OVER (ORDER BY n) AS prev FROM g) s});
	is($r, '3000|t|t|t|t|t', "$layout: unique, increasing IDs with worker 5 and the time of now");

	# a block of a whole tick: one tick, worker 5, the sequence numbers
	# from 0 to the last, in order, above the IDs before it
	my $capacity = $node->safe_psql('postgres',
		"SELECT 1 << seq_bits FROM snowflake_layouts() WHERE name = '$layout'");
	$r = $node->safe_psql('postgres', qq{
		SELECT snowflake_nextval() AS before \\gset
		SELECT count(*) = $capacity, count(DISTINCT (snowflake_decode(id)).ts),
			   bool_and((snowflake_decode(id)).worker_id = 5),
			   bool_and((snowflake_decode(id)).seq = n - 1),
			   bool_and(id > :before), max(id) < snowflake_nextval()
		FROM snowflake_nextval_series($capacity) WITH ORDINALITY s(id, n)});
	is($r, 't|1|t|t|t|t', "$layout: a series of $capacity IDs fills one tick, in order");
	$code = try_sql("SELECT snowflake_nextval_block(2)");
	if ($layout eq 'sonyflake')
	{
		is($code, '0A000', 'sonyflake: a block is not first .. first + n - 1 there, and is refused');
	}
	else
	{
		is($code, 'generated', "$layout: a block of 2");
	}
	($code, $err) = try_sql("SELECT snowflake_nextval_block($capacity + 1)");
	is($code, '22023', "$layout: a block of $capacity + 1 is refused");
	like($err, qr/DETAIL:  .*\b$capacity\b.*"$layout"/, "naming the limit, $capacity, and the layout");
}

# the worker id's range follows the layout
restart_with("snowflake.layout = 'sonyflake'\n", fresh => 1);
$code = try_sql("ALTER SYSTEM SET snowflake.worker_id = 65535");
is($code, 'generated', 'sonyflake takes a 16-bit machine id');
$code = try_sql("ALTER SYSTEM SET snowflake.worker_id = 65536");
is($code, '22023', 'but no more');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET snowflake.worker_id');
restart_with("snowflake.layout = 'javascript'\n", fresh => 1);
($code, $err) = try_sql("ALTER SYSTEM SET snowflake.worker_id = 64");
is($code, '22023', 'javascript: a 6-bit worker id, so not 64');
like($err, qr/DETAIL:  .*"javascript"\D*\b6\b\D*\b0\b\D*\b63\b/, 'naming the layout, its 6 bits and the range 0 to 63');

# a custom layout
restart_with(q{
snowflake.layout = 'custom'
snowflake.custom_time_bits = 40
snowflake.custom_worker_bits = 8
snowflake.custom_seq_bits = 15
snowflake.custom_tick_ms = 2
snowflake.custom_epoch = '2024-01-01'
}, fresh => 1);
is($node->safe_psql('postgres', q{
	SELECT (d).worker_id, abs(extract(epoch FROM (d).ts - now())) < 10,
		   abs((snowflake_nextval() >> 23)
			   - ((extract(epoch FROM clock_timestamp()) * 1000)::bigint - 1704067200000) / 2) <= 500
	FROM (SELECT snowflake_decode(snowflake_nextval()) AS d) s}),
	'5|t|t', 'custom layout: fields where the settings put them (the time in 2 ms ticks from bit 23, within a second)');

# a custom layout that cannot work: the server starts, the generator refuses
my $log_offset = -s $node->logfile;
restart_with("snowflake.custom_time_bits = 50\n");
ok($node->log_contains(qq{snowflake layout "custom" cannot be used\n.*The fields take 73 bits}, $log_offset),
	'too wide: the server logs why');
$code = try_sql('SELECT snowflake_nextval()');
is($code, 'F0000 layout_unusable', 'and the generator refuses');
restart_with("snowflake.custom_time_bits = 40\nsnowflake.custom_epoch = '2999-01-01'\n");
($code, $err) = try_sql('SELECT snowflake_nextval()');
is($code, 'F0000 layout_unusable', 'an epoch in the future is refused');
like($err, qr/ERROR:  F0000: .*snowflake\.custom_epoch/s, 'naming the setting');
restart_with("snowflake.custom_epoch = 'yesterday'\n");
($code, $err) = try_sql('SELECT snowflake_decode(1)');
is($code, 'F0000 layout_unusable', 'so is an epoch that is not a date');
like($err, qr/ERROR:  F0000: .*snowflake\.custom_epoch\b.*"yesterday"/s, 'naming the setting and its value');

# changing the layout of a node that issued IDs: never below them
restart_with("snowflake.layout = 'shardingsphere'\n", fresh => 1);
my $last = $node->safe_psql('postgres', 'SELECT max(snowflake_nextval()) FROM generate_series(1, 100)');
restart_with("snowflake.layout = 'twitter'\n");
my $next = $node->safe_psql('postgres', 'SELECT snowflake_nextval()');
ok($next > $last, 'shardingsphere to twitter: IDs continue above');
restart_with("snowflake.layout = 'shardingsphere'\n");
($code, $err) = try_sql('SELECT snowflake_nextval()');
is($code, '55S04 layout_below', 'twitter back to shardingsphere: refused, as the layout cannot continue above');
like($err, qr/ERROR:  55S04: .*"shardingsphere".*"twitter"/, 'naming both layouts');
restart_with("snowflake.layout = 'twitter'\n");
ok($node->safe_psql('postgres', 'SELECT snowflake_nextval()') > $next, 'back on twitter it goes on');

# ShardingSphere's layout for a JVM in New York: its epoch is local
# midnight of 2016-11-01 there, 04:00 UTC (daylight saving time until
# November 6), so its IDs carry the time they are made in that layout and
# a time four hours earlier in plain shardingsphere's (a JVM in UTC).  The
# name is canonical: the zone as the time zone database spells it.
restart_with("snowflake.layout = 'ShardingSphere\@america/new_york'\n", fresh => 1);
my $r = $node->safe_psql('postgres', q{
	SELECT date_trunc('milliseconds', clock_timestamp()) AS before \gset
	SELECT snowflake_nextval() AS id \gset
	SELECT (d).ts BETWEEN :'before' AND clock_timestamp(), (d).worker_id,
		   d = snowflake_decode(:id, 'shardingsphere@America/New_York'),
		   snowflake_timestamp(:id, 'shardingsphere') - (d).ts,
		   current_setting('snowflake.layout'), (SELECT layout FROM snowflake_status)
	FROM (SELECT snowflake_decode(:id) AS d) s});
is($r, 't|5|t|-04:00:00|shardingsphere@America/New_York|shardingsphere@America/New_York',
	'shardingsphere@America/New_York: IDs of the time they are made, 4 hours off UTC, under the canonical name');
ok($node->log_contains('in layout "shardingsphere@America/New_York"'),
	'and the server log names it so');

# a zone the server does not know: the node starts and refuses to generate,
# and the log says why
$log_offset = -s $node->logfile;
restart_with("snowflake.layout = 'shardingsphere\@Mars/Olympus'\n");
($code, $err) = try_sql('SELECT snowflake_nextval()');
is($code, 'F0000 layout_rejected', 'an unknown zone: the generator refuses (F0000)');
like($err, qr/ERROR:  F0000: .*snowflake\.layout\b.*'shardingsphere\@Mars\/Olympus'/s, 'naming the setting and its value');
ok($node->log_contains('invalid value for parameter "snowflake.layout": "shardingsphere@Mars/Olympus"', $log_offset)
	  && $node->log_contains('Time zone "Mars/Olympus" is not in this server\'s time zone database', $log_offset),
	'and the server log says why');
$code = try_sql('SELECT snowflake_decode(1)');
is($code, 'F0000 layout_rejected', 'so does decoding in the server\'s layout');

# changing between zones: to a zone whose epoch is earlier (further east)
# the node continues above its IDs; to one whose epoch is later it refuses,
# since its IDs there would be smaller
restart_with("snowflake.layout = 'shardingsphere'\n", fresh => 1);
$last = $node->safe_psql('postgres', 'SELECT max(snowflake_nextval()) FROM generate_series(1, 100)');
$log_offset = -s $node->logfile;
restart_with("snowflake.layout = 'shardingsphere\@Asia/Shanghai'\n");
$next = $node->safe_psql('postgres', 'SELECT snowflake_nextval()');
ok($next > $last, 'shardingsphere (UTC) to shardingsphere@Asia/Shanghai: IDs continue above');
ok($node->log_contains('snowflake layout changed from "shardingsphere" to "shardingsphere@Asia/Shanghai"', $log_offset),
	'and the server log says the layout changed');
is($node->safe_psql('postgres', "SELECT snowflake_timestamp($next) - snowflake_timestamp($next, 'shardingsphere')"),
	'-08:00:00', 'the new IDs carry their time in Shanghai\'s epoch');
restart_with("snowflake.layout = 'shardingsphere'\n");
($code, $err) = try_sql('SELECT snowflake_nextval()');
is($code, '55S04 layout_below', 'shardingsphere@Asia/Shanghai back to shardingsphere (UTC): refused');
like($err, qr/ERROR:  55S04: .*"shardingsphere".*"shardingsphere\@Asia\/Shanghai"/, 'naming both layouts');
restart_with("snowflake.layout = 'shardingsphere\@+08:00'\n");
my $fixed = $node->safe_psql('postgres', 'SELECT snowflake_nextval()');
ok($fixed > $next, 'shardingsphere@Asia/Shanghai to shardingsphere@+08:00, the same epoch: IDs continue above');
restart_with("snowflake.layout = 'shardingsphere\@Asia/Kolkata'\n");
($code, $err) = try_sql('SELECT snowflake_nextval()');
is($code, '55S04 layout_below', 'shardingsphere@+08:00 to shardingsphere@Asia/Kolkata, an epoch 2.5 hours later: refused');
like($err, qr/ERROR:  55S04: .*"shardingsphere\@Asia\/Kolkata".*"shardingsphere\@\+08:00"/, 'naming both layouts');
restart_with("snowflake.layout = 'shardingsphere\@Asia/Tokyo'\n");
ok($node->safe_psql('postgres', 'SELECT snowflake_nextval()') > $fixed,
	'to shardingsphere@Asia/Tokyo, an hour earlier: IDs continue above');

# DecimalId: the generator id advances at every start, also after a crash
sub generator_id
{
	return $node->safe_psql('postgres', 'SELECT (decimal_id_decode(decimal_id_nextval())).generator_id');
}
my $g1 = generator_id();
restart_with('');
my $g2 = generator_id();
is($g2, $g1 + 1, 'a restart takes the next generator id');
$node->stop('immediate');
$node->start;
is(generator_id(), $g2 + 1, 'so does a crash restart');
restart_with("snowflake.decimal_generator_min = 700\nsnowflake.decimal_generator_max = 700\nsnowflake.launch_id = 65\n");
is($node->safe_psql('postgres', 'SELECT * FROM decimal_id_decode(decimal_id_nextval())'),
	'1|700|65', 'a node range and a launch id');
restart_with('');
($code, $err) = try_sql('SELECT decimal_id_nextval()');
is($code, '55000', 'a used-up range refuses');
like($err, qr/HINT:  .*snowflake\.decimal_generator_min.*snowflake\.decimal_generator_max/,
	'naming the settings that give the range');

$node->stop;
done_testing();
