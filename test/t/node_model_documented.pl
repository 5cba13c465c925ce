# DESIGN.md's tables of the node's states and events are node.c's: the
# reasons with their states and SQLSTATEs, and every transition of the
# durable state (the event, the reasons it acts in, what it leads to), as
# snowflake_node_model() lists them, and every test DESIGN.md names as the
# one that plays a transition exists.  And the two transitions of a start
# that no other test plays: a copy of the record in another system's data
# directory (other_system), and a damaged snowflake.identity alone
# (record_damaged).
use strict;
use warnings;
use File::Basename qw(dirname);
use File::Copy ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SnowflakeTest;

my $root = dirname(__FILE__) . '/../..';
my $design = slurp_file("$root/DESIGN.md");

my $a = snowflake_node('model_a', worker_id => 3);
$a->start;
$a->safe_psql('postgres', 'CREATE EXTENSION snowflake');

# the model as the library holds it
my (%reason, %state_of, @code_rows);
for my $row (split /\n/, $a->safe_psql('postgres',
		q{SELECT kind, name, coalesce(array_to_string(from_reasons, ','), ''), to_state,
				 coalesce(to_reason, ''), coalesce(sqlstate, '')
		  FROM snowflake.snowflake_node_model()}))
{
	my ($kind, $name, $from, $to_state, $to_reason, $code) = split /\|/, $row, -1;
	if ($kind eq 'reason')
	{
		$reason{$name} = [ $to_state, $code ];
		push @{ $state_of{$to_state} }, $name;
	}
	else
	{
		push @code_rows, join('|', $name, join(',', sort split /,/, $from), $to_state, $to_reason);
	}
}
$state_of{ready} = ['ready'];

# DESIGN's table of states: each reason's state and SQLSTATE (a code in
# parentheses is that of the reasons before it; the column's, of the rest)
my ($states) = $design =~ /^### The states\n\n(.*?)\n\n/ms;
my %documented;
for my $line (grep { /^\| `/ } split /\n/, $states)
{
	my (undef, $state, $reasons, $code) = split /\s*\|\s*/, $line;
	$state =~ s/`//g;
	my @pending;
	for my $token ($reasons =~ /(`[a-z_0-9]+`|\([0-9A-Z]{5}\))/g)
	{
		if ($token =~ /^\(([0-9A-Z]{5})\)$/)
		{
			$documented{$_} = [ $state, $1 ] for @pending;
			@pending = ();
		}
		else
		{
			push @pending, $token =~ s/`//gr;
		}
	}
	$documented{$_} = [ $state, $code ] for @pending;
}
for my $r (sort keys %reason)
{
	next if $reason{$r}[0] eq 'ready';	# DecimalId's, not the node's
	is(join(' ', @{ $documented{$r} // ['missing'] }), join(' ', @{ $reason{$r} }),
		"DESIGN's states: $r is $reason{$r}[0]" . ($reason{$r}[1] ? ", $reason{$r}[1]" : ''));
}
for my $r (sort keys %documented)
{
	ok($reason{$r} && $reason{$r}[0] ne 'ready', "DESIGN's states: $r is a reason of the node's");
}

# DESIGN's table of events: one row per transition, the states it names
# standing for their reasons
my ($events) = $design =~ /^### The events\n\n.*?\n\n(\|.*?)\n\n/ms;
my (@doc_rows, %tests);
for my $line (grep { /^\| `/ } split /\n/, $events)
{
	my (undef, $event, $from, $to, $played) = split /\s*\|\s*/, $line;
	($event) = $event =~ /`([a-z_]+)`/;
	my %set;
	for my $s ($from =~ /`([a-z_0-9]+)`/g)
	{
		$set{$_} = 1 for @{ $state_of{$s} // [$s] };
	}
	my ($to_state, $to_reason) = $to =~ /`([a-z_]+)`(?:\s*\/\s*`([a-z_]+)`)?/;
	push @doc_rows, join('|', $event, join(',', sort keys %set), $to_state, $to_reason // '');
	$tests{$_}{$event} = 1 for $played =~ /(t\/[a-z_]+\.pl)/g;
}
is_deeply([ sort @doc_rows ], [ sort @code_rows ], "DESIGN's events are node.c's transitions, row for row")
  or diag(join("\n", 'node.c:', sort(@code_rows), 'DESIGN.md:', sort(@doc_rows)));
ok(-f "$root/test/$_", "$_, named as playing " . join(', ', sort keys %{ $tests{$_} }) . ', exists')
  for sort keys %tests;

# state(NODE): the view's state and reason
sub state_of_node
{
	my ($node) = @_;
	return $node->safe_psql('postgres', q{SELECT state || '/' || reason FROM snowflake.snowflake_status});
}

# start_record_damaged: snowflake.identity damaged, and no snowflake.state
$a->safe_psql('postgres', 'SELECT snowflake.snowflake_nextval()');
$a->stop;
unlink $a->data_dir . '/snowflake.state' or die;
open my $fh, '+<', $a->data_dir . '/snowflake.identity' or die;
print $fh "\0" x 1024;
close $fh;
$a->start;
is(state_of_node($a), 'held_copy/record_damaged', 'a damaged snowflake.identity alone: held back as a copy');
is(refusal($a, 'postgres', 'SELECT snowflake.snowflake_nextval()'), '55S01 record_damaged', '... and calls say so');

# start_copy, other_system: the files of a node in another system's data
# directory, under the worker id they record
my $b = snowflake_node('model_b', worker_id => 4);
$b->start;
$b->safe_psql('postgres', 'CREATE EXTENSION snowflake');
$b->safe_psql('postgres', 'SELECT snowflake.snowflake_nextval()');
$b->stop;
my $c = snowflake_node('model_c', worker_id => 4);
$c->start;
$c->safe_psql('postgres', 'CREATE EXTENSION snowflake');
$c->stop;
File::Copy::copy($b->data_dir . "/snowflake.$_", $c->data_dir . "/snowflake.$_") or die for qw(state identity);
$c->start;
is(state_of_node($c), 'held_copy/other_system', 'the files of another system: held back as a copy');
$c->stop;
$a->stop;

done_testing();
