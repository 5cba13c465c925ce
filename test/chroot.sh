#!/usr/bin/env bash
# test/chroot.sh VERSION: the tests of one PostgreSQL version that the host
# does not have, in a Debian chroot that has it.  Makes the chroot with
# mmdebstrap from the host's Debian mirror (PostgreSQL 17 from trixie, 18
# from sid, 19 from experimental on top of sid), or reuses the one in
# /var/tmp/snowflake-chroot-VERSION; copies the sources in and runs
# test/suite.sh there (or SUITE_SCRIPT, a path in the sources), with /proc
# and /dev/shm mounted for the run only.  16, which no Debian suite
# carries, comes from the PostgreSQL project's own packages
# (apt.postgresql.org, bookworm-pgdg) where they can be reached, as on a
# user's machine; otherwise it is built in a bookworm chroot from the
# source tarball in ../shared/pg16 beside the checkout (SNOWFLAKE_SHARED
# names another folder), by test/pgsource.sh; with neither, it is skipped.
# Ends with the suite's line "PostgreSQL VERSION: N passed, M failed"; a
# chroot that cannot be made counts as one failure, and says so; a version
# skipped says "PostgreSQL VERSION: skipped: WHY" and exits 0.
set -euo pipefail

V=${1:?usage: test/chroot.sh VERSION}
SRC=$(cd "$(dirname "$0")/.." && pwd)
BASE=${SNOWFLAKE_CHROOT_BASE:-/var/tmp}
ROOT=$BASE/snowflake-chroot-$V

if [ "$(id -u)" != 0 ]; then
	exec sudo --preserve-env=CI,PROVE_TESTS,SUITE_PARTS,SANITIZE,SUITE_SCRIPT,QUICK,BENCH_OUT,MESH_SECONDS,MESH_SEED,MESH_STEPS,TORTURE_SEEDS,TORTURE_STEPS,TORTURE_FIRST_SEED,TORTURE_FORCE,TORTURE_VERBOSE,SNOWFLAKE_TWIN_SEED,SNOWFLAKE_TWIN_STEPS,SNOWFLAKE_MIRROR,SNOWFLAKE_CHROOT_BASE,SNOWFLAKE_SHARED bash "$0" "$@"
fi

not_built() {
	echo "chroot for PostgreSQL $V could not be built: $*"
	echo "PostgreSQL $V: 0 passed, 1 failed"
	exit 1
}

skipped() {
	echo "PostgreSQL $V: skipped: $*"
	exit 0
}

# The PostgreSQL project's apt repository, and the fingerprint of the key
# that signs it
PGDG_URL=http://apt.postgresql.org/pub/repos/apt
PGDG_KEY_URL=https://www.postgresql.org/media/keys/ACCC4CF8.asc
PGDG_FINGERPRINT=B97B0AFCAA1A47F044F244A07FCC7D46ACCC4CF8
pgdg_reachable() {
	command -v curl >/dev/null &&
		curl -fsS --max-time 20 -o /dev/null "$PGDG_URL/dists/bookworm-pgdg/Release" 2>/dev/null
}

# A version built from source: its tarball in the folder shared/ that is
# beside the checkout (SNOWFLAKE_SHARED elsewhere), and its checksum.
SOURCE='' SOURCE_SHA256='' PGDG=no
SHARED=${SNOWFLAKE_SHARED:-$(dirname "$SRC")/shared}
case $V in
15) SUITE=bookworm EXTRA= ;;
16)
	SUITE=bookworm EXTRA=
	# a chroot made before is kept, whichever way it got 16
	made=$(cat "$BASE/snowflake-chroot-16/etc/snowflake-chroot" 2>/dev/null || true)
	case $made in
	*" pgdg="*) PGDG=yes ;;
	*" source="*) ;;
	*)
		if pgdg_reachable; then
			PGDG=yes
		elif [ ! -f "$SHARED/pg16/postgresql-16.2.tar.gz" ]; then
			skipped "no Debian suite carries it, apt.postgresql.org cannot be reached from here, and there is no $SHARED/pg16/postgresql-16.2.tar.gz. Put PostgreSQL 16.2's source tarball there (sha256 58dd6a78df4adaab80740283eb4a9650399aac79f8de3320faf43b93af063350; SNOWFLAKE_SHARED=/path names the folder that holds pg16/), or leave 16 out: PG_VERSIONS='15 17 18 19' make test"
		fi
		;;
	esac
	if [ $PGDG = no ]; then
		SOURCE=pg16/postgresql-16.2.tar.gz
		SOURCE_SHA256=58dd6a78df4adaab80740283eb4a9650399aac79f8de3320faf43b93af063350
	fi
	;;
17) SUITE=trixie EXTRA= ;;
18) SUITE=sid EXTRA= ;;
19) SUITE=sid EXTRA=experimental ;;
*) not_built "no Debian release has postgresql-$V" ;;
esac

# The host's Debian mirror, from its apt sources (deb822 or one-line).
host_mirror() {
	local m
	m=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
		sed -n 's/^URIs:[[:space:]]*//p' | tr ' ' '\n' |
		grep -v security | grep -E '/debian/?$' | head -n 1 || true)
	[ -n "$m" ] || m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
		awk '/^deb / { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:/) { print $i; break } }' |
		grep -v security | grep -E '/debian/?$' | head -n 1 || true)
	echo "${m:-http://deb.debian.org/debian}"
}
MIRROR=${SNOWFLAKE_MIRROR:-$(host_mirror)}

if [ -z "$SOURCE" ]; then
	# (from apt.postgresql.org, for 16, these and their libpq)
	PKGS="postgresql-$V postgresql-server-dev-$V"
else
	# what building PostgreSQL from its source tree needs (gettext: its
	# message catalogues, which the mesh's test of other languages reads;
	# ICU, in which the order of the text forms is checked)
	PKGS="bison flex zlib1g-dev tzdata postgresql-common gettext libicu-dev pkg-config"
fi
PKGS="$PKGS make gcc libc6-dev libipc-run-perl faketime perl"
# snowflake-mesh's driver; locales for the test of servers that speak German
PKGS="$PKGS libdbd-pg-perl locales"
# pgrep for the crash tests; the tools that build the Debian package
PKGS="$PKGS procps build-essential debhelper postgresql-server-dev-all dpkg-dev fakeroot"
STAMP="suite=$SUITE${EXTRA:++$EXTRA} packages=$PKGS"
# a new tarball or a new way to build it makes the chroot again
[ -z "$SOURCE" ] ||
	STAMP="$STAMP source=$SOURCE_SHA256 build=$(sha256sum <"$SRC/test/pgsource.sh" | cut -c1-16)"
[ $PGDG = no ] || STAMP="$STAMP pgdg=$PGDG_URL"

# One run at a time per chroot.
mkdir -p "$BASE"
exec 9>"$ROOT.lock"
flock 9

# check_source: the tarball of a version built from source is there, and
# is the one expected
check_source() {
	local tarball=$SHARED/$SOURCE sum
	[ -f "$tarball" ] ||
		not_built "PostgreSQL $V is built from $SOURCE in the folder shared/ beside the checkout, and there is no $tarball"
	sum=$(sha256sum <"$tarball" | cut -d' ' -f1)
	[ "$sum" = "$SOURCE_SHA256" ] ||
		not_built "$tarball has sha256 $sum, not $SOURCE_SHA256"
}

# build_from_source CHROOT: PostgreSQL V from its checked tarball, built
# and installed inside CHROOT by test/pgsource.sh
build_from_source() {
	local tmp=$1 tarball=$SHARED/$SOURCE t0 log=$1.log
	echo "building PostgreSQL $V from $tarball"
	t0=$(date +%s)
	mkdir -p "$tmp/build"
	cp "$tarball" "$tmp/build/source.tar.gz"
	# the copy built is the one checked
	[ "$(sha256sum <"$tmp/build/source.tar.gz" | cut -d' ' -f1)" = "$SOURCE_SHA256" ] || {
		rm -rf "$tmp"
		not_built "$tarball changed while it was copied"
	}
	cp "$SRC/test/pgsource.sh" "$tmp/build/pgsource.sh"
	if ! chroot "$tmp" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/root LANG=C.UTF-8 bash /build/pgsource.sh /build/source.tar.gz "$V" </dev/null >"$log" 2>&1; then
		tail -n 25 "$log"
		rm -rf "$tmp"
		not_built "PostgreSQL $V did not build from $tarball (log: $log)"
	fi
	rm -f "$tmp/build/source.tar.gz" "$tmp/build/pgsource.sh"
	echo "PostgreSQL $V: built from source ($(tail -n 1 "$log" | sed 's/^PostgreSQL //')) in $(($(date +%s) - t0)) s"
}

# pgdg_key FILE: the PostgreSQL project's apt key, checked
pgdg_key() {
	local file=$1 fpr
	command -v gpg >/dev/null || {
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends gpg >/dev/null
	} || not_built "gpg, to check apt.postgresql.org's key, is not installed and could not be"
	curl -fsS --max-time 60 -o "$file" "$PGDG_KEY_URL" ||
		not_built "could not fetch $PGDG_KEY_URL"
	fpr=$(gpg --show-keys --with-colons "$file" 2>/dev/null | awk -F: '$1 == "fpr" { print $10; exit }')
	[ "$fpr" = "$PGDG_FINGERPRINT" ] ||
		not_built "$PGDG_KEY_URL has fingerprint ${fpr:-none}, not $PGDG_FINGERPRINT"
}

make_chroot() {
	local tmp log sources hooks
	# the remains of a run that died while making one
	rm -f "$ROOT".new.*.log
	for tmp in "$ROOT".new.*; do
		[ -d "$tmp" ] || continue
		grep -q " $tmp/" /proc/mounts && continue
		rm -rf "$tmp"
	done
	if [ -d "$ROOT" ]; then
		if [ "$(cat "$ROOT/etc/snowflake-chroot" 2>/dev/null)" = "$STAMP" ]; then
			echo "reusing $ROOT"
			return 0
		fi
		echo "$ROOT was made for another package set: making it again"
		grep -q " $ROOT/" /proc/mounts && not_built "$ROOT has file systems mounted"
		rm -rf "$ROOT"
	fi
	[ -z "$SOURCE" ] || check_source
	command -v mmdebstrap >/dev/null || {
		echo "installing mmdebstrap"
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends mmdebstrap >/dev/null
	} || not_built "mmdebstrap is not installed and could not be"
	tmp=$(mktemp -d "$ROOT.new.XXXXXX")
	log=$tmp.log
	sources=("deb $MIRROR $SUITE main")
	hooks=()
	if [ $PGDG = yes ]; then
		# the project's key, taken over HTTPS and checked against its
		# fingerprint, trusted in the chroot before apt first runs
		pgdg_key "$tmp.pgdg.asc"
		sources+=("deb $PGDG_URL $SUITE-pgdg main")
		hooks+=(--setup-hook="mkdir -p \"\$1/etc/apt/trusted.gpg.d\" && cp '$tmp.pgdg.asc' \"\$1/etc/apt/trusted.gpg.d/apt.postgresql.org.asc\"")
		hooks+=(--skip=check/signed-by)
	fi
	if [ -n "$EXTRA" ]; then
		sources+=("deb $MIRROR $EXTRA main")
		# PostgreSQL and its libpq from there, everything else from $SUITE
		hooks+=(--setup-hook="mkdir -p \"\$1/etc/apt/preferences.d\" &&
			printf 'Package: src:postgresql-$V\nPin: release a=$EXTRA\nPin-Priority: 990\n' \
				>\"\$1/etc/apt/preferences.d/postgresql-$V\"")
	fi
	echo "making $ROOT: Debian $SUITE${EXTRA:+ + $EXTRA} from $MIRROR"
	# no package may create a cluster or start a server
	if ! mmdebstrap --mode=root --variant=apt --format=directory \
		--aptopt='Acquire::Check-Valid-Until "false"' \
		--aptopt='APT::Install-Recommends "false"' \
		--aptopt='Acquire::Languages "none"' \
		--include="${PKGS// /,}" \
		--setup-hook='mkdir -p "$1/etc/postgresql-common/createcluster.d" &&
			echo "create_main_cluster = off" >"$1/etc/postgresql-common/createcluster.d/snowflake.conf"' \
		"${hooks[@]}" \
		"$SUITE" "$tmp" "${sources[@]}" </dev/null >"$log" 2>&1; then
		tail -n 25 "$log"
		rm -rf "$tmp"
		not_built "mmdebstrap failed (log: $log): $(grep -E '^ .* : Depends: |^E: ' "$log" | head -n 1 | sed 's/^ *//')"
	fi
	rm -f "$tmp.pgdg.asc"
	[ $PGDG = no ] || echo "PostgreSQL $V: installed from apt.postgresql.org ($(chroot "$tmp" dpkg-query -W -f='${Version}' "postgresql-$V")) in $(($(date +%s) - t0)) s"
	printf '#!/bin/sh\n# no service starts in this chroot\nexit 101\n' >"$tmp/usr/sbin/policy-rc.d"
	chmod 755 "$tmp/usr/sbin/policy-rc.d"
	[ -z "$SOURCE" ] || build_from_source "$tmp"
	[ -x "$tmp/usr/lib/postgresql/$V/bin/pg_config" ] || {
		rm -rf "$tmp"
		not_built "postgresql-server-dev-$V did not install"
	}
	echo "$STAMP" >"$tmp/etc/snowflake-chroot"
	mv "$tmp" "$ROOT"
	rm -f "$log"
}

t0=$(date +%s)
make_chroot
t1=$(date +%s)
echo "PostgreSQL $V: chroot ready in $((t1 - t0)) s"

# processes of this run still inside the chroot (servers of an interrupted
# suite), by pid
stop_inside() {
	local p pids=()
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/root" 2>/dev/null)" = "$ROOT" ] && pids+=("${p#/proc/}")
	done
	[ ${#pids[@]} -gt 0 ] || return 0
	echo "stopping ${#pids[@]} processes left in $ROOT"
	kill -TERM "${pids[@]}" 2>/dev/null || true
	sleep 2
	kill -KILL "${pids[@]}" 2>/dev/null || true
}

mounts=()
unmount_all() {
	local i
	stop_inside
	for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
		umount "${mounts[i]}" 2>/dev/null || umount -l "${mounts[i]}" || true
	done
	mounts=()
}
trap unmount_all EXIT
trap 'exit 130' INT TERM
mount_in() {
	local target=$ROOT$1
	shift
	mkdir -p "$target"
	mount "$@" "$target"
	mounts+=("$target")
}
mount_in /proc -t proc proc
mount_in /dev/shm -t tmpfs -o mode=1777,nosuid,nodev tmpfs
[ -e "$ROOT/dev/null" ] || not_built "$ROOT/dev has no device nodes"

# the sources, as git tracks them (or would)
. "$SRC/test/lib.sh"
rm -rf "$ROOT/build/snowflake"
mkdir -p "$ROOT/build/snowflake"
copy_sources "$ROOT/build/snowflake"

rc=0
chroot "$ROOT" /usr/bin/env -i \
	PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	HOME=/root LANG=C.UTF-8 CI="${CI:-}" PROVE_TESTS="${PROVE_TESTS:-}" SUITE_PARTS="${SUITE_PARTS:-}" \
	MESH_SECONDS="${MESH_SECONDS:-}" MESH_SEED="${MESH_SEED:-}" MESH_STEPS="${MESH_STEPS:-}" \
	TORTURE_SEEDS="${TORTURE_SEEDS:-}" TORTURE_STEPS="${TORTURE_STEPS:-}" \
	TORTURE_FIRST_SEED="${TORTURE_FIRST_SEED:-}" SNOWFLAKE_FILE_SECONDS="${SNOWFLAKE_FILE_SECONDS:-}" \
	${TORTURE_FORCE+TORTURE_FORCE="$TORTURE_FORCE"} ${TORTURE_VERBOSE+TORTURE_VERBOSE="$TORTURE_VERBOSE"} \
	SNOWFLAKE_TWIN_SEED="${SNOWFLAKE_TWIN_SEED:-}" SNOWFLAKE_TWIN_STEPS="${SNOWFLAKE_TWIN_STEPS:-}" \
	QUICK="${QUICK:-}" BENCH_OUT="${BENCH_OUT:-}" SANITIZE="${SANITIZE:-}" PG_MAJOR="$V" SUITE_HOST_ROOT="$ROOT" \
	bash "/build/snowflake/${SUITE_SCRIPT:-test/suite.sh}" </dev/null || rc=$?
echo "PostgreSQL $V: suite ran in $(($(date +%s) - t1)) s"
exit $rc
