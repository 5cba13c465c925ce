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
