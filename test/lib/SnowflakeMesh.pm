# SnowflakeMesh: what the mesh's tests share: nodes fit for a mesh, the
# helper run in the foreground or the background, rows compared by
# content (every column of every row, not counts), and writers that
# insert, update and delete on a node until told to stop.
package SnowflakeMesh;

use strict;
use warnings;
use Exporter 'import';
use FindBin;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Time::HiRes qw(time usleep);
use SnowflakeTest;

our @EXPORT = qw(mesh_node conn german wid mesh mesh_start mesh_running mesh_finish mesh_locks_gone
  content rows_apart converged writer_start writers_stop writes_more sqlstate_of missing_conflicts);

our $script = "$FindBin::RealBin/../../scripts/snowflake-mesh";
our $timeout = 120;

# The table the writers work on: k numbers the rows made before a step
# (NULL for the writers' own), n counts their updates.
our $events = q{
	CREATE TABLE events (id bigint PRIMARY KEY DEFAULT snowflake_nextval(),
		node int NOT NULL, k int, n int NOT NULL DEFAULT 0, payload text);
	CREATE INDEX ON events (k);
	CREATE TABLE mesh_load_ctl (stop boolean NOT NULL);
	INSERT INTO mesh_load_ctl VALUES (false);
};

# mesh_node(NAME, WORKER, SCHEMA, CONF): a started node with room for a
# mesh of four, the extension and SCHEMA (default: events), and CONF's
# lines in its postgresql.conf
sub mesh_node
{
	my ($name, $worker, $schema, $conf) = @_;
	my $n = snowflake_node($name, worker_id => $worker, allows_streaming => 'logical',
		conf => "max_wal_senders = 20\nmax_replication_slots = 20\n"
		  . "max_logical_replication_workers = 12\nmax_worker_processes = 24\n"
		  . "wal_receiver_status_interval = 1\ntrack_commit_timestamp = on\n" . ($conf // ''));
	$n->start;
	$n->safe_psql('postgres', 'CREATE EXTENSION snowflake;' . ($schema // $events));
	return $n;
}

sub conn { return $_[0]->connstr . ' dbname=postgres'; }

# german(NODE): the setting that makes NODE's server speak German, or ''
# with why it cannot (no de_DE.UTF-8 locale, no German catalogue)
sub german
{
	my ($n) = @_;
	my $major = $n->pg_version->major;
	my ($dir) = $n->config_data('--localedir');
	return ('', "the server has no German message catalogue ($dir/de/LC_MESSAGES/postgres-$major.mo)")
	  unless -f "$dir/de/LC_MESSAGES/postgres-$major.mo";
	return ('', 'the locale de_DE.UTF-8 is not generated (test/lib.sh need_locale)')
	  unless grep { /^de_DE\.utf-?8$/i } split /\n/, `locale -a 2>/dev/null`;
	return ("lc_messages = 'de_DE.UTF-8'\n", '');
}

# the node's worker id, from its name ("hist3" is worker 3)
sub wid { return $_[0]->name =~ s/\D//gr; }

# mesh(ARGS...): runs the helper; its exit status, output and errors
sub mesh
{
	my ($out, $err) = ('', '');
	IPC::Run::run([ $^X, $script, '--timeout', $timeout, @_ ], '>', \$out, '2>', \$err);
	return ($? >> 8, $out, $err);
}

# mesh_start(ARGS...): the helper in the background, in a process group of
# its own (so that a test can kill it whole); mesh_finish waits for it
sub mesh_start
{
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start([ 'setsid', $^X, $script, '--timeout', $timeout, @_ ],
		'>', \$out, '2>', \$err);
	return { h => $h, out => \$out, err => \$err };
}

# mesh_running(RUN): whether the helper started by mesh_start still runs;
# its output read so far.  (pumpable alone looks at the pipes, which only
# a pump finds closed.)
sub mesh_running
{
	my ($r) = @_;
	eval { $r->{h}->pump_nb };
	return $r->{h}->pumpable;
}

sub mesh_finish
{
	my ($r) = @_;
	$r->{h}->finish;
	# the child's own result, as the harness recorded it when it reaped
	# it: $? says nothing once mesh_running's pump has reaped the child
	# first.  A helper killed by a signal has no exit code: never take it
	# for 0
	my $res = $r->{h}->full_result(0);
	my $rc = ($res & 127) ? 128 + ($res & 127) : $res >> 8;
	return ($rc, ${ $r->{out} }, ${ $r->{err} });
}

# mesh_locks_gone(NODES...): waits until no session holds the mesh's lock
# on any of the nodes.  A helper that was killed leaves sessions that end
# on their own time, after the helper's process is gone; the next command
# would find the lock still held.
sub mesh_locks_gone
{
	my @nodes = @_;
	for my $n (@nodes)
	{
		$n->poll_query_until('postgres', q{
			SELECT NOT EXISTS (SELECT FROM pg_locks l WHERE l.locktype = 'advisory'
							   AND l.classid IN (1397640531, 1397640532, 1397640533))})
		  or die 'a session of a killed helper still holds the mesh\'s lock on ' . $n->name;
	}
	return;
}

# the settings a row's text depends on, the same for every node
our $pinned = "SET TimeZone = 'UTC'; SET DateStyle = 'ISO'; SET IntervalStyle = 'postgres'; "
  . "SET extra_float_digits = 3; SET bytea_output = 'hex';\n";

# content(NODE, TABLE, WHERE): "N rows, md5 M" of every row (that WHERE
# selects), each as JSON (its columns by name, whatever their order), in
# order
sub content
{
	my ($n, $t, $where) = @_;
	return $n->safe_psql('postgres', $pinned
		  . "SELECT count(*) || ' rows, md5 ' || coalesce(md5(string_agg(to_jsonb(r)::text, ',' ORDER BY to_jsonb(r)::text)), '-') FROM $t r"
		  . (defined $where ? " WHERE $where" : ''));
}

# rows_apart(A, B, TABLE): how many rows one node has that the other has
# not, compared whole: (only on A, only on B, the same key with other
# values); the key is id (worker_id in snowflake_workers)
sub rows_apart
{
	my ($a, $b, $t) = @_;
	my %rows;
	for my $side ([ $a, 0 ], [ $b, 1 ])
	{
		for my $line (split /\n/, $side->[0]->safe_psql('postgres', $pinned
			. "SELECT coalesce(to_jsonb(r) ->> 'id', to_jsonb(r) ->> 'worker_id') || ' ' || to_jsonb(r)::text FROM $t r"))
		{
			my ($id, $text) = split / /, $line, 2;
			$rows{$id}[ $side->[1] ] = $text;
		}
	}
	my ($only_a, $only_b, $differ) = (0, 0, 0);
	for my $r (values %rows)
	{
		if (!defined $r->[1]) { $only_a++ }
		elsif (!defined $r->[0]) { $only_b++ }
		elsif ($r->[0] ne $r->[1]) { $differ++ }
	}
	return ($only_a, $only_b, $differ);
}

# converged(NODES, TABLES, SECONDS): waits until every node holds the same
# rows in every table (and snowflake_workers); '' if they do, or what
# differs
sub converged
{
	my ($nodes, $tables, $seconds) = @_;
	my $deadline = time + ($seconds // 180);
	my @bad;
	while (1)
	{
		@bad = ();
		for my $t (@$tables, 'snowflake.snowflake_workers')
		{
			my @d = map { content($_, $t) } @$nodes;
			next unless grep { $_ ne $d[0] } @d;
			my @apart = map { [ rows_apart($nodes->[0], $_, $t) ] } @$nodes;
			push @bad, "$t: " . join(' / ', map {
				sprintf('worker %s %s (against worker %s: %d rows only there, %d only here, %d differ)',
					wid($nodes->[$_]), $d[$_], wid($nodes->[0]), @{ $apart[$_] })
			} 0 .. $#$nodes);
		}
		last if !@bad || time > $deadline;
		# 16's launcher can leave an enabled subscription with no worker
		wake_subscriptions(@$nodes);
		sleep 1;
	}
	return join "\n", @bad;
}

# writer_start(NODE, %OPTS): a session on NODE that, until writers_stop,
# every PERIOD seconds (0.05) commits one transaction on TABLE (events):
# an insert of its own row (payload: 'load' and the time the insert
# began, in seconds since 1970), an update of the row it inserted before, and,
# if PART is [MOD, REM], a change of a row made before (k % MOD = REM, a
# different one each time): every DELETE_EVERY-th (4) time it deletes it,
# else it updates it.  Two writers given disjoint parts never change one
# row, so every node must end with the same rows.  A write the node
# refuses because it joins or leaves the mesh (SQLSTATE SM002) is counted
# and not committed, as a client would see it; every other error stops the
# writer.
sub writer_start
{
	my ($n, %o) = @_;
	my $w = wid($n);
	my $t = $o{table} // 'events';
	my ($mod, $rem) = @{ $o{part} // [ 0, 0 ] };
	my $period = $o{period} // 0.05;
	my $every = $o{delete_every} // 4;
	my $rows = $o{rows} // 2000;
	$n->safe_psql('postgres', 'UPDATE mesh_load_ctl SET stop = false');
	my $do = qq{
DO \$\$
DECLARE
	i int := 0;
	done int := 0;
	refused int := 0;
	k_i int;
	mine bigint;
	made bigint;
BEGIN
	WHILE NOT (SELECT stop FROM mesh_load_ctl) LOOP
		i := i + 1;
		BEGIN
			UPDATE $t SET n = n + 1 WHERE id = mine;
			INSERT INTO $t (node, payload) VALUES ($w, 'load ' || extract(epoch FROM clock_timestamp()))
			RETURNING id INTO made;
			IF $mod > 0 THEN
				k_i := $rem + $mod * (i % ($rows / $mod));
				IF k_i BETWEEN 1 AND $rows THEN
					IF i % $every = 0 THEN
						DELETE FROM $t WHERE k = k_i;
					ELSE
						UPDATE $t SET n = n + 1, payload = 'w$w i' || i WHERE k = k_i;
					END IF;
				END IF;
			END IF;
			mine := made;
			done := done + 1;
		EXCEPTION WHEN SQLSTATE 'SM002' THEN
			refused := refused + 1;
		END;
		COMMIT;
		PERFORM pg_sleep($period);
	END LOOP;
	RAISE NOTICE 'writer $w: % transactions, % refused', done, refused;
END \$\$};
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', conn($n), '-c', $do ],
		'>', \$out, '2>', \$err);
	return { h => $h, out => \$out, err => \$err, node => $n, w => $w, table => $t };
}

# writers_stop(WRITERS): stops them; '' if each ran without an error, or
# their errors; the transactions each committed, and those its node
# refused, by worker id
sub writers_stop
{
	my (@writers) = @_;
	my %nodes = map { $_->{node}->name => $_->{node} } @writers;
	$_->safe_psql('postgres', 'UPDATE mesh_load_ctl SET stop = true') for values %nodes;
	my ($errors, %done, %refused) = ('');
	for my $r (@writers)
	{
		$r->{h}->finish;
		my ($i, $no) = ${ $r->{err} } =~ /writer \d+: (\d+) transactions, (\d+) refused/;
		$done{ $r->{w} } += $i // 0;
		$refused{ $r->{w} } += $no // 0;
		$errors .= "writer on worker $r->{w}: ${ $r->{err} }\n" if $? != 0 || !defined $i;
	}
	return ($errors, \%done, \%refused);
}

# writes_more(NODE, WORKER, N, TABLE): waits until NODE holds N more rows
# that worker WORKER's writer inserted (in TABLE, events) than now: load
# measured in rows written, not in seconds
sub writes_more
{
	my ($n, $w, $more, $t) = @_;
	$t //= 'events';
	my $now = $n->safe_psql('postgres', "SELECT count(*) FROM $t WHERE node = $w AND payload LIKE 'load %'");
	$n->poll_query_until('postgres',
		"SELECT count(*) >= $now + $more FROM $t WHERE node = $w AND payload LIKE 'load %'")
	  or die "worker ${w}'s writer did not write $more rows on " . $n->name;
	return;
}

# sqlstate_of(NODE, SQL): the SQLSTATE SQL fails with on NODE, or '' if it
# succeeds
sub sqlstate_of
{
	my ($n, $sql) = @_;
	my ($out, $err) = ('', '');
	my $rc = $n->psql('postgres', "\\set VERBOSITY sqlstate\n$sql", stdout => \$out, stderr => \$err);
	return $rc == 0 ? '' : ($err =~ /:\s+([0-9A-Z]{5})\s*$/m)[0] // "no SQLSTATE in: $err";
}

# missing_conflicts(NODE): update_missing + delete_missing that NODE's
# subscriptions counted (18 and later), or undef where they are not
# counted
sub missing_conflicts
{
	my ($n) = @_;
	return undef if $n->pg_version->major < 18;
	return $n->safe_psql('postgres',
		'SELECT coalesce(sum(confl_update_missing + confl_delete_missing), 0) FROM pg_stat_subscription_stats');
}

1;
