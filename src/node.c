/*-------------------------------------------------------------------------
 *
 * node.c
 *	  What the node knows: its states and the reasons for them, the events
 *	  that move it and the one table of its transitions, the durable record
 *	  that holds it, what a start found beside the record, the one verdict
 *	  a call and the status view share, and every refusal the node makes.
 *
 * The state of a node is the first that holds of its checks (NodeCheck, in
 * this order): its configuration at start (disabled), a file it cannot
 * read (held_file), its durable hold (held_copy, held_floor, held_claimed:
 * the record), recovery (standby), its mark (broken), its worker id
 * (disabled), its keeper (blocked, starting); then the generator judges a
 * call's next ID against the clock (blocked).  node_verdict() is that
 * order; the generator refuses for what it says, and snowflake_status
 * shows it.
 *
 * The durable hold moves only by the events of transitions[] below, which
 * node_apply() applies to a record: what identity.c (the start, the worker
 * id applied, replay), claims.c and confirm.c found is the event, and the
 * table alone says what it does in each state.  The other checks are what
 * was found (node_find()): by the start (the settings, the files, the
 * mark), by the keeper, or by a call that waited for it.
 *
 * Every change of the record is made on a copy, made durable (node_save()),
 * and only then put in shared memory and published; a write that fails
 * changes nothing.  The record is written whole to snowflake.state, and to
 * snowflake.identity whenever the node's part changes, so that either file
 * alone keeps a hold.  DESIGN.md's tables of states and events are this
 * file's tables, which snowflake_node_model() lists and
 * t/node_model_documented.pl compares with DESIGN.md.
 *
 * This file uses persist.c and the settings; identity.c, claims.c,
 * confirm.c, mark.c, the generator and schemes.c use it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "catalog/pg_type_d.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/shmem.h"
#include "utils/array.h"
#include "utils/builtins.h"

#include "messages.h"
#include "node.h"
#include "persist.h"
#include "registry.h"
#include "settings.h"

PG_FUNCTION_INFO_V1(snowflake_node_model);

NodeShared *node_shared = NULL;

/* a record is one slot of persist.c's files, and one WAL record */
StaticAssertDecl(sizeof(NodeRecord) <= 480, "the node's record must fit a slot");

/*
 * Each reason's state, name and SQLSTATE (0: calls do not refuse for it).
 * Its words are refusal_words()'s.
 */
typedef struct ReasonRow
{
	NodeState	state;
	const char *name;
	int			sqlstate;
} ReasonRow;

#define SF_SQLSTATE(n)	MAKE_SQLSTATE('5', '5', 'S', '0', n)

static const ReasonRow reasons[NUM_REASONS] = {
	[REASON_NONE] = {NODE_READY},
	[REASON_BACKUP_LABEL] = {NODE_HELD_COPY, "backup_label", SF_SQLSTATE('1')},
	[REASON_RECOVERY_SIGNAL] = {NODE_HELD_COPY, "recovery_signal", SF_SQLSTATE('1')},
	[REASON_RECOVERY_TARGET] = {NODE_HELD_COPY, "recovery_target", SF_SQLSTATE('1')},
	[REASON_ARCHIVE_STANDBY] = {NODE_HELD_COPY, "archive_standby", SF_SQLSTATE('1')},
	[REASON_OTHER_DIRECTORY] = {NODE_HELD_COPY, "other_directory", SF_SQLSTATE('1')},
	[REASON_OTHER_SYSTEM] = {NODE_HELD_COPY, "other_system", SF_SQLSTATE('1')},
	[REASON_RECORD_DAMAGED] = {NODE_HELD_COPY, "record_damaged", SF_SQLSTATE('1')},
	[REASON_FILES_REMOVED] = {NODE_HELD_COPY, "files_removed", SF_SQLSTATE('1')},
	[REASON_NEVER_INSTALLED] = {NODE_HELD_FLOOR, "never_installed", SF_SQLSTATE('2')},
	[REASON_NEW_AS_STANDBY] = {NODE_HELD_FLOOR, "new_as_standby", SF_SQLSTATE('2')},
	[REASON_UPGRADED] = {NODE_HELD_FLOOR, "upgraded", SF_SQLSTATE('2')},
	[REASON_CLAIMED_ELSEWHERE] = {NODE_HELD_CLAIMED, "claimed_elsewhere", SF_SQLSTATE('3')},
	[REASON_WORKER_RETIRED] = {NODE_HELD_CLAIMED, "worker_retired", SF_SQLSTATE('3')},
	[REASON_UNCLAIMED] = {NODE_HELD_CLAIMED, "unclaimed", SF_SQLSTATE('3')},
	[REASON_RECORD_UNREADABLE] = {NODE_HELD_FILE, "record_unreadable", ERRCODE_IO_ERROR},
	[REASON_STATE_UNREADABLE] = {NODE_HELD_FILE, "state_unreadable", ERRCODE_IO_ERROR},
	[REASON_STATE_DAMAGED] = {NODE_BROKEN, "state_damaged", ERRCODE_DATA_CORRUPTED},
	[REASON_STATE_BEYOND_LAYOUT] = {NODE_BROKEN, "state_beyond_layout", SF_SQLSTATE('4')},
	[REASON_SETTINGS_REJECTED] = {NODE_DISABLED, "settings_rejected", ERRCODE_CONFIG_FILE_ERROR},
	[REASON_SETTING_UNKNOWN] = {NODE_DISABLED, "setting_unknown", ERRCODE_CONFIG_FILE_ERROR},
	[REASON_LAYOUT_REJECTED] = {NODE_DISABLED, "layout_rejected", ERRCODE_CONFIG_FILE_ERROR},
	[REASON_LAYOUT_UNUSABLE] = {NODE_DISABLED, "layout_unusable", ERRCODE_CONFIG_FILE_ERROR},
	[REASON_WORKER_ID_REJECTED] = {NODE_DISABLED, "worker_id_rejected", ERRCODE_CONFIG_FILE_ERROR},
	[REASON_BINARY_UPGRADE] = {NODE_DISABLED, "binary_upgrade", ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE},
	[REASON_NOT_PRELOADED] = {NODE_DISABLED, "not_preloaded", ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE},
	[REASON_SINGLE_USER] = {NODE_DISABLED, "single_user", ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE},
	[REASON_NO_WORKER_ID] = {NODE_DISABLED, "no_worker_id", SF_SQLSTATE('9')},
	[REASON_WORKER_ID_UNSET] = {NODE_DISABLED, "worker_id_unset", SF_SQLSTATE('9')},
	[REASON_IN_RECOVERY] = {NODE_STANDBY, "in_recovery", ERRCODE_READ_ONLY_SQL_TRANSACTION},
	[REASON_LAYOUT_BELOW] = {NODE_BLOCKED, "layout_below", SF_SQLSTATE('4')},
	[REASON_CLOCK_BACK] = {NODE_BLOCKED, "clock_back", SF_SQLSTATE('5')},
	[REASON_CLOCK_BACK_LONG] = {NODE_BLOCKED, "clock_back_long", SF_SQLSTATE('5')},
	[REASON_CLOCK_BACK_FAR] = {NODE_BLOCKED, "clock_back_far", SF_SQLSTATE('5')},
	[REASON_AHEAD_OF_CLOCK] = {NODE_BLOCKED, "ahead_of_clock", SF_SQLSTATE('6')},
	[REASON_AHEAD_FAR] = {NODE_BLOCKED, "ahead_far", SF_SQLSTATE('6')},
	[REASON_TICK_USED_UP] = {NODE_BLOCKED, "tick_used_up", SF_SQLSTATE('7')},
	[REASON_BLOCK_TOO_LARGE] = {NODE_BLOCKED, "block_too_large", SF_SQLSTATE('7')},
	[REASON_KEEPER_LATE] = {NODE_BLOCKED, "keeper_late", SF_SQLSTATE('8')},
	[REASON_KEEPER_ORIGIN] = {NODE_BLOCKED, "keeper_origin", SF_SQLSTATE('8')},
	[REASON_NO_LEASE] = {NODE_BLOCKED, "no_lease", MAKE_SQLSTATE('5', '5', 'S', '1', '0')},
	[REASON_LEASE_TAKEN] = {NODE_BLOCKED, "lease_taken", MAKE_SQLSTATE('5', '5', 'S', '1', '1')},
	[REASON_LEASE_LOST] = {NODE_BLOCKED, "lease_lost", MAKE_SQLSTATE('5', '5', 'S', '1', '2')},
	/* not a refusal: calls wait for the keeper */
	[REASON_FLOOR_PENDING] = {NODE_STARTING, "floor_pending"},
	[REASON_CLOCK_BEFORE_EPOCH] = {NODE_BLOCKED, "clock_before_epoch", ERRCODE_DATETIME_VALUE_OUT_OF_RANGE},
	[REASON_LAYOUT_ENDED] = {NODE_BLOCKED, "layout_ended", ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED},
	/* DecimalId's generator, not the node's: the view does not show them */
	[REASON_DECIMAL_RANGE] = {NODE_READY, "decimal_range", ERRCODE_CONFIG_FILE_ERROR},
	[REASON_DECIMAL_FILE] = {NODE_READY, "decimal_file", ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE},
	[REASON_DECIMAL_USED_UP] = {NODE_READY, "decimal_used_up", ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE},
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

/*
 * The transitions of the durable hold.  A set of reasons stands for the
 * states the event acts in (REASON_NONE: ready); the event leads to a
 * state (or the one of the reason it found) and a reason: a fixed one, the
 * one the event found (of that state), or the one a released copy was held
 * for.  An event in a state no row names changes nothing.
 */
#define R(r)		(UINT64CONST(1) << (r))
#define READY		R(REASON_NONE)
#define COPY		(R(REASON_BACKUP_LABEL) | R(REASON_RECOVERY_SIGNAL) | \
					 R(REASON_OTHER_DIRECTORY) | R(REASON_OTHER_SYSTEM) | \
					 R(REASON_RECORD_DAMAGED) | R(REASON_FILES_REMOVED) | \
					 R(REASON_RECOVERY_TARGET) | R(REASON_ARCHIVE_STANDBY))
#define FLOOR		(R(REASON_NEVER_INSTALLED) | R(REASON_NEW_AS_STANDBY) | \
					 R(REASON_UPGRADED))
#define CLAIMED		(R(REASON_CLAIMED_ELSEWHERE) | R(REASON_WORKER_RETIRED) | \
					 R(REASON_UNCLAIMED))
#define ANY			(READY | COPY | FLOOR | CLAIMED)

#define TO_FOUND		(-1)	/* the reason the event found (its state) */
#define TO_COPY_REASON	(-2)	/* the reason the copy was held for */

/* what a transition keeps beside the state */
#define KEEP_COPY		0x1		/* its source's worker id and reason */
#define FORGET_COPY		0x2		/* none: it is the node now */

typedef struct Transition
{
	NodeEvent	event;
	uint64		from;
	int			to_state;		/* a NodeState, or TO_FOUND */
	int			to;				/* a NodeReason, TO_FOUND or TO_COPY_REASON */
	int			keep;
} Transition;

static const Transition transitions[] = {
	/* a start: what the data directory shows */
	{EV_START_COPY, READY, NODE_HELD_COPY, TO_FOUND},
	{EV_START_NO_RECORD, ANY, NODE_HELD_FLOOR, TO_FOUND},
	{EV_START_RECORD_DAMAGED, ANY, NODE_HELD_COPY, REASON_RECORD_DAMAGED},
	/* a backend: the catalog shows the extension ran here before */
	{EV_RAN_BEFORE, R(REASON_NEVER_INSTALLED), NODE_HELD_COPY, REASON_FILES_REMOVED},
	/* what made it: an install script, pg_upgrade */
	{EV_INSTALLED, R(REASON_NEVER_INSTALLED) | R(REASON_NEW_AS_STANDBY), NODE_READY, REASON_NONE},
	{EV_UPGRADED, R(REASON_NEVER_INSTALLED), NODE_HELD_FLOOR, REASON_UPGRADED},
	/* the worker id in force: at a reload, and whenever the record changes */
	{EV_WORKER_SAME, CLAIMED, NODE_READY, REASON_NONE},
	{EV_WORKER_OWN, COPY, NODE_READY, REASON_NONE, KEEP_COPY},
	{EV_WORKER_OWN, CLAIMED, NODE_READY, REASON_NONE},
	{EV_WORKER_SOURCE, READY | CLAIMED, NODE_HELD_COPY, TO_COPY_REASON},
	{EV_WORKER_CLAIMED, COPY, NODE_HELD_CLAIMED, REASON_CLAIMED_ELSEWHERE, KEEP_COPY},
	{EV_WORKER_CLAIMED, READY | CLAIMED, NODE_HELD_CLAIMED, REASON_CLAIMED_ELSEWHERE},
	{EV_WORKER_GIVEN_UP, COPY, NODE_HELD_CLAIMED, REASON_WORKER_RETIRED, KEEP_COPY},
	{EV_WORKER_GIVEN_UP, READY | CLAIMED, NODE_HELD_CLAIMED, REASON_WORKER_RETIRED},
	{EV_WORKER_UNCLAIMED, COPY, NODE_HELD_CLAIMED, REASON_UNCLAIMED, KEEP_COPY},
	{EV_WORKER_UNCLAIMED, READY | CLAIMED, NODE_HELD_CLAIMED, REASON_UNCLAIMED},
	/* the operator: a floor, committed; a worker id given up stays so */
	{EV_CONFIRMED, ANY & ~R(REASON_WORKER_RETIRED), NODE_READY, REASON_NONE, FORGET_COPY},
	/* a standby: its primary's record */
	{EV_REPLAYED, ANY, TO_FOUND, TO_FOUND},
};

static const char *const event_names[] = {
	[EV_START_COPY] = "start_copy",
	[EV_START_NO_RECORD] = "start_no_record",
	[EV_START_RECORD_DAMAGED] = "start_record_damaged",
	[EV_RAN_BEFORE] = "ran_before",
	[EV_INSTALLED] = "installed",
	[EV_UPGRADED] = "upgraded",
	[EV_WORKER_SAME] = "worker_same",
	[EV_WORKER_OWN] = "worker_own",
	[EV_WORKER_SOURCE] = "worker_source",
	[EV_WORKER_CLAIMED] = "worker_claimed",
	[EV_WORKER_GIVEN_UP] = "worker_given_up",
	[EV_WORKER_UNCLAIMED] = "worker_unclaimed",
	[EV_CONFIRMED] = "confirmed",
	[EV_REPLAYED] = "replayed",
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

/*
 * Apply an event to a record: the one place the durable hold changes.
 * found: the reason the event found (a sign of a copy, the primary's).
 * Returns whether a row of the table applied.
 */
bool
node_apply(NodeRecord *r, NodeEvent ev, NodeReason found)
{
	for (int i = 0; i < (int) lengthof(transitions); i++)
	{
		const Transition *t = &transitions[i];
		NodeReason	to;

		if (t->event != ev || !(t->from & R(r->reason)))
			continue;
		to = t->to == TO_FOUND ? found :
			t->to == TO_COPY_REASON ? (NodeReason) r->copy_reason : (NodeReason) t->to;
		/* a durable state is kept, the one the row says, and a copy's reason */
		if (to >= NUM_REASONS || !(ANY & R(to)) ||
			(t->to_state != TO_FOUND && reasons[to].state != (NodeState) t->to_state) ||
			(t->to == TO_COPY_REASON && !(r->flags & RECORD_COPY_OF)))
			return false;
		if (t->keep & KEEP_COPY)
		{
			r->copy_of = r->worker;
			r->copy_reason = r->reason;
			r->flags |= RECORD_COPY_OF;
		}
		if (t->keep & FORGET_COPY)
		{
			r->flags &= ~RECORD_COPY_OF;
			r->other_system = 0;
		}
		r->state = (uint8) reasons[to].state;
		r->reason = (uint8) to;
		return true;
	}
	return false;
}

/* Whether an event would change a record: a row of the table acts in it. */
bool
node_acts(const NodeRecord *r, NodeEvent ev)
{
	NodeRecord	copy = *r;

	return node_apply(&copy, ev, REASON_NONE);
}

/*
 * Whether the record names the worker id in force (ready, held back for
 * another reason than what its worker id is), rather than the one it is
 * held under: a copy's source's, or the primary's a standby gave up.
 */
bool
node_follows_worker(const NodeRecord *r)
{
	return !(R(r->reason) & (COPY | R(REASON_WORKER_RETIRED)));
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
	for (int c = 0; c < CHECK_ALL; c++)
		pg_atomic_init_u32(&node_shared->found[c], REASON_NONE);
	pg_atomic_init_u32(&node_shared->configured, (uint32) WORKER_ID_UNSET);
	pg_atomic_init_u64(&node_shared->configured_at, 0);
	pg_atomic_init_u32(&node_shared->published, (uint32) WORKER_ID_UNSET);
	pg_atomic_init_u64(&node_shared->published_at, 0);
	pg_atomic_init_u32(&node_shared->registry_found, REASON_NONE);
}

/*
 * What was found for a check (the start, the keeper, a call), or NONE now.
 * With the lock held, or in the postmaster at start.
 */
void
node_find(NodeCheck check, NodeReason r)
{
	Assert(check != CHECK_HOLD && check != CHECK_RECOVERY && check != CHECK_WORKER);
	pg_atomic_write_u32(&node_shared->found[check], (uint32) r);
}

/* ... read without the lock: each check is one word. */
NodeReason
node_found(NodeCheck check)
{
	return (NodeReason) pg_atomic_read_u32(&node_shared->found[check]);
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

/* The worker id the configuration gives now, or WORKER_ID_UNSET. */
int
node_configured_worker(void)
{
	int			w = (int) (int32) pg_atomic_read_u32(&node_shared->configured);

	if (w == WORKER_ID_REJECTED)
		return WORKER_ID_UNSET;
	/* none set by hand: the registry's lease, kept in the record */
	if (w == WORKER_ID_UNSET && settings_registry_named())
	{
		bool		lock = IsUnderPostmaster && !LWLockHeldByMe(node_shared->lock);
		int32		leased;

		if (lock)
			LWLockAcquire(node_shared->lock, LW_SHARED);
		leased = node_shared->rec.leased;
		if (lock)
			LWLockRelease(node_shared->lock);
		if (leased > 0)
			w = leased - 1;
	}
	return w;
}

/*
 * Where the worker id in force comes from, as snowflake_status shows it:
 * "configured" (snowflake.worker_id), "registry" (the lease the record
 * keeps), or NULL (none).
 */
const char *
node_worker_source(void)
{
	int			w = (int) (int32) pg_atomic_read_u32(&node_shared->configured);

	if (w >= 0)
		return "configured";
	return node_configured_worker() >= 0 ? "registry" : NULL;
}

/*
 * The worker-id check of a node that takes its worker id from the
 * registry: a lease in its record stands until the registry says another
 * lease holds it now (lease_lost); without one, lease_taken where another
 * server of this system holds the system's lease, else no_lease.
 */
static NodeReason
registry_verdict(const NodeRecord *rec, NodeShared *n)
{
	NodeReason	said = (NodeReason) pg_atomic_read_u32(&n->registry_found);

	if (rec->leased > 0)
		return said == REASON_LEASE_LOST || rec->lease_lost ?
			REASON_LEASE_LOST : REASON_NONE;
	return said == REASON_LEASE_TAKEN ? REASON_LEASE_TAKEN : REASON_NO_LEASE;
}

/*
 * Whether the lease the record keeps is one the registry gives another
 * server now (lease_lost): its worker id is not published.  With the lock
 * held.
 */
bool
node_lease_lost(void)
{
	return (int) (int32) pg_atomic_read_u32(&node_shared->configured) == WORKER_ID_UNSET &&
		settings_registry_named() && node_shared->rec.leased > 0 &&
		registry_verdict(&node_shared->rec, node_shared) == REASON_LEASE_LOST;
}

/*
 * Whether a call of this process may generate now, and if not, why: the
 * reason of the first check before upto that holds (rec: the record, with
 * the worker id configured now applied).  REASON_FLOOR_PENDING: calls wait
 * for recovery's floor, then generate.  The one place that decides it: the
 * generator refuses for it (and then for the clock's verdict of the call,
 * generator.c), the status view shows it, and a step that mends one check
 * (the repair mends the mark) asks only those before it.  With the lock
 * held (shared suffices), or in the postmaster for the checks before
 * recovery.
 */
NodeReason
node_verdict_before(const NodeRecord *rec, NodeCheck upto)
{
	NodeShared *n = node_shared;

	if (n == NULL)
		return REASON_NOT_PRELOADED;
	for (NodeCheck c = CHECK_CONFIG; c < upto; c++)
	{
		NodeReason	r = node_found(c);

		if (c == CHECK_CONFIG && r == REASON_NONE && !IsPostmasterEnvironment)
			r = REASON_SINGLE_USER;
		else if (c == CHECK_HOLD)
			r = (NodeReason) rec->reason;
		else if (c == CHECK_RECOVERY)
			r = IsUnderPostmaster && RecoveryInProgress() ? REASON_IN_RECOVERY : REASON_NONE;
		else if (c == CHECK_WORKER)
		{
			int			w = (int) (int32) pg_atomic_read_u32(&n->configured);

			r = w == WORKER_ID_REJECTED ? REASON_WORKER_ID_REJECTED :
				w != WORKER_ID_UNSET ? REASON_NONE :
				settings_registry_named() ? registry_verdict(rec, n) :
				rec->worker != WORKER_ID_UNSET ? REASON_WORKER_ID_UNSET : REASON_NO_WORKER_ID;
		}
		if (r != REASON_NONE)
			return r;
	}
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

/* The settings let the mark be read, replayed and written. */
bool
node_mark_readable(void)
{
	return node_shared != NULL && node_found(CHECK_CONFIG) == REASON_NONE;
}

/* ... and the mark can be trusted: the keeper may reserve above it. */
bool
node_mark_trusted(void)
{
	return node_mark_readable() && node_found(CHECK_MARK) == REASON_NONE &&
		node_found(CHECK_FILE) != REASON_STATE_UNREADABLE;
}

/* Did another system claim this worker id? */
bool
node_claimed(const NodeRecord *r, int worker)
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

void
node_add_claim(NodeRecord *r, int worker)
{
	if (worker < 0 || node_claimed(r, worker))
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

void
node_drop_claim(NodeRecord *r, int worker)
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

/* Is the worker id in a list the record keeps of them, the latest first? */
static bool
listed(const int32 *list, uint32 n, uint32 max, int worker)
{
	for (uint32 i = 0; i < Min(n, max); i++)
		if (list[i] == worker)
			return true;
	return false;
}

/*
 * Such a list with first (unless none) first and drop left out, the
 * oldest let go past max; returns its length.
 */
static uint32
put_first(int32 *list, uint32 n, uint32 max, int first, int drop)
{
	int32		keep[Max(OWN_MAX, RETIRED_MAX)];
	uint32		k = 0;

	if (first != WORKER_ID_UNSET)
		keep[k++] = first;
	for (uint32 i = 0; i < Min(n, max) && k < max; i++)
		if (list[i] != first && list[i] != drop)
			keep[k++] = list[i];
	memcpy(list, keep, k * sizeof(int32));
	return k;
}

/* Did this system claim the worker id (as far as the record keeps)? */
bool
node_own_claimed(const NodeRecord *r, int worker)
{
	return listed(r->own, r->nown, OWN_MAX, worker);
}

/* This system claimed the worker id: kept first, the oldest let go. */
void
node_add_own_claim(NodeRecord *r, int worker)
{
	r->nown = put_first(r->own, r->nown, OWN_MAX, worker, worker);
}

/* A claim of this system taken back (its commit failed). */
void
node_drop_own_claim(NodeRecord *r, int worker)
{
	r->nown = put_first(r->own, r->nown, OWN_MAX, WORKER_ID_UNSET, worker);
}

/* Did this node give the worker id up for another? */
bool
node_retired(const NodeRecord *r, int worker)
{
	return listed(r->retired, r->nretired, RETIRED_MAX, worker);
}

/* The node moves from its worker id to worker: the old one is given up. */
void
node_move_worker(NodeRecord *r, int worker)
{
	r->flags &= ~RECORD_WORKER_REPLAYED;
	if (r->worker == worker)
		return;
	r->nretired = (uint16) put_first(r->retired, r->nretired, RETIRED_MAX, r->worker, worker);
	r->worker = worker;
}

/*
 * Read the record from the files in dir (NULL: this data directory): the
 * node's part from the file that changed it last, the mark from
 * snowflake.state.  *files: what reading each file gave, for the caller to
 * judge.  Where one file says the node is held and the other not (a change
 * whose second write failed, or a crash between the two), the hold: a
 * release is made durable in both before it counts.
 */
void
node_read(const char *dir, NodeRecord *rec, RecordFiles *files)
{
	char		spath[MAXPGPATH];
	char		ipath[MAXPGPATH];
	NodeRecord	s;
	NodeRecord	i;
	bool		snode;
	bool		inode;

	snprintf(spath, sizeof(spath), "%s%s%s", dir ? dir : "", dir ? "/" : "", SNOWFLAKE_STATE_FILE);
	snprintf(ipath, sizeof(ipath), "%s%s%s", dir ? dir : "", dir ? "/" : "", SNOWFLAKE_IDENTITY_FILE);
	memset(files, 0, sizeof(*files));
	files->state = persist_read_file(spath, &s, sizeof(s), &files->state_writes,
									 &files->state_fault);
	files->identity = persist_read_file(ipath, &i, sizeof(i), &files->identity_writes,
										&files->identity_fault);
	snode = files->state == MARK_OK && (s.flags & RECORD_NODE);
	inode = files->identity == MARK_OK && (i.flags & RECORD_NODE);

	memset(rec, 0, sizeof(*rec));
	if (files->state == MARK_OK)
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
	if (inode && (!snode ||
				  ((s.state == NODE_READY) == (i.state == NODE_READY) ?
				   i.changes > s.changes : i.state != NODE_READY)))
		memcpy((char *) rec + NODE_PART, (char *) &i + NODE_PART,
			   sizeof(*rec) - NODE_PART);
	files->found = snode || inode;
}

/*
 * Write rec to the files asked for (the state file at every change;
 * snowflake.identity too when the node's part changes, and the node's part
 * counts a change), with the files' write counters given.  A file the start
 * could not read is never written (it is left for the operator to look
 * at), nor a damaged state file but by a repair, which clears the mark's
 * trouble first; pg_upgrade's servers write nothing.  Returns false if a
 * write failed (reported at elevel).
 */
static bool
write_files(NodeRecord *rec, int files, int elevel, uint64 *swrites,
			uint64 *iwrites)
{
	if (node_found(CHECK_CONFIG) == REASON_BINARY_UPGRADE)
		return false;
	if (node_found(CHECK_FILE) == REASON_STATE_UNREADABLE ||
		node_found(CHECK_MARK) == REASON_STATE_DAMAGED)
		files &= ~SAVE_STATE;
	if (node_found(CHECK_FILE) == REASON_RECORD_UNREADABLE)
		files &= ~SAVE_IDENTITY;
	if (files & SAVE_IDENTITY)
		rec->changes++;
	rec->flags |= RECORD_NODE;
	if ((files & SAVE_STATE) &&
		!persist_write_file(SNOWFLAKE_STATE_FILE, rec, sizeof(*rec), swrites, elevel))
		return false;
	if ((files & SAVE_IDENTITY) &&
		!persist_write_file(SNOWFLAKE_IDENTITY_FILE, rec, sizeof(*rec), iwrites, elevel))
		return false;
	return true;
}

/*
 * Make next the node's record: write it to the files asked for, and only
 * then put it in shared memory.  Returns false, having changed nothing, if
 * a write failed (reported at elevel).  With the lock held.
 */
bool
node_save(const NodeRecord *next, int files, int elevel)
{
	NodeShared *n = node_shared;
	NodeRecord	rec = *next;

	if (!write_files(&rec, files, elevel, &n->state_writes, &n->identity_writes))
		return false;
	n->rec = rec;
	return true;
}

/*
 * The state file's last write, at a clean shutdown, by the postmaster once
 * every other process has exited: nothing is written to shared memory.
 */
bool
node_save_at_exit(const NodeRecord *last, int elevel)
{
	NodeRecord	rec = *last;
	uint64		swrites = node_shared->state_writes;
	uint64		iwrites = node_shared->identity_writes;

	return write_files(&rec, SAVE_STATE, elevel, &swrites, &iwrites);
}

/*
 * The words every refusal shares with others of its kind, and the words of
 * each refusal (refusal_words()): literal formats, so that the compiler
 * checks their arguments and the catalogue holds them (make
 * po/snowflake.pot).  The values they name are RefuseArgs', in order: the
 * message's, the detail's, the hint's.  Called inside node_refuse()'s
 * ereport, as PostgreSQL's own errdetail_relkind_not_supported() is.
 */
static void
copy_message(const RefuseArgs *a)
{
	errmsg("snowflake data directory is a copy of the node with worker id %s", a->msg[0]);
}

static void
copy_hint(void)
{
	errhint("Give this server a worker id of its own in snowflake.worker_id and reload, or, if it replaces the node it was copied from and that node stopped for good, run SELECT snowflake.snowflake_confirm_node(stopped_at => '...') as a superuser with the time it stopped.");
}

static void
layout_message(const RefuseArgs *a)
{
	errmsg("snowflake layout \"%s\" cannot continue above the IDs issued under layout \"%s\"",
		   a->msg[0], a->msg[1]);
}

static void
clock_detail(const RefuseArgs *a)
{
	errdetail("The last snowflake ID carries the time %s and the clock reads %s; IDs can be issued again when the clock reaches %s.",
			  a->detail[0], a->detail[1], a->detail[2]);
}

static int
refusal_words(NodeReason r, const RefuseArgs *a)
{
	switch (r)
	{
			/* held_copy */
		case REASON_BACKUP_LABEL:
			copy_message(a);
			errdetail("The server was started from a base backup (backup_label) without standby.signal.");
			copy_hint();
			break;
		case REASON_RECOVERY_SIGNAL:
			copy_message(a);
			errdetail("The server was started with recovery.signal and without standby.signal (a restore from an archive, or to a point in time); its WAL may end before the last IDs the node issued.");
			copy_hint();
			break;
		case REASON_RECOVERY_TARGET:
			copy_message(a);
			errdetail("The server was started with standby.signal and a recovery target (a recovery_target* setting), as a point-in-time restore and pg_createsubscriber do: it stops at the target rather than follow its primary on, and its WAL may end before the last IDs the node issued.");
			copy_hint();
			break;
		case REASON_ARCHIVE_STANDBY:
			copy_message(a);
			errdetail("The server was started with standby.signal and without primary_conninfo: its WAL came from an archive alone, which may end before the last IDs the node issued.");
			copy_hint();
			break;
		case REASON_OTHER_DIRECTORY:
			copy_message(a);
			errdetail("It is not the directory that last ran under this worker id: it was copied, or moved to another file system (then above => 0 confirms it).");
			copy_hint();
			break;
		case REASON_OTHER_SYSTEM:
			copy_message(a);
			errdetail("Its files snowflake.state and snowflake.identity name another system.");
			copy_hint();
			break;
		case REASON_RECORD_DAMAGED:
			copy_message(a);
			errdetail("Its file snowflake.identity is damaged, so the node cannot tell whether this data directory is a copy.");
			copy_hint();
			break;
		case REASON_FILES_REMOVED:
			errmsg("snowflake data directory may be a copy of the node with worker id %s", a->msg[0]);
			errdetail("Its files snowflake.state and snowflake.identity are gone, and the extension ran here before (replication origin \"%s\"): it may be a copy of a server that still runs under worker id %s, and it cannot know how far that node's IDs went.",
					  SNOWFLAKE_NODE_ORIGIN, a->detail[0]);
			errhint("Give this server a worker id no other node uses in snowflake.worker_id and reload. Only if it is that node itself and no copy of it runs, run SELECT snowflake.snowflake_confirm_node(stopped_at => '...') as a superuser with the time it stopped.");
			break;

			/* held_floor */
		case REASON_NEVER_INSTALLED:
		case REASON_NEW_AS_STANDBY:
			errmsg("snowflake does not know which IDs were issued before this data directory");
			if (r == REASON_NEVER_INSTALLED)
			{
				errdetail("It has neither snowflake.state nor snowflake.identity, and no install script of the extension ran in this data directory (no replication origin \"%s\").",
						  SNOWFLAKE_NODE_ORIGIN);
				errhint("Give it a worker id of its own if its catalog came from a node that may still run; then, as a new node, CREATE EXTENSION snowflake in a database releases it. If it replaces a node that stopped for good, run SELECT snowflake.snowflake_confirm_node(stopped_at => '...') as a superuser with the time that node stopped instead.");
			}
			else
			{
				errdetail("It started as a standby with neither snowflake.state nor snowflake.identity, and has replayed no record of which node its primary is (a primary running the library logs one as it starts and at every change).");
				errhint("If the primary runs the library, restart it: this standby learns from the record it logs then. If the primary is lost, run SELECT snowflake.snowflake_confirm_node(above => N) on this server once promoted, as a superuser, with N the highest ID the primary issued (0 if none).");
			}
			break;
		case REASON_UPGRADED:
			errmsg("snowflake does not know which IDs the cluster issued before pg_upgrade");
			errdetail("pg_upgrade ran on this data directory and does not carry snowflake.state over; the old cluster's IDs may carry times ahead of this server's clock.");
			errhint("As a superuser, run SELECT snowflake.snowflake_confirm_node(old_data_directory => '...') naming the old cluster's data directory.");
			break;

			/* held_claimed */
		case REASON_CLAIMED_ELSEWHERE:
			errmsg("snowflake worker id %s is claimed by another system", a->msg[0]);
			errdetail("A claim of it by system %s arrived in snowflake_workers (a restored dump, say); this server could repeat the IDs that system issued.",
					  a->detail[0]);
			errhint("Give this server a worker id of its own in snowflake.worker_id and reload, or, if it continues that system's node, run SELECT snowflake.snowflake_confirm_node(above => N) as a superuser with N the highest ID that system issued.");
			break;
		case REASON_WORKER_RETIRED:
			errmsg("snowflake worker id %s was given up by this node", a->msg[0]);
			errdetail("This server followed a primary that moved from worker id %s to another; its own snowflake.worker_id still says the old one.",
					  a->detail[0]);
			errhint("Set snowflake.worker_id = %s, the primary's, and reload.", a->hint[0]);
			break;
		case REASON_UNCLAIMED:
			errmsg("snowflake worker id %s is not claimed by this system", a->msg[0]);
			errdetail("This system claimed worker ids in snowflake_workers (%s among them), and runs only under worker ids it claimed, so that no two systems issue IDs under one.",
					  a->detail[0]);
			errhint("As a superuser, claim it with SELECT * FROM snowflake.snowflake_claim_worker() (in a mesh, snowflake-mesh claims it through the mesh), or go back to a worker id this system claimed and reload.");
			break;

			/* held_file */
		case REASON_RECORD_UNREADABLE:
		case REASON_STATE_UNREADABLE:
			errmsg("could not read snowflake file \"%s\"", a->msg[0]);
			errdetail("It could not be opened or read at server start (the server log says why); the node cannot tell what it holds, and leaves it as it is.");
			errhint("Make it readable by the server's account and restart the server.");
			break;

			/* broken */
		case REASON_STATE_DAMAGED:
			errmsg("snowflake state file \"%s\" is damaged", SNOWFLAKE_STATE_FILE);
			errdetail("The file holds the highest ID this node may have issued; without it a restart with the clock set back could repeat IDs.");
			errhint("As a superuser, run SELECT snowflake.snowflake_repair_state(above => N) with N the largest ID your tables hold.");
			break;
		case REASON_STATE_BEYOND_LAYOUT:
			layout_message(a);
			errdetail("The highest ID the node may have issued, %s, is beyond the largest ID of layout \"%s\".",
					  a->detail[0], a->detail[1]);
			errhint("Go back to snowflake.layout = '%s' and restart, or choose a layout with room above that ID.",
					a->hint[0]);
			break;

			/* disabled */
		case REASON_SETTINGS_REJECTED:
			errmsg("snowflake setting \"%s\" was rejected at server start", a->msg[0]);
			errdetail("Its value in the configuration, '%s', is not valid; PostgreSQL then leaves the setting at its default, which the node does not take for the value meant.",
					  a->detail[0]);
			errhint("Fix it in postgresql.conf (the server log says why it was rejected) and restart the server.");
			break;
		case REASON_SETTING_UNKNOWN:
			errmsg("\"%s\" is not a snowflake setting", a->msg[0]);
			errdetail("The configuration names it; a misspelt name leaves the setting meant at its default, which the node does not take for it.");
			errhint("Correct or remove it in postgresql.conf and restart the server.");
			break;
		case REASON_LAYOUT_REJECTED:
			errmsg("snowflake.layout = '%s' was rejected at server start", a->msg[0]);
			errdetail("No layout is in force: PostgreSQL leaves the setting at its default, which the node does not take for the layout meant.");
			errhint("Fix snowflake.layout in postgresql.conf (the server log lists the values it takes) and restart the server.");
			break;
		case REASON_LAYOUT_UNUSABLE:
			errmsg("snowflake layout \"%s\" cannot be used", a->msg[0]);
			/* what layout.c found, in words of its own */
			errdetail("%s", a->detail[0]);
			errhint("Fix the snowflake.layout or snowflake.custom_* settings in postgresql.conf and restart the server.");
			break;
		case REASON_WORKER_ID_REJECTED:
			errmsg("snowflake.worker_id = '%s' was rejected", a->msg[0]);
			errdetail("Worker ids run from 0 to %s in the \"%s\" layout; until a valid one is set, the node has none.",
					  a->detail[0], a->detail[1]);
			errhint("Set snowflake.worker_id in postgresql.conf to a worker id in that range, and reload.");
			break;
		case REASON_BINARY_UPGRADE:
			errmsg("cannot generate snowflake IDs in binary-upgrade mode");
			errdetail("pg_upgrade runs the server in this mode; the state file is left as it is.");
			errhint("Generate IDs once pg_upgrade has finished and the server runs normally.");
			break;
		case REASON_NOT_PRELOADED:
			errmsg("snowflake must be loaded via \"shared_preload_libraries\"");
			errdetail("The generator keeps its state in shared memory, which is set up at server start.");
			errhint("Add 'snowflake' to shared_preload_libraries in postgresql.conf and restart the server.");
			break;
		case REASON_SINGLE_USER:
			errmsg("cannot generate snowflake IDs in single-user mode");
			errdetail("Reservations are made durable by the background worker \"snowflake keeper\", which does not run in single-user mode.");
			errhint("Start the server normally to generate IDs.");
			break;
		case REASON_NO_WORKER_ID:
		case REASON_WORKER_ID_UNSET:
			errmsg("snowflake.worker_id is not set");
			if (r == REASON_NO_WORKER_ID)
			{
				errdetail("Every node that generates IDs needs a worker id of its own; two nodes with the same one issue the same IDs.");
				errhint("Set snowflake.worker_id in postgresql.conf to a value no other node uses, and reload.");
			}
			else
			{
				errdetail("This node ran as worker id %s (its own, or its primary's before a failover), and its configuration gives none now.",
						  a->detail[0]);
				errhint("Set snowflake.worker_id = %s in postgresql.conf and reload, as this node's IDs carry it; only if another node runs under it now, choose one no other node uses.",
						a->hint[0]);
			}
			break;

		case REASON_NO_LEASE:
			errmsg("snowflake has no worker id from registry \"%s\"", a->msg[0]);
			if (a->detail[0] != NULL)
				errdetail("snowflake.worker_id is not set, and the keeper could not lease a worker id from the registry: %s",
						  a->detail[0]);
			else
				errdetail("snowflake.worker_id is not set, and the keeper has not leased a worker id from the registry yet.");
			errhint("Make the registry reachable and able to lease (one with no free worker id needs one released with snowflake_registry_release()); the keeper tries again by itself. Or set snowflake.worker_id and reload.");
			break;

		case REASON_LEASE_LOST:
			errmsg("snowflake worker id %s is no longer this server's lease in registry \"%s\"",
				   a->msg[0], a->msg[1]);
			errdetail("This server holds the lease in its own record, and the registry no longer does: it lost the lease (restored from an older backup, or failed over to a standby without it) or a superuser released it, and leased again what the registry's words name. The registry said: %s",
					  a->detail[0]);
			errhint("Set snowflake.worker_id on this server to a worker id no other server uses, and reload; or, once no server runs under the lease the registry's words name, release it with snowflake_registry_release(), giving the floor its IDs reached (the keeper asks again by itself).");
			break;

		case REASON_LEASE_TAKEN:
			errmsg("snowflake has no worker id from registry \"%s\"", a->msg[0]);
			errdetail("Another server of this system identifier holds its lease: this server is a copy or a restore of it, or both were made from one data directory image.");
			errhint("If the server that holds the lease is gone for good, with every standby of it, and this one is its restore, release the holder's worker id on the registry with snowflake_registry_release(), giving the floor its IDs reached; otherwise set snowflake.worker_id, or initdb this server afresh.");
			break;

			/* standby */
		case REASON_IN_RECOVERY:
			errmsg("cannot generate snowflake IDs during recovery");
			errdetail("A standby shares the worker id of its primary; IDs it issued would collide.");
			errhint("Generate IDs on the primary, or promote this standby first.");
			break;

			/* blocked */
		case REASON_LAYOUT_BELOW:
			layout_message(a);
			errdetail("The last ID, read in the new layout, carries the time %s; new IDs must be greater, and the clock reads %s.",
					  a->detail[0], a->detail[1]);
			errhint("Go back to snowflake.layout = '%s', or choose a layout whose IDs at this time are greater than the last ID.",
					a->hint[0]);
			break;
		case REASON_CLOCK_BACK:
		case REASON_CLOCK_BACK_LONG:
		case REASON_CLOCK_BACK_FAR:
			errmsg("system clock moved backwards by %s ms", a->msg[0]);
			clock_detail(a);
			if (r == REASON_CLOCK_BACK)
				errhint("\"snowflake.max_clock_backward_ms\" (%s ms) limits waiting for the clock and \"snowflake.max_run_ahead_ms\" (%s ms) limits issuing IDs ahead of it; raise either to keep generating.",
						a->hint[0], a->hint[1]);
			else if (r == REASON_CLOCK_BACK_LONG)
				errhint("\"snowflake.max_run_ahead_ms\" (%s ms) limits issuing IDs ahead of the clock; raise it to keep generating (a call waits for the clock at most an hour).",
						a->hint[0]);
			else
				errhint("The last ID is further ahead of the clock than snowflake.max_run_ahead_ms may let the node run (one day): set the clock right, or wait until the time in the detail.");
			break;
		case REASON_AHEAD_OF_CLOCK:
		case REASON_AHEAD_FAR:
			errmsg("snowflake generator is %s ms ahead of the system clock", a->msg[0]);
			clock_detail(a);
			if (r == REASON_AHEAD_OF_CLOCK)
				errhint("\"snowflake.max_run_ahead_ms\" (%s ms) limits issuing IDs ahead of the clock; raise it to keep generating.",
						a->hint[0]);
			else
				errhint("The last ID is further ahead of the clock than snowflake.max_run_ahead_ms may let the node run (one day): wait until the time in the detail, or set the clock right.");
			break;
		case REASON_TICK_USED_UP:
		case REASON_BLOCK_TOO_LARGE:
			if (r == REASON_TICK_USED_UP)
				errmsg("snowflake layout \"%s\" has no ID left in the current tick", a->msg[0]);
			else
				errmsg("snowflake layout \"%s\" has fewer than %s IDs left in the current tick for a block",
					   a->msg[0], a->msg[1]);
			errdetail("The next tick begins at %s, %s ms from now; a call waits at most 1000 ms for the clock.",
					  a->detail[0], a->detail[1]);
			errhint("\"snowflake.max_run_ahead_ms\" (%s ms) limits issuing IDs of the next tick ahead of the clock; raise it, or use a layout with a shorter tick or more sequence bits.",
					a->hint[0]);
			break;
		case REASON_KEEPER_LATE:
		case REASON_KEEPER_ORIGIN:
			errmsg("snowflake reservation was not renewed within 5000 ms");
			if (r == REASON_KEEPER_LATE)
			{
				errdetail("The background worker \"snowflake keeper\" makes every reservation durable, in snowflake.state and in WAL, before IDs may use it.");
				errhint("Check that it runs (pg_stat_activity, backend_type 'snowflake keeper'), and the server log for why it cannot write snowflake.state or log in WAL.");
			}
			else
			{
				errdetail("The floor after recovery needs replication origin \"snowflake_high_water_mark\", through which version 1.1 logged its reservations, and the worker that reads it failed.");
				errhint("The server log says why; the keeper starts that worker again after ten seconds.");
			}
			break;
		case REASON_CLOCK_BEFORE_EPOCH:
			errmsg("system clock reads %s, before the epoch of the snowflake layout \"%s\"",
				   a->msg[0], a->msg[1]);
			errdetail("IDs of this layout carry times from its epoch, %s, on.", a->detail[0]);
			errhint("Set the system clock right.");
			break;
		case REASON_LAYOUT_ENDED:
			errmsg("snowflake layout \"%s\" has run out of time bits", a->msg[0]);
			errdetail("Its last representable time is %s.", a->detail[0]);
			errhint("Move to a layout with a later end of life.");
			break;

			/* DecimalId's generator */
		case REASON_DECIMAL_RANGE:
			errmsg("DecimalId generator range is empty");
			errdetail("snowflake.decimal_generator_min (%s) is above snowflake.decimal_generator_max (%s).",
					  a->detail[0], a->detail[1]);
			errhint("Fix them in postgresql.conf and restart the server.");
			break;
		case REASON_DECIMAL_FILE:
			errmsg("DecimalId state file \"%s\" cannot be used", a->msg[0]);
			errdetail("At server start it could not be read, or it held no valid generator id; the server log says which.");
			errhint("Restore it from a backup, or raise snowflake.decimal_generator_min above every generator id this node took, remove the file, and restart the server.");
			break;
		case REASON_DECIMAL_USED_UP:
			errmsg("DecimalId generator has no generator id left");
			errdetail("Every generator id from snowflake.decimal_generator_min to snowflake.decimal_generator_max (%s to %s) was taken, or the next could not be recorded in \"%s\" (the server log says why).",
					  a->detail[0], a->detail[1], a->detail[2]);
			errhint("Widen the range of snowflake.decimal_generator_min and snowflake.decimal_generator_max in postgresql.conf, or make the data directory writable, and restart the server.");
			break;

		case REASON_NONE:
		case REASON_FLOOR_PENDING:
		case NUM_REASONS:
			break;
	}
	return 0;
}

/*
 * Refuse a call, for a reason, with the values its words name.  Every
 * refusal the node makes is here: its SQLSTATE from the table above, its
 * words from refusal_words().
 */
void
node_refuse(NodeReason r, const RefuseArgs *a)
{
	static const RefuseArgs none = {{0}};

	if (a == NULL)
		a = &none;
	if (r <= REASON_NONE || r >= NUM_REASONS || reasons[r].sqlstate == 0)
		elog(ERROR, "snowflake refused for unknown reason %d", (int) r);
	ereport(ERROR,
			(errcode(reasons[r].sqlstate),
			 refusal_words(r, a)));
}

/* A number, as the words of a refusal name it. */
const char *
node_num(int64 v)
{
	return psprintf(INT64_FORMAT, v);
}

/*
 * Refuse for a reason of the node's verdict, naming what was found: the
 * worker id it is held under (for worker_retired, the one given up and the
 * primary's), the file it cannot read, the layouts of a mark beyond the
 * layout in force, the setting rejected.  The record is read under the
 * lock (which a repair calling here holds already), whole.
 */
void
node_refuse_state(NodeReason r)
{
	NodeShared *n = node_shared;
	const SettingsFound *f = settings_found();
	const char *layout = snowflake_layout->name;
	bool		held;
	NodeRecord	rec;
	int64		trouble_id;
	char		trouble_layout[NAMEDATALEN];
	char		registry_error[sizeof(n->registry_error)];
	const char *worker;
	RefuseArgs	a = {{0}};

	if (n == NULL)
		node_refuse(r, NULL);
	held = LWLockHeldByMe(n->lock);
	if (!held)
		LWLockAcquire(n->lock, LW_SHARED);
	rec = n->rec;
	trouble_id = n->trouble_id;
	strlcpy(trouble_layout, n->trouble_layout, NAMEDATALEN);
	strlcpy(registry_error, n->registry_error, sizeof(registry_error));
	if (!held)
		LWLockRelease(n->lock);
	worker = rec.worker == WORKER_ID_UNSET ? "(unknown)" : node_num(rec.worker);
	a.msg[0] = worker;

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
	else if (r == REASON_FILES_REMOVED)
		a.detail[0] = worker;
	else if (r == REASON_WORKER_ID_UNSET)
		a = (RefuseArgs) {{0}, {worker}, {worker}};
	else if (r == REASON_NO_LEASE)
		a = (RefuseArgs) {{registry_display()}, {registry_error[0] ? registry_error : NULL}};
	else if (r == REASON_LEASE_TAKEN)
		a.msg[0] = registry_display();
	else if (r == REASON_LEASE_LOST)
		a = (RefuseArgs) {{node_num(rec.leased - 1), registry_display()},
		{registry_error[0] ? registry_error : "(not known since this server started)"}};
	else if (r == REASON_UNCLAIMED)
		a.detail[0] = rec.nown > 0 ? node_num(rec.own[0]) : "(unknown)";
	else if (r == REASON_CLAIMED_ELSEWHERE)
		a.detail[0] = rec.other_system != 0 ?
			psprintf(UINT64_FORMAT, rec.other_system) : "unknown";
	else if (r == REASON_RECORD_UNREADABLE)
		a.msg[0] = SNOWFLAKE_IDENTITY_FILE;
	else if (r == REASON_STATE_UNREADABLE)
		a.msg[0] = SNOWFLAKE_STATE_FILE;
	else if (r == REASON_STATE_BEYOND_LAYOUT)
		a = (RefuseArgs) {{layout, pstrdup(trouble_layout)},
		{node_num(trouble_id), layout}, {pstrdup(trouble_layout)}};
	node_refuse(r, &a);
}

/* The names of the reasons in a set of them, for snowflake_node_model(). */
static Datum
reason_set(uint64 set)
{
	ArrayBuildState *astate = NULL;

	for (int r = 0; r < NUM_REASONS; r++)
		if (set & R(r))
			astate = accumArrayResult(astate,
									  CStringGetTextDatum(r == REASON_NONE ? "ready" : reasons[r].name),
									  false, TEXTOID, CurrentMemoryContext);
	return makeArrayResult(astate, CurrentMemoryContext);
}

/*
 * snowflake_node_model(): this file's tables, one row per reason (kind
 * 'reason': its state and SQLSTATE) and per transition (kind 'transition':
 * the event, the reasons it acts in, the state and reason it leads to,
 * 'found' and 'copy_reason' standing for what the event found and the
 * reason a released copy was held for), so that a test compares them with
 * DESIGN.md's.
 */
Datum
snowflake_node_model(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	InitMaterializedSRF(fcinfo, 0);
	for (int r = 1; r < NUM_REASONS; r++)
	{
		Datum		values[6] = {0};
		bool		nulls[6] = {false, false, true, false, false, false};

		values[0] = CStringGetTextDatum("reason");
		values[1] = CStringGetTextDatum(reasons[r].name);
		values[3] = CStringGetTextDatum(state_names[reasons[r].state]);
		values[4] = CStringGetTextDatum(reasons[r].name);
		nulls[5] = reasons[r].sqlstate == 0;
		if (!nulls[5])
			values[5] = CStringGetTextDatum(unpack_sql_state(reasons[r].sqlstate));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	for (int i = 0; i < (int) lengthof(transitions); i++)
	{
		const Transition *t = &transitions[i];
		Datum		values[6] = {0};
		bool		nulls[6] = {false, false, false, false, false, true};
		const char *to = t->to == TO_FOUND ? "found" : t->to == TO_COPY_REASON ? "copy_reason" :
			t->to == REASON_NONE ? NULL : reasons[t->to].name;

		values[0] = CStringGetTextDatum("transition");
		values[1] = CStringGetTextDatum(event_names[t->event]);
		values[2] = reason_set(t->from);
		values[3] = CStringGetTextDatum(t->to_state == TO_FOUND ? "found" : state_names[t->to_state]);
		nulls[4] = to == NULL;
		if (to != NULL)
			values[4] = CStringGetTextDatum(to);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
