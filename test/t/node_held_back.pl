# Where a node cannot know which IDs were issued under its worker id, it
# stays held back, whatever happens in between: a copy whose worker id is
# unset for a while and then set back to its source's; a claim restored
# with triggers off for replication, or restored into 1.1 and then updated;
# pg_upgrade with the library loaded only by its restore, then CREATE
# EXTENSION in another database; a new cluster started once before
# pg_upgrade; other systems' claims across pg_upgrade; a clone, still
# held back, upgraded; a standby whose setting was rejected while it
# replayed reservations; an identity file that cannot be read for one
# start, and a standby of that primary promoted.  Each refusal names what
# it found, and its hint's step releases it.  And a claim whose commit
# fails holds nothing back, and a claim replaced by an UPDATE holds it back.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SnowflakeTest;


my $table = 'CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_nextval())';
my $src = snowflake_node('src', worker_id => 1, allows_streaming => 1);
$src->start;
$src->safe_psql('postgres', "CREATE EXTENSION snowflake; $table; SELECT snowflake_claim_worker('src')");
$src->safe_psql('postgres', 'INSERT INTO t SELECT FROM generate_series(1, 100)');

# 1. A clone of worker 1 stays a copy of worker 1 while its worker id is
# unset, by a reload or across a restart, and set back to 1.
$src->backup('b1');
my $clone = PostgreSQL::Test::Cluster->new('clone');
$clone->init_from_backup($src, 'b1');
$clone->start;
is(refusal($clone), '55S01 backup_label', 'a clone is held back');
set_worker($clone, -1);
is(refusal($clone), '55S01 backup_label', 'with its worker id unset it generates nothing: still a copy');
is($clone->safe_psql('postgres', 'SELECT state, reason FROM snowflake_status'), 'held_copy|backup_label',
	'and the view says the same');
set_worker($clone, 1);
my ($code, $err) = refusal($clone);
is($code, '55S01 backup_label', 'set back to 1 by a reload, still a copy');
like($err, qr/ERROR:  55S01: \D*\b1\b/, 'of worker 1');
set_worker($clone, -1);
$clone->restart;
set_worker($clone, 1);
$clone->restart;
is(refusal($clone), '55S01 backup_label', 'and across restarts with it unset');
set_worker($clone, 5);
is(refusal($clone), '55S03 unclaimed',
	'a worker id of its own releases it as a copy; its system claimed worker 1, so it claims 5 too');
$clone->safe_psql('postgres', 'SELECT snowflake_claim_worker()');
is(refusal($clone), 'generated', 'claimed, it generates');
$clone->stop;

# 2. A dump restored with triggers off for replication still brings its
# claim: the node with that worker id is held back.
my $dump = $src->basedir . '/db.dump';
command_ok([ 'pg_dump', '-Fc', '-d', $src->connstr('postgres'), '-f', $dump ], 'pg_dump');
my $dst = snowflake_node('dst', worker_id => 1);
$dst->start;
{
	local $ENV{PGOPTIONS} = '-c session_replication_role=replica';
	command_ok([ 'pg_restore', '--exit-on-error', '-d', $dst->connstr('postgres'), $dump ],
		'pg_restore with session_replication_role = replica');
}
is(refusal($dst), '55S03 claimed_elsewhere', 'the restored claim holds the node back all the same');
$dst->stop;

# 3. pg_upgrade of a node that preloads the library only after it: the
# restore loads the library, which records the upgrade; CREATE EXTENSION in
# another database afterwards releases nothing.  And a new cluster started
# once, preloading the library, before pg_upgrade.
sub upgrade
{
	my ($tag, $before) = @_;
	my $old = snowflake_node("old$tag", worker_id => 4);
	$old->start;
	$old->safe_psql('postgres', "CREATE EXTENSION snowflake; $table");
	$old->safe_psql('postgres', 'INSERT INTO t SELECT FROM generate_series(1, 100)');
	# another system's claim of worker 5, which the old node keeps
	$old->safe_psql('postgres', "INSERT INTO snowflake_workers VALUES (5, 4242, 'other')");
	my $max = $old->safe_psql('postgres', 'SELECT max(id) FROM t');
	$old->stop;
	my $new = snowflake_node("new$tag", worker_id => 4);
	if ($before)
	{
		$new->start;
		$new->stop;
	}
	else
	{
		$new->append_conf('postgresql.conf', "shared_preload_libraries = ''\n");
	}
	pg_upgrade_ok($old, $new, "pg_upgrade ($tag)");
	$new->append_conf('postgresql.conf', "shared_preload_libraries = 'snowflake'\n");
	$new->start;
	is(refusal($new), '55S02 upgraded', "after pg_upgrade ($tag), held back, saying so");
	$new->safe_psql('postgres', 'CREATE DATABASE other');
	$new->safe_psql('other', 'CREATE EXTENSION snowflake');
	is(refusal($new), '55S02 upgraded', 'CREATE EXTENSION in another database releases nothing');
	# the hint's step, as written, in a session without snowflake in search_path
	my ($ret, $out, $err) = $new->psql('postgres',
		"SET search_path = \"\$user\", public; SELECT snowflake.snowflake_confirm_node(old_data_directory => '"
		  . $old->data_dir . "')");
	is($ret, 0, 'the hint\'s step runs as written') or diag($err);
	$new->safe_psql('postgres', 'INSERT INTO t SELECT FROM generate_series(1, 10)');
	is($new->safe_psql('postgres', "SELECT count(*) FROM t WHERE id > $max"), '10', 'then above every old ID');
	set_worker($new, 5);
	is(refusal($new), '55S03 claimed_elsewhere', 'the claims the old cluster kept are kept across the upgrade');
	$new->stop;
	return;
}
upgrade('_late', 0);
upgrade('_started', 1);

# A clone still held back, stopped and upgraded (a rehearsal on a copy):
# the upgrade's step refuses it, as an upgrade of a copy is a copy.
$src->backup('b3');
my $copy = PostgreSQL::Test::Cluster->new('copy');
$copy->init_from_backup($src, 'b3');
$copy->start;
is(refusal($copy), '55S01 backup_label', 'a clone is held back');
$copy->stop;
my $upg = snowflake_node('upg', worker_id => 1);
pg_upgrade_ok($copy, $upg, 'pg_upgrade of the clone');
$upg->start;
($code, $err) = refusal($upg, 'postgres',
	"SELECT snowflake.snowflake_confirm_node(old_data_directory => '" . $copy->data_dir . "')");
is($code, '55000 upgraded', 'confirming it from the clone\'s directory is refused');
like($err, qr/DETAIL:  .*held_copy \(backup_label\)/, 'naming what the clone was: a copy');
is(refusal($upg), '55S02 upgraded', 'and it stays held back');
$upg->stop;

# A dump of a 1.1 node restored as README's Upgrading says (1.1 in public,
# then the update): the claim the table holds holds the node back.
my $o11 = snowflake_node('o11', worker_id => 6);
$o11->start;
$o11->safe_psql('postgres', "CREATE EXTENSION snowflake VERSION '1.1'; SELECT public.snowflake_claim_worker('o11')");
my $dump11 = $o11->basedir . '/db11.dump';
command_ok([ 'pg_dump', '-Fc', '-d', $o11->connstr('postgres'), '-f', $dump11 ], 'pg_dump of a 1.1 node');
$o11->stop;
my $n11 = snowflake_node('n11', worker_id => 6);
$n11->start;
$n11->safe_psql('postgres', "CREATE EXTENSION snowflake VERSION '1.1' SCHEMA public");
command_ok([ 'pg_restore', '-d', $n11->connstr('postgres'), '--data-only', $dump11 ], 'its data restored into 1.1');
$n11->safe_psql('postgres', 'ALTER EXTENSION snowflake UPDATE');
is(refusal($n11), '55S03 claimed_elsewhere', 'updated to 1.2, the claim the table holds holds the node back');
$n11->stop;

# 4. A standby whose setting is rejected while it replays reservations keeps
# them: fixed and promoted, it continues above the old primary's IDs, which
# run 5 minutes ahead of its clock.
my $p = snowflake_node('p', worker_id => 2, allows_streaming => 1);
start_faked($p, '+300');
$p->safe_psql('postgres', "CREATE EXTENSION snowflake; $table");
$p->backup('b2');
my $s = PostgreSQL::Test::Cluster->new('s');
$s->init_from_backup($p, 'b2', has_streaming => 1);
$s->append_conf('postgresql.conf', "snowflake.layuot = 'typo'\n");
$s->start;
$p->safe_psql('postgres', 'INSERT INTO t SELECT FROM generate_series(1, 20000)');
$p->safe_psql('postgres', 'CHECKPOINT');
$p->wait_for_catchup($s);
$s->safe_psql('postgres', 'CHECKPOINT');
my $max = $p->safe_psql('postgres', 'SELECT max(id) FROM t');
is($s->safe_psql('postgres', 'SELECT state, reason FROM snowflake_status'), 'disabled|setting_unknown',
	'a standby with a misspelt setting is disabled');
my ($kept) = unpack('q<', state_mark($s->data_dir . '/snowflake.state'));
ok($kept >= $max, "and keeps what it replays in its state file ($kept, the primary's last ID $max)");
$p->stop('immediate');
my $conf = slurp_file($s->data_dir . '/postgresql.conf');
$conf =~ s/^snowflake\.layuot.*$//mg;
open my $fh, '>', $s->data_dir . '/postgresql.conf' or die;
print $fh $conf;
close $fh;
$s->restart;
$s->promote;
$s->safe_psql('postgres', 'ALTER SYSTEM SET snowflake.max_run_ahead_ms = -1; SELECT pg_reload_conf()');
$s->poll_query_until('postgres', "SELECT current_setting('snowflake.max_run_ahead_ms') = '-1'")
  or die 'reload';
$s->safe_psql('postgres', 'INSERT INTO t SELECT FROM generate_series(1, 10)');
is($s->safe_psql('postgres', "SELECT count(*) FROM t WHERE id > $max"), '10',
	'fixed and promoted, it continues above every ID of the old primary');
$s->stop;

# 5. An identity file that cannot be read at a start: held back, saying
# so, and left as it is; readable again, the node goes on as it was.
my $file = $src->data_dir . '/snowflake.identity';
$src->stop;
chmod 0000, $file;
$src->start;
($code, $err) = refusal($src);
is($code, '58030 record_unreadable', 'an unreadable identity file: held back, saying what it found');
like($err, qr/ERROR:  58030: .*"snowflake\.identity"/, 'naming the file');
$src->stop;
chmod 0600, $file;
$src->start;
is(refusal($src), 'generated', 'readable again, it generates: the file was left as it was');

# The same, with a standby of it promoted: its own file says what it is.
$src->backup('b4');
my $sb = PostgreSQL::Test::Cluster->new('sb');
$sb->init_from_backup($src, 'b4', has_streaming => 1);
$sb->start;
$src->stop;
chmod 0000, $file;
$src->start;
is(refusal($src), '58030 record_unreadable', 'the primary cannot read its identity file');
$src->wait_for_catchup($sb);
$src->stop('immediate');
$sb->promote;
is(refusal($sb), 'generated', 'its standby, promoted, generates: the primary\'s file says nothing of its own');
$sb->stop;
chmod 0600, $file;

# A claim whose commit then fails (a PREPARE refused) holds nothing back.
$src->start;
is(refusal($src, 'postgres', "BEGIN; INSERT INTO snowflake_workers VALUES (3, 4242, 'x'); PREPARE TRANSACTION 'p'"),
	'55000', 'a PREPARE refused (prepared transactions are disabled)');
set_worker($src, 3);
is(refusal($src), '55S03 unclaimed', 'its claim of worker 3 holds nothing back: only its own claim is missing');
$src->safe_psql('postgres', 'SELECT snowflake_claim_worker()');
is(refusal($src), 'generated', 'claimed, it generates');

# Its own claim replaced by an UPDATE that names another system, as a
# subscription applies one (replica role: the trigger fires for the apply
# too), holds it back as an inserted claim does.
set_worker($src, 1);
is(refusal($src), 'generated', 'back under worker 1, its own claim');
$src->safe_psql('postgres',
	'SET session_replication_role = replica; UPDATE snowflake_workers SET system_identifier = 4242 WHERE worker_id = 1');
is(refusal($src), '55S03 claimed_elsewhere', 'its claim replaced by an UPDATE holds it back');
$src->stop;

done_testing();
