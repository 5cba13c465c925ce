#!/usr/bin/env bash
# test/demo.sh: `make demo`.  Installs what is missing, builds and installs
# the extension, starts a throwaway server set up as README recommends (the
# library preloaded, snowflake.worker_id = 7, no snowflake in search_path)
# and shows IDs being generated and decoded (test/demo.sql), by SQL that
# names the schema, as an application's must; then how to connect, and SQL
# to paste there.  `make demo-stop` stops it and removes its directory,
# SNOWFLAKE_DEMO_DIR (default /tmp/snowflake-demo).  A directory there that
# a demo did not make is left alone: the demo refuses to start.
# `test/demo.sh check` (make test) runs the same SQL, and the SQL it tells
# a user to paste, on a server of its own set up so, with the installed
# extension, and ends with one line: "demo: N passed, M failed".
. "$(dirname "$0")/lib.sh"

# what the demo tells a user to paste, after test/demo.sql
PASTE=(
	"INSERT INTO orders (item) VALUES ('lamp') RETURNING id, (snowflake.snowflake_decode(id)).*;"
	"SELECT snowflake.snowflake_timestamp(id), item FROM orders ORDER BY id;"
	"SELECT * FROM snowflake.snowflake_status;"
)

if [ "${1:-}" = check ]; then
	check_start demo
	start_recommended "$dir" "snowflake.worker_id = 7" "fsync = off"
	passed=0
	failed=0
	# ok NAME FILE: one test, its output in FILE.out
	ok() {
		if psql_at "$dir" -d postgres -v ON_ERROR_STOP=1 -f "$2" </dev/null >"$2.out" 2>&1; then
			echo "ok: $1"
			passed=$((passed + 1))
		else
			echo "not ok: $1"
			sed 's/^/    /' "$2.out" | tail -n 15
			failed=$((failed + 1))
		fi
	}
	cp "$SRC/test/demo.sql" "$WORK/demo.sql"
	for i in "${!PASTE[@]}"; do echo "${PASTE[$i]}" >"$WORK/paste-$i.sql"; done
	chmod -R a+rX "$WORK"
	ok "test/demo.sql, as make demo runs it" "$WORK/demo.sql"
	for i in "${!PASTE[@]}"; do
		ok "what make demo says to paste: ${PASTE[$i]}" "$WORK/paste-$i.sql"
	done
	check_end demo "$passed" "$failed" "each script and its output, the server log"
	exit
fi

DEMO=${SNOWFLAKE_DEMO_DIR:-/tmp/snowflake-demo}
MARK=.snowflake-demo

if [ -e "$DEMO" ] && [ ! -f "$DEMO/$MARK" ]; then
	echo "make demo: $DEMO exists and was not made by make demo; not touching it." >&2
	echo "  Choose another directory with SNOWFLAKE_DEMO_DIR=/path make demo." >&2
	exit 1
fi
if [ -d "$DEMO" ]; then
	stop_server "$DEMO"
	rm -rf "$DEMO"
fi
[ "${1:-}" = stop ] && { echo "demo server stopped"; exit 0; }

install_deps
build_install

mkdir -p "$DEMO"
touch "$DEMO/$MARK"
chmod 755 "$DEMO"
[ "$(id -u)" = 0 ] && chown postgres: "$DEMO"
say "starting a throwaway server in $DEMO"
start_recommended "$DEMO" "snowflake.worker_id = 7"
psql_at "$DEMO" -d postgres -v ON_ERROR_STOP=1 -f - <"$SRC/test/demo.sql"

cat <<MSG

The demo server is still running, set up as README recommends: snowflake
is not in its search_path, so SQL names the schema.  Connect:
    $( [ "$(id -u)" = 0 ] && echo "runuser -u postgres -- " )psql -h $DEMO -p 5432 -U postgres
and paste:
$(printf '    %s\n' "${PASTE[@]}")
Stop it with: make demo-stop
MSG
