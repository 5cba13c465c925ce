# Releases that cannot repeat, and holds that nothing but their step
# releases:
#
#  1. a point-in-time restore of a lost node, on a host whose clock is
#     behind the lost node's, released as its hint says: IDs above every ID
#     the lost node issued, also those after the target, also when the
#     clock's own hint is followed next;
#  2. the same from an archive that lacks its last segment;
#  3. a worker id changed on a primary whose standby keeps the old one in
#     its configuration: the standby says so, and once promoted never
#     generates under the worker id the primary gave up;
#  4. a clone held back stays held when either of its files is removed;
#  5. a confirmation whose record cannot be written releases nothing.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();
use SnowflakeTest;

my $table = 'CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), n int)';

sub insert_rows
{
	my ($node, $n) = @_;
	$node->safe_psql('postgres', "INSERT INTO t (n) SELECT g FROM generate_series(1, $n) g");
	return;
}

sub max_id { return $_[0]->safe_psql('postgres', 'SELECT max(id) FROM t'); }

# IDs for a while: a row every 20 ms for SECONDS
sub keep_inserting
{
	my ($node, $seconds) = @_;
	my $end = Time::HiRes::time() + $seconds;
	while (Time::HiRes::time() < $end)
	{
		insert_rows($node, 50);
		Time::HiRes::usleep(20_000);
	}
	return;
}

# The lost node: worker 2, claimed, archiving its WAL.
my $lost = snowflake_node('lost', worker_id => 2, has_archiving => 1, allows_streaming => 1);
$lost->start;
$lost->safe_psql('postgres', "CREATE EXTENSION snowflake; $table; SELECT snowflake_claim_worker('lost')");
insert_rows($lost, 100);
$lost->backup('base');
keep_inserting($lost, 1);
my $target = $lost->safe_psql('postgres', 'SELECT now()');
# acknowledged to clients after the target: what a PITR leaves out
keep_inserting($lost, 3);
my $stopped = $lost->safe_psql('postgres', 'SELECT now()');
my $lost_max = max_id($lost);
my $after_target = $lost->safe_psql('postgres', "SELECT count(*) FROM t WHERE id > (SELECT max(id) FROM t WHERE (snowflake_decode(id)).ts <= '$target')");
ok($after_target > 0, "the lost node issued $after_target IDs after the target time");
# archived whole before the node is lost: an immediate stop would cut the
# archiver's copy short
my $seg = $lost->safe_psql('postgres', 'SELECT pg_walfile_name(pg_switch_wal())');
$lost->poll_query_until('postgres', "SELECT last_archived_wal >= '$seg' FROM pg_stat_archiver")
  or die "$seg was not archived";
$lost->safe_psql('postgres', 'CHECKPOINT');
$lost->stop('immediate');

# 1. The restore, on a host whose clock is 2 s behind the lost node's.
my $pitr = PostgreSQL::Test::Cluster->new('pitr');
$pitr->init_from_backup($lost, 'base', has_restoring => 1, standby => 0);
$pitr->append_conf('postgresql.conf',
	"recovery_target_time = '$target'\nrecovery_target_action = 'promote'\narchive_mode = off\n");
start_faked($pitr, '-2');
$pitr->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'the restore did not end';
my $restored_max = max_id($pitr);
my ($why, $err) = refusal($pitr);
is($why, '55S01 recovery_signal', 'a point-in-time restore is held back as a copy');
like($err, qr/HINT: .*snowflake\.snowflake_confirm_node\(stopped_at => /,
	'its hint asks for the time the lost node stopped');
is(scalar refusal($pitr, 'postgres', 'SELECT snowflake.snowflake_confirm_node()'), '22004',
	'a confirmation without a floor is refused: the replayed WAL ends before the last IDs');
is(refusal($pitr), '55S01 recovery_signal', 'and releases nothing');
$pitr->safe_psql('postgres', "SELECT snowflake.snowflake_confirm_node(stopped_at => '$stopped')");
# the floor is ahead of this clock: the clock's own hint, followed
($why, $err) = refusal($pitr);
if ($why eq '55S06')
{
	like($err, qr/HINT: .*snowflake\.max_run_ahead_ms/, 'ahead of its clock, it names max_run_ahead_ms');
	$pitr->append_conf('postgresql.conf', "snowflake.max_run_ahead_ms = 60000\n");
	$pitr->reload;
	$pitr->poll_query_until('postgres', "SELECT current_setting('snowflake.max_run_ahead_ms') = '1min'")
	  or die 'the reload did not take';
}
else
{
	is($why, 'generated', 'released, it generates (the wait was within its policy)');
}
insert_rows($pitr, 1000);
is($pitr->safe_psql('postgres', "SELECT count(*) || ':' || bool_and(id > $lost_max)::int FROM t WHERE id > $restored_max"),
	'1000:1', 'every ID after the release is above every ID of the lost node, also those after the target');
$pitr->stop;

# 2. From an archive that lacks its last segment: the node archives, then
# its archiving fails while it goes on issuing IDs, and it is lost.
my $lost2 = snowflake_node('lost2', worker_id => 3, has_archiving => 1, allows_streaming => 1);
$lost2->start;
$lost2->safe_psql('postgres', "CREATE EXTENSION snowflake; $table");
$lost2->backup('base2');
keep_inserting($lost2, 1);
$lost2->safe_psql('postgres', 'SELECT pg_switch_wal()');
$lost2->poll_query_until('postgres', 'SELECT last_archived_wal IS NOT NULL FROM pg_stat_archiver')
  or die 'nothing was archived';
$lost2->append_conf('postgresql.conf', "archive_command = 'false'\n");
$lost2->reload;
keep_inserting($lost2, 2);
my $stopped2 = $lost2->safe_psql('postgres', 'SELECT now()');
my $lost2_max = max_id($lost2);
$lost2->safe_psql('postgres', 'SELECT pg_switch_wal()');
$lost2->stop('immediate');
my $arch = PostgreSQL::Test::Cluster->new('arch');
$arch->init_from_backup($lost2, 'base2', has_restoring => 1, standby => 0);
$arch->append_conf('postgresql.conf', "recovery_target_action = 'promote'\narchive_mode = off\n");
$arch->start;
$arch->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'the restore did not end';
my $restored2_max = $arch->safe_psql('postgres', 'SELECT coalesce(max(id), 0) FROM t');
ok($restored2_max < $lost2_max, 'the archive lacks the last IDs the node issued');
is(refusal($arch), '55S01 recovery_signal', 'a restore from the archive alone is held back');
is(scalar refusal($arch, 'postgres', 'SELECT snowflake.snowflake_confirm_node()'), '22004',
	'and not released without a floor');
$arch->safe_psql('postgres', "SELECT snowflake.snowflake_confirm_node(stopped_at => '$stopped2')");
insert_rows($arch, 100);
is($arch->safe_psql('postgres', "SELECT count(*) || ':' || bool_and(id > $lost2_max)::int FROM t WHERE id > $restored2_max"),
	'100:1', 'released with the stop time, it issues nothing at or below the lost IDs');
$arch->stop;

# 3. A worker id changed on a primary, not on its standby, then a failover.
my $p = snowflake_node('p', worker_id => 5, allows_streaming => 1);
$p->start;
$p->safe_psql('postgres', "CREATE EXTENSION snowflake; $table; SELECT snowflake_claim_worker('p')");
$p->backup('pb');
my $s = PostgreSQL::Test::Cluster->new('s');
$s->init_from_backup($p, 'pb', has_streaming => 1);
$s->start;
insert_rows($p, 10);
set_worker($p, 6);
# a worker id its system has not claimed holds it back until it is claimed
$p->poll_query_until('postgres', q{SELECT state || '/' || reason = 'held_claimed/unclaimed' FROM snowflake_status})
  or die 'worker 6 did not take';
$p->safe_psql('postgres', "SELECT snowflake_claim_worker('p')");
is($p->safe_psql('postgres', 'SELECT snowflake_worker_id()'), '6', 'claimed, the primary runs as worker id 6');
insert_rows($p, 100);
$p->wait_for_catchup($s);
my $p_max = max_id($p);
ok($s->wait_for_log(qr/snowflake\.worker_id of this standby, 5, is not its primary's worker id, 6/),
	'the standby says, when it replays the change, that its worker id differs');
is($s->safe_psql('postgres', "SELECT state || ' ' || reason FROM snowflake_status"),
	'held_claimed worker_retired', 'and its status shows the worker id its primary gave up');
$p->stop;
$s->promote;
($why, $err) = refusal($s);
is($why, '55S03 worker_retired', 'promoted, it never generates under the worker id its primary gave up');
like($err, qr/HINT: .*snowflake\.worker_id = 6/, 'its hint names the primary\'s worker id');
set_worker($s, 6);
insert_rows($s, 10);
is($s->safe_psql('postgres', "SELECT count(*) || ':' || string_agg(DISTINCT (snowflake_decode(id)).worker_id::text, ',') FROM t WHERE id > $p_max"),
	'10:6', 'set as its primary was, it continues that node, above its IDs');
$s->stop;

# 4. A clone held back stays held when a file is removed.
$p->start;
$p->backup('pc');
my $clone = PostgreSQL::Test::Cluster->new('clone');
$clone->init_from_backup($p, 'pc');
$clone->start;
is(refusal($clone), '55S01 backup_label', 'a clone started as a primary is held back');
for my $file ('snowflake.identity', 'snowflake.state')
{
	$clone->stop;
	unlink $clone->data_dir . "/$file" or die "unlink $file: $!";
	$clone->start;
	is(refusal($clone), '55S01 backup_label', "with $file removed and a restart, still held, for the same reason");
}
$clone->stop;
unlink map { $clone->data_dir . "/$_" } 'snowflake.identity', 'snowflake.state';
$clone->start;
is(refusal($clone), '55S01 files_removed', 'with both removed, held back as one that may be a copy');
$clone->stop;

# 5. A confirmation whose record cannot be written.
my $c2 = PostgreSQL::Test::Cluster->new('c2');
$c2->init_from_backup($p, 'pc');
$c2->start;
is(refusal($c2), '55S01 backup_label', 'another clone is held back');
my $dir = $c2->data_dir;
chmod 0444, "$dir/snowflake.state", "$dir/snowflake.identity";
mkdir "$dir/snowflake.state.new" or die "mkdir: $!";
mkdir "$dir/snowflake.identity.new" or die "mkdir: $!";
my ($ret) = $c2->psql('postgres', 'SELECT snowflake.snowflake_confirm_node(above => 0)');
isnt($ret, 0, 'a confirmation whose record cannot be written fails');
is(refusal($c2), '55S01 backup_label', 'and releases nothing: the next call is refused');
rmdir "$dir/snowflake.state.new";
rmdir "$dir/snowflake.identity.new";
chmod 0600, "$dir/snowflake.state", "$dir/snowflake.identity";
$c2->restart;
is(refusal($c2), '55S01 backup_label', 'nor after a restart');
$c2->safe_psql('postgres', 'SELECT snowflake.snowflake_confirm_node(above => ' . max_id($p) . ')');
is(refusal($c2), 'generated', 'written, the confirmation releases it');
$c2->stop;
$p->stop;

done_testing();
