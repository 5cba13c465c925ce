#!/usr/bin/env bash
# test/run.sh: `make test`.  Installs what is missing, builds and installs
# the extension, then runs the pg_regress tests on a throwaway server with
# the library preloaded, the not-preloaded test on one without it, and the
# TAP tests.  Ends with one line: "snowflake: N passed, M failed".
. "$(dirname "$0")/lib.sh"

install_deps
build_install

WORK=$(pg_workdir test)
# the tests read their files as postgres: give them a copy it can read
cp -r "$SRC/sql" "$SRC/expected" "$SRC/test" "$WORK/"
[ "$(id -u)" = 0 ] && chown -R postgres: "$WORK"

servers=()
cleanup() {
	for s in "${servers[@]}"; do stop_server "$s"; done
}
trap cleanup EXIT

passed=0
failed=0
REGRESS=$(sed -n 's/^REGRESS = //p' "$SRC/Makefile")
PG_REGRESS=$PGLIB/pgxs/src/test/regress/pg_regress

# regress NAME PRELOAD TESTS...
regress() {
	local name=$1 preload=$2 dir out rc=0 n
	shift 2
	dir=$(pg_workdir "$name")
	servers+=("$dir")
	say "pg_regress ($name): $*"
	start_server "$dir" "$preload" "snowflake.worker_id = 7" "fsync = off"
	out=$(cd "$WORK" && as_pg "$PG_REGRESS" --inputdir="$WORK" --outputdir="$WORK/$name" \
		--bindir="$PGBIN" --host="$dir" --port=5432 --user=postgres \
		--dbname=contrib_regression "$@" 2>&1) || rc=$?
	echo "$out"
	n=$#
	if [ $rc -eq 0 ]; then
		passed=$((passed + n))
	else
		local f
		f=$(echo "$out" | sed -n 's/.* \([0-9]*\) of [0-9]* tests failed.*/\1/p')
		f=${f:-$n}
		failed=$((failed + f))
		passed=$((passed + n - f))
		cat "$WORK/$name/regression.diffs" 2>/dev/null || true
		tail -n 30 "$dir/server.log"
	fi
	stop_server "$dir"
}

# shellcheck disable=SC2086
regress preloaded yes $REGRESS
regress not_preloaded no not_preloaded

say "TAP tests"
tap_out=$WORK/tap.out
rc=0
(cd "$WORK/test" && as_pg env PATH="$PGBIN:$PATH" PG_REGRESS="$PG_REGRESS" \
	TESTDIR="$WORK/test" PG_TEST_TIMEOUT_DEFAULT=300 \
	prove -I "$PGLIB/pgxs/src/test/perl" -I "$WORK/test/lib" ${PROVE_TESTS:-t/*.pl}) \
	2>&1 | tee "$tap_out" || rc=$?

tests=$(sed -n 's/^Files=[0-9]*, Tests=\([0-9]*\),.*/\1/p' "$tap_out")
tfail=$(sed -n 's/.*Failed \([0-9]*\)\/[0-9]* subtests.*/\1/p' "$tap_out" | awk "{s+=\$1} END {print s+0}")
tfail=${tfail:-0}
if ! grep -q '^Result: PASS' "$tap_out"; then
	[ "$tfail" -gt 0 ] || tfail=1
	for f in "$WORK"/test/tmp_check/log/*.log; do
		[ -f "$f" ] && { echo "--- $f"; tail -n 40 "$f"; }
	done
fi
passed=$((passed + ${tests:-0} - tfail))
failed=$((failed + tfail))

# A real JavaScript client: node-postgres from npm.
say "JavaScript client (node-postgres)"
dir=$(pg_workdir js)
servers+=("$dir")
start_server "$dir" yes "snowflake.worker_id = 7"
cp "$SRC/test/js/package.json" "$SRC/test/js/package-lock.json" "$SRC/test/js/json.test.mjs" "$WORK/"
if (cd "$WORK" && npm ci --no-audit --no-fund >"$WORK/npm.log" 2>&1 &&
	psql_at "$dir" -d postgres -qc 'CREATE EXTENSION snowflake' &&
	PGHOST=$dir PGPORT=5432 PGUSER=postgres PGDATABASE=postgres node --test json.test.mjs 2>&1 | tee "$WORK/js.out"); then :; fi
js_pass=$(sed -n 's/^# pass \([0-9]*\)/\1/p' "$WORK/js.out" 2>/dev/null)
js_fail=$(sed -n 's/^# fail \([0-9]*\)/\1/p' "$WORK/js.out" 2>/dev/null)
if [ -z "$js_pass" ]; then
	tail -n 20 "$WORK/npm.log"
	js_pass=0 js_fail=1
fi
passed=$((passed + js_pass))
failed=$((failed + js_fail))
stop_server "$dir"

# The Debian package: built, installed, and the regression suite run against it.
say "Debian package"
if DEB_OUT="$WORK" bash "$SRC/test/deb.sh" >"$WORK/deb.log" 2>&1; then
	grep -E 'install ok installed|All [0-9]+ tests passed|^package:' "$WORK/deb.log"
	echo "ok: postgresql-$PG_MAJOR-snowflake built, installed and tested"
	passed=$((passed + 1))
else
	tail -n 40 "$WORK/deb.log"
	failed=$((failed + 1))
fi

# The benchmark's smoke run proves the suite works; it asserts no timing.
say "benchmark suite, quick run"
if QUICK=1 BENCH_OUT="$WORK/bench" bash "$SRC/test/bench/run.sh" >"$WORK/bench.log" 2>&1 &&
	grep -q '^### Targets' "$WORK/bench/latest.md" &&
	[ "$(grep -c '^| ' "$WORK/bench/latest.md")" -ge 37 ]; then
	echo "ok: the suite measured every generator and wrote its report"
	passed=$((passed + 1))
else
	tail -n 30 "$WORK/bench.log"
	failed=$((failed + 1))
fi

echo
echo "snowflake: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
