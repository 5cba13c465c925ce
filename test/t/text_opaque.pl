# The opaque form and its key, snowflake.opaque_key: IDs go back to
# themselves with the key and the prefix they were made with; another key,
# another prefix or any altered character is refused (22P02); consecutive
# IDs give strings in no order; no role below superuser reads the key, and
# a member of pg_read_all_settings sees only its fingerprint; the key is
# set only in the configuration files; a key rejected at server start
# disables the opaque form (55000) and nothing else, and is not repeated
# to clients; a reload to another key takes effect.
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

# every single altered character, and the wrong prefix, are refused
my ($id, $plain, $typed) = split /\|/, sql(q{SELECT id, plain, typed FROM made ORDER BY id LIMIT 1});
my @codes;
for my $pos (0 .. 25)
{
	for my $d ('0', 'z', '7')
	{
		my $s = $plain;
		next if substr($s, $pos, 1) eq $d;
		substr($s, $pos, 1) = $d;
		push @codes, scalar refusal($node, 'postgres', "SELECT snowflake_from_opaque('$s')");
	}
}
is_deeply([ sort { $a cmp $b } keys %{ { map { $_ => 1 } @codes } } ], ['22P02'],
	scalar(@codes) . ' strings with one character altered are all refused with 22P02');
is(refusal($node, 'postgres', "SELECT snowflake_from_opaque('$typed', 'user')"), '22P02', 'another prefix is refused');
is(refusal($node, 'postgres', "SELECT snowflake_from_opaque('$typed')"), '22P02', 'a prefix where none is expected is refused');
is(refusal($node, 'postgres', "SELECT snowflake_from_opaque('${plain}0')"), '22P02', 'a longer string is refused');
is(refusal($node, 'postgres', "SELECT snowflake_from_opaque('8" . substr($plain, 1) . "')"), '22P02',
	'a string beyond 128 bits is refused');
my (undef, $err) = refusal($node, 'postgres', "SELECT snowflake_from_opaque('${\ substr($plain, 0, 25)}x')");
like($err, qr/not made with this server's key/, 'the refusal says why');

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
is(refusal($node, 'postgres', "SELECT snowflake_from_opaque('$plain')"), '22P02', 'a string of another key is refused');
is(sql(qq{SELECT snowflake_from_opaque(snowflake_opaque($id)) = $id AND snowflake_opaque($id) <> '$plain'}), 't',
	'the new key makes other strings, which go back');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET snowflake.opaque_key');
$node->reload;
$node->poll_query_until('postgres', "SELECT current_setting('snowflake.opaque_key') = '$fp'")
  or die 'the first key did not come back';
is(sql(qq{SELECT snowflake_from_opaque('$plain')}), $id, 'with the first key back, its strings read again');

# a key rejected at server start: the opaque form refuses, the rest works,
# and the value is not repeated to clients
$node->append_conf('postgresql.conf', "snowflake.opaque_key = 'not-a-key-0123456789'\n");
$node->restart;
(my $code, $err) = refusal($node, 'postgres', 'SELECT snowflake_opaque(1)');
is($code, '55000', 'a key rejected at start disables the opaque form');
unlike($err, qr/not-a-key/, 'and the refusal does not repeat the value');
is(refusal($node, 'postgres'), 'generated', 'the node still generates');
is(sql(q{SELECT snowflake_from_base32(snowflake_base32(12345))}), '12345', 'and the other text forms work');
like(slurp_file($node->logfile), qr/invalid value for parameter "snowflake.opaque_key"/, 'the server log says why');

# no key at all
$node->append_conf('postgresql.conf', "snowflake.opaque_key = ''\n");
$node->reload;
$node->poll_query_until('postgres', "SELECT current_setting('snowflake.opaque_key') = ''")
  or die 'the empty key did not take';
is(refusal($node, 'postgres', 'SELECT snowflake_opaque(1)'), '55000', 'without a key the opaque form refuses');

$node->stop;
done_testing();
