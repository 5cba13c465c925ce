/*-------------------------------------------------------------------------
 *
 * identity.c
 *	  The node's identity across its life: whether this data directory may
 *	  go on issuing IDs under the worker id it is configured with, or is a
 *	  copy, an upgrade or a restore of another server's node that must
 *	  first be told what it is.
 *
 * $PGDATA/snowflake.identity (persist.c's format) records the system
 * identifier, the data directory's inode and the worker id in force the
 * last time this data directory ran, and whether it is held back.  At
 * server start the postmaster compares them with what it finds:
 *
 *	- no identity file and no state file: a data directory that never ran
 *	  the library (initdb, pg_upgrade, a cluster restored from a dump).  It
 *	  is held back until CREATE EXTENSION runs the install script here (a
 *	  fresh install) or the operator confirms it;
 *	- binary-upgrade mode: pg_upgrade made it; held back until confirmed;
 *	- backup_label or recovery.signal without standby.signal (a base backup
 *	  or a point-in-time restore started as a primary), another inode (a
 *	  copied directory) or another system identifier, under the worker id
 *	  recorded: a copy, held back until it gets a worker id of its own or
 *	  is confirmed as the node it was copied from.
 *
 * A standby (standby.signal) is the node it follows, so a promotion needs
 * no step.  A claim in snowflake_workers of this worker id by another
 * system that arrives (a restored dump) holds the node back too.  Only
 * superusers change those claims (snowflake_workers_guard()).
 *
 * Held back, the node publishes no worker id (mark.c), so the generator's
 * hot path takes its existing cold branch for an unset worker id and
 * refuses here; nothing is added to the path itself.
 *
 * This file uses persist.c and mark.c; generator.c and module
 * initialization use it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/stat.h>
#include <unistd.h>

#include "catalog/pg_authid.h"
#include "access/xlog.h"
#include "catalog/pg_control.h"
#include "commands/trigger.h"
#include "common/controldata_utils.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/rel.h"

#include "identity.h"
#include "persist.h"
#include "settings.h"
#include "state.h"

#define IDENTITY_FILE	"snowflake.identity"

typedef enum IdentityStatus
{
	IDENTITY_OK = 0,
	IDENTITY_NEW,				/* never ran the library; not installed here */
	IDENTITY_UPGRADED,			/* made by pg_upgrade */
	IDENTITY_COPY,				/* a copy of the node of its worker id */
	IDENTITY_INHERITED			/* another system's claim of its worker id */
} IdentityStatus;

/* why a copy was recognized */
typedef enum CopyReason
{
	COPY_NONE = 0,
	COPY_BACKUP_LABEL,
	COPY_RECOVERY_SIGNAL,
	COPY_OTHER_DIRECTORY,
	COPY_OTHER_SYSTEM,
	COPY_FILE_DAMAGED
} CopyReason;

typedef struct PersistedIdentity
{
	uint64		system_identifier;
	uint64		directory_inode;
	int32		worker;			/* in force when written; -1 if unset */
	uint32		status;			/* IdentityStatus */
	uint32		reason;			/* CopyReason */
	uint32		padding;
	uint64		other_system;	/* IDENTITY_INHERITED: the claimant */
} PersistedIdentity;

typedef struct IdentityShared
{
	LWLock	   *lock;			/* serializes backends' writes of the file */
	PersistedIdentity rec;		/* what the file holds */
	uint64		writes;
} IdentityShared;

static IdentityShared *ident = NULL;

PG_FUNCTION_INFO_V1(snowflake_identity_confirm);
PG_FUNCTION_INFO_V1(snowflake_identity_installed);
PG_FUNCTION_INFO_V1(snowflake_identity_claim_seen);
PG_FUNCTION_INFO_V1(snowflake_workers_guard);

Size
identity_shmem_size(void)
{
	return sizeof(IdentityShared);
}

static uint64
system_identifier(void)
{
	bool		crc_ok = false;
	ControlFileData *cf = get_controlfile(DataDir, &crc_ok);
	uint64		id = cf->system_identifier;

	pfree(cf);
	return id;
}

static uint64
directory_inode(void)
{
	struct stat st;

	if (stat(DataDir, &st) != 0)
		return 0;
	return (uint64) st.st_ino;
}

static bool
exists(const char *name)
{
	return access(name, F_OK) == 0;
}

static void
write_identity(int elevel)
{
	(void) persist_write_file(IDENTITY_FILE, &ident->rec, sizeof(ident->rec),
							  &ident->writes, elevel);
}

/*
 * At server start, with AddinShmemInitLock held, before mark.c has made
 * its state file: tell this data directory's life from the evidence.
 */
void
identity_shmem_init(void)
{
	bool		found;
	PersistedIdentity f;
	PersistedIdentity *r;
	const char *problem = NULL;
	bool		standby = exists("standby.signal");
	CopyReason	signal = COPY_NONE;
	bool		state_present = exists(SNOWFLAKE_MARK_FILE);
	MarkResult	res;

	ident = ShmemInitStruct("snowflake identity", sizeof(IdentityShared), &found);
	if (found)
		return;
	ident->lock = &(GetNamedLWLockTranche("snowflake identity"))->lock;
	ident->writes = 0;
	r = &ident->rec;
	memset(r, 0, sizeof(*r));
	r->system_identifier = system_identifier();
	r->directory_inode = directory_inode();
	r->worker = snowflake_worker_id;
	r->status = IDENTITY_OK;

	if (settings_problem() != NULL)
		return;					/* such a node neither reads nor writes */

	if (!standby && exists("backup_label"))
		signal = COPY_BACKUP_LABEL;
	else if (!standby && exists("recovery.signal"))
		signal = COPY_RECOVERY_SIGNAL;

	res = persist_read_file(IDENTITY_FILE, &f, sizeof(f), &ident->writes, &problem);
	if (res == MARK_OK && f.status > IDENTITY_INHERITED)
		res = MARK_BROKEN;
	if (IsBinaryUpgrade)
	{
		/*
		 * pg_upgrade starts the old cluster with -b too (its --check as
		 * well): only the new one, which has no state file, is made by it,
		 * and the old one's files stay as they are.
		 */
		if (state_present)
			return;
		r->status = IDENTITY_UPGRADED;
	}
	else if (res == MARK_ABSENT)
	{
		/* a node of a version before this file keeps its state file */
		if (!state_present)
			r->status = IDENTITY_NEW;
		else if (signal != COPY_NONE && r->worker != WORKER_ID_UNSET)
		{
			r->status = IDENTITY_COPY;
			r->reason = signal;
		}
	}
	else if (res == MARK_BROKEN)
	{
		r->status = IDENTITY_COPY;
		r->reason = COPY_FILE_DAMAGED;
	}
	else if (f.status != IDENTITY_OK)
	{
		/* held back until resolved, across restarts */
		r->status = f.status;
		r->reason = f.reason;
		r->other_system = f.other_system;
		if (f.status == IDENTITY_COPY || f.status == IDENTITY_INHERITED)
			r->worker = f.worker;
	}
	else if (!standby && r->worker != WORKER_ID_UNSET && r->worker == f.worker)
	{
		if (signal == COPY_NONE && f.system_identifier != r->system_identifier)
			signal = COPY_OTHER_SYSTEM;
		else if (signal == COPY_NONE && f.directory_inode != r->directory_inode)
			signal = COPY_OTHER_DIRECTORY;
		if (signal != COPY_NONE)
		{
			r->status = IDENTITY_COPY;
			r->reason = signal;
		}
	}

	write_identity(WARNING);
	if (r->status != IDENTITY_OK)
		ereport(WARNING,
				(errmsg("snowflake generates no IDs on this server until it is told which node it is"),
				 errdetail("%s", r->status == IDENTITY_COPY ?
						   "The data directory is a copy of the node with this worker id." :
						   r->status == IDENTITY_INHERITED ?
						   "Another system claimed this worker id." :
						   "The data directory does not know which IDs were issued before it."),
				 errhint("Call snowflake_nextval() to see the remedy.")));
}

/*
 * The worker id to publish for the configured one: none while the node is
 * held back.  In the postmaster, when snowflake.worker_id takes a value; a
 * copy given a worker id of its own is released.
 */
void
identity_worker_assigned(int worker)
{
	PersistedIdentity *r;

	if (ident == NULL || settings_problem() != NULL)
	{
		mark_publish_worker(worker);
		return;
	}
	r = &ident->rec;
	if ((r->status == IDENTITY_COPY || r->status == IDENTITY_INHERITED) &&
		worker != WORKER_ID_UNSET && worker != r->worker)
	{
		ereport(LOG,
				(errmsg("snowflake: worker id %d replaces %d, which this server was held back under; it generates again",
						worker, r->worker)));
		r->status = IDENTITY_OK;
		r->reason = COPY_NONE;
		r->worker = worker;
		write_identity(LOG);
	}
	else if (r->status == IDENTITY_OK && r->worker != worker)
	{
		/* a later copy is compared with the worker id in force now */
		r->worker = worker;
		write_identity(LOG);
	}
	else if (r->status == IDENTITY_NEW || r->status == IDENTITY_UPGRADED)
		r->worker = worker;
	mark_publish_worker(r->status == IDENTITY_OK ? worker : WORKER_ID_UNSET);
}

/*
 * Refuse if the node is held back; called on the generator's cold path
 * when no worker id is published.
 */
void
identity_require_ok(void)
{
	PersistedIdentity r;

	if (ident == NULL)
		return;
	r = ident->rec;
	switch ((IdentityStatus) r.status)
	{
		case IDENTITY_OK:
			return;
		case IDENTITY_NEW:
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("snowflake does not know which IDs were issued before this data directory"),
					 errdetail("It has no snowflake state of its own, and the extension was not created on this server: it was made by pg_upgrade or restored from another server, or the library was preloaded here for the first time. New IDs could repeat IDs the old server issued."),
					 errhint("As a superuser, run SELECT snowflake_confirm_node(above => N) with N the highest ID the old server issued (its snowflake_status.high_water_mark), or above => 0 if no server issued IDs under this worker id.")));
			break;
		case IDENTITY_UPGRADED:
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("snowflake does not know which IDs the cluster issued before pg_upgrade"),
					 errdetail("pg_upgrade does not carry \"%s\" over; the old cluster's IDs may carry times ahead of this server's clock.",
							   SNOWFLAKE_MARK_FILE),
					 errhint("As a superuser, run SELECT snowflake_confirm_node(old_data_directory => '...') naming the old cluster's data directory, or above => its snowflake_status.high_water_mark.")));
			break;
		case IDENTITY_INHERITED:
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("snowflake worker id %d is claimed by another system", r.worker),
					 errdetail("A claim by system " UINT64_FORMAT " arrived in snowflake_workers (a restored dump, say); this server could repeat the IDs that system issued.",
							   r.other_system),
					 errhint("Give this server a worker id of its own in snowflake.worker_id and reload, or, if it continues that system's node, run as a superuser SELECT snowflake_confirm_node(above => N) with N the highest ID that system issued.")));
			break;
		case IDENTITY_COPY:
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("snowflake data directory is a copy of the node with worker id %d", r.worker),
					 errdetail("%s Two servers issuing IDs under one worker id repeat each other's IDs.",
							   r.reason == COPY_BACKUP_LABEL ?
							   "It was started from a base backup without standby.signal." :
							   r.reason == COPY_RECOVERY_SIGNAL ?
							   "It was started with recovery.signal (a restore) without standby.signal." :
							   r.reason == COPY_OTHER_SYSTEM ?
							   "Its identity file names another system." :
							   r.reason == COPY_FILE_DAMAGED ?
							   "Its identity file \"" IDENTITY_FILE "\" cannot be read." :
							   "It is not the directory that last ran under this worker id (copied, or moved to another file system)."),
					 errhint("Give this server a worker id of its own in snowflake.worker_id and reload, or, if it replaces the node it was copied from, run SELECT snowflake_confirm_node() as a superuser.")));
			break;
	}
}

/*
 * The highest ID the state file of another data directory says its node
 * may have issued.
 */
static int64
old_mark(const char *dir)
{
	PersistedMark m;
	uint64		writes = 0;
	const char *problem = NULL;
	char		path[MAXPGPATH];

	snprintf(path, sizeof(path), "%s/%s", dir, SNOWFLAKE_MARK_FILE);
	switch (persist_read_file(path, &m, sizeof(m), &writes, &problem))
	{
		case MARK_ABSENT:
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FILE),
					 errmsg("could not find \"%s\"", path),
					 errhint("Name the data directory of the old cluster, or give above => its highest ID.")));
			break;
		case MARK_BROKEN:
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("snowflake state file \"%s\" cannot be used: %s", path, problem),
					 errhint("Give above => the highest ID the old cluster issued instead.")));
			break;
		case MARK_OK:
			break;
	}
	return m.mark_id;
}

/*
 * snowflake_identity_confirm(above, old_data_directory): this data directory
 * is the node of its worker id (restored, upgraded, moved); continue above
 * the given floor, if any, and generate.
 */
Datum
snowflake_identity_confirm(PG_FUNCTION_ARGS)
{
	int64		floor_id = -1;
	int64		result;
	IdentityStatus before;

	if (ident == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("snowflake_confirm_node() works only where the library is preloaded"),
				 errhint("Add 'snowflake' to shared_preload_libraries and restart the server.")));
	settings_require_usable();
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("snowflake_confirm_node() cannot run during recovery"),
				 errdetail("A standby is the node it follows; it needs no step."),
				 errhint("Run it on the server that is to generate, once it is a primary.")));
	if (!PG_ARGISNULL(0))
	{
		floor_id = PG_GETARG_INT64(0);
		if (floor_id < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("snowflake ID " INT64_FORMAT " is negative", floor_id)));
	}
	if (!PG_ARGISNULL(1))
	{
		/* it reads a file anywhere on the server */
		if (!has_privs_of_role(GetUserId(), ROLE_PG_READ_SERVER_FILES))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied to read another data directory's state file"),
					 errdetail("Only roles with privileges of the \"pg_read_server_files\" role may name old_data_directory.")));
		floor_id = Max(floor_id, old_mark(text_to_cstring(PG_GETARG_TEXT_PP(1))));
	}

	LWLockAcquire(ident->lock, LW_EXCLUSIVE);
	before = (IdentityStatus) ident->rec.status;
	if (floor_id < 0 && before != IDENTITY_OK && before != IDENTITY_COPY)
	{
		LWLockRelease(ident->lock);
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("snowflake_confirm_node() needs the highest ID the old server issued"),
				 errdetail("This data directory does not know which IDs were issued before it."),
				 errhint("Give above => that ID (the old server's snowflake_status.high_water_mark), or old_data_directory => the old cluster's data directory after pg_upgrade.")));
	}
	result = floor_id >= 0 ? mark_repair(floor_id, false) :
		(int64) pg_atomic_read_u64(&snowflake_shared->last_id);
	ident->rec.status = IDENTITY_OK;
	ident->rec.reason = COPY_NONE;
	ident->rec.other_system = 0;
	ident->rec.system_identifier = system_identifier();
	ident->rec.directory_inode = directory_inode();
	write_identity(ERROR);
	mark_publish_worker(ident->rec.worker);
	LWLockRelease(ident->lock);
	if (before != IDENTITY_OK)
		ereport(LOG,
				(errmsg("snowflake: this server confirmed as the node of worker id %d; IDs continue above " INT64_FORMAT,
						ident->rec.worker, result)));
	PG_RETURN_INT64(result);
}

/*
 * Called by the install script: a data directory that never ran the
 * library is a fresh node once the extension is created here.  Without
 * preloading, the file is written so that the first start with the
 * library knows it.
 */
Datum
snowflake_identity_installed(PG_FUNCTION_ARGS)
{
	if (ident == NULL)
	{
		IdentityShared local;

		if (exists(IDENTITY_FILE) || exists(SNOWFLAKE_MARK_FILE))
			PG_RETURN_VOID();
		memset(&local, 0, sizeof(local));
		local.rec.system_identifier = system_identifier();
		local.rec.directory_inode = directory_inode();
		local.rec.worker = WORKER_ID_UNSET;
		local.rec.status = IDENTITY_OK;
		(void) persist_write_file(IDENTITY_FILE, &local.rec, sizeof(local.rec),
								  &local.writes, WARNING);
		PG_RETURN_VOID();
	}
	LWLockAcquire(ident->lock, LW_EXCLUSIVE);
	if (ident->rec.status == IDENTITY_NEW)
	{
		ident->rec.status = IDENTITY_OK;
		write_identity(ERROR);
		mark_publish_worker(ident->rec.worker);
	}
	LWLockRelease(ident->lock);
	PG_RETURN_VOID();
}

/*
 * Called by the trigger on snowflake_workers for each claim that arrives:
 * another system's claim of this node's worker id holds the node back.
 */
Datum
snowflake_identity_claim_seen(PG_FUNCTION_ARGS)
{
	int32		worker = PG_GETARG_INT32(0);
	uint64		system = (uint64) PG_GETARG_INT64(1);

	if (ident == NULL || settings_problem() != NULL)
		PG_RETURN_VOID();
	LWLockAcquire(ident->lock, LW_EXCLUSIVE);
	if (worker == ident->rec.worker && system != ident->rec.system_identifier &&
		ident->rec.status != IDENTITY_INHERITED)
	{
		ident->rec.status = IDENTITY_INHERITED;
		ident->rec.other_system = system;
		mark_publish_worker(WORKER_ID_UNSET);
		write_identity(ERROR);
	}
	LWLockRelease(ident->lock);
	PG_RETURN_VOID();
}

/*
 * Trigger on snowflake_workers, before each row's INSERT, UPDATE or DELETE
 * and before TRUNCATE: only a superuser changes the claims.  Privileges on
 * the table do not decide it, since pg_write_all_data grants INSERT, UPDATE
 * and DELETE on every table, and a subscription applies with the rights of
 * its owner.  The trigger is enabled ALWAYS, so it fires in logical
 * replication's apply too, where superuser() asks about the role the
 * change is applied as (the table's owner; the subscription's owner with
 * run_as_owner, and before PostgreSQL 16), as the privilege checks do.
 */
Datum
snowflake_workers_guard(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	TriggerEvent event;
	const char *action;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("snowflake_workers_guard() was not called by the trigger manager")));
	event = trigdata->tg_event;
	if (!TRIGGER_FIRED_BEFORE(event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("snowflake_workers_guard() must be fired before the change")));

	if (!superuser())
	{
		if (TRIGGER_FIRED_BY_INSERT(event))
			action = "insert into";
		else if (TRIGGER_FIRED_BY_UPDATE(event))
			action = "update";
		else if (TRIGGER_FIRED_BY_DELETE(event))
			action = "delete from";
		else
			action = "truncate";
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to %s table %s",
						action, RelationGetRelationName(trigdata->tg_relation)),
				 errdetail("Only superusers may change the claims of worker ids."),
				 errhint("A superuser claims this node's worker id with snowflake_claim_worker().")));
	}

	if (!TRIGGER_FIRED_FOR_ROW(event))
		return PointerGetDatum(NULL);
	if (TRIGGER_FIRED_BY_UPDATE(event))
		return PointerGetDatum(trigdata->tg_newtuple);
	return PointerGetDatum(trigdata->tg_trigtuple);
}
