#!/usr/bin/env bash
# test/pgsource.sh TARBALL MAJOR: builds the PostgreSQL of a source
# tarball for a version no Debian suite carries.  test/chroot.sh runs it
# once, as root, inside the Debian chroot it is making, and keeps the
# chroot.  Builds only what the suites use: the server and its client
# tools, plpgsql, the contrib modules the tests load (pg_walinspect,
# pgstattuple), pg_regress, pg_isolation_regress with isolationtester and
# the TAP test modules.  Installs them where Debian's packages put a
# version (/usr/lib/postgresql/MAJOR, so test/suite.sh runs unchanged) and
# registers them with dpkg as postgresql-MAJOR and
# postgresql-server-dev-MAJOR, which the extension's Debian package and
# test/lib.sh's install_deps ask for.
set -euo pipefail

TARBALL=${1:?usage: test/pgsource.sh TARBALL MAJOR}
V=${2:?usage: test/pgsource.sh TARBALL MAJOR}
PREFIX=/usr/lib/postgresql/$V
B=/build/pgsource
STAGE=/build/pgstage

rm -rf "$B" "$STAGE"
mkdir -p "$B"
tar -xzf "$TARBALL" -C "$B" --strip-components=1
cd "$B"
VERSION=$(sed -n "s/^PACKAGE_VERSION='\(.*\)'$/\1/p" configure)
case $VERSION in
"$V".*) ;;
*)
	echo "$TARBALL is PostgreSQL ${VERSION:-of no version}, not $V" >&2
	exit 1
	;;
esac

# Debian's time zone data, as Debian's own builds use; the message
# catalogues, as Debian's builds have them (the mesh's tests run servers
# that speak German); ICU, as Debian's and PGDG's builds have it (the text
# forms' order is checked in an ICU database); no readline or debug
# symbols, which no test needs.
./configure --prefix="$PREFIX" --enable-tap-tests --with-system-tzdata=/usr/share/zoneinfo \
	--with-icu --without-readline --enable-nls

# ecpg is the largest part of src/ that no test uses
sed -i 's/^SUBDIRS = libpq ecpg$/SUBDIRS = libpq/' src/interfaces/Makefile
grep -q '^SUBDIRS = libpq$' src/interfaces/Makefile || {
	echo "src/interfaces/Makefile lists other directories than libpq and ecpg" >&2
	exit 1
}

# src/ builds the server, the tools, pg_regress, the isolation tester and
# installs the TAP test modules (--enable-tap-tests); config/ the scripts
# PGXS uses
CONTRIB="contrib/pg_walinspect contrib/pgstattuple"
make -s -j"$(nproc)" >/dev/null
for d in $CONTRIB; do make -s -C "$d" -j"$(nproc)" >/dev/null; done
make -s install DESTDIR="$STAGE" >/dev/null
for d in $CONTRIB; do make -s -C "$d" install DESTDIR="$STAGE" >/dev/null; done
for f in src/test/isolation/pg_isolation_regress src/test/isolation/isolationtester \
	src/test/perl/PostgreSQL/Test/Cluster.pm; do
	if [ ! -f "$STAGE$PREFIX/lib/pgxs/$f" ]; then
		echo "the build did not install $f" >&2
		exit 1
	fi
done

# Two packages, split as Debian's are: what builds extensions (headers,
# PGXS and its test programs, pg_config) and the rest.
DEBVERSION=$VERSION-0source1
ARCH=$(dpkg --print-architecture)
DEV=/build/pgstage-dev
rm -rf "$DEV"
mkdir -p "$DEV$PREFIX/bin" "$DEV$PREFIX/lib"
mv "$STAGE$PREFIX/include" "$DEV$PREFIX/"
mv "$STAGE$PREFIX/lib/pgxs" "$DEV$PREFIX/lib/"
mv "$STAGE$PREFIX/bin/pg_config" "$DEV$PREFIX/bin/"

# control PACKAGE DEPENDS DESCRIPTION
control() {
	cat <<EOF
Package: $1
Version: $DEBVERSION
Architecture: $ARCH
Maintainer: Snowflake Extension Maintainers <maintainers@snowflake.invalid>
Depends: $2
Section: database
Priority: optional
Description: $3
 PostgreSQL $VERSION built from its source tree for the tests of the
 snowflake extension (test/pgsource.sh): no Debian suite carries $V.
EOF
}
mkdir -p "$STAGE/DEBIAN" "$DEV/DEBIAN"
control "postgresql-$V" "libc6, zlib1g, tzdata, postgresql-common" \
	"PostgreSQL $VERSION server and client tools, built from source" >"$STAGE/DEBIAN/control"
control "postgresql-server-dev-$V" "postgresql-$V (= $DEBVERSION)" \
	"PostgreSQL $VERSION headers, PGXS and its test programs, built from source" >"$DEV/DEBIAN/control"
dpkg-deb --root-owner-group --build "$STAGE" "/build/postgresql-${V}_${DEBVERSION}_$ARCH.deb" >/dev/null
dpkg-deb --root-owner-group --build "$DEV" "/build/postgresql-server-dev-${V}_${DEBVERSION}_$ARCH.deb" >/dev/null
dpkg -i "/build/postgresql-${V}_${DEBVERSION}_$ARCH.deb" \
	"/build/postgresql-server-dev-${V}_${DEBVERSION}_$ARCH.deb" >/dev/null

cd /
rm -rf "$B" "$STAGE" "$DEV" /build/*.deb
"$PREFIX/bin/pg_config" --version
