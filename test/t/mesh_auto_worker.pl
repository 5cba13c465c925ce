# Worker ids the mesh gives: create and join take nodes without
# snowflake.worker_id and give each the lowest id no claim names.  Two
# nodes created so get 1 and 2 and generate under them; a node that leaves
# keeps its claim, so its id is not given again, and the next holders'
# IDs are all above its own; a hand-set id another member claims is
# refused, naming the holder; two joins at once, both without worker ids,
# are given distinct ids (one waits for the other's lock or is refused and
# run again), and every member holds both claims; a node given its id
# keeps it across a restart; status says where each id came from.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use SnowflakeTest;
use SnowflakeMesh;

# -1: snowflake.worker_id not set
my @a = map { mesh_node("auto$_", -1) } 1 .. 4;
if ($a[0]->pg_version->major < 16)
{
	$_->stop for @a;
	plan skip_all => 'a mesh needs PostgreSQL 16';
}

sub worker { return $_[0]->safe_psql('postgres', 'SELECT snowflake.snowflake_worker_id()'); }

# the claims a node holds, "id:system" in id order
sub claims
{
	return $_[0]->safe_psql('postgres',
		q{SELECT string_agg(worker_id || ':' || system_identifier, ' ' ORDER BY worker_id) FROM snowflake_workers});
}
sub sysid { return $_[0]->safe_psql('postgres', 'SELECT system_identifier FROM pg_control_system()'); }

# writes N rows on NODE; the worker ids their keys carry, decoded
sub write_rows
{
	my ($node, $n) = @_;
	return $node->safe_psql('postgres', qq{
		WITH w AS (INSERT INTO events (node, payload) SELECT 0, 'auto' FROM generate_series(1, $n) RETURNING id)
		SELECT string_agg(DISTINCT (snowflake_decode(id)).worker_id::text, ',') FROM w});
}

my ($rc, $out, $err) = mesh('--tables', 'events', 'create', conn($a[0]), conn($a[1]));
is($rc, 0, 'create takes two nodes without worker ids') or diag("$out\n$err");
is(join(',', map { worker($_) } @a[ 0, 1 ]), '1,2', 'and gives them 1 and 2');
is(claims($a[1]), claims($a[0]), 'both hold the same claims');
is(claims($a[0]), '1:' . sysid($a[0]) . ' 2:' . sysid($a[1]), 'each id claimed by its node\'s system');
is(join(' ', map { write_rows($_, 50) } @a[ 0, 1 ]), '1 2', 'the IDs they generate carry those worker ids');
($rc, $out) = mesh('status', conn($a[0]), conn($a[1]));
is($rc, 0, 'the mesh is whole') or diag($out);
like($out, qr/worker 1 at .*\n(?:  .*\n)*  worker 1: given by the mesh\n/, 'status says the mesh gave the worker id');
is($a[0]->safe_psql('postgres', 'SELECT worker_id_source FROM snowflake.snowflake_status'), 'mesh',
	'and so does snowflake_status');

# a node that leaves keeps its claim: its id is retired
mesh_ok_or_die('auto2 leaves', 'leave', conn($a[1]), conn($a[0]));
$a[0]->poll_query_until('postgres', q{SELECT count(*) = 100 FROM events}) or die 'rows did not arrive';
my $old_max = $a[0]->safe_psql('postgres', 'SELECT max(id) FROM events WHERE (snowflake_decode(id)).worker_id = 2');

# a hand-set id that is claimed is refused, naming the holder: a member
# named (as before), or the node that left
my $hand = mesh_node('hand', 1);
($rc, $out, $err) = mesh('join', conn($hand), conn($a[0]));
is($rc, 1, 'a node set by hand to a member\'s id is refused');
like($err, qr/nodes .* and .*port=${\ $a[0]->port}.* both have worker id 1/, 'naming the member');
$hand->stop;
$hand = mesh_node('hand2', 2);
($rc, $out, $err) = mesh('join', conn($hand), conn($a[0]));
is($rc, 1, 'a node set by hand to a retired id is refused');
like($err, qr/worker id 2 is already claimed in the mesh by another system: system ${\ sysid($a[1])} \(node unnamed, which is not among the nodes named/,
	'naming the holder');
is($hand->safe_psql('postgres', 'SELECT count(*) FROM pg_subscription'), '0', 'and it subscribes to nobody');
($rc, $out) = mesh('status', conn($hand));
like($out, qr/  worker 2: set by hand\n/, 'status says the hand set its worker id');
$hand->stop;

# two joins at once, both without worker ids
my @two = map { mesh_start('--name', "auto$_", 'join', conn($a[ $_ - 1 ]), conn($a[0])) } 3, 4;
my @res = map { [ mesh_finish($_) ] } @two;
my @joined = grep { $res[$_][0] == 0 } 0, 1;
ok(@joined >= 1, 'of two joins at once without worker ids, one at least goes ahead')
  or diag(join "\n", map { "$_->[1]\n$_->[2]" } @res);
for my $i (grep { $res[$_][0] != 0 } 0, 1)
{
	like($res[$i][2], qr/in another change of the mesh|the nodes named are not the mesh/, 'the other is refused by the lock');
	# refused before it was given an id, or after: then its claim is on
	# the member already
	my $node = $a[ $i + 2 ];
	my $w = $node->safe_psql('postgres', q{SELECT current_setting('snowflake.worker_id')});
	note($w < 0 ? 'the refused join was given no id' : "the refused join was given worker id $w first");
	ok($w < 0 || claims($a[0]) =~ /(?:^| )$w:${\ sysid($node)}(?: |$)/,
		'the refused node has no worker id, or one the member claims for it');
	# run again, naming the member that joined meanwhile
	mesh_ok_or_die('and joins when run again', '--name', 'auto' . ($i + 3), 'join', conn($a[ $i + 2 ]), conn($a[0]),
		conn($a[ 2 + $joined[0] ]));
}
my @ids = map { worker($_) } @a[ 2, 3 ];
is(join(',', sort @ids), '3,4', 'they get distinct ids, not the retired 2');
my $want = '1:' . sysid($a[0]) . ' 2:' . sysid($a[1]) . ' '
  . join(' ', map { "$_->[0]:" . sysid($_->[1]) } sort { $a->[0] <=> $b->[0] } map { [ worker($_), $_ ] } @a[ 2, 3 ]);
is(join('|', map { claims($_) } @a[ 0, 2, 3 ]), join('|', ($want) x 3), 'every member holds both claims, and the retired one');

# the new holders' IDs lie above every ID of the retired worker id
is(join(' ', map { write_rows($_, 50) } @a[ 2, 3 ]), "$ids[0] $ids[1]", 'the new nodes generate under their ids');
is(join(',', map { $_->safe_psql('postgres', "SELECT min(id) > $old_max FROM events WHERE (snowflake_decode(id)).worker_id = " . worker($_)) } @a[ 2, 3 ]),
	't,t', 'every ID of the new holders lies above every ID of the retired worker id 2');
($rc, $out) = mesh('status', map { conn($_) } @a[ 0, 2, 3 ]);
is($rc, 0, 'the mesh of three is whole') or diag($out);
is(scalar(() = $out =~ /  worker \d: given by the mesh\n/g), 3, 'and every id there was given by the mesh');

# (last: the members' apply workers count the restart as an error)
$a[2]->restart;
is(worker($a[2]), $ids[0], 'a node given its id keeps it across a restart');
is(write_rows($a[2], 10), $ids[0], 'and generates under it');

sub mesh_ok_or_die
{
	my ($what, @args) = @_;
	my ($rc, $out, $err) = mesh(@args);
	is($rc, 0, $what) or die "stdout: $out\nstderr: $err\n";
	return;
}

$_->stop for @a;
done_testing();
