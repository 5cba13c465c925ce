#!/usr/bin/env bash
# test/shardingsphere/check.sh: the "shardingsphere" layouts agree with
# ShardingSphere's own algorithm, run in a JVM (ShardingSphereIds.java,
# compiled here; javac comes from Debian's default-jdk-headless when it is
# missing), by each of the three rules its releases took the epoch by: the
# Calendar of the JVM's zone (up to 5.3, "shardingsphere@ZONE"), the offset
# in force when the JVM started (from 5.4, "shardingsphere@ZONE@DAY"), and
# UTC (with apache/shardingsphere#38932, "shardingsphere").  For JVMs in
# several zones (UTC, positive and negative offsets, zones with daylight
# saving time, half- and quarter-hour offsets, Casablanca's, fixed
# offsets), each rule, and JVMs started in July and in November 2025: 300
# IDs of the JVM decode under the layout to the time, worker and sequence
# they were made with, and are snowflake_from_timestamp()'s
# with that worker and sequence; the JVM decodes 300 IDs of the extension
# to their time; the rules' epochs differ where the issue found them to.  A
# node configured with a layout of each rule generates IDs that the JVM
# decodes to the time they were made and the node's worker id, and names
# the layout canonically; the known values of the regression test's
# expected output are the JVM's; and every zone both PostgreSQL and Java
# know has the same epoch in both.  Uses the installed extension (make &&
# make install first).  Ends with one line: "shardingsphere: N passed, M
# failed".  Removes its files when everything passed, and otherwise says
# where they are.
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
	America/Sao_Paulo Asia/Kolkata Australia/Lord_Howe Africa/Casablanca
	America/St_Johns Pacific/Chatham +08:00 -04:00 +05:45)
java_zone() {
	case $1 in
		[+-]*) echo "GMT$1" ;;
		*) echo "$1" ;;
	esac
}
# the days a JVM of the "started" rule started on: northern summer and
# southern winter, and the other way round.  Days of 2025: the tz data of
# 2026 rewrote that year's rules in several zones (tzdata 2026c has Morocco
# at +00:00 from 2026-09-20), and PostgreSQL's copy and the JDK's are
# updated apart.
days=(2025-07-15 2025-11-15)

# layout RULE ZONE [DAY]: the layout that reads the IDs of a JVM in ZONE
# whose release takes the epoch by RULE
layout() {
	case $1 in
		calendar) echo "shardingsphere@$2" ;;
		started) echo "shardingsphere@$2@$3" ;;
		utc) echo "shardingsphere" ;;
	esac
}

# 300 times (Unix ms), workers and sequence numbers: a leap day, the last
# ms before New York's clocks went forward in 2026, the first ms after they
# went back in 2016, the first ms after the latest epoch of these cases
# (Los Angeles's in winter), then a spread to 2079
awk 'BEGIN {
	split("1582979696789 1772953199999 1478412000001 1477987200001", special)
	split("0 1023 7 512", sw)
	split("0 4095 1 2048", ss)
	for (i = 0; i < 300; i++) {
		if (i < 4)
			print i "\t" special[i + 1] "\t" sw[i + 1] "\t" ss[i + 1]
		else
			printf "%d\t%.0f\t%d\t%d\n", i, 1477990000000 + i * 6600000000 + (i * 7919 * 1000003) % 86400000,
				(i * 37) % 1024, (i * 101) % 4096
	}
}' >"$WORK/times"

# 1. For each rule, zone and day, both ways: the IDs the JVM makes decode
# under the layout to their time, worker and sequence, and are the
# extension's snowflake_from_timestamp() with that worker and sequence;
# the extension's IDs of 300 times decode in the JVM to those times.  All
# cases in one JVM and one session.
n=0
: >"$WORK/cases"
: >"$WORK/jvm-in"
for rule in calendar started utc; do
	for z in "${zones[@]}"; do
		for day in $([ $rule = started ] && echo "${days[@]}" || echo -); do
			n=$((n + 1))
			l=$(layout $rule "$z" "$day")
			printf '%d\t%s\t%s\t%s\t%s\n' $n $rule "$z" "$day" "$l" >>"$WORK/cases"
		done
	done
done
sql -q -c "CREATE TEMP TABLE times (i int, t bigint, w int, s int)" \
	-c "CREATE TEMP TABLE cases (n int, rule text, zone text, day text, layout text)" \
	-c "\\copy times FROM '$WORK/times'" -c "\\copy cases FROM '$WORK/cases'" \
	-c "\\copy (SELECT c.n, t.i, snowflake_from_timestamp(timestamptz 'epoch' + t.t * interval '1 ms', c.layout) FROM cases c, times t ORDER BY c.n, t.i) TO '$WORK/ext-ids'" \
	>"$WORK/ext-ids.log" 2>&1 || { cat "$WORK/ext-ids.log"; not_ok "the extension takes every layout of the cases"; finish; }
while IFS=$'\t' read -r n rule z day l; do
	start=
	[ "$day" = - ] || start=${day}T12:00:00Z
	echo "jvm $(java_zone "$z") $rule $start"
	awk -F'\t' '{ print "id", $2, $3, $4 }' "$WORK/times"
	awk -F'\t' -v n="$n" '$1 == n { print "decode", $3 }' "$WORK/ext-ids"
done <"$WORK/cases" >"$WORK/jvm-in"
java -Duser.language=en -Duser.country=US -cp "$WORK" ShardingSphereIds <"$WORK/jvm-in" >"$WORK/jvm-out"
paste -d ' ' "$WORK/jvm-in" "$WORK/jvm-out" | awk -v dir="$WORK" '
	$1 == "jvm" { n++; print n "\t" $(NF - 1) "\t" $NF > dir "/jvm-epochs"; next }
	$1 == "id" { print n "\t" $2 "\t" $3 "\t" $4 "\t" $5 > dir "/jvm-ids"; next }
	$1 == "decode" { print n "\t" $2 "\t" $3 "\t" $4 "\t" $5 > dir "/jvm-decoded" }'
sql -q -c "CREATE TEMP TABLE cases (n int, rule text, zone text, day text, layout text)" \
	-c "CREATE TEMP TABLE ext (n int, i int, id bigint)" \
	-c "CREATE TEMP TABLE times (i int, t bigint, w int, s int)" \
	-c "CREATE TEMP TABLE jvm (n int, zone text, epoch bigint)" \
	-c "CREATE TEMP TABLE jids (n int, t bigint, w int, s int, id bigint)" \
	-c "CREATE TEMP TABLE jdec (n int, id bigint, t bigint, w int, s int)" \
	-c "\\copy cases FROM '$WORK/cases'" -c "\\copy ext FROM '$WORK/ext-ids'" \
	-c "\\copy times FROM '$WORK/times'" -c "\\copy jvm FROM '$WORK/jvm-epochs'" \
	-c "\\copy jids FROM '$WORK/jvm-ids'" -c "\\copy jdec FROM '$WORK/jvm-decoded'" \
	-c "SELECT c.n, j.zone, j.epoch,
		(SELECT count(*) FROM jids x WHERE x.n = c.n),
		(SELECT count(*) FROM jids x, snowflake_decode(x.id, c.layout) d
		 WHERE x.n = c.n AND ((extract(epoch FROM d.ts) * 1000)::bigint <> x.t OR d.worker_id <> x.w OR d.seq <> x.s)),
		(SELECT count(*) FROM jids x
		 WHERE x.n = c.n AND snowflake_from_timestamp(timestamptz 'epoch' + x.t * interval '1 ms', c.layout) | (x.w << 12) | x.s <> x.id),
		(SELECT count(*) FROM ext e JOIN times t USING (i) LEFT JOIN jdec x ON x.n = e.n AND x.id = e.id
		 WHERE e.n = c.n AND (x.t IS DISTINCT FROM t.t OR x.w <> 0 OR x.s <> 0))
		FROM cases c LEFT JOIN jvm j USING (n) ORDER BY c.n" \
	>"$WORK/both-ways" 2>&1 || true
declare -A epoch_of
while IFS=$'\t' read -r n rule z day l; do
	IFS='|' read -r m jz epoch made bad_decode bad_compose bad_back < <(grep "^$n|" "$WORK/both-ways" || echo)
	what="$l: a JVM in $(java_zone "$z") whose release takes the epoch by rule \"$rule\""
	[ "$day" = - ] || what="$what, started $day"
	epoch_of[$rule/$z/$day]=$epoch
	if [ "$m" != "$n" ]; then
		not_ok "$what: no answer (see below)"
		sed 's/^/    /' "$WORK/both-ways" | head -n 5
	elif [ "$jz" != "$(java_zone "$z")" ]; then
		not_ok "$what: the JVM takes $(java_zone "$z") as its zone (it says \"$jz\")"
	else
		[ "$made" = 300 ] && [ "$bad_decode" = 0 ] && [ "$bad_compose" = 0 ] &&
			ok "$what (epoch $epoch): its 300 IDs decode to their time, worker and sequence, and are snowflake_from_timestamp()'s with them" ||
			not_ok "$what (epoch $epoch): of its $made IDs, $bad_decode decode otherwise and $bad_compose differ from snowflake_from_timestamp()'s"
		[ "$bad_back" = 0 ] &&
			ok "$what: the JVM decodes the extension's 300 IDs to their time" ||
			not_ok "$what: the JVM decodes $bad_back of the extension's 300 IDs otherwise"
	fi
done <"$WORK/cases"

# what the issue found: the layout of one rule misreads the IDs of another.
# A JVM of 5.4 or later started in November (America/Sao_Paulo,
# Africa/Casablanca, America/St_Johns) or July (Pacific/Chatham,
# Australia/Lord_Howe) has an epoch an hour (Lord Howe: half an hour) from
# the Calendar's of its zone; a JVM of a release with the UTC rule has
# Shanghai's eight hours from the Calendar's.
misread() {
	local a=$1 b=$2 want=$3 got z day label
	z=$(echo "$a" | cut -d/ -f2- | sed 's|/[^/]*$||')
	day=${a##*/}
	if [ -z "${epoch_of[$a]:-}" ] || [ -z "${epoch_of[$b]:-}" ]; then
		not_ok "$z: the epochs of rule ${a%%/*} and rule ${b%%/*}"
		return
	fi
	label="rule ${a%%/*}"
	[ "$day" = - ] || label="$label started $day"
	got=$((epoch_of[$a] - epoch_of[$b]))
	if [ "$got" = "$want" ]; then
		ok "$z: a JVM of $label and one of rule ${b%%/*} have epochs $((want / 60000)) minutes apart, so one rule's layout misreads the other's IDs"
	else
		not_ok "$z: a JVM of $label and one of rule ${b%%/*} have epochs $got ms apart, not $want"
	fi
}
misread started/America/Sao_Paulo/2025-11-15 calendar/America/Sao_Paulo/- 3600000
misread started/Africa/Casablanca/2025-11-15 calendar/Africa/Casablanca/- -3600000
misread started/America/St_Johns/2025-11-15 calendar/America/St_Johns/- 3600000
misread started/Pacific/Chatham/2025-07-15 calendar/Pacific/Chatham/- 3600000
misread started/Australia/Lord_Howe/2025-07-15 calendar/Australia/Lord_Howe/- 1800000
misread utc/Asia/Shanghai/- calendar/Asia/Shanghai/- 28800000

# the table of docs/shardingsphere.md: the offset of a JVM's epoch in each
# zone by the Calendar and started on each day, as the JVM has it
offset_of() {
	local e=$((1477958400000 - $1)) m
	m=$((${e#-} / 60000))
	printf '%s%02d:%02d' "$([ "$e" -lt 0 ] && echo - || echo +)" $((m / 60)) $((m % 60))
}
rows=0
while IFS='|' read -r _ z cal first second _; do
	z=$(echo "$z" | tr -d ' `')
	rows=$((rows + 1))
	want="$(echo $cal) $(echo $first) $(echo $second)"
	got=
	for k in "calendar/$z/-" "started/$z/${days[0]}" "started/$z/${days[1]}"; do
		got="$got ${epoch_of[$k]:+$(offset_of "${epoch_of[$k]}")}"
	done
	if [ "${got# }" = "$want" ]; then
		ok "docs/shardingsphere.md: a JVM in $z has the offsets $want (by the Calendar, started ${days[*]})"
	else
		not_ok "docs/shardingsphere.md: a JVM in $z has the offsets $want; the JVM's are${got:- unknown}"
	fi
done < <(awk -v d1="${days[0]}" -v d2="${days[1]}" '
	/^\| JVM.s zone \| up to 5\.3/ { on = index($0, "started " d1) && index($0, "started " d2); next }
	on && /^\|---/ { next }
	on && /^\| `/ { print; next }
	on { exit }' "$SRC/docs/shardingsphere.md")
[ "$rows" -gt 0 ] || not_ok "docs/shardingsphere.md has the table of offsets by rule, for JVMs started ${days[*]}"

# 2. a node configured with the layout generates IDs that the JVM decodes to
# the time they were made and the node's worker id; snowflake_status names
# the layout canonically.  Latest epoch first: each change goes to an epoch
# no later, so the node continues above its IDs.
runs=("shardingsphere@America/Los_Angeles calendar America/Los_Angeles"
	"shardingsphere@America/New_York calendar America/New_York"
	"shardingsphere@-04:00 calendar -04:00"
	"shardingsphere@America/Sao_Paulo calendar America/Sao_Paulo"
	"shardingsphere calendar UTC"
	"shardingsphere@Europe/Berlin calendar Europe/Berlin"
	"shardingsphere@Asia/Kolkata calendar Asia/Kolkata"
	"shardingsphere@Asia/Shanghai calendar Asia/Shanghai"
	"shardingsphere@+08:00 calendar +08:00"
	"shardingsphere@America/St_Johns@2025-11-15 started America/St_Johns 2025-11-15"
	"shardingsphere@America/Sao_Paulo@2025-11-15 started America/Sao_Paulo 2025-11-15"
	"shardingsphere@Africa/Casablanca@2025-11-15 started Africa/Casablanca 2025-11-15"
	"shardingsphere@Pacific/Chatham@2025-07-15 started Pacific/Chatham 2025-07-15"
	"shardingsphere@Australia/Lord_Howe@2025-07-15 started Australia/Lord_Howe 2025-07-15"
	"shardingsphere utc Asia/Shanghai")
for r in "${runs[@]}"; do
	read -r l rule z day <<<"$r"
	echo "$(sql -c "SELECT (extract(epoch FROM snowflake_timestamp(1, '$l')) * 1000)::bigint") $r"
done | sort -k1,1nr >"$WORK/runs"
while read -r epoch l rule z day; do
	sql -qc "ALTER SYSTEM SET snowflake.layout = '$l'"
	as_pg "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w restart >/dev/null
	mapfile -t got < <(sql -c "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint" \
		-c "SELECT snowflake_nextval()" \
		-c "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint" \
		-c "SELECT layout FROM snowflake_status" 2>&1)
	what="$l (rule \"$rule\"${day:+, started $day})"
	if [ ${#got[@]} -ne 4 ]; then
		not_ok "$what: the node generates"
		printf '    %s\n' "${got[@]}"
		continue
	fi
	mapfile -t out < <(printf 'jvm %s %s %s\ndecode %s\n' "$(java_zone "$z")" "$rule" \
		"${day:+${day}T12:00:00Z}" "${got[1]}" | jvm "$(java_zone "$z")")
	read -r ms worker seq <<<"${out[1]:-}"
	# the name a JVM's offset has: the started rule's layout is a fixed
	# offset's
	name=$l
	if [ "$rule" = started ]; then
		east=$(((1477958400000 - ${out[0]#* }) / 60000))
		name=$(printf 'shardingsphere@%s%02d:%02d' "$([ $east -lt 0 ] && echo - || echo +)" $((${east#-} / 60)) $((${east#-} % 60)))
	fi
	if [ "$worker" = 7 ] && [ "$ms" -ge "${got[0]}" ] && [ "$ms" -le "${got[2]}" ] && [ "${got[3]}" = "$name" ]; then
		ok "$what, snowflake_status says \"${got[3]}\": a JVM in $(java_zone "$z") decodes the node's ID ${got[1]} to worker 7 and the time it was made"
	else
		not_ok "$what: snowflake_status says \"${got[3]}\" (the JVM's offset is \"$name\"); a JVM in $(java_zone "$z") decodes the node's ID ${got[1]} to worker $worker, sequence $seq, time $ms, not worker 7 between ${got[0]} and ${got[2]}"
	fi
done <"$WORK/runs"
sql -qc "ALTER SYSTEM RESET snowflake.layout"

# 3. the known values in the regression test's expected output are the
# JVM's: zone | epoch | epoch_ms | id_2026 (worker 0, sequence 0 at
# 2026-01-01 00:00 UTC)
known=$(awk -F'|' '
	/^ *zone *\| *epoch *\| *epoch_ms *\| *id_2026 *$/ { on = 1; next }
	on && /^\(/ { exit }
	on && /^-/ { next }
	on { for (i = 1; i <= NF; i++) gsub(/^ +| +$/, "", $i); print $1, $3, $4 }
' "$SRC/test/expected/zones.out")
n=0
while read -r z epoch_ms id; do
	[ -n "$z" ] || continue
	# ZONE@DAY: a JVM of the started rule, started that day
	rule=calendar start=
	case $z in
		*@*) rule=started start=${z#*@}T12:00:00Z ;;
	esac
	mapfile -t out < <(printf 'jvm %s %s %s\nid 1767225600000 0 0\n' "$(java_zone "${z%@*}")" $rule "$start" |
		jvm "$(java_zone "${z%@*}")")
	n=$((n + 1))
	if [ "${out[0]}" = "$(java_zone "${z%@*}") $epoch_ms" ] && [ "${out[1]}" = "$id" ]; then
		ok "test/expected/zones.out: $z's epoch $epoch_ms and ID $id are the JVM's (rule \"$rule\")"
	else
		not_ok "test/expected/zones.out: $z has epoch $epoch_ms and ID $id; a JVM (rule \"$rule\") in ${out[0]% *} has ${out[0]#* } and ${out[1]}"
	fi
done <<<"$known"
[ "$n" -gt 0 ] || not_ok "test/expected/zones.out has the table of known values"

# 4. every zone of PostgreSQL's time zone database that Java knows by the
# same name has the same epoch in both: by the Calendar, and by the started
# rule on two days of 2025.  Days before the latest changes of the rules:
# the tz data of PostgreSQL and of the JDK are updated apart (tzdata 2026b
# keeps British Columbia at -07:00 after 2026-11-01, OpenJDK 17.0.19 puts
# it back at -08:00), and on a day where they differ so do the epochs, as
# in a JVM.
sweep_days=(2025-01-15 2025-07-15)
sql -c "SELECT name FROM pg_timezone_names WHERE name !~ '^(posix|right)/' AND name <> 'localtime' ORDER BY name" \
	>"$WORK/names"
for day in - "${sweep_days[@]}"; do
	if [ "$day" = - ]; then
		java -Duser.language=en -Duser.country=US -cp "$WORK" ShardingSphereIds --zones calendar <"$WORK/names"
	else
		java -Duser.language=en -Duser.country=US -cp "$WORK" ShardingSphereIds --zones started "${day}T12:00:00Z" <"$WORK/names" |
			sed "s/^\\([^ ]*\\) \\([^ ]*\\)/\\1@$day \\2@$day/"
	fi
done >"$WORK/java-epochs"
awk '$1 == $2 { print $1 "\t" $3 }' "$WORK/java-epochs" >"$WORK/known-to-both"
sql -q -c "CREATE TEMP TABLE j (name text, epoch bigint)" \
	-c "\\copy j FROM '$WORK/known-to-both'" \
	-c "SELECT count(*) FROM j" \
	-c "SELECT name || ': JVM ' || epoch || ', extension ' || (extract(epoch FROM snowflake_timestamp(1, 'shardingsphere@' || name)) * 1000)::bigint
		FROM j WHERE (extract(epoch FROM snowflake_timestamp(1, 'shardingsphere@' || name)) * 1000)::bigint <> epoch" \
	>"$WORK/sweep" 2>&1 || true
compared=$(head -n 1 "$WORK/sweep")
total=$(($(wc -l <"$WORK/names") * (1 + ${#sweep_days[@]})))
if [ "$(wc -l <"$WORK/sweep")" -eq 1 ] && [ "${compared:-0}" -gt 1200 ]; then
	ok "the epochs of all $compared zones and days that Java and PostgreSQL both know (of $total) agree: by the Calendar, and started on ${sweep_days[*]}"
else
	not_ok "zones whose epochs differ between Java and the extension (of ${compared:-?} compared):"
	tail -n +2 "$WORK/sweep" | sed 's/^/    /'
fi

finish
