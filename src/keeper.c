/*-------------------------------------------------------------------------
 *
 * keeper.c
 *	  The keeper: a background worker that runs once recovery has finished.
 *	  It applies the recovery floor, makes each reload's worker id the
 *	  node's in one step, and keeps the durable reservation ahead of the
 *	  IDs being issued, so that backends find it on disk already and do
 *	  not wait for an fsync.
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

void
snowflake_keeper_main(Datum arg)
{
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	/* a connection to no database: enough to show in pg_stat_activity */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);

	mark_publish_worker(snowflake_worker_id);
	mark_settle();
	for (;;)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 SNOWFLAKE_WINDOW_MS / 10,
						 compat_wait_event("SnowflakeKeeper", &wait_event_keeper));
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			mark_publish_worker(snowflake_worker_id);
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
