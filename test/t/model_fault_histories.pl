# The promise, checked by search: random histories of bursts, clock steps,
# reloads, restarts, crashes, layout and setting changes, damaged state
# files, standbys, cascades and failovers (one after the primary moved to
# another worker id its standby's configuration does not have), upgrades,
# restores and copies (to a target time with IDs after it, from an archive
# that lacks its last segment, a file of a node held back removed, the
# release's record not writable), the extension's own life (an earlier
# version updated, dropped and made again, a second database, the library
# preloaded late), each drawn from a seed and checked after every step (see
# test/lib/SnowflakeTorture.pm): never a repeated ID, every release above
# every ID the lost node issued, and never a refusal the node knew enough
# to avoid, each judged by its SQLSTATE and the node's reason.
#
# TORTURE_SEEDS histories of TORTURE_STEPS steps, from TORTURE_FIRST_SEED
# on.  Every kind of event is spread over the histories, each forced into
# one of them, so that any run of them holds every kind (with fewer
# histories than kinds, some hold several); the run fails if one is
# missing.  A failing history prints the command that replays it exactly:
# its seed, its steps and the kinds it was given (TORTURE_FORCE, "none" for
# none).  The run ends with its totals: histories, operations, faults, IDs,
# refusals with cause and without, releases judged, violations.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use SnowflakeTorture;

my $seeds = ($ENV{TORTURE_SEEDS} // '') ne '' ? $ENV{TORTURE_SEEDS} : 4;
my $steps = ($ENV{TORTURE_STEPS} // '') ne '' ? $ENV{TORTURE_STEPS} : 40;
my $first = ($ENV{TORTURE_FIRST_SEED} // '') ne '' ? $ENV{TORTURE_FIRST_SEED} : 1;
my $dir = PostgreSQL::Test::Utils::tempdir('torture');
my %total = (histories => 0, ops => 0, faults => 0, ids => 0, violations => 0,
	allowed => 0, unjustified => 0, releases => 0);
my %covered;
my $started = time;

# the kinds each history is given: all of them, dealt out in turn, unless
# a replay names them
my @kinds = event_kinds();
my %force;
if (defined $ENV{TORTURE_FORCE})
{
	$force{$_} = [ grep { length && $_ ne 'none' } split /,/, $ENV{TORTURE_FORCE} ]
	  for $first .. $first + $seeds - 1;
}
else
{
	push @{ $force{ $first + $_ % $seeds } }, $kinds[$_] for 0 .. $#kinds;
}

for my $seed ($first .. $first + $seeds - 1)
{
	my $f = $force{$seed} // [];
	my $h = play_history($seed, $steps, $dir, force => $f);
	my @v = @{ $h->{violations} };
	my $kinds = @$f ? join(',', @$f) : 'none';
	my $replay = "make torture FIRST_SEED=$seed SEEDS=1 STEPS=$steps FORCE=$kinds";
	ok(!@v, "history $seed: $h->{ops} operations, $h->{faults} faults, $h->{ids} IDs, "
		  . "$h->{allowed} refusals with cause, $h->{releases} releases, no violation")
	  or diag(join("\n", "violations:", @v,
			$h->{nviolations} > @v ? sprintf('... and %d more', $h->{nviolations} - @v) : (),
			"history (replay with $replay):", @{ $h->{log} }));
	diag(join("\n", "history $seed ($replay):", @{ $h->{log} })) if $ENV{TORTURE_VERBOSE};
	$total{histories}++;
	$total{$_} += $h->{$_} for qw(ops faults ids allowed unjustified releases);
	$total{violations} += $h->{nviolations};
	$covered{$_} += $h->{kinds}{$_} for keys %{ $h->{kinds} };
}
# a history may refuse throughout (a clock far back, a layout that cannot
# continue); the histories of a run together must have issued IDs (a replay
# of a few steps may not reach a call that generates)
if (!defined $ENV{TORTURE_FORCE})
{
	ok($total{ids} > 0, "the histories issued $total{ids} IDs");
	my @missing = grep { !$covered{$_} } @kinds;
	ok(!@missing, 'every kind of event was played') or diag('never played: ' . join(', ', @missing));
}
diag(sprintf('torture: %d histories, %d operations, %d faults, %d IDs checked, %d refusals with cause, '
		. '%d without, %d releases judged, %d violations, %.0f s',
		@total{qw(histories ops faults ids allowed unjustified releases violations)}, time - $started));
done_testing();
