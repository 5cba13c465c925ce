# The runbook of docs/upgrading.md, "Upgrading PostgreSQL", as written:
# its SQL blocks (those marked for this test) run after a real pg_upgrade,
# on servers set up as README recommends (no snowflake in search_path).
# The first, with the old data directory, and the second, with the largest
# ID of the tables, each release the upgraded node, which then generates
# above every ID of the old one.
use strict;
use warnings;
use File::Basename qw(dirname);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SnowflakeTest;

# the blocks this test runs, in the order of the file
my $doc = dirname(__FILE__) . '/../../docs/upgrading.md';
my @blocks;
{
	my ($marked, $in, $block) = (0, 0, '');
	for my $line (split /\n/, slurp_file($doc))
	{
		if ($in)
		{
			if ($line =~ /^\s*```\s*$/)
			{
				push @blocks, $block;
				($in, $block) = (0, '');
			}
			else
			{
				$block .= ($line =~ s/^\s+//r) . "\n";
			}
		}
		elsif ($line =~ /^\s*<!-- run by test\/t\/upgrade_pg_upgrade_runbook\.pl -->\s*$/)
		{
			$marked = 1;
		}
		elsif ($marked && $line =~ /^\s*```sql\s*$/)
		{
			($marked, $in) = (0, 1);
		}
		else
		{
			$marked = 0;
		}
	}
}
is(scalar(@blocks), 2, 'docs/upgrading.md has the two blocks of the runbook');
my ($by_directory, $by_id) = @blocks;
like($by_directory, qr/old_data_directory => '[^']+'/, 'the first names the old data directory');
like($by_id, qr/above => /, 'the second names an ID');

# node(NAME, INIT): a server as README recommends it
sub node
{
	my ($name, %init) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init(%init);
	$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'snowflake'
snowflake.worker_id = 3
});
	return $node;
}

# worker_is(NODE, W): NODE's keeper has put worker id W in force
sub worker_is
{
	my ($node, $w) = @_;
	$node->append_conf('postgresql.conf', "snowflake.worker_id = $w");
	$node->reload;
	return $node->poll_query_until('postgres', "SELECT snowflake.snowflake_worker_id() = $w");
}

# claimed_as(NODE, W, NAME): NODE moved to worker id W, which it claims
# (a system that claimed one runs only under those it claimed), in force
sub claimed_as
{
	my ($node, $w, $name) = @_;
	$node->append_conf('postgresql.conf', "snowflake.worker_id = $w");
	$node->reload;
	$node->poll_query_until('postgres', "SELECT current_setting('snowflake.worker_id') = '$w'")
	  or return 0;
	$node->safe_psql('postgres', "SELECT snowflake.snowflake_claim_worker('$name')");
	return $node->poll_query_until('postgres', "SELECT snowflake.snowflake_worker_id() = $w");
}

# the old cluster: README's table, IDs, the claim; stopped cleanly.  It
# ran as worker 5 before 3, and claimed both.
my $old = node('old');
$old->start;
$old->safe_psql('postgres', 'CREATE EXTENSION snowflake');
ok(worker_is($old, 5), 'the old cluster runs as worker 5');
$old->safe_psql('postgres', q{
	SELECT snowflake.snowflake_nextval();
	SELECT snowflake.snowflake_claim_worker('old five');});
ok(claimed_as($old, 3, 'old'), 'then as worker 3, claimed');
$old->safe_psql('postgres', q{
	CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake.snowflake_nextval(), item text);
	INSERT INTO orders (item) SELECT 'item ' || n FROM generate_series(1, 1000) n;});
my $old_max = $old->safe_psql('postgres', 'SELECT max(id) FROM orders');
$old->stop;

# upgraded_by(NAME, BLOCK): a new cluster made by pg_upgrade from the old
# one (which pg_upgrade copies from and leaves as it was), released by the
# block, generating above the old cluster's IDs
sub upgraded_by
{
	my ($name, $block) = @_;
	my $new = node($name);
	pg_upgrade_ok($old, $new, "pg_upgrade to $name");
	$new->start;
	is(refusal($new, 'postgres', 'SELECT snowflake.snowflake_nextval()'), '55S02 upgraded',
		"$name: held back after pg_upgrade, as the runbook says");
	my ($ret, $out, $err) = $new->psql('postgres', $block, on_error_stop => 1);
	is($ret, 0, "$name: the runbook's block runs as written") or diag($err);
	is($new->safe_psql('postgres', qq{
		INSERT INTO orders (item) SELECT 'new ' || n FROM generate_series(1, 100) n;
		SELECT count(*) FROM orders WHERE item LIKE 'new %' AND id > $old_max}),
		100, "$name: every new ID is above the old cluster's");
	return $new;
}

my $path = $old->data_dir;
(my $block = $by_directory) =~ s/old_data_directory => '[^']+'/old_data_directory => '$path'/;
my $new = upgraded_by('by_directory', $block);
is($new->safe_psql('postgres', q{
	SELECT system_identifier = (SELECT system_identifier FROM pg_control_system())
	FROM snowflake.snowflake_workers WHERE node_name = 'old'}),
	't', 'by_directory: the claim moved to the new system identifier');
is($new->safe_psql('postgres', q{
	SELECT worker_id FROM snowflake.snowflake_workers
	WHERE system_identifier <> (SELECT system_identifier FROM pg_control_system())}),
	'5', "by_directory: the old cluster's claim of worker 5 stays under its system identifier");
# a copy of the old cluster shares that identifier: the claim may be the
# copy's, so going back to worker 5 takes the hint's step
set_worker($new, 5);
is(refusal($new, 'postgres', 'SELECT snowflake.snowflake_nextval()'), '55S03 claimed_elsewhere',
	'by_directory: back on worker 5, it is held back as by another system\'s claim');
my $hwm = $new->safe_psql('postgres', 'SELECT high_water_mark FROM snowflake.snowflake_status');
$new->safe_psql('postgres', "SELECT snowflake.snowflake_confirm_node(above => $hwm)");
is($new->safe_psql('postgres', qq{
	SELECT (snowflake.snowflake_decode(id)).worker_id || ' ' || (id > $old_max)
	FROM snowflake.snowflake_nextval() id}),
	'5 true', "by_directory: the hint's step releases it, as worker 5, above the old cluster's IDs");
$new->stop;

upgraded_by('by_id', $by_id)->stop;

# A copy released under a worker id of its own, then upgraded and
# confirmed, does not take its source's claim: the source runs on.
my $src = node('source', allows_streaming => 1);
$src->start;
$src->safe_psql('postgres', q{
	CREATE EXTENSION snowflake;
	SELECT snowflake.snowflake_nextval();
	SELECT snowflake.snowflake_claim_worker('source');});
$src->backup('copy');
my $copy = PostgreSQL::Test::Cluster->new('copy');
$copy->init_from_backup($src, 'copy');
$copy->start;
ok(claimed_as($copy, 9, 'copy'), 'the copy, given worker 9 of its own and claiming it, generates');
$copy->stop;
my $up = node('copy_upgraded');
pg_upgrade_ok($copy, $up, 'pg_upgrade of the copy');
$up->append_conf('postgresql.conf', 'snowflake.worker_id = 9');
$up->start;
my $copy_dir = $copy->data_dir;
$up->safe_psql('postgres', "SELECT snowflake.snowflake_confirm_node(old_data_directory => '$copy_dir')");
set_worker($up, 3);
is(refusal($up, 'postgres', 'SELECT snowflake.snowflake_nextval()'), '55S03 claimed_elsewhere',
	"the upgraded copy on its source's worker id: held back, as by another system's claim");
$_->stop for $up, $src;

done_testing();
