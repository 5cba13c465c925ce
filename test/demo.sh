#!/usr/bin/env bash
# test/demo.sh: `make demo`.  Installs what is missing, builds and installs
# the extension, starts a throwaway server with it preloaded and shows IDs
# being generated and decoded.  `make demo-stop` stops it.
. "$(dirname "$0")/lib.sh"

DEMO=${SNOWFLAKE_DEMO_DIR:-/tmp/snowflake-demo}

if [ -d "$DEMO" ]; then
	stop_server "$DEMO"
	rm -rf "$DEMO"
fi
[ "${1:-}" = stop ] && { echo "demo server stopped"; exit 0; }

install_deps
build_install

mkdir -p "$DEMO"
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
