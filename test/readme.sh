#!/usr/bin/env bash
# test/readme.sh: every ```sql block of README.md and of docs/ runs as
# pasted.  The blocks of README.md run in order (also those indented in a
# list) in one database; then those of each file of docs/, in the order of
# README's Contents, each file in its own copy of the database README left
# (its examples build on README's orders table).  Each block runs with psql
# (ON_ERROR_STOP) on a throwaway server set up as README recommends: the
# library preloaded, snowflake.worker_id = 7, and no snowflake in
# search_path (also wal_level = logical, for the publication of
# docs/multi-node.md, and a snowflake.opaque_key, as docs/text-ids.md sets
# one).  A block marked on the line before with
# "<!-- run by test/t/NAME.pl -->" is that test's to run, in its own
# setting, and is only counted here.  A block is a test.  Uses the
# installed extension (make && make install first).  Ends with one line:
# "readme: N passed, M failed".  Removes its files when every block passed,
# and otherwise says where they are.
. "$(dirname "$0")/lib.sh"

README=${README:-$SRC/README.md}
DOCS=$(dirname "$README")/docs

check_start readme

# extract FILE NAME: NAME-NNN.sql for each ```sql block of FILE, with
# NAME-NNN.line the line it starts on, and NAME-NNN.elsewhere for a block
# another test runs
extract() {
	awk -v out="$WORK" -v name="$2" '
		/^[[:space:]]*<!-- run by test\/t\/[^ ]+ -->[[:space:]]*$/ { marked = NR; next }
		/^[[:space:]]*```sql[[:space:]]*$/ { n++; f = sprintf("%s/%s-%03d", out, name, n);
			printf "%d\n", NR + 1 > (f ".line");
			if (marked == NR - 1) printf "" > (f ".elsewhere");
			inblock = 1; printf "" > (f ".sql"); next }
		inblock && /^[[:space:]]*```[[:space:]]*$/ { inblock = 0; close(f ".sql"); next }
		inblock { print >> (f ".sql") }
		END { if (inblock) { print "unterminated ```sql block" > "/dev/stderr"; exit 1 } }
	' "$1"
}

# the opaque form's key, as docs/text-ids.md has it set
start_recommended "$dir" "snowflake.worker_id = 7" "wal_level = logical" "fsync = off" \
	"snowflake.opaque_key = '$(printf '%064d' 0 | tr 0 5)'"

passed=0
failed=0
elsewhere=0
# run_blocks FILE NAME DB
run_blocks() {
	local file=$1 name=$2 db=$3 f b line
	extract "$file" "$name"
	chmod -R a+rX "$WORK"
	for f in "$WORK/$name"-[0-9]*.sql; do
		[ -e "$f" ] || continue
		b=${f%.sql}
		line=$(cat "$b.line")
		if [ -e "$b.elsewhere" ]; then
			elsewhere=$((elsewhere + 1))
		elif psql_at "$dir" -d "$db" -v ON_ERROR_STOP=1 -f "$f" </dev/null >"$b.out" 2>&1; then
			passed=$((passed + 1))
		else
			failed=$((failed + 1))
			echo "not ok: the sql block at ${file#"$SRC/"} line $line"
			sed 's/^/    /' "$b.out" | tail -n 15
		fi
	done
}

psql_at "$dir" -d postgres -qc 'CREATE DATABASE readme'
run_blocks "$README" readme readme
[ "$passed" -gt 0 ] || { echo "no sql block found in $README"; failed=$((failed + 1)); }

# docs/, in the order of README's Contents; a file it does not name fails
mapfile -t docs < <(grep -o '](docs/[a-z0-9-]*\.md[)#]' "$README" | sed 's/^](docs\///; s/\.md.$//' | awk '!seen[$0]++')
for f in "$DOCS"/*.md; do
	[ -e "$f" ] || continue
	n=$(basename "$f" .md)
	if ! printf '%s\n' "${docs[@]}" | grep -qx "$n"; then
		echo "not ok: README's Contents does not name docs/$n.md"
		failed=$((failed + 1))
	fi
done
for n in "${docs[@]}"; do
	if [ ! -f "$DOCS/$n.md" ]; then
		echo "not ok: README's Contents names docs/$n.md, which is not there"
		failed=$((failed + 1))
		continue
	fi
	db="doc_${n//-/_}"
	psql_at "$dir" -d postgres -qc "CREATE DATABASE $db TEMPLATE readme"
	run_blocks "$DOCS/$n.md" "$n" "$db"
done

[ "$elsewhere" -eq 0 ] || echo "$elsewhere blocks left to the tests that mark them"
check_end readme "$passed" "$failed" "each block, its output, the server log"
