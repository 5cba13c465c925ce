/*-------------------------------------------------------------------------
 *
 * keeper.c
 *	  The keeper: a background worker that runs once recovery has finished.
 *	  It applies the recovery floor, then makes every reservation durable
 *	  (in the state file and in WAL) ahead of the IDs being issued, so that
 *	  backends rarely wait for one.
 *
 * It uses mark.c and the settings; nothing calls into it but the postmaster.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/wait_event.h"

#include "compat.h"
#include "settings.h"
#include "snowflake.h"
#include "state.h"

PGDLLEXPORT void snowflake_keeper_main(Datum arg);
static uint32 wait_event_keeper = 0;

static void
keeper_exit(int code, Datum arg)
{
	mark_keeper_exit();
}

void
snowflake_keeper_main(Datum arg)
{
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	/*
	 * The catalog of replication origins is read through the relation
	 * cache, which needs a database: the keeper stays connected to
	 * "postgres", as pg_cron's launcher does.
	 */
	BackgroundWorkerInitializeConnection("postgres", NULL, 0);

	on_shmem_exit(keeper_exit, (Datum) 0);
	mark_keeper_start();
	for (;;)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 SNOWFLAKE_WINDOW_MS / 10,
						 compat_wait_event("SnowflakeKeeper", &wait_event_keeper));
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			int			before = snowflake_worker_id;

			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			if (snowflake_worker_id != before)
				ereport(LOG,
						(errmsg("snowflake worker id changed from %d to %d",
								before, snowflake_worker_id)));
		}
		mark_keep_ahead();
	}
}

void
keeper_register(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 1;
	strlcpy(worker.bgw_library_name, "snowflake", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "snowflake_keeper_main", BGW_MAXLEN);
	strlcpy(worker.bgw_name, "snowflake keeper", BGW_MAXLEN);
	strlcpy(worker.bgw_type, "snowflake keeper", BGW_MAXLEN);
	RegisterBackgroundWorker(&worker);
}
