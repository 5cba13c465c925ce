#!/usr/bin/env bash
# test/shardingsphere/check.sh: the "shardingsphere@ZONE" layouts agree with
# ShardingSphere's own algorithm, run in a JVM (ShardingSphereIds.java,
# compiled here; javac comes from Debian's default-jdk-headless when it is
# missing).  For JVMs in several zones (UTC, positive and negative offsets,
# zones with daylight saving time, a half-hour offset, fixed offsets):
# the JVM's IDs decode under the layout to the time, worker and sequence
# they were made with, and snowflake_from_timestamp() gives the JVM's ID;
# a node configured with the layout generates IDs that the JVM decodes to
# the time they were made and the node's worker id; plain "shardingsphere"
# is a JVM in UTC; the known values of the regression test's expected output
# are the JVM's; and every zone both PostgreSQL and Java know has the same
# epoch in both.  Uses the installed extension (make && make install
# first).  Ends with one line: "shardingsphere: N passed, M failed".
# Removes its files when everything passed, and otherwise says where they
# are.
. "$(dirname "$0")/../lib.sh"

HERE=$SRC/test/shardingsphere
passed=0
failed=0

ok() { passed=$((passed + 1)); echo "ok - $*"; }
not_ok() { failed=$((failed + 1)); echo "not ok - $*"; }

finish() {
	check_end shardingsphere "$passed" "$failed" "the server log among them"
	exit
}

check_start shardingsphere
if ! command -v javac >/dev/null; then
	say "installing default-jdk-headless"
	as_root apt-get update -qq
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		--no-install-recommends default-jdk-headless >/dev/null
fi

if ! javac -d "$WORK" "$HERE/ShardingSphereIds.java" 2>"$WORK/javac.log"; then
	cat "$WORK/javac.log"
	not_ok "ShardingSphereIds.java compiles"
	finish
fi

# jvm ZONE: ShardingSphereIds in a JVM whose default zone is ZONE, with a
# locale whose calendar is Gregorian (Calendar.getInstance() follows the
# locale; in th_TH it is Buddhist, where ShardingSphere's epoch is in 1473)
jvm() {
	java -Duser.timezone="$1" -Duser.language=en -Duser.country=US -cp "$WORK" ShardingSphereIds
}

sql() {
	psql_at "$dir" -d postgres -v ON_ERROR_STOP=1 -At "$@"
}

start_server "$dir" yes "snowflake.worker_id = 7" "fsync = off"
sql -qc 'CREATE EXTENSION snowflake'

# the layout's zone and the same zone as Java names it
zones=(UTC Asia/Shanghai America/New_York Europe/Berlin America/Los_Angeles
	America/Sao_Paulo Asia/Kolkata Australia/Lord_Howe +08:00 -04:00 +05:45)
java_zone() {
	case $1 in
		[+-]*) echo "GMT$1" ;;
		*) echo "$1" ;;
	esac
}

# times (Unix ms), workers and sequence numbers: a leap day, the last ms
# before New York's clocks went forward in 2026, the first ms after they
# went back in 2016, the first ms after the latest epoch (Los Angeles's)
times=(1582979696789 1772953199999 1478412000001 1477983600001)
fields=("0 0" "1023 4095" "7 1" "512 2048")

# 1. the JVM's IDs and the layout's agree, zone by zone
for z in "${zones[@]}"; do
	jz=$(java_zone "$z")
	layout="shardingsphere@$z"
	cmds="zone"$'\n'"epoch"
	for t in "${times[@]}"; do
		for f in "${fields[@]}"; do cmds+=$'\n'"id $t $f"; done
	done
	mapfile -t out < <(echo "$cmds" | jvm "$jz")
	if [ "${out[0]:-}" != "$jz" ]; then
		not_ok "$layout: the JVM takes $jz as its zone (it says \"${out[0]:-}\")"
		continue
	fi
	epoch=${out[1]}
	values=()
	zero=()
	i=2
	for t in "${times[@]}"; do
		for f in "${fields[@]}"; do
			read -r w s <<<"$f"
			values+=("(${out[$i]}::bigint, $t::bigint, $w, $s)")
			[ "$f" = "0 0" ] && zero+=("(${out[$i]}::bigint, $t::bigint)")
			i=$((i + 1))
		done
	done
	list=$(IFS=,; echo "${values[*]}")
	bad=$(sql -c "SELECT j.id, j.t, j.w, j.s, (extract(epoch FROM d.ts) * 1000)::bigint, d.worker_id, d.seq
		FROM (VALUES $list) j(id, t, w, s), snowflake_decode(j.id, '$layout') d
		WHERE (extract(epoch FROM d.ts) * 1000)::bigint <> j.t OR d.worker_id <> j.w OR d.seq <> j.s" 2>&1) || true
	if [ -z "$bad" ]; then
		ok "$layout: ${#values[@]} IDs of a JVM in $jz (epoch $epoch) decode to their time, worker and sequence"
	else
		not_ok "$layout: IDs of a JVM in $jz decode otherwise (id|time|worker|seq|decoded time|worker|seq):"
		echo "$bad" | sed 's/^/    /'
	fi
	list=$(IFS=,; echo "${zero[*]}")
	bad=$(sql -c "SELECT j.id, j.t, snowflake_from_timestamp(timestamptz 'epoch' + j.t * interval '1 ms', '$layout')
		FROM (VALUES $list) j(id, t)
		WHERE snowflake_from_timestamp(timestamptz 'epoch' + j.t * interval '1 ms', '$layout') <> j.id" 2>&1) || true
	if [ -z "$bad" ]; then
		ok "$layout: snowflake_from_timestamp() gives the JVM's ID of worker 0, sequence 0"
	else
		not_ok "$layout: snowflake_from_timestamp() differs from the JVM (JVM's id|time|extension's id):"
		echo "$bad" | sed 's/^/    /'
	fi
	if [ "$z" = UTC ]; then
		# plain "shardingsphere" is a JVM in UTC
		got=$(sql -c "SELECT (extract(epoch FROM snowflake_timestamp(1, 'shardingsphere')) * 1000)::bigint" 2>&1) || true
		if [ "$got" = "$epoch" ]; then
			ok "shardingsphere: the epoch of a JVM in UTC, $epoch"
		else
			not_ok "shardingsphere: epoch $got, a JVM in UTC has $epoch"
		fi
	fi
done

# 2. a node configured with the layout generates IDs that the JVM decodes to
# the time they were made and the node's worker id.  West to east: each
# change goes to an epoch no later, so the node continues above its IDs.
for z in America/Los_Angeles America/New_York -04:00 America/Sao_Paulo UTC \
	Europe/Berlin Asia/Kolkata Asia/Shanghai +08:00; do
	layout="shardingsphere@$z"
	[ "$z" = UTC ] && layout=shardingsphere
	sql -qc "ALTER SYSTEM SET snowflake.layout = '$layout'"
	as_pg "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w restart >/dev/null
	mapfile -t got < <(sql -c "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint" \
		-c "SELECT snowflake_nextval()" \
		-c "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint" \
		-c "SELECT layout FROM snowflake_status" 2>&1)
	if [ ${#got[@]} -ne 4 ]; then
		not_ok "$layout: the node generates"
		printf '    %s\n' "${got[@]}"
		continue
	fi
	read -r ms worker seq < <(echo "decode ${got[1]}" | jvm "$(java_zone "$z")")
	if [ "$worker" = 7 ] && [ "$ms" -ge "${got[0]}" ] && [ "$ms" -le "${got[2]}" ]; then
		ok "$layout (snowflake_status says \"${got[3]}\"): a JVM in $(java_zone "$z") decodes the node's ID ${got[1]} to worker 7 and the time it was made"
	else
		not_ok "$layout: a JVM in $(java_zone "$z") decodes the node's ID ${got[1]} to worker $worker, sequence $seq, time $ms, not worker 7 between ${got[0]} and ${got[2]}"
	fi
done
sql -qc "ALTER SYSTEM RESET snowflake.layout"

# 3. the known values in the regression test's expected output are the
# JVM's: zone | epoch | epoch_ms | id_2026 (worker 0, sequence 0 at
# 2026-01-01 00:00 UTC)
known=$(awk -F'|' '
	/^ *zone *\| *epoch *\| *epoch_ms *\| *id_2026 *$/ { on = 1; next }
	on && /^\(/ { exit }
	on && /^-/ { next }
	on { for (i = 1; i <= NF; i++) gsub(/^ +| +$/, "", $i); print $1, $3, $4 }
' "$SRC/expected/zones.out")
n=0
while read -r z epoch_ms id; do
	[ -n "$z" ] || continue
	mapfile -t out < <(printf 'zone\nepoch\nid 1767225600000 0 0\n' | jvm "$(java_zone "$z")")
	n=$((n + 1))
	if [ "${out[0]}" = "$(java_zone "$z")" ] && [ "${out[1]}" = "$epoch_ms" ] && [ "${out[2]}" = "$id" ]; then
		ok "expected/zones.out: $z's epoch $epoch_ms and ID $id are the JVM's"
	else
		not_ok "expected/zones.out: $z has epoch $epoch_ms and ID $id; a JVM in ${out[0]} has ${out[1]} and ${out[2]}"
	fi
done <<<"$known"
[ "$n" -gt 0 ] || not_ok "expected/zones.out has the table of known values"

# 4. every zone of PostgreSQL's time zone database that Java knows by the
# same name has the same epoch in both
sql -c "SELECT name FROM pg_timezone_names WHERE name !~ '^(posix|right)/' AND name <> 'localtime' ORDER BY name" \
	>"$WORK/names"
java -Duser.language=en -Duser.country=US -cp "$WORK" ShardingSphereIds --zones <"$WORK/names" >"$WORK/java-epochs"
awk '$1 == $2 { print $1 "\t" $3 }' "$WORK/java-epochs" >"$WORK/known-to-both"
sql -q -c "CREATE TEMP TABLE j (name text, epoch bigint)" \
	-c "\\copy j FROM '$WORK/known-to-both'" \
	-c "SELECT count(*) FROM j" \
	-c "SELECT name || ': JVM ' || epoch || ', extension ' || (extract(epoch FROM snowflake_timestamp(1, 'shardingsphere@' || name)) * 1000)::bigint
		FROM j WHERE (extract(epoch FROM snowflake_timestamp(1, 'shardingsphere@' || name)) * 1000)::bigint <> epoch" \
	>"$WORK/sweep" 2>&1 || true
compared=$(head -n 1 "$WORK/sweep")
total=$(wc -l <"$WORK/names")
if [ "$(wc -l <"$WORK/sweep")" -eq 1 ] && [ "${compared:-0}" -gt 400 ]; then
	ok "the epochs of all $compared zones that Java and PostgreSQL both know (of $total) agree"
else
	not_ok "zones whose epochs differ between Java and the extension (of ${compared:-?} compared):"
	tail -n +2 "$WORK/sweep" | sed 's/^/    /'
fi

finish
