# ALTER EXTENSION snowflake UPDATE from every released version: each ends
# with exactly the objects, definitions and comments of a fresh install.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SnowflakeTest;

my $node = snowflake_node('upgrade');
$node->start;

# everything the extension owns, as text
my $catalog = q{
	SELECT string_agg(x, E'\n' ORDER BY x) FROM (
		SELECT pg_describe_object(classid, objid, 0) || ' ' ||
			   coalesce(obj_description(objid, classid::regclass::text), '') ||
			   CASE WHEN classid = 'pg_proc'::regclass THEN ' ' || pg_get_functiondef(objid) ELSE '' END AS x
		FROM pg_depend
		WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
		  AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'snowflake')) s};

# the triggers on its tables, as enabled, and the privileges on its members
my $rights = q{
	WITH m AS (SELECT classid, objid FROM pg_depend
			   WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
				 AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'snowflake'))
	SELECT string_agg(x, E'\n' ORDER BY x) FROM (
		SELECT pg_get_triggerdef(t.oid) || ' enabled ' || t.tgenabled::text AS x
		FROM pg_trigger t JOIN m ON m.classid = 'pg_class'::regclass AND m.objid = t.tgrelid
		UNION ALL
		SELECT p.oid::regprocedure::text || ' ' || coalesce(p.proacl::text, 'default')
		FROM pg_proc p JOIN m ON m.classid = 'pg_proc'::regclass AND m.objid = p.oid
		UNION ALL
		SELECT c.oid::regclass::text || ' ' || coalesce(c.relacl::text, 'default')
		FROM pg_class c JOIN m ON m.classid = 'pg_class'::regclass AND m.objid = c.oid) s};

# where it lives: the schema, its owner and privileges, and that the schema
# is no member (DROP EXTENSION leaves it, as CREATE EXTENSION made it)
my $schema = q{
	SELECT n.nspname || ' ' || n.nspowner::regrole || ' ' || coalesce(n.nspacl::text, '') || ' ' ||
		   (SELECT count(*) FROM pg_depend d WHERE d.classid = 'pg_namespace'::regclass
			AND d.objid = n.oid AND d.deptype = 'e')
	FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'snowflake'};

my $default = $node->safe_psql('postgres',
	"SELECT default_version FROM pg_available_extensions WHERE name = 'snowflake'");
$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql('fresh', 'CREATE EXTENSION snowflake');
my $fresh = $node->safe_psql('fresh', $catalog);
my $fresh_schema = $node->safe_psql('fresh', $schema);
my $fresh_rights = $node->safe_psql('fresh', $rights);
like($fresh_rights, qr/BEFORE INSERT OR DELETE OR UPDATE ON snowflake\.snowflake_workers .* enabled A/,
	'a fresh install guards the worker id registry in apply too');
ok(length($fresh) > 1000, "a fresh install of $default has its objects");

my @versions = split /\n/, $node->safe_psql('postgres',
	"SELECT version FROM pg_available_extension_versions WHERE name = 'snowflake' ORDER BY version");
ok(scalar(@versions) >= 1, 'released versions: ' . join(', ', @versions));
for my $v (@versions)
{
	my $db = "from_" . ($v =~ s/\W/_/gr);
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, "CREATE EXTENSION snowflake VERSION '$v'");
	$node->safe_psql($db, 'ALTER EXTENSION snowflake UPDATE');
	is($node->safe_psql($db, "SELECT extversion FROM pg_extension WHERE extname = 'snowflake'"),
		$default, "$v updates to $default");
	is($node->safe_psql($db, $catalog), $fresh, "$v updated has the objects of a fresh $default");
	is($node->safe_psql($db, $schema), $fresh_schema, "$v updated lives where a fresh $default does");
	is($node->safe_psql($db, $rights), $fresh_rights, "$v updated has the triggers and privileges of a fresh $default");
	ok($node->safe_psql($db, 'SELECT snowflake_nextval() > 0'), "$v updated generates");
}

$node->stop;
done_testing();
