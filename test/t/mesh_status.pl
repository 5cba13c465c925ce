# snowflake-mesh status against meshes broken one way at a time, each
# with the exit status docs/mesh.md gives it: 0 whole; 2 bad usage; 3 a
# node down; 4 changes skipped on a node (18 and later count them;
# --rows finds the rows apart on every version); 5 a subscription
# disabled, a subscriber held up longer than the lag bound, and one key
# supplied by clients on two members; 6 a member's publication reaching
# a table outside the mesh (and add-table refusing to spread it), a
# change left unfinished, and a member's claim replaced by another
# system's.  Status runs with nothing but perl's base modules and psql.
use strict;
use warnings;
use Config;
use FindBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time usleep);
use SnowflakeTest;
use SnowflakeMesh;

my @n = map { mesh_node("status$_", $_) } 1 .. 3;
if ($n[0]->pg_version->major < 16)
{
	$_->stop for @n;
	plan skip_all => 'a mesh needs PostgreSQL 16';
}
my $counts = $n[0]->pg_version->major >= 18;

my ($rc, $out, $err) = mesh('--tables', 'events', 'create', map { conn($_) } @n);
is($rc, 0, 'a mesh of three') or diag("$out\n$err");
$_->safe_psql('postgres', 'INSERT INTO events (node, k) SELECT ' . wid($_) . ', g FROM generate_series(1, 100) g')
  for @n;
is(converged([@n], ['events']), '', 'every node holds the same rows');

sub status { return mesh(@_, 'status', map { conn($_) } @n); }

# whole(WHAT): the counters reset, status polled until it exits 0
sub whole
{
	my ($what) = @_;
	$_->safe_psql('postgres', 'SELECT pg_stat_reset_subscription_stats(NULL)') for @n;
	for (1 .. 30)
	{
		($rc, $out, $err) = status('--rows');
		last if $rc == 0;
		# 16's launcher can leave an enabled subscription with no worker
		wake_subscriptions(@n);
		sleep 1;
	}
	is($rc, 0, "$what: status exits 0") or diag("$out\n$err");
	like($out, qr/the mesh of workers \[1 2 3\] is whole/, 'and says the mesh is whole');
	return;
}
whole('the mesh made');

# 2: usage
($rc, $out, $err) = mesh('status');
is($rc, 2, 'status without nodes: exit 2') or diag("$out\n$err");
($rc, $out, $err) = mesh('--no-such-option', 'status', conn($n[0]));
is($rc, 2, 'an unknown option: exit 2') or diag("$out\n$err");

# nothing but perl's base modules and psql: a PATH with only those two,
# and, where Debian keeps them apart, only perl-base's modules
my $bin = PostgreSQL::Test::Utils::tempdir();
symlink($Config{perlpath}, "$bin/perl") or die;
symlink($n[0]->config_data('--bindir') . '/psql', "$bin/psql") or die;
my ($base) = grep { -d } glob('/usr/lib/*/perl-base');
my $wrapper = "$bin/status.pl";
open my $fh, '>', $wrapper or die;
print $fh ($base ? "BEGIN { \@INC = ('$base'); }\n" : '') . "my \$s = shift; do \$s; die \$@ if \$@;\n";
close $fh;
{
	local $ENV{PATH} = $bin;
	my ($o, $e) = ('', '');
	IPC::Run::run([ "$bin/perl", $wrapper, $SnowflakeMesh::script, '--rows', 'status', map { conn($_) } @n ],
		'>', \$o, '2>', \$e);
	is($? >> 8, 0, 'status runs with nothing but psql and perl' . ($base ? '\'s base modules' : '')) or diag("$o\n$e");
}

# 3: a node down
$n[2]->stop('fast');
($rc, $out, $err) = status();
is($rc, 3, 'a node down: exit 3') or diag("$out\n$err");
my $port = $n[2]->port;
like($out, qr/node [^\n]*port=$port\b[^\n]*: cannot be reached/, 'and says which');
like($out, qr/worker 1 at .*worker 2 at /s, 'and reports the others');
$n[2]->start;
whole('the node back');

# 4: a change skipped.  A row deleted on worker 3 alone (under a
# replication origin of its own, which origin = none does not send on),
# then updated on worker 1: worker 3 skips the update.
my $row = $n[0]->safe_psql('postgres', 'SELECT id FROM events WHERE node = 1 AND k = 7');
$n[2]->safe_psql('postgres', qq{
	SELECT pg_replication_origin_create('status_test');
	SELECT pg_replication_origin_session_setup('status_test');
	DELETE FROM events WHERE id = $row});
$n[0]->safe_psql('postgres', "UPDATE events SET payload = 'changed' WHERE id = $row");
$n[1]->poll_query_until('postgres', "SELECT payload = 'changed' FROM events WHERE id = $row");
if ($counts)
{
	$n[2]->poll_query_until('postgres',
		q{SELECT sum(confl_update_missing) > 0 FROM pg_stat_subscription_stats})
	  or die 'worker 3 did not count the update it skipped';
	($rc, $out, $err) = status();
	is($rc, 4, '18+: an update skipped for a missing row: exit 4, without --rows');
	like($err, qr/worker 3: snowflake_mesh_from_w1 skipped 1 changes to rows it did not have \(update_missing, delete_missing\)/,
		'and names the subscription that skipped it');
}
($rc, $out, $err) = status('--rows');
is($rc, 4, 'the rows apart: exit 4 with --rows') or diag("$out\n$err");
like($err, qr/the nodes' rows differ/, 'and says so');
# repaired: the row written again on worker 1 reaches every node
$n[0]->safe_psql('postgres', "DELETE FROM events WHERE id = $row; INSERT INTO events (id, node, k, payload) VALUES ($row, 1, 7, 'again')");
$_->poll_query_until('postgres', "SELECT payload = 'again' FROM events WHERE id = $row") for @n;
# (the delete is skipped on worker 3 too: counted before the reset)
$n[2]->poll_query_until('postgres', 'SELECT sum(confl_delete_missing) > 0 FROM pg_stat_subscription_stats')
  if $counts;
whole('the row written again');

# 5: a subscription disabled
$n[1]->safe_psql('postgres', 'ALTER SUBSCRIPTION snowflake_mesh_from_w1 DISABLE');
($rc, $out, $err) = status();
is($rc, 5, 'a subscription disabled: exit 5') or diag("$out\n$err");
like($err, qr/worker 2: snowflake_mesh_from_w1 is disabled/, 'and names it');
$n[1]->safe_psql('postgres', 'ALTER SUBSCRIPTION snowflake_mesh_from_w1 ENABLE');
whole('the subscription enabled');

# 5: a subscriber held up by a lock while worker 1 writes 50 rows
my $holder = $n[1]->background_psql('postgres');
$holder->query_safe('BEGIN; LOCK TABLE events IN ACCESS EXCLUSIVE MODE');
$n[0]->safe_psql('postgres', "INSERT INTO events (node, payload) SELECT 1, 'held' FROM generate_series(1, 50)");
my $t0 = time;
($rc, $out, $err) = status('--max-lag', '2');
is($rc, 5, 'a subscriber held up longer than --max-lag: exit 5') or diag("$out\n$err");
like($err, qr/worker 1: slot snowflake_mesh_w1_to_w2 is more than 2 s behind/, 'and names the slot');
($rc, $out, $err) = status();
is($rc, 5, 'and longer than the default bound, 10 s: exit 5') or diag("$out\n$err");
ok(time - $t0 >= 12, 'each waited its bound first');
$holder->query_safe('COMMIT');
$holder->quit;
whole('the lock released');

# 6: a member's publication reaches a table outside the mesh (a private
# table that every node has), and a subscription carries it
$_->safe_psql('postgres', 'CREATE TABLE private (id bigint PRIMARY KEY, v text)') for @n;
$n[1]->safe_psql('postgres', 'ALTER PUBLICATION snowflake_mesh ADD TABLE private');
$n[0]->safe_psql('postgres', 'ALTER SUBSCRIPTION snowflake_mesh_from_w2 REFRESH PUBLICATION WITH (copy_data = false)');
($rc, $out, $err) = status();
is($rc, 6, 'a publication reaching a table outside the mesh: exit 6') or diag("$out\n$err");
like($err, qr/worker 2: publication snowflake_mesh publishes public\.private, which is not in the mesh/, 'and names it');
like($err, qr/worker 1: snowflake_mesh_from_w2 carries public\.private, which is not in the mesh/,
	'and the subscription that carries it');
# the next routine add-table does not spread it to every subscription
$_->safe_psql('postgres', 'CREATE TABLE notes (id bigint PRIMARY KEY DEFAULT snowflake_nextval())') for @n;
($rc, $out, $err) = mesh('add-table', 'notes', map { conn($_) } @n);
isnt($rc, 0, 'add-table refuses while a member publishes a table the others do not');
like($err, qr/the members publish different tables: public\.private/, 'and says which');
is(join(',', map { $_->safe_psql('postgres',
	"SELECT count(*) FROM pg_subscription_rel r JOIN pg_class c ON c.oid = r.srrelid WHERE c.relname = 'private'") } @n),
	'1,0,0', 'no other subscription took it');
$n[1]->safe_psql('postgres', 'ALTER PUBLICATION snowflake_mesh DROP TABLE private');
$n[0]->safe_psql('postgres', 'ALTER SUBSCRIPTION snowflake_mesh_from_w2 REFRESH PUBLICATION');
whole('the table out of the publication');

# 6: a change left unfinished (its session ended without finishing it)
$n[0]->safe_psql('postgres', "SELECT snowflake.snowflake_mesh_lock('leave of worker 3', 'gone')");
($rc, $out, $err) = status();
is($rc, 6, 'a change left unfinished: exit 6') or diag("$out\n$err");
like($err, qr/worker 1: change leave of worker 3, run gone, since [^,]*, was not finished/, 'and names it');
($rc, $out, $err) = mesh('unlock', conn($n[0]));
is($rc, 0, 'unlock clears it') or diag("$out\n$err");
whole('the record cleared');

# 6: a member's superuser replaces another member's claim with one of
# another system: it replicates, and worker 1 refuses to generate
$n[1]->safe_psql('postgres', q{
	DELETE FROM snowflake_workers WHERE worker_id = 1;
	INSERT INTO snowflake_workers (worker_id, system_identifier, node_name) VALUES (1, 42, 'forged')});
$_->poll_query_until('postgres', 'SELECT system_identifier = 42 FROM snowflake_workers WHERE worker_id = 1') for @n;
($rc, $out, $err) = status();
is($rc, 6, 'a member\'s claim replaced by another system\'s: exit 6') or diag("$out\n$err");
like($err, qr/worker 3: worker 1 is claimed by system 42, not by worker 1's system \d+ \(a foreign claim\)/,
	'and names the foreign claim');
like($err, qr/worker 1: node refuses to generate IDs: snowflake worker id 1 is claimed by another system/, 'and the node it stops');

# 5: a key supplied by clients, written on worker 1 and on worker 2 (its
# subscription from worker 1 off meanwhile, so that both inserts commit):
# each member's apply of the other's row fails
$n[1]->safe_psql('postgres', 'ALTER SUBSCRIPTION snowflake_mesh_from_w1 DISABLE');
$n[0]->safe_psql('postgres', 'INSERT INTO events (id, node) VALUES (42, 1)');
$n[1]->safe_psql('postgres', 'INSERT INTO events (id, node) VALUES (42, 2)');
$n[0]->poll_query_until('postgres',
	q{SELECT apply_error_count > 0 FROM pg_stat_subscription_stats WHERE subname = 'snowflake_mesh_from_w2'})
  or die 'worker 1 did not fail to apply the key worker 2 also wrote';
($rc, $out, $err) = status();
is($rc, 5, 'one key supplied on two members: exit 5') or diag("$out\n$err");
like($err, qr/worker 1: snowflake_mesh_from_w2 had \d+ apply errors/, 'and names the subscription that fails');

$_->stop for @n;
done_testing();
