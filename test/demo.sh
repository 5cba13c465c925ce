#!/usr/bin/env bash
# test/demo.sh: `make demo`.  Installs what is missing, builds and installs
# the extension, starts a throwaway server with it preloaded and shows IDs
# being generated and decoded.  `make demo-stop` stops it and removes its
# directory, SNOWFLAKE_DEMO_DIR (default /tmp/snowflake-demo).  A directory
# there that a demo did not make is left alone: the demo refuses to start.
. "$(dirname "$0")/lib.sh"

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
start_server "$DEMO" yes "snowflake.worker_id = 7"
psql_at "$DEMO" -d postgres -v ON_ERROR_STOP=1 -f - <"$SRC/test/demo.sql"

cat <<MSG

The demo server is still running.  Try it:
    $( [ "$(id -u)" = 0 ] && echo "runuser -u postgres -- " )psql -h $DEMO -p 5432 -U postgres
Stop it with: make demo-stop
MSG
