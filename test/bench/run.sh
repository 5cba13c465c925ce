#!/usr/bin/env bash
# test/bench/run.sh: `make bench` (and `make bench-quick` with QUICK=1).
# Measures snowflake_nextval() beside nextval(), gen_random_uuid(), a
# UUIDv7 in SQL, Instagram's next_id() and a bare C function, on a
# throwaway server; every figure is a ratio to a peer measured in the same
# run, the median of several repeats.  Writes results/latest.md, a CSV and
# two charts.
. "$(dirname "$0")/../lib.sh"

QUICK=${QUICK:-0}
if [ "$QUICK" = 1 ]; then
	N=200000 REPEATS=1 PGB_REPEATS=1 SECONDS_PER_RUN=1 ROWS=100000 CONC_BATCH=20000
else
	# bulk runs are short, pgbench runs are timed: 5 and 3 repeats keep the
	# whole suite under ten minutes on 2 cores
	N=2000000 REPEATS=5 PGB_REPEATS=3 SECONDS_PER_RUN=2 ROWS=2000000 CONC_BATCH=100000
fi
# a full run replaces the published results; a quick one writes elsewhere
if [ "$QUICK" = 1 ]; then
	OUT=${BENCH_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/snowflake-bench-quick.XXXXXX")}
else
	OUT=${BENCH_OUT:-$SRC/test/bench/results}
fi
mkdir -p "$OUT"

install_deps gnuplot-nox
build_install
say "building the floor module"
make -s -C "$SRC/test/bench/floor" PG_CONFIG="$PGBIN/pg_config"
as_root make -s -C "$SRC/test/bench/floor" PG_CONFIG="$PGBIN/pg_config" install >/dev/null

DIR=$(pg_workdir bench)
trap 'stop_server "$DIR"' EXIT
start_server "$DIR" yes "snowflake.worker_id = 1" "max_connections = 40" \
	"shared_buffers = '512MB'" "max_wal_size = '4GB'" "checkpoint_timeout = '30min'"
psql_at "$DIR" -d postgres -qc 'CREATE DATABASE bench'
psql_at "$DIR" -d bench -q -v ON_ERROR_STOP=1 -f - <"$SRC/test/bench/setup.sql"

q() { psql_at "$DIR" -d bench -XAtq -v ON_ERROR_STOP=1 -c "$1"; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
set_policy() {
	q "ALTER SYSTEM SET snowflake.max_run_ahead_ms = '$1'" && q "SELECT pg_reload_conf()" >/dev/null
	sleep 0.3
}
pgb() { as_pg "$PGBIN/pgbench" -h "$DIR" -p 5432 -U postgres -n "$@" bench 2>&1; }

CSV=$OUT/latest.tsv
printf "section\tgenerator\tsetting\tvalue\tunit\n" >"$CSV"
row() { printf "%s\t%s\t%s\t%s\t%s\n" "$@" >>"$CSV"; }

# 1. bulk generation in one backend
say "bulk generation, $N calls, median of $REPEATS"
bulk() {
	local name=$1 expr=$2 ms
	ms=$(for _ in $(seq "$REPEATS"); do
		q "SELECT bench_time(\$q\$SELECT count($expr) FROM generate_series(1, $N)\$q\$)"
	done | median)
	row bulk "$name" 1 "$(awk -v n="$N" -v ms="$ms" 'BEGIN {printf "%.0f", n / ms * 1000}')" ids_per_s
	printf '  %-32s %10.1f ms\n' "$name" "$ms"
}
bulk "C function call (floor)" "bench_counter()"
set_policy 0
bulk "snowflake_nextval()" "snowflake_nextval()"
set_policy -1
bulk "snowflake_nextval(), run-ahead" "snowflake_nextval()"
set_policy 0
bulk "nextval()" "nextval('bench_seq')"
bulk "gen_random_uuid()" "gen_random_uuid()"
bulk "UUIDv7 in SQL" "bench_uuidv7()"
bulk "Instagram next_id()" "insta_next_id()"
row bulk "layout ceiling (4096 per ms)" 1 4096000 ids_per_s

# 2. the same from several backends at once
say "concurrent generation, ${SECONDS_PER_RUN}s per run"
echo "SELECT count(snowflake_nextval()) FROM generate_series(1, $CONC_BATCH);" >"$DIR/snow.sql"
echo "SELECT count(nextval('bench_seq')) FROM generate_series(1, $CONC_BATCH);" >"$DIR/seq.sql"
[ "$(id -u)" = 0 ] && chown postgres: "$DIR"/*.sql
conc() {
	local name=$1 file=$2 k=$3 tps
	tps=$(for _ in $(seq "$PGB_REPEATS"); do
		pgb -c "$k" -j "$k" -T "$SECONDS_PER_RUN" -f "$DIR/$file" | sed -n 's/^tps = \([0-9.]*\).*/\1/p'
	done | median)
	row concurrent "$name" "$k" "$(awk -v t="$tps" -v b="$CONC_BATCH" 'BEGIN {printf "%.0f", t * b}')" ids_per_s
	printf '  %-32s %2d backends %12.0f IDs/s\n' "$name" "$k" "$(awk -v t="$tps" -v b="$CONC_BATCH" 'BEGIN {print t * b}')"
}
for k in 1 2 4 8; do
	set_policy 0
	conc "snowflake_nextval()" snow.sql "$k"
	set_policy -1
	conc "snowflake_nextval(), run-ahead" snow.sql "$k"
	set_policy 0
	conc "nextval()" seq.sql "$k"
done

# 3. inserts through pgbench
say "inserts, ${SECONDS_PER_RUN}s per run"
for t in bigserial snowflake uuid uuidv7; do
	echo "INSERT INTO k_$t (v) VALUES (1);" >"$DIR/ins_$t.sql"
done
[ "$(id -u)" = 0 ] && chown postgres: "$DIR"/*.sql
for sc in on off; do
	for c in 1 4 16; do
		for t in bigserial snowflake uuid uuidv7; do
			tps=$(for _ in $(seq "$PGB_REPEATS"); do
				PGOPTIONS="-c synchronous_commit=$sc" pgb -c "$c" -j 2 -T "$SECONDS_PER_RUN" \
					-f "$DIR/ins_$t.sql" | sed -n 's/^tps = \([0-9.]*\).*/\1/p'
			done | median)
			row "insert_sync_$sc" "$t" "$c" "$tps" tps
			printf '  synchronous_commit=%-3s %2d clients %-10s %10.0f tps\n' "$sc" "$c" "$t" "$tps"
		done
	done
done

# 4. index size and leaf density after a fixed number of rows, inserted in
# batches by four clients at once
say "index size after $ROWS rows"
for t in bigserial snowflake uuid uuidv7; do
	q "TRUNCATE k_$t"
	echo "INSERT INTO k_$t (v) SELECT 1 FROM generate_series(1, 1000);" >"$DIR/fill_$t.sql"
	[ "$(id -u)" = 0 ] && chown postgres: "$DIR/fill_$t.sql"
	pgb -c 4 -j 2 -t $((ROWS / 4000)) -f "$DIR/fill_$t.sql" >/dev/null
	read -r size density <<<"$(q "SELECT pg_relation_size('k_${t}_pkey'), avg_leaf_density FROM pgstatindex('k_${t}_pkey')" | tr '|' ' ')"
	row index "$t" "$ROWS" "$size" bytes
	row index_density "$t" "$ROWS" "$density" percent
	printf '  %-10s %12d bytes  leaf density %5.1f%%\n' "$t" "$size" "$density"
done

say "report"
SRC=$SRC QUICK=$QUICK N=$N REPEATS="$REPEATS (pgbench: $PGB_REPEATS)" ROWS=$ROWS SECONDS_PER_RUN=$SECONDS_PER_RUN \
	perl "$SRC/test/bench/report.pl" "$CSV" "$OUT"
cat "$OUT/latest.md"
echo
echo "results: $OUT"

