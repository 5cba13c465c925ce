# snowflake-mesh run by a superuser against databases a hostile role owns:
# a table renamed to SQL text, a database search_path that puts the
# owner's functions before pg_catalog, the owner's publication and (with
# pg_create_subscription) subscription under the mesh's names, a view
# planted under a mesh table's name on one node, the schema snowflake or
# the mesh's publication in the owner's hands, and passwords, which must never
# reach the process list or the helper's output (also in URIs that
# libpq reads differently from a glance).  The owner, mallory, must
# gain nothing: rolsuper stays false and no role appears.  On PostgreSQL
# 15 the helper refuses to make a mesh, and its probe must not fall into
# the trap either.
use strict;
use warnings;
use FindBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use SnowflakeTest;

my $mesh_script = "$FindBin::RealBin/../../scripts/snowflake-mesh";
my $evil = q{x'||chr(34));CREATE/**/ROLE/**/pwn/**/SUPERUSER/**/LOGIN;--};
my $secret = 'Sekr3t-pw-42';

sub node
{
	my ($name, $worker) = @_;
	my $n = snowflake_node($name, worker_id => $worker, allows_streaming => 'logical',
		conf => "max_wal_senders = 10\nmax_replication_slots = 10\nwal_receiver_status_interval = 1\n");
	$n->start;
	$n->safe_psql('postgres', q{
		CREATE ROLE mallory LOGIN;
		CREATE DATABASE shop OWNER mallory});
	$n->safe_psql('shop', q{
		CREATE EXTENSION snowflake;
		SET ROLE mallory;
		CREATE TABLE items (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), v text)});
	return $n;
}

sub conn { return $_[0]->connstr . ' dbname=shop'; }

sub mesh
{
	my ($env, @args) = @_;
	my ($out, $err) = ('', '');
	local %ENV = (%ENV, %$env);
	IPC::Run::run([ $^X, $mesh_script, '--timeout', '120', @args ], '>', \$out, '2>', \$err);
	return ($? >> 8, $out, $err);
}

# what mallory does as owner of shop: functions named as pg_catalog's, in
# a schema searched first, that make mallory superuser when a superuser
# calls them; and the table renamed to SQL
sub trap
{
	my ($n) = @_;
	my @fns = ('current_setting(text)', 'quote_ident(text)', 'starts_with(text, text)',
		'to_regclass(text)', 'pg_is_in_recovery()', 'pg_current_wal_lsn()',
		'obj_description(oid, name)', 'btrim(text)');
	my $sql = "SET ROLE mallory;\nCREATE SCHEMA trap;\n";
	for my $f (@fns)
	{
		my ($name, $args) = $f =~ /^(\w+)\((.*)\)$/;
		my @types = split /,\s*/, $args;
		my $call = join ', ', map { '$' . $_ } 1 .. @types;
		my $ret = $name eq 'pg_is_in_recovery' ? 'boolean'
		  : $name eq 'pg_current_wal_lsn' ? 'pg_lsn'
		  : $name eq 'to_regclass' ? 'regclass'
		  : $name eq 'starts_with' ? 'boolean' : 'text';
		$sql .= "CREATE FUNCTION trap.$name($args) RETURNS $ret LANGUAGE plpgsql AS \$f\$
BEGIN
	BEGIN EXECUTE 'ALTER ROLE mallory SUPERUSER'; EXCEPTION WHEN OTHERS THEN NULL; END;
	RETURN pg_catalog.$name($call);
END \$f\$;\n";
	}
	$sql .= "ALTER DATABASE shop SET search_path = trap, public, pg_catalog;\n";
	$n->safe_psql('shop', $sql);
	return;
}

sub nothing_gained
{
	my ($what, @nodes) = @_;
	is(join(',', map { $_->safe_psql('postgres',
		"SELECT rolsuper::text || '/' || (SELECT count(*) FROM pg_roles WHERE rolname = 'pwn') FROM pg_roles WHERE rolname = 'mallory'") } @nodes),
		join(',', ('false/0') x @nodes), "$what: mallory is no superuser and no role was made, on every node");
	return;
}

my $n1 = node('sec1', 1);
if ($n1->pg_version->major < 16)
{
	trap($n1);
	my ($rc, $out, $err) = mesh({}, 'status', conn($n1));
	isnt($rc, 0, 'PostgreSQL 15: status refuses');
	like("$out$err", qr/runs PostgreSQL 15/, 'and says why');
	nothing_gained('PostgreSQL 15, status in a trapped database', $n1);
	$n1->stop;
	done_testing();
	exit;
}
my $n2 = node('sec2', 2);
my $n3 = node('sec3', 3);
my ($rc, $out, $err) = mesh({}, '--tables', 'items', 'create', conn($n1), conn($n2));
is($rc, 0, 'a mesh of two nodes in databases mallory owns') or diag($err);
$n1->safe_psql('shop', "INSERT INTO items (v) SELECT 'one' FROM generate_series(1, 10)");

# 1. the trap and the renamed table, then status and a join by a superuser
for my $n ($n1, $n2, $n3)
{
	trap($n);
	$n->safe_psql('shop', qq{SET ROLE mallory; ALTER TABLE items RENAME TO "${\ ($evil =~ s/"/""/gr)}"});
}
($rc, $out, $err) = mesh({}, 'status', conn($n1), conn($n2));
nothing_gained('status in trapped databases', $n1, $n2);
is($rc, 0, 'status still finds the mesh whole') or diag("$out\n$err");
# mallory's own objects under the mesh's names are not the mesh's, and
# block nothing: a publication snowflake_mesh on the node that joins (she
# owns its database), and, with pg_create_subscription, a subscription
# named as the one a member makes to it
$n3->safe_psql('shop', 'SET ROLE mallory; CREATE PUBLICATION snowflake_mesh');
$n1->safe_psql('postgres', 'GRANT pg_create_subscription TO mallory');
$n1->safe_psql('shop', q{SET ROLE mallory; CREATE SUBSCRIPTION snowflake_mesh_from_w3
	CONNECTION 'host=/nonexistent dbname=shop password=x' PUBLICATION snowflake_mesh WITH (connect = false)});
($rc, $out, $err) = mesh({}, 'join', conn($n3), conn($n1), conn($n2));
is($rc, 0, 'a join through a table named as SQL, a trapped search_path and mallory\'s objects under the mesh\'s names works')
  or diag("$out\n$err");
nothing_gained('join in trapped databases', $n1, $n2, $n3);
is($n3->safe_psql('shop', q{SELECT string_agg(pubname || ':' || pubowner::regrole, ',' ORDER BY pubname) FROM pg_publication}),
	'snowflake_mesh:mallory,snowflake_mesh_1:' . $n3->safe_psql('postgres', 'SELECT current_user'),
	'the joining node\'s publication of the mesh took another name beside mallory\'s');
is($n1->safe_psql('shop', q{SELECT string_agg(subname || ':' || subowner::regrole || ':' || subenabled, ',' ORDER BY subname)
	FROM pg_subscription WHERE subname LIKE '%w3%'}),
	'snowflake_mesh_from_w3:mallory:false,snowflake_mesh_from_w3_1:' . $n1->safe_psql('postgres', 'SELECT current_user') . ':true',
	'and so did worker 1\'s subscription to it; mallory\'s is as she made it');
($rc, $out, $err) = mesh({}, 'status', conn($n1), conn($n2), conn($n3));
is($rc, 0, 'status finds the mesh whole beside them') or diag("$out\n$err");
like($err, qr/warning: worker 1: snowflake_mesh_from_w3 is owned by role mallory, not a superuser: it is not the mesh's/,
	'and says that mallory\'s subscription is not the mesh\'s');
my $q = qq{SELECT count(*) = 10 FROM "${\ ($evil =~ s/"/""/gr)}"};
ok($n3->poll_query_until('shop', $q), 'the new node has the rows');

# 2. passwords: a role that logs in with one, through a password file
$n1->safe_psql('postgres', "CREATE ROLE meshop SUPERUSER LOGIN PASSWORD '$secret'");
my $hba = $n1->data_dir . '/pg_hba.conf';
my $text = slurp_file($hba);
open my $fh, '>', $hba or die;
print $fh "local all meshop scram-sha-256\n$text";
close $fh;
$n1->reload;
my $pgpass = $n1->basedir . '/pgpass';
open $fh, '>', $pgpass or die;
print $fh "*:*:*:meshop:$secret\n";
close $fh;
chmod 0600, $pgpass;
my $op = $n1->connstr . ' dbname=shop user=meshop';
my ($host, $port) = ($n1->host, $n1->port);

# the process list while the helper runs, sampled
my ($o, $e) = ('', '');
my $h;
{
	local $ENV{PGPASSFILE} = $pgpass;
	$h = IPC::Run::start([ $^X, $mesh_script, '--rows', 'status', $op, conn($n2), conn($n3) ], '>', \$o, '2>', \$e);
}
my ($samples, $seen_helper, $leaks) = (0, 0, 0);
while ($h->pumpable)
{
	my $ps = `ps -eo args`;
	$samples++;
	$seen_helper++ if $ps =~ /snowflake-mesh/;
	$leaks++ if index($ps, $secret) >= 0;
	$h->pump_nb;
	select(undef, undef, undef, 0.05);
}
$h->finish;
is($? >> 8, 0, 'status logs in with the password from PGPASSFILE') or diag("$o\n$e");
ok($seen_helper > 0, "the process list was sampled while the helper ran ($samples samples)");
is($leaks, 0, 'and never showed the password');

# connection strings that carry one are refused, and the password is not
# printed
for my $c ("postgresql://meshop:$secret\@/shop?host=$host&port=$port",
	"host=$host port=$port dbname=shop user=meshop password = '$secret'",
	"host=$host port=$port dbname=shop user=meshop password=$secret",
	# libpq ends the user part only at @ or /, and decodes parameter names
	"postgresql://meshop:x?$secret\@/shop?host=$host&port=$port",
	"postgresql:///shop?host=$host&port=$port&user=meshop&pass%77ord=$secret")
{
	($rc, $out, $err) = mesh({}, 'status', $c, conn($n2));
	isnt($rc, 0, 'a connection string with a password is refused');
	like($err, qr/carries a password/, 'with the reason');
	is(index("$out$err", $secret), -1, 'and without printing the password') or diag("$out\n$err");
}

# 3. what mallory may plant on one node for a superuser to run there: a
# view under a mesh table's name whose function makes her superuser
my $qi = '"' . ($evil =~ s/"/""/gr) . '"';
$n2->safe_psql('shop', qq{
	SET ROLE mallory;
	CREATE FUNCTION public.grab() RETURNS int LANGUAGE plpgsql AS \$f\$
	BEGIN
		BEGIN EXECUTE 'ALTER ROLE mallory SUPERUSER'; EXCEPTION WHEN OTHERS THEN NULL; END;
		RETURN 1;
	END \$f\$;
	ALTER TABLE public.$qi RENAME TO items_real;
	CREATE VIEW public.$qi AS SELECT id, v FROM public.items_real WHERE public.grab() = 1});
($rc, $out, $err) = mesh({}, '--rows', 'status', conn($n1), conn($n2), conn($n3));
isnt($rc, 0, 'status --rows refuses a view under a mesh table\'s name');
like($err, qr/is not a table/, 'and says why') or diag("$out\n$err");
nothing_gained('status --rows on a planted view', $n1, $n2, $n3);
$n2->safe_psql('shop', qq{SET ROLE mallory; DROP VIEW public.$qi; ALTER TABLE public.items_real RENAME TO $qi});

# a table whose owner's policies would hide rows from its owner: the
# helper could not see them all
$n2->safe_psql('shop', qq{SET ROLE mallory; ALTER TABLE public.$qi ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY});
($rc, $out, $err) = mesh({}, '--rows', 'status', conn($n1), conn($n2), conn($n3));
isnt($rc, 0, 'status --rows refuses a table that forces row level security');
like($err, qr/row level security/, 'and says why') or diag("$out\n$err");
$n2->safe_psql('shop', qq{SET ROLE mallory; ALTER TABLE public.$qi NO FORCE ROW LEVEL SECURITY, DISABLE ROW LEVEL SECURITY});

# the extension's schema in the hands of a role that is not a superuser
$n2->safe_psql('shop', 'ALTER SCHEMA snowflake OWNER TO mallory');
($rc, $out, $err) = mesh({}, 'status', conn($n1), conn($n2), conn($n3));
isnt($rc, 0, 'a node whose schema snowflake mallory owns is refused');
like("$out$err", qr/schema snowflake/, 'and the reason names the schema') or diag("$out\n$err");
$n2->safe_psql('shop', 'ALTER SCHEMA snowflake OWNER TO CURRENT_USER; GRANT CREATE ON SCHEMA snowflake TO mallory');
($rc, $out, $err) = mesh({}, 'status', conn($n1), conn($n2), conn($n3));
isnt($rc, 0, 'so is one where mallory may create in it');
$n2->safe_psql('shop', 'REVOKE CREATE ON SCHEMA snowflake FROM mallory');

# the mesh's publication in mallory's hands: she would choose what it
# publishes and write the lock that abort reads
$n2->safe_psql('shop', 'ALTER PUBLICATION snowflake_mesh OWNER TO mallory');
($rc, $out, $err) = mesh({}, 'status', conn($n1), conn($n2), conn($n3));
is($rc, 6, 'the mesh\'s publication given to mallory is no longer the mesh\'s: exit 6');
like("$out$err", qr/publication snowflake_mesh is owned by role mallory, not a superuser: it is not the mesh's/, 'and says why')
  or diag("$out\n$err");
$n2->safe_psql('shop', 'ALTER PUBLICATION snowflake_mesh OWNER TO CURRENT_USER');
($rc, $out, $err) = mesh({}, '--rows', 'status', conn($n1), conn($n2), conn($n3));
is($rc, 0, 'all put back, the mesh is whole again') or diag("$out\n$err");
nothing_gained('the end', $n1, $n2, $n3);

$_->stop for $n1, $n2, $n3;
done_testing();
