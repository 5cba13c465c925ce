#!/usr/bin/env bash
# test/text/run.sh [BINDIR]: IDs as text with the tools teams use, as
# docs/text-ids.md has them: npm's base32 and base62 libraries reading and
# writing the server's forms, and the recipes for node-postgres and Kysely
# (the versions package-lock.json pins, installed with npm ci); Django,
# SQLAlchemy with Pydantic, Active Record and Go with lib/pq from Debian.
# Starts a throwaway server (library preloaded, snowflake.worker_id = 7, an
# opaque key) and gives each tool a database of its own, owned by the role
# app, whose sessions have PostgreSQL's default search_path, without
# snowflake; where the server has ICU, the databases collate in Czech,
# where "ch" sorts after "h", so that the recipes must keep the IDs' order
# in a collation that would not.  Uses the installed extension of PG_MAJOR, or of the server in
# BINDIR.  Prints a line per test and ends with one line:
# "text: N passed, M failed".  Removes its files when every test passed,
# and otherwise says where they are.
. "$(dirname "$0")/../lib.sh"

if [ -n "${1:-}" ]; then
	PGBIN=$1
	PGLIB=$("$PGBIN/pg_config" --pkglibdir)
fi
# Debian's python3, which sees Debian's packages
PYTHON=/usr/bin/python3
NEED_NODE=1 install_deps python3-sqlalchemy python3-psycopg2 python3-django python3-pydantic \
	ruby-activerecord ruby-pg golang-go golang-github-lib-pq-dev

t0=$(date +%s)
check_start text

passed=0
failed=0
fail() {
	echo "not ok - $*"
	failed=$((failed + 1))
}

cp -r "$SRC"/test/text/{package.json,package-lock.json,*.mjs,*.py,*.rb,text_shop} "$SRC/test/orm/common.py" "$WORK/"
mkdir -p "$WORK/go/src"
cp -r "$SRC/test/text/gorecipe" "$WORK/go/src/"
if ! (cd "$WORK" && npm ci --no-audit --no-fund >"$WORK/npm.log" 2>&1); then
	tail -n 20 "$WORK/npm.log"
	fail "npm ci"
fi

start_server "$dir" yes "snowflake.worker_id = 7" "fsync = off" \
	"snowflake.opaque_key = '$(printf '%064d' 0 | tr 0 a)'"
tools="js django sqlalchemy rails go"
czech=
if [ "$(psql_at "$dir" -d postgres -Atc "SELECT count(*) FROM pg_collation WHERE collname = 'cs-CZ-x-icu'")" -gt 0 ]; then
	czech="TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C' LOCALE_PROVIDER icu ICU_LOCALE 'cs-CZ'"
fi
{
	echo "CREATE ROLE app LOGIN;"
	echo 'ALTER ROLE app SET search_path = "$user", public;'
	for db in $tools; do
		echo "CREATE DATABASE $db OWNER app $czech;"
		echo "\\c $db"
		echo "CREATE EXTENSION snowflake;"
	done
} | psql_at "$dir" -d postgres -q -v ON_ERROR_STOP=1 -f - >"$WORK/setup.log" 2>&1 ||
	{ cat "$WORK/setup.log"; fail "setting up the server"; }

# run TOOL COMMAND...: the tool's TAP output, its lines "ok N - name"
# shown as "ok - TOOL: name", counted from its "# pass N" and "# fail N"
run() {
	local tool=$1 out=$WORK/$1.out p f
	shift
	(cd "$WORK" && PGHOST=$dir PGPORT=5432 PGUSER=app PGDATABASE=$tool "$@") >"$out" 2>&1 || true
	sed -n -E "s/^(not )?ok [0-9]+ - /\\1ok - $tool: /p" "$out"
	p=$(sed -n 's/^# pass \([0-9]*\)$/\1/p' "$out")
	f=$(sed -n 's/^# fail \([0-9]*\)$/\1/p' "$out")
	if [ -z "$p" ] || [ -z "$f" ]; then
		fail "$tool: no result"
		f=1 p=0
	fi
	[ "$f" -eq 0 ] || sed 's/^/    /' "$out" | tail -n 60
	passed=$((passed + p))
	failed=$((failed + f))
}

run js node --test --test-reporter=tap text.test.mjs
run django "$PYTHON" django_test.py
run sqlalchemy "$PYTHON" sqlalchemy_test.py
run rails ruby rails_test.rb
# Go without modules: lib/pq from Debian's source tree
run go env GO111MODULE=off GOPATH="$WORK/go:/usr/share/gocode" GOCACHE="$WORK/go/cache" \
	sh -c 'cd go/src/gorecipe && go run .'

echo "text: ran in $(($(date +%s) - t0)) s"
check_end text "$passed" "$failed" "each tool's output, the server log"
