# Every function tells the truth (issue 20): the IMMUTABLE decoders keep
# their answers when every setting they could read changes, no call waits
# for a long tick, an operator's repair cannot leave a node unable to
# generate without force and a forced one can be undone, and settings that
# cannot work are refused at server start with the setting named.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use POSIX qw(strftime);
use SnowflakeTest;

my $nodes = 0;
my $node;

# a new node with these lines in its configuration
sub fresh_node
{
	my ($conf, %opt) = @_;
	$node->stop('fast') if $node && $node->{_pid};
	$node = snowflake_node('truthful' . ++$nodes, worker_id => $opt{worker} // 1, conf => $conf);
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION snowflake');
	$node->safe_psql('postgres', q{
		CREATE FUNCTION sqlstate(q text) RETURNS text LANGUAGE plpgsql AS $$
		DECLARE d text;
		BEGIN EXECUTE q; RETURN 'ok';
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
			RETURN SQLSTATE || ' ' || SQLERRM || ' ' || d;
		END $$});
	return;
}

# the SQLSTATE of a statement, or 'ok'; in list context also its message,
# for the values it names
sub state_of
{
	my ($sql) = @_;
	$sql =~ s/'/''/g;
	my ($code, $msg) = split / /, $node->safe_psql('postgres', "SELECT sqlstate('$sql')"), 2;
	return wantarray ? ($code, $msg // '') : $code;
}

# 1. The IMMUTABLE decoders: a custom layout named with its parameters in
# an index and a generated column, as README shows; then every setting a
# function reads changes, and each answer is recomputed.
my $custom = 'custom:40/8/15/2ms/2024-01-01';
fresh_node(q{
snowflake.layout = 'custom'
snowflake.custom_time_bits = 40
snowflake.custom_worker_bits = 8
snowflake.custom_seq_bits = 15
snowflake.custom_tick_ms = 2
snowflake.custom_epoch = '2024-01-01'
});
my ($code, $hint) = refusal($node, 'postgres', "SELECT snowflake_timestamp(1, 'custom')");
is($code, '22023', "plain 'custom' is refused by the IMMUTABLE forms");
like($hint, qr/HINT:  .*'\Q$custom\E'/, "the hint names the server's custom layout with its parameters");
$node->safe_psql('postgres', qq{
	CREATE TABLE orders (
		id bigint PRIMARY KEY DEFAULT snowflake_nextval(),
		made timestamptz GENERATED ALWAYS AS (snowflake_timestamp(id, '$custom')) STORED,
		item text);
	CREATE INDEX orders_made ON orders (snowflake_timestamp(id, '$custom'));
	CREATE INDEX orders_worker ON orders (((snowflake_decode(id, '$custom')).worker_id));
	CREATE INDEX orders_bound ON orders (snowflake_from_timestamp(snowflake_timestamp(id, '$custom'), '$custom'));
	CREATE TABLE tweets (id bigint PRIMARY KEY);
	CREATE INDEX tweets_at ON tweets (snowflake_timestamp(id, 'twitter'));
	INSERT INTO orders (item) SELECT 'x' FROM generate_series(1, 1000);
	INSERT INTO tweets SELECT 1050118621198921728 + g::bigint * 4194304 FROM generate_series(0, 999) g;
});

# every setting a decoding function could read, changed
$node->stop;
$node->append_conf('postgresql.conf', q{
snowflake.layout = 'custom'
snowflake.custom_time_bits = 41
snowflake.custom_worker_bits = 10
snowflake.custom_seq_bits = 12
snowflake.custom_tick_ms = 1
snowflake.custom_epoch = '2020-01-01'
snowflake.custom_seq_above_worker = on
snowflake.worker_id = 3
snowflake.max_run_ahead_ms = 100
snowflake.max_clock_backward_ms = 50
});
$node->start;

my $checks = qq{
	SELECT
	  (SELECT count(*) FROM orders WHERE made IS DISTINCT FROM snowflake_timestamp(id, '$custom')),
	  (SELECT count(*) FROM orders o WHERE
		 (SELECT count(*) FROM orders i WHERE snowflake_timestamp(i.id, '$custom') = snowflake_timestamp(o.id, '$custom'))
		 <> (SELECT count(*) FROM orders i WHERE i.made = o.made)),
	  (SELECT count(*) FROM orders WHERE (snowflake_decode(id, '$custom')).worker_id = 1),
	  (SELECT count(*) FROM orders WHERE snowflake_from_timestamp(snowflake_timestamp(id, '$custom'), '$custom') <= id),
	  (SELECT count(*) FROM tweets WHERE snowflake_timestamp(id, 'twitter') >= '2018-10-10 20:19:24.211+00'),
	  (SELECT count(*) FROM tweets WHERE snowflake_timestamp(id, 'twitter') < '2018-10-10 20:19:24.411+00')};
my $seq = $node->safe_psql('postgres', "SET enable_indexscan = off; SET enable_bitmapscan = off; $checks");
my $idx = $node->safe_psql('postgres', "SET enable_seqscan = off; $checks");
is($seq, '0|0|1000|1000|1000|200', 'after the restart: stored values equal a recomputation, and every row is found');
is($idx, $seq, 'and the indexes answer as sequential scans do');
like($node->safe_psql('postgres', qq{SET enable_seqscan = off; EXPLAIN (COSTS OFF)
	SELECT count(*) FROM orders WHERE snowflake_timestamp(id, '$custom') < now()}),
	qr/orders_made/, 'the expression index was used');

# 3. A long tick: no call waits for it.  A fresh node has issued nothing
# in the current tick, so its first ID is in it, at once; the call that
# finds the tick used up is refused at once and says why, not held until
# the next hour.  Ticks begin on the hour (UTC): the section starts at
# least a minute before the next one, so that it runs within one tick.
my $to_hour = 3600 - time() % 3600;
sleep($to_hour + 1) if $to_hour < 60;
fresh_node(q{
snowflake.layout = 'custom'
snowflake.custom_time_bits = 30
snowflake.custom_tick_ms = '1h'
snowflake.custom_epoch = '2024-01-01'
});
my $first = $node->safe_psql('postgres', q{
	SET statement_timeout = '60s';
	SELECT sqlstate('SELECT snowflake_nextval()')});
is($first, 'ok', '1-hour tick: a fresh node issues its first ID in the current tick, at once');
# a block is judged as a whole: the tick holds a small one, not a whole
# tick's worth beside the ID already issued
my $capacity = $node->safe_psql('postgres',
	q{SELECT 1 << current_setting('snowflake.custom_seq_bits')::int});
my ($state, $msg) = state_of("SET statement_timeout = '60s'; SELECT snowflake_nextval_block($capacity)");
is($state, '55S07', '1-hour tick: a block of a whole tick beside an issued ID is refused at once');
like($msg, qr/"custom"\D*\b$capacity\b/, 'naming the layout and the size of the block');
is($node->safe_psql('postgres', q{
	SELECT snowflake_timestamp(b) = snowflake_timestamp(snowflake_from_timestamp(clock_timestamp()))
	FROM snowflake_nextval_block(100) b}),
	't', '1-hour tick: a block that fits is issued in the current tick');
my $over = $node->safe_psql('postgres', q{
	SET statement_timeout = '60s';
	SELECT sqlstate('SELECT count(snowflake_nextval()) FROM generate_series(1, 5000)')});
like($over, qr/^55S07 /,
	'1-hour tick: the call that finds the tick used up is refused, not held until the next hour');
$node->safe_psql('postgres', q{ALTER SYSTEM SET snowflake.max_run_ahead_ms = '2h'; SELECT pg_reload_conf()});
$node->poll_query_until('postgres', q{SHOW snowflake.max_run_ahead_ms}, '2h');
my $t1 = $node->safe_psql('postgres', "SELECT snowflake_nextval() >> 22");
ok($t1 > 0, 'with run-ahead allowed it issues the next tick');

# a changed worker id continues in the same tick when its IDs are above
$node->safe_psql('postgres', q{ALTER SYSTEM SET snowflake.worker_id = 2; SELECT pg_reload_conf()});
$node->poll_query_until('postgres', 'SELECT snowflake_worker_id()', '2');
my $t2 = $node->safe_psql('postgres', "SELECT snowflake_nextval() >> 22");
is($t2, $t1, 'a higher worker id goes on in the same tick');
$node->safe_psql('postgres', q{ALTER SYSTEM SET snowflake.worker_id = 0; SELECT pg_reload_conf()});
$node->poll_query_until('postgres', 'SELECT snowflake_worker_id()', '0');
my $t3 = $node->safe_psql('postgres', "SELECT snowflake_nextval() >> 22");
is($t3, $t1 + 1, 'a lower one takes the next tick');

# 4. Repairs: a value far ahead needs force; a forced one can be undone.
fresh_node('');
my $before = $node->safe_psql('postgres', 'SELECT max(snowflake_nextval()) FROM generate_series(1, 100)');
for my $id ('9223372036854775806', '9000000000000000000')
{
	my ($code, $err) = refusal($node, 'postgres', "SELECT snowflake_repair_state($id)");
	is($code, '22023', $id eq '9000000000000000000' ? 'far ahead of the clock: refused'
		: 'the largest ID but one: refused');
	like($err, qr/ERROR:  22023: .*\b$id\b/, '... naming the ID');
	like($err, qr/HINT:  .*force => true/, '... and the step that repairs to it anyway');
}
($state, $msg) = state_of('SELECT snowflake_repair_state(0, force => true)');
is($state, '55000', 'a node that issued IDs since it started cannot be lowered');
like($msg, qr/lowered to 0 /, '... to the value given');
is(scalar state_of('SELECT snowflake_repair_state(9223372036854775806, force => true)'), 'ok', 'forced: accepted');
is(scalar state_of('SELECT snowflake_nextval()'), '2200H', 'and the node cannot generate: no time bits left');
$node->safe_psql('postgres', 'SELECT snowflake_repair_state(0)');
is(scalar state_of('SELECT snowflake_nextval()'), '2200H', 'an ordinary repair does not lower it');
$node->restart;
my $undone = $node->safe_psql('postgres', 'SELECT snowflake_repair_state(0, force => true)');
ok($undone >= $before && $undone < 9000000000000000000,
	"after a restart a forced repair undoes it, down to the reservation logged in WAL ($undone)");
my $after = $node->safe_psql('postgres', 'SELECT snowflake_nextval()');
ok($after > $before, 'the node generates again, above every ID it issued');
my $near = $node->safe_psql('postgres',
	"SELECT snowflake_from_timestamp(clock_timestamp() + interval '200 ms')");
is(scalar state_of("SELECT snowflake_repair_state($near)"), 'ok', 'a value within the policy needs no force');

# 5. Settings that cannot work: refused at server start, the setting named
my $yesterday = strftime('%Y-%m-%d', gmtime(time - 86400));
fresh_node(qq{
snowflake.layout = 'custom'
snowflake.custom_time_bits = 1
snowflake.custom_worker_bits = 31
snowflake.custom_seq_bits = 31
snowflake.custom_tick_ms = '1d'
snowflake.custom_epoch = '$yesterday'
});
($state, $msg) = state_of('SELECT snowflake_nextval()');
is($state, 'F0000', 'a layout whose last tick has begun: refused at start');
like($msg, qr/"custom".*snowflake\.custom_time_bits = 1\b/, '... naming the setting');
is(refusal($node), 'F0000 layout_unusable', '... the node disabled by it');
is(scalar state_of('SELECT snowflake_repair_state()'), 'F0000', 'and the repair says the same');

fresh_node(q{
snowflake.layout = 'custom'
snowflake.custom_epoch = '99999999999999999999'
});
($state, $msg) = state_of('SELECT snowflake_nextval()');
is($state, 'F0000', 'an epoch too large for int64 is refused');
like($msg, qr/custom_epoch\b.*"99999999999999999999"/, '... naming the setting and its value');

# one unusable setting, one SQLSTATE from every generator
fresh_node("snowflake.worker_idd = 3\n");
my @states = map { substr(state_of("SELECT $_"), 0, 5) }
  qw(snowflake_nextval() decimal_id_nextval() snowflake_worker_id());
is(join(',', @states), 'F0000,F0000,F0000', 'an unusable setting: F0000 from every generator');

$node->stop;
done_testing();
