#!/usr/bin/env bash
# test/orm/run.sh [BINDIR]: ORMs and schema tools do what README's "ORMs
# and schema tools" tells their users: TypeORM, Sequelize, Knex, MikroORM
# and Drizzle with drizzle-kit from npm (the versions package-lock.json
# pins, installed with npm ci), SQLAlchemy with Alembic, Django, Hibernate
# 3.6 and Rails 6.1 from Debian; and the ID libraries of README's table
# that npm has are read both ways with the layout the table names
# (idlibs).  Starts a throwaway server like the others (library
# preloaded, snowflake.worker_id = 7) and gives each tool a database of its
# own, owned by the role app, whose sessions have the search_path README
# recommends for applications: PostgreSQL's default, without snowflake,
# set on the role because the server-wide one of the tests has it; Rails
# makes its own databases, as the role its section of docs/orms.md
# creates.  Uses the installed extension of PG_MAJOR, or of the server in
# BINDIR.  Prints a line per test and ends with one line: "orm: N passed,
# M failed".  Removes its files when every test passed, and otherwise says
# where they are.
. "$(dirname "$0")/../lib.sh"

if [ -n "${1:-}" ]; then
	PGBIN=$1
	PGLIB=$("$PGBIN/pg_config" --pkglibdir)
fi
# Debian's python3, which sees Debian's packages (a python3 earlier on
# PATH may not)
PYTHON=/usr/bin/python3
NEED_NODE=1 install_deps python3-sqlalchemy python3-psycopg2 python3-alembic python3-django
# Rails (Active Record and its tasks) with ruby-pg; Hibernate 3.6 with
# PgJDBC, which reaches the server's Unix socket through junixsocket
install_quiet ruby-railties ruby-activerecord ruby-pg libhibernate3-java libjavassist-java \
	libslf4j-java libpostgresql-jdbc-java libjunixsocket-java libjunixsocket-jni
command -v javac >/dev/null || install_quiet default-jdk-headless

t0=$(date +%s)
check_start orm

passed=0
failed=0
fail() {
	echo "not ok - $*"
	failed=$((failed + 1))
}

cp -r "$SRC"/test/orm/{package.json,package-lock.json,*.mjs,*.py,*.rb,snowflake_shop,rails_shop} "$WORK/"
hibernate_cp=$(printf '/usr/share/java/%s.jar:' hibernate-core hibernate-commons-annotations geronimo-jpa_2.0_spec \
	geronimo-jta-1.2-spec dom4j antlr commons-collections3 javassist slf4j-api slf4j-nop postgresql junixsocket-common)
if ! javac -nowarn -d "$WORK/hibernate" -cp "$hibernate_cp" "$SRC"/test/orm/hibernate/*.java >"$WORK/javac.log" 2>&1; then
	cat "$WORK/javac.log"
	fail "the Hibernate test compiles"
fi
if ! (cd "$WORK" && npm ci --no-audit --no-fund >"$WORK/npm.log" 2>&1); then
	tail -n 20 "$WORK/npm.log"
	fail "npm ci"
fi

start_server "$dir" yes "snowflake.worker_id = 7" "fsync = off"
tools="typeorm sequelize knex mikroorm drizzle sqlalchemy django idlibs hibernate"
{
	echo "CREATE ROLE app LOGIN;"
	echo 'ALTER ROLE app SET search_path = "$user", public;'
	for db in $tools; do
		echo "CREATE DATABASE $db OWNER app;"
		echo "\\c $db"
		echo "CREATE EXTENSION snowflake;"
	done
} | psql_at "$dir" -d postgres -q -v ON_ERROR_STOP=1 -f - >"$WORK/setup.log" 2>&1 ||
	{ cat "$WORK/setup.log"; fail "setting up the server"; }

# run TOOL COMMAND...: the tool's TAP output, its lines "ok N - name"
# shown as "ok - TOOL: name", counted from its "# pass N" and "# fail N"
run() {
	local tool=$1 out=$WORK/$1.out p f
	shift
	(cd "$WORK" && PGHOST=$dir PGPORT=5432 PGUSER=app PGDATABASE=$tool SNOWFLAKE_DOCS=$SRC/docs "$@") >"$out" 2>&1 || true
	sed -n -E "s/^(not )?ok [0-9]+ - /\\1ok - $tool: /p" "$out"
	p=$(sed -n 's/^# pass \([0-9]*\)$/\1/p' "$out")
	f=$(sed -n 's/^# fail \([0-9]*\)$/\1/p' "$out")
	if [ -z "$p" ] || [ -z "$f" ]; then
		fail "$tool: no result"
		f=1 p=0
	fi
	[ "$f" -eq 0 ] || sed 's/^/    /' "$out" | tail -n 60
	passed=$((passed + p))
	failed=$((failed + f))
}

run typeorm node --test --test-reporter=tap typeorm.test.mjs
run sequelize node --test --test-reporter=tap sequelize.test.mjs
run knex node --test --test-reporter=tap knex.test.mjs
run mikroorm node --test --test-reporter=tap mikroorm.test.mjs
run drizzle node --test --test-reporter=tap drizzle.test.mjs
run sqlalchemy "$PYTHON" sqlalchemy_test.py
run django "$PYTHON" django_test.py
run idlibs node --test --test-reporter=tap idlibs.test.mjs
HIBERNATE_SOURCES=$SRC/test/orm/hibernate run hibernate java -cp "$WORK/hibernate:$hibernate_cp" shop.HibernateTest
# Rails makes databases of its own, as its role shop (docs/orms.md)
PSQL=$PGBIN/psql run rails /usr/bin/ruby rails_test.rb

echo "orm: ran in $(($(date +%s) - t0)) s"
check_end orm "$passed" "$failed" "each tool's output, the server log"
