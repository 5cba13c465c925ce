# The extension's SQL, one version after another.  The released scripts
# are frozen: each is recorded here by its checksum.  Every supported path
# to the current version (CREATE EXTENSION of a released version, then
# ALTER EXTENSION UPDATE, with or without a stop at each version between)
# ends with exactly the extension a fresh install makes: pg_dump's schema,
# plain and with every member as pg_upgrade dumps it; the members; the
# tables whose rows a dump keeps; definitions, comments, triggers and
# privileges; and where it lives.
use strict;
use warnings;
use Digest::SHA;
use IPC::Run;
use File::Basename qw(dirname);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SnowflakeTest;

# Released versions, and the scripts that install them, as released.  A
# release adds its update script here; the current version's full script
# is built from sql/snowflake.sql and never kept.
my @released = ('1.0', '1.1');
my %frozen = (
	'snowflake--1.0.sql' => 'b76aa53660fbaee37f1e0cc577081c1d1b74290c5bf41e185429106c94b1d95e',
	'snowflake--1.0--1.1.sql' => '642266d0518812aca9815797dd1f6366c36581ef63d301fffca77e8f8f5b61ca',
);
my $sql = dirname(__FILE__) . '/../../sql';
my $frozen_dir = dirname(__FILE__) . '/../../released';
for my $f (sort keys %frozen)
{
	is(Digest::SHA->new(256)->addfile("$frozen_dir/$f", 'b')->hexdigest, $frozen{$f}, "released/$f is as released");
}
# a script that makes a released version is one of them
my $released = join '|', map { quotemeta } @released;
for my $f (map { s{.*/}{}r } glob("$sql/snowflake--*.sql $frozen_dir/snowflake--*.sql"))
{
	next unless $f =~ /^snowflake--(?:[^-]+--)?($released)\.sql$/;
	ok(exists $frozen{$f}, "$f, which makes released $1, is recorded as released");
}

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

# its members, one by one (columns too), and the tables a dump keeps rows of
my $members = q{
	SELECT string_agg(pg_describe_object(classid, objid, objsubid), E'\n'
					  ORDER BY pg_describe_object(classid, objid, objsubid))
	FROM pg_depend
	WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
	  AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'snowflake')};
my $config = q{
	SELECT coalesce((SELECT string_agg(format('%I.%I', n.nspname, c.relname), ', ' ORDER BY u.k)
					 FROM unnest(e.extconfig) WITH ORDINALITY u(r, k)
						  JOIN pg_class c ON c.oid = u.r JOIN pg_namespace n ON n.oid = c.relnamespace),
					'none') || ' ' || coalesce(e.extcondition::text, 'none')
	FROM pg_extension e WHERE e.extname = 'snowflake'};

# schema_dump(DB, OPTIONS...): pg_dump --schema-only, without what differs
# between two databases made alike (object ids, transaction ids, the
# restrict key of newer minor releases).  --binary-upgrade dumps every
# member of the extension, as pg_upgrade does.
sub schema_dump
{
	my ($db, @opts) = @_;
	push @opts, '--no-statistics' if $node->pg_version >= 18 && grep { $_ eq '--binary-upgrade' } @opts;
	my ($out, $err) = run_command([ 'pg_dump', '--schema-only', @opts, '-d', $node->connstr($db) ]);
	die "pg_dump $db: $err" if $err ne '';
	my @lines = grep { !/^\\(?:un)?restrict / && !/binary_upgrade_set_next_/ } split /\n/, $out;
	for (@lines)
	{
		s/binary_upgrade_create_empty_extension\((.*), '\{[0-9,]*\}', /binary_upgrade_create_empty_extension($1, '{config}', /;
		s/relfrozenxid = '[0-9]+', relminmxid = '[0-9]+'/relfrozenxid = 'x', relminmxid = 'x'/;
		s/WHERE oid = '[0-9]+'/WHERE oid = 'x'/;
	}
	return join "\n", @lines;
}

# the extension in DB, every way this test compares it
sub extension_in
{
	my ($db) = @_;
	return {
		'pg_dump --schema-only' => schema_dump($db),
		'pg_dump --schema-only --binary-upgrade' => schema_dump($db, '--binary-upgrade'),
		'members' => $node->safe_psql($db, $members),
		'tables dumped with their rows' => $node->safe_psql($db, $config),
		'definitions and comments' => $node->safe_psql($db, $catalog),
		'schema' => $node->safe_psql($db, $schema),
		'triggers and privileges' => $node->safe_psql($db, $rights),
	};
}

# same_as_fresh(GOT, WANT, NAME): one test; on a difference, its lines only
my $tmp = PostgreSQL::Test::Utils::tempdir;
sub same_as_fresh
{
	my ($got, $want, $name) = @_;
	return pass($name) if $got eq $want;
	PostgreSQL::Test::Utils::append_to_file("$tmp/$_->[0]", "$_->[1]\n") for [ fresh => $want ], [ updated => $got ];
	my ($diff) = run_command([ 'diff', '-u', "$tmp/fresh", "$tmp/updated" ]);
	unlink "$tmp/fresh", "$tmp/updated";
	fail($name);
	diag($diff);
	return 0;
}

my $default = $node->safe_psql('postgres',
	"SELECT default_version FROM pg_available_extensions WHERE name = 'snowflake'");
my $sharedir = $node->config_data('--sharedir');
is(Digest::SHA->new(256)->addfile("$sharedir/extension/snowflake--$default.sql", 'b')->hexdigest,
	Digest::SHA->new(256)->addfile("$sql/snowflake.sql", 'b')->hexdigest,
	"the installed script of $default is sql/snowflake.sql");
# the update script from the last release is made from its template and
# the one source: no object of the source is written twice
for my $in (glob("$sql/snowflake--*--$default.sql.in"))
{
	my $made = "$sharedir/extension/" . ($in =~ s{.*/}{}r =~ s/\.in$//r);
	my ($out, $err);
	IPC::Run::run([ $^X, "$sql/compose.pl", $in, "$sql/snowflake.sql" ], '>', \$out, '2>', \$err)
	  or die "compose.pl: $err";
	is(Digest::SHA->new(256)->add($out)->hexdigest, Digest::SHA->new(256)->addfile($made, 'b')->hexdigest,
		"the installed $made is made from its template");
	unlike(slurp_file($in), qr/^CREATE (?:OR REPLACE )?FUNCTION /m, "its template $in defines no function itself");
}
$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql('fresh', 'CREATE EXTENSION snowflake');
my $want = extension_in('fresh');
my $fresh = $want->{'definitions and comments'};
my $fresh_rights = $want->{'triggers and privileges'};
like($want->{'pg_dump --schema-only --binary-upgrade'}, qr/ALTER EXTENSION snowflake ADD FUNCTION snowflake\.snowflake_nextval\(\)/,
	'the dump with --binary-upgrade has the members');
like($want->{'tables dumped with their rows'}, qr/snowflake\.snowflake_workers/,
	'a fresh install keeps the registry\'s rows in a dump');
like($fresh_rights, qr/BEFORE INSERT OR DELETE OR UPDATE ON snowflake\.snowflake_workers .* enabled A/,
	'a fresh install guards the worker id registry in apply too');
ok(length($fresh) > 1000, "a fresh install of $default has its objects");

my @versions = split /\n/, $node->safe_psql('postgres',
	"SELECT version FROM pg_available_extension_versions WHERE name = 'snowflake' ORDER BY version");
is_deeply([ grep { $_ ne $default } @versions ], \@released, 'every released version can be installed');

# every path to the default version, with a stop at any of the versions
# between
my @paths;
for my $v (grep { $_ ne $default } @versions)
{
	my $path = $node->safe_psql('postgres',
		"SELECT path FROM pg_extension_update_paths('snowflake') WHERE source = '$v' AND target = '$default'");
	my @between = split /--/, $path;
	@between = @between[ 1 .. $#between - 1 ];
	for my $mask (0 .. 2**@between - 1)
	{
		push @paths, [ $v, map { $between[$_] } grep { $mask & (1 << $_) } 0 .. $#between ];
	}
}
ok(scalar(@paths) >= 3, 'paths: ' . join(', ', map { join(' to ', @$_, $default) } @paths));

for my $p (@paths)
{
	my ($v, @stops) = @$p;
	my $name = join(' to ', @$p, $default);
	my $db = 'from_' . (join('_to_', @$p) =~ s/\W/_/gr);
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, "CREATE EXTENSION snowflake VERSION '$v'");
	$node->safe_psql($db, "ALTER EXTENSION snowflake UPDATE TO '$_'") for @stops;
	# the update's own search_path stays in it
	is($node->safe_psql($db, "SET search_path = public, pg_temp; ALTER EXTENSION snowflake UPDATE; SHOW search_path"),
		'public, pg_temp', "$name: the caller's search_path is kept");
	is($node->safe_psql($db, "SELECT extversion FROM pg_extension WHERE extname = 'snowflake'"),
		$default, "$name: at $default");
	my $got = extension_in($db);
	same_as_fresh($got->{$_}, $want->{$_}, "$name: $_ as a fresh install") for sort keys %$want;
	ok($node->safe_psql($db, 'SELECT snowflake_nextval() > 0'), "$name: generates");
}

$node->stop;
done_testing();
