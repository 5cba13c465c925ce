/*-------------------------------------------------------------------------
 *
 * mark.c
 *	  The node's generator state in shared memory and the durable
 *	  high-water mark that bounds it: loading and validating the mark at
 *	  server start, the floor after recovery, the reservations that bound
 *	  the IDs a node may issue and their renewal, the worker id in force,
 *	  the operator's repair, and the exact record at shutdown.
 *
 * The generator reserves ID time a window ahead of the IDs it issues and
 * makes the reservation durable (persist.c) before it hands out an ID
 * beyond the previous one.  The keeper renews it ahead of time; a backend
 * that outruns the keeper renews it itself, without blocking the others
 * while there is room, and waits (interruptibly) only at the
 * reservation's end.  A reservation is made only for IDs that are being
 * issued, never for the clock alone, so a clock that jumps far ahead with
 * no ID issued reserves nothing.
 *
 * Nothing computed under layout or settings that cannot be trusted is
 * written: such a node neither loads nor writes the file.
 *
 * This file uses layouts, settings and persist.c; generator.c and the
 * keeper use it, never the other way round.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "access/twophase.h"
#include "access/xlog.h"
#include "access/xlogrecovery.h"
#include "catalog/pg_control.h"
#include "common/controldata_utils.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"

#include "clock.h"
#include "compat.h"
#include "persist.h"
#include "settings.h"
#include "state.h"

GeneratorShared *snowflake_shared = NULL;

/* the checkpoint recovery started from, in Unix ms; 0 if unknown */
static int64 checkpoint_floor_ms = 0;

/* this start replays WAL of another server (standby, restore, backup) */
static bool took_over = false;

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

static void
set_broken(const char *problem)
{
	snowflake_shared->state_broken = true;
	strlcpy(snowflake_shared->state_problem, problem,
			sizeof(snowflake_shared->state_problem));
}

/* Make mark_id durable as the high-water mark.  Called with the lock held. */
static bool
write_mark(const SnowflakeLayout *l, int64 mark_id, int elevel)
{
	PersistedMark m;

	Assert(snowflake_shared->usable);
	memset(&m, 0, sizeof(m));
	m.mark_id = mark_id;
	m.seen_unix_ms = layout_tick_to_unix_ms(l, (int64) pg_atomic_read_u64(&snowflake_shared->seen_tick));
	strlcpy(m.layout, l->name, sizeof(m.layout));
	/* a restart must still know that the takeover is not settled */
	if (took_over && !snowflake_shared->floor_done)
		m.flags |= MARK_FLAG_TAKEOVER;
	return persist_write_file(SNOWFLAKE_MARK_FILE, &m, sizeof(m),
							  &snowflake_shared->writes, elevel);
}

/*
 * Set the state from the mark the file holds, at server start.  Every value
 * is checked against the layout in force before it is used.
 */
static void
load_mark(const SnowflakeLayout *l)
{
	PersistedMark m;
	const char *problem = NULL;
	static char buf[128];

	switch (persist_read_file(SNOWFLAKE_MARK_FILE, &m, sizeof(m),
							  &snowflake_shared->writes, &problem))
	{
		case MARK_ABSENT:
			return;
		case MARK_BROKEN:
			set_broken(problem);
			return;
		case MARK_OK:
			break;
	}

	if (memchr(m.layout, '\0', sizeof(m.layout)) == NULL || m.layout[0] == '\0' ||
		m.mark_id <= 0 || m.seen_unix_ms < 0 || m.seen_unix_ms > LAYOUT_MAX_UNIX_MS)
	{
		set_broken("it holds values no snowflake layout can have made");
		return;
	}
	if (m.mark_id >= layout_max_id(l))
	{
		/* no ID of this layout is greater than the mark */
		snprintf(buf, sizeof(buf),
				 "its mark " INT64_FORMAT " (layout \"%s\") is at or beyond the largest ID of layout \"%s\"",
				 m.mark_id, m.layout, l->name);
		set_broken(buf);
		if (strcmp(m.layout, l->name) != 0)
			strlcpy(snowflake_shared->prev_layout, m.layout, NAMEDATALEN);
		return;
	}

	if (m.flags & MARK_FLAG_TAKEOVER)
		took_over = true;
	pg_atomic_write_u64(&snowflake_shared->last_id, (uint64) m.mark_id);
	pg_atomic_write_u64(&snowflake_shared->reserved, (uint64) m.mark_id);
	pg_atomic_write_u64(&snowflake_shared->extend_at, (uint64) m.mark_id);
	pg_atomic_write_u64(&snowflake_shared->seen_tick,
						(uint64) Max(0, layout_unix_ms_to_tick(l, m.seen_unix_ms)));
	if (strcmp(m.layout, l->name) != 0)
	{
		strlcpy(snowflake_shared->prev_layout, m.layout, NAMEDATALEN);
		ereport(LOG,
				(errmsg("snowflake layout changed from \"%s\" to \"%s\"; new IDs continue above " INT64_FORMAT,
						m.layout, l->name, m.mark_id)));
	}
}

/*
 * The time of the checkpoint recovery starts from.  Every commit before
 * its redo point happened before it, on the clock of the server that made
 * the checkpoint; a standby that restarts does not replay those commits
 * again, so this is what it still knows of them.  After a clean shutdown
 * of a primary there is nothing to recover, and the state file holds the
 * exact last ID.
 */
static void
read_checkpoint_time(void)
{
	bool		crc_ok = false;
	ControlFileData *cf = get_controlfile(DataDir, &crc_ok);

	if (crc_ok && cf->state != DB_SHUTDOWNED && cf->checkPointCopy.time > 0)
		checkpoint_floor_ms = ((int64) cf->checkPointCopy.time + 1) * 1000;
	took_over = (crc_ok && (cf->state == DB_IN_ARCHIVE_RECOVERY ||
							cf->state == DB_SHUTDOWNED_IN_RECOVERY)) ||
		access("standby.signal", F_OK) == 0 ||
		access("recovery.signal", F_OK) == 0 ||
		access("backup_label", F_OK) == 0;
	pfree(cf);
}

/* Called by the postmaster with AddinShmemInitLock held. */
void
mark_shmem_init(void)
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
	pg_atomic_init_u32(&s->worker, (uint32) snowflake_worker_id);
	s->lock = &(GetNamedLWLockTranche("snowflake"))->lock;
	ConditionVariableInit(&s->renewed);
	s->usable = settings_problem() == NULL;
	s->floor_done = false;
	s->state_broken = false;
	s->state_problem[0] = '\0';
	s->prev_layout[0] = '\0';
	s->writes = 0;
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

	if (!s->usable)
	{
		ereport(WARNING,
				(errmsg("snowflake cannot generate IDs: %s", settings_problem()),
				 errdetail("Every snowflake generator of this server refuses until the configuration is fixed and the server restarted; \"%s\" is left as it is.",
						   SNOWFLAKE_MARK_FILE)));
		pg_atomic_write_u32(&s->worker, (uint32) WORKER_ID_UNSET);
	}
	else
	{
		read_checkpoint_time();
		load_mark(l);
		if (s->state_broken)
			ereport(WARNING,
					(errmsg("snowflake state file \"%s\" cannot be used: %s",
							SNOWFLAKE_MARK_FILE, s->state_problem),
					 errdetail("The generator refuses to issue IDs until it is repaired with snowflake_repair_state().")));
		else if (snowflake_worker_id == WORKER_ID_UNSET)
			ereport(WARNING,
					(errmsg("snowflake.worker_id is not set: this server generates no snowflake IDs"),
					 errhint("Give every node a worker id of its own in postgresql.conf and reload.")));
		else
			ereport(LOG,
					(errmsg("snowflake: worker id %d, layout \"%s\", IDs continue above " INT64_FORMAT,
							snowflake_worker_id, l->name,
							(int64) pg_atomic_read_u64(&s->last_id))));
	}
	s->resumed_from = (int64) pg_atomic_read_u64(&s->last_id);

	if (!IsUnderPostmaster)
		on_shmem_exit(mark_shutdown, (Datum) 0);
}

/*
 * After recovery (a promoted standby, a point-in-time restore, a crash
 * restart) the node may not have the mark of the server whose WAL it
 * replayed.  Every ID that server committed was issued before its commit,
 * at a time at most max_run_ahead_ms ahead of the commit's clock, so the
 * last replayed commit and the checkpoint recovery started from bound
 * them.  Returns FLOOR_MOVED if the state moved, and FLOOR_UNBOUNDED when
 * the node took over another server's WAL and max_run_ahead_ms = -1 leaves
 * that server's IDs without a bound.  Called with the lock held.
 */
typedef enum FloorResult
{
	FLOOR_KEPT,
	FLOOR_MOVED,
	FLOOR_UNBOUNDED
} FloorResult;

static FloorResult
apply_floor(const SnowflakeLayout *l)
{
	TimestampTz latest = GetLatestXTime();
	int64		floor_ms = checkpoint_floor_ms;
	int64		tick;
	int64		floor_id;

	if (took_over && snowflake_max_run_ahead_ms < 0)
		return FLOOR_UNBOUNDED;
	if (latest != 0)
		floor_ms = Max(floor_ms, latest / 1000 + PG_EPOCH_UNIX_MS + 1);
	if (floor_ms <= 0)
		return FLOOR_KEPT;
	if (snowflake_max_run_ahead_ms > 0)
		floor_ms += snowflake_max_run_ahead_ms;
	tick = layout_unix_ms_to_tick(l, floor_ms);
	if (tick < 0)
		return FLOOR_KEPT;
	floor_id = tick_ceiling(l, tick);

	if ((uint64) floor_id <= pg_atomic_read_u64(&snowflake_shared->last_id))
		return FLOOR_KEPT;
	atomic_raise(&snowflake_shared->last_id, (uint64) floor_id);
	snowflake_shared->resumed_from = Max(snowflake_shared->resumed_from, floor_id);
	return FLOOR_MOVED;
}

static void
refuse_unbounded(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("snowflake cannot bound the IDs of the server this node took over from"),
			 errdetail("With snowflake.max_run_ahead_ms = -1, that server may have issued IDs any time ahead of its last commit that reached this node."),
			 errhint("Set snowflake.max_run_ahead_ms to the bound that server used and reload, or, as a superuser, run SELECT snowflake_repair_state(above => ...) with the largest ID your tables hold.")));
}

static void
refuse_broken(void)
{
	if (snowflake_shared->prev_layout[0] != '\0')
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("snowflake layout \"%s\" cannot continue above the IDs issued under layout \"%s\"",
						snowflake_layout->name, snowflake_shared->prev_layout),
				 errdetail("The state file \"%s\" says: %s.", SNOWFLAKE_MARK_FILE,
						   snowflake_shared->state_problem),
				 errhint("Go back to snowflake.layout = '%s', or choose a layout with room above that ID.",
						 snowflake_shared->prev_layout)));
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("snowflake state file \"%s\" cannot be used: %s",
					SNOWFLAKE_MARK_FILE, snowflake_shared->state_problem),
			 errdetail("The file holds the highest ID this node may have issued; without it a restart with the clock set back could repeat IDs."),
			 errhint("As a superuser, run SELECT snowflake_repair_state(above => ...) with the largest ID your tables hold; IDs then continue above it, the last checkpoint and the last replayed commit.")));
}

/*
 * Make sure a reservation covering id is durable.  With must, wait
 * (interruptibly) while another process renews it, and raise an error if
 * the write fails; otherwise renew only if nobody else is at it, and fall
 * back to the room left if the write fails.
 */
ReserveResult
mark_reserve(const SnowflakeLayout *l, int64 id, bool must)
{
	ReserveResult result = RESERVE_SKIPPED;
	uint32		we = compat_wait_event("SnowflakeReservation", &wait_event_reserve);

	for (;;)
	{
		if (LWLockConditionalAcquire(snowflake_shared->lock, LW_EXCLUSIVE))
			break;
		if (!must)
			return RESERVE_SKIPPED;
		if ((uint64) id <= pg_atomic_read_u64(&snowflake_shared->reserved))
		{
			ConditionVariableCancelSleep();
			return RESERVE_DONE;
		}
		(void) ConditionVariableTimedSleep(&snowflake_shared->renewed, 10, we);
	}
	ConditionVariableCancelSleep();

	if (snowflake_shared->state_broken)
	{
		LWLockRelease(snowflake_shared->lock);
		refuse_broken();
	}
	if (!snowflake_shared->floor_done)
	{
		FloorResult f = apply_floor(l);

		if (f == FLOOR_UNBOUNDED)
		{
			LWLockRelease(snowflake_shared->lock);
			refuse_unbounded();
		}
		snowflake_shared->floor_done = true;
		if (f == FLOOR_MOVED)
			result = RESERVE_MOVED;
	}
	if (result != RESERVE_MOVED)
	{
		if ((uint64) id <= pg_atomic_read_u64(&snowflake_shared->extend_at))
			result = RESERVE_DONE;
		else
		{
			int64		tick = layout_tick(l, id);
			int64		mark = tick_ceiling(l, tick + window_ticks(l));

			if (write_mark(l, mark, must ? ERROR : LOG))
			{
				/* only now may IDs up to the new mark be handed out */
				pg_atomic_write_u64(&snowflake_shared->reserved, (uint64) mark);
				pg_atomic_write_u64(&snowflake_shared->extend_at,
									(uint64) tick_ceiling(l, tick + window_ticks(l) / 2));
				result = RESERVE_DONE;
			}
		}
	}
	LWLockRelease(snowflake_shared->lock);
	ConditionVariableBroadcast(&snowflake_shared->renewed);
	return result;
}

/*
 * Apply the recovery floor and make it durable at once, from the keeper as
 * soon as recovery ends, so that a crash before the first ID cannot lose
 * it.
 */
void
mark_settle(void)
{
	const SnowflakeLayout *l = snowflake_layout;

	if (snowflake_shared == NULL || !snowflake_shared->usable)
		return;
	LWLockAcquire(snowflake_shared->lock, LW_EXCLUSIVE);
	if (!snowflake_shared->floor_done && !snowflake_shared->state_broken)
	{
		FloorResult f = apply_floor(l);

		if (f == FLOOR_UNBOUNDED)
		{
			/*
			 * Backends refuse until a reload gives a bound or an operator
			 * repairs; the file says so, for a restart before then.
			 */
			if (!snowflake_shared->state_broken)
				(void) write_mark(l, Max(1, (int64) pg_atomic_read_u64(&snowflake_shared->last_id)), WARNING);
			LWLockRelease(snowflake_shared->lock);
			return;
		}
		if (f == FLOOR_MOVED)
		{
			int64		mark = (int64) pg_atomic_read_u64(&snowflake_shared->last_id);

			if (write_mark(l, mark, WARNING))
			{
				pg_atomic_write_u64(&snowflake_shared->reserved, (uint64) mark);
				pg_atomic_write_u64(&snowflake_shared->extend_at, (uint64) mark);
			}
		}
		snowflake_shared->floor_done = true;
	}
	LWLockRelease(snowflake_shared->lock);
}

/*
 * Called by the keeper every tenth of a window: while the node issues IDs,
 * keep the durable reservation at least half a window ahead of the last
 * one, so that backends rarely reach it.  The reservation follows the IDs,
 * not the clock: an idle node reserves nothing.
 */
void
mark_keep_ahead(void)
{
	const SnowflakeLayout *l = snowflake_layout;
	int64		last;
	int64		w = window_ticks(l);

	if (snowflake_shared == NULL || !snowflake_shared->usable ||
		snowflake_shared->state_broken || !snowflake_shared->floor_done)
		return;
	last = (int64) pg_atomic_read_u64(&snowflake_shared->last_id);
	if (last <= snowflake_shared->resumed_from)
		return;					/* nothing issued since start */
	if ((int64) pg_atomic_read_u64(&snowflake_shared->reserved) >=
		tick_ceiling(l, layout_tick(l, last) + w / 2))
		return;
	if (!LWLockConditionalAcquire(snowflake_shared->lock, LW_EXCLUSIVE))
		return;					/* a backend is renewing it */
	last = (int64) pg_atomic_read_u64(&snowflake_shared->last_id);
	if (!snowflake_shared->state_broken &&
		(int64) pg_atomic_read_u64(&snowflake_shared->reserved) <
		tick_ceiling(l, layout_tick(l, last) + w / 2))
	{
		int64		tick = layout_tick(l, last);
		int64		mark = tick_ceiling(l, tick + w);

		if (write_mark(l, mark, WARNING))
		{
			pg_atomic_write_u64(&snowflake_shared->reserved, (uint64) mark);
			/* backends renew by themselves only if they outrun the keeper */
			pg_atomic_write_u64(&snowflake_shared->extend_at,
								(uint64) tick_ceiling(l, tick + (3 * w) / 4));
		}
	}
	LWLockRelease(snowflake_shared->lock);
	ConditionVariableBroadcast(&snowflake_shared->renewed);
}

/*
 * Make a worker id the node's, in one step that every backend sees at its
 * next ID.  Called by the keeper at start and after each reload.
 */
void
mark_publish_worker(int worker)
{
	int			old;

	if (snowflake_shared == NULL || !snowflake_shared->usable)
		return;
	old = (int) pg_atomic_exchange_u32(&snowflake_shared->worker, (uint32) worker);
	if (old != worker)
		ereport(LOG,
				(errmsg("snowflake worker id changed from %d to %d", old, worker)));
}

/*
 * The operator's way out of a damaged state file: continue above the
 * largest of the given ID, the last checkpoint, the last replayed commit
 * and whatever the node still holds, and write a new file.  Returns the
 * ID that new IDs continue above.
 */
int64
mark_repair(int64 above)
{
	const SnowflakeLayout *l = snowflake_layout;
	int64		last;

	settings_require_usable();
	if (above < 0 || above >= layout_max_id(l))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("snowflake ID " INT64_FORMAT " is out of range for the \"%s\" layout",
						above, l->name),
				 errdetail("New IDs must be greater, and the largest ID of the layout is " INT64_FORMAT ".",
						   layout_max_id(l))));

	LWLockAcquire(snowflake_shared->lock, LW_EXCLUSIVE);
	if (snowflake_shared->state_broken && snowflake_shared->prev_layout[0] != '\0')
	{
		LWLockRelease(snowflake_shared->lock);
		refuse_broken();
	}
	if (apply_floor(l) == FLOOR_UNBOUNDED && above == 0)
	{
		LWLockRelease(snowflake_shared->lock);
		refuse_unbounded();
	}
	atomic_raise(&snowflake_shared->last_id, (uint64) above);
	last = (int64) pg_atomic_read_u64(&snowflake_shared->last_id);

	/* a new file, whole, whatever the old one holds */
	snowflake_shared->floor_done = true;
	snowflake_shared->writes = 0;
	(void) write_mark(l, last, ERROR);

	pg_atomic_write_u64(&snowflake_shared->reserved, (uint64) last);
	pg_atomic_write_u64(&snowflake_shared->extend_at, (uint64) last);
	snowflake_shared->resumed_from = last;
	snowflake_shared->floor_done = true;
	snowflake_shared->state_broken = false;
	snowflake_shared->state_problem[0] = '\0';
	LWLockRelease(snowflake_shared->lock);
	ConditionVariableBroadcast(&snowflake_shared->renewed);

	ereport(LOG,
			(errmsg("snowflake state file \"%s\" rewritten: new IDs continue above " INT64_FORMAT,
					SNOWFLAKE_MARK_FILE, last)));
	return last;
}

/*
 * At a clean shutdown, record the exact last ID (not the reservation), so
 * that a restart does not wait for the clock to pass the reservation.
 * Runs in the postmaster after every other process has exited.
 */
static void
mark_shutdown(int code, Datum arg)
{
	const SnowflakeLayout *l = snowflake_layout;
	int64		last;

	if (code != 0 || snowflake_shared == NULL || !snowflake_shared->usable ||
		snowflake_shared->state_broken)
		return;
	last = (int64) pg_atomic_read_u64(&snowflake_shared->last_id);
	if (last > snowflake_shared->resumed_from)
		(void) write_mark(l, last, LOG);
}
