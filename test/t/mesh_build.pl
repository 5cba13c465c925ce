# Active-active: a mesh of nodes that all write the same table, joined by
# PostgreSQL's own logical replication with origin = none and built by
# scripts/snowflake-mesh.  Convergence under concurrent load, a second node
# with one worker id caught everywhere, a node joining and one leaving
# while writes go on, a member's standby taking its place, and id order
# across nodes under clock skew.  Each change of membership holds a lock
# every member sees; status checks what it claims; rows are compared
# whole.  On PostgreSQL 15, which has no origin = none, the helper
# refuses.
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
my $schema = q{
	CREATE EXTENSION snowflake;
	CREATE TABLE events (
		id bigint PRIMARY KEY DEFAULT snowflake_nextval(),
		node int NOT NULL,
		round int,
		payload text);
	CREATE TABLE notes (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), body text);
};

sub mesh_node
{
	my ($name, $worker) = @_;
	my $n = snowflake_node($name, worker_id => $worker, allows_streaming => 'logical',
		conf => "max_wal_senders = 20\nmax_replication_slots = 20\n"
		  . "max_logical_replication_workers = 12\nmax_worker_processes = 24\n"
		  . "wal_receiver_status_interval = 1\ntrack_commit_timestamp = on");
	start_faked($n, '+0');
	$n->safe_psql('postgres', $schema);
	return $n;
}

sub conn { return $_[0]->connstr . ' dbname=postgres'; }

# mesh(ARGS...): runs the helper; returns its exit status, output and errors
sub mesh
{
	my ($out, $err) = ('', '');
	IPC::Run::run([ $^X, $mesh_script, '--timeout', '120', @_ ], '>', \$out, '2>', \$err);
	return ($? >> 8, $out, $err);
}

sub mesh_ok
{
	my ($what, @args) = @_;
	my ($rc, $out, $err) = mesh(@args);
	# every later step builds on this one: a failure ends the file, rather
	# than leaving each check after it to wait out its timeout
	is($rc, 0, $what) or die "stdout: $out\nstderr: $err\n";
	return;
}

my $first = mesh_node('mesh1', 1);
if ($first->pg_version->major < 16)
{
	my $other = mesh_node('mesh2', 2);
	my ($rc, $out, $err) = mesh('--tables', 'events', 'create', conn($first), conn($other));
	isnt($rc, 0, 'PostgreSQL 15: the helper refuses to build a mesh');
	like($err, qr/needs origin = none, which PostgreSQL 16 and later have/, 'and says why');
	# what README says of two-way subscriptions there: a node sends on the
	# rows it applied, and the first row comes back to stop a subscription
	for my $pair ([ $first, $other ], [ $other, $first ])
	{
		my ($from, $to) = @$pair;
		$from->safe_psql('postgres', 'CREATE PUBLICATION twoway FOR TABLE events');
		$to->safe_psql('postgres', "CREATE SUBSCRIPTION from_" . $from->name . " CONNECTION '"
			  . conn($from) . "' PUBLICATION twoway WITH (copy_data = false)");
	}
	$first->safe_psql('postgres', "INSERT INTO events (node, payload) VALUES (1, 'round trip')");
	ok($first->poll_query_until('postgres',
		"SELECT apply_error_count > 0 FROM pg_stat_subscription_stats WHERE subname = 'from_mesh2'"),
		'PostgreSQL 15: a two-way subscription stops on the first row');
	ok($first->log_contains('duplicate key value violates unique constraint "events_pkey"'),
		'on a duplicate key, as the row comes back to the node that wrote it');
	$_->stop for $first, $other;
	done_testing();
	exit;
}
my $has_failover_slots = $first->pg_version->major >= 17;

# PostgreSQL 19 counts table and sequence synchronization errors apart
my $sync_errors = $first->pg_version->major >= 19
  ? '(sync_table_error_count + sync_seq_error_count)' : 'sync_error_count';

# node 1 has a streaming standby that keeps its logical slots (17+): a
# physical slot, failover slots synchronized, and no logical subscriber
# served what the standby has not flushed
my $standby;
if ($has_failover_slots)
{
	$first->safe_psql('postgres', "SELECT pg_create_physical_replication_slot('mesh1_standby')");
	$first->backup('b1');
	$standby = PostgreSQL::Test::Cluster->new('mesh1_standby');
	$standby->init_from_backup($first, 'b1', has_streaming => 1);
	$standby->append_conf('postgresql.conf', q{
primary_slot_name = 'mesh1_standby'
hot_standby_feedback = on
sync_replication_slots = on
} . "primary_conninfo = '" . $first->connstr . " dbname=postgres application_name=mesh1_standby'\n");
	start_faked($standby, '+0');
	$first->safe_psql('postgres', q{
		ALTER SYSTEM SET synchronized_standby_slots = 'mesh1_standby';
		ALTER SYSTEM SET synchronous_standby_names = 'mesh1_standby';
		SELECT pg_reload_conf()});
}
my @nodes = ($first, map { mesh_node("mesh$_", $_) } 2 .. 3);

# rows that node 1 had before the mesh was made
$first->safe_psql('postgres',
	"INSERT INTO events (node, payload) SELECT 1, 'before' FROM generate_series(1, 100)");

# 1. the mesh, made by the helper
mesh_ok('the helper makes a mesh of three nodes',
	'--tables', 'events', '--name', 'mesh1', 'create', map { conn($_) } @nodes);
# every node's events, as count, and a checksum of the whole rows
sub digest
{
	my ($node, $where) = @_;
	$where //= 'true';
	return $node->safe_psql('postgres',
		"SELECT count(*) || ' rows, ' || coalesce(md5(string_agg(e::text, ',' ORDER BY id)), '-') FROM events e WHERE $where");
}

# status(NODES): the helper's status of the mesh of NODES, with --rows
sub status
{
	return mesh('--rows', 'status', map { conn($_) } @_);
}

sub status_whole
{
	my ($what, @members) = @_;
	my ($rc, $out, $err) = status(@members);
	is($rc, 0, "$what: status finds the mesh whole") or diag("stdout: $out\nstderr: $err");
	return;
}

# wait until every node holds the same rows, then report whether they do
sub converged
{
	my ($what, @members) = @_;
	my $deadline = time() + 180;
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

sub no_errors
{
	my ($what, @members) = @_;
	for my $n (@members)
	{
		is($n->safe_psql('postgres',
			"SELECT coalesce(sum(apply_error_count + $sync_errors), 0) FROM pg_stat_subscription_stats"),
			'0', "$what: no subscription error on " . $n->name);
	}
	return;
}

# pgbench(NODE, LABEL, CLIENTS, TRANSACTIONS, RATE): inserts in the
# background, each transaction one row with node = LABEL; RATE (per second,
# all clients) paces it so that it overlaps what the test does meanwhile
sub pgbench
{
	my ($node, $label, $clients, $tx, $rate) = @_;
	my $script = $node->basedir . "/insert-$label.sql";
	open my $fh, '>', $script or die;
	print $fh "INSERT INTO events (node, payload) VALUES ($label, 'load');\n";
	close $fh;
	my ($out, $err) = ('', '');
	my @rate = $rate ? ('-R', $rate) : ();
	# (the connection string is pgbench's last argument: its -d is --debug,
	# whose lines fill the pipe and stop pgbench while nobody reads it)
	my $h = IPC::Run::start(
		[ 'pgbench', '-n', '-c', $clients, '-j', 1, '-t', $tx, @rate, '-f', $script, conn($node) ],
		'>', \$out, '2>', \$err);
	return { h => $h, out => \$out, err => \$err, node => $node->name, rows => $clients * $tx };
}

sub finished
{
	my ($run) = @_;
	ok($run->{h}->finish, "pgbench on $run->{node} committed every insert")
	  or diag("${ $run->{out} }\n${ $run->{err} }");
	return;
}

# loaded(NODE, LABEL): the rows pgbench inserted with node = LABEL on NODE;
# inserted(NODE, LABEL, N, FROM): waits until there are N more than FROM:
# load measured in rows, not seconds
sub loaded
{
	my ($node, $label) = @_;
	return $node->safe_psql('postgres', "SELECT count(*) FROM events WHERE node = $label AND payload = 'load'");
}

sub inserted
{
	my ($node, $label, $more, $from) = @_;
	$from //= loaded($node, $label);
	$node->poll_query_until('postgres', "SELECT count(*) >= $from + $more FROM events WHERE node = $label AND payload = 'load'")
	  or die "pgbench did not insert $more rows on " . $node->name;
	return;
}

# rows by the node that wrote them, as "label:count,..."
sub by_node
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		"SELECT string_agg(node || ':' || n, ',' ORDER BY node) FROM (SELECT node, count(*) AS n FROM events WHERE payload = 'load' GROUP BY node) s");
}

my @runs = map { pgbench($nodes[$_ - 1], $_, 4, 1500) } 1 .. 3;
finished($_) for @runs;
converged('three nodes under load', @nodes);
is(by_node($nodes[1]), '1:6000,2:6000,3:6000', 'each node\'s 6000 inserts are there, once');
is(digest($nodes[2], "payload = 'before'"), digest($first, "payload = 'before'"),
	'the rows node 1 had before the mesh reached the others');
no_errors('three nodes under load', @nodes);
is($nodes[2]->safe_psql('postgres',
	"SELECT string_agg(worker_id || ':' || coalesce(node_name, '-'), ',' ORDER BY worker_id) FROM snowflake_workers"),
	'1:mesh1,2:-,3:-', 'every node sees every claim');
status_whole('three nodes under load', @nodes);
is(join(',', map { $_->safe_psql('postgres', "SELECT pubtruncate FROM pg_publication WHERE pubname = 'snowflake_mesh'") } @nodes),
	'f,f,f', 'no node publishes TRUNCATE');

my ($rc, $out, $err);
# the same row updated on two nodes at once: each applies the other's
# update last and they differ; status says so (conflicts on 18 and later,
# the rows' checksums on each version)
my $row = $nodes[0]->safe_psql('postgres', "SELECT min(id) FROM events WHERE payload = 'before'");
$_->safe_psql('postgres', 'ALTER SUBSCRIPTION snowflake_mesh_from_w' . (3 - $_->name =~ s/\D//gr) . ' DISABLE')
  for @nodes[ 0, 1 ];
$nodes[0]->safe_psql('postgres', "UPDATE events SET payload = 'from node 1' WHERE id = $row");
$nodes[1]->safe_psql('postgres', "UPDATE events SET payload = 'from node 2' WHERE id = $row");
$_->safe_psql('postgres', 'ALTER SUBSCRIPTION snowflake_mesh_from_w' . (3 - $_->name =~ s/\D//gr) . ' ENABLE')
  for @nodes[ 0, 1 ];
$nodes[2]->poll_query_until('postgres', "SELECT count(*) = 1 FROM events WHERE id = $row AND payload LIKE 'from node %'");
$nodes[0]->poll_query_until('postgres', "SELECT payload = 'from node 2' FROM events WHERE id = $row");
$nodes[1]->poll_query_until('postgres', "SELECT payload = 'from node 1' FROM events WHERE id = $row");
($rc, $out, $err) = status(@nodes);
isnt($rc, 0, 'a row updated on two nodes at once: status finds the mesh not whole');
like($err, qr/the nodes' rows differ/, 'the rows differ, and status says so');
like($out, qr/public\.events: \d+ rows, sum \w+\n.*public\.events/s, 'with each node\'s checksum');
if ($first->pg_version->major >= 18)
{
	# every node applied an update of a row another node changed last;
	# which node's statistics are flushed first is up to timing
	like($err, qr/warning: worker [123]: snowflake_mesh_from_w[123] met \d+ conflicts/, '18+: and the conflict counted by the subscriptions');
}
# repaired as README says: the row written again on one node
$nodes[0]->safe_psql('postgres', "UPDATE events SET payload = 'repaired' WHERE id = $row");
converged('the row repaired', @nodes);
$_->safe_psql('postgres', 'SELECT pg_stat_reset_subscription_stats(NULL)') for @nodes;
status_whole('the row repaired', @nodes);

# a table created later joins the mesh with add-table, empty everywhere
$nodes[1]->safe_psql('postgres', "INSERT INTO notes (body) VALUES ('early')");
($rc, $out, $err) = mesh('add-table', 'notes', map { conn($_) } @nodes);
isnt($rc, 0, 'add-table refuses a table with rows on a node');
like($err, qr/table public\.notes on node .* is not empty/, 'and says where');
$nodes[1]->safe_psql('postgres', 'DELETE FROM notes');
mesh_ok('add-table adds a table created on every node', 'add-table', 'notes', map { conn($_) } @nodes);
$_->safe_psql('postgres', "INSERT INTO notes (body) SELECT 'note of ' || current_setting('port') FROM generate_series(1, 20)")
  for @nodes;
sub notes { return $_[0]->safe_psql('postgres', "SELECT count(*) || ' ' || md5(string_agg(n::text, ',' ORDER BY id)) FROM notes n") }
$_->poll_query_until('postgres', 'SELECT count(*) = 60 FROM notes') for @nodes;
is(join(',', map { notes($_) } @nodes), join(',', (notes($nodes[0])) x 3), 'every node holds the same 60 notes');
# TRUNCATE is not published: it empties the node it runs on; to empty a
# table everywhere, stop writes to it and truncate it on every node
$nodes[0]->safe_psql('postgres', 'TRUNCATE notes');
$nodes[0]->safe_psql('postgres', "INSERT INTO notes (body) VALUES ('after truncate')");
$_->poll_query_until('postgres', "SELECT count(*) = 1 FROM notes WHERE body = 'after truncate'") for @nodes;
is(join(',', map { $_->safe_psql('postgres', 'SELECT count(*) FROM notes') } @nodes), '1,61,61',
	'a TRUNCATE on node 1 empties node 1 only');
$_->safe_psql('postgres', 'TRUNCATE notes') for @nodes;
$_->safe_psql('postgres', "DELETE FROM events WHERE payload = 'before'") for $nodes[1];
converged('a DELETE on node 2', @nodes);
status_whole('notes truncated on every node', @nodes);

# 5. id order across the mesh, with node 3's clock 500 ms ahead
my $settle = sub { converged('rounds', @nodes) };
my ($lag, $disorder, $longest) = id_order_lag(\@nodes, $first, 'synced', 25, $settle);
note(sprintf 'mesh, clocks in step: id order runs behind insert order by %d rounds', $lag);
ok($lag <= 1, "with clocks in step, id order follows insert order (behind by $lag rounds)");
set_clock_offset($nodes[2], '+0.5');
($lag, $disorder, $longest) = id_order_lag(\@nodes, $first, 'skewed', 25, $settle);
note(sprintf 'mesh, node 3 500 ms ahead: id order runs behind insert order by %d rounds, %.0f ms; '
	  . 'the longest round took %.0f ms', $lag, $disorder, $longest);
ok($lag >= 1 && $disorder <= 500 + $longest + 20,
	sprintf('one clock 500 ms ahead: disorder %.0f ms, bounded by the skew and a round of %.0f ms',
		$disorder, $longest));

# 2. a fourth node started by mistake with worker id 2
my $dup = mesh_node('mesh_dup', 2);
($rc, $out, $err) = mesh('join', conn($dup), map { conn($_) } @nodes);
isnt($rc, 0, 'the helper refuses to join a node whose worker id is in the mesh');
like($err, qr/both have worker id 2/, 'and says which');
# joined by hand instead: it subscribes without copying (so it does not
# see the claims), the members subscribe to it, it claims and writes
$dup->safe_psql('postgres', 'CREATE PUBLICATION snowflake_mesh FOR TABLE events, snowflake_workers');
for my $i (0 .. 2)
{
	my $n = $nodes[$i];
	$dup->safe_psql('postgres', "CREATE SUBSCRIPTION dup_from_$i CONNECTION '" . conn($n)
		  . "' PUBLICATION snowflake_mesh WITH (origin = none, copy_data = false)");
	$n->safe_psql('postgres', "CREATE SUBSCRIPTION from_dup CONNECTION '" . conn($dup)
		  . "' PUBLICATION snowflake_mesh WITH (origin = none, copy_data = false, slot_name = 'dup_to_$i')");
}
$dup->safe_psql('postgres', "SELECT snowflake_claim_worker('mistake')");
$dup->safe_psql('postgres', "INSERT INTO events (node, payload) SELECT 4, 'dup' FROM generate_series(1, 100)");
my @refused = $first->pg_version->major >= 18
  ? ('conflict detected on relation "snowflake.snowflake_workers": conflict=insert_exists',
	'Key already exists in unique index "snowflake_workers_pkey"')
  : ('duplicate key value violates unique constraint "snowflake_workers_pkey"');
for my $n (@nodes)
{
	ok($n->poll_query_until('postgres',
		"SELECT apply_error_count > 0 FROM pg_stat_subscription_stats WHERE subname = 'from_dup'"),
		'the duplicate claim stops the subscription on ' . $n->name);
	ok((grep { $n->log_contains($_) } @refused) == @refused,
		$n->name . '\'s log names the claim that conflicts');
	is($n->safe_psql('postgres', "SELECT count(*) FROM events WHERE payload = 'dup'"), '0',
		'before any of its rows reach ' . $n->name);
	is($n->safe_psql('postgres', 'SELECT coalesce(node_name, \'-\') FROM snowflake_workers WHERE worker_id = 2'),
		'-', 'the first claim stands on ' . $n->name);
}
# removed the way README says
for my $n (@nodes)
{
	$n->safe_psql('postgres', 'ALTER SUBSCRIPTION from_dup DISABLE');
	$n->safe_psql('postgres', 'DROP SUBSCRIPTION from_dup');
}
$dup->safe_psql('postgres', "DROP SUBSCRIPTION dup_from_$_") for 0 .. 2;
$dup->stop;
# a member list without node 3 is not the mesh
my $fourth = mesh_node('mesh4', 4);
($rc, $out, $err) = mesh('join', conn($fourth), conn($nodes[0]), conn($nodes[1]));
isnt($rc, 0, 'the helper refuses to join a node to part of the mesh');
like($err, qr/the nodes named are not the mesh/, 'and says so');
is($fourth->safe_psql('postgres', 'SELECT count(*) FROM pg_subscription'), '0',
	'having changed nothing on the new node');

# a join whose copy fails is taken back whole
my $odd = snowflake_node('mesh_odd', worker_id => 5, allows_streaming => 'logical');
$odd->start;
$odd->safe_psql('postgres',
	'CREATE EXTENSION snowflake; CREATE TABLE events (id bigint PRIMARY KEY, node int, payload text);'
	  . 'CREATE TABLE notes (id bigint PRIMARY KEY, body text)');
($rc, $out, $err) = mesh('join', conn($odd), map { conn($_) } @nodes);
isnt($rc, 0, 'a join whose copy fails (a column missing) fails');
like($err, qr/the copy of subscription "snowflake_mesh_from_w1" failed.*\n.*HINT: .*\n.*the change was taken back/s, 'and says so');
is($odd->safe_psql('postgres', 'SELECT count(*) FROM pg_subscription'), '0',
	'the new node\'s subscriptions are dropped');
is(join(',', map { $_->safe_psql('postgres',
	"SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE '%_to_w5'") } @nodes),
	'0,0,0', 'and with them its slots on the members');
is($nodes[0]->safe_psql('postgres', 'SELECT bool_and(subenabled) FROM pg_subscription'), 't',
	'the source applies the others\' rows again');
# its copy had begun: its tables refuse writes, which would mix with the
# mesh's rows, but let TRUNCATE empty them
is(SnowflakeMesh::sqlstate_of($odd, "INSERT INTO notes VALUES (1, 'alone')"), 'SM002', 'the new node refuses writes');
is(SnowflakeMesh::sqlstate_of($odd, 'TRUNCATE events, notes'), '', 'but may be emptied');
$odd->stop;

# 3. node 4 joins while nodes 1-3 write; then node 3 stops writing and
# leaves while 1, 2 and 4 write
my @from = map { loaded($nodes[$_ - 1], $_) } 1 .. 3;
@runs = (pgbench($nodes[0], 1, 2, 1500, 300), pgbench($nodes[1], 2, 2, 1500, 300),
	pgbench($nodes[2], 3, 2, 400, 300));
my $rival = mesh_node('mesh4_rival', 4);
inserted($nodes[$_ - 1], $_, 50, $from[ $_ - 1 ]) for 1 .. 3;
my ($jout, $jerr) = ('', '');
my $join = IPC::Run::start([ $^X, $mesh_script, '--timeout', '120', '--name', 'mesh4', 'join',
		conn($fourth), map { conn($_) } @nodes ], '>', \$jout, '2>', \$jerr);
# a second join, of another node with worker id 4, while the first holds
# the mesh's lock: refused, and its undo leaves the first join alone
ok($nodes[0]->poll_query_until('postgres', q{
	SELECT c.change = 'join of worker 4'
	       AND EXISTS (SELECT FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted AND l.classid = 1397640531)
	  FROM snowflake.snowflake_mesh_changes c WHERE c.publication = 'snowflake_mesh'}),
	'the join holds the mesh\'s lock on node 1');
($rc, $out, $err) = mesh('join', conn($rival), map { conn($_) } @nodes);
isnt($rc, 0, 'a second join while the first runs is refused');
like($err, qr/in another change of the mesh: .*join of worker 4|the nodes named are not the mesh/, 'by the lock');
# the joining node refuses writes until it is a member (SM002): nothing it
# accepted can be lost if the join is taken back
ok($fourth->poll_query_until('postgres', q{SELECT count(*) > 0 FROM pg_trigger WHERE tgname = 'snowflake_mesh_fence'}),
	'the join has begun');
my $during = $fourth->psql('postgres', "INSERT INTO events (node, payload) SELECT 4, 'during join' FROM generate_series(1, 60)");
ok($join->finish, 'node 4 joins while the others write') or diag("stdout: $jout\nstderr: $jerr");
# (the join may end before that insert begins)
$fourth->safe_psql('postgres', "INSERT INTO events (node, payload) SELECT 4, 'during join' FROM generate_series(1, 60)")
  if $during != 0;
is($rival->safe_psql('postgres', 'SELECT count(*) FROM pg_subscription'), '0', 'the refused node subscribes to nobody');
is(join(',', map { $_->safe_psql('postgres', "SELECT count(*) FROM pg_subscription WHERE subname = 'snowflake_mesh_from_w4'") } @nodes),
	'1,1,1', 'and every member keeps its subscription to the node that joined');
$rival->stop;
push @runs, pgbench($fourth, 4, 2, 600, 300);
finished($runs[2]);
($rc, $out, $err) = mesh('leave', conn($nodes[2]), conn($nodes[0]));
isnt($rc, 0, 'leave refuses a member list that is not the whole mesh');
like($err, qr/the nodes named are not the mesh/, 'and says so');
mesh_ok('node 3 leaves while the others write',
	'leave', conn($nodes[2]), map { conn($_) } $nodes[0], $nodes[1], $fourth);
my $left = pop @nodes;
push @nodes, $fourth;
finished($_) for @runs[ 0, 1, 3 ];
converged('a node joined and one left under load', @nodes);
is(by_node($fourth), '1:9000,2:9000,3:6800,4:1200',
	'every insert is there, once, on the node that joined');
is(digest($left, "node = 3"), digest($fourth, "node = 3"),
	'every row node 3 wrote reached the mesh before it left');
no_errors('a node joined and one left', @nodes);
is(join(',', map { $_->safe_psql('postgres',
	"SELECT count(*) FROM pg_replication_slots WHERE slot_name ~ '_w3_|_w3\$'") } @nodes, $left),
	'0,0,0,0', 'no slot of the node that left is kept anywhere');
is(join(',', map { $_->safe_psql('postgres', "SELECT count(*) FROM events WHERE payload = 'during join'") } @nodes),
	'60,60,60', 'the rows node 4 accepted, once it was a member, reached every node');
status_whole('a node joined and one left', @nodes);

# a join of the node that left, refused (its tables are not empty), keeps
# its fence: a row written there would still reach no member (SM002)
($rc, $out, $err) = mesh('join', conn($left), map { conn($_) } @nodes);
is($rc, 1, 'a join of the node that left, not emptied: refused');
my ($fout, $ferr) = ('', '');
$left->psql('postgres', "\\set VERBOSITY sqlstate\nINSERT INTO events (node, payload) VALUES (3, 'after a refused join')",
	stdout => \$fout, stderr => \$ferr);
like($ferr, qr/\bSM002\b/, 'and the node that left still refuses writes');

# status sees a subscription disabled, and a node down, and still reports
# every node it reaches
$nodes[1]->safe_psql('postgres', 'ALTER SUBSCRIPTION snowflake_mesh_from_w1 DISABLE');
($rc, $out, $err) = status(@nodes);
isnt($rc, 0, 'a subscription disabled: the mesh is not whole');
like($err, qr/worker 2: snowflake_mesh_from_w1 is disabled/, 'status names it');
$nodes[1]->safe_psql('postgres', 'ALTER SUBSCRIPTION snowflake_mesh_from_w1 ENABLE');
$fourth->stop('fast');
($rc, $out, $err) = status(@nodes);
isnt($rc, 0, 'a node down: the mesh is not whole');
like($out, qr/cannot be reached/, 'status says which node it cannot reach');
like($out, qr/worker 1 at .*worker 2 at /s, 'and reports the others');
like($err, qr/slot snowflake_mesh_w1_to_w4 is inactive/, 'whose slots for it are idle');
start_faked($fourth, '+0');
# the lost connections counted as apply errors: reset, as README says
$_->safe_psql('postgres', 'SELECT pg_stat_reset_subscription_stats(NULL)') for @nodes;
my $whole;
for (1 .. 60)
{
	($rc, $out, $err) = status(@nodes);
	last if ($whole = $rc == 0);
	wake_subscriptions(@nodes);
	sleep 1;
}
ok($whole, 'the node back: status finds the mesh whole again') or diag("stdout: $out\nstderr: $err");

# 4. node 1 dies under load; its standby takes its place
SKIP:
{
	skip 'failover slots need PostgreSQL 17', 12 unless $has_failover_slots;
	$standby->poll_query_until('postgres', q{
		SELECT count(*) = 2 FROM pg_replication_slots WHERE synced AND NOT temporary})
	  or die 'the standby did not synchronize the mesh\'s slots';
	my $from = loaded($first, 1);
	@runs = map { pgbench($nodes[$_->[0]], $_->[1], 2, 1000, 200) } [ 0, 1 ], [ 1, 2 ], [ 2, 4 ];
	inserted($first, 1, 200, $from);
	$first->stop('immediate');
	$runs[0]->{h}->finish;
	($rc, $out, $err) = mesh('failover', conn($standby), conn($nodes[1]), conn($nodes[2]));
	isnt($rc, 0, 'the helper refuses to fail over to a standby not yet promoted');
	like($err, qr/is a standby/, 'and says so');
	$standby->promote;
	my $w1_max = $standby->safe_psql('postgres',
		'SELECT max(id) FROM events WHERE (snowflake_decode(id)).worker_id = 1');
	mesh_ok('the others follow node 1\'s promoted standby',
		'failover', conn($standby), conn($nodes[1]), conn($nodes[2]));
	# the lost connection to node 1 counts as an apply error; count from here
	$_->safe_psql('postgres', 'SELECT pg_stat_reset_subscription_stats(NULL)')
	  for $standby, @nodes[ 1, 2 ];
	my %log_from = map { $_->name => -s $_->logfile } $standby, @nodes[ 1, 2 ];
	$standby->safe_psql('postgres',
		"INSERT INTO events (node, payload) SELECT 1, 'after' FROM generate_series(1, 500)");
	finished($_) for @runs[ 1, 2 ];
	$nodes[0] = $standby;
	converged('after the failover', @nodes);
	is($nodes[1]->safe_psql('postgres',
		"SELECT count(*) FROM events WHERE payload = 'after' AND id <= $w1_max"),
		'0', 'the promoted node issues IDs above every ID of node 1 that reached it');
	no_errors('after the failover', @nodes);
	is(join(',', map { scalar(() = slurp_file($_->logfile, $log_from{ $_->name })
			=~ /duplicate key value|conflict detected/g) } @nodes),
		'0,0,0', 'and no key conflict in any log');
	status_whole('after the failover', @nodes);
}

$_->stop for @nodes, $left;
done_testing();
