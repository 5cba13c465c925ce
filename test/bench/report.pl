#!/usr/bin/perl
# report.pl CSV OUTDIR: the benchmark's markdown tables, its verdict on the
# targets, and two charts drawn with gnuplot when it is installed.
use strict;
use warnings;
use List::Util qw(min);

my ($csv, $out) = @ARGV;
open my $in, '<', $csv or die "$csv: $!";
<$in>;
my (%v, @bulk_order);
while (<$in>)
{
	chomp;
	my ($section, $gen, $setting, $value) = split /\t/;
	push @bulk_order, $gen if $section eq 'bulk';
	$v{$section}{$gen}{$setting} = $value;
}
close $in;

my %meta = map { $_ => $v{meta}{$_}{1} } keys %{ $v{meta} };
# the UUIDv7 every section measured: uuidv7() or the one in SQL
my $uv7 = $meta{uuidv7} // 'UUIDv7 in SQL';
my @keys = qw(bigserial snowflake uuid uuidv7);
my %key_name = (bigserial => 'bigserial', snowflake => 'snowflake_nextval()',
	uuid => 'gen_random_uuid()', uuidv7 => $uv7);

sub fmt
{
	my $n = shift;
	return 'failed' unless defined $n && $n ne '' && $n > 0;
	1 while $n =~ s/^(\d+)(\d{3})/$1,$2/;
	return $n;
}

# a ratio of two measurements; a run that failed (no figure, or 0) is
# reported as failed, never divided by
sub ratio
{
	my ($x, $y, $fmt) = @_;
	return 'failed' unless defined $x && defined $y && $x ne '' && $y ne '' && $x > 0 && $y > 0;
	return sprintf($fmt // '%.2fx', $x / $y);
}
sub ok_ratio
{
	my ($x, $y, $min) = @_;
	return defined $x && defined $y && $x ne '' && $y ne '' && $y > 0 && $x / $y >= $min;
}
sub mb
{
	my $x = shift;
	return 'failed' unless defined $x && $x ne '' && $x > 0;
	return sprintf '%.1f MB', $x / 1048576;
}
sub pct
{
	my $x = shift;
	return 'failed' unless defined $x && $x ne '' && $x > 0;
	return sprintf '%.1f%%', $x;
}
sub ns_per_id
{
	my $x = shift;
	return 'failed' unless defined $x && $x ne '' && $x > 0;
	return sprintf '%.1f ns', 1e9 / $x;
}

my $b = $v{bulk};
my $seq = $b->{'nextval()'}{1};
my $floor = $b->{'C function call (floor)'}{1};
my $md = '';
$md .= sprintf "Measured %s on PostgreSQL %s, %d cores; %s in %s s; %s.\n\n",
  $meta{date} // scalar(gmtime), $meta{server_version} // '(unknown version)',
  $meta{cores} // `nproc` + 0,
  ($ENV{QUICK} ? 'a quick smoke run' : 'a full run'), $ENV{SUITE_SECONDS} // '?',
  "median of $ENV{REPEATS} repeats, $ENV{N} calls per bulk run, $ENV{SECONDS_PER_RUN} s per pgbench run; "
  . "the UUIDv7 measured is $uv7";

$md .= "### Bulk generation, one backend\n\n`SELECT count(f()) FROM generate_series(1, N)`\n\n";
$md .= "| generator | IDs/s | vs nextval() | vs C function call |\n|---|---:|---:|---:|\n";
for my $g (@bulk_order)
{
	my $x = $b->{$g}{1};
	$md .= sprintf "| %s | %s | %s | %s |\n", $g, fmt($x), ratio($x, $seq), ratio($x, $floor);
}

my $c = $v{concurrent};
$md .= "\n### Concurrent generation (aggregate IDs/s)\n\n| generator | 1 | 2 | 4 | 8 | 8 vs 1 |\n|---|---:|---:|---:|---:|---:|\n";
for my $g ('snowflake_nextval()', 'snowflake_nextval(), run-ahead', 'nextval()', $uv7)
{
	$md .= "| $g | " . join(' | ', map { fmt($c->{$g}{$_}) } 1, 2, 4, 8)
	  . ' | ' . ratio($c->{$g}{8}, $c->{$g}{1}) . " |\n";
}

for my $sc ('on', 'off')
{
	my $i = $v{"insert_sync_$sc"};
	$md .= "\n### Single-row inserts, synchronous_commit = $sc (TPS, and ratio to bigserial)\n\n";
	$md .= "| key | 1 client | 4 clients | 16 clients |\n|---|---:|---:|---:|\n";
	for my $t (@keys)
	{
		$md .= "| $key_name{$t} | " . join(' | ', map {
			sprintf '%s (%s)', fmt(sprintf '%.0f', $i->{$t}{$_} || 0), ratio($i->{$t}{$_}, $i->{bigserial}{$_})
		} 1, 4, 16) . " |\n";
	}
}

my $ix = $v{index};
my $dn = $v{index_density};
my ($rows) = keys %{ $ix->{bigserial} };
$md .= "\n### Primary key index after " . fmt($rows) . " rows (4 clients, batches of 1000)\n\n";
$md .= "| key | size | vs bigserial | leaf density |\n|---|---:|---:|---:|\n";
for my $t (@keys)
{
	$md .= sprintf "| %s | %s | %s | %s |\n", $key_name{$t}, mb($ix->{$t}{$rows}),
	  ratio($ix->{$t}{$rows}, $ix->{bigserial}{$rows}), pct($dn->{$t}{$rows});
}

# bulk loads: time (lower is better) as a ratio to bigserial's
my ($lrows) = keys %{ $v{load_insert}{bigserial} // {} };
$lrows //= $ENV{LOAD_ROWS} // 0;
$md .= "\n### Bulk load of " . fmt($lrows) . " rows into an empty table, the key from its default\n\n";
$md .= "`INSERT INTO t (v) SELECT i FROM generate_series(1, N) i` and `COPY t (v) FROM 'file'`, once each, after a checkpoint; "
  . "time as a ratio to bigserial's (lower is faster), and the primary key afterwards\n\n";
$md .= "| key | INSERT ... SELECT | vs bigserial | COPY | vs bigserial | index after COPY | vs bigserial | leaf density |\n";
$md .= "|---|---:|---:|---:|---:|---:|---:|---:|\n";
my ($li, $lc) = ($v{load_insert}, $v{load_copy});
my ($lci, $lcd) = ($v{load_copy_index}, $v{load_copy_density});
for my $t (@keys)
{
	$md .= sprintf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", $key_name{$t},
	  map({ defined $_ && $_ > 0 ? sprintf('%.2f s', $_ / 1000) : 'failed' } $li->{$t}{$lrows}),
	  ratio($li->{$t}{$lrows}, $li->{bigserial}{$lrows}),
	  map({ defined $_ && $_ > 0 ? sprintf('%.2f s', $_ / 1000) : 'failed' } $lc->{$t}{$lrows}),
	  ratio($lc->{$t}{$lrows}, $lc->{bigserial}{$lrows}),
	  mb($lci->{$t}{$lrows}), ratio($lci->{$t}{$lrows}, $lci->{bigserial}{$lrows}), pct($lcd->{$t}{$lrows});
}
my ($lii, $lid) = ($v{load_insert_index}, $v{load_insert_density});
$md .= "\nThe index after INSERT ... SELECT: "
  . join('; ', map { "$key_name{$_} " . mb($lii->{$_}{$lrows}) . ' (' . pct($lid->{$_}{$lrows}) . ')' } @keys) . ".\n";

# blocks of n: IDs/s per ID, against nextval() stepping by n
my $bl = $v{blocks} // {};
my $bfloor = $bl->{'C function call (floor)'}{1};
$md .= "\n### Blocks of IDs, one call per block\n\n";
if (exists $bl->{skipped} || !$bfloor)
{
	$md .= "Skipped: the build measured has no `snowflake.snowflake_nextval_block(integer)`.\n";
}
else
{
	$md .= "`SELECT count(f(n)) FROM generate_series(1, $ENV{BLOCK_IDS} / n)`: IDs/s and time per ID. "
	  . "The default layout's tick holds 4096 sequence numbers (4,096,000 IDs/s): "
	  . "a block of 4096 is one whole tick, and under the default policy no block size goes beyond that ceiling.\n\n";
	$md .= "| generator | n | IDs/s | per ID | vs nextval(), INCREMENT BY n | vs C function call |\n";
	$md .= "|---|---:|---:|---:|---:|---:|\n";
	$md .= sprintf "| C function call (floor) | 1 | %s | %s | | 1.00x |\n", fmt($bfloor), ns_per_id($bfloor);
	for my $n (1, 16, 256, 4096)
	{
		my $s = $bl->{'nextval(), INCREMENT BY n'}{$n};
		for my $g ('snowflake_nextval_block(n)', 'snowflake_nextval_block(n), run-ahead', 'nextval(), INCREMENT BY n')
		{
			my $x = $bl->{$g}{$n};
			$md .= sprintf "| %s | %d | %s | %s | %s | %s |\n", $g, $n, fmt($x), ns_per_id($x),
			  ratio($x, $s), ratio($x, $bfloor);
		}
	}
}

# IDs as text: ns per call, both ways, against id::text and its inverse
my ($te, $td) = ($v{text_encode} // {}, $v{text_decode} // {});
$md .= "\n### IDs as text, cost per call\n\n";
if (exists $te->{skipped} || !$te->{'id::text'})
{
	$md .= "Skipped: the build measured has no `snowflake.snowflake_base32(bigint)`.\n";
}
else
{
	$md .= "`SELECT count(f(x)) FROM t` over the same rows of IDs, less `SELECT count(x) FROM t` (x the column f reads), per row, "
	  . "each the fastest of $ENV{TEXT_REPEATS} runs, taken in turns (the opaque form over a fiftieth of the rows). "
	  . "Decoding reads what the form wrote: `text::bigint` for `id::text`, "
	  . "`('x' || lpad(h, 16, '0'))::bit(64)::bigint` for `to_hex(id)`.\n\n";
	$md .= "| form | encode | vs id::text | decode | vs text::bigint |\n|---|---:|---:|---:|---:|\n";
	for my $f ('id::text', 'to_hex(id)', 'snowflake_base32(id)', 'snowflake_base62(id)',
		"snowflake_base32(id, 'user')", 'snowflake_opaque(id)')
	{
		$md .= sprintf "| %s | %s | %s | %s | %s |\n", $f,
		  map({ defined $_ && $_ > 0 ? sprintf('%.1f ns', $_) : 'failed' } $te->{$f}{1}),
		  ratio($te->{$f}{1}, $te->{'id::text'}{1}),
		  map({ defined $_ && $_ > 0 ? sprintf('%.1f ns', $_) : 'failed' } $td->{$f}{1}),
		  ratio($td->{$f}{1}, $td->{'id::text'}{1});
	}
}

# the targets
my $ceiling = $b->{'layout ceiling (4096 per ms)'}{1};
my $def = $b->{'snowflake_nextval()'}{1};
my $ra = $b->{'snowflake_nextval(), run-ahead'}{1};
my $cra = $c->{'snowflake_nextval(), run-ahead'};
my $ins = $v{insert_sync_off};
my @t = (
	[ 'default policy >= 95% of the layout ceiling', ok_ratio($def, $ceiling, 0.95), ratio(100 * ($def || 0), $ceiling, '%.0f%%') ],
	[ 'default policy >= 95% of the lower of the ceiling and a bare C call', ok_ratio($def, min($ceiling || 0, $floor || 0), 0.95),
	  ratio(100 * ($def || 0), min($ceiling || 0, $floor || 0), '%.0f%%') ],
	[ 'run-ahead >= 2x nextval()', ok_ratio($ra, $seq, 2), ratio($ra, $seq) ],
	[ 'run-ahead within 1.3x of a bare C call', ok_ratio($ra, $floor, 1 / 1.3), ratio($floor, $ra, '%.2fx slower') ],
	[ 'no drop from 1 to 8 backends beyond 2 cores', ok_ratio($cra->{8}, $cra->{1}, 0.9), ratio($cra->{8}, $cra->{1}) ],
	[ 'insert TPS >= 0.98x bigserial (sync off, 16 clients)', ok_ratio($ins->{snowflake}{16}, $ins->{bigserial}{16}, 0.98),
	  ratio($ins->{snowflake}{16}, $ins->{bigserial}{16}) ],
	[ 'index within 2% of bigserial', ok_ratio($ix->{snowflake}{$rows}, $ix->{bigserial}{$rows}, 0.98)
	  && ok_ratio($ix->{bigserial}{$rows}, $ix->{snowflake}{$rows}, 1 / 1.02),
	  ratio($ix->{snowflake}{$rows}, $ix->{bigserial}{$rows}, '%.3fx') ],
	[ 'index at most 0.6x of gen_random_uuid()', ok_ratio($ix->{uuid}{$rows}, $ix->{snowflake}{$rows}, 1 / 0.6),
	  ratio($ix->{snowflake}{$rows}, $ix->{uuid}{$rows}) ],
);
# A block lies in one tick: under the default policy the clock bounds it
# at the layout's ceiling, so there the target is the ceiling; the cost of
# a block itself shows with run-ahead.
my $b256 = $bl->{'snowflake_nextval_block(n)'}{256};
my $r256 = $bl->{'snowflake_nextval_block(n), run-ahead'}{256};
push @t, $r256
  ? [ 'a block of 256 (run-ahead) costs less per ID than a bare C call', ok_ratio($r256, $bfloor, 1.0000001),
	ns_per_id($r256) . ' against ' . ns_per_id($bfloor) ]
  : [ 'a block of 256 (run-ahead) costs less per ID than a bare C call', 0, 'not measured: no block function' ];
push @t, $b256
  ? [ 'a block of 256 (default policy) >= 95% of the layout ceiling', ok_ratio($b256, $ceiling, 0.95),
	ratio(100 * $b256, $ceiling, '%.0f%%') ]
  : [ 'a block of 256 (default policy) >= 95% of the layout ceiling', 0, 'not measured: no block function' ];
# the text forms: at most 1.5x the cost of id::text (and of its inverse)
for my $f ('snowflake_base32(id)', 'snowflake_base62(id)')
{
	for my $w ([ 'encode', $te, 'id::text' ], [ 'decode', $td, 'text::bigint' ])
	{
		my ($way, $t, $peer) = @$w;
		push @t, [ "$f, $way: at most 1.5x $peer per call", ok_ratio($t->{'id::text'}{1}, $t->{$f}{1}, 1 / 1.5),
		  ratio($t->{$f}{1}, $t->{'id::text'}{1}) ];
	}
}
$md .= "\n### Targets\n\n| target | met | measured |\n|---|---|---|\n";
$md .= sprintf "| %s | %s | %s |\n", $_->[0], $_->[1] ? 'yes' : '**no**', $_->[2] for @t;

open my $o, '>', "$out/latest.md" or die;
print $o $md;
close $o;

# charts, when gnuplot is there (a chroot has none)
if (system('command -v gnuplot >/dev/null 2>&1') != 0)
{
	print "gnuplot is not installed: no charts\n";
	exit 0;
}
open my $d1, '>', "$out/bulk.dat" or die;
printf $d1 "\"%s\" %s\n", $_, ($b->{$_}{1} || 0) / 1e6 for @bulk_order;
close $d1;
open my $d2, '>', "$out/index.dat" or die;
printf $d2 "\"%s\" %.2f\n", $key_name{$_}, ($ix->{$_}{$rows} || 0) / 1048576 for @keys;
close $d2;
open my $gp, '|-', 'gnuplot' or die "gnuplot: $!";
print $gp <<"GP";
set terminal svg size 900,420 font "sans,12" background rgb "white" noenhanced
set style fill solid 0.8 border -1
set boxwidth 0.6
set grid ytics
set yrange [0:*]
set xtics rotate by -30 left
unset key
set output "$out/ids_per_second.svg"
set title "IDs per second, one backend (millions), PostgreSQL @{[$meta{server_version} // '']}"
plot "$out/bulk.dat" using 0:2:xtic(1) with boxes lc rgb "#3a6ea5", '' using 0:2:(sprintf("%.2f",\$2)) with labels offset 0,0.7
set output "$out/index_size.svg"
set title "Primary key index after @{[fmt($rows)]} rows (MB), PostgreSQL @{[$meta{server_version} // '']}"
set xtics norotate
plot "$out/index.dat" using 0:2:xtic(1) with boxes lc rgb "#5a9e5a", '' using 0:2:(sprintf("%.1f",\$2)) with labels offset 0,0.7
GP
close $gp or die 'gnuplot failed';
unlink "$out/bulk.dat", "$out/index.dat";
