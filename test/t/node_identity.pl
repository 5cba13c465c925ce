# The node's identity across its life: a fresh install generates at once;
# restarts, crashes and a renamed data directory need nothing; a clone by
# pg_basebackup started as a primary, a cold copy and a point-in-time
# restore beside the original are held back until they get a worker id of
# their own or are confirmed; a promoted standby continues; pg_upgrade and
# pg_dump/pg_restore into a new cluster with the same worker id, from a
# node whose IDs ran ahead of the clock, refuse until the documented step
# and then continue above every old ID.
use strict;
use warnings;
use File::Copy ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SnowflakeTest;

my $a_node;
my $table = 'CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), n int)';


sub insert_rows
{
	my ($node, $n, $db) = @_;
	$node->safe_psql($db // 'postgres', "INSERT INTO t (n) SELECT g FROM generate_series(1, $n) g");
	return;
}

sub max_id
{
	my ($node, $db) = @_;
	return $node->safe_psql($db // 'postgres', 'SELECT max(id) FROM t');
}

sub worker_of_new
{
	my ($node, $above, $db) = @_;
	return $node->safe_psql($db // 'postgres',
		"SELECT count(*) || ':' || string_agg(DISTINCT (snowflake_decode(id)).worker_id::text, ',') FROM t WHERE id > $above");
}

# A node made from a base backup of A, archiving nowhere (A's archive is
# the PITR's source).
sub copy_of
{
	my ($name, $backup, %opts) = @_;
	my $n = PostgreSQL::Test::Cluster->new($name);
	$n->init_from_backup($a_node, $backup, %opts);
	$n->append_conf('postgresql.conf', "archive_mode = off\n");
	return $n;
}

# Confirmed above IDs 100 s ahead of its clock, the node is ahead of its
# clock too, and refuses under the default policy; allowed to run ahead,
# it generates.
sub run_ahead
{
	my ($node, $db) = @_;
	is(refusal($node, $db), '55S06', 'confirmed, the node continues above the old IDs, ahead of its clock');
	$node->append_conf('postgresql.conf', "snowflake.max_run_ahead_ms = -1\n");
	$node->reload;
	$node->poll_query_until($db // 'postgres', "SELECT current_setting('snowflake.max_run_ahead_ms') = '-1'")
	  or die 'the reload did not take';
	return;
}

# 1. A fresh install generates at once.
my $a = snowflake_node('a', worker_id => 1, has_archiving => 1, allows_streaming => 1);
$a_node = $a;
$a->start;
$a->safe_psql('postgres', "CREATE EXTENSION snowflake; $table");
insert_rows($a, 100);
is($a->safe_psql('postgres', 'SELECT count(*) FROM t'), '100', 'a fresh install generates at once');
is($a->safe_psql('postgres', "SELECT worker_id || ':' || node_name FROM snowflake_claim_worker('node-a')"),
	'1:node-a', 'node A claims worker 1');

# 2. A restart, a crash and a renamed data directory need nothing.
$a->restart;
insert_rows($a, 10);
$a->stop('immediate');
$a->start;
insert_rows($a, 10);
$a->stop;
my $moved = $a->data_dir . '.moved';
rename $a->data_dir, $moved or die "rename: $!";
command_ok([ 'pg_ctl', '-w', '-D', $moved, '-l', $a->logfile, 'start' ],
	'the renamed data directory starts');
my $before = max_id($a);
insert_rows($a, 10);
is($a->safe_psql('postgres', "SELECT count(*) FROM t WHERE id > $before"), '10',
	'after a restart, a crash and a rename (same inode) it generates with no step');
command_ok([ 'pg_ctl', '-w', '-D', $moved, '-m', 'fast', 'stop' ], 'stopped');
rename $moved, $a->data_dir or die "rename back: $!";

# 3. A cold copy of the directory (another inode) is held back.
my $cold = PostgreSQL::Test::Cluster->new('cold');
system_or_bail('cp', '-a', $a->data_dir, $cold->data_dir);
$cold->append_conf('postgresql.conf', 'port = ' . $cold->port . "\narchive_mode = off\n");
$a->start;
$cold->start;
is(refusal($cold), '55S01 other_directory', 'a copied data directory started beside the original is refused');
$cold->append_conf('postgresql.conf', "snowflake.worker_id = 3\nwork_mem = '3MB'\n");
$cold->reload;
$cold->poll_query_until('postgres', "SELECT current_setting('work_mem') = '3MB'")
  or die 'the reload did not take';
# its system (its source's) claimed worker 1: its own is claimed too
is(refusal($cold), '55S03 unclaimed', 'given a worker id of its own, it is no copy, and waits for its claim');
$cold->safe_psql('postgres', 'SELECT snowflake_claim_worker()');
$cold->poll_query_until('postgres', 'SELECT snowflake_worker_id() = 3')
  or die 'the copy did not take its own worker id';
$before = max_id($a);
insert_rows($cold, 10);
is(worker_of_new($cold, $before), '10:3', 'given a worker id of its own, the copy generates under it');
$cold->restart;
insert_rows($cold, 10);
is(worker_of_new($cold, $before), '20:3', 'and again after a restart');
$cold->stop;

# 4. A clone by pg_basebackup without -R, started as a primary.
$a->backup('b1');
my $clone = copy_of('clone', 'b1');
$clone->start;
is(refusal($clone), '55S01 backup_label', 'a clone started as a primary refuses before its first ID');
my ($code, $err) = refusal($clone, 'postgres', "SELECT snowflake_claim_worker('node-b')");
is($code, '55S01 backup_label', "the clone's claim of node A's worker id fails closed");
like($err, qr/HINT:  .*snowflake\.worker_id.*snowflake\.snowflake_confirm_node\(stopped_at => /,
	'with the two remedies in the hint');
$clone->restart;
is(refusal($clone), '55S01 backup_label', 'still refused after a restart');
$clone->safe_psql('postgres', 'ALTER SYSTEM SET snowflake.worker_id = 2; SELECT pg_reload_conf()');
$clone->poll_query_until('postgres', "SELECT current_setting('snowflake.worker_id') = '2'")
  or die 'the clone did not take worker 2';
# A's system, its own, claimed worker 1: worker 2 waits for its claim
is(refusal($clone), '55S03 unclaimed', 'with worker 2 it is no copy, and waits for its claim');
is($clone->safe_psql('postgres', "SELECT worker_id || ':' || node_name FROM snowflake_claim_worker('node-b')"),
	'2:node-b', 'with worker 2 it claims its own row');
$before = max_id($a);
insert_rows($clone, 10);
is(worker_of_new($clone, $before), '10:2', 'and generates under worker 2');
$clone->stop;

# 5. A clone confirmed as the node it replaces (A is gone), with the time
# A stopped: above the IDs A issued after the backup too.
$a->backup('b2');
insert_rows($a, 10);
$before = max_id($a);
$a->stop;
my $a_stopped = wall_time();
my $same = copy_of('same', 'b2');
$same->start;
is(refusal($same), '55S01 backup_label', 'a restored base backup of A refuses');
($code, $err) = refusal($same, 'postgres', 'SELECT snowflake_confirm_node()');
is($code, '22004', 'confirming it with no floor is refused');
like($err, qr/HINT:  .*stopped_at => /, 'the hint asks for the time the node stopped');
is($same->safe_psql('postgres', "SELECT snowflake_confirm_node(stopped_at => '$a_stopped') > $before"), 't',
	'one step: snowflake_confirm_node(stopped_at => the time A stopped), above its IDs');
insert_rows($same, 10);
is(worker_of_new($same, $before), '10:1', 'then it continues as node A, above every ID A issued');
is($same->safe_psql('postgres', "SELECT worker_id || ':' || node_name FROM snowflake_claim_worker('node-a')"),
	'1:node-a', 'and its claim is node A\'s');
$same->restart;
insert_rows($same, 10);
is(worker_of_new($same, $before), '20:1', 'a restart needs nothing more');
$same->stop;

# 6. A streaming standby promoted: the same node, no step.
$a->start;
$a->backup('b3');
my $sb = copy_of('sb', 'b3', has_streaming => 1);
$sb->start;
insert_rows($a, 10);
$a->wait_for_catchup($sb);
$before = max_id($a);
$a->stop;
$sb->promote;
insert_rows($sb, 10);
is(worker_of_new($sb, $before), '10:1', 'a promoted standby continues without a step');
$sb->restart;
insert_rows($sb, 10);
is(worker_of_new($sb, $before), '20:1', 'and after its restart');
$sb->stop;

# 7. A point-in-time restore started beside the original.
$a->start;
$a->backup('b4');
insert_rows($a, 10);
my $lsn = $a->safe_psql('postgres', 'SELECT pg_current_wal_insert_lsn()');
insert_rows($a, 10);
$a->safe_psql('postgres', 'SELECT pg_switch_wal()');
$a->safe_psql('postgres', 'CHECKPOINT');
my $pitr = copy_of('pitr', 'b4', has_restoring => 1, standby => 0);
$pitr->append_conf('postgresql.conf',
	"recovery_target_lsn = '$lsn'\nrecovery_target_action = 'promote'\nrecovery_target_timeline = 'current'\n");
$pitr->start;
$pitr->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'the restore did not end';
is(refusal($pitr), '55S01 recovery_signal', 'a PITR restore started beside the original refuses');
$pitr->safe_psql('postgres', 'ALTER SYSTEM SET snowflake.worker_id = 4; SELECT pg_reload_conf()');
$pitr->poll_query_until('postgres', "SELECT current_setting('snowflake.worker_id') = '4'")
  or die 'the restore did not take worker 4';
# A's system claimed worker 1: worker 4 is claimed too, the step of that
is(refusal($pitr), '55S03 unclaimed', 'given its own worker id, it waits for its claim');
$pitr->safe_psql('postgres', "SELECT snowflake_claim_worker('pitr')");
$before = max_id($a);
insert_rows($pitr, 10);
is(worker_of_new($pitr, $before), '10:4', 'given its own worker id it generates');
$pitr->stop;
$a->stop;

# 8. pg_upgrade of a node whose IDs run 100 s ahead of the clock: with the
# library preloaded in both clusters (as pg_upgradecluster does), and with
# the new cluster preloading it only after the upgrade.
sub upgrade_case
{
	my ($tag, $worker, $preload_during) = @_;
	my $old = snowflake_node("old$tag", worker_id => $worker);
	start_faked($old, '+100');
	$old->safe_psql('postgres', "CREATE EXTENSION snowflake; $table");
	$old->safe_psql('postgres', "SELECT snowflake_claim_worker('old')");
	insert_rows($old, 20000);
	my $old_max = max_id($old);
	$old->stop;
	my $new = snowflake_node("new$tag", worker_id => $worker);
	$new->append_conf('postgresql.conf', "shared_preload_libraries = ''\n") unless $preload_during;
	pg_upgrade_ok($old, $new, "pg_upgrade ($tag)");
	$new->append_conf('postgresql.conf', "shared_preload_libraries = 'snowflake'\n");
	$new->start;
	# without the library preloaded, its restore loads it all the same
	my ($code, $err) = refusal($new);
	is($code, '55S02 upgraded', "after pg_upgrade ($tag) the node refuses");
	like($err, qr/HINT:  .*snowflake\.snowflake_confirm_node\(old_data_directory => /, 'naming the step');
	is(refusal($new, 'postgres', 'SELECT snowflake_confirm_node()'), '22004', 'confirming needs a floor');
	$new->restart;
	is(refusal($new), '55S02 upgraded', 'still refused after a restart');
	$new->safe_psql('postgres',
		"SELECT snowflake_confirm_node(old_data_directory => '" . $old->data_dir . "')");
	run_ahead($new);
	insert_rows($new, 20000);
	is($new->safe_psql('postgres', "SELECT count(*) FROM t WHERE id > $old_max"), '20000',
		'after the step, every new ID is above every old one');
	is($new->safe_psql('postgres', "SELECT worker_id || ':' || node_name FROM snowflake_claim_worker('old')"),
		"$worker:old", 'the claim followed the node to its new system identifier');
	$new->restart;
	insert_rows($new, 10);
	is($new->safe_psql('postgres', "SELECT count(*) FROM t WHERE id > $old_max"), '20010',
		'and a restart needs nothing more');
	$new->stop;
	return;
}
upgrade_case('_late', 6, 0);
upgrade_case('_both', 8, 1);

# 9. pg_dump/pg_restore into a new cluster with the same worker id.
my $src = snowflake_node('src', worker_id => 7);
start_faked($src, '+100');
$src->safe_psql('postgres', "CREATE EXTENSION snowflake; $table");
$src->safe_psql('postgres', "SELECT snowflake_claim_worker('src')");
insert_rows($src, 20000);
my $src_max = max_id($src);
my $hwm = $src->safe_psql('postgres', 'SELECT high_water_mark FROM snowflake_status');
my $dump = $src->basedir . '/db.dump';
command_ok([ 'pg_dump', '-Fc', '-d', $src->connstr('postgres'), '-f', $dump ], 'pg_dump');
$src->stop;
my $dst = snowflake_node('dst', worker_id => 7);
$dst->start;
$dst->safe_psql('postgres', 'CREATE DATABASE shop');
command_ok([ 'pg_restore', '--exit-on-error', '-d', $dst->connstr('shop'), $dump ],
	'pg_restore into a new cluster');
($code, $err) = refusal($dst, 'shop');
is($code, '55S03 claimed_elsewhere', 'the restored claim of its worker id holds the new cluster back');
like($err, qr/HINT:  .*snowflake\.snowflake_confirm_node\(above => /, 'naming the step');
is(refusal($dst, 'shop', 'SELECT snowflake_confirm_node()'), '22004', 'which needs a floor');
$dst->restart;
is(refusal($dst, 'shop'), '55S03 claimed_elsewhere', 'also after a restart');
$dst->safe_psql('shop', "SELECT snowflake_confirm_node(above => $hwm)");
run_ahead($dst, 'shop');
insert_rows($dst, 20000, 'shop');
is($dst->safe_psql('shop', "SELECT count(*) FROM t WHERE id > $src_max"), '20000',
	'after the step, every new ID is above every restored one');
$dst->stop;

done_testing();
