# What a start sees that recovery then uses up, or a worker id it runs
# without for a while, is kept for the start that can use it: a base backup
# restored in place and started with a setting it rejects, or a clone
# started with no worker id, is still a copy of its source once fixed, and
# so is one taken while its source ran with no worker id; a
# standby promoted while a setting was rejected is its primary's node once
# fixed, with no step.  A dump restored into a cluster that claimed the
# same worker id first brings its claim all the same, and the restore goes
# on.  Each refusal names what it found and its hint's step releases it;
# bad arguments are refused as such.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SnowflakeTest;

# a setting the node rejects at start, and the fix: the line removed
sub typo
{
	my ($node) = @_;
	$node->append_conf('postgresql.conf', "snowflake.tpyo = 1\n");
	return;
}

sub fix_typo
{
	my ($node) = @_;
	my $file = $node->data_dir . '/postgresql.conf';
	my $conf = slurp_file($file);
	$conf =~ s/^snowflake\.tpyo.*$//mg;
	open my $fh, '>', $file or die "cannot write $file: $!";
	print $fh $conf;
	close $fh;
	return;
}

# A copy of worker 1 started from a base backup: refused as one, naming
# it, until the hint's step, a worker id of its own.
sub copy_until_own
{
	my ($node, $worker, $what, $claimed) = @_;
	my ($code, $err) = refusal($node);
	is($code, '55S01 backup_label', "$what, it is a copy, from the base backup it started from");
	like($err, qr/ERROR:  55S01: \D*\b1\b/, "$what, of worker 1");
	set_worker($node, $worker);
	if ($claimed)
	{
		# its source's system claimed worker 1: its own is claimed too
		is(refusal($node), '55S03 unclaimed', "$what, a worker id of its own releases it as a copy, to be claimed");
		$node->safe_psql('postgres', 'SELECT snowflake_claim_worker()');
	}
	is(refusal($node), 'generated', "$what, a worker id of its own releases it");
	return;
}

# refused for the rejected setting, naming it
sub rejected
{
	my ($node, $what) = @_;
	my ($code, $err) = refusal($node);
	is($code, 'F0000 setting_unknown', "$what, it refuses");
	like($err, qr/ERROR:  F0000: .*"snowflake\.tpyo"/, "$what, naming the setting");
	return;
}

my $table = 'CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_nextval())';

# 1. A point-in-time restore in place (the same directory, so the same
# inode), started first with a rejected setting: recovery uses up
# backup_label, and the start with the setting fixed still knows the
# directory is a copy from before IDs its node issued since.
my $p = snowflake_node('p', worker_id => 1, allows_streaming => 1);
$p->start;
$p->safe_psql('postgres', "CREATE EXTENSION snowflake; $table");
$p->safe_psql('postgres', 'INSERT INTO t SELECT FROM generate_series(1, 100)');
$p->backup('b1');
$p->safe_psql('postgres', 'INSERT INTO t SELECT FROM generate_series(1, 1000)');
my $max = $p->safe_psql('postgres', 'SELECT max(id) FROM t');
$p->stop;
my $pgdata = $p->data_dir;
my $ino = (stat $pgdata)[1];
opendir my $dh, $pgdata or die;
for my $entry (grep { !/^\.\.?$/ } readdir $dh)
{
	PostgreSQL::Test::Utils::system_or_bail('rm', '-rf', "$pgdata/$entry");
}
closedir $dh;
PostgreSQL::Test::Utils::system_or_bail('cp', '-a', $p->backup_dir . '/b1/.', $pgdata);
is((stat $pgdata)[1], $ino, 'the backup is restored into the same directory');
typo($p);
$p->start;
rejected($p, 'started with a rejected setting');
ok(!-e "$pgdata/backup_label", 'recovery used up backup_label meanwhile');
fix_typo($p);
$p->restart;
copy_until_own($p, 6, 'the setting fixed');
$p->stop;

# 2. A clone started with no worker id, then given its source's by a
# reload: still a copy of it; another releases it.
my $src = snowflake_node('src', worker_id => 1, allows_streaming => 1);
$src->start;
$src->safe_psql('postgres', "CREATE EXTENSION snowflake; $table; SELECT snowflake_claim_worker('src')");
$src->safe_psql('postgres', 'INSERT INTO t SELECT FROM generate_series(1, 100)');
$src->backup('b2');
my $clone = PostgreSQL::Test::Cluster->new('clone');
$clone->init_from_backup($src, 'b2');
$clone->append_conf('postgresql.conf', "snowflake.worker_id = -1\n");
$clone->start;
is(refusal($clone), '55S01 backup_label', 'a clone with no worker id is held back as a copy');
is($clone->safe_psql('postgres', 'SELECT state, reason FROM snowflake_status'), 'held_copy|backup_label',
	'and the view says the same');
set_worker($clone, 1);
copy_until_own($clone, 7, 'given its source\'s worker id', 1);
$clone->stop;

# A base backup taken while its source ran with no worker id for a while:
# still a copy of the worker id the source had, and has again.
set_worker($src, -1);
$src->safe_psql('postgres', 'CHECKPOINT');
$src->backup('b2u');
set_worker($src, 1);
my $clone2 = PostgreSQL::Test::Cluster->new('clone2');
$clone2->init_from_backup($src, 'b2u');
$clone2->start;
# its configuration came with the backup: no worker id
is(refusal($clone2), '55S01 backup_label', 'a clone taken then has no worker id either, and is a copy');
is($clone2->safe_psql('postgres', 'SELECT state, reason FROM snowflake_status'), 'held_copy|backup_label',
	'and is held back as a copy');
set_worker($clone2, 1);
copy_until_own($clone2, 8, 'taken while its source had no worker id, then given it', 1);
$clone2->stop;

# 3. A dump of the node of worker 1 restored into a cluster that runs with
# worker id 1 and claimed it first: the restore goes on, this system's
# claim stands in the table, and the other's holds the node back.
$src->safe_psql('postgres', 'INSERT INTO t SELECT FROM generate_series(1, 100)');
$max = $src->safe_psql('postgres', 'SELECT max(id) FROM t');
my $dump = $src->basedir . '/db.dump';
command_ok([ 'pg_dump', '-Fc', '-d', $src->connstr('postgres'), '-f', $dump ], 'pg_dump');
my $dst = snowflake_node('dst', worker_id => 1);
$dst->start;
$dst->safe_psql('postgres', 'CREATE DATABASE app');
$dst->safe_psql('app', "CREATE EXTENSION snowflake; SELECT snowflake_claim_worker('dst')");
my ($out, $err) = run_command([ 'pg_restore', '-d', $dst->connstr('app'), $dump ]);
unlike($err, qr/snowflake_workers_pkey/, 'the claim does not fail the restore on the key');
is($dst->safe_psql('app', 'SELECT count(*) FROM t'), '200', 'the rows are restored');
is($dst->safe_psql('app', 'SELECT node_name FROM snowflake.snowflake_workers WHERE worker_id = 1'),
	'dst', 'this system\'s claim stands in the table');
my $code;
($code, $err) = refusal($dst, 'app');
is($code, '55S03 claimed_elsewhere', 'the node is held back, saying why');
my $srcsys = $src->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()');
like($err, qr/\b$srcsys\b/, 'naming the system whose dump it was');
$dst->safe_psql('app', "SELECT snowflake.snowflake_confirm_node(above => $max)");
$dst->safe_psql('app', 'INSERT INTO t SELECT FROM generate_series(1, 10)');
is($dst->safe_psql('app', "SELECT count(*) FROM t WHERE id > $max"), '10',
	'the hint\'s step releases it, above the restored IDs');
# the same claim by INSERT ... ON CONFLICT DO NOTHING (pg_dump --inserts
# --on-conflict-do-nothing), in another database
$dst->safe_psql('postgres', 'CREATE DATABASE app2');
$dst->safe_psql('app2', "CREATE EXTENSION snowflake; SELECT snowflake_claim_worker('dst')");
$dst->safe_psql('app2', "INSERT INTO snowflake.snowflake_workers VALUES (1, $srcsys, 'src', now())
	ON CONFLICT DO NOTHING");
is(refusal($dst, 'app2'), '55S03 claimed_elsewhere', 'a claim skipped by ON CONFLICT DO NOTHING holds it back too');
# this system's own claim, by an upsert, is changed as asked
is($dst->safe_psql('app2', "INSERT INTO snowflake.snowflake_workers
	VALUES (1, (SELECT system_identifier FROM pg_control_system()), 'renamed', now())
	ON CONFLICT (worker_id) DO UPDATE SET node_name = EXCLUDED.node_name RETURNING node_name"),
	'renamed', 'an upsert of this system\'s own claim changes it');
# a claim rolled back holds nothing back
$dst->safe_psql('app2', "SELECT snowflake.snowflake_confirm_node(above => $max)");
$dst->safe_psql('app2', "BEGIN; INSERT INTO snowflake.snowflake_workers VALUES (1, $srcsys, 'src', now()); ROLLBACK");
is(refusal($dst, 'app2'), 'generated', 'one rolled back holds nothing back');
$dst->stop;

# 4. Bad arguments are refused as such, not as internal errors or damage.
is(refusal($src, 'postgres', 'SELECT snowflake_node_nextval(0)'), '42P01', 'an OID that names nothing');
($code, $err) = refusal($src, 'postgres', "SELECT snowflake_confirm_node(old_data_directory => '$pgdata/PG_VERSION')");
is($code, '22023', 'a file named as the old data directory');
like($err, qr/ERROR:  22023: "\Q$pgdata\E\/PG_VERSION"/, '... naming it');
is(refusal($src, 'postgres', "SELECT snowflake_confirm_node(old_data_directory => repeat('x', 2000))"), '42622',
	'a path too long');
($code, $err) = refusal($src, 'postgres', "SELECT snowflake_confirm_node(old_data_directory => '$pgdata/nothing')");
is($code, '58P01', 'a directory that does not exist');
like($err, qr/ERROR:  58P01: .*"\Q$pgdata\E\/nothing"/, '... naming it');
is(refusal($src, 'postgres', "SELECT snowflake_confirm_node(stopped_at => now() + interval '2 days')"), '22023',
	'a stop time more than a day ahead of the clock');
is(refusal($src, 'postgres', 'SELECT snowflake_confirm_node(above => -1)'), '22023', 'a negative ID');
is(refusal($src, 'postgres', 'SELECT snowflake_confirm_node()'), '22004', 'no floor at all');

# 5. A standby that replayed with a rejected setting, promoted while it was
# still rejected, then fixed: it is its primary's node, and generates
# above every ID its primary issued, with no step.
$src->backup('b3');
my $sb = PostgreSQL::Test::Cluster->new('sb');
$sb->init_from_backup($src, 'b3', has_streaming => 1);
typo($sb);
$sb->start;
$src->safe_psql('postgres', 'INSERT INTO t SELECT FROM generate_series(1, 1000)');
$max = $src->safe_psql('postgres', 'SELECT max(id) FROM t');
$src->wait_for_catchup($sb);
$src->stop('immediate');
$sb->promote;
rejected($sb, 'promoted with the setting still rejected');
fix_typo($sb);
$sb->restart;
is(refusal($sb), 'generated', 'the setting fixed, it generates with no other step');
$sb->safe_psql('postgres', 'INSERT INTO t SELECT FROM generate_series(1, 10)');
is($sb->safe_psql('postgres', "SELECT count(*) FROM t WHERE id > $max"), '10',
	'above every ID its primary issued');
$sb->stop;

done_testing();
