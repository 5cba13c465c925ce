#!/usr/bin/env bash
# test/messages.sh: the catalogue of the extension's messages (make
# po/snowflake.pot, xgettext with PostgreSQL's keywords) holds every
# message the sources raise.  Every call of errmsg(), errmsg_plural(),
# errdetail(), errdetail_log(), errdetail_plural(), errhint(), errcontext(),
# GUC_check_errmsg(), GUC_check_errdetail(), GUC_check_errhint(),
# gettext_noop() and _() in src/*.c passes a string literal (not a
# variable, nor a macro, which xgettext cannot see into), and the
# catalogue has that literal at that place; msgfmt --check accepts the
# catalogue, so every format in it is one.  Runs on a copy of the sources;
# needs xgettext and msgfmt (Debian: gettext).  Ends with one line:
# "messages: N passed, M failed".
. "$(dirname "$0")/lib.sh"

work=$(mktemp -d "${TMPDIR:-/tmp}/snowflake-messages.XXXXXX")
trap 'rm -rf "$work"' EXIT
copy_sources "$work/src"

passed=0
failed=0
check() {
	if [ "$1" = ok ]; then
		echo "ok: $2"
		passed=$((passed + 1))
	else
		echo "not ok: $2"
		failed=$((failed + 1))
	fi
}

if make -s -C "$work/src" po/snowflake.pot >"$work/make.log" 2>&1; then
	check ok "make po/snowflake.pot writes the catalogue"
else
	cat "$work/make.log"
	check no "make po/snowflake.pot writes the catalogue"
	echo "messages: $passed passed, $failed failed"
	exit 1
fi
pot=$work/src/po/snowflake.pot

if msgfmt --check -o /dev/null "$pot" 2>"$work/msgfmt.log"; then
	check ok "msgfmt --check accepts it"
else
	cat "$work/msgfmt.log"
	check no "msgfmt --check accepts it"
fi

# Each call site: the line of its first argument, which must be a string
# literal, and that line among the catalogue's references.
out=$(cd "$work/src" && perl -e '
	my %ref;
	open my $p, "<", "po/snowflake.pot" or die;
	while (<$p>) { $ref{$_} = 1 for /(src\/\S+:\d+)/g }
	my $words = qr/\b(errmsg|errmsg_plural|errdetail|errdetail_log|errdetail_plural|errhint|errcontext|GUC_check_errmsg|GUC_check_errdetail|GUC_check_errhint|gettext_noop|_)\s*\(/;
	my ($sites, @bad) = (0);
	for my $f (sort glob "src/*.c") {
		open my $h, "<", $f or die; local $/; my $c = <$h>;
		# comments, string and character literals blanked, lines kept
		(my $code = $c) =~ s{/\*.*?\*/|//[^\n]*|"(?:[^"\\\n]|\\.)*"|\x27(?:[^\x27\\\n]|\\.)*\x27}{
			my $t = $&; $t =~ tr/\n/ /c; $t =~ /^"/ ? "\"" . substr($t, 1, -1) . "\"" : $t }gse;
		while ($code =~ /$words/g) {
			my ($word, $at) = ($1, pos($code));
			$sites++;
			# the line of the first argument, where xgettext places it
			my ($gap, $arg) = substr($c, $at) =~ /^(\s*)(.)/s;
			my $line = 1 + (() = (substr($c, 0, $at) . $gap) =~ /\n/g);
			if ($arg ne "\"") { push @bad, "$f:$line: $word() is not given a string literal"; next }
			push @bad, "$f:$line: the catalogue has no message of $word() here" unless $ref{"$f:$line"};
		}
	}
	print "sites $sites\n";
	print "bad $_\n" for @bad;
')
sites=$(echo "$out" | sed -n 's/^sites //p')
bad=$(echo "$out" | sed -n 's/^bad //p')
if [ -z "$bad" ] && [ "${sites:-0}" -gt 0 ]; then
	check ok "the catalogue holds the message of each of the $sites calls that raise one"
else
	echo "$bad"
	check no "the catalogue holds the message of each of the ${sites:-0} calls that raise one"
fi
echo "messages: $(grep -c '^msgid "[^"]' "$pot") messages in the catalogue"
echo "messages: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
