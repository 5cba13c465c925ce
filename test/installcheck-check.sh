#!/usr/bin/env bash
# test/installcheck-check.sh: run by `make installcheck` before the tests.
# The regression tests run against the server that libpq's environment
# (PGHOST, PGPORT, PGUSER) points at; they need the library preloaded,
# snowflake.worker_id = 7 and, for the isolation specs' prepared
# transactions, max_prepared_transactions above 0.  Says so plainly,
# instead of a page of diffs.
set -u
psql=${PSQL:-psql}
out=$("$psql" -X -A -t -d postgres -c \
	"SELECT current_setting('shared_preload_libraries') || '|' || current_setting('max_prepared_transactions') || '|' || coalesce(current_setting('snowflake.worker_id', true), '')" 2>&1)
if [ $? -ne 0 ]; then
	cat >&2 <<MSG
make installcheck: cannot connect to the server: $out
  It connects as libpq's environment says (PGHOST, PGPORT, PGUSER).  On a
  Debian cluster, run it as postgres from a copy of the sources postgres
  can write to, for example:
    cp -r . /tmp/snowflake-check && chown -R postgres: /tmp/snowflake-check
    runuser -u postgres -- make -C /tmp/snowflake-check installcheck
MSG
	exit 1
fi
preload=${out%%|*}
prepared=${out#*|}
prepared=${prepared%%|*}
worker=${out##*|}
case ",${preload// /}," in
*,snowflake,*) ;;
*)
	echo "make installcheck: the server does not preload snowflake (shared_preload_libraries = '$preload')." >&2
	echo "  Add 'snowflake' to shared_preload_libraries and restart the server." >&2
	exit 1
	;;
esac
if [ "$worker" != 7 ]; then
	echo "make installcheck: the tests expect snowflake.worker_id = 7; this server has '$worker'." >&2
	echo "  Use a test server with snowflake.worker_id = 7 (the tests change settings with ALTER SYSTEM and reset them)." >&2
	exit 1
fi
if [ "$prepared" -eq 0 ]; then
	echo "make installcheck: the isolation specs prepare transactions; this server has max_prepared_transactions = 0." >&2
	echo "  Set max_prepared_transactions to at least 1 and restart the server." >&2
	exit 1
fi
