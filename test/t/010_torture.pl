# The promise, checked by search: random histories of bursts, clock steps,
# reloads, restarts, crashes, layout changes, damaged state files, standbys
# and failovers, each drawn from a seed and checked after every step (see
# test/lib/SnowflakeTorture.pm).  TORTURE_SEEDS histories of TORTURE_STEPS
# steps, from TORTURE_FIRST_SEED on; a failing seed prints its history and
# replays with TORTURE_FIRST_SEED=<seed> TORTURE_SEEDS=1.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use SnowflakeTorture;

my $seeds = $ENV{TORTURE_SEEDS} // 4;
my $steps = $ENV{TORTURE_STEPS} // 40;
my $first = $ENV{TORTURE_FIRST_SEED} // 1;
my $dir = PostgreSQL::Test::Utils::tempdir('torture');
my %total = (histories => 0, ops => 0, faults => 0, ids => 0, violations => 0);
my $started = time;

for my $seed ($first .. $first + $seeds - 1)
{
	my $h = play_history($seed, $steps, $dir);
	my @v = @{ $h->{violations} };
	ok(!@v, "history $seed: $h->{ops} operations, $h->{faults} faults, $h->{ids} IDs, no violation")
	  or diag(join("\n", "violations:", @v, "history (replay with TORTURE_FIRST_SEED=$seed TORTURE_SEEDS=1 TORTURE_STEPS=$steps):", @{ $h->{log} }));
	diag(join("\n", "history $seed:", @{ $h->{log} })) if $ENV{TORTURE_VERBOSE};
	$total{histories}++;
	$total{$_} += $h->{$_} for qw(ops faults ids);
	$total{violations} += @v;
}
# a history may refuse throughout (a clock far back, a layout that cannot
# continue); the histories together must have issued IDs
ok($total{ids} > 0, "the histories issued $total{ids} IDs");
diag(sprintf('torture: %d histories, %d operations, %d faults, %d IDs checked, %d violations, %.0f s',
		@total{qw(histories ops faults ids violations)}, time - $started));
done_testing();
