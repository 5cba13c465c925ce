# The other half of the promise: where the node's own WAL, files and
# replayed records cover every ID it could have issued, it generates, with
# no step.  A standby made before CREATE EXTENSION (and its cascade)
# promoted, twice; a setting rejected at start and fixed before the first
# ID; the extension created at 1.1 and updated; the library preloaded only
# after CREATE EXTENSION, on a primary and on its standby; a state file
# whose mode was changed, across a crash.  And the refusals that remain
# name the cause they detected: another system's claim that arrived while
# the library was not preloaded, or before the worker id was set.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SnowflakeTest;


sub standby_of
{
	my ($up, $name, %conf) = @_;
	$up->backup("b_$name", backup_options => ['--no-slot']);
	my $sb = PostgreSQL::Test::Cluster->new($name);
	$sb->init_from_backup($up, "b_$name", has_streaming => 1);
	$sb->start;
	return $sb;
}

my $table = 'CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_nextval())';

# 1. A standby made before CREATE EXTENSION, and a standby of it, then two
# failovers: each promoted server generates at once, above every ID that
# reached it.
my $p = snowflake_node('p', worker_id => 1, allows_streaming => 1);
$p->start;
my $s = standby_of($p, 's');
my $c = standby_of($s, 'c');
$p->safe_psql('postgres', "CREATE EXTENSION snowflake; $table");
$p->safe_psql('postgres', 'INSERT INTO t SELECT FROM generate_series(1, 10000)');
$p->wait_for_catchup($s);
$s->wait_for_catchup($c, 'replay', $p->lsn('flush'));
my $max = $p->safe_psql('postgres', 'SELECT max(id) FROM t');
$p->stop('immediate');
$s->promote;
is(refusal($s), 'generated', 'a standby made before CREATE EXTENSION generates once promoted');
$s->safe_psql('postgres', 'INSERT INTO t SELECT FROM generate_series(1, 100)');
is($s->safe_psql('postgres', "SELECT count(*) FROM t WHERE id > $max"), '100',
	'above every ID of the old primary');
$s->restart;
is(refusal($s), 'generated', 'and after a restart');
$c->poll_query_until('postgres', "SELECT count(*) = 10100 FROM t")
  or die 'the cascade did not follow the promoted standby';
$max = $s->safe_psql('postgres', 'SELECT max(id) FROM t');
$s->stop('immediate');
$c->promote;
is(refusal($c), 'generated', 'its cascade, promoted in turn, generates too');
$c->safe_psql('postgres', 'INSERT INTO t SELECT FROM generate_series(1, 100)');
is($c->safe_psql('postgres', "SELECT count(*) FROM t WHERE id > $max"), '100',
	'above every ID of the second primary');
$c->stop;

# 2. A layout rejected at start, CREATE EXTENSION, the setting fixed: no
# ID was ever issued, and the node generates.  Likewise a worker id out of
# range.  The layout's step is a restart (a reload does not release it);
# the worker id's, a reload, as README says.
for my $case ([ "snowflake.layout = custom\nsnowflake.custom_epoch = '2031-01-01'", 'layout_unusable' ],
	[ 'snowflake.worker_id = 5000', 'worker_id_rejected' ])
{
	my ($bad, $reason) = @$case;
	my $n = snowflake_node('bad' . length($bad), worker_id => 1);
	$n->append_conf('postgresql.conf', "$bad\n");
	$n->start;
	$n->safe_psql('postgres', "CREATE EXTENSION snowflake; $table");
	is(refusal($n), "F0000 $reason", 'refused while a setting is rejected');
	$n->append_conf('postgresql.conf', "snowflake.layout = shardingsphere\nsnowflake.worker_id = 1\nwork_mem = '5MB'\n");
	$n->reload;
	$n->poll_query_until('postgres', "SELECT current_setting('work_mem') = '5MB'")
	  or die 'the reload did not take';
	if ($reason eq 'worker_id_rejected')
	{
		$n->poll_query_until('postgres', "SELECT state = 'ready' FROM snowflake_status")
		  or die 'the reload did not fix the worker id';
		is(refusal($n), 'generated', 'fixed and reloaded, it generates: the step the hint named');
	}
	else
	{
		is(refusal($n), "F0000 $reason", 'fixed and reloaded, still refused: the step is a restart');
	}
	$n->restart;
	is(refusal($n), 'generated', 'fixed and restarted, it generates: no step but the one the hint named');
	$n->stop;
}

# 3. CREATE EXTENSION at 1.1, IDs, ALTER EXTENSION UPDATE, a restart.
my $u = snowflake_node('u', worker_id => 1);
$u->start;
$u->safe_psql('postgres', "CREATE EXTENSION snowflake VERSION '1.1'");
my ($ret, $out, $err) = $u->psql('postgres', 'SELECT public.snowflake_nextval()');
is($ret ? $err : 'generated', 'generated', 'installed at 1.1, it generates');
$u->safe_psql('postgres', 'ALTER EXTENSION snowflake UPDATE');
is(refusal($u), 'generated', 'and after the update');
$u->restart;
is(refusal($u), 'generated', 'and after a restart');
$u->stop;

# 4. The library preloaded only after CREATE EXTENSION, on a primary and
# its standby (the standby restarted with it first, as README says).
my $l = snowflake_node('l', worker_id => 1, allows_streaming => 1);
$l->append_conf('postgresql.conf', "shared_preload_libraries = ''\n");
$l->start;
my $ls = standby_of($l, 'ls');
$l->safe_psql('postgres', "CREATE EXTENSION snowflake; $table");
my $code;
($code, $err) = refusal($l);
is($code, '55000 not_preloaded', 'not preloaded, it refuses');
like($err, qr/HINT:  .*'snowflake'.*shared_preload_libraries/, 'naming the setting the library must be in');
$l->wait_for_catchup($ls);
$_->append_conf('postgresql.conf', "shared_preload_libraries = 'snowflake'\n") for $ls, $l;
$ls->restart;
$l->restart;
is(refusal($l), 'generated', 'preloaded, the primary generates');
$l->safe_psql('postgres', 'INSERT INTO t SELECT FROM generate_series(1, 10)');
$l->wait_for_catchup($ls);
$max = $l->safe_psql('postgres', 'SELECT max(id) FROM t');
$l->stop('immediate');
$ls->promote;
is(refusal($ls), 'generated', 'its standby, made before either, generates once promoted');
$ls->safe_psql('postgres', 'INSERT INTO t SELECT FROM generate_series(1, 10)');
is($ls->safe_psql('postgres', "SELECT count(*) FROM t WHERE id > $max"), '10', 'above the old IDs');
$ls->stop;

# The same pair with the primary lost before it ever preloaded the
# library: its standby cannot know, says so, and the hint's step, taken as
# written, releases it (that primary issued no ID).
my $l2 = snowflake_node('l2', worker_id => 1, allows_streaming => 1);
$l2->append_conf('postgresql.conf', "shared_preload_libraries = ''\n");
$l2->start;
my $ls2 = standby_of($l2, 'ls2');
$l2->safe_psql('postgres', "CREATE EXTENSION snowflake; $table");
$l2->wait_for_catchup($ls2);
$ls2->append_conf('postgresql.conf', "shared_preload_libraries = 'snowflake'\n");
$ls2->restart;
$l2->stop('immediate');
$ls2->promote;
($code, $err) = refusal($ls2);
is($code, '55S02 new_as_standby', 'a standby whose primary never ran the library says so');
like($err, qr/HINT:  .*snowflake\.snowflake_confirm_node\(above => N\).*\(0 if none\)/, 'naming the step');
is(refusal($ls2, 'postgres', 'SELECT snowflake_confirm_node()'), '22004',
	'a confirmation with no floor is refused');
$ls2->safe_psql('postgres', 'SET search_path = "$user", public; SELECT snowflake.snowflake_confirm_node(above => 0)');
is(refusal($ls2), 'generated', 'the step releases it');
$ls2->stop;

# 5. A state file whose mode was changed, then a crash while the node
# generates: the server comes back (the file is written anew) and goes on
# above every ID.
my $m = snowflake_node('m', worker_id => 1, conf => "restart_after_crash = on\n");
$m->start;
$m->safe_psql('postgres', "CREATE EXTENSION snowflake; $table");
$m->safe_psql('postgres', 'INSERT INTO t SELECT FROM generate_series(1, 1000)');
my $file = $m->data_dir . '/snowflake.state';
chmod 0400, $file;
$m->safe_psql('postgres', 'INSERT INTO t SELECT FROM generate_series(1, 20000)');
$max = $m->safe_psql('postgres', 'SELECT max(id) FROM t');
$m->stop('immediate');
$m->start;
is(refusal($m), 'generated', 'after a crash with the state file read-only, the node comes back and generates');
$m->safe_psql('postgres', 'INSERT INTO t SELECT FROM generate_series(1, 10)');
is($m->safe_psql('postgres', "SELECT count(*) FROM t WHERE id > $max"), '10', 'above every ID before the crash');
ok(-w $file || (stat $file)[2] & 0200, 'the state file was written anew, writable');
$m->stop;

# 6. Another system's claim that arrives while the library is not
# preloaded, or while the worker id is not set: the node is held back
# once it runs under that worker id, naming the claim, and not under
# another.
my $src = snowflake_node('src', worker_id => 9);
$src->start;
$src->safe_psql('postgres', "CREATE EXTENSION snowflake; $table; SELECT snowflake_claim_worker('src')");
$src->safe_psql('postgres', 'INSERT INTO t SELECT FROM generate_series(1, 100)');
my $dump = $src->basedir . '/db.dump';
command_ok([ 'pg_dump', '-Fc', '-d', $src->connstr('postgres'), '-f', $dump ], 'pg_dump');
$src->stop;
for my $case ('not preloaded', 'worker id not set')
{
	my $d = snowflake_node($case eq 'not preloaded' ? 'dst1' : 'dst2', worker_id => 9);
	$d->append_conf('postgresql.conf', $case eq 'not preloaded' ?
		  "shared_preload_libraries = ''\n" : "snowflake.worker_id = -1\n");
	$d->start;
	command_ok([ 'pg_restore', '--exit-on-error', '-d', $d->connstr('postgres'), $dump ],
		"pg_restore, $case");
	$d->append_conf('postgresql.conf', "shared_preload_libraries = 'snowflake'\nsnowflake.worker_id = 9\n");
	$d->restart;
	my ($code, $err) = refusal($d);
	is($code, '55S03 claimed_elsewhere',
		"a claim restored while the $case holds the node back under that worker id");
	like($err, qr/ERROR:  55S03: \D*\b9\b/, 'naming worker id 9');
	like($err, qr/HINT:  .*snowflake\.worker_id.*snowflake\.snowflake_confirm_node\(above => /,
		'the hint names the two steps');
	$d->append_conf('postgresql.conf', "snowflake.worker_id = 10\n");
	$d->reload;
	$d->poll_query_until('postgres', 'SELECT snowflake_worker_id() = 10')
	  or die 'the new worker id did not take';
	is(refusal($d), 'generated', 'under a worker id of its own it generates');
	$d->append_conf('postgresql.conf', "snowflake.worker_id = 9\n");
	$d->reload;
	$d->poll_query_until('postgres', "SELECT current_setting('snowflake.worker_id') = '9'")
	  or die 'the reload did not take';
	is(refusal($d), '55S03 claimed_elsewhere', 'back under the claimed one, held back again');
	is(refusal($d, 'postgres', 'SELECT snowflake_confirm_node()'), '22004',
		'a confirmation with no floor is refused');
	$d->safe_psql('postgres', 'SELECT snowflake_confirm_node(above => (SELECT max(id) FROM t))');
	is(refusal($d), 'generated', "confirmed as that system's node, it generates");
	$d->restart;
	is(refusal($d), 'generated', 'and after a restart');
	if ($case eq 'worker id not set')
	{
		# a claim that is rolled back (a restore that failed) holds nothing
		$d->safe_psql('postgres',
			'BEGIN; INSERT INTO snowflake.snowflake_workers VALUES (12, 4242, \'x\'); ROLLBACK;'
			  . ' BEGIN; SAVEPOINT a; INSERT INTO snowflake.snowflake_workers VALUES (13, 4242, \'y\');'
			  . ' ROLLBACK TO a; COMMIT');
		set_worker_and_check($d, $_) for 12, 13;
	}
	$d->stop;
}

# A failover to a standby whose own configuration lacks snowflake.worker_id:
# promoted, it refuses (55S09), and says which worker id it ran as, its
# primary's, the step that releases it; the view says the same.
{
	my $p6 = snowflake_node('p6', worker_id => 6, allows_streaming => 1);
	$p6->start;
	$p6->safe_psql('postgres', "CREATE EXTENSION snowflake; $table");
	my $s6 = standby_of($p6, 's6');
	$s6->append_conf('postgresql.conf', "snowflake.worker_id = -1\n");
	$s6->restart;
	$p6->safe_psql('postgres', 'INSERT INTO t SELECT FROM generate_series(1, 1000)');
	$p6->wait_for_catchup($s6);
	my $top = $p6->safe_psql('postgres', 'SELECT max(id) FROM t');
	$p6->stop('immediate');
	$s6->promote;
	my ($code, $words) = refusal($s6);
	is($code, '55S09', 'a standby promoted without a worker id in its configuration refuses');
	like($words, qr/DETAIL:  This node ran as worker id 6 .*\nHINT:  Set snowflake.worker_id = 6 in postgresql.conf and reload/,
		'... naming its primary\'s worker id as the one to set');
	is($s6->safe_psql('postgres', "SELECT state || '/' || reason FROM snowflake_status"), 'disabled/worker_id_unset',
		'... as the view says');
	set_worker($s6, 6);
	$s6->safe_psql('postgres', 'INSERT INTO t SELECT FROM generate_series(1, 10)');
	is($s6->safe_psql('postgres', "SELECT count(*) FROM t WHERE id > $top"), '10',
		'given it, it continues above its primary\'s IDs');
	$s6->stop;
}

# The worker id given by a reload, then a call: a claim rolled back, in a
# transaction or to a savepoint, holds the node back under none; the node's
# system claimed 9, so the worker id waits for its own claim alone, which
# succeeds: no other system's claim of it was kept.
sub set_worker_and_check
{
	my ($d, $worker) = @_;
	set_worker($d, $worker);
	is(refusal($d), '55S03 unclaimed', "a claim of worker $worker rolled back holds nothing back but its own claim");
	$d->safe_psql('postgres', 'SELECT snowflake_claim_worker()');
	is(refusal($d), 'generated', "claimed by this system, worker $worker generates");
	return;
}

done_testing();
