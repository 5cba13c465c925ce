# snowflake: Snowflake IDs generated in PostgreSQL's shared memory
#
#   make demo       install what is missing, build, start a throwaway server, show IDs
#   make test-quick the same set-up, then the regression and isolation tests and
#                   three TAP tests on this machine's PostgreSQL: a few minutes
#   make test       every test on PostgreSQL 15 to 19 (JOBS=2 versions at once;
#                   PG_VERSIONS="15 18" for some of them)
#   make bench      the benchmark suite (make bench-quick: a smoke run); PG_MAJOR=NN
#                   runs it on that version, in its Debian chroot if this machine lacks it
#   make bench-mesh three nodes in an active-active mesh, measured (PostgreSQL 17)
#   make deb        build the Debian package, install it, test it
#   make torture    the random fault-history checker: SEEDS=N histories (100),
#                   STEPS, FIRST_SEED, FORCE=<kinds> to replay one
#   make torture-mesh  the mesh's random histories on new seeds, in the chroot of
#                   PG_MAJOR (17): SEEDS=N (10) from FIRST_SEED (1), STEPS
#   make sanitize   the regression, isolation and TAP tests of PG_MAJOR (17) in its
#                   chroot, the library built with -fsanitize=address,undefined;
#                   any report fails (PROVE_TESTS picks TAP files)
#   make && sudo make install && make installcheck   against a server of your own
#   make po/snowflake.pot  the catalogue of the messages, for translators

EXTENSION = snowflake
MODULE_big = snowflake
SCRIPTS = scripts/snowflake-mesh
OBJS = src/snowflake.o src/settings.o src/layout.o src/wal.o src/mark.o \
	src/generator.o src/keeper.o src/functions.o src/persist.o src/schemes.o src/obfuscate.o \
	src/identity.o src/claims.o src/confirm.o src/node.o src/text.o \
	src/registry.o
# The current version's full install script is built from sql/snowflake.sql
# (its one source), and so is the update script from the last release,
# from its template (sql/compose.pl); the scripts and control files of
# released versions, in released/, never change and are installed as
# they are, named one by one (a wildcard misses them in the
# out-of-tree builds of Debian's pg_buildext, which run this Makefile with
# -f from a build directory and VPATH set to the sources).  An install of
# 1.1 is 1.0 updated.  test/t/upgrade_extension.pl fails if a released
# script changes.
EXTVERSION := $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" \
	$(dir $(firstword $(MAKEFILE_LIST)))$(EXTENSION).control)
DATA_built = sql/$(EXTENSION)--$(EXTVERSION).sql sql/snowflake--1.1--1.2.sql
DATA = released/snowflake--1.0.sql released/snowflake--1.0--1.1.sql \
	released/snowflake--1.0.control released/snowflake--1.1.control
PGFILEDESC = "snowflake - Snowflake ID generator"

# pg_regress tests that run on a server with the library preloaded
REGRESS = generate block decode range settings markings status layouts zones schemes text convert defaults mesh
REGRESS_OPTS = --inputdir=test
# pg_isolation_regress specs (test/specs/, output in test/expected/) on such a server
# that also allows prepared transactions (max_prepared_transactions > 0)
ISOLATION = claims confirm confirm_commit repair reload ddl_locks
ISOLATION_OPTS = --inputdir=test --load-extension=snowflake

# the keeper reaches the worker id registry through libpq, as dblink does
PG_CPPFLAGS = -I$(srcdir)/src -I$(libpq_srcdir)
SHLIB_LINK_INTERNAL = $(libpq)
PG_CFLAGS = -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers

PG_MAJOR ?= 15
PG_CONFIG ?= $(firstword $(wildcard /usr/lib/postgresql/$(PG_MAJOR)/bin/pg_config) pg_config)
PGXS := $(shell $(PG_CONFIG) --pgxs 2>/dev/null)

# Before the server headers are installed, only the targets below work;
# they install them first.
ifneq ($(wildcard $(PGXS)),)
include $(PGXS)
endif

$(OBJS): src/clock.h src/compat.h src/layout.h src/persist.h src/settings.h \
	src/snowflake.h src/mark.h src/wal.h \
	src/identity.h src/messages.h src/node.h src/text.h

# The catalogue of every message the extension can raise, for translators:
# xgettext with PostgreSQL's keywords (src/nls-global.mk, src/backend/nls.mk;
# elog's messages are not translated), each message with the places it is
# raised.  test/messages.sh checks that it holds every one.
XGETTEXT ?= xgettext
GETTEXT_TRIGGERS = _ errmsg errmsg_plural:1,2 errdetail errdetail_log \
	errdetail_plural:1,2 errhint errcontext gettext_noop \
	GUC_check_errmsg GUC_check_errdetail GUC_check_errhint
GETTEXT_FLAGS = _:1:pass-c-format errmsg:1:c-format errmsg_plural:1:c-format \
	errmsg_plural:2:c-format errdetail:1:c-format errdetail_log:1:c-format \
	errdetail_plural:1:c-format errdetail_plural:2:c-format errhint:1:c-format \
	errcontext:1:c-format GUC_check_errmsg:1:c-format \
	GUC_check_errdetail:1:c-format GUC_check_errhint:1:c-format
MESSAGE_SOURCES = $(patsubst %.o,%.c,$(OBJS))

po/snowflake.pot: $(MESSAGE_SOURCES:%=$(srcdir)/%)
	@mkdir -p po
	cd $(srcdir) && $(XGETTEXT) -n --no-wrap --sort-by-file --from-code=UTF-8 \
		--package-name=snowflake --package-version=$(EXTVERSION) \
		$(addprefix -k,$(GETTEXT_TRIGGERS)) \
		$(addprefix --flag=,$(GETTEXT_FLAGS)) -o $(abspath $@) $(MESSAGE_SOURCES)

EXTRA_CLEAN = po

sql/$(EXTENSION)--$(EXTVERSION).sql: sql/$(EXTENSION).sql
	@mkdir -p sql
	cp $< $@

sql/snowflake--1.1--1.2.sql: sql/snowflake--1.1--1.2.sql.in sql/$(EXTENSION).sql sql/compose.pl
	@mkdir -p sql
	perl $(word 3,$^) $(word 1,$^) $(word 2,$^) >$@.tmp && mv $@.tmp $@

# out-of-tree builds need the object directory
$(OBJS): | objdir
.PHONY: objdir
objdir:
	@mkdir -p src

.PHONY: demo demo-stop test test-quick bench bench-quick bench-mesh deb torture torture-mesh sanitize installcheck-requirements

demo:
	PG_MAJOR=$(PG_MAJOR) bash test/demo.sh

demo-stop:
	PG_MAJOR=$(PG_MAJOR) bash test/demo.sh stop

test:
	PG_MAJOR=$(PG_MAJOR) bash test/run.sh

test-quick:
	PG_MAJOR=$(PG_MAJOR) PG_VERSIONS=$(PG_MAJOR) EXTRAS=no SUITE_PARTS='regress isolation tap' \
		PROVE_TESTS='t/gen_concurrency.pl t/clock_backwards.pl t/durable_crash_restart.pl' \
		bash test/run.sh

bench:
	PG_MAJOR=$(PG_MAJOR) bash test/bench/run.sh

bench-quick:
	PG_MAJOR=$(PG_MAJOR) QUICK=1 bash test/bench/run.sh

bench-mesh:
	PG_MAJOR=$(PG_MAJOR) bash test/bench/mesh.sh

deb:
	PG_MAJOR=$(PG_MAJOR) bash test/deb.sh

torture:
	PG_MAJOR=$(PG_MAJOR) SEEDS=$(SEEDS) STEPS=$(STEPS) FIRST_SEED=$(FIRST_SEED) \
		$(if $(FORCE),FORCE=$(FORCE)) bash test/torture.sh

# (PostgreSQL 17 unless PG_MAJOR is given)
torture-mesh:
	PG_MAJOR=$(if $(filter command line environment,$(origin PG_MAJOR)),$(PG_MAJOR),17) \
		SEEDS=$(SEEDS) STEPS=$(STEPS) FIRST_SEED=$(FIRST_SEED) bash test/torture-mesh.sh

# (PostgreSQL 17 unless PG_MAJOR is given; not part of make test)
sanitize:
	SANITIZE=1 SUITE_PARTS='regress isolation tap' \
		bash test/chroot.sh $(if $(filter command line environment,$(origin PG_MAJOR)),$(PG_MAJOR),17)

# make installcheck runs against a server of your own: say what it needs
# before a page of diffs does
installcheck: installcheck-requirements
# the tests call the extension's functions without its schema
installcheck: export PGOPTIONS += -c search_path=public,snowflake
installcheck-requirements:
	PSQL="$(bindir)/psql" bash $(srcdir)/test/installcheck-check.sh
