#!/usr/bin/env bash
# test/bench/run.sh: `make bench PG_MAJOR=NN` (and `make bench-quick` with
# QUICK=1).  Measures snowflake_nextval() beside nextval(),
# gen_random_uuid(), UUIDv7 (PostgreSQL's own uuidv7() from 18 on, one
# written in SQL before), Instagram's next_id() and a bare C function, on a
# throwaway server: bulk generation, concurrent generation, single-row
# inserts, the index they leave, bulk loads (INSERT ... SELECT and COPY),
# blocks of IDs, and the text forms of IDs both ways beside id::text and
# to_hex(id).  Every figure is a ratio to a peer measured in the same run,
# the median of several repeats.  A full run writes
# results/pgNN/: latest.md, a TSV, and two charts when gnuplot is there.
# A version this machine does not have runs in the Debian chroot of
# test/chroot.sh, and its results are copied out.
. "$(dirname "$0")/../lib.sh"

QUICK=${QUICK:-0}

if [ -z "${SUITE_HOST_ROOT:-}" ] && { [ "${BENCH_CHROOT:-0}" = 1 ] || [ ! -x "$PGBIN/pg_config" ]; }; then
	# from the host: the same script in the chroot, writing where the host
	# can reach it, then the results copied out
	ROOT=${SNOWFLAKE_CHROOT_BASE:-/var/tmp}/snowflake-chroot-$PG_MAJOR
	INSIDE=/build/bench-out
	if [ "$QUICK" = 1 ]; then
		DEST=${BENCH_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/snowflake-bench-quick.XXXXXX")}
	else
		DEST=${BENCH_OUT:-$SRC/test/bench/results/pg$PG_MAJOR}
	fi
	[ ! -d "$ROOT$INSIDE" ] || as_root rm -rf "$ROOT$INSIDE"
	rc=0
	QUICK=$QUICK BENCH_OUT=$INSIDE SUITE_SCRIPT=test/bench/run.sh \
		bash "$SRC/test/chroot.sh" "$PG_MAJOR" || rc=$?
	if [ -f "$ROOT$INSIDE/latest.md" ]; then
		mkdir -p "$DEST"
		as_root cp "$ROOT$INSIDE"/* "$DEST/"
		as_root chown -R "$(id -u):$(id -g)" "$DEST"
		echo "results: $DEST"
	else
		echo "the run in the chroot wrote no report"
		[ "$rc" -ne 0 ] || rc=1
	fi
	exit "$rc"
fi

if [ "$QUICK" = 1 ]; then
	N=200000 REPEATS=1 PGB_REPEATS=1 SECONDS_PER_RUN=1 ROWS=100000 CONC_BATCH=20000
	LOAD_ROWS=100000 BLOCK_IDS=65536 TEXT_ROWS=500000 TEXT_REPEATS=7
else
	# 3 repeats of the bulk and the timed pgbench runs, one of each load
	# of 5M rows: about 15 minutes on 2 cores
	N=2000000 REPEATS=3 PGB_REPEATS=3 SECONDS_PER_RUN=2 ROWS=2000000 CONC_BATCH=100000
	LOAD_ROWS=5000000 BLOCK_IDS=2097152 TEXT_ROWS=2000000 TEXT_REPEATS=7
fi
# a full run replaces the published results of its version; a quick one
# writes elsewhere
if [ "$QUICK" = 1 ]; then
	OUT=${BENCH_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/snowflake-bench-quick.XXXXXX")}
else
	OUT=${BENCH_OUT:-$SRC/test/bench/results/pg$PG_MAJOR}
fi
mkdir -p "$OUT"

# charts need gnuplot: installed on the host, optional in a chroot
if [ -z "${SUITE_HOST_ROOT:-}" ]; then
	install_deps gnuplot-nox
else
	install_deps
fi
build_install
say "building the floor module"
make -s -C "$SRC/test/bench/floor" PG_CONFIG="$PGBIN/pg_config"
as_root make -s -C "$SRC/test/bench/floor" PG_CONFIG="$PGBIN/pg_config" install >/dev/null

DIR=$(pg_workdir bench)
trap 'stop_server "$DIR"' EXIT
# a key for the opaque form, which the text section measures
start_server "$DIR" yes "snowflake.worker_id = 1" "max_connections = 40" \
	"snowflake.opaque_key = '$(printf '%064d' 0 | tr 0 7)'" \
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
# timed EXPR CALLS: the median ms of REPEATS runs of CALLS calls
timed() {
	for _ in $(seq "$REPEATS"); do
		q "SELECT bench_time(\$q\$SELECT count($1) FROM generate_series(1, $2)\$q\$)"
	done | median
}

# the UUIDv7 peer: PostgreSQL's own where there is one
UV7=$(q "SELECT bench_uuidv7_expr()")
if [ "$UV7" = "pg_catalog.uuidv7()" ]; then UV7_NAME="uuidv7()"; else UV7_NAME="UUIDv7 in SQL"; fi

CSV=$OUT/latest.tsv
printf "section\tgenerator\tsetting\tvalue\tunit\n" >"$CSV"
row() { printf "%s\t%s\t%s\t%s\t%s\n" "$@" >>"$CSV"; }
row meta server_version 1 "$(q 'SHOW server_version')" text
row meta date 1 "$(date -u '+%Y-%m-%d %H:%M UTC')" text
row meta uuidv7 1 "$UV7_NAME" text
row meta cores 1 "$(nproc)" count
SUITE_T0=$(date +%s)

# 1. bulk generation in one backend
say "bulk generation, $N calls, median of $REPEATS"
bulk() {
	local name=$1 expr=$2 ms
	ms=$(timed "$expr" "$N")
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
bulk "$UV7_NAME" "$UV7"
bulk "Instagram next_id()" "insta_next_id()"
row bulk "layout ceiling (4096 per ms)" 1 4096000 ids_per_s

# 2. the same from several backends at once
say "concurrent generation, ${SECONDS_PER_RUN}s per run"
echo "SELECT count(snowflake_nextval()) FROM generate_series(1, $CONC_BATCH);" >"$DIR/snow.sql"
echo "SELECT count(nextval('bench_seq')) FROM generate_series(1, $CONC_BATCH);" >"$DIR/seq.sql"
echo "SELECT count($UV7) FROM generate_series(1, $CONC_BATCH);" >"$DIR/uuidv7.sql"
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
	conc "$UV7_NAME" uuidv7.sql "$k"
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

# index size and leaf density of a primary key
pkey_stats() {
	q "SELECT pg_relation_size('${1}_pkey'), avg_leaf_density FROM pgstatindex('${1}_pkey')" | tr '|' ' '
}

# 4. index size and leaf density after a fixed number of rows, inserted in
# batches by four clients at once
say "index size after $ROWS rows"
for t in bigserial snowflake uuid uuidv7; do
	q "TRUNCATE k_$t"
	echo "INSERT INTO k_$t (v) SELECT 1 FROM generate_series(1, 1000);" >"$DIR/fill_$t.sql"
	[ "$(id -u)" = 0 ] && chown postgres: "$DIR/fill_$t.sql"
	pgb -c 4 -j 2 -t $((ROWS / 4000)) -f "$DIR/fill_$t.sql" >/dev/null
	read -r size density <<<"$(pkey_stats "k_$t")"
	row index "$t" "$ROWS" "$size" bytes
	row index_density "$t" "$ROWS" "$density" percent
	printf '  %-10s %12d bytes  leaf density %5.1f%%\n' "$t" "$size" "$density"
	# the rows are not needed again
	q "TRUNCATE k_$t"
done

# 5. bulk loads, the path of large imports: INSERT ... SELECT and COPY of
# rows without their key, so that the key's default makes every one; each
# into an empty table after a checkpoint, once
say "bulk loads of $LOAD_ROWS rows"
q "COPY (SELECT i FROM generate_series(1, $LOAD_ROWS) i) TO '$DIR/load.txt'"
load() {
	local kind=$1 t=$2 stmt=$3 ms size density
	q "TRUNCATE l_$t"
	q "CHECKPOINT"
	ms=$(q "SELECT bench_time(\$q\$$stmt\$q\$)")
	read -r size density <<<"$(pkey_stats "l_$t")"
	row "load_$kind" "$t" "$LOAD_ROWS" "$ms" ms
	row "load_${kind}_index" "$t" "$LOAD_ROWS" "$size" bytes
	row "load_${kind}_density" "$t" "$LOAD_ROWS" "$density" percent
	printf '  %-14s %-10s %10.0f ms  index %12d bytes  leaf density %5.1f%%\n' "$kind" "$t" "$ms" "$size" "$density"
}
for t in bigserial snowflake uuid uuidv7; do
	load insert "$t" "INSERT INTO l_$t (v) SELECT i FROM generate_series(1, $LOAD_ROWS) i"
	load copy "$t" "COPY l_$t (v) FROM '$DIR/load.txt'"
	q "TRUNCATE l_$t"
done
rm -f "$DIR/load.txt"

# 6. blocks of n IDs in one call, against nextval() on a sequence that
# steps by n: one call per block either way.  A block of 4096 is one whole
# tick of the default layout (4096 sequence numbers a millisecond).
say "blocks of IDs, $BLOCK_IDS IDs per run"
if [ -n "$(q "SELECT to_regprocedure('snowflake.snowflake_nextval_block(integer)')")" ]; then
	blk() {
		local name=$1 n=$2 expr=$3 ms calls=$((BLOCK_IDS / $2))
		ms=$(timed "$expr" "$calls")
		row blocks "$name" "$n" "$(awk -v n="$BLOCK_IDS" -v ms="$ms" 'BEGIN {printf "%.0f", n / ms * 1000}')" ids_per_s
		printf '  %-32s n=%-5d %10.1f ms  %8.1f ns per ID\n' "$name" "$n" "$ms" \
			"$(awk -v n="$BLOCK_IDS" -v ms="$ms" 'BEGIN {print ms * 1e6 / n}')"
	}
	blk "C function call (floor)" 1 "bench_counter()"
	for n in 1 16 256 4096; do
		set_policy 0
		blk "snowflake_nextval_block(n)" "$n" "snowflake.snowflake_nextval_block($n)"
		set_policy -1
		blk "snowflake_nextval_block(n), run-ahead" "$n" "snowflake.snowflake_nextval_block($n)"
		set_policy 0
		blk "nextval(), INCREMENT BY n" "$n" "nextval('bench_seq_$n')"
		# run-ahead may have taken IDs of ticks still to come: let the clock
		# pass them before the default policy is measured again
		sleep $((REPEATS * BLOCK_IDS / 4096000 + 1))
	done
else
	echo "  skipped: this build has no snowflake.snowflake_nextval_block(integer)"
	row blocks skipped 0 0 none
fi

# 7. IDs as text: what one call of each form costs, both ways, beside
# id::text and to_hex(id) (and their inverses), on the same rows in the
# same run.  Each repeat times count(f(x)) over the rows and, just before,
# count(x) over the same rows; the fastest of each, the runs a busy machine
# disturbed least, differ by the cost of the calls.  The opaque form, a
# hundred times dearer, runs over a fiftieth of the rows.
say "IDs as text, $TEXT_ROWS rows, fastest of $TEXT_REPEATS"
if [ -n "$(q "SELECT to_regprocedure('snowflake.snowflake_base32(bigint)')")" ]; then
	q "CREATE UNLOGGED TABLE text_ids AS
		SELECT id, id::text AS dec, to_hex(id) AS hex, snowflake_base32(id) AS b32,
			   snowflake_base62(id) AS b62, snowflake_base32(id, 'user') AS b32p,
			   snowflake_opaque(id) AS opq
		FROM (SELECT snowflake_nextval() AS id FROM generate_series(1, $TEXT_ROWS)) s" >/dev/null
	q "VACUUM ANALYZE text_ids" >/dev/null
	scan_ms() { q "SELECT bench_time(\$q\$SELECT count($1) FROM (SELECT * FROM text_ids LIMIT $2) t\$q\$)"; }
	# the table in shared buffers before anything is timed
	scan_ms "dec || hex || b32 || b62 || b32p || opq" "$TEXT_ROWS" >/dev/null
	# per_call WAY NAME EXPR COLUMN [ROWS]: against count(COLUMN), the
	# column EXPR reads, so that reaching it is not counted as the call's
	per_call() {
		local way=$1 name=$2 expr=$3 col=$4 rows=${5:-$TEXT_ROWS} ns
		ns=$(for _ in $(seq "$TEXT_REPEATS"); do
			echo "$(scan_ms "$col" "$rows") $(scan_ms "$expr" "$rows")"
		done | awk -v n="$rows" 'NR == 1 || $1 < b {b = $1} NR == 1 || $2 < m {m = $2}
			END {x = (m - b) * 1e6 / n; printf "%.1f", x < 0.1 ? 0.1 : x}')
		row "text_$way" "$name" 1 "$ns" ns_per_call
		printf '  %-7s %-40s %8.1f ns per call\n' "$way" "$name" "$ns"
	}
	per_call encode "id::text" "id::text" id
	per_call encode "to_hex(id)" "to_hex(id)" id
	per_call encode "snowflake_base32(id)" "snowflake_base32(id)" id
	per_call encode "snowflake_base62(id)" "snowflake_base62(id)" id
	per_call encode "snowflake_base32(id, 'user')" "snowflake_base32(id, 'user')" id
	per_call encode "snowflake_opaque(id)" "snowflake_opaque(id)" id $((TEXT_ROWS / 50))
	per_call decode "id::text" "dec::bigint" dec
	per_call decode "to_hex(id)" "('x' || lpad(hex, 16, '0'))::bit(64)::bigint" hex
	per_call decode "snowflake_base32(id)" "snowflake_from_base32(b32)" b32
	per_call decode "snowflake_base62(id)" "snowflake_from_base62(b62)" b62
	per_call decode "snowflake_base32(id, 'user')" "snowflake_from_base32(b32p, 'user')" b32p
	per_call decode "snowflake_opaque(id)" "snowflake_from_opaque(opq)" opq $((TEXT_ROWS / 50))
else
	echo "  skipped: this build has no snowflake.snowflake_base32(bigint)"
	row text_encode skipped 0 0 none
fi

SUITE_SECONDS=$(($(date +%s) - SUITE_T0))
say "report"
SRC=$SRC QUICK=$QUICK N=$N REPEATS="$REPEATS (pgbench: $PGB_REPEATS)" ROWS=$ROWS SECONDS_PER_RUN=$SECONDS_PER_RUN \
	LOAD_ROWS=$LOAD_ROWS BLOCK_IDS=$BLOCK_IDS TEXT_REPEATS=$TEXT_REPEATS SUITE_SECONDS=$SUITE_SECONDS \
	perl "$SRC/test/bench/report.pl" "$CSV" "$OUT"
cat "$OUT/latest.md"
echo
echo "results: $OUT (measured in $SUITE_SECONDS s)"
