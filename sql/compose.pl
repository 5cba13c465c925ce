#!/usr/bin/perl
# sql/compose.pl TEMPLATE SOURCE: an update script from its template and
# the one source of the current version's SQL (sql/snowflake.sql).  The
# template holds what only the update does (moving objects, dropping what
# changed shape, data it converts); a line "-- @copy NAME" takes the
# section of the source between "-- @begin NAME" and "-- @end NAME", with
# @extschema@ as the schema the control file fixes, and "-- @copy NAME
# or-replace" makes its CREATE FUNCTION a CREATE OR REPLACE FUNCTION (for
# a function the old version had).  So every object is defined once, in
# the source, and the update makes it as a fresh install does.  Fails on
# a section named but missing, or begun and not ended.
use strict;
use warnings;

my ($template, $source) = @ARGV;
die "usage: $0 TEMPLATE SOURCE\n" unless defined $source;

my $schema = 'snowflake';
my (%section, $open);
open(my $src, '<', $source) or die "$source: $!\n";
while (my $line = <$src>)
{
	if ($line =~ /^-- \@begin (\S+)\s*$/)
	{
		die "$source:$.: section $1 begins inside section $open\n" if defined $open;
		die "$source:$.: section $1 is there twice\n" if exists $section{$1};
		$open = $1;
		$section{$open} = '';
	}
	elsif ($line =~ /^-- \@end (\S+)\s*$/)
	{
		die "$source:$.: section $1 ends but " . ($open // 'none') . " is open\n"
		  unless defined $open && $open eq $1;
		undef $open;
	}
	elsif (defined $open)
	{
		$section{$open} .= $line;
	}
}
die "$source: section $open is not ended\n" if defined $open;
close $src;

open(my $tpl, '<', $template) or die "$template: $!\n";
my ($t, $s) = map { s{.*/}{}r } $template, $source;
print "-- Made by sql/compose.pl from sql/$t and sql/$s: change those.\n";
while (my $line = <$tpl>)
{
	if ($line =~ /^-- \@copy (\S+)(?: (or-replace))?\s*$/)
	{
		my ($name, $replace) = ($1, $2);
		die "$template:$.: no section $name in $source\n" unless exists $section{$name};
		my $text = $section{$name};
		$text =~ s/\@extschema\@/$schema/g;
		$text =~ s/^CREATE FUNCTION /CREATE OR REPLACE FUNCTION /mg if $replace;
		print $text;
	}
	else
	{
		print $line;
	}
}
close $tpl;
