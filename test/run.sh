#!/usr/bin/env bash
# test/run.sh: `make test`.  Runs test/suite.sh (build without warnings,
# pg_regress with and without the library preloaded, isolation specs, TAP
# tests, the benchmark's smoke run, the Debian package) on every PostgreSQL
# version in PG_VERSIONS (default: 15 16 17 18 19): on the host's own
# PostgreSQL (PG_MAJOR, 15 on Debian 12) directly, and on each other
# version inside a Debian chroot that has it (test/chroot.sh; 16 from the
# PostgreSQL project's packages where apt.postgresql.org can be reached,
# otherwise built from ../shared/pg16; without either it is skipped, and
# under CI that is a failure).  On the host's version also the extras: the
# JavaScript client test, the catalogue of the messages, the SQL of
# README.md and docs/, make demo's SQL, the ORMs and ID libraries
# (test/orm), IDs as text with npm's libraries and each stack's recipe
# (test/text), the ShardingSphere layouts against
# ShardingSphere's algorithm in a JVM, and the stacks of docs/stacks.md:
# Patroni on etcd, pgBackRest and PgBouncer (test/stacks) (EXTRAS=no
# leaves them out).  JOBS versions run at once (2 by default; each one's
# output is printed whole when it ends).  Says per version how many
# passed, and ends with one line: "snowflake: N passed, M failed".
. "$(dirname "$0")/lib.sh"

PG_VERSIONS=${PG_VERSIONS:-15 16 17 18 19}
JOBS=${JOBS:-2}
EXTRAS=${EXTRAS:-yes}
RUN=$(mktemp -d "${TMPDIR:-/tmp}/snowflake-run.XXXXXX")
chmod 755 "$RUN"

host=no
chroots=no
for v in $PG_VERSIONS; do
	if [ "$v" = "$PG_MAJOR" ]; then host=yes; else chroots=yes; fi
done

# Everything the host's apt installs comes first, so that no two jobs wait
# on its lock.
if [ $host = yes ]; then
	pkgs=()
	# the Debian package's build tools, where the suite builds it
	[[ " ${SUITE_PARTS:-deb} " != *" deb "* ]] || pkgs+=(debhelper postgresql-server-dev-all dpkg-dev fakeroot)
	# xgettext and msgfmt for the extras' check of the message catalogue
	[ "$EXTRAS" != yes ] || pkgs+=(gettext)
	# node and npm for the extras' JavaScript client
	NEED_NODE=$([ "$EXTRAS" = yes ] && echo 1 || echo 0) install_deps "${pkgs[@]}"
fi
if [ $chroots = yes ] && ! command -v mmdebstrap >/dev/null; then
	say "installing mmdebstrap"
	as_root apt-get update -qq
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null
fi

# the host's extras, after its suite, in the same job
host_extras() {
if [ $host = yes ]; then
	WORK=$(pg_workdir test)
	# everything they make goes under WORK
	mkdir -m 1777 "$WORK/tmp"
	export TMPDIR=$WORK/tmp
	servers=()
	stop_all() {
		local s
		for s in "${servers[@]}"; do stop_server "$s"; done
	}
	trap stop_all EXIT
	xpassed=0
	xfailed=0

	# A real JavaScript client: node-postgres from npm.
	say "JavaScript client (node-postgres)"
	dir=$(pg_workdir js)
	servers+=("$dir")
	start_server "$dir" yes "snowflake.worker_id = 7"
	cp "$SRC/test/js/package.json" "$SRC/test/js/package-lock.json" "$SRC/test/js/json.test.mjs" "$WORK/"
	if (cd "$WORK" && npm ci --no-audit --no-fund >"$WORK/npm.log" 2>&1 &&
		psql_at "$dir" -d postgres -qc 'CREATE EXTENSION snowflake' &&
		PGHOST=$dir PGPORT=5432 PGUSER=postgres PGDATABASE=postgres node --test json.test.mjs 2>&1 | tee "$WORK/js.out"); then :; fi
	# no js.out when npm ci failed: counted as a failure below, not an exit
	js_pass=$(sed -n 's/^# pass \([0-9]*\)/\1/p' "$WORK/js.out" 2>/dev/null || true)
	js_fail=$(sed -n 's/^# fail \([0-9]*\)/\1/p' "$WORK/js.out" 2>/dev/null || true)
	if [ -z "$js_pass" ]; then
		tail -n 20 "$WORK/npm.log"
		js_pass=0 js_fail=1
	fi
	xpassed=$((xpassed + js_pass))
	xfailed=$((xfailed + js_fail))
	stop_server "$dir"

	# extra LABEL NAME COMMAND...: a check on the host's version whose last
	# line is "NAME: N passed, M failed", added to the totals
	extra() {
		local label=$1 name=$2 line
		shift 2
		say "$label"
		"$@" 2>&1 | tee "$WORK/$name.out" || true
		line=$(grep -E "^$name: [0-9]+ passed, [0-9]+ failed\$" "$WORK/$name.out" | tail -n 1 || true)
		if [ -n "$line" ]; then
			xpassed=$((xpassed + $(echo "$line" | sed 's/^[^:]*: \([0-9]*\) passed.*/\1/')))
			xfailed=$((xfailed + $(echo "$line" | sed 's/.* \([0-9]*\) failed$/\1/')))
		else
			xfailed=$((xfailed + 1))
		fi
	}
	# The catalogue of the messages (make po/snowflake.pot) holds every
	# message the sources raise.
	extra "Messages: the catalogue holds every one" messages bash "$SRC/test/messages.sh"
	# Every SQL block of README.md and docs/ runs as written, in order, on a
	# server set up as README recommends.
	extra "README.md and docs/: every SQL block" readme bash "$SRC/test/readme.sh"
	# make demo's SQL, and what it says to paste, as README recommends.
	extra "make demo: its SQL where snowflake is not in search_path" demo bash "$SRC/test/demo.sh" check
	# ORMs and schema tools as docs/orms.md has them, and the ID libraries
	# of its table.
	extra "ORMs: TypeORM, Sequelize, Knex, MikroORM, Drizzle, SQLAlchemy with Alembic, Django, Hibernate, Rails; ID libraries" orm bash "$SRC/test/orm/run.sh"
	# IDs as text: npm's base32 and base62 libraries, and docs/text-ids.md's
	# recipe for each stack.
	extra "IDs as text: npm's libraries; node-postgres, Kysely, Django, SQLAlchemy with Pydantic, Rails, Go" text bash "$SRC/test/text/run.sh"
	# The shardingsphere layouts agree with ShardingSphere's algorithm, by
	# each rule its releases took the epoch by, run in a JVM.
	extra "ShardingSphere's IDs in a JVM" shardingsphere bash "$SRC/test/shardingsphere/check.sh"
	# A Patroni cluster on etcd, pgBackRest's restores and PgBouncer's
	# pool modes, as docs/stacks.md has them.
	extra "Patroni with etcd, pgBackRest, PgBouncer" stacks bash "$SRC/test/stacks/run.sh"

	if [ "$xfailed" -eq 0 ]; then
		rm -rf "$WORK"
	else
		echo "extras: their files are in $WORK"
	fi
	echo "extras: $xpassed passed, $xfailed failed"
fi

}

# run_job JOB: one version's suite (and, on the host, the extras), its
# output in $RUN/JOB.log
run_job() {
	local v=$1 t0 seeds
	t0=$(date +%s)
	if [ "$v" = "$PG_MAJOR" ]; then
		say "PostgreSQL $PG_MAJOR, on this machine"
		bash "$SRC/test/suite.sh" 2>&1 || true
		echo "PostgreSQL $PG_MAJOR: suite ran in $(($(date +%s) - t0)) s"
		if [ "$EXTRAS" = yes ]; then
			t0=$(date +%s)
			(host_extras) 2>&1 || echo "extras: 0 passed, 1 failed"
			echo "extras: ran in $(($(date +%s) - t0)) s"
		fi
	else
		say "PostgreSQL $v, in a chroot"
		# the fault-history checker (t/model_fault_histories.pl) plays its
		# 4 histories on the first and the last version, and 2 (every kind
		# of event still played) on those between, to keep the run within
		# the hour; make torture plays more
		seeds=${TORTURE_SEEDS:-}
		[ -n "$seeds" ] || [ "$v" = "$first" ] || [ "$v" = "$last" ] || seeds=2
		TORTURE_SEEDS=$seeds bash "$SRC/test/chroot.sh" "$v" 2>&1 || true
	fi
}
first=${PG_VERSIONS%% *}
last=${PG_VERSIONS##* }

# The jobs, longest first, taken from a queue by JOBS lanes.
jobs=()
[ $host = no ] || jobs+=("$PG_MAJOR")
for v in $PG_VERSIONS; do
	[ "$v" = "$PG_MAJOR" ] || jobs+=("$v")
done
echo 0 >"$RUN/queue"
lane() {
	local n
	while :; do
		n=$(flock "$RUN/queue" sh -c 'n=$(cat "$1"); echo $((n + 1)) >"$1"; echo "$n"' sh "$RUN/queue")
		[ "$n" -lt ${#jobs[@]} ] || return 0
		if [ "$lanes_n" -eq 1 ]; then
			run_job "${jobs[$n]}" </dev/null 2>&1 | tee "$RUN/${jobs[$n]}.log"
		else
			echo "== PostgreSQL ${jobs[$n]}: started at $(date +%T)"
			run_job "${jobs[$n]}" >"$RUN/${jobs[$n]}.log" 2>&1 </dev/null
			# each job's output whole, one at a time
			flock "$RUN/print" cat "$RUN/${jobs[$n]}.log"
		fi
	done
}
lanes=()
lanes_n=$((JOBS < ${#jobs[@]} ? JOBS : ${#jobs[@]}))
for ((i = 0; i < lanes_n; i++)); do
	lane &
	lanes+=($!)
done
wait "${lanes[@]}"

passed=0
failed=0
summary=()
skipped=()

# add LINE: a "WHAT: N passed, M failed" line to the totals
add() {
	local p f
	p=$(echo "$1" | sed 's/.*: \([0-9]*\) passed.*/\1/')
	f=$(echo "$1" | sed 's/.* \([0-9]*\) failed$/\1/')
	passed=$((passed + p))
	failed=$((failed + f))
}

# count VERSION LOG: add the suite's closing line to the totals
count() {
	local v=$1 log=$2 line
	line=$(grep -E "^PostgreSQL $v: skipped: " "$log" | tail -n 1 || true)
	if [ -n "$line" ]; then
		if [ -n "${CI:-}" ]; then
			summary+=("$line" "  CI requires every version: counted as a failure")
			failed=$((failed + 1))
		else
			summary+=("$line")
			skipped+=("$v")
		fi
		return
	fi
	line=$(grep -E "^PostgreSQL $v: [0-9]+ passed, [0-9]+ failed$" "$log" | tail -n 1 || true)
	if [ -z "$line" ]; then
		line="PostgreSQL $v: 0 passed, 1 failed (the suite stopped before it counted; see its output)"
		add "PostgreSQL $v: 0 passed, 1 failed"
	else
		add "$line"
	fi
	summary+=("$line")
	# what passed: build, pg_regress, TAP, Debian package
	line=$(grep -E "^PostgreSQL $v, build: " "$log" | tail -n 1 || true)
	[ -z "$line" ] || summary+=("  ${line#"PostgreSQL $v, "}")
	while IFS= read -r line; do
		summary+=("  ${line#"PostgreSQL $v: "}")
	done < <(grep -E "^chroot for PostgreSQL $v could not be built: |^PostgreSQL $v: (chroot ready|suite ran|built from source .*|installed from .*) in " "$log" || true)
	if [ "$v" = "$PG_MAJOR" ] && [ "$EXTRAS" = yes ]; then
		line=$(grep -E "^extras: [0-9]+ passed, [0-9]+ failed$" "$log" | tail -n 1 || true)
		[ -n "$line" ] || line="extras: 0 passed, 1 failed"
		add "$line"
		summary+=("Extras on PostgreSQL $PG_MAJOR (JavaScript client, README and docs/ SQL, make demo, ORMs, IDs as text, ShardingSphere in a JVM, Patroni, pgBackRest, PgBouncer): ${line#extras: }")
		while IFS= read -r line; do
			summary+=("  ${line#extras: }")
		done < <(grep -E "^extras: (ran in|their files)" "$log" || true)
	fi
}
for v in "${jobs[@]}"; do
	count "$v" "$RUN/$v.log"
done

if [ "$failed" -eq 0 ]; then
	rm -rf "$RUN"
else
	summary+=("  (the output of each version is in $RUN)")
fi
echo
printf '%s\n' "${summary[@]}"
[ ${#skipped[@]} -eq 0 ] || echo "skipped: PostgreSQL ${skipped[*]} (see above for how to provide it)"
echo "snowflake: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
