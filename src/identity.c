/*-------------------------------------------------------------------------
 *
 * identity.c
 *	  Which node this data directory is: the evidence weighed at every
 *	  server start, the worker id applied at a reload and whenever the
 *	  record changes, and a standby's replay of its primary's record.  Each
 *	  is an event of node.c's model, applied to a copy of the record, made
 *	  durable, then published; claims.c and confirm.c bring theirs here.
 *
 * At server start the postmaster compares the record (node.c) with what it
 * finds: backup_label or recovery.signal without standby.signal (a base
 * backup or a restore started as a primary), another inode of the data
 * directory (copied) or another system identifier, under the worker id
 * recorded; neither file; a damaged snowflake.identity; a file it cannot
 * read (left as it is); pg_upgrade's new cluster.
 *
 * A standby (standby.signal) is the node it follows: every change of the
 * record on a primary is logged in WAL (wal.c), and so is the record at
 * every start of a primary, and a standby replaying it takes it as its own,
 * so that once promoted it is what its primary was, whenever it was made.
 * A copy started as a primary ignores the records it replays: it is not
 * the node they describe.
 *
 * Held, the node publishes no worker id (mark.c), so the generator's hot
 * path takes its cold branch for an unset worker id and refuses there;
 * nothing is added to the path itself.
 *
 * This file uses node.c, persist.c, mark.c and wal.c; claims.c, confirm.c,
 * the generator, the keeper and module initialization use it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/stat.h>
#include <unistd.h>

#include "access/parallel.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlogrecovery.h"
#include "catalog/pg_control.h"
#include "common/controldata_utils.h"
#include "miscadmin.h"
#include "replication/origin.h"

#include "clock.h"
#include "compat.h"
#include "identity.h"
#include "mark.h"
#include "messages.h"
#include "node.h"
#include "persist.h"
#include "settings.h"
#include "wal.h"

static bool change_ran_before(NodeRecord *r, const void *arg);

/* This data directory's system identifier, from pg_control. */
uint64
identity_system(void)
{
	bool		crc_ok = false;
	ControlFileData *cf = get_controlfile(DataDir, &crc_ok);
	uint64		id = cf->system_identifier;

	pfree(cf);
	return id;
}

/* This data directory's inode: another one is a copy. */
uint64
identity_directory(void)
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
recovery_target(void)
{
	return set("recovery_target") || set("recovery_target_lsn") ||
		set("recovery_target_name") || set("recovery_target_time") ||
		set("recovery_target_xid");
}

static bool
follows_primary(void)
{
	return set("primary_conninfo") && !recovery_target();
}

/*
 * What the worker id configured now is to this record, as an event: the
 * one it is held under as a copy, or a released copy's source's again;
 * another system's; (a standby's own, not applied yet) one its primary
 * gave up; or one it may use.  NUM_EVENTS: none is set.
 */
static NodeEvent
worker_event(const NodeRecord *r, int worker)
{
	/* this system claimed worker ids, and not this one */
	bool		unclaimed = r->nown > 0 && !node_own_claimed(r, worker);

	if (worker == WORKER_ID_UNSET)
		return NUM_EVENTS;
	if ((r->flags & RECORD_COPY_OF) && worker == r->copy_of)
		return EV_WORKER_SOURCE;
	if (worker == r->worker && !node_claimed(r, worker) && !unclaimed)
		return EV_WORKER_SAME;
	if (node_claimed(r, worker))
		return EV_WORKER_CLAIMED;
	if ((r->flags & RECORD_WORKER_REPLAYED) && worker != r->worker &&
		node_retired(r, worker))
		return EV_WORKER_GIVEN_UP;
	if (unclaimed)
		return EV_WORKER_UNCLAIMED;
	return EV_WORKER_OWN;
}

/*
 * The worker id configured now, applied to a copy of the record: its event
 * (node.c's table says what it does), and the worker id the record names
 * then, so that a later copy is compared with it.  A copy keeps the one it
 * is held under, and a standby its primary's until it is promoted; run
 * with none for a while, a node is still that worker id's.  primary: this
 * process runs on a primary (the worker id is this node's to apply).
 */
static void
apply_worker(NodeRecord *r, int worker, bool primary)
{
	NodeEvent	ev = worker_event(r, worker);

	if (ev == NUM_EVENTS)
		return;
	/* held under its source's worker id again */
	if (ev == EV_WORKER_SOURCE)
		node_move_worker(r, worker);
	(void) node_apply(r, ev, REASON_NONE);
	/* promoted, and not held for it: its worker id is its own from now on */
	if (primary && r->reason != REASON_WORKER_RETIRED)
		r->flags &= ~RECORD_WORKER_REPLAYED;
	if (worker != r->worker && node_follows_worker(r) &&
		(primary || !(r->flags & RECORD_WORKER_REPLAYED)))
	{
		/* held for another worker id another system claimed */
		if (r->reason == REASON_CLAIMED_ELSEWHERE)
			r->other_system = 0;
		node_move_worker(r, worker);
	}
}

/* The message of a standby whose worker id is not its primary's. */
static int
standby_differs(int own, int primary)
{
	return errmsg("snowflake.worker_id of this standby, %d, is not its primary's worker id, %d",
				  own, primary);
}

/*
 * Log the record for standbys, unless a file of it could not be read: what
 * this node knows then says nothing of the node.
 */
void
identity_log_record(const NodeRecord *r)
{
	if (node_found(CHECK_FILE) == REASON_NONE)
		wal_log_identity(r, sizeof(NodeRecord));
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
	int			worker = node_configured_worker();

	apply_worker(&next, worker, log);
	if (memcmp(&next, &node_shared->rec, sizeof(next)) != 0)
	{
		NodeReason	before = (NodeReason) node_shared->rec.reason;

		if (!node_save(&next, SAVE_BOTH, elevel))
			return;
		if (log)
			identity_log_record(&next);
		if (before != REASON_NONE && next.reason == REASON_NONE)
			ereport(LOG,
					(errmsg("snowflake worker id %d releases this server", worker),
					 errdetail("It was held back for %s.", node_reason_name(before))));
		else if (before == REASON_NONE && next.reason != REASON_NONE)
			ereport(LOG,
					(errmsg("snowflake worker id %d holds this server back", worker),
					 errdetail("It is held back for %s.", node_reason_name((NodeReason) next.reason))));
	}
	identity_publish();
}

/*
 * The worker id in force, or none while held back or while the start
 * found what stops every call; with the lock held (or at start).  The
 * hot path reads the word without the lock: it needs nothing else the
 * lock guards, as every ID is installed by a compare-and-swap on the last
 * ID.
 */
void
identity_publish(void)
{
	bool		may = node_verdict_before(&node_shared->rec, CHECK_RECOVERY) == REASON_NONE &&
		!node_lease_lost();

	mark_publish_worker(may ? node_configured_worker() : WORKER_ID_UNSET);
	/* pairs with identity_reload_pending(): the word before the reading */
	pg_write_barrier();
	pg_atomic_write_u32(&node_shared->published, pg_atomic_read_u32(&node_shared->configured));
	pg_atomic_write_u64(&node_shared->published_at, pg_atomic_read_u64(&node_shared->configured_at));
}

/*
 * Make a reading of snowflake.worker_id (value, read by this process at
 * settings_worker_read_at()) the node's, unless the node has a later one.
 * The postmaster does it at start; after that the keeper at every round,
 * during recovery, when no keeper runs, the startup process at every
 * reload, and a backend whose own reading is later (take_own_reading()).
 * With the lock held exclusively (or at start), so that a reader
 * under the lock sees the value and its time together.
 */
static void
take_configured(int value)
{
	uint64		at = settings_worker_read_at();

	if (at < pg_atomic_read_u64(&node_shared->configured_at))
		return;
	pg_atomic_write_u64(&node_shared->configured_at, at);
	pg_atomic_write_u32(&node_shared->configured, (uint32) value);
}

/*
 * A reload read by this backend and not yet taken by the node (its reading
 * is later than the node's, and differs): take it for the node, so that a
 * call or the status view after a reload judges by it, whether or not the
 * keeper has had its round (a stopped keeper holds no reload back).  A
 * call's cold path then applies and publishes it (settle_locked()).
 */
static void
take_own_reading(void)
{
	bool		behind;

	LWLockAcquire(node_shared->lock, LW_SHARED);
	behind = settings_worker_read_at() > pg_atomic_read_u64(&node_shared->configured_at) &&
		(int) (int32) pg_atomic_read_u32(&node_shared->configured) != settings_worker_reading;
	LWLockRelease(node_shared->lock);
	if (!behind)
		return;
	LWLockAcquire(node_shared->lock, LW_EXCLUSIVE);
	take_configured(settings_worker_reading);
	LWLockRelease(node_shared->lock);
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
	return r->reason == REASON_NEVER_INSTALLED || r->reason == REASON_UPGRADED;
}

/*
 * What the files say, at start: a file that cannot be read (left as it
 * is), a damaged state file (refused until repaired).
 */
static void
files_found(const RecordFiles *f)
{
	if (f->state == MARK_UNREADABLE || f->identity == MARK_UNREADABLE)
	{
		bool		state = f->state == MARK_UNREADABLE;
		const PersistFault *fault = state ? &f->state_fault : &f->identity_fault;

		node_find(CHECK_FILE, state ? REASON_STATE_UNREADABLE : REASON_RECORD_UNREADABLE);
		errno = fault->err;
		ereport(WARNING,
				(persist_fault(state ? SNOWFLAKE_STATE_FILE : SNOWFLAKE_IDENTITY_FILE, fault),
				 errhint("The file is left as it is; the node refuses to generate until the server can read it and restarts.")));
	}
	if (f->state == MARK_BROKEN)
	{
		node_find(CHECK_MARK, REASON_STATE_DAMAGED);
		ereport(WARNING,
				(persist_fault(SNOWFLAKE_STATE_FILE, &f->state_fault),
				 errhint("The node refuses to generate until it is repaired with snowflake_repair_state().")));
	}
}

/*
 * At server start, in the postmaster, with AddinShmemInitLock held and
 * before mark.c reads the mark: tell this data directory's life from the
 * evidence, and keep what it found for the rest of the start (ev).  The
 * record is written once mark.c has read the mark.
 */
void
identity_start(StartEvidence *ev)
{
	NodeShared *n = node_shared;
	NodeRecord *r = &n->rec;
	bool		standby_signal = exists("standby.signal");
	bool		standby = standby_signal && follows_primary();
	NodeReason	signal = REASON_NONE;
	uint64		sysid = identity_system();
	uint64		inode = identity_directory();
	RecordFiles files;
	bool		crc_ok = false;
	ControlFileData *cf = get_controlfile(DataDir, &crc_ok);

	memset(ev, 0, sizeof(*ev));
	ev->standby = standby;
	ev->recovered = !crc_ok || cf->state != DB_SHUTDOWNED ||
		exists("standby.signal") || exists("recovery.signal") || exists("backup_label");
	pfree(cf);
	take_configured(settings_worker_reading);
	/* a restore, whichever mode it runs in (standby.signal wins over recovery.signal) */
	if (standby_signal && !standby)
		signal = recovery_target() ? REASON_RECOVERY_TARGET : REASON_ARCHIVE_STANDBY;
	else if (!standby && exists("recovery.signal"))
		signal = REASON_RECOVERY_SIGNAL;
	else if (!standby && exists("backup_label"))
		signal = REASON_BACKUP_LABEL;

	node_read(NULL, r, &files);
	ev->found = files.found;
	n->state_writes = files.state_writes;
	n->identity_writes = files.identity_writes;
	if (files.state == MARK_OK)
		ev->state_as_read = *r;
	node_find(CHECK_CONFIG, node_settings_reason());
	if (IsBinaryUpgrade)
	{
		/*
		 * pg_upgrade starts the old cluster with -b too (its --check as
		 * well), and its files stay as they are: only a new cluster is
		 * made by pg_upgrade.  Nothing is written.
		 */
		node_find(CHECK_CONFIG, REASON_BINARY_UPGRADE);
		node_find(CHECK_FILE, REASON_RECORD_UNREADABLE);
		if (upgrade_target(r, ev->found))
			identity_upgrade_noticed();
		return;
	}
	files_found(&files);

	if (files.identity == MARK_BROKEN && !ev->found)
	{
		/* a damaged record of the node, and no other: whatever it was, held */
		ev->found = true;
		r->worker = snowflake_worker_id;
		(void) node_apply(r, EV_START_RECORD_DAMAGED, REASON_NONE);
	}
	else if (!ev->found && r->mark_id == 0 && signal != REASON_NONE)
	{
		/* a base backup or a restore whose files were removed: a copy */
		r->worker = snowflake_worker_id;
		(void) node_apply(r, EV_START_COPY, signal);
	}
	else if (!ev->found && r->mark_id == 0)
	{
		/*
		 * Never ran the library, or its files are gone: a backend tells the
		 * two apart by the catalog (identity_ran_before())
		 */
		r->worker = snowflake_worker_id;
		(void) node_apply(r, EV_START_NO_RECORD,
						  standby ? REASON_NEW_AS_STANDBY : REASON_NEVER_INSTALLED);
	}
	else if (!ev->found)
	{
		/* a node of a version before the record of the node */
		r->worker = snowflake_worker_id;
		if (signal != REASON_NONE && r->worker != WORKER_ID_UNSET)
			(void) node_apply(r, EV_START_COPY, signal);
	}
	else if (!standby && (r->worker != WORKER_ID_UNSET || settings_registry_named()))
	{
		/*
		 * A node that takes its worker id from a registry is held as a copy
		 * before it leased too: its copy would ask for its source's lease.
		 */
		if (signal == REASON_NONE && r->system_identifier != sysid)
			signal = REASON_OTHER_SYSTEM;
		else if (signal == REASON_NONE && r->directory_inode != inode)
			signal = REASON_OTHER_DIRECTORY;
		if (signal != REASON_NONE)
			(void) node_apply(r, EV_START_COPY, signal);
	}
	/* this directory, as it runs now: a standby's own too */
	r->system_identifier = sysid;
	r->directory_inode = inode;
	/* a standby's worker id is its primary's until it is promoted */
	if (standby && ev->found)
		r->flags |= RECORD_WORKER_REPLAYED;
}

/*
 * In the postmaster at start, once mark.c has read the mark: write the
 * record as this start made it, and publish the worker id, if any.
 */
void
identity_started(const StartEvidence *ev)
{
	NodeReason	r;
	int			worker = node_configured_worker();

	if (node_found(CHECK_CONFIG) == REASON_BINARY_UPGRADE)
		return;
	apply_worker(&node_shared->rec, worker, false);
	if ((node_shared->rec.flags & RECORD_WORKER_REPLAYED) &&
		worker != WORKER_ID_UNSET && worker != node_shared->rec.worker)
		ereport(LOG,
				(standby_differs(worker, node_shared->rec.worker),
				 errhint("Give this server the primary's worker id before it is promoted, unless it is to become a node of its own.")));

	/*
	 * The state file is written when the start changed what it holds (the
	 * node's part, or a floor to apply), never with settings it rejects.
	 */
	(void) node_save(&node_shared->rec,
					 node_found(CHECK_CONFIG) == REASON_NONE &&
					 (node_found(CHECK_FLOOR) != REASON_NONE ||
					  !(ev->state_as_read.flags & RECORD_NODE) ||
					  memcmp((const char *) &ev->state_as_read + NODE_PART,
							 (const char *) &node_shared->rec + NODE_PART,
							 sizeof(NodeRecord) - NODE_PART) != 0) ?
					 SAVE_BOTH : SAVE_IDENTITY, WARNING);
	identity_publish();
	r = node_verdict_before(&node_shared->rec, CHECK_RECOVERY);
	if (r != REASON_NONE)
		ereport(WARNING,
				(errmsg("snowflake generates no IDs on this server"),
				 errdetail("Its state is %s, for %s.",
						   node_state_name(node_reason_state(r)), node_reason_name(r)),
				 errhint("Read snowflake.snowflake_status, or call snowflake.snowflake_nextval() to see the remedy.")));
}

/*
 * A reading of snowflake.worker_id (settings.c's assign hook, in every
 * process): taken by the startup process, the one that follows reloads
 * during recovery; the keeper takes its own at its next round
 * (identity_keep()), and the postmaster none after start.
 */
void
identity_configured(int worker)
{
	if (node_shared == NULL || !AmStartupProcess())
		return;
	LWLockAcquire(node_shared->lock, LW_EXCLUSIVE);
	take_configured(worker);
	LWLockRelease(node_shared->lock);
}

/*
 * The keeper's part, once recovery has ended: take the worker id it read
 * at the last reload, apply it (settle() changes nothing when it is
 * applied already) and publish it, and, at its start (first), log the
 * record, so that standbys made before any change of it, or while the
 * library was not preloaded, know what this node is.  A worker id that
 * would hold the node back is never published: the event is judged, and
 * the word written, under the lock.
 */
void
identity_keep(bool first)
{
	if (node_found(CHECK_CONFIG) != REASON_NONE)
		return;
	LWLockAcquire(node_shared->lock, LW_EXCLUSIVE);
	take_configured(settings_worker_reading);
	settle(true, LOG);
	if (first)
		identity_log_record(&node_shared->rec);
	LWLockRelease(node_shared->lock);
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
	LWLockAcquire(node_shared->lock, LW_EXCLUSIVE);
	next = node_shared->rec;
	p.system_identifier = next.system_identifier;
	p.directory_inode = next.directory_inode;
	/* the primary's part, its state too: the one the event finds */
	memcpy((char *) &next + NODE_PART, (char *) &p + NODE_PART,
		   sizeof(next) - NODE_PART);
	next.state = node_shared->rec.state;
	next.reason = node_shared->rec.reason;
	if (!node_apply(&next, EV_REPLAYED, (NodeReason) p.reason))
	{
		LWLockRelease(node_shared->lock);
		return;
	}
	next.flags |= RECORD_WORKER_REPLAYED;
	worker = node_configured_worker();
	apply_worker(&next, worker, false);
	if (memcmp(&next, &node_shared->rec, sizeof(next)) != 0)
	{
		bool		news = next.worker != node_shared->rec.worker ||
			next.reason != node_shared->rec.reason;

		if (worker != WORKER_ID_UNSET && worker != next.worker && news)
			ereport(LOG,
					(standby_differs(worker, next.worker),
					 next.reason == REASON_WORKER_RETIRED ?
					 errdetail("The primary gave worker id %d up; promoted, this server refuses until its snowflake.worker_id is %d.",
							   worker, next.worker) :
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
	bool		ran_before;

	if (node_shared == NULL)
		return REASON_NOT_PRELOADED;
	if (IsUnderPostmaster && node_found(CHECK_CONFIG) == REASON_NONE)
		take_own_reading();
	/* what the catalog says, read outside the lock */
	LWLockAcquire(node_shared->lock, LW_SHARED);
	r = node_shared->rec;
	LWLockRelease(node_shared->lock);
	ran_before = node_acts(&r, EV_RAN_BEFORE) && identity_ran_before();
	if (settle_now && node_found(CHECK_CONFIG) == REASON_NONE && IsUnderPostmaster)
	{
		if (ran_before)
			identity_change(change_ran_before, NULL, ERROR);
		else
			settle_locked(primary);
	}
	LWLockAcquire(node_shared->lock, LW_SHARED);
	r = node_shared->rec;
	if (!settle_now && node_found(CHECK_CONFIG) == REASON_NONE)
	{
		if (ran_before)
			(void) node_apply(&r, EV_RAN_BEFORE, REASON_NONE);
		apply_worker(&r, node_configured_worker(), primary);
	}
	v = node_verdict_before(&r, upto);
	LWLockRelease(node_shared->lock);
	return v;
}

/*
 * Whether the extension ran in this data directory before: its replication
 * origin, a row of a shared catalog, which the removal of its files
 * leaves, DROP EXTENSION keeps, every database sees and every copy of the
 * directory has.  Only in a transaction (a backend).
 */
bool
identity_ran_before(void)
{
	return IsTransactionState() &&
		replorigin_by_name(SNOWFLAKE_NODE_ORIGIN, true) != COMPAT_INVALID_ORIGIN;
}

/* Leave that sign, if it is not there yet: an install script, a confirmation. */
void
identity_note_ran(void)
{
	if (!identity_ran_before())
		(void) replorigin_create(SNOWFLAKE_NODE_ORIGIN);
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
	RecordFiles files;

	node_read(NULL, &r, &files);
	if (files.state == MARK_BROKEN || files.state == MARK_UNREADABLE ||
		files.identity == MARK_BROKEN || files.identity == MARK_UNREADABLE)
		return;
	if (!files.found && r.mark_id != 0)
		return;
	if (!files.found)
	{
		r.system_identifier = identity_system();
		r.directory_inode = identity_directory();
		r.worker = WORKER_ID_UNSET;
		(void) node_apply(&r, EV_START_NO_RECORD, REASON_NEVER_INSTALLED);
	}
	if (!change(&r, arg))
		return;
	r.changes++;
	r.flags |= RECORD_NODE;
	if (persist_write_file(SNOWFLAKE_STATE_FILE, &r, sizeof(r), &files.state_writes, WARNING))
		(void) persist_write_file(SNOWFLAKE_IDENTITY_FILE, &r, sizeof(r),
								  &files.identity_writes, WARNING);
}

/*
 * Apply change() to the node's record: in the files where shared memory
 * has none, or under the lock, on a copy, with the worker id applied
 * again, made durable and logged, then published.
 */
void
identity_change(bool (*change) (NodeRecord *r, const void *arg), const void *arg,
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
		apply_worker(&next, node_configured_worker(), primary);
		if (node_save(&next, SAVE_BOTH, elevel) && primary)
			identity_log_record(&next);
		identity_publish();
	}
	LWLockRelease(node_shared->lock);
}

static bool
change_ran_before(NodeRecord *r, const void *arg)
{
	return node_apply(r, EV_RAN_BEFORE, REASON_NONE);
}

static bool
change_upgraded(NodeRecord *r, const void *arg)
{
	return node_apply(r, EV_UPGRADED, REASON_NONE);
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
