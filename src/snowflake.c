/*-------------------------------------------------------------------------
 *
 * snowflake.c
 *	  Module initialization: the settings (GUCs), the shared memory hooks
 *	  and the keeper background worker.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/wait_event.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/datetime.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "snowflake.h"

PG_MODULE_MAGIC;

void		_PG_init(void);
PGDLLEXPORT void snowflake_keeper_main(Datum arg);

int			snowflake_worker_id = 0;
int			snowflake_max_clock_backward_ms = 10;
int			snowflake_max_run_ahead_ms = 0;
int			snowflake_launch_id = 0;
int			snowflake_decimal_generator_min = 0;
int			snowflake_decimal_generator_max = 99999;
const SnowflakeLayout *snowflake_layout = NULL;
const char *snowflake_layout_problem = NULL;

static int	layout_choice = 0;

/* snowflake.layout = custom: the layout the custom_* settings describe */
static SnowflakeLayout custom_layout = {"custom"};
static int	custom_time_bits = 41;
static int	custom_worker_bits = 10;
static int	custom_seq_bits = 12;
static int	custom_tick_ms = 1;
static bool custom_seq_above_worker = false;
static char *custom_epoch = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/*
 * Parse an epoch given as "YYYY-MM-DD[ HH:MM:SS[.fff]]" in UTC, or as Unix
 * milliseconds.  Never raises an error: this runs in the postmaster.
 */
static bool
parse_epoch(const char *s, int64 *unix_ms)
{
	int			y, mo, d, h = 0, mi = 0, sec = 0, frac = 0, n, used = 0;
	char		fracbuf[4] = "000";

	if (s == NULL)
		return false;
	if (sscanf(s, "%d-%d-%d%n", &y, &mo, &d, &used) == 3)
	{
		const char *rest = s + used;

		if (*rest == ' ' || *rest == 'T')
		{
			n = 0;
			if (sscanf(rest + 1, "%d:%d:%d%n", &h, &mi, &sec, &n) != 3)
				return false;
			rest += 1 + n;
			if (*rest == '.')
			{
				for (int i = 0; i < 3 && rest[1 + i] >= '0' && rest[1 + i] <= '9'; i++)
					fracbuf[i] = rest[1 + i];
				frac = atoi(fracbuf);
				rest++;
				while (*rest >= '0' && *rest <= '9')
					rest++;
			}
		}
		if (*rest != '\0' || mo < 1 || mo > 12 || d < 1 || d > 31 ||
			h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 || sec > 59 || y < 1970)
			return false;
		*unix_ms = (int64) (date2j(y, mo, d) - UNIX_EPOCH_JDATE) * 86400000 +
			(int64) h * 3600000 + mi * 60000 + sec * 1000 + frac;
		return true;
	}
	n = 0;
	if (sscanf(s, INT64_FORMAT "%n", unix_ms, &n) == 1 && s[n] == '\0')
		return true;
	return false;
}

/* Build the custom layout from its settings; a problem stops generation. */
static void
build_custom_layout(void)
{
	char	   *why;
	static char buf[256];

	custom_layout.time_bits = custom_time_bits;
	custom_layout.worker_bits = custom_worker_bits;
	custom_layout.seq_bits = custom_seq_bits;
	custom_layout.tick_ms = custom_tick_ms;
	custom_layout.seq_above_worker = custom_seq_above_worker;
	custom_layout.description = "from the snowflake.custom_* settings";
	snowflake_layout = &custom_layout;
	snowflake_layout_problem = NULL;

	if (!parse_epoch(custom_epoch, &custom_layout.epoch_ms))
	{
		snprintf(buf, sizeof(buf),
				 "snowflake.custom_epoch \"%s\" is not a date (YYYY-MM-DD[ HH:MM:SS[.fff]], UTC) or Unix milliseconds from 1970 on",
				 custom_epoch ? custom_epoch : "");
		snowflake_layout_problem = buf;
	}
	else if (custom_layout.epoch_ms > GetCurrentTimestamp() / 1000 +
			 (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * INT64CONST(86400000))
		snowflake_layout_problem = "snowflake.custom_epoch is in the future";
	else if (!layout_finish(&custom_layout, &why))
	{
		snprintf(buf, sizeof(buf), "%s", why);
		snowflake_layout_problem = buf;
	}
	if (snowflake_layout_problem)
		ereport(WARNING,
				(errmsg("snowflake.layout = custom is unusable: %s", snowflake_layout_problem),
				 errdetail("The generator refuses to issue IDs until the custom layout is fixed and the server restarted.")));
}

/* Refuse to generate or decode under a custom layout that is unusable. */
void
snowflake_check_layout(void)
{
	if (snowflake_layout_problem)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("snowflake.layout = custom is unusable: %s", snowflake_layout_problem),
				 errhint("Fix the snowflake.custom_* settings in postgresql.conf and restart the server.")));
}

static void
assign_layout(int newval, void *extra)
{
	int			n;
	const SnowflakeLayout *p = layout_presets(&n);

	if (newval < n)
	{
		snowflake_layout = &p[newval];
		snowflake_layout_problem = NULL;
	}
	else
		build_custom_layout();
}

static bool
check_worker_id(int *newval, void **extra, GucSource source)
{
	const SnowflakeLayout *l = snowflake_layout ? snowflake_layout : layout_default();

	if (*newval > layout_max_worker(l))
	{
		GUC_check_errdetail("The \"%s\" layout has a %d-bit worker field, so worker ids run from 0 to " INT64_FORMAT ".",
							l->name, l->worker_bits, layout_max_worker(l));
		return false;
	}
	return true;
}

static const struct config_enum_entry *
layout_options(void)
{
	int			n;
	const SnowflakeLayout *p = layout_presets(&n);
	struct config_enum_entry *opts;

	opts = MemoryContextAllocZero(TopMemoryContext,
								  sizeof(struct config_enum_entry) * (n + 2));
	for (int i = 0; i < n; i++)
	{
		opts[i].name = p[i].name;
		opts[i].val = i;
		opts[i].hidden = false;
	}
	opts[n].name = "custom";
	opts[n].val = n;
	opts[n].hidden = false;
	return opts;
}

static void
define_custom_int(const char *name, const char *desc, int *var, int def,
				  int min, int max, int flags)
{
	DefineCustomIntVariable(name, desc, NULL, var, def, min, max,
							PGC_POSTMASTER, flags, NULL, NULL, NULL);
}

static void
define_layout_setting(void)
{
	/* the custom layout's parts first: choosing it reads them */
	define_custom_int("snowflake.custom_time_bits",
					  "Width of the time field of the custom layout.",
					  &custom_time_bits, 41, 1, 63, 0);
	define_custom_int("snowflake.custom_worker_bits",
					  "Width of the worker field of the custom layout.",
					  &custom_worker_bits, 10, 0, 62, 0);
	define_custom_int("snowflake.custom_seq_bits",
					  "Width of the sequence field of the custom layout.",
					  &custom_seq_bits, 12, 1, 62, 0);
	define_custom_int("snowflake.custom_tick_ms",
					  "Time unit of the custom layout.",
					  &custom_tick_ms, 1, 1, 86400 * 1000, GUC_UNIT_MS);
	DefineCustomBoolVariable("snowflake.custom_seq_above_worker",
							 "Put the sequence above the worker field in the custom layout, as Sonyflake does.",
							 NULL, &custom_seq_above_worker, false,
							 PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomStringVariable("snowflake.custom_epoch",
							   "Epoch of the custom layout: a UTC date and time, or Unix milliseconds.",
							   NULL, &custom_epoch, "2016-11-01 00:00:00",
							   PGC_POSTMASTER, 0, NULL, NULL, NULL);

	DefineCustomIntVariable("snowflake.launch_id",
							"DecimalId launch id, given by the deployment (0 only for tests).",
							NULL, &snowflake_launch_id, 0, 0, 99999,
							PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("snowflake.decimal_generator_min",
							"Lowest DecimalId generator id this node may take.",
							"Give the nodes of one system disjoint ranges.",
							&snowflake_decimal_generator_min, 0, 0, 99999,
							PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomIntVariable("snowflake.decimal_generator_max",
							"Highest DecimalId generator id this node may take.",
							NULL, &snowflake_decimal_generator_max, 99999, 0, 99999,
							PGC_POSTMASTER, 0, NULL, NULL, NULL);

	DefineCustomEnumVariable("snowflake.layout",
							 "Layout of the IDs this node generates and decodes by default.",
							 "Presets reproduce the ID formats of ShardingSphere, Twitter, Discord, Instagram and Sonyflake, and a layout whose IDs stay below 2^53 for JavaScript.",
							 &layout_choice,
							 0,
							 layout_options(),
							 PGC_POSTMASTER,
							 0,
							 NULL, assign_layout, NULL);
}

/*
 * Without preloading, snowflake.layout cannot be defined (it is fixed at
 * server start); the decoding functions follow the value the configuration
 * file gives it, which stays visible as a placeholder.
 */
static void
layout_from_placeholder(void)
{
	const char *name = GetConfigOption("snowflake.layout", true, false);
	const SnowflakeLayout *l = name ? layout_find(name) : NULL;

	snowflake_layout = l ? l : layout_default();
	if (name && pg_strcasecmp(name, "custom") == 0)
		snowflake_layout_problem = "the custom layout is read only when the library is preloaded";
}

static void
define_runtime_settings(void)
{
	DefineCustomIntVariable("snowflake.worker_id",
							"Worker id of this node, written into every ID it generates.",
							"Must differ on every node that generates IDs for the same tables.",
							&snowflake_worker_id,
							0,
							0, 65535,
							PGC_SIGHUP,
							0,
							check_worker_id, NULL, NULL);

	DefineCustomIntVariable("snowflake.max_clock_backward_ms",
							"How long to wait for a clock that went backwards before running ahead or refusing.",
							NULL,
							&snowflake_max_clock_backward_ms,
							10,
							0, 3600 * 1000,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("snowflake.max_run_ahead_ms",
							"How far IDs may carry a time ahead of the system clock; -1 means no limit.",
							"Running ahead happens when a tick's sequence numbers are used up or when the clock went backwards.",
							&snowflake_max_run_ahead_ms,
							0,
							-1, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
}

static void
snowflake_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(generator_shmem_size());
	RequestAddinShmemSpace(schemes_shmem_size());
	/* 0: the high-water mark, 1: DecimalId's generator id */
	RequestNamedLWLockTranche("snowflake", 2);
}

static void
snowflake_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	generator_shmem_init();
	schemes_shmem_init();
	LWLockRelease(AddinShmemInitLock);
}

/*
 * The keeper: a background worker that runs once recovery has finished.
 * It first applies the recovery floor (see generator_settle()), then keeps
 * the durable reservation ahead of the clock, so that backends find the
 * reservation on disk already and do not wait for an fsync.
 */
void
snowflake_keeper_main(Datum arg)
{
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	generator_settle();
	for (;;)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 SNOWFLAKE_WINDOW_MS / 10, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		generator_keep_ahead();
	}
}

static void
register_keeper(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 1;
	strlcpy(worker.bgw_library_name, "snowflake", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "snowflake_keeper_main", BGW_MAXLEN);
	strlcpy(worker.bgw_name, "snowflake keeper", BGW_MAXLEN);
	strlcpy(worker.bgw_type, "snowflake keeper", BGW_MAXLEN);
	RegisterBackgroundWorker(&worker);
}

void
_PG_init(void)
{
	/* without preloading, only the decoding functions work */
	if (!process_shared_preload_libraries_in_progress)
	{
		layout_from_placeholder();
		define_runtime_settings();
		return;
	}

	define_layout_setting();
	define_runtime_settings();
	MarkGUCPrefixReserved("snowflake");
	register_keeper();

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = snowflake_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = snowflake_shmem_startup;
}
