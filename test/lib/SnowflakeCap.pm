# SnowflakeCap: a time limit for one TAP file.  SnowflakeTest loads it (so
# every file does); test/suite.sh sets SNOWFLAKE_FILE_SECONDS, so that a file
# whose servers stopped answering fails within that time and the suite goes
# on, instead of each of its checks waiting out its own timeout in turn.
# Forked processes do not inherit the alarm; Cluster.pm's END blocks stop
# the file's servers as after any other death.
package SnowflakeCap;

use strict;
use warnings;

my $cap = $ENV{SNOWFLAKE_FILE_SECONDS} // 0;
if ($cap =~ /^[0-9]+$/ && $cap > 0)
{
	$SIG{ALRM} = sub {
		die "$0 ran past SNOWFLAKE_FILE_SECONDS ($cap s): stopped\n";
	};
	alarm $cap;
}

1;
