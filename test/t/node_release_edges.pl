# Releases and holds at their edges: a point-in-time restore run in
# standby mode; a log-shipping standby promoted after its archive lost the
# last segment; a copy given a worker id of its own, then its source's
# again; pg_upgrade's confirmation naming another node's directory; a stop
# time before what the restore replayed; a confirmation whose second file
# cannot be written.  Each is held back, or refused, as the docs say, and
# no ID after a step is one the old node issued.
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

# rows in bursts of 50 for SECONDS
sub keep_inserting
{
	my ($node, $seconds) = @_;
	my $end = Time::HiRes::time() + $seconds;
	while (Time::HiRes::time() < $end)
	{
		insert_rows($node, 50);
		Time::HiRes::usleep(5_000);
	}
	return;
}

sub max_id { return $_[0]->safe_psql('postgres', 'SELECT coalesce(max(id), 0) FROM t'); }

# the current segment switched and archived, waited for
sub switch_and_archive
{
	my ($node) = @_;
	my $seg = $node->safe_psql('postgres', 'SELECT pg_walfile_name(pg_switch_wal())');
	$node->poll_query_until('postgres', "SELECT last_archived_wal >= '$seg' FROM pg_stat_archiver")
	  or die "$seg was not archived";
	return;
}

# the IDs of t above ABOVE, as a comma-separated list
sub ids_of
{
	my ($node, $above) = @_;
	return $node->safe_psql('postgres', "SELECT coalesce(string_agg(id::text, ','), '') FROM t WHERE id > $above");
}

# not_reissued(NODE, LOST_IDS, ABOVE): how many of NODE's IDs above ABOVE
# are among LOST_IDS, and how many are at or below the largest of them
sub not_reissued
{
	my ($node, $lost_ids, $above) = @_;
	$node->safe_psql('postgres', "CREATE TABLE lost_ids AS SELECT unnest(string_to_array('$lost_ids', ',')::bigint[]) AS id");
	my $same = $node->safe_psql('postgres', "SELECT count(*) FROM t JOIN lost_ids USING (id) WHERE t.id > $above");
	my $below = $node->safe_psql('postgres',
		"SELECT count(*) FROM t WHERE id > $above AND id <= (SELECT max(id) FROM lost_ids)");
	return ($same, $below);
}


# 1. A point-in-time restore of a lost node made with standby.signal and
# recovery_target_time (targets are honoured in standby mode) on a host
# whose clock is a few seconds behind: docs/failover.md says a restore to a
# point in time is held back (55S01 recovery_target) because its WAL ends
# before the node's last IDs.  With standby.signal it is taken for the
# node's standby, generates at once, and repeats IDs the lost node issued
# after the target.
{

my $lost = snowflake_node('lost1', worker_id => 2, has_archiving => 1, allows_streaming => 1);
$lost->start;
$lost->safe_psql('postgres', "CREATE EXTENSION snowflake; $table");
insert_rows($lost, 100);
$lost->backup('base');
keep_inserting($lost, 1);
my $target = $lost->safe_psql('postgres', 'SELECT now()');
my $target_epoch = $lost->safe_psql('postgres', "SELECT extract(epoch FROM '$target'::timestamptz)");
keep_inserting($lost, 8);
my $lost_max = max_id($lost);
my $after_target = $lost->safe_psql('postgres',
	"SELECT coalesce(string_agg(id::text, ','), '') FROM t WHERE (snowflake_decode(id)).ts > '$target'");
switch_and_archive($lost);
$lost->stop('immediate');

my $pitr = PostgreSQL::Test::Cluster->new('pitr1');
$pitr->init_from_backup($lost, 'base', has_restoring => 1, standby => 1);
$pitr->append_conf('postgresql.conf',
	"recovery_target_time = '$target'\nrecovery_target_action = 'promote'\narchive_mode = off\n");
# the restore host's clock reads about 1.5 s after the target once it is up
start_faked($pitr, sprintf('%+.3f', $target_epoch + 1.5 - Time::HiRes::time()));
$pitr->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()') or die 'the restore did not end';
my $restored_max = max_id($pitr);
ok($restored_max < $lost_max, 'the restore stopped at its target, before the lost node\'s last IDs');
my ($why, $err) = refusal($pitr);
is($why, '55S01 recovery_target', 'a restore to a point in time is held back, standby.signal or not');
like($err, qr/DETAIL:  The server was started with standby.signal and a recovery target/,
	'... saying what it found: standby mode with a target');
if ($why eq 'generated')
{
	keep_inserting($pitr, 4);
	my ($same, $below) = not_reissued($pitr, $after_target, $restored_max);
	is($same, 0, 'no ID the lost node issued after the target is issued again');
	diag("$below new IDs at or below the lost node's last ID, $same of them issued by it too");
}
$pitr->stop;
}

# 2. A warm standby fed by restore_command alone (log shipping, no
# primary_conninfo) whose archive lacks the lost node's last segment,
# promoted on a host whose clock is a few seconds behind.  docs/failover.md:
# "a restore from an archive that lacks its last segments, of a node that
# is lost | refuses (55S01 ...)".  Restored this way it generates at once
# and repeats the IDs of the segment the archive lacks.
{

my $lost = snowflake_node('lost2', worker_id => 3, has_archiving => 1, allows_streaming => 1);
$lost->start;
$lost->safe_psql('postgres', "CREATE EXTENSION snowflake; $table");
$lost->backup('base');
keep_inserting($lost, 1);
switch_and_archive($lost);
my $warm = PostgreSQL::Test::Cluster->new('warm2');
$warm->init_from_backup($lost, 'base', has_restoring => 1, standby => 1);
$warm->append_conf('postgresql.conf', "archive_mode = off\n");
# archiving fails from here on: the archive lacks the last segment
$lost->append_conf('postgresql.conf', "archive_command = 'false'\n");
$lost->reload;
my $edge = $lost->safe_psql('postgres', 'SELECT extract(epoch FROM now())');
keep_inserting($lost, 8);
my $lost_max = max_id($lost);
my $unarchived = $lost->safe_psql('postgres',
	"SELECT coalesce(string_agg(id::text, ','), '') FROM t WHERE (snowflake_decode(id)).ts > to_timestamp($edge)");
$lost->stop('immediate');
start_faked($warm, sprintf('%+.3f', $edge + 1.5 - Time::HiRes::time()));
$warm->poll_query_until('postgres', 'SELECT pg_last_wal_replay_lsn() IS NOT NULL') or die;
sleep 3;
$warm->promote;
$warm->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()') or die;
my $warm_max = max_id($warm);
ok($warm_max < $lost_max, 'the archive lacked the last IDs');
my ($why, $words) = refusal($warm);
is($why, '55S01 archive_standby', 'a restore from an archive that lacks its last segment does not generate before its step');
like($words, qr/DETAIL:  The server was started with standby.signal and without primary_conninfo/,
	'... saying what it found: standby mode from an archive alone');
if ($why eq 'generated')
{
	keep_inserting($warm, 4);
	my ($same, $below) = not_reissued($warm, $unarchived, $warm_max);
	is($same, 0, 'no ID of the segment the archive lacks is issued again');
	diag("$below new IDs at or below the lost node's last ID, $same of them issued by it too");
}
$warm->stop;
}

# 3. A copy released by the first step of its hint, "a worker id of its own",
# and later set back to the worker id it was copied under, generates under
# it with no floor: the hold is forgotten at the first release.
#  1. a clone beside its running source;
#  2. a point-in-time restore of a lost node on a host whose clock is a few
#     seconds behind: it repeats IDs the lost node issued after the target.
{

# 1.
my $src = snowflake_node('src3', worker_id => 1, allows_streaming => 1);
$src->start;
$src->safe_psql('postgres', "CREATE EXTENSION snowflake; $table; SELECT snowflake_claim_worker('src')");
insert_rows($src, 100);
$src->backup('b');
my $clone = PostgreSQL::Test::Cluster->new('clone3');
$clone->init_from_backup($src, 'b');
$clone->start;
is(scalar refusal($clone), '55S01 backup_label', 'a clone is held back');
set_worker($clone, 9);
is(scalar refusal($clone), '55S03 unclaimed',
	'given a worker id of its own, it is no copy; its system claimed worker 1, so it claims 9 too');
$clone->safe_psql('postgres', 'SELECT snowflake.snowflake_claim_worker()');
is(scalar refusal($clone), 'generated', 'claimed, it generates');
set_worker($clone, 1);
isnt(scalar refusal($clone), 'generated', 'set back to its source\'s worker id, beside the source, it does not generate');
$clone->restart;
isnt(scalar refusal($clone), 'generated', 'nor after a restart');
$clone->stop;
$src->stop;

# 2.
my $lost = snowflake_node('lost3', worker_id => 2, has_archiving => 1, allows_streaming => 1);
$lost->start;
$lost->safe_psql('postgres', "CREATE EXTENSION snowflake; $table");
insert_rows($lost, 100);
$lost->backup('base');
keep_inserting($lost, 1);
my $target = $lost->safe_psql('postgres', 'SELECT now()');
my $target_epoch = $lost->safe_psql('postgres', "SELECT extract(epoch FROM '$target'::timestamptz)");
keep_inserting($lost, 8);
my $after_target = $lost->safe_psql('postgres',
	"SELECT coalesce(string_agg(id::text, ','), '') FROM t WHERE (snowflake_decode(id)).ts > '$target'");
switch_and_archive($lost);
$lost->stop('immediate');
my $pitr = PostgreSQL::Test::Cluster->new('pitr3');
$pitr->init_from_backup($lost, 'base', has_restoring => 1, standby => 0);
$pitr->append_conf('postgresql.conf',
	"recovery_target_time = '$target'\nrecovery_target_action = 'promote'\narchive_mode = off\n");
start_faked($pitr, sprintf('%+.3f', $target_epoch + 1.5 - Time::HiRes::time()));
$pitr->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()') or die 'the restore did not end';
my $restored_max = max_id($pitr);
is(scalar refusal($pitr), '55S01 recovery_signal', 'the restore is held back');
set_worker($pitr, 9);
insert_rows($pitr, 10);
set_worker($pitr, 2);
my ($why) = refusal($pitr);
isnt($why, 'generated', 'set back to the lost node\'s worker id without a floor, it does not generate');
if ($why eq 'generated')
{
	keep_inserting($pitr, 4);
	my ($same, $below) = not_reissued($pitr, $after_target, $restored_max);
	is($same, 0, 'no ID the lost node issued after the target is issued again');
	diag("$below new IDs at or below the lost node's last ID, $same of them issued by it too");
}
$pitr->stop;
}

# 4. After pg_upgrade, snowflake_confirm_node(old_data_directory => ...) takes
# the data directory of another node (another worker id, stopped long
# ago): the upgraded node is released below the IDs its own old cluster
# issued.  The old cluster ran 30 s ahead (its clock was fast).
{

my $other = snowflake_node('other4', worker_id => 9);
$other->start;
$other->safe_psql('postgres', "CREATE EXTENSION snowflake; $table");
insert_rows($other, 10);
$other->stop;

my $old = snowflake_node('old4', worker_id => 3);
start_faked($old, '+30');
$old->safe_psql('postgres', "CREATE EXTENSION snowflake; $table; SELECT snowflake_claim_worker('old')");
insert_rows($old, 1000);
my $old_max = max_id($old);
$old->stop;
my $new = snowflake_node('new4', worker_id => 3);
pg_upgrade_ok($old, $new, 'pg_upgrade');
$new->start;
is(scalar refusal($new), '55S02 upgraded', 'the upgraded cluster is held back');
my ($ret, $out, $err) = $new->psql('postgres',
	"SELECT snowflake.snowflake_confirm_node(old_data_directory => '" . $other->data_dir . "')");
isnt($ret, 0, 'the data directory of a node with another worker id is refused');
if ($ret == 0)
{
	insert_rows($new, 100);
	is($new->safe_psql('postgres', "SELECT count(*) FROM (SELECT id FROM t ORDER BY id DESC LIMIT 100) s WHERE id <= $old_max"),
		0, 'released, it issues nothing at or below the old cluster\'s IDs');
}
$new->stop;
}

# 5. A stop time before the last ID the restore replayed (a date years
# back, a time typed in another zone) is no floor: the lost node certainly
# ran after every record the restore has.  Refused (22023).
{

my $lost = snowflake_node('lost5', worker_id => 2, has_archiving => 1, allows_streaming => 1);
$lost->start;
$lost->safe_psql('postgres', "CREATE EXTENSION snowflake; $table");
insert_rows($lost, 100);
$lost->backup('base');
keep_inserting($lost, 1);
my $target = $lost->safe_psql('postgres', 'SELECT now()');
my $target_epoch = $lost->safe_psql('postgres', "SELECT extract(epoch FROM '$target'::timestamptz)");
keep_inserting($lost, 8);
my $after_target = $lost->safe_psql('postgres',
	"SELECT coalesce(string_agg(id::text, ','), '') FROM t WHERE (snowflake_decode(id)).ts > '$target'");
switch_and_archive($lost);
$lost->stop('immediate');
my $pitr = PostgreSQL::Test::Cluster->new('pitr5');
$pitr->init_from_backup($lost, 'base', has_restoring => 1, standby => 0);
$pitr->append_conf('postgresql.conf',
	"recovery_target_time = '$target'\nrecovery_target_action = 'promote'\narchive_mode = off\n");
start_faked($pitr, sprintf('%+.3f', $target_epoch + 1.5 - Time::HiRes::time()));
$pitr->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()') or die 'the restore did not end';
my $restored_max = max_id($pitr);
is(scalar refusal($pitr), '55S01 recovery_signal', 'the restore is held back');
# each tried in a transaction rolled back, so that none releases the node for the next
is(scalar refusal($pitr, 'postgres', "BEGIN; SELECT snowflake.snowflake_confirm_node(stopped_at => '2000-01-01 00:00+00'); ROLLBACK"),
	'22023', 'a stop time years before the WAL it replayed is no floor');
is(scalar refusal($pitr, 'postgres', "BEGIN; SELECT snowflake.snowflake_confirm_node(stopped_at => '$target'::timestamptz - interval '5 hours'); ROLLBACK"),
	'22023', 'nor one five hours before it (a time typed in another zone)');
is(scalar refusal($pitr), '55S01 recovery_signal', 'and still held back');
$pitr->stop;
}

# 6. A confirmation whose write fails on snowflake.identity alone: the call
# fails ("could not write snowflake state file "snowflake.state"") and the
# node stays held back, as docs/failover.md says, but snowflake.state was
# written, and the next start releases the node: the failed call took
# effect.
{

my $p = snowflake_node('p6', worker_id => 2, allows_streaming => 1);
$p->start;
$p->safe_psql('postgres', "CREATE EXTENSION snowflake; $table");
insert_rows($p, 100);
$p->backup('b');
insert_rows($p, 100);
my $pmax = max_id($p);
$p->stop;
my $c = PostgreSQL::Test::Cluster->new('c6');
$c->init_from_backup($p, 'b');
$c->start;
is(scalar refusal($c), '55S01 backup_label', 'the clone is held back');
my $dir = $c->data_dir;
chmod 0444, "$dir/snowflake.identity";
mkdir "$dir/snowflake.identity.new" or die "mkdir: $!";
my ($ret, $out, $err) = $c->psql('postgres', "SELECT snowflake.snowflake_confirm_node(above => $pmax)");
isnt($ret, 0, 'the confirmation fails');
like($err, qr/snowflake\.identity/, 'and names the file it could not write');
is(scalar refusal($c), '55S01 backup_label', 'the node stays held back');
rmdir "$dir/snowflake.identity.new";
chmod 0600, "$dir/snowflake.identity";
$c->restart;
is(scalar refusal($c), '55S01 backup_label', 'and after a restart, as the failed call left it');
$c->stop;
}

done_testing();
