#!/usr/bin/env bash
# test/bench/mesh.sh: `make bench-mesh`.  Runs test/bench/mesh.pl (three
# nodes in a mesh under pgbench, against one node alone and against
# bigserial keys) on PostgreSQL MESH_PG (default 17): on the host if it has
# that version, otherwise in the Debian chroot of test/chroot.sh.  Writes
# test/bench/results/mesh.md.
. "$(dirname "$0")/../lib.sh"

MESH_PG=${MESH_PG:-17}
if [ "$PG_MAJOR" != "$MESH_PG" ]; then
	# from the host: in the chroot, then fetch the result
	SUITE_SCRIPT=test/bench/mesh.sh bash "$SRC/test/chroot.sh" "$MESH_PG"
	ROOT=${SNOWFLAKE_CHROOT_BASE:-/var/tmp}/snowflake-chroot-$MESH_PG
	cp "$ROOT/build/snowflake/test/bench/results/mesh.md" "$SRC/test/bench/results/mesh.md"
	echo "written: test/bench/results/mesh.md"
	exit
fi

install_deps
make -s -C "$SRC" PG_CONFIG="$PGBIN/pg_config"
as_root make -s -C "$SRC" PG_CONFIG="$PGBIN/pg_config" install >/dev/null
WORK=$(pg_workdir bench-mesh)
[ "$(id -u)" = 0 ] && chown -R postgres: "$SRC/test"
# shellcheck disable=SC2086
(cd "$SRC/test" && as_pg env PATH="$PGBIN:$PATH" \
	PG_REGRESS="$PGLIB/pgxs/src/test/regress/pg_regress" \
	TESTDIR="$WORK" TESTDATADIR="$WORK/data" TESTLOGDIR="$WORK/log" \
	MESH_SECONDS="${MESH_SECONDS:-20}" PG_TEST_TIMEOUT_DEFAULT=600 \
	prove -v -I "$PGLIB/pgxs/src/test/perl" -I lib bench/mesh.pl)
rm -rf "$WORK"
