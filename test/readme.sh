#!/usr/bin/env bash
# test/readme.sh: every ```sql block of README.md runs.  Takes the blocks
# in order (also those indented in a list) and runs each with psql (ON_ERROR_STOP) in one database of a
# throwaway server started like the others (library preloaded,
# snowflake.worker_id = 7, wal_level = logical for the publication the
# README shows).  A block is a test.  Uses the installed extension (make &&
# make install first).  Ends with one line: "readme: N passed, M failed".
# Removes its files when every block passed, and otherwise says where they
# are.
. "$(dirname "$0")/lib.sh"

README=${README:-$SRC/README.md}

check_start readme

# block-NNN.sql for each ```sql block, and block-NNN.line with the line of
# README.md it starts on
awk -v out="$WORK" '
	/^[[:space:]]*```sql[[:space:]]*$/ { n++; f = sprintf("%s/block-%03d.sql", out, n);
		printf "%d\n", NR + 1 > sprintf("%s/block-%03d.line", out, n);
		inblock = 1; printf "" > f; next }
	inblock && /^[[:space:]]*```[[:space:]]*$/ { inblock = 0; close(f); next }
	inblock { print >> f }
	END { if (inblock) { print "unterminated ```sql block" > "/dev/stderr"; exit 1 } }
' "$README"
chmod -R a+rX "$WORK"

start_server "$dir" yes "snowflake.worker_id = 7" "wal_level = logical" "fsync = off"
psql_at "$dir" -d postgres -qc 'CREATE DATABASE readme'

passed=0
failed=0
for f in "$WORK"/block-*.sql; do
	[ -e "$f" ] || continue
	b=${f%.sql}
	line=$(cat "$b.line")
	if psql_at "$dir" -d readme -v ON_ERROR_STOP=1 -f "$f" </dev/null >"$b.out" 2>&1; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		echo "not ok: the sql block at README.md line $line"
		sed 's/^/    /' "$b.out" | tail -n 15
	fi
done

[ "$passed" -gt 0 ] || { echo "no sql block found in $README"; failed=$((failed + 1)); }
check_end readme "$passed" "$failed" "each block, its output, the server log"
