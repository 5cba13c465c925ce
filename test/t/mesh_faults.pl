# The mesh's faults that status must name and a join must survive: a
# table copy looping on a duplicate key (sync errors), a member that goes
# down in the middle of a join (the join fails, takes back what it made on
# the nodes it reaches, says what it left on the one it cannot reach and
# how to remove it, and a retried join completes), and a slot invalidated
# while its subscriber was down (max_slot_wal_keep_size); a leave and an
# add-table that find the members' rows apart; a join killed at its end,
# taken back with abort.  Rows are
# compared whole on every node.  A mesh needs PostgreSQL 16.
use strict;
use warnings;
use FindBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use SnowflakeTest;
use SnowflakeMesh ();

my $mesh_script = "$FindBin::RealBin/../../scripts/snowflake-mesh";

sub node
{
	my ($w) = @_;
	my $n = snowflake_node("fault$w", worker_id => $w, allows_streaming => 'logical',
		conf => "max_wal_senders = 20\nmax_replication_slots = 20\n"
		  . "max_logical_replication_workers = 12\nmax_worker_processes = 24\n"
		  . "wal_receiver_status_interval = 1\ntrack_commit_timestamp = on\n");
	$n->start;
	$n->safe_psql('postgres', q{
		CREATE EXTENSION snowflake;
		CREATE TABLE events (id bigint PRIMARY KEY DEFAULT snowflake_nextval(),
			node int NOT NULL, payload text)});
	return $n;
}

my @nodes = map { node($_) } 1 .. 3;
if ($nodes[0]->pg_version->major < 16)
{
	$_->stop for @nodes;
	plan skip_all => 'a mesh needs PostgreSQL 16';
}
my $sync_errors = $nodes[0]->pg_version->major >= 19
  ? '(sync_table_error_count + sync_seq_error_count)' : 'sync_error_count';

sub conn { return $_[0]->connstr . ' dbname=postgres'; }

sub mesh
{
	my ($out, $err) = ('', '');
	IPC::Run::run([ $^X, $mesh_script, '--timeout', '60', @_ ], '>', \$out, '2>', \$err);
	return ($? >> 8, $out, $err);
}

sub status { return mesh('--rows', 'status', map { conn($_) } @_); }

# status_whole(WHAT, NODES): polls status until it finds the mesh whole
sub status_whole
{
	my ($what, @members) = @_;
	my ($rc, $out, $err);
	for (1 .. 60)
	{
		($rc, $out, $err) = status(@members);
		last if $rc == 0;
		wake_subscriptions(@members);
		sleep 1;
	}
	is($rc, 0, "$what: status finds the mesh whole") or diag("stdout: $out\nstderr: $err");
	return;
}

sub digest
{
	return $_[0]->safe_psql('postgres',
		"SELECT count(*) || ' rows, ' || coalesce(md5(string_agg(e::text, ',' ORDER BY id)), '-') FROM events e");
}

# converged(WHAT, NODES): waits until every node holds the same rows,
# compared whole, then reports whether they do
sub converged
{
	my ($what, @members) = @_;
	my $deadline = time() + 120;
	my @d;
	while (1)
	{
		@d = map { digest($_) } @members;
		last if !grep { $_ ne $d[0] } @d;
		last if time() > $deadline;
		sleep 1;
	}
	my $ok = is_deeply(\@d, [ ($d[0]) x @members ], "$what: every node holds the same rows");
	diag(join "\n", map { $members[$_]->name . ": $d[$_]" } 0 .. $#members) unless $ok;
	return $ok;
}

sub write_rows
{
	my ($label, $count) = @_;
	$_->safe_psql('postgres', "INSERT INTO events (node, payload) SELECT "
		  . ($_->name =~ s/\D//gr) . ", '$label' FROM generate_series(1, $count)") for @nodes;
	return;
}

my ($rc, $out, $err) = mesh('--tables', 'events', 'create', map { conn($_) } @nodes);
is($rc, 0, 'a mesh of three nodes') or diag("stdout: $out\nstderr: $err");
write_rows('first', 50);
converged('the mesh made', @nodes);
status_whole('the mesh made', @nodes);

# 1. a table copy that loops on a duplicate key: a table published by hand
# on node 1 and taken, with its copy, by node 2, which has a row with the
# same key.  The subscription stays enabled and its apply worker runs;
# only its table synchronization errors tell.
for my $n (@nodes[ 0, 1 ])
{
	$n->safe_psql('postgres', 'CREATE TABLE extra (id bigint PRIMARY KEY, v text)');
	$n->safe_psql('postgres', "INSERT INTO extra VALUES (1, '" . $n->name . "')");
}
$nodes[0]->safe_psql('postgres', 'ALTER PUBLICATION snowflake_mesh ADD TABLE extra');
$nodes[1]->safe_psql('postgres', 'ALTER SUBSCRIPTION snowflake_mesh_from_w1 REFRESH PUBLICATION');
ok($nodes[1]->poll_query_until('postgres',
	"SELECT $sync_errors > 1 FROM pg_stat_subscription_stats WHERE subname = 'snowflake_mesh_from_w1'"),
	'a table copy loops on a duplicate key');
($rc, $out, $err) = status(@nodes);
is($rc, 4, 'a table copy looping on a table one member added: status exits 4 (the rows differ)');
like($err, qr/worker 1: publication snowflake_mesh publishes public\.extra, which is not in the mesh/,
	'and names the table outside the mesh');
like($err, qr/worker 2: snowflake_mesh_from_w1 carries public\.extra, which is not in the mesh/,
	'and the subscription that carries it');
like($err, qr/worker 2: snowflake_mesh_from_w1 had \d+ table synchronization errors/,
	'and names the subscription and its synchronization errors');
like($err, qr/worker 2: snowflake_mesh_from_w1 has 1 tables not yet synchronized/,
	'and the table not synchronized');
like($err, qr/the mesh of workers \[1 2 3\] is not whole/, 'the mesh is not whole');
like($out, qr/worker 3: public\.extra: missing/, '--rows: the table published on node 1 is missing on node 3');
# taken back: the table leaves the publication and the subscription
$nodes[0]->safe_psql('postgres', 'ALTER PUBLICATION snowflake_mesh DROP TABLE extra');
$nodes[1]->safe_psql('postgres', 'ALTER SUBSCRIPTION snowflake_mesh_from_w1 REFRESH PUBLICATION');
$nodes[1]->poll_query_until('postgres', q{
	SELECT NOT EXISTS (SELECT FROM pg_stat_subscription WHERE subname = 'snowflake_mesh_from_w1' AND relid IS NOT NULL)});
$_->safe_psql('postgres', 'SELECT pg_stat_reset_subscription_stats(NULL)') for @nodes;
status_whole('the table taken back, the counters reset', @nodes);

# 2. a member goes down in the middle of a join.  Node 1, the copy
# source, has not applied node 3's latest rows (its subscription is
# paused), so the join waits on node 3 once it has made its objects there
# and on the new node; node 3 is stopped then.
my $new = node(4);
$nodes[0]->safe_psql('postgres', 'ALTER SUBSCRIPTION snowflake_mesh_from_w3 DISABLE');
$nodes[2]->safe_psql('postgres', "INSERT INTO events (node, payload) VALUES (3, 'unapplied')");
my ($jout, $jerr) = ('', '');
my $join = IPC::Run::start([ $^X, $mesh_script, '--timeout', '60', 'join', conn($new),
		map { conn($_) } @nodes ], '>', \$jout, '2>', \$jerr);
ok($new->poll_query_until('postgres',
	"SELECT EXISTS (SELECT FROM pg_subscription WHERE subname = 'snowflake_mesh_from_w3')"),
	'the join has made the new node\'s subscription to node 3');
$nodes[2]->stop('fast');
$join->finish;
my $jrc = $? >> 8;
isnt($jrc, 0, 'a member down mid-join: the join fails');
my $port3 = $nodes[2]->port;
like($jerr, qr/error: on node [^\n]*port=$port3[^\n]*: [^\n]*(connect|connection)/,
	'and says which node it lost');
like($jerr, qr/the change was taken back/, 'and that it took its change back');
# what it made on node 3 is named, with how to remove it; nothing else
my @cannot = $jerr =~ /(could not (?:drop|unlock|remove|resume)[^\n]*)/g;
is(scalar(grep { !/port=$port3/ } @cannot), 0,
	'every "could not" names the node that is down') or diag($jerr);
like($jerr, qr/could not drop subscription snowflake_mesh_from_w4, made by this run, on [^\n]*port=$port3[^\n]*its slot snowflake_mesh_w4_to_w3 on worker 4 was dropped; once the node is back, run there: ALTER SUBSCRIPTION snowflake_mesh_from_w4 DISABLE; ALTER SUBSCRIPTION snowflake_mesh_from_w4 SET \(slot_name = NONE\); DROP SUBSCRIPTION snowflake_mesh_from_w4;/,
	'node 3\'s subscription to the new node is left, said so, with how to drop it');
like($jerr, qr/subscription snowflake_mesh_from_w3 on [^\n]* dropped without its slot[^\n]*SELECT pg_drop_replication_slot\('snowflake_mesh_w3_to_w4'\) there/,
	'the new node\'s slot on node 3 is named, with how to drop it');
like($jerr, qr/could not unlock node [^\n]*port=$port3/, 'and node 3\'s lock is named');
is($new->safe_psql('postgres', 'SELECT count(*) FROM pg_subscription'), '0',
	'no subscription is left on the new node');
is($new->safe_psql('postgres', 'SELECT count(*) FROM pg_replication_slots'), '0',
	'nor any slot');
is($new->safe_psql('postgres', 'SELECT count(*) FROM pg_publication'), '0',
	'nor its publication');
is($new->safe_psql('postgres', 'SELECT count(*) FROM snowflake_workers WHERE worker_id = 4'), '0',
	'nor its claim');
for my $n (@nodes[ 0, 1 ])
{
	is($n->safe_psql('postgres', q{
		SELECT (SELECT count(*) FROM pg_subscription WHERE subname = 'snowflake_mesh_from_w4')
		     + (SELECT count(*) FROM pg_replication_slots WHERE slot_name ~ '_w4$|_w4_')}),
		'0', 'no subscription or slot of the join on ' . $n->name);
	is($n->safe_psql('postgres', q{SELECT coalesce(obj_description(oid, 'pg_publication'), '-')
		FROM pg_publication WHERE pubname = 'snowflake_mesh'}), '-', 'nor its lock on ' . $n->name);
}
# node 3 back: what the join left there goes as the helper said
$nodes[2]->start;
is($nodes[2]->safe_psql('postgres', q{
	SELECT string_agg(subname || ':' || subenabled, ',') FROM pg_subscription WHERE subname = 'snowflake_mesh_from_w4'}),
	'snowflake_mesh_from_w4:false', 'node 3 back: the subscription left there is disabled');
$nodes[2]->safe_psql('postgres', 'ALTER SUBSCRIPTION snowflake_mesh_from_w4 DISABLE');
$nodes[2]->safe_psql('postgres', 'ALTER SUBSCRIPTION snowflake_mesh_from_w4 SET (slot_name = NONE)');
$nodes[2]->safe_psql('postgres', 'DROP SUBSCRIPTION snowflake_mesh_from_w4');
$nodes[2]->safe_psql('postgres', "SELECT pg_drop_replication_slot('snowflake_mesh_w3_to_w4')");
($rc, $out, $err) = mesh('unlock', conn($nodes[2]));
is($rc, 0, 'its lock cleared with unlock') or diag("stdout: $out\nstderr: $err");
$nodes[0]->safe_psql('postgres', 'ALTER SUBSCRIPTION snowflake_mesh_from_w3 ENABLE');
$_->safe_psql('postgres', 'SELECT pg_stat_reset_subscription_stats(NULL)') for @nodes;
status_whole('node 3 back, the leftovers removed', @nodes);
# named beside the members, the node that did not join is no member:
# every subscription it and they lack is named
($rc, $out, $err) = status(@nodes, $new);
is($rc, 4, 'status of the members and the node that did not join exits 4 (its rows differ)');
like($err, qr/worker 4: subscription snowflake_mesh_from_w1 is missing/, 'the new node\'s subscriptions are missing');
like($err, qr/worker 2: subscription snowflake_mesh_from_w4 is missing/, 'and the members\' to it');
# the join again, while the members write, the copy the failed one
# brought emptied first (nothing else was written there: the node refused
# writes): it completes and the mesh converges
$new->safe_psql('postgres', 'TRUNCATE events; DELETE FROM snowflake_workers');
my @load = map {
	my $n = $_;
	my $w = $n->name =~ s/\D//gr;
	my ($o, $e) = ('', '');
	IPC::Run::start([ 'psql', '-X', '-q', '-d', conn($n), '-c',
		"DO \$\$ BEGIN FOR i IN 1 .. 300 LOOP INSERT INTO events (node, payload) VALUES ($w, 'during retry'); COMMIT; PERFORM pg_sleep(0.01); END LOOP; END \$\$" ],
		'>', \$o, '2>', \$e)
} @nodes;
($rc, $out, $err) = mesh('join', conn($new), map { conn($_) } @nodes);
is($rc, 0, 'the join run again completes') or diag("stdout: $out\nstderr: $err");
ok($_->finish, 'the writes during the join committed') for @load;
push @nodes, $new;
write_rows('after retry', 20);
converged('the join retried', @nodes);
is($new->safe_psql('postgres', "SELECT count(*) FROM events WHERE payload = 'during retry'"), '900',
	'every row written during the join is on the new node');
status_whole('the join retried', @nodes);

# a join whose new node does not end with what its source holds (a
# trigger of its own drops the rows of even id that its apply writes)
# fails and is taken back; the members stay whole
my $lossy = node(6);
$lossy->safe_psql('postgres', q{
	CREATE FUNCTION drop_even() RETURNS trigger LANGUAGE plpgsql
	AS $$BEGIN RETURN CASE WHEN NEW.id % 2 = 0 THEN NULL ELSE NEW END; END$$;
	CREATE TRIGGER drop_even BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION drop_even();
	ALTER TABLE events ENABLE ALWAYS TRIGGER drop_even});
($rc, $out, $err) = mesh('join', conn($lossy), map { conn($_) } @nodes);
is($rc, 1, 'a join whose new node lost rows fails') or diag("stdout: $out\nstderr: $err");
note("the helper said: $err");
is($lossy->safe_psql('postgres', 'SELECT count(*) FROM pg_subscription'), '0', 'and is taken back');
status_whole('the join that lost rows taken back', @nodes);
$lossy->stop;

# a node whose worker id another system claimed in the mesh (a node that
# left keeps its claim) is refused before anything is made, even when it
# claimed and issued IDs first: its IDs never meet the mesh's
my $other = node(5);
$other->safe_psql('postgres', "SELECT snowflake_claim_worker('other 5'); SELECT snowflake_nextval() FROM generate_series(1, 10)");
$nodes[1]->safe_psql('postgres', q{
	INSERT INTO snowflake_workers (worker_id, system_identifier, node_name)
	VALUES (5, (SELECT system_identifier FROM pg_control_system()) + 1, 'gone 5')});
$_->poll_query_until('postgres', 'SELECT EXISTS (SELECT FROM snowflake_workers WHERE worker_id = 5)') for @nodes;
($rc, $out, $err) = mesh('join', conn($other), map { conn($_) } @nodes);
isnt($rc, 0, 'a node whose worker id is claimed in the mesh by another system: join refused');
like($err, qr/worker id 5 is already claimed in the mesh by another system/, 'and says why');
is($other->safe_psql('postgres', 'SELECT count(*) FROM pg_subscription'), '0', 'nothing made on it');
is(join(',', map { $_->safe_psql('postgres', "SELECT count(*) FROM pg_subscription WHERE subname = 'snowflake_mesh_from_w5'") } @nodes),
	'0,0,0,0', 'nor on the members');
$other->stop;
$nodes[1]->safe_psql('postgres', 'DELETE FROM snowflake_workers WHERE worker_id = 5');
$_->poll_query_until('postgres', 'SELECT NOT EXISTS (SELECT FROM snowflake_workers WHERE worker_id = 5)') for @nodes;

# a leave and an add-table compare every node's rows at their end: with
# a row one member lost alone (deleted under an origin of its own, which
# origin = none does not send), a leave is refused and taken back (the
# node still takes writes, which reach every member), and an add-table
# ends in exit 4 naming the table that differs
my $row = $nodes[0]->safe_psql('postgres', 'SELECT max(id) FROM events');
my $values = $nodes[0]->safe_psql('postgres', "SELECT format('(%s, %s, %L)', id, node, payload) FROM events WHERE id = $row");
$nodes[1]->safe_psql('postgres', qq{
	SELECT pg_replication_origin_create('fault_local');
	SELECT pg_replication_origin_session_setup('fault_local');
	DELETE FROM events WHERE id = $row});
my $go = $nodes[-1];
my @stay = grep { $_ != $go } @nodes;
($rc, $out, $err) = mesh('leave', conn($go), map { conn($_) } @stay);
is($rc, 1, 'a leave while a member lacks a row is refused') or diag("stdout: $out\nstderr: $err");
like($err, qr/the members do not hold the same rows as worker \d+ of public\.events/, 'and names the table');
$go->safe_psql('postgres', "INSERT INTO events (node, payload) VALUES (0, 'after the refused leave')");
$_->poll_query_until('postgres', "SELECT count(*) = 1 FROM events WHERE payload = 'after the refused leave'")
  for @stay;
$_->safe_psql('postgres', 'CREATE TABLE notes (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), body text)')
  for @nodes;
($rc, $out, $err) = mesh('add-table', 'notes', map { conn($_) } @nodes);
is($rc, 4, 'an add-table while a member lacks a row exits 4') or diag("stdout: $out\nstderr: $err");
like($err, qr/the members hold different rows of public\.events/, 'and names the table that differs');
like($out, qr/table public\.notes is in the mesh/, 'the table is added all the same');
# the row written again, under that origin, on the node that lost it
$nodes[1]->safe_psql('postgres', qq{
	SELECT pg_replication_origin_session_setup('fault_local');
	INSERT INTO events (id, node, payload) VALUES $values});
$nodes[0]->safe_psql('postgres', "INSERT INTO notes (body) VALUES ('a note')");
$_->poll_query_until('postgres', "SELECT count(*) = 1 FROM notes") for @nodes;
status_whole('the lost row written again', @nodes);
($rc, $out, $err) = mesh('leave', conn($go), map { conn($_) } @stay);
is($rc, 0, 'then the leave succeeds') or diag("stdout: $out\nstderr: $err");
@nodes = @stay;

# abort of a join killed once its claim reached the members (the join
# stalls at its end, where it writes the new node's claim again, behind a
# session that locks that row): the claim's delete reaches every member
# before their subscriptions to the new node go, and the new node's
# tables refuse writes as after a failed join
my $stalled = node(7);
$stalled->safe_psql('postgres', 'CREATE TABLE notes (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), body text)');
my $run = SnowflakeMesh::mesh_start('join', conn($stalled), map { conn($_) } @nodes);
ok($stalled->poll_query_until('postgres', 'SELECT count(*) = 1 FROM snowflake_workers WHERE worker_id = 7'),
	'the join claims worker id 7 on the new node');
my ($bout, $berr) = ('', '');
my $blocker = IPC::Run::start([ 'psql', '-X', '-q', '-d', conn($stalled) . ' application_name=blocker', '-c',
		'BEGIN; SELECT FROM snowflake.snowflake_workers WHERE worker_id = 7 FOR UPDATE; SELECT pg_sleep(600)' ],
	'>', \$bout, '2>', \$berr);
$_->poll_query_until('postgres', 'SELECT count(*) = 1 FROM snowflake_workers WHERE worker_id = 7') for @nodes;
ok($stalled->poll_query_until('postgres', q{SELECT count(*) > 0 FROM pg_locks WHERE NOT granted AND locktype = 'transactionid'}),
	'the join waits at its end, with its claim on every member');
kill 'KILL', -$run->{h}{KIDS}[0]{PID};
SnowflakeMesh::mesh_finish($run);
$stalled->safe_psql('postgres', "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'blocker'");
$blocker->finish;
# the killed helper's sessions end once they next meet their client
SnowflakeMesh::mesh_locks_gone(@nodes, $stalled);
# the members write meanwhile, and the new node applies their rows
my @during = map {
	my $n = $_;
	my ($o, $e) = ('', '');
	IPC::Run::start([ 'psql', '-X', '-q', '-d', conn($n), '-c',
		"DO \$\$ BEGIN FOR i IN 1 .. 200 LOOP INSERT INTO events (node, payload) VALUES (0, 'during abort'); COMMIT; PERFORM pg_sleep(0.01); END LOOP; END \$\$" ],
		'>', \$o, '2>', \$e)
} @nodes[ 0, 1 ];
($rc, $out, $err) = mesh('abort', conn($stalled), map { conn($_) } @nodes);
is($rc, 0, 'abort takes the killed join back, the members writing') or diag("stdout: $out\nstderr: $err");
ok($_->finish, 'the writes during the abort committed') for @during;
is(join(',', map { $_->safe_psql('postgres', 'SELECT count(*) FROM snowflake_workers WHERE worker_id = 7') } @nodes),
	'0,0,0', 'no member keeps the claim of worker id 7');
is(SnowflakeMesh::sqlstate_of($stalled, 'INSERT INTO notes (body) VALUES (\'alone\')'), 'SM002',
	'the node taken back refuses writes');
status_whole('the killed join taken back', @nodes);
$stalled->stop;

# 3. a slot invalidated while its subscriber was down: node 1 keeps at
# most 1 MB of WAL for its slots, and node 3 is stopped while node 1
# writes and checkpoints
$nodes[0]->safe_psql('postgres', q{ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'; SELECT pg_reload_conf()});
$nodes[2]->stop('fast');
my $lost = 0;
for (1 .. 30)
{
	$nodes[0]->safe_psql('postgres', q{
		INSERT INTO events (node, payload) SELECT 1, 'while 3 is down' FROM generate_series(1, 200);
		SELECT pg_switch_wal();
		INSERT INTO events (node, payload) VALUES (1, 'while 3 is down');
		SELECT pg_switch_wal();
		CHECKPOINT});
	last if ($lost = $nodes[0]->safe_psql('postgres',
		"SELECT wal_status = 'lost' FROM pg_replication_slots WHERE slot_name = 'snowflake_mesh_w1_to_w3'") eq 't');
}
ok($lost, 'node 1\'s slot for node 3 is invalidated');
$nodes[2]->start;
ok($nodes[2]->wait_for_log(qr/can no longer (access|get changes from) replication slot "snowflake_mesh_w1_to_w3"/),
	'node 3\'s subscription to node 1 cannot use its slot');
($rc, $out, $err) = status(@nodes);
is($rc, 4, 'a slot invalidated: status exits 4');
like($err, qr/worker 1: slot snowflake_mesh_w1_to_w3 is invalidated/, 'and names the slot');
like($out, qr/slot snowflake_mesh_w1_to_w3: inactive, invalidated/, 'and shows it so');
like($err, qr/the nodes' rows differ/, 'and that the rows differ');
isnt(digest($nodes[2]), digest($nodes[0]), 'as they do');

$_->stop for @nodes;
done_testing();
