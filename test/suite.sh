#!/usr/bin/env bash
# test/suite.sh: the tests of one PostgreSQL version (PG_MAJOR), the same on
# the host (test/run.sh) and inside a chroot (test/chroot.sh).  Builds a
# clean copy of the sources with that version's pg_config (a build with a
# warning counts as a failure), installs it, runs the pg_regress tests on a
# throwaway server with the library preloaded and the not-preloaded test on
# one without it, the isolation specs on a third server with the library
# preloaded, the TAP tests, the benchmark's smoke run, and builds, installs
# and tests the Debian package.  Expects its packages to be there
# already.  Ends with one line:
# "PostgreSQL NN: N passed, M failed".  Removes its files when everything
# passed, and otherwise says where they are.  SUITE_PARTS names the parts
# to run after the build (default: all of regress isolation tap bench deb),
# for a quicker run while working on one of them.  The build checks the
# formats of messages (-Wformat=2 -Wformat-nonliteral: a format that is not
# a literal is a warning).  SANITIZE=1 (make sanitize) builds the extension
# with AddressSanitizer and UndefinedBehaviorSanitizer, runs every server
# with their runtime, and fails on any report of theirs.
. "$(dirname "$0")/lib.sh"

WORK=$(pg_workdir "pg$PG_MAJOR")
# everything the suite and its tools make goes under WORK
mkdir -m 1777 "$WORK/tmp"
export TMPDIR=$WORK/tmp
# where WORK is seen from outside a chroot
SHOWN=${SUITE_HOST_ROOT:-}$WORK

servers=()
cleanup() {
	for s in "${servers[@]}"; do stop_server "$s"; done
}
trap cleanup EXIT

SUITE_PARTS=${SUITE_PARTS:-regress isolation tap bench deb}
part() { [[ " $SUITE_PARTS " == *" $1 "* ]]; }

passed=0
failed=0
parts=()
finish() {
	cleanup
	servers=()
	echo
	echo "PostgreSQL $PG_MAJOR, $(IFS=';'; echo "${parts[*]}" | sed 's/;/; /g')"
	if [ "$failed" -eq 0 ]; then
		rm -rf "$WORK"
	else
		echo "PostgreSQL $PG_MAJOR: the files of this run are in $SHOWN"
	fi
	echo "PostgreSQL $PG_MAJOR: $passed passed, $failed failed"
	[ "$failed" -eq 0 ]
	exit
}

# 1. build: the same sources, this version's headers, no warnings
say "PostgreSQL $PG_MAJOR: building ($("$PGBIN/pg_config" --version))"
B=$WORK/build
copy_sources "$B"
COPT="-Wformat=2 -Wformat-nonliteral"

# SANITIZE=1: the library instrumented; the server is not, so the
# sanitizers' runtime must be loaded before anything else in every server
# process: LD_PRELOAD in the postmaster's environment, which its children
# inherit.  The TAP tests start their servers through pg_ctl, pg_upgrade
# and the mesh's script, so there it is in the environment of prove and
# everything it runs (the runtime does nothing to a program that is not
# instrumented but replace its malloc and check what libc is given).
# PostgreSQL frees its memory contexts at exit, not before: no leak
# detection.  Where a test fakes the clock, libfaketime comes before the
# runtime (test/lib/SnowflakeTest.pm), which the runtime must be told to
# accept.  A report ends the process (abort_on_error: the postmaster
# sees a crash, not a session that quit); AddressSanitizer's goes to a file
# in SAN_DIR, UndefinedBehaviorSanitizer's (gcc's is a runtime of its own,
# which writes to stderr) to the server's log, and the run reads both at
# its end.
# PostgreSQL compiles with -fwrapv, under which a signed overflow is
# defined and UBSan does not look for one: -fno-wrapv (after it) makes the
# library's arithmetic checked as C defines it.
SAN_ENV=()
if [ "${SANITIZE:-}" = 1 ]; then
	COPT="$COPT -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -fno-wrapv"
	SAN_DIR=$WORK/sanitizer
	mkdir -m 1777 "$SAN_DIR"
	san_lib=$(gcc -print-file-name=libasan.so)
	[ -e "$san_lib" ] || {
		echo "not ok: SANITIZE=1 needs gcc's libasan.so, and there is none"
		failed=$((failed + 1))
		finish
	}
	SAN_ENV=("LD_PRELOAD=$san_lib"
		"ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:verify_asan_link_order=0:log_path=$SAN_DIR/asan"
		"UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:abort_on_error=1")
	SERVER_ENV=("${SAN_ENV[@]}")
fi
if make -C "$B" PG_CONFIG="$PGBIN/pg_config" COPT="$COPT" >"$WORK/build.log" 2>&1; then
	warnings=$(grep -c 'warning:' "$WORK/build.log" || true)
	if [ "$warnings" -eq 0 ]; then
		echo "ok: built without warnings"
		passed=$((passed + 1))
	else
		grep -A 4 'warning:' "$WORK/build.log"
		echo "not ok: $warnings warnings"
		failed=$((failed + 1))
	fi
	parts+=("build: $warnings warnings ($("$PGBIN/pg_config" --version | sed "s/ (.*//"))")
	as_root make -s -C "$B" PG_CONFIG="$PGBIN/pg_config" COPT="$COPT" install >/dev/null
else
	grep -E -B 2 -A 4 'error|Error' "$WORK/build.log" | head -n 60
	echo "not ok: the build failed"
	failed=$((failed + 1))
	parts+=("build: FAILED")
	finish
fi
# the tests read their files as postgres
[ "$(id -u)" = 0 ] && chown -R postgres: "$B"

# 2. pg_regress, then pg_isolation_regress's specs
REGRESS=$(sed -n 's/^REGRESS = //p' "$B/Makefile")
ISOLATION=$(sed -n 's/^ISOLATION = //p' "$B/Makefile")
ISOLATION_OPTS=$(sed -n 's/^ISOLATION_OPTS = //p' "$B/Makefile")
PG_REGRESS=$PGLIB/pgxs/src/test/regress/pg_regress
PG_ISOLATION_REGRESS=$PGLIB/pgxs/src/test/isolation/pg_isolation_regress
rpassed=0
rfailed=0

# regress NAME PRELOAD DRIVER OPTIONS TESTS...: the tests on a throwaway
# server of their own (two-phase commit allowed, for the claims' spec)
regress() {
	local name=$1 preload=$2 driver=$3 opts=$4 dir out rc=0 n f
	shift 4
	dir=$(pg_workdir "$name")
	servers+=("$dir")
	say "PostgreSQL $PG_MAJOR: $(basename "$driver") ($name): $*"
	start_server "$dir" "$preload" "snowflake.worker_id = 7" "fsync = off" \
		"max_prepared_transactions = 4"
	# the runtime reached the server, or its silence would mean nothing
	if [ ${#SAN_ENV[@]} -gt 0 ] &&
		! grep -q libasan "/proc/$(head -n 1 "$dir/data/postmaster.pid")/maps"; then
		echo "not ok: the sanitizers' runtime is not loaded in the server ($name)"
		failed=$((failed + 1))
	fi
	# shellcheck disable=SC2086
	out=$(cd "$B" && as_pg "$driver" --inputdir="$B/test" --outputdir="$WORK/$name" \
		--bindir="$PGBIN" --host="$dir" --port=5432 --user=postgres \
		$opts "$@" 2>&1) || rc=$?
	echo "$out"
	n=$#
	if [ $rc -eq 0 ]; then
		rpassed=$((rpassed + n))
	else
		f=$(echo "$out" | sed -n 's/.* \([0-9]*\) of [0-9]* tests failed.*/\1/p')
		f=${f:-$n}
		rfailed=$((rfailed + f))
		rpassed=$((rpassed + n - f))
		cat "$WORK/$name/regression.diffs" 2>/dev/null || true
		tail -n 30 "$dir/server.log"
	fi
	stop_server "$dir"
}

if part regress; then
	# shellcheck disable=SC2086
	regress preloaded yes "$PG_REGRESS" --dbname=contrib_regression $REGRESS
	regress not_preloaded no "$PG_REGRESS" --dbname=contrib_regression not_preloaded
	passed=$((passed + rpassed))
	failed=$((failed + rfailed))
	parts+=("pg_regress: $rpassed of $((rpassed + rfailed)) passed")
	rpassed=0
	rfailed=0
fi
if part isolation; then
	# shellcheck disable=SC2086
	regress isolation yes "$PG_ISOLATION_REGRESS" "--dbname=isolation_regression $ISOLATION_OPTS" $ISOLATION
	passed=$((passed + rpassed))
	failed=$((failed + rfailed))
	parts+=("isolation: $rpassed of $((rpassed + rfailed)) passed")
fi

# 3. TAP tests.  PostgreSQL 16 and later take the data and log directories
# from TESTDATADIR and TESTLOGDIR (without them, relative paths, which
# neither libfaketime's clock file nor archive_command can use); 15 from
# TESTDIR.
if part tap; then
	say "PostgreSQL $PG_MAJOR: TAP tests"
	need_locale de_DE.UTF-8
	T=$B/test
	tap_out=$WORK/tap.out
	# each file stops after 20 minutes (the longest take a few, also on a
	# busy machine), unless it plays a search of a length given
	file_seconds=${SNOWFLAKE_FILE_SECONDS:-}
	if [ -z "$file_seconds" ]; then
		file_seconds=1200
		[ -z "${MESH_SECONDS:-}${MESH_STEPS:-}${TORTURE_STEPS:-}${TORTURE_FIRST_SEED:-}" ] &&
			[ "${TORTURE_SEEDS:-0}" -le 4 ] || file_seconds=0
	fi
	rc=0
	# shellcheck disable=SC2086
	(cd "$T" && as_pg env ${SAN_ENV[@]+"${SAN_ENV[@]}"} PATH="$PGBIN:$PATH" PG_REGRESS="$PG_REGRESS" \
		TESTDIR="$T" TESTDATADIR="$T/tmp_check" TESTLOGDIR="$T/tmp_check/log" \
		PG_TEST_TIMEOUT_DEFAULT=300 SNOWFLAKE_FILE_SECONDS="$file_seconds" \
		prove --timer -I "$PGLIB/pgxs/src/test/perl" -I "$T/lib" ${PROVE_TESTS:-t/*.pl}) \
		2>&1 | tee "$tap_out" || rc=$?

	tests=$(sed -n 's/^Files=[0-9]*, Tests=\([0-9]*\),.*/\1/p' "$tap_out")
	tests=${tests:-0}
	tfail=$(sed -n 's/.*Failed \([0-9]*\)\/[0-9]* subtests.*/\1/p' "$tap_out" | awk '{s+=$1} END {print s+0}')
	if ! grep -q '^Result: PASS' "$tap_out"; then
		[ "$tfail" -gt 0 ] || tfail=1
		for f in "$T"/tmp_check/log/*.log; do
			[ -f "$f" ] && { echo "--- $f"; tail -n 40 "$f"; }
		done
	fi
	[ "$tests" -ge "$tfail" ] || tests=$tfail
	passed=$((passed + tests - tfail))
	failed=$((failed + tfail))
	parts+=("TAP: $((tests - tfail)) of $tests passed")
	# which file failed and how, and the seeds that replay the random
	# histories, in the summary CI keeps when the log is gone
	if [ "$tfail" -gt 0 ]; then
		while IFS= read -r line; do
			parts+=("TAP failed: $line")
		done < <(grep -E "^(t/[0-9a-z_]+\.pl +\(Wstat|#   Failed test '|# Looks like you|# .*replay)" "$tap_out" |
			cut -c1-200 | head -n 12 || true)
	fi
fi

# the sanitizers' reports: their own files, and the servers' logs (where a
# report written before log_path took effect, or the crash it caused,
# shows)
if [ ${#SAN_ENV[@]} -gt 0 ]; then
	say "PostgreSQL $PG_MAJOR: sanitizer reports"
	san_pattern='ERROR: AddressSanitizer|runtime error:'
	mapfile -t san_files < <(grep -rlE "$san_pattern" "$SAN_DIR" "$WORK"/tmp/snowflake-*/server.log \
		"$B/test/tmp_check/log" 2>/dev/null | sort || true)
	if [ ${#san_files[@]} -eq 0 ]; then
		echo "ok: no sanitizer reports"
		passed=$((passed + 1))
	else
		for f in "${san_files[@]}"; do
			echo "--- ${SUITE_HOST_ROOT:-}$f"
			grep -E -A 40 "$san_pattern" "$f" | head -n 80
		done
		echo "not ok: sanitizer reports in ${#san_files[@]} files"
		failed=$((failed + 1))
	fi
	parts+=("sanitizers: ${#san_files[@]} files with reports")
fi

# 4. the benchmark's smoke run: the whole suite, shortened, on this
# version.  It asserts that every section ran and is in the report, and no
# timing.
if part bench; then
	say "PostgreSQL $PG_MAJOR: benchmark suite, quick run"
	# bench_report_ok REPORT: every section there, the UUIDv7 peer this
	# version has (its own uuidv7() from 18 on), and the text forms measured.  A pgbench run that reports
	# an error stops the suite; one that a busy machine let finish nothing in
	# its second is no failure of the code.
	bench_report_ok() {
		local md=$1 h uv7='UUIDv7 in SQL'
		[ "$PG_MAJOR" -lt 18 ] || uv7='uuidv7()'
		for h in 'Bulk generation, one backend' 'Concurrent generation' \
			'Single-row inserts, synchronous_commit = on' 'Single-row inserts, synchronous_commit = off' \
			'Primary key index after' 'Bulk load of' 'Blocks of IDs' 'IDs as text, cost per call' 'Targets'; do
			grep -q "^### $h" "$md" || { echo "not ok: the report has no section \"$h\""; return 1; }
		done
		grep -qF "| $uv7 |" "$md" || { echo "not ok: the report has no row for $uv7"; return 1; }
		grep -qF '| snowflake_base32(id) |' "$md" || { echo "not ok: the report has no row for snowflake_base32(id)"; return 1; }
	}
	if QUICK=1 BENCH_OUT="$WORK/bench" bash "$B/test/bench/run.sh" >"$WORK/bench.log" 2>&1 &&
		bench_report_ok "$WORK/bench/latest.md"; then
		echo "ok: the benchmark ran every section and wrote its report"
		passed=$((passed + 1))
		parts+=("benchmark smoke run: ok")
	else
		tail -n 30 "$WORK/bench.log"
		echo "not ok: the benchmark's smoke run"
		failed=$((failed + 1))
		parts+=("benchmark smoke run: FAILED")
	fi
fi

# 5. the Debian package: built for this version, installed, and the
# regression suite run against it
if part deb; then
	say "PostgreSQL $PG_MAJOR: Debian package"
	if DEB_OUT="$WORK" bash "$SRC/test/deb.sh" >"$WORK/deb.log" 2>&1; then
		grep -E 'install ok installed|All [0-9]+ tests passed|^package:' "$WORK/deb.log"
		echo "ok: postgresql-$PG_MAJOR-snowflake built, installed and tested"
		passed=$((passed + 1))
		parts+=("Debian package: ok")
	else
		tail -n 40 "$WORK/deb.log"
		echo "not ok: postgresql-$PG_MAJOR-snowflake"
		failed=$((failed + 1))
		parts+=("Debian package: FAILED")
	fi
fi

finish
