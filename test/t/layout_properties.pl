# Properties over random values, for every preset, for ShardingSphere's
# layout in JVMs of several time zones and for custom layouts named with
# their parameters (some fixed, some drawn at random):
# decoding inverts composing, an ID's time and snowflake_from_timestamp()
# agree to the tick, range bounds are monotonic and select exactly the IDs
# of their ticks; obfuscation is a permutation of [1, 2^63-1] that
# deobfuscation inverts; DecimalIds and node-partitioned IDs decode to
# their parts.  Random draws favour the edges (0, the largest value, one
# below it).  Every draw follows the seed: set SNOWFLAKE_PROPERTY_SEED to
# replay a run; a failure prints the seed and a counterexample.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SnowflakeTest;

my $seed = $ENV{SNOWFLAKE_PROPERTY_SEED} // 20261124;
die "SNOWFLAKE_PROPERTY_SEED must be a positive integer" unless $seed =~ /^\d+$/ && $seed > 0;
my $n = $ENV{SNOWFLAKE_PROPERTY_ROUNDS} // 10000;
note("seed $seed, $n values per property");
srand($seed);

my $node = snowflake_node('properties');
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION snowflake;
	-- a value in [0, m], one draw in eleven an edge: 0, m or m - 1
	CREATE FUNCTION rnd(m bigint) RETURNS bigint LANGUAGE sql VOLATILE AS $$
		SELECT CASE WHEN x < 0.03 THEN 0 WHEN x < 0.06 THEN m WHEN x < 0.09 THEN greatest(m - 1, 0)
			   ELSE ((floor(random() * 2147483648)::bigint << 32)
					 | floor(random() * 4294967296)::bigint) % (m + 1) END
		FROM (SELECT random() AS x) s $$;
	CREATE FUNCTION sqlstate(q text) RETURNS text LANGUAGE plpgsql AS $$
		BEGIN EXECUTE q; RETURN 'ok';
		EXCEPTION WHEN OTHERS THEN RETURN SQLSTATE || ' ' || SQLERRM; END $$;
});

my $round = 0;

# Run one property query under its own seed; it returns the number of
# values that break the property and the first of them.
sub check
{
	my ($what, $sql) = @_;
	my $s = ($seed * 7919 + ++$round) % 2147483647;
	my $r = $node->safe_psql('postgres',
		sprintf("SELECT setseed(%.10f);\n%s", $s / 2147483648.0, $sql));
	my ($bad, $example) = split /\|/, $r, 2;
	ok($bad == 0, $what)
	  or diag("counterexample: $example\nreplay with SNOWFLAKE_PROPERTY_SEED=$seed");
	return;
}

# layouts: [name, time bits, worker bits, seq bits, tick ms, epoch ms, seq above worker]
my @layouts = map {
	my ($name, $tb, $wb, $sb, $tick, $epoch) = split /\|/;
	[ $name, $tb, $wb, $sb, $tick, $epoch, $name eq 'sonyflake' ? 1 : 0 ]
} split /\n/, $node->safe_psql('postgres', q{
	SELECT name, time_bits, worker_bits, seq_bits, tick_ms, (extract(epoch FROM epoch) * 1000)::bigint
	FROM snowflake_layouts() ORDER BY name});
push @layouts,
  [ 'custom:41/10/12/1ms/2016-11-01', 41, 10, 12, 1, 1477958400000, 0 ],
  [ 'custom:39/16/8/10ms/2014-09-01/seq_above_worker', 39, 16, 8, 10, 1409529600000, 1 ],
  [ 'custom:20/4/6/86400000ms/1409529600000', 20, 4, 6, 86400000, 1409529600000, 0 ],
  # the epochs of ShardingSphere's algorithm in JVMs of those zones
  # (test/shardingsphere checks them against a JVM)
  [ 'shardingsphere@Asia/Shanghai', 41, 10, 12, 1, 1477929600000, 0 ],
  [ 'shardingsphere@America/New_York', 41, 10, 12, 1, 1477972800000, 0 ],
  [ 'shardingsphere@-03:30', 41, 10, 12, 1, 1477971000000, 0 ];

# custom layouts drawn at random, kept when the server accepts them
my @ticks = (1, 2, 10, 1000, 3600000, 86400000);
my $drawn = 0;
while ($drawn < 4)
{
	my $tb = 1 + int(rand(63));
	my $wb = int(rand(32));
	my $sb = 1 + int(rand(31));
	next if $tb + $wb + $sb > 64 || $wb + $sb > 62;
	my $tick = rand() < 0.5 ? $ticks[ int(rand(@ticks)) ] : 1 + int(rand(86400000));
	my $epoch = int(rand(2000000000)) * 1000 + int(rand(1000));
	my $above = rand() < 0.5 ? 1 : 0;
	my $name = "custom:$tb/$wb/$sb/${tick}ms/$epoch" . ($above ? '/seq_above_worker' : '');
	next unless $node->safe_psql('postgres', "SELECT sqlstate('SELECT snowflake_timestamp(1, ''$name'')')") eq 'ok';
	push @layouts, [ $name, $tb, $wb, $sb, $tick, $epoch, $above ];
	$drawn++;
}

for my $l (@layouts)
{
	my ($name, $tb, $wb, $sb, $tick, $epoch, $above) = @$l;
	my $ts = $wb + $sb;
	my ($ws, $ss) = $above ? (0, $wb) : ($sb, 0);
	my $maxtick = "least(CASE WHEN $tb >= 63 THEN 9223372036854775807 ELSE (1::bigint << $tb) - 1 END, 9223372036854775807 >> $ts)";
	my $maxw = "((1::bigint << $wb) - 1)";
	my $maxs = "((1::bigint << $sb) - 1)";
	# a random instant of tick t: the tick's start plus up to a tick
	my $instant = "snowflake_timestamp(greatest(%s << $ts, 1), '$name') + floor(random() * $tick * 1000) * interval '1 microsecond'";

	check("$name: decode inverts compose; time and bounds agree to the tick", qq{
		SELECT count(*) FILTER (WHERE NOT ok), min(format('id %s (tick %s, worker %s, seq %s) gave %s', id, t, w, s, d)) FILTER (WHERE NOT ok)
		FROM (SELECT t, w, s, id, d,
					 extract(epoch FROM d.ts) * 1000 = $epoch + t::numeric * $tick
					 AND d.worker_id = w AND d.seq = s
					 AND snowflake_timestamp(id, '$name') = d.ts
					 AND snowflake_from_timestamp(d.ts + off, '$name') = greatest(t << $ts, 1)
					 AND snowflake_from_timestamp(d.ts + off, '$name') <= id
					 AND CASE WHEN t = $maxtick THEN true
							  ELSE id < snowflake_from_timestamp(d.ts + $tick * interval '1 ms', '$name') END AS ok
			  FROM (SELECT t, w, s, (t << $ts) | (w << $ws) | (s << $ss) AS id,
						   floor(random() * $tick * 1000) * interval '1 microsecond' AS off
					FROM (SELECT t, w, CASE WHEN t = 0 AND w = 0 AND s = 0 THEN 1 ELSE s END AS s
						  FROM (SELECT rnd($maxtick) AS t, rnd($maxw) AS w, rnd($maxs) AS s
								FROM generate_series(1, $n)) r
						  OFFSET 0) g) c,
				   LATERAL snowflake_decode(id, '$name') d) q});

	check("$name: bounds are monotonic and select exactly the IDs of their ticks", qq{
		SELECT count(*) FILTER (WHERE NOT ok), min(format('a %s (tick %s), b %s (tick %s), id %s (tick %s)', a, ta, b, tb, id, tid)) FILTER (WHERE NOT ok)
		FROM (SELECT *,
					 snowflake_from_timestamp(a, '$name') = greatest(ta << $ts, 1)
					 AND (a > b OR snowflake_from_timestamp(a, '$name') <= snowflake_from_timestamp(b, '$name'))
					 AND (id >= snowflake_from_timestamp(a, '$name') AND id < snowflake_from_timestamp(b, '$name'))
						 = (tid >= ta AND tid < tb) AS ok
			  FROM (SELECT ta, tb, tid, ${\ sprintf($instant, 'ta')} AS a, ${\ sprintf($instant, 'tb')} AS b,
						   greatest((tid << $ts) | (rnd($maxw) << $ws) | (rnd($maxs) << $ss), 1) AS id
					FROM (SELECT rnd($maxtick) AS ta, rnd($maxtick) AS tb, rnd($maxtick) AS tid
						  FROM generate_series(1, $n)) g) c) q});
}

check('obfuscation: a permutation of [1, 2^63-1] that deobfuscation inverts', qq{
	SELECT count(*) FILTER (WHERE NOT ok) + (count(DISTINCT (x, k)) - count(DISTINCT (o, k))),
		   min(format('x %s, key %s: %s, back %s', x, k, o, snowflake_deobfuscate(o, k))) FILTER (WHERE NOT ok)
	FROM (SELECT x, k, o, o BETWEEN 1 AND 9223372036854775807 AND snowflake_deobfuscate(o, k) = x AS ok
		  FROM (SELECT x, k, snowflake_obfuscate(x, k) AS o
				FROM (SELECT rnd(9223372036854775806) + 1 AS x,
							 CASE WHEN g % 4 = 0 THEN rnd(9223372036854775806) - 4611686018427387903
								  ELSE g % 3 END AS k
					  FROM generate_series(1, $n * 5) g) r) s) q});

check('DecimalId: decoding gives back counter, generator id and launch id', qq{
	SELECT count(*) FILTER (WHERE NOT ok), min(format('%s, %s, %s gave %s', c, gen, l, d)) FILTER (WHERE NOT ok)
	FROM (SELECT c, gen, l, d, (d).counter = c AND (d).generator_id = gen AND (d).launch_id = l AS ok
		  FROM (SELECT c, gen, l, decimal_id_decode(c * 10000000000 + gen * 100000 + l) AS d
				FROM (SELECT rnd(922337201) + 1 AS c, rnd(99999) AS gen, rnd(99999) AS l
					  FROM generate_series(1, $n * 5)) r) s) q});

check('node-partitioned IDs: decoding gives back node and counter', qq{
	SELECT count(*) FILTER (WHERE NOT ok), min(format('%s, %s gave %s', node, c, d)) FILTER (WHERE NOT ok)
	FROM (SELECT node, c, d, (d).node_id = node AND (d).counter = c AS ok
		  FROM (SELECT node, c, snowflake_node_decode((node << 50) | c) AS d
				FROM (SELECT rnd(8191) AS node, rnd(1125899906842622) + 1 AS c
					  FROM generate_series(1, $n * 5)) r) s) q});

$node->stop;
done_testing();
