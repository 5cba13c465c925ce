/*-------------------------------------------------------------------------
 *
 * snowflake.c
 *	  Module initialization: the settings (GUCs) and the shared memory hooks.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "snowflake.h"

PG_MODULE_MAGIC;

void		_PG_init(void);
PGDLLEXPORT void snowflake_settle_main(Datum arg);

int			snowflake_worker_id = 0;
int			snowflake_max_clock_backward_ms = 10;
int			snowflake_max_run_ahead_ms = 0;
const SnowflakeLayout *snowflake_layout = NULL;

static int	layout_choice = 0;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void
assign_layout(int newval, void *extra)
{
	int			n;

	snowflake_layout = &layout_presets(&n)[newval];
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
								  sizeof(struct config_enum_entry) * (n + 1));
	for (int i = 0; i < n; i++)
	{
		opts[i].name = p[i].name;
		opts[i].val = i;
		opts[i].hidden = false;
	}
	return opts;
}

static void
define_layout_setting(void)
{
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
	RequestNamedLWLockTranche("snowflake", 1);
}

static void
snowflake_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	generator_shmem_init();
	LWLockRelease(AddinShmemInitLock);
}

/*
 * A short-lived worker that runs when recovery ends (promotion, a restore,
 * a crash restart) and makes the recovery floor durable; see
 * generator_settle().
 */
void
snowflake_settle_main(Datum arg)
{
	BackgroundWorkerUnblockSignals();
	generator_settle();
	proc_exit(0);
}

static void
register_settle_worker(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	strlcpy(worker.bgw_library_name, "snowflake", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "snowflake_settle_main", BGW_MAXLEN);
	strlcpy(worker.bgw_name, "snowflake high-water mark", BGW_MAXLEN);
	strlcpy(worker.bgw_type, "snowflake", BGW_MAXLEN);
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
	register_settle_worker();

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = snowflake_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = snowflake_shmem_startup;
}
