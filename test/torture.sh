#!/usr/bin/env bash
# test/torture.sh: `make torture`.  Plays SEEDS random fault histories (100
# by default) of STEPS steps (50) from seed FIRST_SEED (1) on, with the
# checker of t/model_fault_histories.pl, on this machine's PostgreSQL (PG_MAJOR).
# Every kind of event is dealt to the histories in turn; FORCE (a list of
# kinds, comma-separated) gives each history those instead.  A failing
# history prints the command that replays it:
#   make torture FIRST_SEED=<seed> SEEDS=1 STEPS=<steps> FORCE=<kinds>
# Ends with the checker's totals (histories, operations, faults, IDs,
# refusals with cause and without, releases judged, violations) and one
# line "torture: N passed, M failed".
. "$(dirname "$0")/lib.sh"

install_deps
build_install

WORK=$(pg_workdir torture)
cp -r "$SRC/test" "$WORK/"
[ "$(id -u)" = 0 ] && chown -R postgres: "$WORK"
T=$WORK/test
say "torture: ${SEEDS:-100} histories of ${STEPS:-50} steps from seed ${FIRST_SEED:-1}"
rc=0
(cd "$T" && as_pg env PATH="$PGBIN:$PATH" PG_REGRESS="$PGLIB/pgxs/src/test/regress/pg_regress" \
	TESTDIR="$T" TESTDATADIR="$T/tmp_check" \
	TESTLOGDIR="$T/tmp_check/log" PG_TEST_TIMEOUT_DEFAULT=300 \
	TORTURE_SEEDS="${SEEDS:-100}" TORTURE_STEPS="${STEPS:-50}" \
	TORTURE_FIRST_SEED="${FIRST_SEED:-1}" TORTURE_VERBOSE="${VERBOSE:-}" \
	${FORCE+TORTURE_FORCE="$FORCE"} \
	prove -v -I "$PGLIB/pgxs/src/test/perl" -I "$T/lib" t/model_fault_histories.pl) \
	>"$WORK/torture.out" 2>&1 || rc=$?
# the failures and totals; each history's operations and judgements are
# in torture.out and the test's log
grep -E '^(not ok|#)' "$WORK/torture.out" | grep -vE '^# +[0-9]+ |^# history [0-9]+: ' || true
n=$(grep -c '^ok ' "$WORK/torture.out" || true)
f=$(grep -c '^not ok ' "$WORK/torture.out" || true)
[ "$rc" -eq 0 ] || [ "$f" -gt 0 ] || f=1
if [ "$rc" -eq 0 ]; then
	rm -rf "$WORK"
else
	echo "the files of this run are in $WORK"
fi
echo "torture: $n passed, $f failed"
[ "$rc" -eq 0 ]
