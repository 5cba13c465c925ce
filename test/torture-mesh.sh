#!/usr/bin/env bash
# test/torture-mesh.sh: `make torture-mesh`.  Plays the mesh's random
# histories (t/mesh_random_histories.pl) on new seeds, one after another:
# SEEDS of them (10 by default) from FIRST_SEED (1) on, each of STEPS
# steps (MESH_STEPS; the test's own default otherwise) and at most
# MESH_SECONDS seconds of steps, on PostgreSQL PG_MAJOR (17 by default) in
# its Debian chroot (test/chroot.sh, SUITE_PARTS=tap).  make test replays
# one fixed seed per version; this searches.  Each failing seed is named
# with the command that replays it, and the run ends with one line
# "torture-mesh: N passed, M failed" (seeds).
set -euo pipefail

SRC=$(cd "$(dirname "$0")/.." && pwd)
V=${PG_MAJOR:-17}
FIRST=${FIRST_SEED:-1}
COUNT=${SEEDS:-10}
LOGS=$(mktemp -d "${TMPDIR:-/tmp}/snowflake-torture-mesh.XXXXXX")
passed=0
failed=0
failing=()
for ((seed = FIRST; seed < FIRST + COUNT; seed++)); do
	log=$LOGS/seed-$seed.log
	echo "== mesh history, seed $seed, PostgreSQL $V"
	rc=0
	MESH_SEED=$seed MESH_STEPS=${STEPS:-${MESH_STEPS:-}} MESH_SECONDS=${MESH_SECONDS:-} \
		SUITE_PARTS=tap PROVE_TESTS=t/mesh_random_histories.pl \
		bash "$SRC/test/chroot.sh" "$V" >"$log" 2>&1 || rc=$?
	if [ "$rc" -eq 0 ] && grep -qE "^PostgreSQL $V: [0-9]+ passed, 0 failed$" "$log"; then
		passed=$((passed + 1))
		grep -E '^# mesh history [0-9]+: ' "$log" | sed 's/^# /  /' || true
	else
		failed=$((failed + 1))
		failing+=("$seed")
		grep -E '^not ok|^#   Failed|^# +[0-9]+ |violation' "$log" | head -n 40 || true
		echo "  seed $seed FAILED (log: $log); replay it with:"
		echo "    make torture-mesh PG_MAJOR=$V FIRST_SEED=$seed SEEDS=1${STEPS:+ STEPS=$STEPS}"
	fi
done
[ "$failed" -eq 0 ] && rm -rf "$LOGS"
[ ${#failing[@]} -eq 0 ] || echo "failing seeds: ${failing[*]}"
echo "torture-mesh: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
