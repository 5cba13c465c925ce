# A copy stays a copy: a pg_basebackup clone of a node that runs under
# load (worker 1), started beside it, with its snowflake.* files removed by
# hand: before its first start (backup_label still there), after a clean
# restart, after a crash.  Each is held back and says what it found;
# neither CREATE EXTENSION in a new database nor DROP and CREATE EXTENSION
# in the same one releases it; the hint's first step (a worker id of its
# own) does, and no ID any copy issues repeats one of its source's.  The
# source itself with its files removed is held back too (it may be a copy),
# and its hint's other step, taken when no copy of it runs, releases it
# above its IDs.
use strict;
use warnings;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SnowflakeTest;

my $src = snowflake_node('src', worker_id => 1, allows_streaming => 1);
$src->start;
$src->safe_psql('postgres', q{CREATE EXTENSION snowflake;
	CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake.snowflake_nextval(), n int)});

# the source's load: rows from two sessions until the end of the test
my $script = $src->basedir . '/load.sql';
open my $fh, '>', $script or die;
print $fh "INSERT INTO t (n) SELECT 1 FROM generate_series(1, 20);\n";
close $fh;
my ($out, $err) = ('', '');
my $load = IPC::Run::start(
	[ 'pgbench', '-n', '-c', '2', '-T', '600', '-f', $script, '-d', $src->connstr('postgres') ],
	'<', \undef, '>', \$out, '2>', \$err);
$src->poll_query_until('postgres', 'SELECT count(*) > 1000 FROM t') or die 'no load';

# status(NODE): the view's state/reason
sub status
{
	my ($node) = @_;
	return $node->safe_psql('postgres', q{SELECT state || '/' || coalesce(reason, '') FROM snowflake.snowflake_status});
}

sub remove_files
{
	my ($node) = @_;
	unlink map { $node->data_dir . "/snowflake.$_" } qw(state identity);
	return;
}

my @copies;
for my $case ([ 'before its first start', 'backup_label' ], [ 'after a clean restart', 'files_removed' ],
	[ 'after a crash', 'files_removed' ])
{
	my ($when, $reason) = @$case;
	my $name = 'copy' . scalar @copies;
	$src->backup($name, backup_options => ['--no-slot']);
	my $c = PostgreSQL::Test::Cluster->new($name);
	$c->init_from_backup($src, $name);
	if ($when eq 'before its first start')
	{
		remove_files($c);
		$c->start;
	}
	else
	{
		$c->start;
		is(status($c), 'held_copy/backup_label', "a clone started beside its source ($when): held back");
		$c->stop($when eq 'after a crash' ? 'immediate' : 'fast');
		remove_files($c);
		$c->start;
	}
	# IDs it would issue beside its source, while the source issues a burst
	# of its own in the same milliseconds, kept to be compared (none, if
	# the copy is held back)
	my $try = sub {
		my @runs = map {
			my ($node, $n) = @$_;
			IPC::Run::start(
				[ 'psql', '-X', '-q', '-d', $node->connstr('postgres'), '-c',
				  "INSERT INTO t (id, n) SELECT snowflake.snowflake_nextval(), $n FROM generate_series(1, 20000)" ],
				'<', \undef, '>', \my $o, '2>', \my $e);
		} [ $src, 1 ], [ $c, 4 ];
		$_->finish for @runs;
	};
	$try->();
	my ($code, $words) = refusal($c, 'postgres', 'SELECT snowflake.snowflake_nextval()');
	is($code, "55S01 $reason", "its files removed $when: held back as a copy, saying what it found");
	like($words, qr/HINT:  Give this server a worker id (of its own|no other node uses)/,
		'... and the hint offers a worker id of its own first');
	unlike($words, qr/HINT:  .*confirm_node\(stopped_at => now\(\)\)/, '... and no confirmation that could repeat');
	is(status($c), "held_copy/$reason", '... as the view says');

	$c->safe_psql('postgres', 'CREATE DATABASE again');
	$c->safe_psql('again', 'CREATE EXTENSION snowflake');
	is(refusal($c, 'again', 'SELECT snowflake.snowflake_nextval()'), "55S01 $reason",
		'CREATE EXTENSION in a new database does not release it');
	$try->();
	$c->safe_psql('postgres', 'DROP EXTENSION snowflake CASCADE; CREATE EXTENSION snowflake');
	is(refusal($c, 'postgres', 'SELECT snowflake.snowflake_nextval()'), "55S01 $reason",
		'nor DROP and CREATE EXTENSION in the same one');
	$try->();
	$c->restart;
	is(refusal($c, 'postgres', 'SELECT snowflake.snowflake_nextval()'), "55S01 $reason", 'nor a restart');
	$try->();
	is($c->safe_psql('postgres', 'SELECT count(*) FROM t WHERE n = 4'), '0', 'it issued no ID while held back');

	# the hint's first step
	set_worker($c, 10 + scalar @copies);
	is(refusal($c, 'postgres', 'SELECT snowflake.snowflake_nextval()'), 'generated',
		'a worker id of its own releases it');
	$c->safe_psql('postgres', 'ALTER TABLE t ALTER COLUMN id SET DEFAULT snowflake.snowflake_nextval()');
	$c->safe_psql('postgres', 'INSERT INTO t (n) SELECT 2 FROM generate_series(1, 2000)');
	push @copies, $c;
}

# the source, its files removed while stopped: it may be a copy too
$load->kill_kill;
$src->safe_psql('postgres', 'INSERT INTO t (n) SELECT 1 FROM generate_series(1, 100)');
my $max = $src->safe_psql('postgres', 'SELECT max(id) FROM t');
$src->stop;
remove_files($src);
$src->start;
is(refusal($src, 'postgres', 'SELECT snowflake.snowflake_nextval()'), '55S01 files_removed',
	'the source, its files removed: held back, as it may be a copy');
$src->safe_psql('postgres', q{SELECT snowflake.snowflake_confirm_node(stopped_at => now())});
$src->safe_psql('postgres', 'INSERT INTO t (n) SELECT 3 FROM generate_series(1, 100)');
is($src->safe_psql('postgres', "SELECT count(*) FROM t WHERE n = 3 AND id <= $max"), '0',
	'confirmed (no copy of it runs under worker 1), it continues above its IDs');

# no ID repeats, and no copy's own ID carries worker 1
my %seen;
my $repeated = 0;
for my $node ($src, @copies)
{
	my $n = $node == $src ? '' : ' WHERE n IN (2, 4)';
	for my $id (split /\n/, $node->safe_psql('postgres', "SELECT id FROM t$n"))
	{
		$repeated++ if $seen{$id}++;
	}
}
is($repeated, 0, 'no ID of a copy repeats one of its source, nor another copy\'s (' . scalar(keys %seen) . ' IDs)');
is(join(',', map { $_->safe_psql('postgres', 'SELECT count(*) FROM t WHERE n = 2 AND (snowflake.snowflake_decode(id)).worker_id = 1') } @copies),
	'0,0,0', 'no copy issued an ID under its source\'s worker id');
$_->stop for @copies;
$src->stop;
done_testing();
