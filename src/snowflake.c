/*-------------------------------------------------------------------------
 *
 * snowflake.c
 *	  Module initialization: wires the settings, the shared memory and the
 *	  keeper together.  It owns nothing of its own.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "identity.h"
#include "messages.h"
#include "node.h"
#include "settings.h"
#include "snowflake.h"
#include "mark.h"
#include "wal.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static void
snowflake_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(node_shmem_size());
	RequestAddinShmemSpace(mark_shmem_size());
	RequestAddinShmemSpace(schemes_shmem_size());
	/* 0: the node's record, 1: DecimalId's generator id */
	RequestNamedLWLockTranche("snowflake", 2);
}

static void
snowflake_shmem_startup(void)
{
	StartEvidence ev;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	/* the record as the files hold it, then what the start found */
	node_shmem_init();
	identity_start(&ev);
	mark_shmem_init(ev.recovered);
	identity_started(&ev);
	schemes_shmem_init();
	LWLockRelease(AddinShmemInitLock);
}

void
_PG_init(void)
{
	/* the extension's own catalogue of messages (messages.h) */
	pg_bindtextdomain(TEXTDOMAIN);
	/* without preloading, only the decoding functions work */
	settings_define(process_shared_preload_libraries_in_progress);
	if (!process_shared_preload_libraries_in_progress)
	{
		/* loaded by pg_upgrade's restore: its new cluster is an upgrade */
		if (IsBinaryUpgrade && IsUnderPostmaster)
			identity_upgrade_noticed();
		return;
	}

	/*
	 * pg_upgrade starts both clusters in binary-upgrade mode: no ID is
	 * generated then, and the keeper would only hold connections.
	 */
	if (!IsBinaryUpgrade)
		keeper_register();
	wal_register(mark_replay, identity_replay);
	settings_worker_assigned = identity_configured;
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = snowflake_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = snowflake_shmem_startup;
}
