# snowflake-mesh status against meshes broken one way at a time, each
# with the exit status docs/mesh.md gives it: 0 whole; 2 bad usage; 3 a
# node down; 4 changes skipped on a node (18 and later count them;
# --rows finds the rows apart on every version); 5 a subscription
# disabled, a subscriber held up longer than the lag bound, and one key
# supplied by clients on two members; 6 a member's publication reaching
# a table outside the mesh (and add-table refusing to spread it), a
# change left unfinished, each configuration that drops changes (publish
# actions, a row filter, a column list, a subscription moved to another
# publication, a table taken out and put back by hand), a member's claim
# deleted on every member, IDs of a worker id no member claims (and a join
# under that worker id refused), and a member's claim replaced by another
# system's.  The members speak German (lc_messages, where the server has
# the catalogue), and so does the helper's libpq; they run with other
# time zones, date styles, interval styles and float digits, and one table
# has its columns in another order on each: whole all the same.  A leave
# and a join run there, with waits that give up and are tried again.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use SnowflakeTest;
use SnowflakeMesh;

my ($de, $why) = german(PostgreSQL::Test::Cluster->new('status_language'));
my @settings = (
	"TimeZone = 'UTC'\nDateStyle = 'ISO, MDY'\n",
	"TimeZone = 'Asia/Kathmandu'\nDateStyle = 'SQL, DMY'\nIntervalStyle = 'sql_standard'\nextra_float_digits = -3\nbytea_output = 'escape'\n",
	"TimeZone = 'America/St_Johns'\nDateStyle = 'German'\nIntervalStyle = 'iso_8601'\nextra_float_digits = 0\n");
my @columns = ('id bigint PRIMARY KEY DEFAULT snowflake_nextval(), t timestamptz, d date, f float8, i interval, b bytea, v text',
	'v text, b bytea, i interval, f float8, d date, t timestamptz, id bigint PRIMARY KEY DEFAULT snowflake_nextval()',
	'f float8, id bigint PRIMARY KEY DEFAULT snowflake_nextval(), v text, t timestamptz, b bytea, d date, i interval');
my @n = map { mesh_node("status$_", $_, undef, $de . $settings[ $_ - 1 ]) } 1 .. 3;
if ($n[0]->pg_version->major < 16)
{
	$_->stop for @n;
	plan skip_all => 'a mesh needs PostgreSQL 16';
}
my $counts = $n[0]->pg_version->major >= 18;
if ($de)
{
	# the helper's libpq speaks German too
	$ENV{LC_ALL} = 'de_DE.UTF-8';
	$ENV{LANGUAGE} = 'de';
	my ($o, $e) = ('', '');
	$n[0]->psql('postgres', 'SELECT 1/0', stdout => \$o, stderr => \$e);
	like($e, qr/Division durch Null/, 'the members speak German');
}
else
{
	diag("the members speak English: $why");
}
$n[$_]->safe_psql('postgres', "CREATE TABLE mixed ($columns[$_])") for 0 .. 2;

my ($rc, $out, $err) = mesh('--tables', 'events, mixed', 'create', map { conn($_) } @n);
is($rc, 0, 'a mesh of three, each joined in its language') or diag("$out\n$err");
$_->safe_psql('postgres', 'INSERT INTO events (node, k) SELECT ' . wid($_) . ', g FROM generate_series(1, 100) g')
  for @n;
$_->safe_psql('postgres', q{INSERT INTO mixed (t, d, f, i, b, v)
	SELECT '2024-03-01 12:00:00+00'::timestamptz + g * interval '1 h 1 s', '2024-02-28'::date + g, 0.1 * g,
		   g * interval '1 day 02:03:04.5', decode(md5(g::text), 'hex'), 'row ' || g
	FROM generate_series(1, 50) g}) for @n;
is(converged([@n], [ 'events', 'mixed' ]), '', 'every node holds the same rows');

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

# the helper connects as psql does: a service file, sslmode
my $services = PostgreSQL::Test::Utils::tempdir() . '/pg_service.conf';
open my $fh, '>', $services or die;
print $fh map { "[mesh" . wid($_) . "]\nhost=" . $_->host . "\nport=" . $_->port . "\ndbname=postgres\n" } @n;
close $fh;
{
	local $ENV{PGSERVICEFILE} = $services;
	($rc, $out, $err) = mesh('status', map { 'service=mesh' . wid($_) . ' sslmode=prefer' } @n);
	is($rc, 0, 'status through a service file, with sslmode') or diag("$out\n$err");
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
like($err, qr/worker 2: publication snowflake_mesh has public\.private, put in by hand/, 'and says which');
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

# 6: each configuration of a member that drops changes, and its repair.
# broken(WHAT, CODE, PATTERN, OPTIONS): status exits CODE and names it.
sub broken
{
	my ($what, $code, $pattern, @options) = @_;
	($rc, $out, $err) = status(@options);
	is($rc, $code, "$what: exit $code") or diag("$out\n$err");
	like($err, $pattern, 'and names it');
	return;
}
$n[1]->safe_psql('postgres', q{ALTER PUBLICATION snowflake_mesh SET (publish = 'insert')});
broken('a publication of inserts only', 6, qr/worker 2: publication snowflake_mesh publishes only insert: /);
$n[1]->safe_psql('postgres', q{ALTER PUBLICATION snowflake_mesh SET (publish = 'insert, update, delete')});
whole('the publication of every change again');

# a row filter, and a column list: the table is put in again by hand too,
# which status names until that member records it
$n[1]->safe_psql('postgres', 'ALTER PUBLICATION snowflake_mesh SET TABLE events WHERE (id > 0), mixed, snowflake.snowflake_workers');
broken('a row filter', 6, qr/worker 2: publication snowflake_mesh publishes only the rows of public\.events that its row filter lets through/);
like($err, qr/worker 2: publication snowflake_mesh has public\.events, put in by hand/, 'and the table put in by hand');
$n[1]->safe_psql('postgres', 'ALTER PUBLICATION snowflake_mesh SET TABLE events (id, node, k, n), mixed, snowflake.snowflake_workers');
broken('a column list', 6, qr/worker 2: publication snowflake_mesh publishes only some columns of public\.events/);
$n[1]->safe_psql('postgres', 'ALTER PUBLICATION snowflake_mesh SET TABLE events, mixed, snowflake.snowflake_workers');
broken('the table put back by hand', 6, qr/worker 2: publication snowflake_mesh has public\.events, put in by hand/);
$n[1]->safe_psql('postgres', 'SELECT snowflake.snowflake_mesh_record()');
whole('every table recorded again');

# a subscription moved to another publication, without a refresh
$n[0]->safe_psql('postgres', 'CREATE PUBLICATION other FOR TABLE events');
$n[1]->safe_psql('postgres', 'ALTER SUBSCRIPTION snowflake_mesh_from_w1 SET PUBLICATION other WITH (refresh = false)');
# its apply worker restarts for the change; until it runs again, status
# rightly says first that it is not running (exit 5)
$n[1]->poll_query_until('postgres', q{SELECT pid IS NOT NULL FROM pg_stat_subscription
	WHERE subname = 'snowflake_mesh_from_w1' AND relid IS NULL})
  or die 'the subscription moved to another publication did not run again';
broken('a subscription moved to another publication', 6,
	qr/worker 2: snowflake_mesh_from_w1 subscribes to publication other of worker 1, not to its publication of the mesh, snowflake_mesh/);
$n[1]->safe_psql('postgres', 'ALTER SUBSCRIPTION snowflake_mesh_from_w1 SET PUBLICATION snowflake_mesh WITH (refresh = false)');
$n[0]->safe_psql('postgres', 'DROP PUBLICATION other');
whole('the subscription back');

# a table taken out of a member's publication, written there, and put back
# by hand: status names it; --rows finds the row that did not travel
my $origin = 0;
sub alone
{
	my ($node, $sql) = @_;
	$origin++;
	$node->safe_psql('postgres', qq{
		SELECT pg_replication_origin_create('status_alone_$origin');
		SELECT pg_replication_origin_session_setup('status_alone_$origin');
		$sql});
	return;
}
$n[1]->safe_psql('postgres', q{
	ALTER PUBLICATION snowflake_mesh DROP TABLE events;
	INSERT INTO events (node, payload) VALUES (2, 'while out');
	ALTER PUBLICATION snowflake_mesh ADD TABLE events});
broken('a table taken out and put back by hand', 6, qr/worker 2: publication snowflake_mesh has public\.events, put in by hand, not by snowflake-mesh add-table/);
broken('and --rows', 4, qr/the nodes' rows differ/, '--rows');
alone($n[1], q{DELETE FROM events WHERE payload = 'while out'});
$n[1]->safe_psql('postgres', 'SELECT snowflake.snowflake_mesh_record()');
whole('the row taken back, the table recorded');

# a member's claim deleted on every member: that member generates under a
# worker id no member claims
$n[0]->safe_psql('postgres', 'DELETE FROM snowflake_workers WHERE worker_id = 3');
$_->poll_query_until('postgres', 'SELECT NOT EXISTS (SELECT FROM snowflake_workers WHERE worker_id = 3)') for @n;
broken('a claim deleted on every member', 6, qr/worker 3 generates IDs under a worker id no member claims/);
like($err, qr/worker 1: worker 3's claim is missing/, 'and the claim missing on each member');
$n[2]->safe_psql('postgres', 'SELECT snowflake_claim_worker()');
$_->poll_query_until('postgres', 'SELECT EXISTS (SELECT FROM snowflake_workers WHERE worker_id = 3)') for @n;
whole('the claim made again');

# IDs of a worker id that no member claims (as a member switched to it by
# a reload leaves them): --rows names them, and a join under that worker
# id is refused before it makes anything
$n[0]->safe_psql('postgres', q{INSERT INTO events (id, node, payload)
	VALUES (snowflake_from_timestamp(now()) | (9::bigint << 12), 9, 'worker 9')});
$_->poll_query_until('postgres', q{SELECT EXISTS (SELECT FROM events WHERE payload = 'worker 9')}) for @n;
broken('IDs of a worker id no member claims', 6, qr/worker \d: public\.events holds IDs of worker 9, which no member claims/, '--rows');
my $nine = mesh_node('status9', 9, undef, $de);
($rc, $out, $err) = mesh('join', conn($nine), map { conn($_) } @n);
is($rc, 1, 'a join under that worker id is refused') or diag("$out\n$err");
like($err, qr/worker id 9 is already in use in the mesh: IDs of worker 9 are in public\.events/, 'and says why');
is($nine->safe_psql('postgres', 'SELECT count(*) FROM pg_subscription') . ','
	  . join(',', map { $_->safe_psql('postgres', q{SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE '%w9%'}) } @n),
	'0,0,0,0', 'having made nothing');
$nine->stop;
$n[0]->safe_psql('postgres', q{DELETE FROM events WHERE payload = 'worker 9'});
$_->poll_query_until('postgres', q{SELECT NOT EXISTS (SELECT FROM events WHERE payload = 'worker 9')}) for @n;
whole('those IDs gone');

# a leave while a member's apply is held up: its wait gives up each second
# (SQLSTATE SM001, whatever language the server speaks) and is tried again
# until the member has the rows; then the node joins again
$holder = $n[0]->background_psql('postgres');
$holder->query_safe('BEGIN; LOCK TABLE events IN ACCESS EXCLUSIVE MODE');
$n[2]->safe_psql('postgres', q{INSERT INTO events (node, payload) VALUES (3, 'before the leave')});
my $leave = mesh_start('leave', conn($n[2]), map { conn($_) } @n[ 0, 1 ]);
my %started;
my $deadline = time + 120;
while (keys %started < 2 && time < $deadline && mesh_running($leave))
{
	my $s = $n[2]->safe_psql('postgres', q{SELECT query_start FROM pg_stat_activity
		WHERE query LIKE '%snowflake_mesh_wait_received%' AND pid <> pg_backend_pid()});
	$started{$s} = 1 if $s ne '';
	usleep(100_000);
}
is(scalar(keys %started), 2, 'the leave waits, gives up after a second and waits again');
$holder->query_safe('COMMIT');
$holder->quit;
($rc, $out, $err) = mesh_finish($leave);
is($rc, 0, 'and then worker 3 leaves') or diag("$out\n$err");
is($n[0]->safe_psql('postgres', q{SELECT count(*) FROM events WHERE payload = 'before the leave'}), '1',
	'with its last row on worker 1');
$n[2]->safe_psql('postgres', 'SELECT snowflake.snowflake_mesh_unfence(); TRUNCATE events, mixed; '
	  . 'DELETE FROM snowflake_workers; SELECT snowflake.snowflake_mesh_unpublish(NULL)');
($rc, $out, $err) = mesh('join', conn($n[2]), map { conn($_) } @n[ 0, 1 ]);
is($rc, 0, 'worker 3 joins again') or diag("$out\n$err");
whole('worker 3 back');

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
