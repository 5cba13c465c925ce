# No way up: what a database owner, or a role that may create in a schema,
# tries against the extension, and what must hold whatever they do.  Each
# attack is followed by the command a superuser runs as README shows; the
# test checks that the attacker's rolsuper stays false, that no claim or
# column default lands anywhere but in the extension's own objects, and
# that the command either works or refuses clearly.
use strict;
use warnings;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SnowflakeTest;

my $node = snowflake_node('security', worker_id => 3);
start_faked($node, '+0');

# ROLE runs SQL in DB; returns (ok, stdout, stderr).  Errors carry their
# SQLSTATE.
sub as_role
{
	my ($role, $db, $sql) = @_;
	my ($ret, $out, $err) = $node->psql($db, "\\set VERBOSITY verbose\n$sql",
		extra_params => [ '-U', $role ], on_error_stop => 1);
	return ($ret == 0, $out, $err);
}

sub super { return $node->safe_psql(@_); }

sub rolsuper
{
	my ($role) = @_;
	return super('postgres', "SELECT rolsuper FROM pg_roles WHERE rolname = '$role'");
}

# Functions an attacker plants under the extension's names: run by a
# superuser, each makes its owner superuser, and says it ran.
sub payload
{
	my ($schema, $name, $args, $type, $value) = @_;
	return qq{
CREATE FUNCTION $schema.$name($args) RETURNS $type LANGUAGE plpgsql AS \$f\$
BEGIN
	BEGIN
		EXECUTE format('ALTER ROLE %I SUPERUSER', (SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = '$schema'));
	EXCEPTION WHEN OTHERS THEN NULL;
	END;
	RETURN $value;
END \$f\$;};
}

my $su = super('postgres', 'SELECT current_user');
super('postgres', q{
	CREATE ROLE bob LOGIN;
	CREATE ROLE carol LOGIN;
	CREATE DATABASE victim OWNER bob;
});

# --- what held in 1.1 and must stay so ---------------------------------

is(super('postgres', "SELECT bool_or(trusted) FROM pg_available_extension_versions WHERE name = 'snowflake'"),
	'f', 'no version of the extension is trusted');
my ($ok, $out, $err) = as_role('bob', 'victim', 'CREATE EXTENSION snowflake');
ok(!$ok && $err =~ /42501/, 'a database owner cannot create it');

super('victim', 'CREATE EXTENSION snowflake');
is(super('victim', "SELECT extnamespace::regnamespace FROM pg_extension WHERE extname = 'snowflake'"),
	'snowflake', 'it lives in the schema snowflake');
is(super('victim', "SELECT rolsuper FROM pg_namespace n JOIN pg_roles r ON r.oid = n.nspowner WHERE nspname = 'snowflake'"),
	't', 'which a superuser owns');
is(super('victim', q{
	SELECT count(*) FROM pg_namespace n, aclexplode(n.nspacl) a
	LEFT JOIN pg_roles r ON r.oid = a.grantee
	WHERE n.nspname = 'snowflake' AND a.privilege_type = 'CREATE' AND NOT coalesce(r.rolsuper, false)}),
	'0', 'and where no other role may create');

my $members = q{
	FROM pg_depend d JOIN pg_proc p ON p.oid = d.objid
	WHERE d.classid = 'pg_proc'::regclass AND d.refclassid = 'pg_extension'::regclass
	  AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'snowflake') AND d.deptype = 'e'};
is(super('victim', "SELECT string_agg(p.pronamespace::regnamespace || '.' || p.proname, ', ' ORDER BY p.proname) $members AND p.prosecdef"),
	'snowflake.snowflake_narrow_defaults_check, snowflake.snowflake_registry_lease',
	'two SECURITY DEFINER functions: the event trigger\'s, and the registry\'s lease (for the role an admin grants it to)');
is(super('victim', "SELECT string_agg(p.proname, ', ' ORDER BY p.proname) $members AND p.prosecdef AND NOT EXISTS
	(SELECT FROM pg_roles r WHERE r.oid = p.proowner AND r.rolsuper)"),
	'', '... which a superuser owns');
is(super('victim', "SELECT string_agg(p.proname, ', ' ORDER BY p.proname) $members AND p.prosecdef
	AND NOT ('search_path=pg_catalog, pg_temp' = ANY (coalesce(p.proconfig, '{}')))"),
	'', '... each with its search_path pinned');
is(super('victim', q{SELECT has_function_privilege('public',
	'snowflake.snowflake_registry_lease(bigint, bigint, text, integer, integer)', 'EXECUTE')}),
	'f', '... and the lease not executable by PUBLIC');

# That function runs as its owner at the end of every role's CREATE or
# ALTER TABLE: a function a role puts before pg_catalog in its search_path
# is never called by it (it would run as the superuser).
($ok, $out, $err) = as_role('bob', 'victim', q{
	CREATE SCHEMA bobs;
	CREATE FUNCTION bobs.age(xid) RETURNS integer LANGUAGE plpgsql
		AS $$BEGIN RAISE EXCEPTION 'bobs.age run by %', current_user; END$$;
	CREATE FUNCTION bobs.format_type(oid, integer) RETURNS text LANGUAGE plpgsql
		AS $$BEGIN RAISE EXCEPTION 'bobs.format_type run by %', current_user; END$$;
	SET search_path = bobs, pg_catalog;
	SELECT age('1'::xid);});
like($err, qr/bobs.age run by bob/, 'a role can shadow age() for itself');
($ok, $out, $err) = as_role('bob', 'victim', q{
	SET search_path = bobs, pg_catalog;
	CREATE TABLE bobs.t (id bigint DEFAULT snowflake.snowflake_nextval(), n integer);
	ALTER TABLE bobs.t ALTER COLUMN n SET DEFAULT snowflake.snowflake_nextval();});
like($err, qr/too narrow for snowflake IDs/, 'the trigger ran');
unlike($err, qr/run by/, '... and called none of that role\'s functions');
as_role('bob', 'victim', 'DROP SCHEMA bobs CASCADE');
is(super('victim', "SELECT count(*) $members AND p.prolang = (SELECT oid FROM pg_language WHERE lanname = 'plpgsql') AND 'search_path=pg_catalog, pg_temp' = ANY (p.proconfig)"),
	super('victim', "SELECT count(*) $members AND p.prolang = (SELECT oid FROM pg_language WHERE lanname = 'plpgsql')"),
	'every plpgsql function pins search_path');
ok(super('victim', "SELECT count(*) $members AND p.prolang = (SELECT oid FROM pg_language WHERE lanname = 'plpgsql')") >= 2,
	'(there are plpgsql functions)');

my @settings = split /\n/, super('postgres',
	"SELECT name FROM pg_settings WHERE name LIKE 'snowflake.%' ORDER BY name");
ok(@settings >= 10, scalar(@settings) . ' snowflake.* settings');
my $changed = 0;
for my $s (@settings)
{
	for my $sql ("SET $s = 1", "SELECT set_config('$s', '1', false)",
		"ALTER ROLE bob SET $s = 1", "ALTER DATABASE victim SET $s = 1")
	{
		my ($k) = as_role('bob', 'victim', $sql);
		$changed++ if $k;
	}
	# the statement on the command line: a server that refuses the
	# connection must not leave a write to psql's input failing
	local $ENV{PGOPTIONS} = "-c $s=1";
	my ($o, $e);
	$changed++ if IPC::Run::run([ 'psql', '-X', '-d', $node->connstr('victim'), '-U', 'bob', '-c', 'SELECT 1' ],
		'<', \undef, '>', \$o, '2>', \$e);
}
is($changed, 0, 'no snowflake.* setting changes for a plain role: SET, set_config, ALTER ROLE/DATABASE, PGOPTIONS');

($ok, $out, $err) = as_role('bob', 'victim', 'SELECT * FROM snowflake.snowflake_workers');
ok(!$ok && $err =~ /42501/, 'snowflake_workers is closed to plain roles');
($ok, $out, $err) = as_role('bob', 'victim', 'SELECT snowflake.snowflake_repair_state(0)');
ok(!$ok && $err =~ /42501/, 'snowflake_repair_state is revoked');
for my $f ('snowflake.state', 'snowflake.decimal')
{
	my $mode = (stat($node->data_dir . "/$f"))[2] & 07777;
	is(sprintf('%04o', $mode), '0600', "$f is 0600");
}
super('postgres', 'GRANT pg_signal_backend TO bob');
my $keeper = super('postgres', "SELECT pid FROM pg_stat_activity WHERE backend_type = 'snowflake keeper'");
ok($keeper > 0, 'the keeper runs');
($ok, $out, $err) = as_role('bob', 'postgres', "SELECT pg_terminate_backend($keeper)");
ok(!$ok && $err =~ /42501/, 'pg_signal_backend cannot terminate the keeper');
is(super('postgres', "SELECT pid FROM pg_stat_activity WHERE backend_type = 'snowflake keeper'"),
	$keeper, 'which still runs');
super('postgres', 'REVOKE pg_signal_backend FROM bob');

# --- 1. a schema swap under the plpgsql functions -----------------------

($ok, $out, $err) = as_role('bob', 'victim', 'ALTER SCHEMA snowflake RENAME TO snowflake_old');
ok(!$ok && $err =~ /42501/, 'the database owner cannot rename the extension\'s schema');
($ok, $out, $err) = as_role('bob', 'victim', 'DROP SCHEMA snowflake CASCADE');
ok(!$ok && $err =~ /42501/, 'nor drop it');
($ok, $out, $err) = as_role('bob', 'victim', join "\n",
	'ALTER SCHEMA public RENAME TO public_old;',
	'CREATE SCHEMA public;',
	'CREATE TABLE public.snowflake_workers (worker_id integer, system_identifier bigint, node_name text, claimed_at timestamptz);',
	payload('public', 'snowflake_worker_id', '', 'integer', 3),
	payload('public', 'snowflake_nextval', '', 'bigint', 42),
	payload('public', 'snowflake_from_timestamp', 'timestamptz', 'bigint', '1'),
	'ALTER DATABASE victim SET search_path = public, snowflake;');
ok($ok, 'the database owner replaced public with look-alikes and set a search_path') or diag($err);

super('victim', 'CREATE SCHEMA app; CREATE TABLE app.t (id bigserial PRIMARY KEY, v int); INSERT INTO app.t (v) VALUES (1)');
is(super('victim', "SELECT (snowflake.snowflake_claim_worker('n1')).worker_id"), '3',
	'a superuser claims the worker id');
like(super('victim', "SELECT snowflake.snowflake_convert_column('app.t', 'id')"),
	qr/now defaults to snowflake\.snowflake_nextval/, 'and converts a column');
is(rolsuper('bob'), 'f', 'the database owner did not become superuser');
is(super('victim', 'SELECT count(*) FROM snowflake.snowflake_workers WHERE worker_id = 3'), '1',
	'the claim is in the extension\'s table');
is(super('victim', 'SELECT count(*) FROM public.snowflake_workers'), '0', 'not in the look-alike');
is(super('victim', q{
	SELECT refobjid::regprocedure FROM pg_depend
	WHERE classid = 'pg_attrdef'::regclass AND refclassid = 'pg_proc'::regclass
	  AND objid = (SELECT oid FROM pg_attrdef WHERE adrelid = 'app.t'::regclass)}),
	'snowflake.snowflake_nextval()', 'the default calls the extension\'s snowflake_nextval()');
ok(super('victim', 'INSERT INTO app.t (v) VALUES (2) RETURNING id') > 1_000_000,
	'which makes a snowflake ID');

# --- 2. snowflake_convert_column takes only tables the caller owns ------

super('victim', q{
	CREATE FOREIGN DATA WRAPPER dummy;
	CREATE SERVER nowhere FOREIGN DATA WRAPPER dummy;
	CREATE TABLE app.p (id bigserial PRIMARY KEY) PARTITION BY RANGE (id);
	CREATE TABLE app.p1 PARTITION OF app.p FOR VALUES FROM (1) TO (1000000);
	INSERT INTO app.p DEFAULT VALUES;
});
($ok, $out, $err) = as_role('bob', 'victim', join "\n",
	'CREATE SCHEMA bobs;',
	'GRANT USAGE ON SCHEMA bobs TO PUBLIC;',
	payload('bobs', 'trap', '', 'bigint', 1),
	'CREATE SEQUENCE bobs.s;',
	'CREATE VIEW bobs.v AS SELECT bobs.trap() AS id;',
	q{ALTER VIEW bobs.v ALTER COLUMN id SET DEFAULT nextval('bobs.s');},
	'CREATE MATERIALIZED VIEW bobs.mv AS SELECT 1::bigint AS id;',
	'CREATE TABLE bobs.bt (id bigserial PRIMARY KEY);');
ok($ok, 'the database owner made a trap view, a matview, a sequence and a table') or diag($err);
super('victim', q{CREATE FOREIGN TABLE app.ft (id bigint DEFAULT nextval('bobs.s')) SERVER nowhere});
for my $case ([ 'bobs.v', 'id', 'a view' ], [ 'bobs.mv', 'id', 'a materialized view' ],
	[ 'bobs.s', 'last_value', 'a sequence' ], [ 'app.ft', 'id', 'a foreign table' ])
{
	my ($rel, $col, $what) = @$case;
	($ok, $out, $err) = as_role($su, 'victim', "SELECT snowflake.snowflake_convert_column('$rel', '$col')");
	ok(!$ok && $err =~ /42809: \Q$rel\E is not a table/ && $err =~ /It is \Q$what\E/,
		"$what is refused (42809)") or diag($err);
}
is(rolsuper('bob'), 'f', 'the trap view never ran as superuser');
is(super('victim', q{SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef WHERE adrelid = 'bobs.v'::regclass}),
	q{nextval('bobs.s'::regclass)}, 'and kept its default');
($ok, $out, $err) = as_role('carol', 'victim', "SELECT snowflake.snowflake_convert_column('bobs.bt', 'id')");
ok(!$ok && $err =~ /42501: must be owner of table bobs.bt/, 'another role\'s table is refused (42501)');
($ok, $out, $err) = as_role('bob', 'victim', "SELECT snowflake.snowflake_convert_column('bobs.bt', 'id')");
ok($ok && $out =~ /now defaults to snowflake\.snowflake_nextval/, 'its owner converts it') or diag($err);
like(super('victim', "SELECT snowflake.snowflake_convert_column('app.p', 'id')"),
	qr/now defaults to snowflake\.snowflake_nextval/, 'a partitioned table converts');
is(rolsuper('bob'), 'f', 'still no superuser');

# --- 8. a role that may create in a schema ------------------------------

($ok, $out, $err) = as_role('bob', 'victim',
	'CREATE FUNCTION snowflake.snowflake_claim_worker() RETURNS integer LANGUAGE sql AS $$SELECT 1$$');
ok(!$ok && $err =~ /42501/, 'the database owner cannot create in the extension\'s schema');
is(super('victim', 'SELECT (snowflake.snowflake_claim_worker()).worker_id'), '3',
	'the zero-argument call works');

# A schema made beforehand by another role, or open to others, is refused.
super('postgres', 'CREATE DATABASE trap1 OWNER bob; CREATE DATABASE trap2');
($ok, $out, $err) = as_role('bob', 'trap1', join "\n", 'CREATE SCHEMA snowflake;',
	payload('snowflake', 'snowflake_claim_worker', '', 'integer', 1));
ok($ok, 'a database owner made the schema snowflake first') or diag($err);
($ok, $out, $err) = as_role($su, 'trap1', 'CREATE EXTENSION snowflake');
ok(!$ok && $err =~ /42501: schema "snowflake" is not safe/ && $err =~ /bob owns it/ && $err =~ /HINT:  Drop or rename/,
	'CREATE EXTENSION refuses it, naming the owner') or diag($err);
is(super('trap1', "SELECT count(*) FROM pg_extension WHERE extname = 'snowflake'"), '0', 'nothing installed');
super('trap2', 'CREATE SCHEMA snowflake; GRANT CREATE ON SCHEMA snowflake TO carol');
($ok, $out, $err) = as_role($su, 'trap2', 'CREATE EXTENSION snowflake');
ok(!$ok && $err =~ /carol may create in it/, 'a schema where another role may create is refused') or diag($err);
super('trap2', 'REVOKE CREATE ON SCHEMA snowflake FROM carol; GRANT CREATE ON SCHEMA snowflake TO PUBLIC');
($ok, $out, $err) = as_role($su, 'trap2', 'CREATE EXTENSION snowflake');
ok(!$ok && $err =~ /PUBLIC may create in it/, 'also when PUBLIC may') or diag($err);
super('trap2', 'REVOKE CREATE ON SCHEMA snowflake FROM PUBLIC; CREATE EXTENSION snowflake');
is(super('trap2', 'SELECT snowflake.snowflake_nextval() > 0'), 't', 'a superuser\'s schema is used');
is(rolsuper('bob'), 'f', 'bob is still no superuser');

# An install of 1.1 in public, where the database owner may create, updates
# into the schema snowflake; look-alikes left in public stay out of it.
super('postgres', 'CREATE DATABASE old OWNER bob');
super('old', "CREATE EXTENSION snowflake VERSION '1.1'");
is(super('old', "SELECT extnamespace::regnamespace FROM pg_extension WHERE extname = 'snowflake'"),
	'public', '1.1 lives in public');
super('old', 'CREATE TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_nextval())');
($ok, $out, $err) = as_role('bob', 'old',
	payload('public', 'snowflake_claim_worker', '', 'integer', 1));
ok($ok, 'the database owner planted a zero-argument snowflake_claim_worker() in public') or diag($err);
super('old', 'ALTER EXTENSION snowflake UPDATE');
is(super('old', "SELECT extnamespace::regnamespace || ' ' || extversion FROM pg_extension WHERE extname = 'snowflake'"),
	'snowflake 1.2', 'the update moved it into snowflake');
is(super('old', "SELECT count(*) FROM pg_proc WHERE pronamespace = 'public'::regnamespace AND proname LIKE 'snowflake%'"),
	'1', 'only the look-alike is left in public');
is(super('old', 'SELECT (snowflake.snowflake_claim_worker()).worker_id'), '3', 'the claim works');
ok(super('old', 'INSERT INTO t DEFAULT VALUES RETURNING id') > 1_000_000, 'the old default follows the function');
is(rolsuper('bob'), 'f', 'bob is still no superuser');

# A 1.1 install is not updated into a schema another role made.
super('postgres', 'CREATE DATABASE old2 OWNER bob');
super('old2', "CREATE EXTENSION snowflake VERSION '1.1'");
as_role('bob', 'old2', 'CREATE SCHEMA snowflake');
($ok, $out, $err) = as_role($su, 'old2', 'ALTER EXTENSION snowflake UPDATE');
ok(!$ok && $err =~ /42501: schema "snowflake" is not safe/, 'the update refuses a schema the database owner made')
  or diag($err);
is(super('old2', "SELECT extversion FROM pg_extension WHERE extname = 'snowflake'"), '1.1', 'and changes nothing');

# --- 6. dropping public leaves the extension alone ----------------------

($ok, $out, $err) = as_role('bob', 'victim', 'DROP SCHEMA public CASCADE; DROP SCHEMA public_old CASCADE');
ok($ok, 'the database owner dropped public and the old public') or diag($err);
is(super('victim', "SELECT count(*) FROM pg_extension WHERE extname = 'snowflake'"), '1', 'the extension stays');
is(super('victim', 'SELECT count(*) FROM snowflake.snowflake_workers'), '1', 'with its claims');
ok(super('victim', 'INSERT INTO app.t (v) VALUES (3) RETURNING id') > 1_000_000,
	'and the defaults that call it');

# --- 7. how far a role can push the node ahead of the clock -------------

($ok, $out, $err) = as_role($su, 'postgres', "ALTER SYSTEM SET snowflake.max_run_ahead_ms = '25h'");
ok(!$ok && $err =~ /outside the valid range/, 'no bound beyond one day is accepted');
super('postgres', "ALTER SYSTEM SET snowflake.max_run_ahead_ms = -1; SELECT pg_reload_conf()");
$node->poll_query_until('postgres', "SELECT current_setting('snowflake.max_run_ahead_ms') = '-1'");
my $before = super('victim', 'SELECT snowflake.snowflake_nextval()');
set_clock_offset($node, '-2d');
($ok, $out, $err) = as_role('carol', 'victim', 'SELECT snowflake.snowflake_nextval()');
ok(!$ok && $err =~ /max_run_ahead_ms/, '-1 issues no ID more than a day ahead of the clock') or diag($err);
set_clock_offset($node, '-1h');
($ok, $out, $err) = as_role('carol', 'victim', 'SELECT snowflake.snowflake_nextval()');
ok($ok && $out > $before, 'but rides out a clock an hour behind') or diag($err);
set_clock_offset($node, '+0');
super('postgres', "ALTER SYSTEM RESET snowflake.max_run_ahead_ms; SELECT pg_reload_conf()");

# --- 9. DecimalId generator ids are spent only by roles granted it -------

($ok, $out, $err) = as_role('carol', 'victim', 'SELECT snowflake.decimal_id_nextval()');
ok(!$ok && $err =~ /42501: permission denied for function decimal_id_nextval/,
	'a plain role cannot spend DecimalId generator ids');
super('victim', 'GRANT EXECUTE ON FUNCTION snowflake.decimal_id_nextval() TO carol');
($ok, $out, $err) = as_role('carol', 'victim', 'SELECT snowflake.decimal_id_nextval()');
ok($ok && $out > 0, 'a role granted it can') or diag($err);
is(super('old', "SELECT has_function_privilege('carol', 'snowflake.decimal_id_nextval()', 'EXECUTE')"),
	'f', 'the update from 1.1 revokes it too');

is(rolsuper('bob') . rolsuper('carol'), 'ff', 'in the end, neither role is superuser');


# --- a superuser's schema that holds another role's object --------------
# A schema snowflake owned by a superuser, where carol could create once:
# her overload, taken for untyped literals, would run as the superuser
# converting a table.  The install refuses the schema, by its contents.
super('postgres', 'CREATE DATABASE planted');
super('planted', q{
	CREATE SCHEMA snowflake;
	GRANT CREATE, USAGE ON SCHEMA snowflake TO carol;
});
($ok, $out, $err) = as_role('carol', 'planted',
	payload('snowflake', 'snowflake_convert_column', 'tbl text, col text', 'text', "'planted'"));
ok($ok, 'carol planted an overload while she could create there') or diag($err);
super('planted', 'REVOKE CREATE ON SCHEMA snowflake FROM carol');
($ok, $out, $err) = as_role($su, 'planted', 'CREATE EXTENSION snowflake');
ok(!$ok && $err =~ /42501/ && $err =~ /holds objects that are not the extension's/,
	'CREATE EXTENSION refuses a schema that holds another role\'s object') or diag($err);
is(super('planted', "SELECT count(*) FROM pg_extension WHERE extname = 'snowflake'"), '0',
	'and leaves nothing behind');
is(rolsuper('carol'), 'f', 'carol is not superuser');

$node->stop;
done_testing();
