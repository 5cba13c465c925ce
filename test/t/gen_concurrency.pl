# Eight sessions generating 250,000 IDs each at the same time into one
# table with a primary key: no duplicate, each session strictly increasing.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use SnowflakeTest;

my $sessions = 8;
my $per_session = 250_000;

my $node = snowflake_node('concurrency', worker_id => 42,
	conf => "max_connections = 20\nsynchronous_commit = off");
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION snowflake;
	CREATE UNLOGGED TABLE ids (id bigint PRIMARY KEY, session int, n int);
});

my @runs;
for my $s (1 .. $sessions)
{
	my ($out, $err) = ('', '');
	my $sql = "INSERT INTO ids SELECT snowflake_nextval(), $s, g "
	  . "FROM generate_series(1, $per_session) g";
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'), '-c', $sql ],
		'>', \$out, '2>', \$err);
	push @runs, [ $h, \$out, \$err ];
}
for my $r (@runs)
{
	my ($h, $out, $err) = @$r;
	ok($h->finish, 'session inserted its IDs') or diag($$err);
}

my ($rows, $repeated, $not_rising) = session_ids($node, 'ids');
is($rows, $sessions * $per_session, 'every row arrived');
is($repeated, 0, 'no duplicate IDs');
is($not_rising, 0, 'each session\'s IDs strictly increase');

is($node->safe_psql('postgres',
	'SELECT count(*) FROM ids WHERE (snowflake_decode(id)).worker_id <> 42'),
	'0', 'every ID carries the worker id');

# the sessions really overlapped: their ID ranges interleave
ok( $node->safe_psql('postgres', q{
	SELECT count(*) FROM (
		SELECT session, lag(session) OVER (ORDER BY id) AS prev FROM ids) s
	WHERE session <> prev}) > $sessions,
	'sessions generated concurrently');

my $status = $node->safe_psql('postgres',
	'SELECT ids_issued, refused FROM snowflake_status');
is($status, ($sessions * $per_session) . '|0', 'status counted every ID, refused none');

$node->stop;
done_testing();
