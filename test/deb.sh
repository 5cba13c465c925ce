#!/usr/bin/env bash
# test/deb.sh: `make deb`.  Builds the Debian package postgresql-NN-snowflake
# for PG_MAJOR (default 15) with Debian's PostgreSQL extension tooling
# (pg_buildext), installs it, and runs the regression suite against the
# installed package.  Leaves the .deb in $DEB_OUT (default: a temporary
# directory, printed at the end) and removes its other files when it passed.
. "$(dirname "$0")/lib.sh"

install_deps debhelper postgresql-server-dev-all dpkg-dev fakeroot

OUT=${DEB_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/snowflake-deb.XXXXXX")}
BUILD=$(mktemp -d "${TMPDIR:-/tmp}/snowflake-debbuild.XXXXXX")
VERSION=$(sed -n '1s/^snowflake (\([^)]*\)).*/\1/p' "$SRC/debian/changelog")
say "building postgresql-$PG_MAJOR-snowflake $VERSION"
# a clean copy of the sources (what git tracks or would track), outside the tree
DEST=$BUILD/snowflake-$VERSION
copy_sources "$DEST"
# debian/control for this version only (debian/pgversions lists them all)
export PG_SUPPORTED_VERSIONS=$PG_MAJOR
(cd "$DEST" && pg_buildext updatecontrol >/dev/null)
(cd "$BUILD/snowflake-$VERSION" && dpkg-buildpackage -us -uc -b >"$BUILD/build.log" 2>&1) || {
	tail -n 40 "$BUILD/build.log"
	exit 1
}
deb=$(ls "$BUILD"/postgresql-"$PG_MAJOR"-snowflake_"$VERSION"_*.deb)
cp "$deb" "$OUT/"
deb=$OUT/$(basename "$deb")

say "installing $(basename "$deb")"
as_root dpkg -i "$deb" >/dev/null
status=$(dpkg-query -W -f='${Status} ${Version}' "postgresql-$PG_MAJOR-snowflake")
echo "  $status"
dpkg -L "postgresql-$PG_MAJOR-snowflake" | grep -E 'snowflake(\.so|\.control|--1\.0\.sql)$' | sed 's/^/  /'

say "regression suite against the installed package"
WORK=$(pg_workdir deb)
cp -r "$DEST/test/sql" "$DEST/test/expected" "$WORK/"
[ "$(id -u)" = 0 ] && chown -R postgres: "$WORK"
trap 'stop_server "$WORK"' EXIT
start_server "$WORK" yes "snowflake.worker_id = 7" "fsync = off"
REGRESS=$(sed -n 's/^REGRESS = //p' "$DEST/Makefile")
# shellcheck disable=SC2086
(cd "$WORK" && as_pg "$PGLIB/pgxs/src/test/regress/pg_regress" --inputdir="$WORK" \
	--outputdir="$WORK/out" --bindir="$PGBIN" --host="$WORK" --port=5432 --user=postgres \
	--dbname=contrib_regression $REGRESS) || {
	cat "$WORK/out/regression.diffs"
	exit 1
}
echo "package: $deb"
stop_server "$WORK"
rm -rf "$WORK" "$BUILD"
