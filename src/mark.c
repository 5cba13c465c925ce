/*-------------------------------------------------------------------------
 *
 * mark.c
 *	  The node's generator state in shared memory and the durable
 *	  high-water mark that bounds it: loading and validating the mark at
 *	  server start, the floor after recovery, the reservations that bound
 *	  the IDs a node may issue, the worker id in force, the operator's
 *	  repair, and the exact record at shutdown.
 *
 * No ID above the reservation is issued.  A reservation reaches a window
 * of ID time ahead of the IDs being issued (never of the clock alone), and
 * only the keeper makes one: it logs it in WAL (wal.c), then writes it to
 * the state file (persist.c), before any backend may use it.  Backends ask
 * for one when they come near the end of the current one, and wait for it
 * (interruptibly, and for a bounded time) only when they reach that end.
 *
 * Replaying a reservation (crash recovery, a standby, a restore) raises the
 * state to it and writes it to the state file at once, so a promoted
 * standby, a restored backup or a crashed node continues above the last
 * reservation of the server whose WAL it replayed: every ID of that server
 * that reached it was issued under a reservation logged before the commit
 * that carried it.  Floors come only from reservations, never from a clock
 * reading: a time the node never issued IDs at bounds nothing.  The one
 * other floor is the replication origin through which 1.1 logged its
 * reservations, read once, when recovery ends.
 *
 * Nothing computed under layout or settings that cannot be trusted is
 * written: such a node does not read the mark in its layout, and keeps
 * only the reservations it replays, as the records give them.
 *
 * The mark is part of the node's record (node.c), written under its lock:
 * why the mark cannot be trusted, and whether recovery's floor is still to
 * be applied, are facts node.c's state is made of.
 *
 * This file uses layouts, settings, node.c and wal.c; generator.c, the
 * keeper, identity.c and the SQL functions use it, never the other way
 * round.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "access/twophase.h"
#include "access/xlog.h"
#include "catalog/pg_control.h"
#include "common/controldata_utils.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"

#include "clock.h"
#include "compat.h"
#include "messages.h"
#include "node.h"
#include "settings.h"
#include "mark.h"
#include "wal.h"

GeneratorShared *snowflake_shared = NULL;

static uint32 wait_event_reserve = 0;

static void mark_shutdown(int code, Datum arg);

static int
slot_count(void)
{
	return MaxBackends + NUM_AUXILIARY_PROCS + max_prepared_xacts;
}

Size
mark_shmem_size(void)
{
	return add_size(offsetof(GeneratorShared, slots),
					mul_size(slot_count(), sizeof(CounterSlot)));
}

/* How far ahead of the last ID a reservation reaches: a second of ID time. */
static int64
window_ticks(const SnowflakeLayout *l)
{
	return Max(1, SNOWFLAKE_WINDOW_MS / l->tick_ms);
}

/* The largest ID of a tick, the end of the layout if it is beyond it. */
static int64
tick_ceiling(const SnowflakeLayout *l, int64 tick)
{
	return layout_compose(l, Max(0, Min(tick, layout_max_tick(l))),
						  layout_max_worker(l), layout_max_seq(l));
}

/* The settings can be trusted, and the mark read in the layout in force. */
static bool
usable(void)
{
	return snowflake_shared != NULL && node_mark_readable();
}

/* The mark can be trusted: the keeper may reserve, a shutdown record. */
static bool
trusted(void)
{
	return snowflake_shared != NULL && node_mark_trusted();
}

/* Recovery's floor is still to be applied: calls wait for the keeper. */
static bool
floor_pending(void)
{
	return node_found(CHECK_FLOOR) != REASON_NONE;
}

/* The state is beyond the layout in force: what ID, for the message. */
static void
beyond_layout(int64 id, const char *layout)
{
	node_shared->trouble_id = id;
	strlcpy(node_shared->trouble_layout, layout, NAMEDATALEN);
	node_find(CHECK_MARK, REASON_STATE_BEYOND_LAYOUT);
}

/*
 * The record with mark_id as its mark.  The mark is recorded as the
 * layout's in force, or as the old layout's while the state is still that
 * layout's (nothing issued in this one since the change), so that a
 * restart still knows it.  With the lock held.
 */
static void
set_mark(const SnowflakeLayout *l, int64 mark_id, NodeRecord *r)
{
	bool		old_layout = snowflake_shared->prev_layout[0] != '\0' &&
		pg_atomic_read_u64(&snowflake_shared->last_id) <=
		pg_atomic_read_u64(&snowflake_shared->resumed_from);

	r->mark_id = mark_id;
	r->seen_unix_ms = layout_tick_to_unix_ms(l, (int64) pg_atomic_read_u64(&snowflake_shared->seen_tick));
	strlcpy(r->layout, old_layout ? snowflake_shared->prev_layout : l->name, sizeof(r->layout));
	r->flags &= ~(RECORD_FLOOR_PENDING | RECORD_LEGACY_GONE);
	if (floor_pending())
		r->flags |= RECORD_FLOOR_PENDING;
	if (pg_atomic_read_u32(&snowflake_shared->legacy_state) == LEGACY_GONE)
		r->flags |= RECORD_LEGACY_GONE;
	r->undo_floor = snowflake_shared->undo_floor;
}

/*
 * Make mark_id durable in the state file.  With the lock held.  own: the
 * node issues IDs up to it under its own policy, whose lead it records.
 */
static bool
write_mark(const SnowflakeLayout *l, int64 mark_id, int elevel, bool own)
{
	NodeRecord	next = node_shared->rec;

	Assert(usable());
	set_mark(l, mark_id, &next);
	if (own)
		next.lead_ms = settings_max_lead_ms();
	return node_save(&next, SAVE_STATE, elevel);
}

/*
 * Set the state from the mark the record holds, at server start.  Every
 * value is checked against the layout in force before it is used.
 */
static void
load_mark(const SnowflakeLayout *l)
{
	const NodeRecord *m = &node_shared->rec;

	if (!trusted() || m->mark_id == 0)
		return;
	if (memchr(m->layout, '\0', sizeof(m->layout)) == NULL || m->layout[0] == '\0' ||
		m->mark_id < 0 || m->seen_unix_ms < 0 || m->seen_unix_ms > LAYOUT_MAX_UNIX_MS)
	{
		node_find(CHECK_MARK, REASON_STATE_DAMAGED);
		ereport(WARNING,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("snowflake state file \"%s\" is damaged", SNOWFLAKE_STATE_FILE),
				 errdetail("It holds values no snowflake layout can have made."),
				 errhint("The node refuses to generate until it is repaired with snowflake_repair_state().")));
		return;
	}
	if (m->flags & RECORD_FLOOR_PENDING)
		node_find(CHECK_FLOOR, REASON_FLOOR_PENDING);
	if (m->flags & RECORD_LEGACY_GONE)
		pg_atomic_write_u32(&snowflake_shared->legacy_state, LEGACY_GONE);
	if (strcmp(m->layout, l->name) != 0)
		strlcpy(snowflake_shared->prev_layout, m->layout, NAMEDATALEN);
	if (m->mark_id >= layout_max_id(l))
	{
		/* no ID of this layout is greater than the mark */
		beyond_layout(m->mark_id, m->layout);
		return;
	}

	pg_atomic_write_u64(&snowflake_shared->last_id, (uint64) m->mark_id);
	if (m->undo_floor > 0 && m->undo_floor < m->mark_id)
		snowflake_shared->undo_floor = m->undo_floor;
	pg_atomic_write_u64(&snowflake_shared->reserved, (uint64) m->mark_id);
	pg_atomic_write_u64(&snowflake_shared->extend_at, (uint64) m->mark_id);
	pg_atomic_write_u64(&snowflake_shared->seen_tick,
						(uint64) Max(0, layout_unix_ms_to_tick(l, m->seen_unix_ms)));
	if (snowflake_shared->prev_layout[0] != '\0')
		ereport(LOG,
				(errmsg("snowflake layout changed from \"%s\" to \"%s\"", m->layout, l->name),
				 errdetail("New IDs continue above %lld.", (long long) m->mark_id)));
}

/*
 * Called by the postmaster with AddinShmemInitLock held, after node.c and
 * identity.c have read the record.  recovered: the start found recovery
 * under way or to come (identity.c looked).
 */
void
mark_shmem_init(bool recovered)
{
	const SnowflakeLayout *l = snowflake_layout;
	GeneratorShared *s;
	bool		found;

	s = ShmemInitStruct("snowflake generator", mark_shmem_size(), &found);
	snowflake_shared = s;
	if (found)
		return;

	pg_atomic_init_u64(&s->last_id, 0);
	pg_atomic_init_u64(&s->seen_tick, 0);
	pg_atomic_init_u64(&s->extend_at, 0);
	pg_atomic_init_u64(&s->reserved, 0);
	pg_atomic_init_u32(&s->worker, (uint32) WORKER_ID_UNSET);
	pg_atomic_init_u64(&s->requested, 0);
	pg_atomic_init_u32(&s->keeper_proc, NO_KEEPER);
	ConditionVariableInit(&s->renewed);
	pg_atomic_init_u32(&s->legacy_state, LEGACY_UNKNOWN);
	pg_atomic_init_u64(&s->resumed_from, 0);
	s->legacy_mark = 0;
	s->origin_failed = false;
	s->prev_layout[0] = '\0';
	s->undo_floor = 0;
	pg_atomic_init_u64(&s->back_counted_tick, 0);
	pg_atomic_init_u64(&s->clock_back_events, 0);
	pg_atomic_init_u64(&s->clock_back_max_ms, 0);
	s->started = GetCurrentTimestamp();
	s->nslots = slot_count();
	for (int i = 0; i < s->nslots; i++)
	{
		pg_atomic_init_u64(&s->slots[i].c.issued, 0);
		pg_atomic_init_u64(&s->slots[i].c.waits, 0);
		pg_atomic_init_u64(&s->slots[i].c.run_ahead_ids, 0);
		pg_atomic_init_u64(&s->slots[i].c.refused, 0);
	}

	if (usable())
	{
		/*
		 * The floor is pending after recovery and without a mark; until
		 * the keeper has applied it, a restart must do it again, even
		 * after a clean shutdown: the evidence of recovery (signal files,
		 * pg_control's state) is gone by then.
		 */
		node_find(CHECK_FLOOR, recovered || node_shared->rec.mark_id == 0 ?
				  REASON_FLOOR_PENDING : REASON_NONE);
		load_mark(l);
		pg_atomic_write_u64(&s->resumed_from, pg_atomic_read_u64(&s->last_id));
		if (trusted())
			set_mark(l, Max(1, (int64) pg_atomic_read_u64(&s->last_id)), &node_shared->rec);
		if (settings_worker_rejected())
			ereport(WARNING,
					(errcode(ERRCODE_CONFIG_FILE_ERROR),
					 errmsg("snowflake.worker_id = '%s' was rejected", settings_worker_rejected()),
					 errdetail("This server generates no snowflake IDs until a valid one is set."),
					 errhint("Set snowflake.worker_id in postgresql.conf to a worker id from 0 to %lld and reload.",
							 (long long) layout_max_worker(l))));
		else if (snowflake_worker_id == WORKER_ID_UNSET)
			ereport(WARNING,
					(errmsg("snowflake.worker_id is not set"),
					 errdetail("This server generates no snowflake IDs until one is set."),
					 errhint("Give every node a worker id of its own in postgresql.conf and reload.")));
		else if (trusted())
			ereport(LOG,
					(errmsg("snowflake generates as worker id %d in layout \"%s\"",
							snowflake_worker_id, l->name),
					 floor_pending() ?
					 errdetail("New IDs continue above %lld and above what recovery finds.",
							   (long long) pg_atomic_read_u64(&s->last_id)) :
					 errdetail("New IDs continue above %lld.",
							   (long long) pg_atomic_read_u64(&s->last_id))));
	}
	pg_atomic_write_u64(&s->resumed_from, pg_atomic_read_u64(&s->last_id));

	if (!IsUnderPostmaster)
		on_shmem_exit(mark_shutdown, (Datum) 0);
}

/*
 * Raise the state to a floor: a replayed reservation, or the one 1.1
 * logged through its replication origin.  Returns true if the state moved.
 * Called with the lock held.
 */
static bool
apply_floor(const SnowflakeLayout *l, int64 floor_id, const char *layout)
{
	if (floor_id >= layout_max_id(l))
	{
		beyond_layout(floor_id, layout);
		return false;
	}
	if ((uint64) floor_id <= pg_atomic_read_u64(&snowflake_shared->last_id))
		return false;
	atomic_raise(&snowflake_shared->last_id, (uint64) floor_id);
	atomic_raise(&snowflake_shared->resumed_from, (uint64) floor_id);
	return true;
}

/*
 * Replay of a reservation, in the startup process: no ID above the mark
 * was issued, and IDs up to it may have been.  The state rises to it and
 * the state file holds it before replay goes on, so that no restartpoint
 * passes a record whose mark the file lacks.  A failed write stops
 * recovery: going on would lose the mark at the next restart.  Where the
 * settings cannot be trusted (a standby started with a setting it
 * rejected), nothing is computed in the layout in force: the mark itself,
 * an ID and the layout it belongs to as the record says, is kept, so that
 * the start with the setting fixed continues above it.
 */
void
mark_replay(int64 mark, const char *layout, int64 lead_ms)
{
	const SnowflakeLayout *l = snowflake_layout;
	NodeRecord	next;

	if (snowflake_shared == NULL || node_found(CHECK_CONFIG) == REASON_BINARY_UPGRADE)
		return;
	LWLockAcquire(node_shared->lock, LW_EXCLUSIVE);
	next = node_shared->rec;
	if (!usable())
	{
		if (mark > next.mark_id && node_found(CHECK_MARK) == REASON_NONE &&
			node_found(CHECK_FILE) != REASON_STATE_UNREADABLE)
		{
			next.lead_ms = lead_ms;
			next.mark_id = mark;
			strlcpy(next.layout, layout, sizeof(next.layout));
			next.undo_floor = 0;
			if (next.mark_id != node_shared->rec.mark_id && node_shared->rec.mark_id == 0)
				next.flags |= RECORD_FLOOR_PENDING;
			if (!node_save(&next, SAVE_STATE, LOG))
				ereport(ERROR,
						(errcode_for_file_access(),
						 errmsg("could not keep the reservation %lld replayed from WAL in \"%s\"",
								(long long) mark, SNOWFLAKE_STATE_FILE)));
		}
	}
	else if (mark > (int64) pg_atomic_read_u64(&snowflake_shared->last_id))
	{
		/* the state is now that record's: of its layout, or of ours */
		if (strcmp(layout, l->name) != 0)
			strlcpy(snowflake_shared->prev_layout, layout, NAMEDATALEN);
		else
			snowflake_shared->prev_layout[0] = '\0';
		if (apply_floor(l, mark, layout) && trusted())
		{
			snowflake_shared->undo_floor = 0;
			set_mark(l, mark, &next);
			/* how far its primary's IDs may lead its clock, for a floor */
			next.lead_ms = lead_ms;
			(void) node_save(&next, SAVE_STATE, ERROR);
			atomic_raise(&snowflake_shared->reserved, (uint64) mark);
			atomic_raise(&snowflake_shared->extend_at, (uint64) mark);
		}
	}
	LWLockRelease(node_shared->lock);
}

/*
 * Refuse for why the mark cannot be trusted: the node's verdict.  A repair
 * calls it with the lock held, which an LWLock does not take twice.
 */
static void
refuse_mark(void)
{
	bool		held = LWLockHeldByMe(node_shared->lock);
	NodeReason	r;

	if (!held)
		LWLockAcquire(node_shared->lock, LW_SHARED);
	r = node_verdict(&node_shared->rec);
	if (!held)
		LWLockRelease(node_shared->lock);
	node_refuse_state(r);
}

/* The keeper renewed for the calls: the status view no longer says late. */
static void
keeper_on_time(void)
{
	if (node_found(CHECK_KEEPER) == REASON_NONE)
		return;
	LWLockAcquire(node_shared->lock, LW_EXCLUSIVE);
	node_find(CHECK_KEEPER, REASON_NONE);
	LWLockRelease(node_shared->lock);
}

/*
 * A call waited for the keeper in vain: until it renews, the status view
 * says so (keeper_origin while the worker that reads 1.1's origin fails).
 */
static void
keeper_late(void)
{
	LWLockAcquire(node_shared->lock, LW_EXCLUSIVE);
	node_find(CHECK_KEEPER, snowflake_shared->origin_failed ?
			  REASON_KEEPER_ORIGIN : REASON_KEEPER_LATE);
	LWLockRelease(node_shared->lock);
}

/*
 * Wake the keeper, if one runs.  Its number is read once, as its exit
 * clears it; a number read just before that wakes whichever process has
 * that slot now, which is harmless.  Pairs with mark_keeper_arrived(): the
 * caller raised its request first (a compare-and-swap, a full barrier), so
 * a keeper that arrives after this read sees the request.
 */
static void
wake_keeper(void)
{
	uint32		proc = pg_atomic_read_u32(&snowflake_shared->keeper_proc);

	if (proc != NO_KEEPER)
		SetLatch(&GetPGProcByNumber(proc)->procLatch);
}

/*
 * Make sure a reservation covering id exists.  The keeper makes it: with
 * must, the caller has no room left and waits for it, interruptibly, and
 * refuses if it does not come; otherwise the caller only asks and goes on
 * with the room it has.
 */
ReserveResult
mark_reserve(const SnowflakeLayout *l, int64 id, bool must)
{
	uint32		we;
	int64		deadline;

	atomic_raise(&snowflake_shared->requested, (uint64) id);
	wake_keeper();
	if (!must)
		return RESERVE_SKIPPED;

	we = compat_wait_event("SnowflakeReservation", &wait_event_reserve);
	deadline = clock_monotonic_us() + KEEPER_WAIT_MS * INT64CONST(1000);
	for (;;)
	{
		if (!trusted())
		{
			ConditionVariableCancelSleep();
			refuse_mark();
		}
		if (!floor_pending() &&
			(uint64) id <= pg_atomic_read_u64(&snowflake_shared->reserved))
			break;
		if (clock_monotonic_us() > deadline)
		{
			ConditionVariableCancelSleep();
			keeper_late();
			refuse_mark();
		}
		wake_keeper();

		/*
		 * The keeper stores reserved, then broadcasts: the broadcast's
		 * spinlock and the latch it sets order the two, and the check
		 * above runs again after every wake-up (10 ms at most).
		 */
		(void) ConditionVariableTimedSleep(&snowflake_shared->renewed, 10, we);
	}
	ConditionVariableCancelSleep();
	/* the floor may have moved the state: the caller computes again */
	return RESERVE_MOVED;
}

/*
 * Whether 1.1's replication origin must still be looked for: the state file
 * does not say it is gone.  Its catalog can be read only from a database,
 * which the keeper does not connect to: the keeper starts a worker that
 * does (keeper.c), once in the life of a data directory.
 */
bool
mark_legacy_wanted(void)
{
	return trusted() && pg_atomic_read_u32(&snowflake_shared->legacy_state) != LEGACY_GONE;
}

/*
 * The origin worker found the origin at mark, or found none (mark 0).  The
 * keeper reads the mark under the lock, once the state says it is there.
 */
void
mark_legacy_found(bool found, int64 mark)
{
	LWLockAcquire(node_shared->lock, LW_EXCLUSIVE);
	snowflake_shared->legacy_mark = mark;
	pg_atomic_write_u32(&snowflake_shared->legacy_state, found ? LEGACY_PRESENT : LEGACY_GONE);
	LWLockRelease(node_shared->lock);
	wake_keeper();
}

/*
 * The origin may be dropped once a reservation of ours, logged after the
 * floor was applied, covers every ID issued under it: the keeper flushed
 * that record before it said so (mark_keep_ahead()).
 */
bool
mark_legacy_may_drop(void)
{
	return pg_atomic_read_u32(&snowflake_shared->legacy_state) == LEGACY_COVERED;
}

/* The origin is gone: say so in the state file, never to look again. */
void
mark_legacy_gone(void)
{
	LWLockAcquire(node_shared->lock, LW_EXCLUSIVE);
	pg_atomic_write_u32(&snowflake_shared->legacy_state, LEGACY_GONE);
	if (trusted())
		(void) write_mark(snowflake_layout,
						  Max(1, (int64) Max(pg_atomic_read_u64(&snowflake_shared->reserved),
											 pg_atomic_read_u64(&snowflake_shared->last_id))),
						  WARNING, false);
	LWLockRelease(node_shared->lock);
}

/*
 * The keeper's start, once recovery has ended, and again at every round
 * until it is done: raise the state to the floor and make it durable,
 * before any backend may have a reservation.  After recovery the floor
 * includes 1.1's origin, which the origin worker reads; IDs wait for it
 * (and refuse after 5 s, saying why).  failed: that worker exited without
 * an answer.
 */
void
mark_keeper_start(bool legacy_failed)
{
	const SnowflakeLayout *l = snowflake_layout;

	if (!usable() || !floor_pending())
		return;

	if (trusted() && pg_atomic_read_u32(&snowflake_shared->legacy_state) == LEGACY_UNKNOWN)
	{
		LWLockAcquire(node_shared->lock, LW_EXCLUSIVE);
		snowflake_shared->origin_failed = legacy_failed;
		node_find(CHECK_KEEPER, legacy_failed ? REASON_KEEPER_ORIGIN : REASON_NONE);
		LWLockRelease(node_shared->lock);
		return;
	}

	LWLockAcquire(node_shared->lock, LW_EXCLUSIVE);
	if (floor_pending() && trusted())
	{
		int64		mark;

		if (pg_atomic_read_u32(&snowflake_shared->legacy_state) == LEGACY_PRESENT)
			(void) apply_floor(l, snowflake_shared->legacy_mark, l->name);
		snowflake_shared->origin_failed = false;
		/* durable, and no longer pending, before anything is issued above */
		node_find(CHECK_FLOOR, REASON_NONE);
		mark = Max(1, (int64) pg_atomic_read_u64(&snowflake_shared->last_id));
		if (trusted() && write_mark(l, mark, WARNING, false))
		{
			pg_atomic_write_u64(&snowflake_shared->reserved, (uint64) mark);
			pg_atomic_write_u64(&snowflake_shared->extend_at, (uint64) mark);
			node_find(CHECK_KEEPER, REASON_NONE);
		}
		else
			node_find(CHECK_FLOOR, REASON_FLOOR_PENDING);
	}
	LWLockRelease(node_shared->lock);
	ConditionVariableBroadcast(&snowflake_shared->renewed);
}

/*
 * Called by the keeper every tenth of a window and whenever a backend asks:
 * keep the durable reservation at least half a window ahead of the IDs
 * being issued and asked for.  The reservation follows the IDs, not the
 * clock: an idle node reserves nothing.
 */
void
mark_keep_ahead(void)
{
	const SnowflakeLayout *l = snowflake_layout;
	int64		target;
	int64		w;
	int64		tick;
	int64		mark;

	if (!trusted() || floor_pending())
		return;
	/* a reservation covers every ID asked for: calls get theirs again */
	if (node_found(CHECK_KEEPER) == REASON_KEEPER_LATE &&
		pg_atomic_read_u64(&snowflake_shared->reserved) >=
		pg_atomic_read_u64(&snowflake_shared->requested))
		keeper_on_time();
	w = window_ticks(l);
	if (pg_atomic_read_u32(&snowflake_shared->legacy_state) == LEGACY_PRESENT)
	{
		/*
		 * A record of ours covering every ID issued so far, so that 1.1's
		 * origin can go at once, even on an idle node.  It is flushed
		 * before the word says so: the origin worker drops the origin on
		 * that word alone.
		 */
		mark = Max((int64) pg_atomic_read_u64(&snowflake_shared->last_id),
				   (int64) pg_atomic_read_u64(&snowflake_shared->reserved));
		wal_log_reservation(mark, l->name, settings_max_lead_ms());
		LWLockAcquire(node_shared->lock, LW_EXCLUSIVE);
		pg_atomic_write_u32(&snowflake_shared->legacy_state, LEGACY_COVERED);
		LWLockRelease(node_shared->lock);
	}

	/*
	 * requested is read after the latch was reset (ResetLatch() is a full
	 * barrier), so a request raised before the SetLatch() that woke the
	 * keeper is seen here: pairs with mark_reserve().
	 */
	target = Max((int64) pg_atomic_read_u64(&snowflake_shared->last_id),
				 (int64) pg_atomic_read_u64(&snowflake_shared->requested));
	if ((uint64) target <= pg_atomic_read_u64(&snowflake_shared->resumed_from))
		return;					/* nothing issued or asked for since start */
	tick = layout_tick(l, target);
	if ((int64) pg_atomic_read_u64(&snowflake_shared->reserved) >= tick_ceiling(l, tick + w / 2))
		return;

	mark = tick_ceiling(l, tick + w);
	wal_log_reservation(mark, l->name, settings_max_lead_ms());
	LWLockAcquire(node_shared->lock, LW_EXCLUSIVE);
	/* a repair meanwhile may have moved the state above the mark */
	if (trusted() &&
		mark > (int64) pg_atomic_read_u64(&snowflake_shared->last_id) &&
		mark > (int64) pg_atomic_read_u64(&snowflake_shared->reserved))
	{
		/* IDs go above a repair: it can no longer be undone */
		snowflake_shared->undo_floor = 0;
		if (write_mark(l, mark, WARNING, true))
		{
			/* only now may IDs up to the new mark be handed out */
			pg_atomic_write_u64(&snowflake_shared->reserved, (uint64) mark);
			pg_atomic_write_u64(&snowflake_shared->extend_at,
								(uint64) tick_ceiling(l, tick + w / 2));
			node_find(CHECK_KEEPER, REASON_NONE);
		}
	}
	LWLockRelease(node_shared->lock);
	ConditionVariableBroadcast(&snowflake_shared->renewed);
}

/* The last ID the node issued, or the floor it resumed from. */
int64
mark_last_id(void)
{
	return (int64) pg_atomic_read_u64(&snowflake_shared->last_id);
}

/*
 * The keeper runs: requests wake it from now on.  The exchange is a full
 * barrier before the keeper first reads requested, so that a request
 * raised by a backend that found no keeper here is seen (pairs with
 * wake_keeper()).
 */
void
mark_keeper_arrived(void)
{
	if (snowflake_shared != NULL)
		(void) pg_atomic_exchange_u32(&snowflake_shared->keeper_proc,
									  (uint32) MyProcNumber);
}

/* The keeper is going away: requests no longer wake its slot. */
void
mark_keeper_exit(void)
{
	if (snowflake_shared != NULL)
		pg_atomic_write_u32(&snowflake_shared->keeper_proc, NO_KEEPER);
}

/*
 * Make a worker id the node's, in one step that every backend sees at its
 * next ID.  Called by identity.c under node.c's lock (or at start), from
 * the record and the worker id configured, whenever either changes.
 */
void
mark_publish_worker(int worker)
{
	if (!usable())
		return;
	/* the word shares the hot cache line: written only when it changes */
	if (pg_atomic_read_u32(&snowflake_shared->worker) != (uint32) worker)
		pg_atomic_write_u32(&snowflake_shared->worker, (uint32) worker);
}

/*
 * A floor given for the layout in force (a repair's, a confirmation's):
 * new IDs must be greater, so it must be below the layout's largest ID.
 */
void
mark_check_floor(int64 above)
{
	const SnowflakeLayout *l = snowflake_layout;

	if (above < 0 || above >= layout_max_id(l))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("snowflake ID %lld is out of range for the \"%s\" layout",
						(long long) above, l->name),
				 errdetail("New IDs must be greater than it, and the largest ID of the layout is %lld.",
						   (long long) layout_max_id(l))));
}

/* Why a repair may not lower the state. */
typedef enum LowerRefusal
{
	LOWER_NO_REPAIR,			/* no forced repair to undo */
	LOWER_ISSUED,				/* IDs were issued since the node resumed */
	LOWER_RACED					/* ... while the repair ran */
} LowerRefusal;

static void
refuse_lower(int64 to, LowerRefusal why, int64 resumed)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("snowflake state cannot be lowered to %lld", (long long) to),
			 why == LOWER_NO_REPAIR ?
			 errdetail("No repair of this node is waiting to be undone, and nothing else bounds the IDs it issued below its state.") :
			 why == LOWER_ISSUED ?
			 errdetail("The node issued IDs after it resumed at %lld; new IDs stay above them.",
					   (long long) resumed) :
			 errdetail("The node issued IDs while the repair ran; new IDs stay above them."),
			 errhint("Repair to a value at or above the node's last ID, which snowflake_status shows.")));
}

/*
 * The operator's way out of a damaged state file, and the floor of a
 * confirmation: continue above the largest of the given ID, the
 * reservations replayed since the server started, 1.1's origin if it is
 * still there and whatever the node still holds.  Sets next's mark and
 * returns the ID that new IDs continue above; mark_repair_save() then
 * makes it durable and puts it in force.  With the lock held; an ERROR
 * leaves everything as it was.
 *
 * A repair that raises the state remembers the last ID before it, which
 * bounds every ID the node issued, until the first reservation above it.
 * Until then, lower undoes it: the state goes down to the larger of the
 * given ID and that bound.  log: the floor comes from outside this node's
 * WAL (another cluster's IDs), so it is logged, and a standby continues
 * above it too.
 */
int64
mark_repair_locked(int64 above, bool lower, bool log, NodeRecord *next)
{
	const SnowflakeLayout *l = snowflake_layout;
	int64		last = (int64) pg_atomic_read_u64(&snowflake_shared->last_id);
	int64		resumed = (int64) pg_atomic_read_u64(&snowflake_shared->resumed_from);
	int64		legacy = 0;
	int64		reserved = 0;
	int64		undo = snowflake_shared->undo_floor;

	if (node_found(CHECK_FILE) == REASON_STATE_UNREADABLE)
		refuse_mark();
	mark_check_floor(above);
	/* a state beyond the layout is no floor a repair could go above */
	if (node_found(CHECK_MARK) == REASON_STATE_BEYOND_LAYOUT)
		refuse_mark();
	switch (wal_legacy_mark(&legacy))
	{
		case LEGACY_BUSY:
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("snowflake cannot read replication origin \"%s\"",
							SNOWFLAKE_LEGACY_ORIGIN),
					 errdetail("Its catalog, pg_replication_origin, is locked."),
					 errhint("Try again once the command holding the lock on pg_replication_origin has finished.")));
			break;
		case LEGACY_UNREADABLE:
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("snowflake cannot read the progress of replication origin \"%s\"",
							SNOWFLAKE_LEGACY_ORIGIN),
					 errdetail("The server has no state slots for replication origins, so the progress was not restored."),
					 errhint("Set %s to at least 1, restart the server and repair again.",
							 PG_VERSION_NUM >= 180000 ? "max_active_replication_origins" : "max_replication_slots")));
			break;
		default:
			break;
	}
	if (legacy >= layout_max_id(l))
	{
		beyond_layout(legacy, l->name);
		refuse_mark();
	}
	/* a reservation made before bounds IDs that backends may still issue */
	if (node_found(CHECK_MARK) == REASON_NONE)
		reserved = (int64) pg_atomic_read_u64(&snowflake_shared->reserved);
	if (lower)
	{
		if (undo <= 0 || node_found(CHECK_MARK) != REASON_NONE || last != resumed)
		{
			refuse_lower(above, undo <= 0 ? LOWER_NO_REPAIR : LOWER_ISSUED, resumed);
		}
		last = Max(above, undo);
		reserved = 0;
		undo = 0;
	}
	last = Max(Max(last, legacy), above);
	/* a raise remembers what bounds every ID below it, the first one's */
	if (!lower && last > Max((int64) pg_atomic_read_u64(&snowflake_shared->last_id), reserved) &&
		pg_atomic_read_u64(&snowflake_shared->last_id) > 0 && undo == 0)
		undo = Max((int64) pg_atomic_read_u64(&snowflake_shared->last_id), reserved);

	/*
	 * A new record, whatever the old one holds, no longer pending.  It
	 * covers the reservation in force, which backends may be using; beyond
	 * that it reserves nothing above the last ID: the keeper logs the next
	 * reservation first.
	 */
	if (log)
		wal_log_reservation(Max(Max(last, reserved), 1), l->name, settings_max_lead_ms());
	next->mark_id = Max(Max(last, reserved), 1);
	next->seen_unix_ms = layout_tick_to_unix_ms(l, (int64) pg_atomic_read_u64(&snowflake_shared->seen_tick));
	strlcpy(next->layout, l->name, sizeof(next->layout));
	next->flags &= ~(RECORD_FLOOR_PENDING | RECORD_LEGACY_GONE);
	if (pg_atomic_read_u32(&snowflake_shared->legacy_state) == LEGACY_GONE)
		next->flags |= RECORD_LEGACY_GONE;
	next->undo_floor = undo;
	next->lead_ms = settings_max_lead_ms();
	return last;
}

/*
 * Make a repair's record durable, written anew, and only then put its
 * mark in force; an ERROR if it cannot be written, with nothing changed.
 * With the lock held.  lower: the repair undoes an earlier one, and takes
 * the last ID down to last; any other repair only raises it, since
 * backends go on issuing IDs above the last ID it read.
 */
void
mark_repair_save(const NodeRecord *next, bool node_part, int64 last, bool lower)
{
	NodeReason	trouble = node_found(CHECK_MARK);
	NodeReason	pending = node_found(CHECK_FLOOR);
	int64		reserved = (int64) pg_atomic_read_u64(&snowflake_shared->reserved);
	int64		extend_at = (int64) pg_atomic_read_u64(&snowflake_shared->extend_at);
	uint64		before = pg_atomic_read_u64(&snowflake_shared->resumed_from);
	bool		down = trouble != REASON_NONE || lower;

	if (down)
	{
		/*
		 * Every backend must now wait for a reservation, which the keeper
		 * cannot make while the lock is held; the last ID goes down only if
		 * no ID was issued since the repair checked it.  A backend that
		 * read the old words loses its compare-and-swap to ours.  The
		 * barrier pairs with generate()'s read barrier: a backend that
		 * reads the last ID installed below then finds extend_at 0.
		 */
		pg_atomic_write_u64(&snowflake_shared->extend_at, 0);
		pg_atomic_write_u64(&snowflake_shared->reserved, 0);
		pg_write_barrier();
		if (lower &&
			!pg_atomic_compare_exchange_u64(&snowflake_shared->last_id, &before, (uint64) last))
		{
			pg_atomic_write_u64(&snowflake_shared->reserved, (uint64) reserved);
			pg_atomic_write_u64(&snowflake_shared->extend_at, (uint64) extend_at);
			refuse_lower(last, LOWER_RACED, 0);
		}
	}

	/* the repair replaces a damaged file: it is written, not left alone */
	node_find(CHECK_MARK, REASON_NONE);
	node_find(CHECK_FLOOR, REASON_NONE);
	node_shared->state_writes = 0;
	if (!node_save(next, node_part ? SAVE_BOTH : SAVE_STATE, WARNING))
	{
		node_find(CHECK_MARK, trouble);
		node_find(CHECK_FLOOR, pending);
		if (down)
		{
			/* nothing was issued meanwhile: every backend waited */
			if (lower)
				atomic_raise(&snowflake_shared->last_id, before);
			pg_atomic_write_u64(&snowflake_shared->reserved, (uint64) reserved);
			pg_atomic_write_u64(&snowflake_shared->extend_at, (uint64) extend_at);
		}
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not write the snowflake node's record"),
				 errhint("The server log says which file and why; the node goes on as it was.")));
	}
	atomic_raise(&snowflake_shared->last_id, (uint64) last);
	if (down || reserved <= last)
	{
		pg_atomic_write_u64(&snowflake_shared->reserved, (uint64) last);
		pg_atomic_write_u64(&snowflake_shared->extend_at, (uint64) last);
	}
	snowflake_shared->undo_floor = next->undo_floor;
	pg_atomic_write_u64(&snowflake_shared->resumed_from, (uint64) last);
	snowflake_shared->prev_layout[0] = '\0';
	ConditionVariableBroadcast(&snowflake_shared->renewed);
	ereport(LOG,
			(errmsg("snowflake state file \"%s\" rewritten", SNOWFLAKE_STATE_FILE),
			 errdetail("New IDs continue above %lld.", (long long) last)));
}

/*
 * At a clean shutdown, record the exact last ID (not the reservation), so
 * that a restart does not wait for the clock to pass the reservation.
 * Runs in the postmaster after every other process has exited: it reads
 * shared memory once more, and writes only the file.
 */
static void
mark_shutdown(int code, Datum arg)
{
	NodeRecord	last;
	int64		id;

	if (code != 0 || !trusted() || floor_pending())
		return;
	id = (int64) pg_atomic_read_u64(&snowflake_shared->last_id);
	if ((uint64) id <= pg_atomic_read_u64(&snowflake_shared->resumed_from))
		return;
	last = node_shared->rec;
	set_mark(snowflake_layout, id, &last);
	/* IDs were issued above a repair: it can no longer be undone */
	last.undo_floor = 0;
	last.lead_ms = settings_max_lead_ms();
	(void) node_save_at_exit(&last, LOG);
}
