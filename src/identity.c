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
 * last time this data directory ran, whether it is held back and why, and
 * the worker ids that other systems' claims, arriving in
 * snowflake_workers, named.  At server start the postmaster compares it
 * with what it finds:
 *
 *	- no identity file and no state file: a data directory that never ran
 *	  the library.  It is held back until CREATE EXTENSION runs an install
 *	  script here (a fresh install) or the operator confirms it, as its
 *	  catalog may come from another server (pg_upgrade without the library);
 *	- binary-upgrade mode: pg_upgrade made it; held back until confirmed;
 *	- backup_label or recovery.signal without standby.signal (a base backup
 *	  or a point-in-time restore started as a primary), another inode (a
 *	  copied directory) or another system identifier, under the worker id
 *	  recorded: a copy, held back until it gets a worker id of its own or
 *	  is confirmed as the node it was copied from.  Started with no worker
 *	  id, it is held back under the one recorded; started with settings it
 *	  rejects, it keeps in the file what recovery would use up;
 *	- a worker id that another system claimed: held back until it gets a
 *	  worker id of its own or is confirmed as that system's node.  Only
 *	  superusers change those claims (snowflake_workers_guard()).
 *
 * A standby (standby.signal) is the node it follows: every change of the
 * record on a primary is logged in WAL (wal.c), and so is the record at
 * every start of a primary, and a standby replaying it takes it as its
 * own, so that once promoted it is what its primary was, whenever it was
 * made.  A copy started as a primary ignores the records it replays: it
 * is not the node they describe.
 *
 * Changes of the record are serialized by a lock and made by backends
 * (CREATE EXTENSION, a confirmation, an arriving claim, the first call
 * after a reload), by the keeper (the worker id read at a reload) and by
 * the startup process of a standby (a replayed record); the postmaster
 * decides at start, alone, and at a reload only publishes the worker id
 * it reads, at once for the whole node, unless the node is held back or
 * another system claimed that worker id.
 *
 * Held back, the node publishes no worker id (mark.c), so the generator's
 * hot path takes its existing cold branch for an unset worker id and
 * refuses here; nothing is added to the path itself.
 *
 * This file uses persist.c, mark.c and wal.c; generator.c, the keeper and
 * module initialization use it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/stat.h>
#include <unistd.h>

#include "access/htup_details.h"
#include "access/parallel.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_control.h"
#include "catalog/pg_type_d.h"
#include "commands/trigger.h"
#include "common/controldata_utils.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "replication/logicalworker.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "identity.h"
#include "persist.h"
#include "settings.h"
#include "state.h"
#include "wal.h"

#define IDENTITY_FILE	"snowflake.identity"

typedef enum IdentityStatus
{
	IDENTITY_OK = 0,
	IDENTITY_NEW,				/* never ran the library; not installed here */
	IDENTITY_UPGRADED,			/* made by pg_upgrade */
	IDENTITY_COPY,				/* a copy of the node of its worker id */
	IDENTITY_INHERITED			/* another system claimed its worker id */
} IdentityStatus;

/* why the node is held back: a copy recognized, or a new one's history */
typedef enum CopyReason
{
	COPY_NONE = 0,
	COPY_BACKUP_LABEL,
	COPY_RECOVERY_SIGNAL,
	COPY_OTHER_DIRECTORY,
	COPY_OTHER_SYSTEM,
	COPY_FILE_DAMAGED,
	COPY_FILE_UNREADABLE,		/* the file cannot be read: held, not written */
	NEW_AS_STANDBY				/* IDENTITY_NEW, started as a standby */
} CopyReason;

/*
 * Worker ids other systems claimed: below CLAIM_BITS in a bitmap (every
 * worker id of the common layouts), above it in a short list.
 */
#define CLAIM_BITS		1024
#define CLAIM_HIGH		16

typedef struct PersistedIdentity
{
	uint64		system_identifier;
	uint64		directory_inode;
	int32		worker;			/* in force when written; -1 if unset */
	uint32		status;			/* IdentityStatus */
	uint32		reason;			/* CopyReason */
	uint32		nhigh;			/* claims at or above CLAIM_BITS; may exceed
								 * CLAIM_HIGH */
	uint64		other_system;	/* the claimant, for the message */
	uint8		claimed[CLAIM_BITS / 8];
	int32		high[CLAIM_HIGH];
} PersistedIdentity;

typedef struct IdentityShared
{
	LWLock	   *lock;			/* serializes changes and writes of the file */
	PersistedIdentity rec;		/* what the file holds */
	uint64		writes;
	pg_atomic_uint32 configured;	/* snowflake.worker_id, as last read */
	pg_atomic_uint32 held;		/* 1 while the node is held back */
	bool		usable;			/* the settings can be trusted */
	bool		follows_primary;	/* started as a standby */
	bool		keep_file;		/* it could not be read: never replace it */
} IdentityShared;

static IdentityShared *ident = NULL;

/* what a start saw that recovery may use up before a later start */
typedef struct StartSeen
{
	bool		standby;
	CopyReason	signal;
} StartSeen;

static void change_file(bool (*change) (PersistedIdentity *r, const void *arg),
						const void *arg);
static void change_file_locked(bool (*change) (PersistedIdentity *r, const void *arg),
							   const void *arg);
static bool change_replayed(PersistedIdentity *r, const void *arg);
static bool change_started(PersistedIdentity *r, const void *arg);

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

/* Did another system claim this worker id? */
static bool
claimed(const PersistedIdentity *r, int worker)
{
	if (worker < 0)
		return false;
	if (worker < CLAIM_BITS)
		return (r->claimed[worker / 8] & (1 << (worker % 8))) != 0;
	for (uint32 i = 0; i < Min(r->nhigh, CLAIM_HIGH); i++)
		if (r->high[i] == worker)
			return true;
	/* more such claims arrived than were kept: it may be among them */
	return r->nhigh > CLAIM_HIGH;
}

static void
add_claim(PersistedIdentity *r, int worker)
{
	if (worker < 0 || claimed(r, worker))
		return;
	if (worker < CLAIM_BITS)
		r->claimed[worker / 8] |= (uint8) (1 << (worker % 8));
	else
	{
		if (r->nhigh < CLAIM_HIGH)
			r->high[r->nhigh] = worker;
		r->nhigh++;
	}
}

static void
drop_claim(PersistedIdentity *r, int worker)
{
	if (worker < 0)
		return;
	if (worker < CLAIM_BITS)
		r->claimed[worker / 8] &= (uint8) ~(1 << (worker % 8));
	else
		for (uint32 i = 0; i < Min(r->nhigh, CLAIM_HIGH); i++)
			if (r->high[i] == worker)
				r->high[i] = -1;
}

/*
 * Make a change of the record durable: in the file, and, on a primary
 * that can write WAL, in a record its standbys replay.
 */
static void
record_changed(bool log, int elevel)
{
	if (!ident->keep_file)
		(void) persist_write_file(IDENTITY_FILE, &ident->rec, sizeof(ident->rec),
								  &ident->writes, elevel);
	if (log)
		wal_log_identity(&ident->rec, sizeof(ident->rec));
}

/*
 * Apply the worker id configured now to the record: a copy or an heir of
 * another system's claim given a worker id of its own is released, a node
 * whose worker id another system claimed is held back, and the worker id
 * in force is recorded, so that a later copy is compared with it.  Then
 * publish the worker id, or none while held back.  With the lock held, or
 * in the postmaster at start; log: this process may write WAL.
 */
static void
settle(bool log, int elevel)
{
	PersistedIdentity *r = &ident->rec;
	int			worker = (int) (int32) pg_atomic_read_u32(&ident->configured);
	bool		changed = false;
	bool		held_under;

	if (r->status == IDENTITY_COPY && r->reason != COPY_FILE_UNREADABLE &&
		worker != WORKER_ID_UNSET && worker != r->worker)
	{
		ereport(LOG,
				(errmsg("snowflake: worker id %d replaces %d, which this server was held back under as a copy; it generates again",
						worker, r->worker)));
		r->status = IDENTITY_OK;
		r->reason = COPY_NONE;
		changed = true;
	}
	else if (r->status == IDENTITY_INHERITED && worker != WORKER_ID_UNSET &&
			 !claimed(r, worker))
	{
		ereport(LOG,
				(errmsg("snowflake: worker id %d replaces %d, which another system claimed; it generates again",
						worker, r->worker)));
		r->status = IDENTITY_OK;
		r->other_system = 0;
		changed = true;
	}
	if (r->status == IDENTITY_OK && claimed(r, worker))
	{
		ereport(LOG,
				(errmsg("snowflake: worker id %d was claimed by another system; this server generates no IDs until it is told which node it is",
						worker)));
		r->status = IDENTITY_INHERITED;
		/* the claimant kept is that of the worker id in force then */
		if (r->worker != worker)
			r->other_system = 0;
		changed = true;
	}

	/*
	 * The worker id last set is recorded, so that a later copy is compared
	 * with it: run with none for a while, the node is still that worker id's,
	 * and so is a copy made meanwhile.  A node held back keeps the one it is
	 * held back under, whatever worker id it runs with meanwhile.
	 */
	held_under = !changed && r->status == IDENTITY_COPY;
	if (r->worker != worker && worker != WORKER_ID_UNSET && !held_under)
	{
		if (r->status == IDENTITY_INHERITED)
			r->other_system = 0;	/* another claimed worker id */
		r->worker = worker;
		changed = true;
	}
	if (changed)
		record_changed(log, elevel);
	/* pairs with identity_configured(): see there */
	pg_atomic_write_u32(&ident->held, r->status == IDENTITY_OK ? 0 : 1);
	pg_memory_barrier();
	mark_publish_worker(r->status == IDENTITY_OK ? worker : WORKER_ID_UNSET);
}

/* settle() under the lock, in a process that may write WAL or not */
static void
settle_locked(bool log)
{
	LWLockAcquire(ident->lock, LW_EXCLUSIVE);
	settle(log, LOG);
	LWLockRelease(ident->lock);
}

static bool
usable(void)
{
	return ident != NULL && ident->usable;
}

/*
 * Under pg_upgrade (binary-upgrade mode): is this data directory the new
 * cluster?  One that never ran the library (no file at all), or ran it
 * without ever creating the extension (a file saying so, and a state file
 * that holds no ID), is; the old cluster has its node's files.
 */
static bool
upgrade_target(MarkResult res, const PersistedIdentity *f, bool state_present)
{
	if (res == MARK_ABSENT)
		return !state_present;
	return res == MARK_OK &&
		(f->status == IDENTITY_NEW || f->status == IDENTITY_UPGRADED);
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
	pg_atomic_init_u32(&ident->configured, (uint32) snowflake_worker_id);
	pg_atomic_init_u32(&ident->held, 0);
	ident->follows_primary = standby;
	r = &ident->rec;
	memset(r, 0, sizeof(*r));
	r->system_identifier = system_identifier();
	r->directory_inode = directory_inode();
	r->worker = snowflake_worker_id;
	r->status = IDENTITY_OK;

	if (!standby && exists("backup_label"))
		signal = COPY_BACKUP_LABEL;
	else if (!standby && exists("recovery.signal"))
		signal = COPY_RECOVERY_SIGNAL;

	/* such a node only keeps, for a start that can use them, what it saw */
	ident->usable = settings_problem() == NULL;
	if (!ident->usable)
	{
		StartSeen	seen = {standby, signal};

		if (IsBinaryUpgrade)
			identity_upgrade_noticed();
		else
			change_file(change_started, &seen);
		return;
	}

	res = persist_read_file(IDENTITY_FILE, &f, sizeof(f), &ident->writes, &problem);
	if (res == MARK_OK && f.status > IDENTITY_INHERITED)
		res = MARK_BROKEN;
	if (res == MARK_OK)
	{
		/* what other systems claimed stays, whatever else changes */
		memcpy(r->claimed, f.claimed, sizeof(r->claimed));
		memcpy(r->high, f.high, sizeof(r->high));
		r->nhigh = f.nhigh;
		r->other_system = f.other_system;
	}
	if (IsBinaryUpgrade)
	{
		/*
		 * pg_upgrade starts the old cluster with -b too (its --check as
		 * well), and its files stay as they are: only a new cluster, which
		 * never ran the library or ran it without the extension (started
		 * once to check its settings, say), is made by pg_upgrade.
		 */
		if (!upgrade_target(res, &f, state_present))
		{
			ident->usable = false;
			return;
		}
		r->status = IDENTITY_UPGRADED;
	}
	else if (res == MARK_ABSENT)
	{
		/* a node of a version before this file keeps its state file */
		if (!state_present)
		{
			r->status = IDENTITY_NEW;
			/* its primary's records, if it preloads the library, tell it */
			if (standby)
				r->reason = NEW_AS_STANDBY;
		}
		else if (signal != COPY_NONE && r->worker != WORKER_ID_UNSET)
		{
			r->status = IDENTITY_COPY;
			r->reason = signal;
		}
	}
	else if (res == MARK_UNREADABLE)
	{
		/* nothing is known of it: held back, and it is left as it is */
		r->status = IDENTITY_COPY;
		r->reason = COPY_FILE_UNREADABLE;
		ident->keep_file = true;
		ereport(WARNING,
				(errmsg("snowflake identity file \"%s\" %s", IDENTITY_FILE, problem)));
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
		if (f.status == IDENTITY_COPY || f.status == IDENTITY_INHERITED)
			r->worker = f.worker;
	}
	else if (!standby && f.worker != WORKER_ID_UNSET &&
			 (r->worker == f.worker || r->worker == WORKER_ID_UNSET))
	{
		/*
		 * Started with no worker id, a copy is still one: held back under
		 * the worker id it was copied with, and released by another.
		 */
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

	/* run with no worker id, it is still the node of the one it had */
	if (res == MARK_OK && r->worker == WORKER_ID_UNSET)
		r->worker = f.worker;

	if (!ident->keep_file)
		(void) persist_write_file(IDENTITY_FILE, r, sizeof(*r), &ident->writes, WARNING);
	if (r->status != IDENTITY_OK)
		ereport(WARNING,
				(errmsg("snowflake generates no IDs on this server until it is told which node it is"),
				 errdetail("%s", r->status == IDENTITY_COPY ?
						   "The data directory is a copy of the node with this worker id." :
						   r->status == IDENTITY_INHERITED ?
						   "Another system claimed this worker id." :
						   r->status == IDENTITY_UPGRADED ?
						   "The data directory was made by pg_upgrade." :
						   "The data directory has no snowflake state of its own."),
				 errhint("Call snowflake_nextval() to see the remedy.")));
}

/*
 * The worker id the configuration gives, as the postmaster reads it at a
 * reload: published at once for the whole node, as the node's worker id
 * must change even while the keeper is stuck (a clash found), unless the
 * node is held back or another system claimed it (checked first, so that
 * such a worker id is never published).  The record is left to those that
 * may change it (settle(), under the lock).  Against a concurrent settle()
 * that holds the node back: each side writes its word, then a barrier,
 * then reads the other's, so at least one of them sees the other's write
 * and the worker id ends unpublished.  A release meanwhile may leave it
 * unpublished too, and the next call settles it.
 */
void
identity_configured(int worker)
{
	if (ident == NULL)
		return;
	pg_atomic_write_u32(&ident->configured, (uint32) worker);
	if (!ident->usable)
		return;
	/* a worker id another system claimed is never published, not even briefly */
	if (pg_atomic_read_u32(&ident->held) != 0 || claimed(&ident->rec, worker))
	{
		mark_publish_worker(WORKER_ID_UNSET);
		return;
	}
	mark_publish_worker(worker);
	pg_memory_barrier();
	if (pg_atomic_read_u32(&ident->held) != 0)
		mark_publish_worker(WORKER_ID_UNSET);
}

/* In the postmaster at start, alone: publish the worker id, if any. */
void
identity_start(void)
{
	if (!usable())
	{
		mark_publish_worker(snowflake_worker_id);
		return;
	}
	settle(false, WARNING);
}

/*
 * The keeper's part, once recovery has ended: apply the worker id read at
 * the last reload, and, at its start (first), log the record, so that
 * standbys made before any change of it, or while the library was not
 * preloaded, know what this node is.
 */
void
identity_keep(bool first)
{
	static uint32 applied = (uint32) -2;
	uint32		now;

	if (!usable())
		return;
	now = pg_atomic_read_u32(&ident->configured);
	if (!first && now == applied)
		return;
	LWLockAcquire(ident->lock, LW_EXCLUSIVE);
	settle(true, LOG);
	if (first)
		wal_log_identity(&ident->rec, sizeof(ident->rec));
	LWLockRelease(ident->lock);
	applied = now;
}

/*
 * Replay of an identity record, in the startup process.  A standby takes
 * its primary's record as its own (its system identifier and directory
 * stay its own) and applies its own worker id to it; a node that was not
 * started as a standby is not the node the records describe and ignores
 * them.  A write that fails here loses nothing that could repeat an ID: at
 * worst the standby is held back once promoted.
 */
void
identity_replay(const void *data, Size len)
{
	PersistedIdentity p;
	PersistedIdentity *r;

	if (ident == NULL || !ident->follows_primary)
		return;
	memset(&p, 0, sizeof(p));
	memcpy(&p, data, Min(len, sizeof(p)));
	if (p.status > IDENTITY_INHERITED)
		return;
	/* the primary could not read its own file: that says nothing of this one */
	if (p.status == IDENTITY_COPY && p.reason == COPY_FILE_UNREADABLE)
		return;
	if (!ident->usable)
	{
		/* kept in the file for the start whose settings it can trust */
		change_file_locked(change_replayed, &p);
		return;
	}
	LWLockAcquire(ident->lock, LW_EXCLUSIVE);
	r = &ident->rec;
	p.system_identifier = r->system_identifier;
	p.directory_inode = r->directory_inode;
	if (memcmp(&p, r, sizeof(p)) != 0)
	{
		*r = p;
		record_changed(false, WARNING);
	}
	settle(false, WARNING);
	LWLockRelease(ident->lock);
}

/*
 * Refuse if the node is held back; called on the generator's cold path
 * when no worker id is published.  A worker id configured since (a copy
 * given its own, say) is applied first, so the first call sees it.
 */
void
identity_require_ok(void)
{
	PersistedIdentity r;

	if (!usable())
		return;
	settle_locked(!RecoveryInProgress() && !IsParallelWorker());
	r = ident->rec;
	/* a copy run with no worker id: the caller says that first */
	if (r.status == IDENTITY_COPY && r.reason != COPY_FILE_UNREADABLE &&
		(int) (int32) pg_atomic_read_u32(&ident->configured) == WORKER_ID_UNSET)
		return;
	switch ((IdentityStatus) r.status)
	{
		case IDENTITY_OK:
			return;
		case IDENTITY_NEW:
			if (r.reason == NEW_AS_STANDBY)
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("snowflake does not know which IDs were issued before this data directory"),
						 errdetail("It started as a standby with neither \"%s\" nor \"%s\", and its primary never logged which node it is (it did not run with the library preloaded while this server replayed its WAL)."
								   ,SNOWFLAKE_MARK_FILE, IDENTITY_FILE),
						 errhint("As a superuser, run SELECT snowflake.snowflake_confirm_node(above => 0) if the primary issued no IDs, or above => its highest ID.")));
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("snowflake does not know which IDs were issued before this data directory"),
					 errdetail("It started with neither \"%s\" nor \"%s\", and CREATE EXTENSION did not run in it: the extension came with a catalog from another server (a copy that left those files behind), whose IDs this server could repeat.",
							   SNOWFLAKE_MARK_FILE, IDENTITY_FILE),
					 errhint("As a superuser, run SELECT snowflake.snowflake_confirm_node(above => N) with N the highest ID the old server issued (its snowflake_status.high_water_mark), or above => 0 if no server issued IDs under this worker id.")));
			break;
		case IDENTITY_UPGRADED:
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("snowflake does not know which IDs the cluster issued before pg_upgrade"),
					 errdetail("pg_upgrade ran on this data directory (to upgrade into it, or with --check) and does not carry \"%s\" over; the old cluster's IDs may carry times ahead of this server's clock.",
							   SNOWFLAKE_MARK_FILE),
					 errhint("As a superuser, run SELECT snowflake.snowflake_confirm_node(old_data_directory => '...') naming the old cluster's data directory, or above => its snowflake_status.high_water_mark (after ALTER EXTENSION snowflake UPDATE where the extension is older than 1.2); above => 0 if pg_upgrade only checked it.")));
			break;
		case IDENTITY_INHERITED:
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("snowflake worker id %d is claimed by another system", r.worker),
					 r.other_system != 0 ?
					 errdetail("A claim by system " UINT64_FORMAT " arrived in snowflake_workers (a restored dump, say); this server could repeat the IDs that system issued.",
							   r.other_system) :
					 errdetail("Another system's claim of it arrived in snowflake_workers (a restored dump, say); this server could repeat the IDs that system issued."),
					 errhint("Give this server a worker id of its own in snowflake.worker_id and reload, or, if it continues that system's node, run as a superuser SELECT snowflake.snowflake_confirm_node(above => N) with N the highest ID that system issued.")));
			break;
		case IDENTITY_COPY:
			if (r.reason == COPY_FILE_UNREADABLE)
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("snowflake identity file \"%s\" cannot be read", IDENTITY_FILE),
						 errdetail("It could not be opened or read at server start (its mode or owner), so the node cannot tell whether this data directory is a copy of another node."),
						 errhint("Make it readable by the server's account and restart the server; the file is left as it is meanwhile.")));
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
							   "Its identity file \"" IDENTITY_FILE "\" is damaged." :
							   "It is not the directory that last ran under this worker id (copied, or moved to another file system)."),
					 errhint("Give this server a worker id of its own in snowflake.worker_id and reload, or, if it replaces the node it was copied from, run SELECT snowflake.snowflake_confirm_node() as a superuser.")));
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
		case MARK_UNREADABLE:
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
 * What the old data directory's identity file says: a node held back
 * there (a copy not yet confirmed, say) is held back here too, as an
 * upgrade does not make a copy the node; the claims it kept are kept here.
 * A directory of a version before this file has none: nothing to check.
 */
static void
old_identity(const char *dir, PersistedIdentity *claims)
{
	PersistedIdentity f;
	uint64		writes = 0;
	const char *problem = NULL;
	char		path[MAXPGPATH];

	snprintf(path, sizeof(path), "%s/%s", dir, IDENTITY_FILE);
	switch (persist_read_file(path, &f, sizeof(f), &writes, &problem))
	{
		case MARK_ABSENT:
			return;
		case MARK_BROKEN:
		case MARK_UNREADABLE:
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("snowflake identity file \"%s\" cannot be used: %s", path, problem),
					 errhint("Give above => the highest ID the old cluster issued instead, if it was the node of this worker id.")));
			break;
		case MARK_OK:
			break;
	}
	if (f.status != IDENTITY_OK)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the old cluster in \"%s\" was held back: it was not yet the node of worker id %d",
						dir, f.worker),
				 errdetail("%s", f.status == IDENTITY_COPY ?
						   "It was a copy of that node (a clone or a restore) that was never confirmed; an upgrade of it is a copy too." :
						   f.status == IDENTITY_INHERITED ?
						   "Another system had claimed that worker id." :
						   "It did not know which IDs were issued before it either."),
				 errhint("Give this server a worker id of its own in snowflake.worker_id and reload, or, if it replaces that node, run SELECT snowflake.snowflake_confirm_node(above => N) with N the highest ID the node issued.")));
	memcpy(claims->claimed, f.claimed, sizeof(claims->claimed));
	memcpy(claims->high, f.high, sizeof(claims->high));
	claims->nhigh = f.nhigh;
}

/*
 * snowflake_identity_confirm(above, old_data_directory): this data directory
 * is the node of its worker id (restored, upgraded, moved); continue above
 * the given floor, if any, and generate.  The floor is logged before the
 * record, so that a standby that knows the node is this one knows the
 * floor too.
 */
Datum
snowflake_identity_confirm(PG_FUNCTION_ARGS)
{
	int64		floor_id = -1;
	int64		result;
	IdentityStatus before;
	PersistedIdentity *r;
	PersistedIdentity old;

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
		char	   *dir = text_to_cstring(PG_GETARG_TEXT_PP(1));
		struct stat st;

		/* it reads a file anywhere on the server */
		if (!has_privs_of_role(GetUserId(), ROLE_PG_READ_SERVER_FILES))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied to read another data directory's state file"),
					 errdetail("Only roles with privileges of the \"pg_read_server_files\" role may name old_data_directory.")));
		/* a bad argument, not a damaged file */
		if (strlen(dir) + 1 + Max(strlen(IDENTITY_FILE), strlen(SNOWFLAKE_MARK_FILE)) >= MAXPGPATH)
			ereport(ERROR,
					(errcode(ERRCODE_NAME_TOO_LONG),
					 errmsg("data directory path is too long")));
		if (stat(dir, &st) != 0)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not access directory \"%s\": %m", dir),
					 errhint("Name the data directory of the old cluster.")));
		if (!S_ISDIR(st.st_mode))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("\"%s\" is not a directory", dir),
					 errhint("Name the data directory of the old cluster.")));
		memset(&old, 0, sizeof(old));
		old_identity(dir, &old);
		floor_id = Max(floor_id, old_mark(dir));
	}

	LWLockAcquire(ident->lock, LW_EXCLUSIVE);
	r = &ident->rec;
	before = (IdentityStatus) r->status;
	if (floor_id < 0 && before != IDENTITY_OK && before != IDENTITY_COPY)
	{
		LWLockRelease(ident->lock);
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("snowflake_confirm_node() needs the highest ID the old server issued"),
				 errdetail("This data directory does not know which IDs were issued before it."),
				 errhint("Give above => that ID (the old server's snowflake_status.high_water_mark), or old_data_directory => the old cluster's data directory after pg_upgrade.")));
	}
	result = floor_id >= 0 ? mark_repair(floor_id, false, true) :
		(int64) pg_atomic_read_u64(&snowflake_shared->last_id);
	r->status = IDENTITY_OK;
	r->reason = COPY_NONE;
	r->other_system = 0;
	r->system_identifier = system_identifier();
	r->directory_inode = directory_inode();
	/* the old cluster's claims of other systems, then its own node's */
	if (!PG_ARGISNULL(1))
	{
		for (int w = 0; w < CLAIM_BITS; w++)
			if (claimed(&old, w))
				add_claim(r, w);
		for (uint32 i = 0; i < Min(old.nhigh, CLAIM_HIGH); i++)
			add_claim(r, old.high[i]);
		if (old.nhigh > CLAIM_HIGH && r->nhigh <= CLAIM_HIGH)
			r->nhigh = CLAIM_HIGH + 1;	/* more than it kept */
	}
	/* this node continues the one whose claim held it back */
	drop_claim(r, (int) (int32) pg_atomic_read_u32(&ident->configured));
	record_changed(true, ERROR);
	settle(true, ERROR);
	LWLockRelease(ident->lock);
	if (before != IDENTITY_OK)
		ereport(LOG,
				(errmsg("snowflake: this server confirmed as the node of worker id %d; IDs continue above " INT64_FORMAT,
						r->worker, result)));
	PG_RETURN_INT64(result);
}

/*
 * The record as the file holds it, where shared memory has none (the
 * library is not preloaded, or its settings are unusable): changed by
 * change(), and written back if it returns true.  A node that never ran
 * the library starts as a fresh node, not yet installed.  A file that
 * cannot be read is left as it is (held back at the next start).
 */
static void
change_file(bool (*change) (PersistedIdentity *r, const void *arg), const void *arg)
{
	PersistedIdentity r;
	uint64		writes = 0;
	const char *problem = NULL;

	switch (persist_read_file(IDENTITY_FILE, &r, sizeof(r), &writes, &problem))
	{
		case MARK_BROKEN:
		case MARK_UNREADABLE:
			return;				/* held back at the next start */
		case MARK_ABSENT:
			if (exists(SNOWFLAKE_MARK_FILE))
				return;			/* a node of an earlier version */
			memset(&r, 0, sizeof(r));
			r.system_identifier = system_identifier();
			r.directory_inode = directory_inode();
			r.worker = WORKER_ID_UNSET;
			r.status = IDENTITY_NEW;
			break;
		case MARK_OK:
			break;
	}
	if (change(&r, arg))
		(void) persist_write_file(IDENTITY_FILE, &r, sizeof(r), &writes, WARNING);
}

/*
 * change_file() in a backend or the startup process: where shared memory
 * is there (settings unusable), under its lock, so that two changes at
 * once (two claims committing) do not lose one.
 */
static void
change_file_locked(bool (*change) (PersistedIdentity *r, const void *arg),
				   const void *arg)
{
	if (ident != NULL)
		LWLockAcquire(ident->lock, LW_EXCLUSIVE);
	change_file(change, arg);
	if (ident != NULL)
		LWLockRelease(ident->lock);
}

static bool
change_installed(PersistedIdentity *r, const void *arg)
{
	if (r->status != IDENTITY_NEW)
		return false;
	r->status = IDENTITY_OK;
	r->reason = COPY_NONE;
	return true;
}

static bool
change_upgraded(PersistedIdentity *r, const void *arg)
{
	if (r->status != IDENTITY_NEW)
		return false;
	r->status = IDENTITY_UPGRADED;
	r->reason = COPY_NONE;
	return true;
}

/*
 * A start whose settings were rejected, seen from the file: a standby's
 * directory is its own (once promoted it is compared with it, not with its
 * primary's), and a base backup or a restore started as a primary is a
 * copy of the node of the worker id recorded, whose backup_label or
 * recovery.signal recovery removes before the start that can use the
 * settings.
 */
static bool
change_started(PersistedIdentity *r, const void *arg)
{
	const StartSeen *seen = (const StartSeen *) arg;
	uint64		sysid = system_identifier();
	uint64		inode = directory_inode();

	if (seen->standby)
	{
		if (r->system_identifier == sysid && r->directory_inode == inode)
			return false;
		r->system_identifier = sysid;
		r->directory_inode = inode;
		return true;
	}
	if (seen->signal == COPY_NONE || r->status != IDENTITY_OK ||
		r->worker == WORKER_ID_UNSET)
		return false;
	r->status = IDENTITY_COPY;
	r->reason = seen->signal;
	return true;
}

/* A standby without shared memory to hold it: its primary's record. */
static bool
change_replayed(PersistedIdentity *r, const void *arg)
{
	PersistedIdentity p = *(const PersistedIdentity *) arg;

	p.system_identifier = r->system_identifier;
	p.directory_inode = r->directory_inode;
	if (memcmp(&p, r, sizeof(p)) == 0)
		return false;
	*r = p;
	return true;
}

/*
 * Claims of other systems that arrived in this transaction, kept as it
 * commits (before its commit record, so that no crash loses them): a claim
 * rolled back (a restore that failed, a savepoint) holds nothing back, and
 * one kept by a commit that then fails (a serialization failure, a PREPARE
 * refused) is taken back.  A transaction prepared and later rolled back
 * (ROLLBACK PREPARED, in another session) leaves its claims kept.
 */
typedef struct PendingClaim
{
	int32		worker;
	int			level;			/* the transaction nesting level it came in */
	bool		added;			/* kept by this transaction, new there */
	uint64		system;
} PendingClaim;

static PendingClaim *pending = NULL;
static int	npending = 0;
static int	maxpending = 0;

static bool
change_claims(PersistedIdentity *r, const void *arg)
{
	bool		changed = false;

	for (int i = 0; i < npending; i++)
	{
		if (pending[i].system == r->system_identifier ||
			claimed(r, pending[i].worker))
			continue;
		add_claim(r, pending[i].worker);
		if (pending[i].worker == r->worker)
			r->other_system = pending[i].system;
		pending[i].added = true;
		changed = true;
	}
	return changed;
}

static bool
change_unclaim(PersistedIdentity *r, const void *arg)
{
	bool		changed = false;

	for (int i = 0; i < npending; i++)
	{
		if (!pending[i].added)
			continue;
		drop_claim(r, pending[i].worker);
		changed = true;
	}
	return changed;
}

/*
 * Apply change() to the record: in the file, or under the lock with the
 * change logged and the worker id settled again.
 */
static void
change_claims_at(bool (*change) (PersistedIdentity *r, const void *arg), int elevel)
{
	if (!usable())
		change_file_locked(change, NULL);
	else
	{
		LWLockAcquire(ident->lock, LW_EXCLUSIVE);
		if (change(&ident->rec, NULL))
		{
			record_changed(true, elevel);
			settle(true, elevel);
		}
		LWLockRelease(ident->lock);
	}
}

static void
claims_xact_callback(XactEvent event, void *arg)
{
	bool		taken_back = false;

	if (npending == 0)
		return;
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
			/* still in the transaction: a failure here aborts it */
			change_claims_at(change_claims, ERROR);
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PREPARE:
			npending = 0;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			/* the commit failed after they were kept: take them back */
			for (int i = 0; i < npending; i++)
				taken_back |= pending[i].added;
			if (taken_back)
				change_claims_at(change_unclaim, WARNING);
			npending = 0;
			break;
		default:
			break;
	}
}

static void
claims_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();
	int			n = 0;

	if (event != SUBXACT_EVENT_ABORT_SUB && event != SUBXACT_EVENT_COMMIT_SUB)
		return;
	for (int i = 0; i < npending; i++)
	{
		if (pending[i].level < level)
			pending[n++] = pending[i];
		else if (event == SUBXACT_EVENT_COMMIT_SUB)
		{
			/* the parent has it now */
			pending[i].level = level - 1;
			pending[n++] = pending[i];
		}
	}
	npending = n;
}

/*
 * Called by the install scripts (of every version): a data directory that
 * never ran the library is a fresh node once the extension is created
 * here.  Without preloading, or with unusable settings, the file is
 * written so that the first start that can use it knows it.
 */
Datum
snowflake_identity_installed(PG_FUNCTION_ARGS)
{
	if (!usable())
	{
		change_file_locked(change_installed, NULL);
		PG_RETURN_VOID();
	}
	LWLockAcquire(ident->lock, LW_EXCLUSIVE);
	if (ident->rec.status == IDENTITY_NEW)
	{
		ident->rec.status = IDENTITY_OK;
		ident->rec.reason = COPY_NONE;
		record_changed(true, ERROR);
		settle(true, ERROR);
	}
	LWLockRelease(ident->lock);
	PG_RETURN_VOID();
}

/*
 * The library loaded, without preloading, in pg_upgrade's new cluster (its
 * schema is restored there, which loads the library to check each C
 * function): a data directory made by pg_upgrade, whatever is preloaded
 * when it first runs.  The old cluster, whose files stay as they are, has
 * them, and is left alone.
 */
void
identity_upgrade_noticed(void)
{
	change_file(change_upgraded, NULL);
}

/* A claim of another system, kept if this transaction commits. */
static void
pend_claim(int32 worker, uint64 system)
{
	static bool registered = false;

	if (!registered)
	{
		RegisterXactCallback(claims_xact_callback, NULL);
		RegisterSubXactCallback(claims_subxact_callback, NULL);
		registered = true;
	}
	if (npending == maxpending)
	{
		maxpending = Max(16, maxpending * 2);
		pending = pending == NULL ?
			MemoryContextAlloc(TopMemoryContext, maxpending * sizeof(PendingClaim)) :
			repalloc(pending, maxpending * sizeof(PendingClaim));
	}
	pending[npending].worker = worker;
	pending[npending].system = system;
	pending[npending].level = GetCurrentTransactionNestLevel();
	pending[npending].added = false;
	npending++;
}

/*
 * Called by the trigger on snowflake_workers for each claim that arrives
 * by INSERT or COPY (a restored dump; logical replication too, which an
 * aggregator or a mesh member receives every node's claims by): another
 * system's claim of a worker id is kept once its transaction commits, and
 * holds the node back whenever that is its worker id, now or after a
 * reload.
 */
Datum
snowflake_identity_claim_seen(PG_FUNCTION_ARGS)
{
	pend_claim(PG_GETARG_INT32(0), (uint64) PG_GETARG_INT64(1));
	PG_RETURN_VOID();
}

/*
 * Another system's claim that a restore (INSERT or COPY in a backend)
 * brings for a worker id this system already claimed in the table: the
 * dump of another system's node of that worker id, restored into a
 * cluster that claimed it first.  It is kept as an arriving claim is, and
 * left out of the table, where this system's claim stands, so that the
 * restore goes on rather than failing on the key with the claim lost (or
 * skipped by ON CONFLICT, whose DO UPDATE it leaves undone too, with the
 * WARNING).  Logical replication's apply still fails on the key: that is
 * how two members of a mesh that claim one worker id are found.
 */
static bool
claim_meets_own(TriggerData *trigdata)
{
	Relation	rel = trigdata->tg_relation;
	TupleDesc	desc = RelationGetDescr(rel);
	int			wcol = SPI_fnumber(desc, "worker_id");
	int			scol = SPI_fnumber(desc, "system_identifier");
	Datum		worker;
	Datum		system;
	bool		isnull;
	bool		own;
	Oid			argtypes[1] = {INT4OID};
	char	   *query;

	if (wcol <= 0 || scol <= 0)
		return false;
	worker = heap_getattr(trigdata->tg_trigtuple, wcol, desc, &isnull);
	if (isnull)
		return false;
	system = heap_getattr(trigdata->tg_trigtuple, scol, desc, &isnull);
	/* this system's own claim again (its own dump) meets the key as before */
	if (isnull || (uint64) DatumGetInt64(system) == GetSystemIdentifier())
		return false;

	query = psprintf("SELECT system_identifier FROM %s WHERE worker_id OPERATOR(pg_catalog.=) $1",
					 quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
												RelationGetRelationName(rel)));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args(query, 1, argtypes, &worker, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "SPI_execute_with_args failed");
	own = false;
	if (SPI_processed == 1)
	{
		Datum		claimant = SPI_getbinval(SPI_tuptable->vals[0],
											 SPI_tuptable->tupdesc, 1, &isnull);

		own = !isnull && (uint64) DatumGetInt64(claimant) == GetSystemIdentifier();
	}
	SPI_finish();
	if (!own)
		return false;
	pend_claim(DatumGetInt32(worker), (uint64) DatumGetInt64(system));
	ereport(WARNING,
			(errmsg("snowflake: the claim of worker id %d by system " UINT64_FORMAT " is kept aside, as this system claimed that worker id here",
					DatumGetInt32(worker), (uint64) DatumGetInt64(system)),
			 errdetail("A server whose worker id another system claimed generates no IDs under it until it is told which node it is.")));
	return true;
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
 * A restore's claim of a worker id this system claimed is kept aside
 * (claim_meets_own()).
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
				 errhint("A superuser claims this node's worker id with snowflake.snowflake_claim_worker().")));
	}

	if (!TRIGGER_FIRED_FOR_ROW(event))
		return PointerGetDatum(NULL);
	if (TRIGGER_FIRED_BY_INSERT(event) && !IsLogicalWorker() &&
		claim_meets_own(trigdata))
		return PointerGetDatum(NULL);
	if (TRIGGER_FIRED_BY_UPDATE(event))
		return PointerGetDatum(trigdata->tg_newtuple);
	return PointerGetDatum(trigdata->tg_trigtuple);
}
