# SnowflakeTest: nodes with the extension preloaded, optionally under a
# clock that the test moves with libfaketime.
package SnowflakeTest;

use strict;
use warnings;
use Exporter 'import';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;

our @EXPORT = qw(snowflake_node start_faked set_clock_offset);

my $libfaketime = (glob('/usr/lib/*/faketime/libfaketime.so.1'))[0];

# snowflake_node(NAME, worker_id => N, conf => "extra lines", %init_opts)
sub snowflake_node
{
	my ($name, %opts) = @_;
	my $worker = delete $opts{worker_id} // 1;
	my $conf = delete $opts{conf} // '';
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init(%opts);
	$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'snowflake'
snowflake.worker_id = $worker
$conf
});
	return $node;
}

# The file libfaketime reads on every clock call of the server.
sub clock_file
{
	my ($node) = @_;
	return $node->basedir . '/faketime';
}

# Move the server's clock: OFFSET as libfaketime takes it ("+0", "-5",
# "-1h"); seconds may have decimals.
sub set_clock_offset
{
	my ($node, $offset) = @_;
	my $file = clock_file($node);
	open my $fh, '>', "$file.tmp" or die "cannot write $file.tmp: $!";
	print $fh "$offset\n";
	close $fh;
	rename "$file.tmp", $file or die "cannot rename to $file: $!";
	return;
}

# Start the node with libfaketime preloaded into the server only.
sub start_faked
{
	my ($node, $offset, %start_opts) = @_;
	die "libfaketime is not installed (Debian package faketime)"
	  unless $libfaketime;
	set_clock_offset($node, $offset // '+0');
	local $ENV{LD_PRELOAD} = $libfaketime;
	local $ENV{FAKETIME_TIMESTAMP_FILE} = clock_file($node);
	local $ENV{FAKETIME_NO_CACHE} = '1';
	# keep the server's own timers (checkpoints, timeouts) on real time
	local $ENV{FAKETIME_DONT_FAKE_MONOTONIC} = '1';
	return $node->start(%start_opts);
}

1;
