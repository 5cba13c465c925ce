/*-------------------------------------------------------------------------
 *
 * identity.c
 *	  Which node this data directory is: the evidence weighed at every
 *	  server start, the worker id applied at a reload, other systems' claims
 *	  of worker ids, a standby's replay of its primary's record, and the
 *	  operator's confirmation.  Each is an event of node.c's model, made on
 *	  a copy of the record, made durable, then published.
 *
 * At server start the postmaster compares the record (node.c) with what it
 * finds:
 *
 *	- backup_label or recovery.signal without standby.signal (a base backup
 *	  or a restore started as a primary), another inode of the data
 *	  directory (copied) or another system identifier, under the worker id
 *	  recorded: held_copy;
 *	- neither file: a data directory that never ran the library, held until
 *	  CREATE EXTENSION runs an install script here (a fresh node) or the
 *	  operator gives a floor; pg_upgrade's new cluster: held_floor;
 *	- a file it cannot read: held_file, and the file is left as it is.
 *
 * A standby (standby.signal) is the node it follows: every change of the
 * record on a primary is logged in WAL (wal.c), and so is the record at
 * every start of a primary, and a standby replaying it takes it as its own,
 * so that once promoted it is what its primary was, whenever it was made.
 * A copy started as a primary ignores the records it replays: it is not
 * the node they describe.
 *
 * Held, the node publishes no worker id (mark.c), so the generator's hot
 * path takes its cold branch for an unset worker id and refuses here;
 * nothing is added to the path itself.
 *
 * This file uses node.c, persist.c, mark.c and wal.c; generator.c, the
 * keeper and module initialization use it.
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
#include "access/xlogrecovery.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_control.h"
#include "catalog/pg_type_d.h"
#include "commands/trigger.h"
#include "common/controldata_utils.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "replication/logicalworker.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "clock.h"
#include "identity.h"
#include "node.h"
#include "persist.h"
#include "settings.h"
#include "snowflake.h"
#include "state.h"
#include "wal.h"

/* the node's part of the record: what a standby takes from its primary */
#define NODE_PART		offsetof(NodeRecord, system_identifier)

PG_FUNCTION_INFO_V1(snowflake_identity_confirm);
PG_FUNCTION_INFO_V1(snowflake_identity_installed);
PG_FUNCTION_INFO_V1(snowflake_identity_claim_seen);
PG_FUNCTION_INFO_V1(snowflake_workers_guard);

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

static bool
set(const char *setting)
{
	const char *v = GetConfigOption(setting, true, false);

	return v != NULL && v[0] != '\0';
}

/*
 * In standby mode, whether the server follows a primary, and so is its
 * node: not when it recovers to a target (a point-in-time restore may run
 * in standby mode), nor when its WAL comes only from an archive, which may
 * lack the last segments its node wrote.  Those are restores.
 */
static bool
follows_primary(void)
{
	return set("primary_conninfo") &&
		!set("recovery_target") && !set("recovery_target_lsn") &&
		!set("recovery_target_name") && !set("recovery_target_time") &&
		!set("recovery_target_xid");
}

static int
configured_worker(void)
{
	return node_configured_worker();
}

/* Did another system claim this worker id? */
static bool
claimed(const NodeRecord *r, int worker)
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
add_claim(NodeRecord *r, int worker)
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
drop_claim(NodeRecord *r, int worker)
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

/* Did this node give the worker id up for another? */
static bool
retired(const NodeRecord *r, int worker)
{
	for (int i = 0; i < Min(r->nretired, RETIRED_MAX); i++)
		if (r->retired[i] == worker)
			return true;
	return false;
}

/* The node moves from its worker id to worker: the old one is given up. */
static void
move_worker(NodeRecord *r, int worker)
{
	int			n = 0;
	int32		keep[RETIRED_MAX];

	r->flags &= ~RECORD_WORKER_REPLAYED;
	if (r->worker == worker)
		return;
	if (r->worker != WORKER_ID_UNSET)
		keep[n++] = r->worker;
	for (int i = 0; i < Min(r->nretired, RETIRED_MAX) && n < RETIRED_MAX; i++)
		if (r->retired[i] != worker && r->retired[i] != r->worker)
			keep[n++] = r->retired[i];
	memcpy(r->retired, keep, n * sizeof(int32));
	r->nretired = (uint16) n;
	r->worker = worker;
}

static void
hold(NodeRecord *r, NodeReason why)
{
	r->state = (uint8) node_reason_state(why);
	r->reason = (uint8) why;
}

/*
 * Log the record for standbys, unless a file of it could not be read: what
 * this node knows then says nothing of the node.
 */
static void
log_record(const NodeRecord *r)
{
	if (node_shared->file_trouble == REASON_NONE)
		wal_log_identity(r, sizeof(NodeRecord));
}

/*
 * The worker id configured now, applied to a copy of the record: a copy or
 * a node whose worker id is not its own, given one that is, is released; a
 * node whose worker id another system claimed is held; a standby promoted
 * with the worker id its primary gave up is held; and the worker id in
 * force is recorded, so that a later copy is compared with it.  primary:
 * this process runs on a primary (the worker id is this node's to apply).
 */
static void
apply_worker(NodeRecord *r, int worker, bool primary)
{
	bool		replayed = (r->flags & RECORD_WORKER_REPLAYED) != 0;

	if (worker == WORKER_ID_UNSET)
		return;
	if (r->state == NODE_HELD_COPY && worker != r->worker)
	{
		/* its source's worker id stays its source's */
		r->copy_of = r->worker;
		r->copy_reason = r->reason;
		r->flags |= RECORD_COPY_OF;
		hold(r, REASON_NONE);
	}
	else if (r->state == NODE_READY && (r->flags & RECORD_COPY_OF) &&
			 worker == r->copy_of)
	{
		/* set back to its source's worker id: a copy again */
		move_worker(r, worker);
		hold(r, (NodeReason) r->copy_reason);
		return;
	}
	else if (r->state == NODE_HELD_CLAIMED && !claimed(r, worker) &&
			 !(replayed && worker != r->worker && retired(r, worker)))
		hold(r, REASON_NONE);
	if (r->state == NODE_READY && claimed(r, worker))
		hold(r, REASON_CLAIMED_ELSEWHERE);
	else if (r->state == NODE_READY && replayed && worker != r->worker &&
			 retired(r, worker))
		hold(r, REASON_WORKER_RETIRED);
	/* promoted, and not held for it: its worker id is its own from now on */
	if (primary && r->reason != REASON_WORKER_RETIRED)
	{
		r->flags &= ~RECORD_WORKER_REPLAYED;
		replayed = false;
	}

	/*
	 * A copy keeps the worker id it is held under, and a standby its
	 * primary's, until it is promoted; run with none for a while, a node is
	 * still that worker id's.
	 */
	if (worker != r->worker && r->state != NODE_HELD_COPY &&
		!(r->state == NODE_HELD_CLAIMED && r->reason == REASON_WORKER_RETIRED) &&
		(primary || !replayed))
	{
		if (r->state == NODE_HELD_CLAIMED)
			r->other_system = 0;	/* another claimed worker id */
		move_worker(r, worker);
	}
}

/*
 * Apply the configured worker id: under the lock, on a copy, made durable
 * (and logged, where this process may write WAL), then published.  A write
 * that fails leaves the node as it was.
 */
static void
settle(bool log, int elevel)
{
	NodeRecord	next = node_shared->rec;
	int			worker = configured_worker();
	NodeState	before = (NodeState) next.state;

	apply_worker(&next, worker, log);
	if (memcmp(&next, &node_shared->rec, sizeof(next)) != 0)
	{
		if (!node_save(&next, SAVE_BOTH, elevel))
			return;
		if (log)
			log_record(&next);
		if (before != NODE_READY && next.state == NODE_READY)
			ereport(LOG,
					(errmsg("snowflake: worker id %d releases this server, which was held back (%s); it generates again",
							worker, node_reason_name((NodeReason) node_shared->rec.reason))));
		else if (before == NODE_READY && next.state != NODE_READY)
			ereport(LOG,
					(errmsg("snowflake: worker id %d holds this server back (%s); it generates no IDs until it is told which node it is",
							worker, node_reason_name((NodeReason) next.reason))));
	}
	identity_publish();
}

/* The worker id in force, or none while held back; with the lock held. */
void
identity_publish(void)
{
	NodeReason	r;
	NodeState	s = node_state(&r);

	node_publish();
	mark_publish_worker(s == NODE_HELD_COPY || s == NODE_HELD_FLOOR ||
						s == NODE_HELD_CLAIMED || s == NODE_HELD_FILE ?
						WORKER_ID_UNSET : configured_worker());
}

static void
settle_locked(bool log)
{
	LWLockAcquire(node_shared->lock, LW_EXCLUSIVE);
	settle(log, ERROR);
	LWLockRelease(node_shared->lock);
}

/*
 * Under pg_upgrade (binary-upgrade mode): is this data directory the new
 * cluster?  One that never ran the library (no record at all), or ran it
 * without ever creating the extension, is; the old cluster has its node's
 * files.
 */
static bool
upgrade_target(const NodeRecord *r, bool found)
{
	if (!found)
		return r->mark_id == 0;
	return r->state == NODE_HELD_FLOOR &&
		(r->reason == REASON_NEVER_INSTALLED || r->reason == REASON_UPGRADED);
}

/* the state file as this start read it, for identity_started() (postmaster) */
static NodeRecord as_read;

/*
 * Read the record from the files: the node's part from the one that
 * changed it last, the mark from snowflake.state.  *found: either held the
 * node's part.  Sets the start's troubles in node_shared, if given.
 */
static void
read_record(NodeRecord *rec, bool *found, uint64 *swrites, uint64 *iwrites,
			bool at_start)
{
	NodeRecord	s;
	NodeRecord	i;
	const char *sproblem = NULL;
	const char *iproblem = NULL;
	MarkResult	sres = persist_read_file(SNOWFLAKE_STATE_FILE, &s, sizeof(s),
										 swrites, &sproblem);
	MarkResult	ires = persist_read_file(SNOWFLAKE_IDENTITY_FILE, &i, sizeof(i),
										 iwrites, &iproblem);
	bool		snode = sres == MARK_OK && (s.flags & RECORD_NODE);
	bool		inode = ires == MARK_OK && (i.flags & RECORD_NODE);

	memset(rec, 0, sizeof(*rec));
	/* what the state file holds, for the start to tell whether to write it */
	if (at_start)
		as_read = sres == MARK_OK ? s : *rec;
	if (sres == MARK_OK)
		*rec = s;
	else if (inode)
	{
		/*
		 * The mark of the last change of the node: a bound from below, and
		 * the floor is looked for as without a file, 1.1's origin too.
		 */
		*rec = i;
		rec->flags = (rec->flags | RECORD_FLOOR_PENDING) & ~RECORD_LEGACY_GONE;
	}
	/*
	 * The node's part from the file that changed it last; where one says
	 * the node is held and the other not (a change whose second write
	 * failed, or a crash between the two), the hold: a release is made
	 * durable in both before it counts.
	 */
	if (inode && (!snode ||
				  ((s.state == NODE_READY) == (i.state == NODE_READY) ?
				   i.changes > s.changes : i.state != NODE_READY)))
		memcpy((char *) rec + NODE_PART, (char *) &i + NODE_PART,
			   sizeof(*rec) - NODE_PART);
	*found = snode || inode;

	if (!at_start)
		return;
	if (sres == MARK_UNREADABLE || ires == MARK_UNREADABLE)
	{
		const char *file = sres == MARK_UNREADABLE ? SNOWFLAKE_STATE_FILE : SNOWFLAKE_IDENTITY_FILE;

		node_shared->file_trouble = sres == MARK_UNREADABLE ?
			REASON_STATE_UNREADABLE : REASON_RECORD_UNREADABLE;
		ereport(WARNING,
				(errmsg("could not read snowflake file \"%s\": %s", file,
						sres == MARK_UNREADABLE ? sproblem : iproblem)));
	}
	if (sres == MARK_BROKEN)
	{
		node_shared->mark_trouble = REASON_STATE_DAMAGED;
		ereport(WARNING,
				(errmsg("snowflake state file \"%s\" is damaged: %s",
						SNOWFLAKE_STATE_FILE, sproblem),
				 errdetail("The generator refuses to issue IDs until it is repaired with snowflake_repair_state().")));
	}
	/* a damaged record of the node, and no other: whatever it was, held */
	if (ires == MARK_BROKEN && !snode)
	{
		*found = true;
		rec->worker = snowflake_worker_id;
		hold(rec, REASON_RECORD_DAMAGED);
	}
}

/*
 * At server start, in the postmaster, with AddinShmemInitLock held and
 * before mark.c reads the mark: tell this data directory's life from the
 * evidence.  The record is written once mark.c has read the mark.
 */
void
identity_start(void)
{
	NodeShared *n = node_shared;
	NodeRecord *r = &n->rec;
	bool		standby = exists("standby.signal") && follows_primary();
	NodeReason	signal = REASON_NONE;
	bool		found;
	uint64		sysid = system_identifier();
	uint64		inode = directory_inode();

	pg_atomic_init_u32(&n->configured, (uint32) (settings_worker_rejected() ?
												 WORKER_ID_REJECTED : snowflake_worker_id));
	if (!standby && (exists("recovery.signal") || exists("standby.signal")))
		signal = REASON_RECOVERY_SIGNAL;
	else if (!standby && exists("backup_label"))
		signal = REASON_BACKUP_LABEL;

	read_record(r, &found, &n->state_writes, &n->identity_writes, true);
	n->disabled = node_settings_reason();
	if (IsBinaryUpgrade)
	{
		/*
		 * pg_upgrade starts the old cluster with -b too (its --check as
		 * well), and its files stay as they are: only a new cluster is
		 * made by pg_upgrade.
		 */
		n->disabled = REASON_BINARY_UPGRADE;
		n->file_trouble = REASON_RECORD_UNREADABLE;	/* write nothing */
		if (upgrade_target(r, found))
			identity_upgrade_noticed();
		return;
	}

	if (!found && r->mark_id == 0)
	{
		/* never ran the library: a new node, or one whose files are gone */
		hold(r, standby ? REASON_NEW_AS_STANDBY : REASON_NEVER_INSTALLED);
		r->worker = snowflake_worker_id;
	}
	else if (!found)
	{
		/* a node of a version before the record of the node */
		r->worker = snowflake_worker_id;
		if (signal != REASON_NONE && r->worker != WORKER_ID_UNSET)
			hold(r, signal);
	}
	else if (r->state == NODE_READY && !standby && r->worker != WORKER_ID_UNSET)
	{
		if (signal == REASON_NONE && r->system_identifier != sysid)
			signal = REASON_OTHER_SYSTEM;
		else if (signal == REASON_NONE && r->directory_inode != inode)
			signal = REASON_OTHER_DIRECTORY;
		if (signal != REASON_NONE)
			hold(r, signal);
	}
	/* this directory, as it runs now: a standby's own too */
	r->system_identifier = sysid;
	r->directory_inode = inode;
	/* a standby's worker id is its primary's until it is promoted */
	if (standby && found)
		r->flags |= RECORD_WORKER_REPLAYED;
}

/*
 * In the postmaster at start, once mark.c has read the mark: write the
 * record as this start made it, and publish the worker id, if any.
 */
void
identity_started(void)
{
	NodeReason	r;

	if (node_shared->disabled == REASON_BINARY_UPGRADE)
		return;
	apply_worker(&node_shared->rec, configured_worker(), false);
	if ((node_shared->rec.flags & RECORD_WORKER_REPLAYED) &&
		configured_worker() != WORKER_ID_UNSET &&
		configured_worker() != node_shared->rec.worker)
		ereport(LOG,
				(errmsg("snowflake: the primary runs as worker id %d, and this standby's snowflake.worker_id is %d",
						node_shared->rec.worker, configured_worker()),
				 errhint("Give this server the primary's worker id before it is promoted, unless it is to become a node of its own.")));
	/*
	 * The state file is written when the start changed what it holds (the
	 * node's part, or a floor to apply), never with settings it rejects.
	 */
	(void) node_save(&node_shared->rec, node_shared->disabled == REASON_NONE &&
					 (node_shared->floor_pending || !(as_read.flags & RECORD_NODE) ||
					  memcmp((char *) &as_read + NODE_PART, (char *) &node_shared->rec + NODE_PART,
							 sizeof(NodeRecord) - NODE_PART) != 0) ?
					 SAVE_BOTH : SAVE_IDENTITY, WARNING);
	identity_publish();
	if (node_state(&r) != NODE_READY && r != REASON_NONE)
		ereport(WARNING,
				(errmsg("snowflake generates no IDs on this server: %s (%s)",
						node_state_name(node_reason_state(r)), node_reason_name(r)),
				 errhint("Call snowflake.snowflake_nextval() to see the remedy, or read snowflake.snowflake_status.")));
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
 * and the worker id ends unpublished.
 */
void
identity_configured(int worker)
{
	NodeState	s;

	if (node_shared == NULL)
		return;
	pg_atomic_write_u32(&node_shared->configured, (uint32) worker);
	if (node_shared->disabled != REASON_NONE)
		return;
	s = (NodeState) (pg_atomic_read_u32(&node_shared->published) & 0xff);
	if ((s >= NODE_HELD_COPY && s <= NODE_HELD_FILE) ||
		claimed(&node_shared->rec, worker) ||
		((node_shared->rec.flags & RECORD_WORKER_REPLAYED) &&
		 retired(&node_shared->rec, worker)))
	{
		mark_publish_worker(WORKER_ID_UNSET);
		return;
	}
	mark_publish_worker(worker);
	pg_memory_barrier();
	s = (NodeState) (pg_atomic_read_u32(&node_shared->published) & 0xff);
	if (s >= NODE_HELD_COPY && s <= NODE_HELD_FILE)
		mark_publish_worker(WORKER_ID_UNSET);
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

	if (node_shared->disabled != REASON_NONE)
		return;
	now = pg_atomic_read_u32(&node_shared->configured);
	if (!first && now == applied)
		return;
	LWLockAcquire(node_shared->lock, LW_EXCLUSIVE);
	settle(true, LOG);
	if (first)
		log_record(&node_shared->rec);
	LWLockRelease(node_shared->lock);
	applied = now;
}

/*
 * Replay of an identity record, in the startup process.  A standby takes
 * its primary's record as its own (its system identifier and directory
 * stay its own) and applies its own worker id to it, saying so if its
 * configuration has another; a node that was not started as a standby is
 * not the node the records describe and ignores them.  A write that fails
 * here loses nothing that could repeat an ID: at worst the standby is held
 * back once promoted.
 */
void
identity_replay(const void *data, Size len)
{
	NodeRecord	p;
	NodeRecord	next;
	int			worker;

	if (node_shared == NULL || !StandbyMode || !follows_primary())
		return;
	memset(&p, 0, sizeof(p));
	memcpy(&p, data, Min(len, sizeof(p)));
	if (p.state > NODE_HELD_CLAIMED)
		return;
	LWLockAcquire(node_shared->lock, LW_EXCLUSIVE);
	next = node_shared->rec;
	p.system_identifier = next.system_identifier;
	p.directory_inode = next.directory_inode;
	memcpy((char *) &next + NODE_PART, (char *) &p + NODE_PART,
		   sizeof(next) - NODE_PART);
	next.flags |= RECORD_WORKER_REPLAYED;
	worker = configured_worker();
	apply_worker(&next, worker, false);
	if (memcmp(&next, &node_shared->rec, sizeof(next)) != 0)
	{
		bool		news = next.worker != node_shared->rec.worker ||
			next.reason != node_shared->rec.reason;

		if (worker != WORKER_ID_UNSET && worker != next.worker && news &&
			next.reason == REASON_WORKER_RETIRED)
			ereport(LOG,
					(errmsg("snowflake: the primary runs as worker id %d, and this standby's snowflake.worker_id is %d",
							next.worker, worker),
					 errdetail("The primary gave worker id %d up; promoted, this server refuses until its snowflake.worker_id is %d.",
							   worker, next.worker)));
		else if (worker != WORKER_ID_UNSET && worker != next.worker && news)
			ereport(LOG,
					(errmsg("snowflake: the primary runs as worker id %d, and this standby's snowflake.worker_id is %d",
							next.worker, worker),
					 errdetail("Promoted, this server generates under worker id %d, its own.", worker)));
		(void) node_save(&next, SAVE_BOTH, WARNING);
		identity_publish();
	}
	LWLockRelease(node_shared->lock);
}

/*
 * The node's verdict for a call of this process (node_verdict()), with the
 * worker id configured since the record last applied one applied: for
 * good (settle: made durable, logged, published; a call's cold path, so
 * that the first call after a reload sees it), or on a copy (the status
 * view, which writes nothing).  Either way the same verdict, of the checks
 * before upto (node.c).
 */
NodeReason
identity_verdict(bool settle_now, NodeCheck upto)
{
	NodeRecord	r;
	NodeReason	v;
	bool		primary = !RecoveryInProgress() && !IsParallelWorker();

	if (node_shared == NULL)
		return REASON_NOT_PRELOADED;
	if (settle_now && node_shared->disabled == REASON_NONE && IsUnderPostmaster)
		settle_locked(primary);
	LWLockAcquire(node_shared->lock, LW_SHARED);
	r = node_shared->rec;
	if (!settle_now && node_shared->disabled == REASON_NONE)
		apply_worker(&r, configured_worker(), primary);
	v = node_verdict_before(&r, upto);
	LWLockRelease(node_shared->lock);
	return v;
}

/*
 * The record as the files hold it, where shared memory has none (the
 * library is not preloaded): changed by change(), and written back if it
 * returns true.  A data directory that never ran the library starts as a
 * fresh node, not yet installed; a file that cannot be read or is damaged
 * is left as it is (held back at the next start), and so is a node of a
 * version before the record.
 */
static void
change_files(bool (*change) (NodeRecord *r, const void *arg), const void *arg)
{
	NodeRecord	r;
	NodeRecord	check;
	bool		found;
	uint64		swrites = 0;
	uint64		iwrites = 0;
	const char *problem;

	if (persist_read_file(SNOWFLAKE_STATE_FILE, &check, sizeof(check), &swrites, &problem) > MARK_OK ||
		persist_read_file(SNOWFLAKE_IDENTITY_FILE, &check, sizeof(check), &iwrites, &problem) > MARK_OK)
		return;
	read_record(&r, &found, &swrites, &iwrites, false);
	if (!found && r.mark_id != 0)
		return;
	if (!found)
	{
		r.system_identifier = system_identifier();
		r.directory_inode = directory_inode();
		r.worker = WORKER_ID_UNSET;
		hold(&r, REASON_NEVER_INSTALLED);
	}
	if (!change(&r, arg))
		return;
	r.changes++;
	r.flags |= RECORD_NODE;
	if (persist_write_file(SNOWFLAKE_STATE_FILE, &r, sizeof(r), &swrites, WARNING))
		(void) persist_write_file(SNOWFLAKE_IDENTITY_FILE, &r, sizeof(r), &iwrites, WARNING);
}

/*
 * Apply change() to the node's record: in the files where shared memory
 * has none, or under the lock, on a copy, with the worker id applied
 * again, made durable and logged, then published.
 */
static void
change_record(bool (*change) (NodeRecord *r, const void *arg), const void *arg,
			  int elevel)
{
	NodeRecord	next;
	bool		primary = !RecoveryInProgress();

	if (node_shared == NULL)
	{
		change_files(change, arg);
		return;
	}
	LWLockAcquire(node_shared->lock, LW_EXCLUSIVE);
	next = node_shared->rec;
	if (change(&next, arg))
	{
		apply_worker(&next, configured_worker(), primary);
		if (node_save(&next, SAVE_BOTH, elevel) && primary)
			log_record(&next);
		identity_publish();
	}
	LWLockRelease(node_shared->lock);
}

static bool
change_installed(NodeRecord *r, const void *arg)
{
	if (r->state != NODE_HELD_FLOOR || r->reason == REASON_UPGRADED)
		return false;
	hold(r, REASON_NONE);
	return true;
}

static bool
change_upgraded(NodeRecord *r, const void *arg)
{
	if (r->state != NODE_HELD_FLOOR || r->reason == REASON_UPGRADED)
		return false;
	hold(r, REASON_UPGRADED);
	return true;
}

/*
 * Called by the install scripts (of every version): a data directory that
 * never ran the library is a fresh node once the extension is created
 * here, also without preloading or with settings it rejects.
 */
Datum
snowflake_identity_installed(PG_FUNCTION_ARGS)
{
	change_record(change_installed, NULL, ERROR);
	PG_RETURN_VOID();
}

/*
 * pg_upgrade's new cluster: the library is loaded there with or without
 * preloading (its check LOADs every library the old cluster uses, and
 * restoring a C function loads it): a data directory made by pg_upgrade,
 * whatever is preloaded when it first runs.  The old cluster, whose files
 * stay as they are, has the node's record and is left alone.
 */
void
identity_upgrade_noticed(void)
{
	change_files(change_upgraded, NULL);
}

/* a confirmation of this transaction, applied when it commits */
static bool confirming = false;
static bool confirm_applied = false;	/* at pre-commit; not yet committed */
static NodeRecord confirm_undo;
static int	confirm_level;		/* the transaction nesting level it came in */
static int64 confirm_floor;
static NodeRecord confirm_old;

/*
 * A confirmation, applied as its transaction commits (so that one rolled
 * back releases nothing, as a claim rolled back holds nothing back): the
 * floor logged and made the node's, the record durable, then the node
 * released.
 */
static void
apply_confirm(int64 floor_id, const NodeRecord *old)
{
	NodeRecord	next;
	NodeState	before;
	int64		last;

	LWLockAcquire(node_shared->lock, LW_EXCLUSIVE);
	next = node_shared->rec;
	/* what an abort after this point (a serialization failure) restores */
	confirm_undo = next;
	confirm_applied = true;
	before = (NodeState) next.state;
	last = mark_repair_locked(floor_id, false, true, &next);
	hold(&next, REASON_NONE);
	next.flags &= ~RECORD_COPY_OF;
	next.other_system = 0;
	next.system_identifier = system_identifier();
	next.directory_inode = directory_inode();
	/* the old cluster's claims of other systems, then its own node's */
	for (int w = 0; w < CLAIM_BITS; w++)
		if (claimed(old, w))
			add_claim(&next, w);
	for (uint32 i = 0; i < Min(old->nhigh, CLAIM_HIGH); i++)
		add_claim(&next, old->high[i]);
	if (old->nhigh > CLAIM_HIGH && next.nhigh <= CLAIM_HIGH)
		next.nhigh = CLAIM_HIGH + 1;	/* more than it kept */
	/* this node continues the one whose claim held it back */
	drop_claim(&next, configured_worker());
	if (configured_worker() != WORKER_ID_UNSET)
		move_worker(&next, configured_worker());
	mark_repair_save(&next, true, last, false);
	log_record(&next);
	identity_publish();
	LWLockRelease(node_shared->lock);
	if (before != NODE_READY)
		ereport(LOG,
				(errmsg("snowflake: this server confirmed as the node of worker id %d; IDs continue above " INT64_FORMAT,
						next.worker, last)));
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
change_claims(NodeRecord *r, const void *arg)
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

/*
 * A confirmation applied at pre-commit whose commit then failed (a
 * serialization failure): the node is held again as it was.  The floor it
 * raised stays: it bounds nothing but what the node may issue.
 */
static bool
change_unconfirm(NodeRecord *r, const void *arg)
{
	memcpy((char *) r + NODE_PART, (char *) &confirm_undo + NODE_PART,
		   sizeof(NodeRecord) - NODE_PART);
	r->flags = (r->flags & ~(RECORD_COPY_OF | RECORD_WORKER_REPLAYED)) |
		(confirm_undo.flags & (RECORD_COPY_OF | RECORD_WORKER_REPLAYED));
	r->changes = Max(r->changes, confirm_undo.changes);
	return true;
}

static bool
change_unclaim(NodeRecord *r, const void *arg)
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

static void
claims_xact_callback(XactEvent event, void *arg)
{
	bool		taken_back = false;

	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			/* still in the transaction: a failure here aborts it */
			if (confirming)
				apply_confirm(confirm_floor, &confirm_old);
			confirming = false;
			if (npending > 0)
				change_record(change_claims, NULL, ERROR);
			break;
		case XACT_EVENT_PRE_PREPARE:
			if (confirming)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot prepare a transaction that ran snowflake_confirm_node()")));
			if (npending > 0)
				change_record(change_claims, NULL, ERROR);
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PREPARE:
			confirm_applied = false;
			npending = 0;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			confirming = false;
			if (confirm_applied)
				change_record(change_unconfirm, NULL, WARNING);
			confirm_applied = false;
			/* the commit failed after they were kept: take them back */
			for (int i = 0; i < npending; i++)
				taken_back |= pending[i].added;
			if (taken_back)
				change_record(change_unclaim, NULL, WARNING);
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
	if (confirming && confirm_level >= level)
	{
		/* rolled back with its savepoint, or the parent's now */
		confirming = event == SUBXACT_EVENT_COMMIT_SUB;
		confirm_level = level - 1;
	}
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

static void
register_callbacks(void)
{
	static bool registered = false;

	if (!registered)
	{
		RegisterXactCallback(claims_xact_callback, NULL);
		RegisterSubXactCallback(claims_subxact_callback, NULL);
		registered = true;
	}
}

/* A confirmation, applied if this transaction commits. */
static void
pend_confirm(int64 floor_id, const NodeRecord *old)
{
	register_callbacks();
	confirm_floor = confirming ? Max(confirm_floor, floor_id) : floor_id;
	confirm_old = *old;
	if (!confirming)
		confirm_level = GetCurrentTransactionNestLevel();
	confirming = true;
}

/* A claim of another system, kept if this transaction commits. */
static void
pend_claim(int32 worker, uint64 system)
{
	register_callbacks();
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
 * The record another data directory holds (after pg_upgrade, the old
 * cluster's): its mark, and whether its node was held back there.
 */
static int64
old_record(const char *dir, NodeRecord *old)
{
	char		path[MAXPGPATH];
	const char *problem = NULL;
	uint64		writes = 0;
	NodeRecord	i;
	MarkResult	res;

	snprintf(path, sizeof(path), "%s/%s", dir, SNOWFLAKE_STATE_FILE);
	res = persist_read_file(path, old, sizeof(*old), &writes, &problem);
	if (res == MARK_ABSENT)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FILE),
				 errmsg("could not find \"%s\"", path),
				 errhint("Name the data directory of the old cluster, or give above => its highest ID.")));
	if (res == MARK_UNREADABLE)
		ereport(ERROR,
				(errcode(ERRCODE_IO_ERROR),
				 errmsg("could not read snowflake file \"%s\"", path),
				 errhint("Make it readable by the server's account, or give above => the highest ID the old cluster issued.")));
	if (res == MARK_BROKEN)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("snowflake state file \"%s\" is damaged", path),
				 errhint("Give above => the highest ID the old cluster issued instead.")));

	/* its node's part, from the file that changed it last */
	snprintf(path, sizeof(path), "%s/%s", dir, SNOWFLAKE_IDENTITY_FILE);
	if (persist_read_file(path, &i, sizeof(i), &writes, &problem) == MARK_OK &&
		(i.flags & RECORD_NODE) && (!(old->flags & RECORD_NODE) || i.changes > old->changes))
	{
		memcpy((char *) old + NODE_PART, (char *) &i + NODE_PART,
			   sizeof(*old) - NODE_PART);
		old->flags |= RECORD_NODE;
	}

	/* an upgrade does not make a copy the node */
	if ((old->flags & RECORD_NODE) && old->state != NODE_READY)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the old cluster in \"%s\" was held back: it was not yet the node of worker id %d",
						dir, old->worker),
				 errdetail("It was %s (%s) there; an upgrade of it is held back too.",
						   node_state_name((NodeState) old->state),
						   node_reason_name((NodeReason) old->reason)),
				 errhint("Give this server a worker id of its own in snowflake.worker_id and reload, or, if it replaces that node, run SELECT snowflake.snowflake_confirm_node(stopped_at => '...') with the time the node stopped.")));
	return old->mark_id;
}

/*
 * A floor the node could generate above soon: within its layout, not in
 * its last tick, and at most a day ahead of the clock (as far as any
 * setting lets the node run ahead); a value beyond is a typo, refused
 * before it commits.
 */
static void
check_floor(int64 id)
{
	const SnowflakeLayout *l = snowflake_layout;

	if (id >= layout_max_id(l))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("snowflake ID " INT64_FORMAT " is out of range for the \"%s\" layout",
						id, l->name),
				 errdetail("New IDs must be greater than it, and the largest ID of the layout is " INT64_FORMAT ".",
						   layout_max_id(l))));
	if (layout_tick(l, id) >= layout_max_tick(l) ||
		layout_tick_to_unix_ms(l, layout_tick(l, id)) - clock_unix_ms() > RUN_AHEAD_CAP_MS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("snowflake ID " INT64_FORMAT " is more than a day ahead of this server's clock", id),
				 errdetail("It carries the time %s; the node would issue no ID until its clock reached it.",
						   timestamptz_to_str(layout_tick_to_timestamptz(l, layout_tick(l, id)))),
				 errhint("Check the value: give the highest ID the node it replaces issued.")));
}

/*
 * The floor a stop time gives: the largest ID of the layout in force at
 * that time plus the furthest the node's clock policy let IDs lead the
 * clock when it made its last reservation this server knows (replayed, or
 * its own) or, if further, this server's (its configuration is the lost
 * node's, which may have raised it after the WAL this server has): above
 * every ID the node issued up to then.  A time
 * ahead of this server's clock is taken (the lost node's clock may have
 * been ahead): the node then runs ahead of its clock or waits, as its
 * policy says, and every hint it gives leads above the floor.
 */
static int64
floor_at(TimestampTz stopped_at)
{
	const SnowflakeLayout *l = snowflake_layout;
	int64		unix_ms;
	int64		tick;

	if (TIMESTAMP_NOT_FINITE(stopped_at))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("stopped_at cannot be infinite"),
				 errhint("Give the time the node this server replaces stopped.")));

	/* the lost node's clock may have been ahead of this one's, not by days */
	if (stopped_at > GetCurrentTimestamp() + (TimestampTz) RUN_AHEAD_CAP_MS * 1000)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("stopped_at %s is more than a day ahead of this server's clock",
						timestamptz_to_str(stopped_at)),
				 errhint("Give the time the node this server replaces stopped.")));
	unix_ms = stopped_at / 1000 + PG_EPOCH_UNIX_MS +
		Max(settings_max_lead_ms(), node_shared->rec.lead_ms);
	tick = layout_unix_ms_to_tick(l, unix_ms);
	if (tick < 0)
		return 0;
	if (tick >= layout_max_tick(l))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("stopped_at %s is beyond the end of layout \"%s\"",
						timestamptz_to_str(stopped_at), l->name)));
	return layout_compose(l, tick, layout_max_worker(l), layout_max_seq(l));
}

/*
 * snowflake_identity_confirm(above, old_data_directory, stopped_at): this
 * data directory is the node of its worker id (restored, upgraded, moved),
 * and continues above the floor they give, always one: a node that is not
 * the one that issued IDs under its worker id cannot know how far they
 * went.  The floor is logged before the record, so that a standby that
 * knows the node is this one knows the floor too; the record is durable
 * before the node is released.
 */
Datum
snowflake_identity_confirm(PG_FUNCTION_ARGS)
{
	int64		floor_id = -1;
	NodeRecord	old;

	if (node_shared == NULL)
		node_refuse(REASON_NOT_PRELOADED, NULL);
	if (node_shared->disabled != REASON_NONE)
		node_refuse(node_shared->disabled, NULL);
	if (node_shared->file_trouble != REASON_NONE)
		node_refuse_state(node_shared->file_trouble);
	/* a worker id the node gave up may be another node's now */
	if (node_shared->rec.reason == REASON_WORKER_RETIRED)
		node_refuse_state(REASON_WORKER_RETIRED);
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
		check_floor(floor_id);
	}
	memset(&old, 0, sizeof(old));
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
		if (strlen(dir) + 1 + Max(strlen(SNOWFLAKE_IDENTITY_FILE), strlen(SNOWFLAKE_STATE_FILE)) >= MAXPGPATH)
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
		floor_id = Max(floor_id, old_record(dir, &old));
		/* the old cluster of this node, not of another */
		if ((old.flags & RECORD_NODE) && old.worker != WORKER_ID_UNSET &&
			configured_worker() != WORKER_ID_UNSET && old.worker != configured_worker())
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("the old cluster in \"%s\" ran as worker id %d, not as this server's %d",
							dir, old.worker, configured_worker()),
					 errhint("Name the data directory of this node's old cluster.")));
	}
	if (!PG_ARGISNULL(2))
	{
		int64		known = (int64) pg_atomic_read_u64(&snowflake_shared->last_id);
		int64		at = floor_at(PG_GETARG_TIMESTAMPTZ(2));

		/* the node it replaces ran at least until the last ID known here */
		if (at < known)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("stopped_at %s is before the last ID this data directory knows of",
							timestamptz_to_str(PG_GETARG_TIMESTAMPTZ(2))),
					 errdetail("ID " INT64_FORMAT " carries the time %s; the node this server replaces ran at least until then.",
							   known, timestamptz_to_str(layout_tick_to_timestamptz(snowflake_layout,
																					layout_tick(snowflake_layout, known)))),
					 errhint("Give the time the node stopped, with its time zone.")));
		floor_id = Max(floor_id, at);
	}
	if (floor_id < 0)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("snowflake_confirm_node() needs a floor"),
				 errdetail("This server cannot know how far the IDs of the node it replaces went: its WAL may end before the node's last IDs."),
				 errhint("Give stopped_at => the time the node stopped, above => the highest ID it issued, or old_data_directory => the old cluster's data directory after pg_upgrade.")));

	pend_confirm(floor_id, &old);
	/* what IDs continue above once it commits, as far as it is known now */
	PG_RETURN_INT64(Max(floor_id, (int64) pg_atomic_read_u64(&snowflake_shared->last_id)));
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
