# What the predefined roles of PostgreSQL 15 to 19 can do to the extension.
# For every predefined role the server ships (the database's owner stands
# for pg_database_owner), a role granted it tries every way to change the
# worker id registry, to call the functions kept for superusers, to signal
# the keeper, and the maintenance its role allows, and in a mesh (16 and
# later) to change the helper's publication, subscriptions and slots. Each
# attempt must be refused, or allowed as docs/security.md's table says, and
# the registry, the node and the mesh must come out as they were.  Then what
# a role reaches on purpose: a dump made by a member of pg_read_all_data
# holds the claims; a subscription made by a member of
# pg_create_subscription, from a publisher it controls, applies no change to
# the claims; a role holding a lock on pg_database (pg_maintain, 17 and
# later) does not stop the keeper.
use strict;
use warnings;
use FindBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes ();
use SnowflakeTest;

my $mesh_script = "$FindBin::RealBin/../../scripts/snowflake-mesh";

sub node
{
	my ($name, $worker) = @_;
	my $n = snowflake_node($name, worker_id => $worker, allows_streaming => 'logical',
		conf => "max_wal_senders = 10\nmax_replication_slots = 10\n"
		  . "max_logical_replication_workers = 8\nmax_worker_processes = 16\n"
		  . "wal_receiver_status_interval = 1\nwal_retrieve_retry_interval = '200ms'\n");
	$n->start;
	$n->safe_psql('postgres', 'CREATE ROLE dbo LOGIN; CREATE DATABASE app OWNER dbo');
	$n->safe_psql('app', q{
		CREATE EXTENSION snowflake;
		CREATE TABLE items (id bigint PRIMARY KEY DEFAULT snowflake.snowflake_nextval(), v text)});
	return $n;
}

my $node = node('roles', 1);
my $version = $node->safe_psql('postgres', 'SHOW server_version_num');
my $su = $node->safe_psql('postgres', 'SELECT current_user');

sub super { return $node->safe_psql('app', @_); }

# the roles each version ships
my @expected = qw(pg_checkpoint pg_database_owner pg_execute_server_program pg_monitor
  pg_read_all_data pg_read_all_settings pg_read_all_stats pg_read_server_files
  pg_signal_backend pg_stat_scan_tables pg_write_all_data pg_write_server_files);
push @expected, qw(pg_create_subscription pg_use_reserved_connections) if $version >= 160000;
push @expected, 'pg_maintain' if $version >= 170000;
push @expected, 'pg_signal_autovacuum_worker' if $version >= 180000;
my @roles = split /\n/, super(q{SELECT rolname FROM pg_roles WHERE rolname ~ '^pg_' ORDER BY 1});
is(join(' ', @roles), join(' ', sort @expected),
	'the predefined roles are those docs/security.md lists for ' . int($version / 10000));

# PostgreSQL documents these as able to become superuser: nothing of the
# extension is out of their reach, and docs/security.md says so
my %superuser_equivalent = map { $_ => 1 }
  qw(pg_execute_server_program pg_read_server_files pg_write_server_files);

# --- a mesh of two nodes, on 16 and later -------------------------------

my $other;
my $mesh = $version >= 160000;
if ($mesh)
{
	$other = node('other', 2);
	my ($out, $err) = ('', '');
	IPC::Run::run([ $^X, $mesh_script, '--timeout', '120', '--tables', 'items', 'create',
		$node->connstr('app'), $other->connstr('app') ], '>', \$out, '2>', \$err);
	is($? >> 8, 0, 'a mesh of two nodes') or diag("stdout: $out\nstderr: $err");
}
else
{
	super(q{SELECT snowflake.snowflake_claim_worker()});
}

my $registry = q{SELECT string_agg(format('%s|%s|%s|%s', worker_id, system_identifier, node_name, claimed_at),
	';' ORDER BY worker_id) FROM snowflake.snowflake_workers};

# another system's claim, made by a superuser: it reaches the other node
super(q{INSERT INTO snowflake.snowflake_workers VALUES (9, 12345, 'n9', '2026-01-01 00:00+00')});
super(q{UPDATE snowflake.snowflake_workers SET node_name = 'nine' WHERE worker_id = 9});
if ($mesh)
{
	ok($other->poll_query_until('app',
		q{SELECT node_name = 'nine' FROM snowflake.snowflake_workers WHERE worker_id = 9}),
		'a superuser\'s insert and update of a claim reach the other node through the mesh');
}
my $claims = super($registry);
like($claims, qr/^1\|\d+\|[^;]*\|[^;]+;/, 'the node claimed its worker id');

# --- the attempts -------------------------------------------------------

my $copy_file = $node->basedir . '/claims.tsv';
open my $fh, '>', $copy_file or die "cannot write $copy_file: $!";
print $fh "7\t0\tcopied\t2026-01-01 00:00+00\n";
close $fh;

# name => SQL; KEEPER, WALSENDER and APPLY are pids, read before each role
my @attempts = (
	[ replication_role => 'SET session_replication_role = replica' ],
	[ select => 'SELECT count(*) FROM snowflake.snowflake_workers' ],
	[ update => q{UPDATE snowflake.snowflake_workers SET system_identifier = 0, node_name = 'x'} ],
	[ delete => 'DELETE FROM snowflake.snowflake_workers' ],
	[ insert => q{INSERT INTO snowflake.snowflake_workers VALUES (7, 0, 'x', now())} ],
	[ upsert => q{INSERT INTO snowflake.snowflake_workers VALUES (1, 0, 'x', now())
		ON CONFLICT (worker_id) DO UPDATE SET system_identifier = 0} ],
	[ merge => q{MERGE INTO snowflake.snowflake_workers w USING (VALUES (1)) v(k) ON true
		WHEN MATCHED THEN DELETE} ],
	[ copy => "\\copy snowflake.snowflake_workers FROM '$copy_file'" ],
	[ truncate => 'TRUNCATE snowflake.snowflake_workers' ],
	[ claim => q{SELECT snowflake.snowflake_claim_worker('x')} ],
	[ disable_trigger => 'ALTER TABLE snowflake.snowflake_workers DISABLE TRIGGER snowflake_workers_guard' ],
	[ create_trigger => 'CREATE TRIGGER t BEFORE INSERT ON snowflake.snowflake_workers
		FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger()' ],
	[ row_security => 'ALTER TABLE snowflake.snowflake_workers ENABLE ROW LEVEL SECURITY' ],
	[ policy => 'CREATE POLICY p ON snowflake.snowflake_workers USING (false)' ],
	[ owner => 'ALTER TABLE snowflake.snowflake_workers OWNER TO CURRENT_USER' ],
	[ grant => 'GRANT SELECT ON snowflake.snowflake_workers TO PUBLIC' ],
	[ comment => q{COMMENT ON TABLE snowflake.snowflake_workers IS 'x'} ],
	[ drop_table => 'DROP TABLE snowflake.snowflake_workers' ],
	[ drop_extension => 'DROP EXTENSION snowflake' ],
	[ alter_system => 'ALTER SYSTEM SET snowflake.worker_id = 9' ],
	[ repair => 'SELECT snowflake.snowflake_repair_state(0)' ],
	[ confirm => 'SELECT snowflake.snowflake_confirm_node(0)' ],
	[ identity_confirm => 'SELECT snowflake.snowflake_identity_confirm(0, NULL, NULL)' ],
	[ identity_installed => 'SELECT snowflake.snowflake_identity_installed()' ],
	[ claim_seen => 'SELECT snowflake.snowflake_identity_claim_seen(1, 0)' ],
	[ terminate_keeper => 'SELECT pg_terminate_backend(KEEPER)' ],
	[ cancel_keeper => 'SELECT pg_cancel_backend(KEEPER)' ],
	[ checkpoint => 'CHECKPOINT' ],
	[ lock => "BEGIN;\nLOCK TABLE snowflake.snowflake_workers IN ACCESS EXCLUSIVE MODE;\nCOMMIT;" ],
	[ vacuum_full => 'VACUUM (FULL) snowflake.snowflake_workers' ],
	[ analyze => 'ANALYZE snowflake.snowflake_workers' ],
	[ cluster => 'CLUSTER snowflake.snowflake_workers USING snowflake_workers_pkey' ],
	[ reindex => 'REINDEX TABLE snowflake.snowflake_workers' ]);
push @attempts, (
	[ subconninfo => 'SELECT subconninfo FROM pg_subscription' ],
	[ sub_disable => 'ALTER SUBSCRIPTION snowflake_mesh_from_w2 DISABLE' ],
	[ sub_drop => 'DROP SUBSCRIPTION snowflake_mesh_from_w2' ],
	[ pub_change => q{ALTER PUBLICATION snowflake_mesh SET (publish = 'insert')} ],
	[ pub_lock => q{COMMENT ON PUBLICATION snowflake_mesh IS 'snowflake-mesh lock: x'} ],
	[ pub_drop => 'DROP PUBLICATION snowflake_mesh' ],
	[ slot_drop => q{SELECT pg_drop_replication_slot('snowflake_mesh_w1_to_w2')} ],
	[ origin_advance => q{SELECT pg_replication_origin_advance(
		(SELECT 'pg_' || oid FROM pg_subscription WHERE subname = 'snowflake_mesh_from_w2'), '0/1')} ],
	[ terminate_walsender => 'SELECT pg_terminate_backend(WALSENDER)' ],
	[ cancel_walsender => 'SELECT pg_cancel_backend(WALSENDER)' ],
	[ terminate_apply => 'SELECT pg_terminate_backend(APPLY)' ],
	[ cancel_apply => 'SELECT pg_cancel_backend(APPLY)' ]) if $mesh;

# what each role may do of the above, by design; everything else is refused
my %allowed = (
	pg_read_all_data => [qw(select claim subconninfo)],
	pg_write_all_data => [qw(lock)],
	pg_maintain => [qw(lock vacuum_full analyze cluster reindex)],
	pg_checkpoint => [qw(checkpoint)],
	# VACUUM and ANALYZE of every table of its database
	pg_database_owner => [qw(vacuum_full analyze)],
	# a role a superuser granted the write privileges on the table
	granted => [qw(lock)]);

# the pids the attempts aim at, and everything that must not change
sub pids
{
	my %p = (KEEPER => super(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'snowflake keeper'}));
	if ($mesh)
	{
		$p{APPLY} = super(q{SELECT pid FROM pg_stat_subscription WHERE subname = 'snowflake_mesh_from_w2'
			AND relid IS NULL});
		$p{WALSENDER} = super(q{SELECT pid FROM pg_stat_replication WHERE application_name = 'snowflake_mesh_from_w1'});
	}
	return \%p;
}

sub state
{
	my ($p) = @_;
	my $s = join "\n", super($registry), super(q{
		SELECT string_agg(format('%s:%s', t.tgname, t.tgenabled), ',' ORDER BY t.tgname) || ' ' ||
			   c.relowner::regrole::text || ' ' || c.relrowsecurity || ' ' || coalesce(c.relacl::text, '') || ' ' ||
			   coalesce(obj_description(c.oid, 'pg_class'), '') || ' ' ||
			   (SELECT count(*) FROM pg_index i WHERE i.indrelid = c.oid AND i.indisvalid)
		FROM pg_class c JOIN pg_trigger t ON t.tgrelid = c.oid
		WHERE c.oid = 'snowflake.snowflake_workers'::regclass GROUP BY c.oid}),
	  super(q{SELECT string_agg(extname || ' ' || extversion, ',') FROM pg_extension WHERE extname = 'snowflake'}),
	  super('SELECT snowflake.snowflake_worker_id()'),
	  join(',', map { "$_=$p->{$_}" } sort keys %$p);
	$s .= "\n" . join "\n",
	  super(q{SELECT string_agg(format('%s:%s', subname, subenabled), ',' ORDER BY subname) FROM pg_subscription}),
	  super(q{SELECT string_agg(slot_name, ',' ORDER BY slot_name) FROM pg_replication_slots}),
	  super(q{SELECT concat_ws(' ', pubname, pubinsert, pubupdate, pubdelete, pubtruncate,
			obj_description(oid, 'pg_publication')) FROM pg_publication})
	  if $mesh;
	return $s;
}

# run every attempt as ROLE in one session; returns name => 'allowed',
# 'refused' (42501, as an error or a warning that skips) or the error
sub attempt
{
	my ($role, $p) = @_;
	my $script = "\\set VERBOSITY verbose\n";
	for my $a (@attempts)
	{
		my ($name, $sql) = @$a;
		$sql =~ s/\b(KEEPER|WALSENDER|APPLY)\b/$p->{$1}/g;
		$script .= "\\warn ==$name==\n$sql;\n";
	}
	my ($ret, $out, $err) = $node->psql('app', $script, extra_params => [ '-U', $role ],
		on_error_stop => 0);
	my %result;
	my @parts = split /^==(\w+)==\n/m, $err;
	shift @parts;
	while (my ($name, $text) = splice @parts, 0, 2)
	{
		# VACUUM and ANALYZE skip a table with a warning; GRANT without
		# the grant option warns that it granted nothing
		$result{$name} =
			$text =~ /(?:ERROR|WARNING):  42501:/ ? 'refused'
		  : $text =~ /WARNING:  01000: (?:skipping|permission denied)/ ? 'refused'
		  : $text =~ /WARNING:  01007: no privileges were granted/ ? 'refused'
		  : $text =~ /((?:ERROR|WARNING):.*)$/m ? $1
		  : 'allowed';
		$result{"$name text"} = $text;
	}
	return \%result;
}

# the roles that try: one granted each predefined role, the database's
# owner, and a role granted the write privileges on the table
my @tried;
for my $r (@roles)
{
	next if $superuser_equivalent{$r};
	if ($r eq 'pg_database_owner')
	{
		push @tried, [ $r, 'dbo' ];
		next;
	}
	(my $login = $r) =~ s/^pg_/as_/;
	$node->safe_psql('postgres', "CREATE ROLE $login LOGIN; GRANT $r TO $login");
	push @tried, [ $r, $login ];
}
$node->safe_psql('postgres', 'CREATE ROLE granted LOGIN');
super('GRANT INSERT, UPDATE, DELETE, TRUNCATE ON snowflake.snowflake_workers TO granted');
push @tried, [ 'granted', 'granted' ];

my $before = state(pids());
my $last_id = super('SELECT snowflake.snowflake_nextval()');
for my $t (@tried)
{
	my ($r, $login) = @$t;
	my $p = pids();
	my $res = attempt($login, $p);
	my %present = map { $_->[0] => 1 } @attempts;
	my %may = map { $_ => 1 } grep { $present{$_} } @{ $allowed{$r} // [] };
	my @wrong;
	for my $a (@attempts)
	{
		my $name = $a->[0];
		my $want = $may{$name} ? 'allowed' : 'refused';
		push @wrong, "$name: $res->{$name}\n$res->{\"$name text\"}"
		  unless ($res->{$name} // 'not run') eq $want;
		# what PostgreSQL answered, for the log
		my ($said) = ($res->{"$name text"} // '') =~ /((?:ERROR|WARNING):.*)$/m;
		note("$r, $name: " . ($said // 'done'));
	}
	is(scalar(@wrong), 0, "$r: every attempt refused" .
		(%may ? ' but ' . join(', ', sort keys %may) : ''))
	  or diag(join "\n", @wrong);
	is(state(pids()), $before, "$r: the registry, its triggers, the node and the mesh are as they were");
	my $id = super('SELECT snowflake.snowflake_nextval()');
	ok($id > $last_id, "$r: the node generates, above every earlier ID");
	$last_id = $id;

	# the writes are refused by the extension, not by a missing privilege:
	# its SQLSTATE is PostgreSQL's (42501), and its hint names the step
	if ($r eq 'pg_write_all_data' || $r eq 'granted')
	{
		my @ops = qw(update delete insert copy merge);
		push @ops, 'truncate' if $r eq 'granted';
		for my $op (@ops)
		{
			like($res->{"$op text"},
				qr/ERROR:  42501: [^\n]*\bsnowflake_workers\n(?:.*\n)*?HINT:  [^\n]*snowflake\.snowflake_claim_worker\(\)/,
				"$r: $op is refused as only superusers change claims, the hint naming the step");
		}
	}
	if ($r eq 'pg_read_all_data' && $mesh)
	{
		unlike($res->{'subconninfo text'}, qr/password/, "$r reads the subscriptions' connection strings: no password");
	}
}

# a superuser still claims and confirms
like(super(q{SELECT snowflake.snowflake_claim_worker('n1')}), qr/^\(1,\d+,/,
	'a superuser\'s snowflake_claim_worker() returns the node\'s claim');
is(refusal($node, 'app', 'SELECT snowflake.snowflake_confirm_node()'), '22004',
	'snowflake_confirm_node() with no floor is refused');
ok(super('SELECT snowflake.snowflake_confirm_node(above => 0) >= 0'), 'and with one it runs');
is(super($registry), $claims, 'the registry is the same');

# --- a dump by a member of pg_read_all_data -----------------------------

my $dump = $node->basedir . '/app.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-U', 'as_read_all_data', '-d', $node->connstr('app'), '-f', $dump ],
	'a member of pg_read_all_data dumps the database');
$node->safe_psql('postgres', 'CREATE DATABASE restored');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', $node->connstr('restored'), $dump ],
	'a superuser restores it');
is($node->safe_psql('restored', $registry), $claims, 'with every claim');

# --- a subscription made by a member of pg_create_subscription ----------

if ($mesh)
{
	# a database on the other node stands for a publisher the role controls
	$other->safe_psql('postgres', q{
		CREATE ROLE eve LOGIN REPLICATION PASSWORD 'evil-pw';
		CREATE DATABASE evil OWNER eve});
	$other->safe_psql('evil', q{
		SET ROLE eve;
		CREATE SCHEMA snowflake;
		CREATE TABLE snowflake.snowflake_workers (worker_id integer PRIMARY KEY,
			system_identifier bigint NOT NULL, node_name text, claimed_at timestamptz NOT NULL DEFAULT now());
		INSERT INTO snowflake.snowflake_workers VALUES (1, 0, 'evil'), (6, 0, 'evil'), (9, 0, 'evil');
		CREATE PUBLICATION p_copy FOR TABLE snowflake.snowflake_workers WHERE (worker_id = 6);
		CREATE PUBLICATION p_insert FOR TABLE snowflake.snowflake_workers WITH (publish = 'insert');
		CREATE PUBLICATION p_update FOR TABLE snowflake.snowflake_workers WITH (publish = 'update');
		CREATE PUBLICATION p_delete FOR TABLE snowflake.snowflake_workers WITH (publish = 'delete')});
	# a role that is not superuser connects with a password
	my $hba = $other->data_dir . '/pg_hba.conf';
	my $text = slurp_file($hba);
	open my $h, '>', $hba or die "cannot write $hba: $!";
	print $h "local evil eve scram-sha-256\n$text";
	close $h;
	$other->reload;

	$node->safe_psql('postgres', q{
		CREATE ROLE eve LOGIN;
		GRANT pg_create_subscription, pg_write_all_data, pg_read_all_data TO eve;
		GRANT CREATE ON DATABASE app TO eve});
	(my $conn = $other->connstr('evil') . ' user=eve password=evil-pw') =~ s/'/''/g;
	# name => publication, options, and what stops it in the log: the
	# guard, in the initial copy and in apply, or PostgreSQL, when the
	# subscription applies as the table's owner, which eve cannot become
	# (applying an update or a delete also reads the table: without
	# pg_read_all_data PostgreSQL would refuse them itself)
	my $guard = sub {
		my ($context) = @_;
		return qr/permission denied for table snowflake_workers\n(?:.*\n){2}.*CONTEXT:  $context/;
	};
	my %subs = (
		eve_copy => [ 'p_copy', 'run_as_owner = true', $guard->('COPY snowflake_workers') ],
		eve_insert => [ 'p_insert', 'run_as_owner = true, copy_data = false',
			$guard->('processing remote data .*"INSERT"') ],
		eve_update => [ 'p_update', 'run_as_owner = true, copy_data = false',
			$guard->('processing remote data .*"UPDATE"') ],
		eve_delete => [ 'p_delete', 'run_as_owner = true, copy_data = false',
			$guard->('processing remote data .*"DELETE"') ],
		eve_as_owner => [ 'p_insert', 'run_as_owner = false, copy_data = false',
			qr/role "eve" cannot SET ROLE to "\Q$su\E"/ ]);
	my $log_at = -s $node->logfile;
	my $pre = super($registry);
	for my $s (sort keys %subs)
	{
		my ($out, $err) = ('', '');
		my $ret = $node->psql('app', "CREATE SUBSCRIPTION $s CONNECTION '$conn' PUBLICATION $subs{$s}[0]
			WITH ($subs{$s}[1])",
			extra_params => [ '-U', 'eve' ], stdout => \$out, stderr => \$err);
		is($ret, 0, "eve (pg_create_subscription) subscribes: $s, $subs{$s}[1]") or diag($err);
	}
	$other->safe_psql('evil', q{
		BEGIN;
		INSERT INTO snowflake.snowflake_workers VALUES (5, 0, 'evil');
		UPDATE snowflake.snowflake_workers SET system_identifier = 0, node_name = 'evil' WHERE worker_id = 1;
		DELETE FROM snowflake.snowflake_workers WHERE worker_id = 9;
		COMMIT});
	# until every subscription failed, or a claim changed
	my %seen;
	my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
	while (time < $deadline)
	{
		my $log = substr(slurp_file($node->logfile), $log_at);
		%seen = map { $_ => scalar($log =~ $subs{$_}[2]) } keys %subs;
		last if (grep { $seen{$_} } keys %seen) == keys %subs || super($registry) ne $pre;
		Time::HiRes::usleep(100_000);
	}
	is(super($registry), $pre, 'no claim changed through those subscriptions');
	ok($seen{$_}, "$_ stopped at the first claim") for sort keys %subs;
	for my $s (sort keys %subs)
	{
		my ($ret, $out, $err) = (0, '', '');
		$ret = $node->psql('app', "DROP SUBSCRIPTION $s", extra_params => [ '-U', 'eve' ],
			stdout => \$out, stderr => \$err);
		is($ret, 0, "eve drops $s") or diag($err);
	}

	# the mesh goes on, in both directions, claims included
	super(q{INSERT INTO items (v) VALUES ('from 1')});
	$other->safe_psql('app', q{INSERT INTO items (v) VALUES ('from 2')});
	super('DELETE FROM snowflake.snowflake_workers WHERE worker_id = 9');
	ok($other->poll_query_until('app', q{
		SELECT (SELECT count(*) FROM items) = 2
		   AND NOT EXISTS (SELECT FROM snowflake.snowflake_workers WHERE worker_id = 9)}),
		'the mesh still replicates rows, and a superuser\'s delete of a claim');
	ok($node->poll_query_until('app', 'SELECT count(*) = 2 FROM items'), 'both ways');
	is($other->safe_psql('app', $registry), super($registry), 'both nodes hold the same claims');

	# any role that connects can take the advisory lock that is the mesh's
	# lock: the helper does not wait for it, and names who holds it
	super('CREATE ROLE mallory LOGIN');
	my $holder = $node->background_psql('app', extra_params => [ '-U', 'mallory' ]);
	# (16.2's background_psql keeps the output's last newline)
	chomp(my $holder_pid = $holder->query_safe(
		"SELECT pg_backend_pid() FROM (SELECT pg_advisory_lock(1397640531, hashtext('snowflake_mesh'))) l"));
	$_->safe_psql('app', 'CREATE TABLE notes (id bigint PRIMARY KEY DEFAULT snowflake.snowflake_nextval())')
	  for $node, $other;
	my ($out, $err) = ('', '');
	IPC::Run::run([ $^X, $mesh_script, '--timeout', '120', 'add-table', 'notes',
		$node->connstr('app'), $other->connstr('app') ], '>', \$out, '2>', \$err);
	isnt($? >> 8, 0, 'a role holding the advisory lock makes a change of the mesh stop, not hang');
	like($err, qr/is in another change of the mesh: The mesh's lock is held by pid $holder_pid \(role mallory/,
		'naming the session that holds it');
	$holder->quit;
	IPC::Run::run([ $^X, $mesh_script, '--timeout', '120', 'add-table', 'notes',
		$node->connstr('app'), $other->connstr('app') ], '>', \$out, '2>', \$err);
	is($? >> 8, 0, 'once it is gone, the change goes ahead') or diag($err);
}

# --- a lock on pg_database does not stop the keeper ---------------------

if ($version >= 170000)
{
	my $holder = $node->background_psql('app', extra_params => [ '-U', 'as_maintain' ]);
	my $gen = $node->background_psql('app');
	my $first = $gen->query_safe('SELECT snowflake.snowflake_nextval()');
	$holder->query_safe('BEGIN; LOCK TABLE pg_catalog.pg_database IN ACCESS EXCLUSIVE MODE');
	# IDs more than a reservation (one second) later need the keeper
	$gen->query_safe('SELECT pg_sleep(1.5)');
	my $next = $gen->query_safe('SELECT snowflake.snowflake_nextval()');
	ok($next > $first, 'while pg_maintain holds pg_database locked, the keeper renews the reservation')
	  or diag($next);
	$holder->query_safe('COMMIT');
	$holder->quit;
	$gen->quit;
}

$other->stop if $other;
$node->stop;
done_testing();
