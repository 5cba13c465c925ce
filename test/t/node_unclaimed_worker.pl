# One worker id, one system: a node that claimed its worker id and is
# switched by a reload to one its system has not claimed refuses (55S03,
# held_claimed/unclaimed) until the claim is made, whose step
# snowflake_claim_worker() is; a claim rolled back releases nothing, and a
# restart keeps the hold.  A node that never claimed anything generates
# with a hand-set worker id at once, as README shows.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SnowflakeTest;

my $n = snowflake_node('claims', worker_id => 5);
$n->start;
$n->safe_psql('postgres', 'CREATE EXTENSION snowflake');

sub status
{
	return $n->safe_psql('postgres', q{SELECT state || '/' || coalesce(reason, '') FROM snowflake_status});
}

# a first day: no claim, any worker id set by hand generates
is(refusal($n), 'generated', 'a node that never claimed generates with its hand-set worker id');
set_worker($n, 6);
is(refusal($n), 'generated', 'and with another, set by a reload');

# claimed, then moved to a worker id not claimed
$n->safe_psql('postgres', q{SELECT snowflake_claim_worker('node')});
is(refusal($n), 'generated', 'claimed, it generates');
set_worker($n, 7);
my ($code, $words) = refusal($n);
is($code, '55S03 unclaimed', 'moved to a worker id its system has not claimed, it refuses');
like($words, qr/ERROR:  55S03: snowflake worker id 7 is not claimed by this system/, '... naming it');
like($words, qr/HINT:  .*snowflake\.snowflake_claim_worker\(\)/, '... and the claim as the step');
is(status(), 'held_claimed/unclaimed', '... as the view says');
is(refusal($n, 'postgres', 'SELECT snowflake_worker_id()'), '55S03 unclaimed', 'snowflake_worker_id() says the same');

# a claim rolled back releases nothing, nor a restart
$n->safe_psql('postgres', q{BEGIN; SELECT snowflake_claim_worker('node'); ROLLBACK});
is(refusal($n), '55S03 unclaimed', 'a claim rolled back releases nothing');
$n->restart;
is(refusal($n), '55S03 unclaimed', 'nor a restart');

# the step
is($n->safe_psql('postgres', q{SELECT worker_id FROM snowflake_claim_worker('node')}), '7',
	'snowflake_claim_worker() claims the worker id configured');
is(refusal($n), 'generated', 'claimed, it generates');
is($n->safe_psql('postgres', 'SELECT (snowflake_decode(snowflake_nextval())).worker_id'), '7', '... under it');

# back to a worker id it claimed before: no step
set_worker($n, 6);
is(refusal($n), 'generated', 'back to one it claimed before, it generates');
is(status(), 'ready/', '... and the view says ready');
$n->stop;

done_testing();
