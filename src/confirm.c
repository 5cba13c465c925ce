/*-------------------------------------------------------------------------
 *
 * confirm.c
 *	  What the operator and the install scripts tell the node about which
 *	  node it is: snowflake_confirm_node() (this data directory is the node
 *	  of its worker id, restored, upgraded or moved, and continues above a
 *	  floor), and the word of an install script (a data directory that
 *	  never ran the library is a fresh node).  Each is an event of node.c's
 *	  model; the confirmation is applied as its transaction commits.
 *
 * A node that is not the server that issued IDs under its worker id
 * cannot know how far they went: its WAL may end before them.  So a
 * confirmation always takes a floor (stopped_at, above, or the old
 * cluster's state file after pg_upgrade), logged in WAL before the record,
 * so that a standby that learns the node is confirmed continues above it
 * too.
 *
 * This file uses node.c, identity.c, claims.c, mark.c and wal.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/stat.h>

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_authid.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "clock.h"
#include "identity.h"
#include "mark.h"
#include "messages.h"
#include "node.h"
#include "persist.h"
#include "settings.h"

PG_FUNCTION_INFO_V1(snowflake_identity_confirm);
PG_FUNCTION_INFO_V1(snowflake_identity_installed);

/* This transaction's confirmation, applied when it commits. */
typedef struct PendingConfirm
{
	bool		pending;		/* asked for, not yet applied */
	bool		applied;		/* applied at pre-commit, not yet committed */
	int			level;			/* the transaction nesting level it came in */
	int64		floor_id;		/* the highest floor asked for */
	NodeRecord	old;			/* the old cluster's record, if named */
	NodeRecord	undo;			/* what an abort after pre-commit restores */
} PendingConfirm;

static PendingConfirm confirm;

/*
 * The confirmation applied at pre-commit (so that one rolled back releases
 * nothing, as a claim rolled back holds nothing back): the floor logged
 * and made the node's, the record durable, then the node released.
 */
static void
apply_confirm(void)
{
	NodeRecord	next;
	NodeReason	before;
	int64		last;
	int			worker = node_configured_worker();
	const NodeRecord *old = &confirm.old;

	LWLockAcquire(node_shared->lock, LW_EXCLUSIVE);
	next = node_shared->rec;
	/* what an abort after this point (a serialization failure) restores */
	confirm.undo = next;
	confirm.applied = true;
	before = (NodeReason) next.reason;
	last = mark_repair_locked(confirm.floor_id, false, true, &next);
	(void) node_apply(&next, EV_CONFIRMED, REASON_NONE);
	next.system_identifier = identity_system();
	next.directory_inode = identity_directory();
	/* the old cluster's claims of other systems, then its own node's */
	for (int w = 0; w < CLAIM_BITS; w++)
		if (node_claimed(old, w))
			node_add_claim(&next, w);
	for (uint32 i = 0; i < Min(old->nhigh, CLAIM_HIGH); i++)
		node_add_claim(&next, old->high[i]);
	if (old->nhigh > CLAIM_HIGH && next.nhigh <= CLAIM_HIGH)
		next.nhigh = CLAIM_HIGH + 1;	/* more than it kept */
	/* this node continues the one whose claim held it back */
	node_drop_claim(&next, worker);
	if (worker != WORKER_ID_UNSET)
		node_move_worker(&next, worker);
	mark_repair_save(&next, true, last, false);
	identity_log_record(&next);
	identity_publish();
	LWLockRelease(node_shared->lock);
	if (before != REASON_NONE)
		ereport(LOG,
				(errmsg("snowflake server confirmed as the node of worker id %d", next.worker),
				 errdetail("New IDs continue above %lld.", (long long) last)));
}

/*
 * A confirmation applied at pre-commit whose commit then failed (a
 * serialization failure): the node is held again as it was.  The floor it
 * raised stays: it bounds nothing but what the node may issue.
 */
static bool
change_unconfirm(NodeRecord *r, const void *arg)
{
	memcpy((char *) r + NODE_PART, (char *) &confirm.undo + NODE_PART,
		   sizeof(NodeRecord) - NODE_PART);
	r->flags = (r->flags & ~(RECORD_COPY_OF | RECORD_WORKER_REPLAYED)) |
		(confirm.undo.flags & (RECORD_COPY_OF | RECORD_WORKER_REPLAYED));
	r->changes = Max(r->changes, confirm.undo.changes);
	return true;
}

static void
confirm_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			/* still in the transaction: a failure here aborts it */
			if (confirm.pending)
				apply_confirm();
			confirm.pending = false;
			break;
		case XACT_EVENT_PRE_PREPARE:
			if (confirm.pending)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot prepare a transaction that ran snowflake_confirm_node()")));
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PREPARE:
			confirm.applied = false;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			confirm.pending = false;
			if (confirm.applied)
				identity_change(change_unconfirm, NULL, WARNING);
			confirm.applied = false;
			break;
		default:
			break;
	}
}

static void
confirm_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						 SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();

	if (event != SUBXACT_EVENT_ABORT_SUB && event != SUBXACT_EVENT_COMMIT_SUB)
		return;
	if (confirm.pending && confirm.level >= level)
	{
		/* rolled back with its savepoint, or the parent's now */
		confirm.pending = event == SUBXACT_EVENT_COMMIT_SUB;
		confirm.level = level - 1;
	}
}

/* A confirmation, applied if this transaction commits. */
static void
pend_confirm(int64 floor_id, const NodeRecord *old)
{
	static bool registered = false;

	if (!registered)
	{
		/* after the claims', so that it runs before them */
		claims_register_callbacks();
		RegisterXactCallback(confirm_xact_callback, NULL);
		RegisterSubXactCallback(confirm_subxact_callback, NULL);
		registered = true;
	}
	confirm.floor_id = confirm.pending ? Max(confirm.floor_id, floor_id) : floor_id;
	confirm.old = *old;
	if (!confirm.pending)
		confirm.level = GetCurrentTransactionNestLevel();
	confirm.pending = true;
}

/*
 * The record another data directory holds (after pg_upgrade, the old
 * cluster's): its mark, and whether its node was held back there.
 */
static int64
old_record(const char *dir, NodeRecord *old)
{
	char		path[MAXPGPATH];
	RecordFiles files;

	snprintf(path, sizeof(path), "%s/%s", dir, SNOWFLAKE_STATE_FILE);
	node_read(dir, old, &files);
	if (files.state == MARK_ABSENT)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FILE),
				 errmsg("could not find \"%s\"", path),
				 errhint("Name the data directory of the old cluster, or give above => its highest ID.")));
	if (files.state == MARK_UNREADABLE || files.state == MARK_BROKEN)
	{
		errno = files.state_fault.err;
		ereport(ERROR,
				(persist_fault(path, &files.state_fault),
				 errhint("Give above => the highest ID the old cluster issued instead.")));
	}

	/* an upgrade does not make a copy the node */
	if (files.found && old->reason != REASON_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("old cluster in \"%s\" was held back", dir),
				 errdetail("It was not yet the node of worker id %d, but %s (%s) there; an upgrade of it is held back too.",
						   old->worker,
						   node_state_name(node_reason_state((NodeReason) old->reason)),
						   node_reason_name((NodeReason) old->reason)),
				 errhint("Give this server a worker id of its own in snowflake.worker_id and reload, or, if it replaces that node, run SELECT snowflake.snowflake_confirm_node(stopped_at => '...') with the time the node stopped.")));
	if (!files.found)
		old->worker = WORKER_ID_UNSET;
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

	mark_check_floor(id);
	if (layout_tick(l, id) >= layout_max_tick(l) ||
		layout_tick_to_unix_ms(l, layout_tick(l, id)) - clock_unix_ms() > RUN_AHEAD_CAP_MS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("snowflake ID %lld is more than a day ahead of this server's clock",
						(long long) id),
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
 * every ID the node issued up to then.  A time ahead of this server's
 * clock is taken (the lost node's clock may have been ahead): the node
 * then runs ahead of its clock or waits, as its policy says, and every
 * hint it gives leads above the floor.
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
 * and continues above the floor they give, always one.  The node must be
 * one a confirmation may release (node.c's table: not a worker id given
 * up, which may be another node's now); the record is durable before the
 * node is released.
 */
Datum
snowflake_identity_confirm(PG_FUNCTION_ARGS)
{
	int64		floor_id = -1;
	NodeRecord	old;
	NodeRecord	rec;
	NodeReason	r = identity_verdict(true, CHECK_HOLD);
	int			worker;

	/* what stands before the hold refuses, and a hold it may not release */
	if (node_refuses(r))
		node_refuse_state(r);
	LWLockAcquire(node_shared->lock, LW_SHARED);
	rec = node_shared->rec;
	LWLockRelease(node_shared->lock);
	if (!node_apply(&rec, EV_CONFIRMED, REASON_NONE))
		node_refuse_state((NodeReason) rec.reason);
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("snowflake_confirm_node() cannot run during recovery"),
				 errdetail("A standby is the node it follows; it needs no step."),
				 errhint("Run it on the server that is to generate, once it is a primary.")));
	worker = node_configured_worker();
	if (!PG_ARGISNULL(0))
	{
		floor_id = PG_GETARG_INT64(0);
		if (floor_id < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("snowflake ID %lld is negative", (long long) floor_id)));
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
		if (old.worker != WORKER_ID_UNSET && worker != WORKER_ID_UNSET && old.worker != worker)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("the old cluster in \"%s\" ran as worker id %d, not as this server's %d",
							dir, old.worker, worker),
					 errhint("Name the data directory of this node's old cluster.")));
	}
	if (!PG_ARGISNULL(2))
	{
		int64		known = mark_last_id();
		int64		at = floor_at(PG_GETARG_TIMESTAMPTZ(2));

		/* the node it replaces ran at least until the last ID known here */
		if (at < known)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("stopped_at %s is before the last ID this data directory knows of",
							timestamptz_to_str(PG_GETARG_TIMESTAMPTZ(2))),
					 errdetail("ID %lld carries the time %s; the node this server replaces ran at least until then.",
							   (long long) known, timestamptz_to_str(layout_tick_to_timestamptz(snowflake_layout,
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

	/* this data directory is the node: its sign, for when its files are gone */
	identity_note_ran();
	pend_confirm(floor_id, &old);
	/* what IDs continue above once it commits, as far as it is known now */
	PG_RETURN_INT64(Max(floor_id, mark_last_id()));
}

static bool
change_installed(NodeRecord *r, const void *arg)
{
	/* the extension ran here before: its files are gone, not yet made */
	if (*(const bool *) arg && node_apply(r, EV_RAN_BEFORE, REASON_NONE))
		return true;
	return node_apply(r, EV_INSTALLED, REASON_NONE);
}

/*
 * Called by the install scripts (of every version): a data directory that
 * never ran the library is a fresh node once the extension is created
 * here, also without preloading or with settings it rejects; one where it
 * ran before (the sign identity_note_ran() leaves) and whose files are
 * gone may be a copy, and stays held.  The sign is left for the next.
 */
Datum
snowflake_identity_installed(PG_FUNCTION_ARGS)
{
	bool		ran_before = identity_ran_before();

	identity_change(change_installed, &ran_before, ERROR);
	identity_note_ran();
	PG_RETURN_VOID();
}
