# The opaque form and its key, snowflake.opaque_key: IDs go back to
# themselves with the key and the prefix they were made with; another key,
# another prefix or any other character at any position (another case,
# base32's aliases included: one ID has one string) is refused (22P02);
# consecutive IDs give strings in no order; the functions work in a query
# planned in parallel; no role below superuser reads the key, and a member
# of pg_read_all_settings sees only its fingerprint, while members of
# pg_read_server_files and pg_write_server_files read and set it in the
# files, as the docs say; the key is set only in the configuration files; nothing the server logs at DEBUG5 and nothing a
# plain role's session at DEBUG5 receives holds a key or a near miss of
# one, across reloads that reject values and one that changes the key; a
# value rejected at a reload keeps the key in force, and SHOW says a
# rejected value is pending; a key rejected at server start disables the
# opaque form (55000) and nothing else, until the line is fixed or removed
# and the configuration reloaded.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SnowflakeTest;

my $key1 = '00112233445566778899aabbccddeeff' x 2;
my $key2 = 'fedcba98765432100123456789abcdef';
my $node = snowflake_node('text_opaque', conf => "snowflake.opaque_key = '$key1'");
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION snowflake;
	CREATE ROLE app LOGIN;
	CREATE ROLE monitor LOGIN IN ROLE pg_read_all_settings;
	CREATE TABLE made AS
		SELECT id, snowflake_opaque(id) AS plain, snowflake_opaque(id, 'order') AS typed
		FROM (SELECT snowflake_nextval() AS id FROM generate_series(1, 500)) s;
	GRANT SELECT ON made TO app;
});

sub sql { return $node->safe_psql('postgres', $_[0]) }

is(sql(q{SELECT count(*) FROM made WHERE snowflake_from_opaque(plain) = id AND snowflake_from_opaque(typed, 'order') = id
		AND plain ~ '^[0-7][0-9a-hjkmnp-tv-z]{25}$' AND typed ~ '^order_[0-7][0-9a-hjkmnp-tv-z]{25}$'}),
	'500', 'IDs go back to themselves with the key and prefix they were made with; 26 base32 digits, the first 0 to 7');
is(sql(q{SELECT count(DISTINCT plain) FROM made}), '500', 'distinct IDs give distinct strings');
my $inversions = sql(q{SELECT count(*) FILTER (WHERE p < prev) FROM
	(SELECT plain COLLATE "C" AS p, lag(plain COLLATE "C") OVER (ORDER BY id) AS prev FROM made) s});
ok($inversions > 150 && $inversions < 350,
	"consecutive IDs give strings in no order: $inversions of 499 neighbours descend");
is(sql(q{SELECT count(*) FROM (SELECT left(plain, 6) FROM made GROUP BY 1 HAVING count(*) > 2) s}), '0',
	'IDs made in the same milliseconds share no leading digits');

# every other character at every position, and the wrong prefix, are
# refused: another case and base32's aliases too, so one ID has one string
my ($id, $plain, $typed) = split /\|/, sql(q{SELECT id, plain, typed FROM made ORDER BY id LIMIT 1});
$node->safe_psql('postgres', q{
	CREATE FUNCTION read_code(s text, prefix text) RETURNS text LANGUAGE plpgsql AS $$
		BEGIN RETURN 'read as ' || snowflake_from_opaque(s, prefix);
		EXCEPTION WHEN OTHERS THEN RETURN SQLSTATE;
		END $$});
my $subst = sql(qq{
	SELECT count(*), string_agg(DISTINCT code, ' '),
		   string_agg(format('%s at %s', c, p), ', ') FILTER (WHERE code <> '22P02')
	FROM (SELECT p, c, read_code('order_' || overlay(d PLACING c FROM p FOR 1), 'order') AS code
		  FROM (SELECT substr('$typed', 7) AS d) s, generate_series(1, 26) p,
			   regexp_split_to_table('0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_ .', '') c
		  WHERE c <> substr(d, p, 1)) t});
my ($tried, $codes, $accepted) = split /\|/, $subst;
is($codes, '22P02', "all $tried strings with one character changed are refused with 22P02")
  or diag("accepted: $accepted");
is(sql(qq{SELECT read_code(upper('$typed'), 'order') || ' ' || read_code('order_' || upper(substr('$typed', 7)), 'order')
		|| ' ' || read_code(upper('$plain'), '')}),
	'22P02 22P02 22P02', 'so is the string in upper case, with and without its prefix');
is(refusal($node, 'postgres', "SELECT snowflake_from_opaque('$typed', 'user')"), '22P02', 'another prefix is refused');
is(refusal($node, 'postgres', "SELECT snowflake_from_opaque('$typed')"), '22P02', 'a prefix where none is expected is refused');
is(refusal($node, 'postgres', "SELECT snowflake_from_opaque('${plain}0')"), '22P02', 'a longer string is refused');
is(refusal($node, 'postgres', "SELECT snowflake_from_opaque('8" . substr($plain, 1) . "')"), '22P02',
	'a string beyond 128 bits is refused');
# (the last digit changed: to x, or to y where it was x)
my $changed = substr($plain, 0, 25) . (substr($plain, 25) eq 'x' ? 'y' : 'x');
my (undef, $err) = refusal($node, 'postgres', "SELECT snowflake_from_opaque('$changed')");
like($err, qr/not made with this server's key/, 'the refusal says why');
(my $upper = $plain) =~ s/([a-z])/\U$1/;
(undef, $err) = refusal($node, 'postgres', "SELECT snowflake_from_opaque('$upper')");
like($err, qr/lower-case/, 'and of a letter in upper case, that the form is in lower case');

# in a query planned in parallel the functions run where the key is: the
# leader (a worker gets the leader's settings as text, which holds no key)
my $force = $node->safe_psql('postgres', 'SHOW server_version_num') >= 160000
  ? 'debug_parallel_query' : 'force_parallel_mode';
is($node->safe_psql('postgres', qq{
	SET $force = on; SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0;
	SET min_parallel_table_scan_size = 0; SET max_parallel_workers_per_gather = 2;
	SELECT count(*) FROM made WHERE snowflake_from_opaque(plain) = id AND snowflake_opaque(id, 'order') = typed}),
	'500', 'in a query planned in parallel, the opaque form writes and reads as in any other');

# who reads the key: nobody below superuser; pg_read_all_settings sees a fingerprint
my $fp = sql('SHOW snowflake.opaque_key');
like($fp, qr/^set, fingerprint [0-9a-f]{8}$/, "SHOW gives the superuser a fingerprint: $fp");
unlike($fp, qr/00112233/, 'and not the key');
is(refusal($node, 'postgres', "SET ROLE app; SHOW snowflake.opaque_key"), '42501', 'SHOW is refused to other roles');
is(refusal($node, 'postgres', "SET ROLE app; SELECT current_setting('snowflake.opaque_key')"), '42501',
	'current_setting() is refused to other roles');
is(sql(q{SET ROLE monitor; SHOW snowflake.opaque_key}), $fp, 'a member of pg_read_all_settings sees only the fingerprint');
is(sql(q{SET ROLE monitor; SELECT count(*) FROM pg_settings WHERE name = 'snowflake.opaque_key'}), '0',
	'pg_settings has no row for it, so no reset_val to read');
is(sql(q{SET ROLE monitor; SELECT count(*) FROM pg_db_role_setting WHERE array_to_string(setconfig, ' ') LIKE '%opaque%'}), '0',
	'no role or database setting holds it');
is(refusal($node, 'postgres', "SET snowflake.opaque_key = '$key2'"), '55P02', 'SET is refused, also to a superuser');
is(refusal($node, 'postgres', "ALTER DATABASE postgres SET snowflake.opaque_key = '$key2'"), '55P02',
	'ALTER DATABASE ... SET is refused: the catalogs would show it to every role');
is(refusal($node, 'postgres', "ALTER ROLE app SET snowflake.opaque_key = '$key2'"), '55P02', 'so is ALTER ROLE ... SET');
is(sql(qq{SET ROLE app; SELECT snowflake_from_opaque('$plain')}), $id, 'a role below superuser uses the key it cannot read');

# another key by a reload: the old strings are refused, new ones work
$node->safe_psql('postgres', "ALTER SYSTEM SET snowflake.opaque_key = '$key2'");
$node->reload;
$node->poll_query_until('postgres', "SELECT current_setting('snowflake.opaque_key') <> '$fp'")
  or die 'the new key did not take';
my $fp2 = sql('SHOW snowflake.opaque_key');
is(refusal($node, 'postgres', "SELECT snowflake_from_opaque('$plain')"), '22P02', 'a string of another key is refused');
is(sql(qq{SELECT snowflake_from_opaque(snowflake_opaque($id)) = $id AND snowflake_opaque($id) <> '$plain'}), 't',
	'the new key makes other strings, which go back');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET snowflake.opaque_key');
$node->reload;
$node->poll_query_until('postgres', "SELECT current_setting('snowflake.opaque_key') = '$fp'")
  or die 'the first key did not come back';
is(sql(qq{SELECT snowflake_from_opaque('$plain')}), $id, 'with the first key back, its strings read again');

# the roles that reach the configuration files reach the key, as the docs
# say: pg_read_server_files reads it, pg_write_server_files sets it
my $auto = $node->data_dir . '/postgresql.auto.conf';
$node->safe_psql('postgres', q{
	CREATE ROLE filereader LOGIN IN ROLE pg_read_server_files;
	CREATE ROLE filewriter LOGIN IN ROLE pg_write_server_files});
is(sql(qq{SET ROLE filereader; CREATE TEMP TABLE conf (l text);
	COPY conf FROM '${\ $node->data_dir}/postgresql.conf' WITH (FORMAT csv, DELIMITER E'\\x01', QUOTE E'\\x02');
	SELECT count(*) FROM conf WHERE l LIKE '%$key1%'}), '1', 'a member of pg_read_server_files reads the key in postgresql.conf');
$node->safe_psql('postgres', qq{SET ROLE filewriter;
	COPY (SELECT 'snowflake.opaque_key = ''$key2''') TO '$auto'});
$node->reload;
ok($node->poll_query_until('postgres', "SELECT current_setting('snowflake.opaque_key') = '$fp2'"),
	'a member of pg_write_server_files sets it through postgresql.auto.conf');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET snowflake.opaque_key');
$node->reload;
$node->poll_query_until('postgres', "SELECT current_setting('snowflake.opaque_key') = '$fp'")
  or die 'the first key did not come back';

# Reloads under DEBUG5, in the server log and in a plain role's session:
# two near misses of a new key (a trailing space, a digit short), which are
# rejected, then the new key.  Neither may hold any of them, nor a part.
# The session is one psql run as app; each "\!" appends a line to
# postgresql.conf, reloads, and waits until the postmaster has read the file
# (a new session's load time moves), by when it has signalled every backend,
# app's too, which reads the file before its next command.
my $key3 = '9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08';
my @misses = ("$key3 ", substr($key3, 0, 63));
my $reload = $node->basedir . '/reload_and_wait.sh';
my ($conf, $host, $port, $data) = ($node->data_dir . '/postgresql.conf', $node->host, $node->port, $node->data_dir);
open my $fh, '>', $reload or die "cannot write $reload: $!";
print $fh <<"SH";
#!/bin/sh
# reload_and_wait.sh LINE: LINE appended to postgresql.conf, a reload, and
# a wait until the postmaster has read the file
set -e
q() { psql -X -h '$host' -p $port -d postgres -Atc "\$1"; }
t0=\$(q 'SELECT pg_conf_load_time()')
printf '%s\\n' "\$1" >>'$conf'
pg_ctl -D '$data' reload >/dev/null
n=0
until [ "\$(q "SELECT pg_conf_load_time() > '\$t0'")" = t ]; do
	n=\$((n + 1))
	[ \$n -lt 3000 ] || exit 1
	sleep 0.1
done
SH
close $fh;
chmod 0755, $reload or die;
system($reload, 'log_min_messages = debug5') == 0 or die 'the reload did not take';
my $log_from = -s $node->logfile;

my $step = q{SELECT pg_conf_load_time() > :'t' AS reloaded, read_code('%s', '') AS old_string;
SELECT pg_conf_load_time() AS t \gset};
my $session = join("\n",
	'SET client_min_messages = debug5;',
	'SELECT pg_conf_load_time() AS t \gset',
	(map { ("\\! $reload \"snowflake.opaque_key = '$_'\"", sprintf($step, $plain)) } @misses, $key3),
	"SELECT read_code(snowflake_opaque($id), '') = 'read as $id' AS new_key_reads_back;");
my ($ret, $out, $said) = $node->psql('postgres', $session, extra_params => [ '-U', 'app' ]);
is($ret, 0, 'the session of app ran through the reloads') or diag($said);
is($out, "t|read as $id\nt|read as $id\nt|22P02\nt",
	'it read each reload: rejected values kept the key in force, then the new key took');
my $log = substr(slurp_file($node->logfile), $log_from);
like($said, qr/DEBUG:/, 'the session received DEBUG messages');
like($log, qr/DEBUG:/, 'the server logged DEBUG messages');
# every ten characters of the key, in either case
my @parts = map { substr($key3, $_, 10) } 0 .. length($key3) - 10;
is_deeply([ grep { index(lc $said, $_) >= 0 } @parts ], [], 'the session received no part of the key or its near misses');
is_deeply([ grep { index(lc $log, $_) >= 0 } @parts ], [], 'nor did the server log hold any');
# (the log is long: a failure shows the line at fault, not the log)
ok($log !~ /^.*parameter "snowflake.opaque_key" changed to.*$/m, 'a change of key is not logged as a change of text')
  or diag($&);
ok($log =~ /invalid value for parameter "snowflake.opaque_key"\n.*Character 65 of the value is not a hexadecimal digit/,
	'the log says why the first was rejected, without the value');
ok($log =~ /A key has 32 to 128 hexadecimal digits, an even number; the value has 63/, 'and the second');

# SHOW says when the value given is not the key in force
my $fp3 = sql('SHOW snowflake.opaque_key');
like($fp3, qr/^set, fingerprint [0-9a-f]{8}$/, "the new key's fingerprint: $fp3");
system($reload, "snowflake.opaque_key = '$misses[1]'") == 0 or die 'the reload did not take';
is(sql('SHOW snowflake.opaque_key'), "$fp3; a rejected value is pending", 'after a rejected value, SHOW says it is pending');
is(sql(qq{SELECT snowflake_from_opaque(snowflake_opaque($id, 'x'), 'x')}), $id, 'and the key in force works');

# conf_without(REGEX): postgresql.conf without the lines that match
sub conf_without
{
	my ($re) = @_;
	my @keep = grep { !/$re/ } split /^/, slurp_file($conf);
	open my $out, '>', $conf or die "cannot write $conf: $!";
	print $out @keep;
	close $out;
	return;
}
conf_without(qr/^(snowflake\.opaque_key|log_min_messages)\b/);

# a key rejected at server start: the opaque form refuses, the rest works,
# and the value is repeated nowhere
$node->append_conf('postgresql.conf', "snowflake.opaque_key = 'not-a-key-0123456789'\n");
$node->restart;
(my $code, $err) = refusal($node, 'postgres', 'SELECT snowflake_opaque(1)');
is($code, '55000', 'a key rejected at start disables the opaque form');
unlike($err, qr/not-a-key/, 'and the refusal does not repeat the value');
is(refusal($node, 'postgres'), 'generated', 'the node still generates');
is(sql(q{SELECT snowflake_from_base32(snowflake_base32(12345))}), '12345', 'and the other text forms work');
$log = slurp_file($node->logfile);
ok($log =~ /invalid value for parameter "snowflake.opaque_key"/, 'the server log says why');
ok($log !~ /^.*not-a-key.*$/m, 'without the value') or diag($&);
is(sql('SHOW snowflake.opaque_key'), 'not set; a rejected value is pending', 'SHOW tells a rejected key from none');

# the line removed and the configuration reloaded: no key, and the
# functions say so
conf_without(qr/^snowflake\.opaque_key\b/);
$node->reload;
$node->poll_query_until('postgres', "SELECT current_setting('snowflake.opaque_key') = ''")
  or die 'the removal did not take';
($code, $err) = refusal($node, 'postgres', 'SELECT snowflake_opaque(1)');
is($code, '55000', 'without a key the opaque form refuses');
like($err, qr/snowflake\.opaque_key is not set/, 'saying that no key is set, no longer that one was rejected');

# a valid key by a reload, without a restart
$node->append_conf('postgresql.conf', "snowflake.opaque_key = '$key1'\n");
$node->reload;
$node->poll_query_until('postgres', "SELECT current_setting('snowflake.opaque_key') = '$fp'")
  or die 'the first key did not come back';
is(sql(qq{SELECT snowflake_from_opaque('$plain')}), $id, 'a valid key by a reload puts the form back');

$node->stop;
done_testing();
