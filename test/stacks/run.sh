#!/usr/bin/env bash
# test/stacks/run.sh [PARTS...]: snowflake under the tools teams run it
# with, as docs/stacks.md says: a Patroni cluster of three members on etcd
# (patroni_test.py), pgBackRest's backups and restores (pgbackrest_test.py)
# and PgBouncer in session and transaction mode (pgbouncer_test.py); PARTS
# picks some of patroni, pgbackrest and pgbouncer.  Installs Debian's
# patroni, etcd-server, pgbackrest and pgbouncer where missing (none of them
# starting a service), and starts every server by hand, as the postgres
# account, on the loopback, with its files under the work directory;
# everything a part started is stopped when it ends, also when it fails.
# Uses the installed extension of PG_MAJOR; in a chroot of test/chroot.sh
# (SUITE_SCRIPT=test/stacks/run.sh), where test/suite.sh has not installed
# it, builds and installs it first.  Prints a line per test and the time
# of each part, and ends with one line: "stacks: N passed, M failed".
# Removes its files when every test passed, and otherwise says where they
# are.
. "$(dirname "$0")/../lib.sh"

PARTS=${*:-patroni pgbackrest pgbouncer}
install_quiet patroni etcd-server python3-psycopg2 python3-yaml pgbackrest pgbouncer faketime
[ -z "${SUITE_HOST_ROOT:-}" ] || build_install

t0=$(date +%s)
check_start stacks

passed=0
failed=0
fail() {
	echo "not ok - $*"
	failed=$((failed + 1))
}

cp "$SRC"/test/stacks/*.py "$WORK/"
mkdir "$WORK/docs"
cp "$SRC/docs/stacks.md" "$WORK/docs/"
chmod -R a+rX "$WORK"

# part NAME: NAME_test.py, as postgres, in a directory of its own; its TAP
# lines "ok N - name" shown as "ok - NAME: name", counted from its
# "# pass N" and "# fail N"
part() {
	local name=$1 out=$WORK/$1.out p f t
	t=$(date +%s)
	mkdir "$WORK/$name"
	[ "$(id -u)" != 0 ] || chown postgres: "$WORK/$name"
	(cd "$WORK" && as_pg env PGBIN="$PGBIN" PATH="$PATH" HOME="$WORK/$name" SNOWFLAKE_DOCS="$WORK/docs" \
		/usr/bin/python3 "${name}_test.py" "$WORK/$name") >"$out" 2>&1 || true
	sed -n -E "s/^(not )?ok [0-9]+ - /\\1ok - $name: /p" "$out"
	p=$(sed -n 's/^# pass \([0-9]*\)$/\1/p' "$out")
	f=$(sed -n 's/^# fail \([0-9]*\)$/\1/p' "$out")
	if [ -z "$p" ] || [ -z "$f" ]; then
		fail "$name: no result"
		f=1 p=0
	fi
	[ "$f" -eq 0 ] || sed 's/^/    /' "$out" | tail -n 60
	echo "$name: ran in $(($(date +%s) - t)) s"
	passed=$((passed + p))
	failed=$((failed + f))
}

for name in $PARTS; do
	part "$name"
done

echo "stacks: ran in $(($(date +%s) - t0)) s"
check_end stacks "$passed" "$failed" "each part's output and its servers' files"
