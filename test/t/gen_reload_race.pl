# Reloads of the worker id while sessions generate.  Four sessions call
# snowflake_nextval() in one long statement each, which never reads the
# configuration itself: the node takes each reload (the keeper, for every
# process).  After every reload a new session whose setting already shows
# the new worker id calls once: its reading is newer than the node's until
# the keeper has taken it, and its first call must judge by it.  Worker
# ids 1 and 2 are this system's; 3 is claimed by another system, so a
# reload to it holds the node back (55S03).  Every ID is checked: none
# repeats, each session's rise, each carries 1 or 2 and never 3 (a worker
# id that holds the node back is never published, not even for a moment),
# and the sessions ran across every reload.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use SnowflakeTest;

my $sessions = 4;
my @plan = (2, 3, 1) x 8;

my $node = snowflake_node('reload', worker_id => 1,
	conf => "max_connections = 20\nsynchronous_commit = off");
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION snowflake;
	CREATE UNLOGGED TABLE ids (session int, n int, id bigint);
	CREATE UNLOGGED TABLE refusals (session int, n int);
	CREATE TABLE stop ();
	SELECT snowflake_claim_worker('one')});
set_worker($node, 2);
$node->safe_psql('postgres', q{
	SELECT snowflake_claim_worker('two');
	INSERT INTO snowflake_workers (worker_id, system_identifier, node_name) VALUES (3, 42, 'other')});
set_worker($node, 1);
$node->poll_query_until('postgres', 'SELECT snowflake_worker_id() = 1')
  or die 'worker 1 did not take';

my @runs;
for my $s (1 .. $sessions)
{
	my ($out, $err) = ('', '');
	my $sql = qq{
	DO \$\$
	DECLARE
		n int := 0;
	BEGIN
		WHILE NOT EXISTS (SELECT FROM stop) LOOP
			n := n + 1;
			BEGIN
				INSERT INTO ids VALUES ($s, n, snowflake_nextval());
			EXCEPTION WHEN SQLSTATE '55S03' THEN
				INSERT INTO refusals VALUES ($s, n);
			END;
		END LOOP;
	END \$\$};
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'), '-c', $sql ],
		'>', \$out, '2>', \$err);
	push @runs, [ $h, \$out, \$err ];
}

# calls made so far, issued or refused
my $calls = '(SELECT ids_issued + refused FROM snowflake_status)';
my $first_ok = 0;
for my $w (@plan)
{
	my $before = $node->safe_psql('postgres', "SELECT $calls");
	$node->safe_psql('postgres', "ALTER SYSTEM SET snowflake.worker_id = $w");
	$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
	# a new session that reads the new setting: its first call judges by it
	my ($seen, $want) = $w == 3
	  ? (q{(SELECT state || '/' || reason FROM snowflake_status)}, 'held_claimed/claimed_elsewhere')
	  : ('snowflake_worker_id()::text', $w);
	my ($first, $err) = ('not yet', '');
	for (1 .. 600)
	{
		$node->psql('postgres', qq{
			SELECT CASE WHEN current_setting('snowflake.worker_id') <> '$w' THEN 'not yet'
						ELSE $seen END}, stdout => \$first, stderr => \$err);
		last if $first ne 'not yet';
		select(undef, undef, undef, 0.05);
	}
	if ($first eq $want)
	{
		$first_ok++;
	}
	else
	{
		diag("worker id $w: a new session's first call gave '$first' $err");
	}
	# the sessions go on under it (or refused by it)
	$node->poll_query_until('postgres', "SELECT $calls >= $before + 200")
	  or die "the sessions did not run under worker id $w";
}
is($first_ok, scalar @plan, 'after each of ' . @plan . ' reloads, a new session\'s first call judged by the new worker id');

$node->safe_psql('postgres', 'INSERT INTO stop DEFAULT VALUES');
for my $r (@runs)
{
	my ($h, $out, $err) = @$r;
	ok($h->finish, 'a session generated across the reloads without an error') or diag($$err);
}

my ($rows, $repeated, $not_rising) = session_ids($node, 'ids');
ok($rows > 0, "$rows IDs");
is($repeated, 0, 'no ID repeats');
is($not_rising, 0, 'each session\'s IDs rise, across every change of worker id');
is($node->safe_psql('postgres', q{
	SELECT string_agg(DISTINCT (snowflake_decode(id)).worker_id::text, ',' ORDER BY (snowflake_decode(id)).worker_id::text)
	FROM ids}),
	'1,2', 'IDs carry worker id 1 or 2, never 3, which another system claimed');
ok($node->safe_psql('postgres', 'SELECT count(*) FROM refusals') > 0,
	'while the node ran as 3 the sessions were refused (55S03)');
is($node->safe_psql('postgres', 'SELECT snowflake_worker_id()'), $plan[-1],
	'the last reload\'s worker id is in force');

$node->stop;
done_testing();
