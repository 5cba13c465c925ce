/*-------------------------------------------------------------------------
 *
 * node.c
 *	  What the node knows: its state and the reason for it, the one durable
 *	  record that holds them, and every refusal the node makes.
 *
 * The state, as snowflake_status shows it:
 *
 *	state			reasons								released by
 *	ready			-									(generates)
 *	held_copy		backup_label, recovery_signal,		a worker id of its own, or
 *					other_directory, other_system,		confirm_node() with a floor
 *					record_damaged
 *	held_floor		never_installed, new_as_standby,	confirm_node() with a floor
 *					upgraded
 *	held_claimed	claimed_elsewhere, worker_retired	a worker id of its own, or
 *														confirm_node() with a floor
 *	held_file		record_unreadable,					the file made readable and a
 *					state_unreadable					restart
 *	broken			state_damaged, state_beyond_layout	repair_state() (or the old
 *														layout back)
 *	starting		-									the keeper applies the floor
 *	disabled		settings_rejected, binary_upgrade	the settings fixed and a
 *														restart; pg_upgrade's end
 *
 * The first four are durable: the record keeps them, and only these
 * events change them (identity.c makes each change):
 *
 *	from			event								to
 *	any				start: backup_label, recovery.signal held_copy
 *					or another directory or system
 *					under the worker id recorded
 *	any				start: neither file, or pg_upgrade	held_floor
 *	held_floor		an install script ran (never_inst.)	ready
 *	ready			another system's claim of the		held_claimed
 *					worker id in force arrives, or a
 *					reload to a claimed one
 *	ready			promoted with the worker id its		held_claimed
 *					primary gave up (worker_retired)
 *	held_copy,		a reload to a worker id of its own	ready
 *	held_claimed	(not the copy's, not claimed, not
 *					given up)
 *	held_*			confirm_node() with a floor			ready
 *	any				(standby) its primary's record		the primary's
 *					replayed
 *
 * The others come from what the start found or what the mark says, and the
 * state shown is the first that holds: disabled, held_file, a durable hold,
 * broken, starting, ready.  So a copy whose state file is also damaged
 * shows held_copy, and once given a worker id of its own, broken.
 *
 * Every change of the record is made on a copy, made durable (node_save()),
 * and only then put in shared memory and published; a write that fails
 * changes nothing.  The record is written whole to snowflake.state, and to
 * snowflake.identity whenever the node's part changes, so that either file
 * alone keeps a hold.
 *
 * This file uses persist.c and the settings; identity.c, mark.c and the
 * generator use it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "miscadmin.h"
#include "storage/shmem.h"

#include "node.h"
#include "persist.h"
#include "settings.h"

NodeShared *node_shared = NULL;

/* a record is one slot of persist.c's files, and one WAL record */
StaticAssertDecl(sizeof(NodeRecord) <= 480, "the node's record must fit a slot");

/*
 * Each reason's state, name and SQLSTATE, and the words of its refusal.
 * The values they name (%s) are RefuseArgs', in order: the message's, the
 * detail's, the hint's.
 */
typedef struct ReasonRow
{
	NodeState	state;
	const char *name;
	int			sqlstate;
	const char *msg;
	const char *detail;
	const char *hint;
} ReasonRow;

#define SF_SQLSTATE(n)	MAKE_SQLSTATE('5', '5', 'S', '0', n)

#define COPY_MSG	"snowflake data directory is a copy of the node with worker id %s"
#define COPY_HINT	"Give this server a worker id of its own in snowflake.worker_id and reload, or, if it replaces the node it was copied from, run SELECT snowflake.snowflake_confirm_node(stopped_at => '...') as a superuser with the time that node stopped."
#define FLOOR_MSG	"snowflake does not know which IDs were issued before this data directory"
#define FILE_MSG	"could not read snowflake file \"%s\""
#define FILE_DETAIL "It could not be opened or read at server start (its mode or owner); the node cannot tell what it holds, and leaves it as it is."
#define FILE_HINT	"Make it readable by the server's account and restart the server."
#define LAYOUT_MSG	"snowflake layout \"%s\" cannot continue above the IDs issued under layout \"%s\""
#define CLOCK_DETAIL "The last snowflake ID carries the time %s and the clock reads %s; IDs can be issued again when the clock reaches %s."
#define TICK_DETAIL "The next tick begins at %s, %s ms from now; a call waits at most 1000 ms for the clock."
#define TICK_HINT	"\"snowflake.max_run_ahead_ms\" (%s ms) limits issuing IDs of the next tick ahead of the clock; raise it, or use a layout with a shorter tick or more sequence bits."
#define KEEPER_MSG	"snowflake reservation was not renewed within 5000 ms"
#define SETTINGS_HINT "Fix it in postgresql.conf (the server log says why it was rejected) and restart the server."

static const ReasonRow reasons[NUM_REASONS] = {
	[REASON_NONE] = {NODE_READY},
	[REASON_BACKUP_LABEL] = {NODE_HELD_COPY, "backup_label", SF_SQLSTATE('1'), COPY_MSG,
		"The server was started from a base backup (backup_label) without standby.signal.", COPY_HINT},
	[REASON_RECOVERY_SIGNAL] = {NODE_HELD_COPY, "recovery_signal", SF_SQLSTATE('1'), COPY_MSG,
		"The server was started with recovery.signal (a restore from an archive, or to a point in time) without standby.signal; its WAL may end before the last IDs the node issued.", COPY_HINT},
	[REASON_OTHER_DIRECTORY] = {NODE_HELD_COPY, "other_directory", SF_SQLSTATE('1'), COPY_MSG,
		"It is not the directory that last ran under this worker id: it was copied, or moved to another file system (then above => 0 confirms it).", COPY_HINT},
	[REASON_OTHER_SYSTEM] = {NODE_HELD_COPY, "other_system", SF_SQLSTATE('1'), COPY_MSG,
		"Its files snowflake.state and snowflake.identity name another system.", COPY_HINT},
	[REASON_RECORD_DAMAGED] = {NODE_HELD_COPY, "record_damaged", SF_SQLSTATE('1'), COPY_MSG,
		"Its file snowflake.identity is damaged, so the node cannot tell whether this data directory is a copy.", COPY_HINT},
	[REASON_NEVER_INSTALLED] = {NODE_HELD_FLOOR, "never_installed", SF_SQLSTATE('2'), FLOOR_MSG,
		"It has neither snowflake.state nor snowflake.identity, and CREATE EXTENSION did not run in it: its catalog came from another server, or its files were removed.",
		"As a superuser, run SELECT snowflake.snowflake_confirm_node(stopped_at => '...') with the time the server that issued IDs under this worker id stopped, or above => its highest ID."},
	[REASON_NEW_AS_STANDBY] = {NODE_HELD_FLOOR, "new_as_standby", SF_SQLSTATE('2'), FLOOR_MSG,
		"It started as a standby without snowflake.state, and its primary never logged which node it is: it did not preload the library while this server replayed its WAL.",
		"As a superuser, run SELECT snowflake.snowflake_confirm_node(above => 0) if the primary issued no IDs, or above => its highest ID."},
	[REASON_UPGRADED] = {NODE_HELD_FLOOR, "upgraded", SF_SQLSTATE('2'),
		"snowflake does not know which IDs the cluster issued before pg_upgrade",
		"pg_upgrade ran on this data directory and does not carry snowflake.state over; the old cluster's IDs may carry times ahead of this server's clock.",
		"As a superuser, run SELECT snowflake.snowflake_confirm_node(old_data_directory => '...') naming the old cluster's data directory."},
	[REASON_CLAIMED_ELSEWHERE] = {NODE_HELD_CLAIMED, "claimed_elsewhere", SF_SQLSTATE('3'),
		"snowflake worker id %s is claimed by another system",
		"A claim of it by system %s arrived in snowflake_workers (a restored dump, say); this server could repeat the IDs that system issued.",
		"Give this server a worker id of its own in snowflake.worker_id and reload, or, if it continues that system's node, run SELECT snowflake.snowflake_confirm_node(above => N) as a superuser with N the highest ID that system issued."},
	[REASON_WORKER_RETIRED] = {NODE_HELD_CLAIMED, "worker_retired", SF_SQLSTATE('3'),
		"snowflake worker id %s was given up by this node",
		"This server followed a primary that moved from worker id %s to another; its own snowflake.worker_id still says the old one.",
		"Set snowflake.worker_id = %s, the primary's, and reload."},
	[REASON_RECORD_UNREADABLE] = {NODE_HELD_FILE, "record_unreadable", ERRCODE_IO_ERROR,
		FILE_MSG, FILE_DETAIL, FILE_HINT},
	[REASON_STATE_UNREADABLE] = {NODE_HELD_FILE, "state_unreadable", ERRCODE_IO_ERROR,
		FILE_MSG, FILE_DETAIL, FILE_HINT},
	[REASON_STATE_DAMAGED] = {NODE_BROKEN, "state_damaged", ERRCODE_DATA_CORRUPTED,
		"snowflake state file \"snowflake.state\" is damaged",
		"The file holds the highest ID this node may have issued; without it a restart with the clock set back could repeat IDs.",
		"As a superuser, run SELECT snowflake.snowflake_repair_state(above => N) with N the largest ID your tables hold."},
	[REASON_STATE_BEYOND_LAYOUT] = {NODE_BROKEN, "state_beyond_layout", SF_SQLSTATE('4'), LAYOUT_MSG,
		"The highest ID the node may have issued, %s, is beyond the largest ID of layout \"%s\".",
		"Go back to snowflake.layout = '%s' and restart, or choose a layout with room above that ID."},
	[REASON_SETTINGS_REJECTED] = {NODE_DISABLED, "settings_rejected", ERRCODE_CONFIG_FILE_ERROR,
		"snowflake setting \"%s\" was rejected at server start",
		"Its value in the configuration, '%s', is not valid; PostgreSQL then leaves the setting at its default, which the node does not take for the value meant.",
		SETTINGS_HINT},
	[REASON_SETTING_UNKNOWN] = {NODE_DISABLED, "setting_unknown", ERRCODE_CONFIG_FILE_ERROR,
		"\"%s\" is not a snowflake setting",
		"The configuration names it; a misspelt name leaves the setting meant at its default, which the node does not take for it.",
		"Correct or remove it in postgresql.conf and restart the server."},
	[REASON_LAYOUT_REJECTED] = {NODE_DISABLED, "layout_rejected", ERRCODE_CONFIG_FILE_ERROR,
		"snowflake.layout = '%s' was rejected at server start",
		"No layout is in force: PostgreSQL leaves the setting at its default, which the node does not take for the layout meant.",
		"Fix snowflake.layout in postgresql.conf (the server log lists the values it takes) and restart the server."},
	[REASON_LAYOUT_UNUSABLE] = {NODE_DISABLED, "layout_unusable", ERRCODE_CONFIG_FILE_ERROR,
		"snowflake layout \"%s\" cannot be used", "%s",
		"Fix the snowflake.layout or snowflake.custom_* settings in postgresql.conf and restart the server."},
	[REASON_WORKER_ID_REJECTED] = {NODE_DISABLED, "worker_id_rejected", ERRCODE_CONFIG_FILE_ERROR,
		"snowflake.worker_id = '%s' was rejected",
		"Worker ids run from 0 to %s in the \"%s\" layout; until a valid one is set, the node has none.",
		"Set snowflake.worker_id in postgresql.conf to a worker id in that range, and reload."},
	[REASON_BINARY_UPGRADE] = {NODE_DISABLED, "binary_upgrade", ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
		"cannot generate snowflake IDs in binary-upgrade mode",
		"pg_upgrade runs the server in this mode; the state file is left as it is.",
		"Generate IDs once pg_upgrade has finished and the server runs normally."},
	[REASON_NOT_PRELOADED] = {NODE_DISABLED, "not_preloaded", ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
		"snowflake must be loaded via \"shared_preload_libraries\"",
		"The generator keeps its state in shared memory, which is set up at server start.",
		"Add 'snowflake' to shared_preload_libraries in postgresql.conf and restart the server."},
	[REASON_SINGLE_USER] = {NODE_DISABLED, "single_user", ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
		"cannot generate snowflake IDs in single-user mode",
		"Reservations are made durable by the background worker \"snowflake keeper\", which does not run in single-user mode.",
		"Start the server normally to generate IDs."},
	[REASON_IN_RECOVERY] = {NODE_STANDBY, "in_recovery", ERRCODE_READ_ONLY_SQL_TRANSACTION,
		"cannot generate snowflake IDs during recovery",
		"A standby shares the worker id of its primary; IDs it issued would collide.",
		"Generate IDs on the primary, or promote this standby first."},
	[REASON_NO_WORKER_ID] = {NODE_DISABLED, "no_worker_id", SF_SQLSTATE('9'),
		"snowflake.worker_id is not set",
		"Every node that generates IDs needs a worker id of its own; two nodes with the same one issue the same IDs.",
		"Set snowflake.worker_id in postgresql.conf to a value no other node uses, and reload."},
	[REASON_LAYOUT_BELOW] = {NODE_BLOCKED, "layout_below", SF_SQLSTATE('4'), LAYOUT_MSG,
		"The last ID, read in the new layout, carries the time %s; new IDs must be greater, and the clock reads %s.",
		"Go back to snowflake.layout = '%s', or choose a layout whose IDs at this time are greater than the last ID."},
	[REASON_CLOCK_BACK] = {NODE_BLOCKED, "clock_back", SF_SQLSTATE('5'),
		"system clock moved backwards by %s ms", CLOCK_DETAIL,
		"\"snowflake.max_clock_backward_ms\" (%s ms) limits waiting for the clock and \"snowflake.max_run_ahead_ms\" (%s ms) limits issuing IDs ahead of it; raise either to keep generating."},
	[REASON_CLOCK_BACK_LONG] = {NODE_BLOCKED, "clock_back_long", SF_SQLSTATE('5'),
		"system clock moved backwards by %s ms", CLOCK_DETAIL,
		"\"snowflake.max_run_ahead_ms\" (%s ms) limits issuing IDs ahead of the clock; raise it to keep generating (a call waits for the clock at most an hour)."},
	[REASON_CLOCK_BACK_FAR] = {NODE_BLOCKED, "clock_back_far", SF_SQLSTATE('5'),
		"system clock moved backwards by %s ms", CLOCK_DETAIL,
		"The last ID is further ahead of the clock than snowflake.max_run_ahead_ms may let the node run (one day): set the clock right, or wait until the time in the detail."},
	[REASON_AHEAD_OF_CLOCK] = {NODE_BLOCKED, "ahead_of_clock", SF_SQLSTATE('6'),
		"snowflake generator is %s ms ahead of the system clock", CLOCK_DETAIL,
		"\"snowflake.max_run_ahead_ms\" (%s ms) limits issuing IDs ahead of the clock; raise it to keep generating."},
	[REASON_AHEAD_FAR] = {NODE_BLOCKED, "ahead_far", SF_SQLSTATE('6'),
		"snowflake generator is %s ms ahead of the system clock", CLOCK_DETAIL,
		"The last ID is further ahead of the clock than snowflake.max_run_ahead_ms may let the node run (one day): wait until the time in the detail, or set the clock right."},
	[REASON_TICK_USED_UP] = {NODE_BLOCKED, "tick_used_up", SF_SQLSTATE('7'),
		"snowflake layout \"%s\" has no ID left in the current tick", TICK_DETAIL, TICK_HINT},
	[REASON_BLOCK_TOO_LARGE] = {NODE_BLOCKED, "block_too_large", SF_SQLSTATE('7'),
		"snowflake layout \"%s\" has fewer than %s IDs left in the current tick for a block", TICK_DETAIL, TICK_HINT},
	[REASON_KEEPER_LATE] = {NODE_BLOCKED, "keeper_late", SF_SQLSTATE('8'), KEEPER_MSG,
		"The background worker \"snowflake keeper\" makes every reservation durable, in snowflake.state and in WAL, before IDs may use it.",
		"Check that it runs (pg_stat_activity, backend_type 'snowflake keeper'), and the server log for why it cannot write snowflake.state or log in WAL."},
	[REASON_KEEPER_ORIGIN] = {NODE_BLOCKED, "keeper_origin", SF_SQLSTATE('8'), KEEPER_MSG,
		"The floor after recovery needs replication origin \"snowflake_high_water_mark\", through which version 1.1 logged its reservations, and the worker that reads it failed.",
		"The server log says why; the keeper starts that worker again after ten seconds."},
	/* not a refusal: calls wait for the keeper */
	[REASON_FLOOR_PENDING] = {NODE_STARTING, "floor_pending"},
	[REASON_CLOCK_BEFORE_EPOCH] = {NODE_BLOCKED, "clock_before_epoch", ERRCODE_DATETIME_VALUE_OUT_OF_RANGE,
		"system clock reads %s, before the epoch of the snowflake layout \"%s\"",
		"IDs of this layout carry times from its epoch, %s, on.",
		"Set the system clock right."},
	[REASON_LAYOUT_ENDED] = {NODE_BLOCKED, "layout_ended", ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED,
		"snowflake layout \"%s\" has run out of time bits",
		"Its last representable time is %s.",
		"Move to a layout with a later end of life."},
};

static const char *const state_names[] = {
	[NODE_READY] = "ready",
	[NODE_HELD_COPY] = "held_copy",
	[NODE_HELD_FLOOR] = "held_floor",
	[NODE_HELD_CLAIMED] = "held_claimed",
	[NODE_HELD_FILE] = "held_file",
	[NODE_BROKEN] = "broken",
	[NODE_STARTING] = "starting",
	[NODE_DISABLED] = "disabled",
	[NODE_STANDBY] = "standby",
	[NODE_BLOCKED] = "blocked",
};

const char *
node_state_name(NodeState s)
{
	return state_names[s];
}

const char *
node_reason_name(NodeReason r)
{
	return r > REASON_NONE && r < NUM_REASONS ? reasons[r].name : NULL;
}

NodeState
node_reason_state(NodeReason r)
{
	return r < NUM_REASONS ? reasons[r].state : NODE_READY;
}

Size
node_shmem_size(void)
{
	return sizeof(NodeShared);
}

/* Called by the postmaster with AddinShmemInitLock held, before the rest. */
void
node_shmem_init(void)
{
	bool		found;

	node_shared = ShmemInitStruct("snowflake node", sizeof(NodeShared), &found);
	if (found)
		return;
	memset(node_shared, 0, sizeof(NodeShared));
	node_shared->lock = &(GetNamedLWLockTranche("snowflake"))->lock;
	pg_atomic_init_u32(&node_shared->published, NODE_STARTING);
}

/* The worker id the configuration gives now, or WORKER_ID_UNSET. */
int
node_configured_worker(void)
{
	int			w = (int) (int32) pg_atomic_read_u32(&node_shared->configured);

	return w == WORKER_ID_REJECTED ? WORKER_ID_UNSET : w;
}

/*
 * What the settings read at server start found, as a reason the node
 * refuses for (REASON_NONE: nothing); also without shared memory, where
 * the decoding functions follow the configured layout.
 */
NodeReason
node_settings_reason(void)
{
	switch (settings_found()->trouble)
	{
		case SETTINGS_OK:
			break;
		case SETTINGS_REJECTED:
			return REASON_SETTINGS_REJECTED;
		case SETTINGS_UNKNOWN:
			return REASON_SETTING_UNKNOWN;
		case SETTINGS_LAYOUT_REJECTED:
			return REASON_LAYOUT_REJECTED;
		case SETTINGS_LAYOUT_UNUSABLE:
			return REASON_LAYOUT_UNUSABLE;
	}
	return REASON_NONE;
}

/*
 * Whether a call of this process may generate now, and if not, why: the
 * first that holds of what the node knows, in this order (NodeCheck): its
 * configuration at start (and this process: single-user mode), a file it
 * cannot read, its record (rec: the durable hold, with the worker id
 * configured now applied), recovery, its mark, its worker id, its keeper.
 * REASON_FLOOR_PENDING: calls wait for recovery's floor, then generate.
 * The one place that decides it: the generator refuses for it (and then
 * for the clock's verdict of the call, generator.c), and the status view
 * shows it; a step that mends one of them (the repair mends the mark)
 * asks only the checks before it.  In a backend, with the lock held
 * (shared suffices).
 */
NodeReason
node_verdict_before(const NodeRecord *rec, NodeCheck upto)
{
	NodeShared *n = node_shared;
	int			worker;

	if (n == NULL)
		return REASON_NOT_PRELOADED;
	if (n->disabled != REASON_NONE)
		return n->disabled;
	if (!IsUnderPostmaster)
		return REASON_SINGLE_USER;
	if (upto > CHECK_FILE && n->file_trouble != REASON_NONE)
		return n->file_trouble;
	if (upto > CHECK_HOLD && rec->state != NODE_READY)
		return (NodeReason) rec->reason;
	if (upto > CHECK_RECOVERY && RecoveryInProgress())
		return REASON_IN_RECOVERY;
	if (upto > CHECK_MARK && n->mark_trouble != REASON_NONE)
		return n->mark_trouble;
	worker = (int) (int32) pg_atomic_read_u32(&n->configured);
	if (upto > CHECK_WORKER && worker == WORKER_ID_REJECTED)
		return REASON_WORKER_ID_REJECTED;
	if (upto > CHECK_WORKER && worker == WORKER_ID_UNSET)
		return REASON_NO_WORKER_ID;
	if (upto > CHECK_KEEPER && n->keeper_trouble != REASON_NONE)
		return n->keeper_trouble;
	if (upto > CHECK_KEEPER && n->floor_pending)
		return REASON_FLOOR_PENDING;
	return REASON_NONE;
}

NodeReason
node_verdict(const NodeRecord *rec)
{
	return node_verdict_before(rec, CHECK_ALL);
}

/* Whether a call meets a refusal for reason r (not: it generates, or waits). */
bool
node_refuses(NodeReason r)
{
	return r != REASON_NONE && r != REASON_FLOOR_PENDING;
}

/*
 * The state the node is in, and why: the first of these that holds.  With
 * the lock held, or in the postmaster.
 */
NodeState
node_state(NodeReason *reason)
{
	NodeShared *n = node_shared;
	NodeReason	r = REASON_NONE;

	if (n->disabled != REASON_NONE)
		r = n->disabled;
	else if (n->file_trouble != REASON_NONE)
		r = n->file_trouble;
	else if (n->rec.state != NODE_READY)
		r = (NodeReason) n->rec.reason;
	else if (n->mark_trouble != REASON_NONE)
		r = n->mark_trouble;
	*reason = r;
	if (r != REASON_NONE)
		return reasons[r].state;
	return n->floor_pending ? NODE_STARTING : NODE_READY;
}

/* Publish the state for readers without the lock. */
void
node_publish(void)
{
	NodeReason	r;
	NodeState	s = node_state(&r);

	pg_atomic_write_u32(&node_shared->published, (uint32) s | ((uint32) r << 8));
}

/*
 * Make next the node's record: write it to the files asked for (the state
 * file at every change; snowflake.identity too when the node's part
 * changes, and the node's part counts a change), and only then put it in
 * shared memory and publish it.  A file the start could not read is never
 * written (it is left for the operator to look at), nor a damaged state
 * file but by a repair, which clears mark_trouble first; pg_upgrade's
 * servers write nothing.  Returns false, having changed nothing, if a
 * write failed (reported at elevel).  With the lock held.
 */
bool
node_save(const NodeRecord *next, int files, int elevel)
{
	NodeShared *n = node_shared;
	NodeRecord	rec = *next;

	if (n->disabled == REASON_BINARY_UPGRADE)
		return false;
	if (n->file_trouble == REASON_STATE_UNREADABLE || n->mark_trouble == REASON_STATE_DAMAGED)
		files &= ~SAVE_STATE;
	if (n->file_trouble == REASON_RECORD_UNREADABLE)
		files &= ~SAVE_IDENTITY;
	if (files & SAVE_IDENTITY)
		rec.changes++;
	rec.flags |= RECORD_NODE;
	if ((files & SAVE_STATE) &&
		!persist_write_file(SNOWFLAKE_STATE_FILE, &rec, sizeof(rec),
							&n->state_writes, elevel))
		return false;
	if ((files & SAVE_IDENTITY) &&
		!persist_write_file(SNOWFLAKE_IDENTITY_FILE, &rec, sizeof(rec),
							&n->identity_writes, elevel))
		return false;
	n->rec = rec;
	node_publish();
	return true;
}

/*
 * Refuse a call, for a reason, with the values its words name.  Every
 * refusal the node makes is here, from the table above.
 */
void
node_refuse(NodeReason r, const RefuseArgs *a)
{
	static const RefuseArgs none = {{0}};
	const ReasonRow *row = &reasons[r];

	if (a == NULL)
		a = &none;
	if (r <= REASON_NONE || r >= NUM_REASONS || row->msg == NULL)
		elog(ERROR, "snowflake refused for unknown reason %d", (int) r);
	ereport(ERROR,
			(errcode(row->sqlstate),
			 errmsg(row->msg, a->msg[0], a->msg[1]),
			 errdetail(row->detail, a->detail[0], a->detail[1], a->detail[2]),
			 errhint(row->hint, a->hint[0], a->hint[1])));
}

/* A number, as the words of a refusal name it. */
const char *
node_num(int64 v)
{
	return psprintf(INT64_FORMAT, v);
}

/*
 * Refuse for a reason of the node's state, naming what the record says:
 * the worker id it is held under (for worker_retired, the one given up
 * and the primary's), the file it cannot read, the layouts of a mark
 * beyond the layout in force.
 */
void
node_refuse_state(NodeReason r)
{
	NodeShared *n = node_shared;
	const SettingsFound *f = settings_found();
	const char *worker = n != NULL ? node_num(n->rec.worker) : NULL;
	const char *layout = snowflake_layout->name;
	RefuseArgs	a = {{worker}};

	if (r == REASON_SETTINGS_REJECTED)
		a = (RefuseArgs) {{f->name}, {f->value}};
	else if (r == REASON_SETTING_UNKNOWN)
		a = (RefuseArgs) {{f->name}};
	else if (r == REASON_LAYOUT_REJECTED)
		a = (RefuseArgs) {{f->value}};
	else if (r == REASON_LAYOUT_UNUSABLE)
		a = (RefuseArgs) {{f->name}, {f->why}};
	else if (r == REASON_WORKER_ID_REJECTED)
		a = (RefuseArgs) {{settings_worker_rejected()},
		{node_num(layout_max_worker(snowflake_layout)), layout}};
	else if (r == REASON_WORKER_RETIRED)
	{
		const char *given_up = node_num(node_configured_worker());

		a = (RefuseArgs) {{given_up}, {given_up}, {worker}};
	}
	else if (r == REASON_CLAIMED_ELSEWHERE)
		a.detail[0] = n->rec.other_system != 0 ?
			psprintf(UINT64_FORMAT, n->rec.other_system) : "unknown";
	else if (r == REASON_RECORD_UNREADABLE)
		a.msg[0] = SNOWFLAKE_IDENTITY_FILE;
	else if (r == REASON_STATE_UNREADABLE)
		a.msg[0] = SNOWFLAKE_STATE_FILE;
	else if (r == REASON_STATE_BEYOND_LAYOUT)
		a = (RefuseArgs) {{layout, n->trouble_layout}, {node_num(n->trouble_id), layout},
		{n->trouble_layout}};
	node_refuse(r, &a);
}
