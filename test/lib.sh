#!/usr/bin/env bash
# test/lib.sh: what `make demo`, `make test` and `make bench` share: the
# Debian packages they need, building and installing the extension, and
# throwaway servers run under the postgres account.
set -euo pipefail

PG_MAJOR=${PG_MAJOR:-15}
PGBIN=/usr/lib/postgresql/$PG_MAJOR/bin
PGLIB=/usr/lib/postgresql/$PG_MAJOR/lib
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

say() { printf '\n== %s\n' "$*"; }

as_root() {
	if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# PostgreSQL refuses to run as root: servers and clients that start them
# run as postgres when we are root, as ourselves otherwise.
as_pg() {
	if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

install_deps() {
	local pkgs=(make gcc "postgresql-$PG_MAJOR" "postgresql-server-dev-$PG_MAJOR"
		libipc-run-perl faketime libdbd-pg-perl locales "$@")
	local missing=() p
	for p in "${pkgs[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
			missing+=("$p")
	done
	# node and npm for the JavaScript client test (make test only), Debian's
	# if none is there
	if [ "${NEED_NODE:-0}" = 1 ]; then
		command -v node >/dev/null && command -v npm >/dev/null || missing+=(nodejs npm)
	fi
	if [ ${#missing[@]} -gt 0 ]; then
		say "installing ${missing[*]}"
		as_root apt-get update -qq
		as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends "${missing[@]}" >/dev/null
	fi
}

# install_quiet PACKAGES...: those not installed, with apt-get, none of
# them allowed to start a service or create a cluster: where there is no
# policy-rc.d (as test/chroot.sh's chroots have) or no createcluster.d
# setting of Debian's postgresql-common, one is put in place for the time
# of the install only.
install_quiet() {
	local missing=() p rc=0 made=()
	local policy=/usr/sbin/policy-rc.d cluster=/etc/postgresql-common/createcluster.d/snowflake-tests.conf
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
			missing+=("$p")
	done
	[ ${#missing[@]} -gt 0 ] || return 0
	say "installing ${missing[*]}"
	if [ ! -e "$policy" ]; then
		printf '#!/bin/sh\n# no service starts while the tests install packages\nexit 101\n' |
			as_root tee "$policy" >/dev/null
		as_root chmod 755 "$policy"
		made+=("$policy")
	fi
	if [ ! -e "$cluster" ]; then
		as_root mkdir -p "$(dirname "$cluster")"
		echo "create_main_cluster = off" | as_root tee "$cluster" >/dev/null
		made+=("$cluster")
	fi
	as_root apt-get update -qq &&
		as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends "${missing[@]}" >/dev/null || rc=$?
	[ ${#made[@]} -eq 0 ] || as_root rm -f "${made[@]}"
	return $rc
}

# need_locale NAME: the locale NAME (such as de_DE.UTF-8), generated if
# the system lacks it; the mesh's tests run servers that speak German.
# Without the package locales it says so, and the tests that need the
# locale skip.
need_locale() {
	local name=$1 lang=${1%%.*}
	locale -a 2>/dev/null | grep -qix "$lang.utf-\?8" && return 0
	if [ ! -f "/usr/share/i18n/locales/$lang" ]; then
		echo "locale $name: cannot be generated without the package locales"
		return 0
	fi
	as_root localedef -i "$lang" -c -f UTF-8 "$name" ||
		echo "locale $name: localedef failed"
}

build_install() {
	say "building and installing the extension"
	make -s -C "$SRC" PG_CONFIG="$PGBIN/pg_config"
	as_root make -s -C "$SRC" PG_CONFIG="$PGBIN/pg_config" install >/dev/null
}

# copy_sources DEST: the sources as git tracks them (or would: new files
# too, ignored ones not), without build products; a plain copy outside git.
copy_sources() {
	local dest=$1
	mkdir -p "$dest"
	if command -v git >/dev/null && git -C "$SRC" rev-parse --git-dir >/dev/null 2>&1; then
		(cd "$SRC" && git ls-files -z --cached --others --exclude-standard |
			while IFS= read -r -d '' f; do if [ -e "$f" ]; then printf '%s\0' "$f"; fi; done |
			xargs -0 cp --parents -t "$dest/")
	else
		(cd "$SRC" && tar -c --exclude='*.o' --exclude='*.so' --exclude='*.bc' \
			--exclude=tmp_check --exclude=node_modules .) | tar -x -C "$dest"
	fi
}

# A directory the postgres account owns.
pg_workdir() {
	local d
	d=$(mktemp -d "${TMPDIR:-/tmp}/snowflake-$1.XXXXXX")
	chmod 755 "$d"
	[ "$(id -u)" = 0 ] && chown postgres: "$d"
	echo "$d"
}

# start_server DIR PRELOAD(yes|no) [postgresql.conf lines...]
# A server on a Unix socket in DIR only, so it clashes with nothing, with
# the extension's schema in its search_path, so that the tests may call its
# functions unqualified (docs/install.md recommends that only for a
# person's role; test/orm sets its application role's own).
start_server() {
	local dir=$1 preload=$2
	shift 2
	server_in "$dir" "$preload" "search_path = '\"\$user\", public, snowflake'" "$@"
}

# start_recommended DIR [postgresql.conf lines...]: a server as README
# recommends: the library preloaded, and search_path as PostgreSQL has it,
# without the extension's schema.  README's SQL and make demo run there.
start_recommended() {
	local dir=$1
	shift
	server_in "$dir" yes "$@"
}

# SERVER_ENV: NAME=VALUE words in the environment of the servers that
# server_in starts (test/suite.sh's SANITIZE=1 puts the sanitizers' runtime
# there)
SERVER_ENV=()
server_in() {
	local dir=$1 preload=$2
	shift 2
	as_pg "$PGBIN/initdb" -D "$dir/data" -A trust -U postgres --no-sync >"$dir/initdb.log"
	{
		echo "listen_addresses = ''"
		echo "unix_socket_directories = '$dir'"
		echo "port = 5432"
		[ "$preload" = yes ] && echo "shared_preload_libraries = 'snowflake'"
		for line in "$@"; do echo "$line"; done
	} | as_pg tee -a "$dir/data/postgresql.conf" >/dev/null
	as_pg env ${SERVER_ENV[@]+"${SERVER_ENV[@]}"} \
		"$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w start >/dev/null
}

stop_server() {
	local dir=$1
	[ -f "$dir/data/postmaster.pid" ] &&
		as_pg "$PGBIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
}

psql_at() {
	local dir=$1
	shift
	as_pg "$PGBIN/psql" -X -h "$dir" -p 5432 -U postgres "$@"
}

# check_start NAME: for a check of the installed extension on this machine
# (README's SQL, the ORMs, the JVM's IDs): stops, saying so, where it is
# not installed; sets WORK, and dir for a throwaway server, stopped on exit.
check_start() {
	local name=$1
	if [ ! -f "$PGLIB/snowflake.so" ]; then
		echo "$name: snowflake is not installed in $PGLIB; run make && make install first" >&2
		echo "$name: 0 passed, 1 failed"
		exit 1
	fi
	WORK=$(pg_workdir "$name")
	dir=$WORK/server
	mkdir "$dir"
	chmod 755 "$dir"
	[ "$(id -u)" = 0 ] && chown postgres: "$dir"
	trap 'stop_server "$dir"' EXIT
}

# check_end NAME PASSED FAILED WHAT: stops the server, removes WORK when
# every test passed (and there was one), otherwise says where WHAT is; ends
# with the line "NAME: N passed, M failed", and fails if one did.
check_end() {
	local name=$1 passed=$2 failed=$3 what=$4
	stop_server "$dir"
	if [ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]; then
		rm -rf "$WORK"
	else
		echo "the files of this run ($what) are in $WORK"
	fi
	echo "$name: $passed passed, $failed failed"
	[ "$failed" -eq 0 ]
}
