/*-------------------------------------------------------------------------
 *
 * keeper.c
 *	  The keeper: a background worker that runs once recovery has finished.
 *	  It logs the node's identity for its standbys, applies the recovery
 *	  floor, then makes every reservation durable (in WAL and in the state
 *	  file) ahead of the IDs being issued, so that backends rarely wait for
 *	  one, and applies the worker id of each reload.  And the short-lived
 *	  worker that reads and drops the replication origin 1.1 used.
 *
 * It uses identity.c, mark.c, registry.c, wal.c and the settings; nothing calls into
 * it but the postmaster.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "storage/lmgr.h"
#include "miscadmin.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/wait_event.h"

#include "compat.h"
#include "identity.h"
#include "messages.h"
#include "settings.h"
#include "snowflake.h"
#include "mark.h"
#include "registry.h"
#include "wal.h"

PGDLLEXPORT void snowflake_keeper_main(Datum arg);
PGDLLEXPORT void snowflake_origin_main(Datum arg);
static uint32 wait_event_keeper = 0;

/* what an interrupted DROP DATABASE leaves in datconnlimit (15.4 and later) */
#ifndef DATCONNLIMIT_INVALID_DB
#define DATCONNLIMIT_INVALID_DB	-2
#endif

/* the origin worker is tried again after this many rounds, doubling to 3000 */
#define ORIGIN_RETRY_FIRST	100
#define ORIGIN_RETRY_MOST	3000

/*
 * The origin worker: reads the replication origin through which 1.1 logged
 * reservations, once in the life of a data directory, and drops it once a
 * record of ours covers it.  The catalog of origins is read through the
 * relation cache, which needs a database: this worker connects to the one
 * the keeper chose (origin_database()) for the few moments it runs, so
 * that the keeper needs none.
 */
void
snowflake_origin_main(Datum arg)
{
	int64		mark = 0;
	LegacyOrigin r;

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(DatumGetObjectId(arg), InvalidOid, 0);

	/* never waits on the catalog's lock: a replication command may hold it */
	while ((r = wal_legacy_mark(&mark)) == LEGACY_BUSY)
		(void) WaitLatch(MyLatch, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 100,
						 PG_WAIT_EXTENSION);
	if (r == LEGACY_UNREADABLE)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("snowflake cannot read the progress of replication origin \"%s\"",
						SNOWFLAKE_LEGACY_ORIGIN),
				 errdetail("The origin through which version 1.1 logged its reservations exists, but the server has no state slots for replication origins, so its progress was not restored."),
				 errhint("Set %s to at least 1 and restart the server once; the origin is then read and dropped.",
						 PG_VERSION_NUM >= 180000 ? "max_active_replication_origins" : "max_replication_slots")));
	if (r == LEGACY_FOUND)
	{
		mark_legacy_found(true, mark);
		for (;;)
		{
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 100, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();

			/*
			 * A broken state is never covered until it is repaired: leave
			 * the database rather than hold it, without an answer, and the
			 * keeper starts another worker once the state is usable.
			 */
			if (!mark_legacy_wanted())
				proc_exit(1);
			if (mark_legacy_may_drop() && wal_drop_legacy_origin() != LEGACY_BUSY)
				break;
		}
	}
	mark_legacy_gone();
	proc_exit(0);
}

/*
 * The database the origin worker connects to: "postgres", or where it is
 * gone the first other one that takes connections, template1 last (a
 * connection to a template keeps CREATE DATABASE from copying it).
 * InvalidOid if none does.  The keeper reads only the shared catalog, and
 * only if its lock is free (*busy otherwise): a keeper queued behind
 * VACUUM FULL pg_database would renew no reservation meanwhile.
 */
static Oid
origin_database(bool *busy)
{
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;
	Oid			best = InvalidOid;
	int			best_rank = 3;

	StartTransactionCommand();
	*busy = !ConditionalLockRelationOid(DatabaseRelationId, AccessShareLock);
	if (*busy)
	{
		CommitTransactionCommand();
		return InvalidOid;
	}
	rel = table_open(DatabaseRelationId, NoLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);
		int			rank;

		if (!db->datallowconn || db->datconnlimit == DATCONNLIMIT_INVALID_DB)
			continue;
		rank = strcmp(NameStr(db->datname), "postgres") == 0 ? 0 :
			db->datistemplate ? 2 : 1;
		if (rank < best_rank || (rank == best_rank && db->oid < best))
		{
			best = db->oid;
			best_rank = rank;
		}
	}
	table_endscan(scan);
	table_close(rel, NoLock);
	CommitTransactionCommand();
	return best;
}

/*
 * Start the origin worker; NULL if it cannot be started.  *soon: try again
 * at the next round (pg_database was locked), not after the back-off.
 */
static BackgroundWorkerHandle *
start_origin_worker(bool *soon)
{
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle = NULL;
	Oid			db = origin_database(soon);

	if (*soon)
		return NULL;
	if (!OidIsValid(db))
	{
		ereport(WARNING,
				(errmsg("snowflake cannot look for replication origin \"%s\"",
						SNOWFLAKE_LEGACY_ORIGIN),
				 errdetail("No database accepts connections."),
				 errhint("Allow connections to a database, such as postgres, with ALTER DATABASE ... ALLOW_CONNECTIONS true.")));
		return NULL;
	}
	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	strlcpy(worker.bgw_library_name, "snowflake", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "snowflake_origin_main", BGW_MAXLEN);
	strlcpy(worker.bgw_name, "snowflake origin check", BGW_MAXLEN);
	strlcpy(worker.bgw_type, "snowflake origin check", BGW_MAXLEN);
	worker.bgw_main_arg = ObjectIdGetDatum(db);
	worker.bgw_notify_pid = MyProcPid;
	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
		return NULL;
	return handle;
}

static void
keeper_exit(int code, Datum arg)
{
	mark_keeper_exit();
}

void
snowflake_keeper_main(Datum arg)
{
	BackgroundWorkerHandle *origin_worker = NULL;
	bool		origin_soon = false;
	int			origin_next = ORIGIN_RETRY_FIRST;
	int			origin_gap = ORIGIN_RETRY_FIRST;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	/*
	 * Connected to no database: a connection would keep DROP, ALTER ...
	 * RENAME and CREATE DATABASE ... TEMPLATE of it from working, and
	 * pg_upgrade from restoring it.  Nothing the keeper does needs one.
	 */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);

	on_shmem_exit(keeper_exit, (Datum) 0);
	mark_keeper_arrived();

	/* before any reservation of this start: what this node is */
	identity_keep(true);
	if (mark_legacy_wanted())
		origin_worker = start_origin_worker(&origin_soon);
	for (int rounds = 1;; rounds++)
	{
		pid_t		pid;
		bool		origin_failed;

		/*
		 * The origin worker ended without an answer, or never started (its
		 * database dropped meanwhile, say): say so, and try again after ten
		 * seconds, then less and less often (each try that fails logs why),
		 * up to every five minutes.
		 */
		origin_failed = mark_legacy_wanted() &&
			(origin_worker == NULL ||
			 GetBackgroundWorkerPid(origin_worker, &pid) == BGWH_STOPPED);
		mark_keeper_start(origin_failed);
		if (origin_failed && (origin_soon || rounds >= origin_next))
		{
			if (origin_worker != NULL)
				pfree(origin_worker);
			origin_worker = start_origin_worker(&origin_soon);
			if (!origin_soon)
			{
				origin_next = rounds + origin_gap;
				origin_gap = Min(origin_gap * 2, ORIGIN_RETRY_MOST);
			}
		}

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
		identity_keep(false);
		mark_keep_ahead();
		registry_keep();
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
