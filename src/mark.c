/*-------------------------------------------------------------------------
 *
 * mark.c
 *	  The durable high-water mark: loading it at server start, the floor
 *	  after recovery, the reservations that bound the IDs a node may issue,
 *	  their renewal by the keeper worker, and the exact record at shutdown.
 *
 * The generator reserves ID time a window ahead and makes the reservation
 * durable (persist.c) before it hands out an ID beyond the previous one.
 * The keeper renews it ahead of time; a backend that outruns the keeper
 * renews it itself (without blocking the others while there is room), and
 * waits only at the reservation's end.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlogrecovery.h"
#include "storage/lwlock.h"
#include "utils/timestamp.h"

#include "persist.h"
#include "snowflake.h"
#include "state.h"

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
	return layout_compose(l, Min(tick, layout_max_tick(l)),
						  layout_max_worker(l), layout_max_seq(l));
}

/* Make mark_id durable as the high-water mark, with the clock seen so far. */
static void
write_mark(const SnowflakeLayout *l, int64 mark_id, int elevel)
{
	PersistedMark m;

	m.mark_id = mark_id;
	m.seen_unix_ms = layout_tick_to_unix_ms(l, (int64) pg_atomic_read_u64(&snowflake_shared->seen_tick));
	strlcpy(m.layout, l->name, sizeof(m.layout));
	persist_write(&m, elevel);
}

/* Set the state from the mark the file holds, at server start. */
void
mark_load(const SnowflakeLayout *l)
{
	PersistedMark m;
	const char *problem = NULL;

	switch (persist_read(&m, &problem))
	{
		case MARK_ABSENT:
			break;
		case MARK_BROKEN:
			snowflake_shared->state_broken = true;
			strlcpy(snowflake_shared->state_problem, problem, sizeof(snowflake_shared->state_problem));
			ereport(WARNING,
					(errmsg("snowflake state file \"snowflake.state\" cannot be used: %s", problem),
					 errdetail("The generator refuses to issue IDs until it is repaired.")));
			break;
		case MARK_OK:
			pg_atomic_write_u64(&snowflake_shared->last_id, (uint64) m.mark_id);
			pg_atomic_write_u64(&snowflake_shared->reserved, (uint64) m.mark_id);
			pg_atomic_write_u64(&snowflake_shared->extend_at, (uint64) m.mark_id);
			pg_atomic_write_u64(&snowflake_shared->seen_tick,
								(uint64) Max(0, layout_unix_ms_to_tick(l, m.seen_unix_ms)));
			if (strcmp(m.layout, l->name) != 0)
			{
				strlcpy(snowflake_shared->prev_layout, m.layout, sizeof(snowflake_shared->prev_layout));
				ereport(LOG,
						(errmsg("snowflake layout changed from \"%s\" to \"%s\"; new IDs continue above " INT64_FORMAT,
								m.layout, l->name, m.mark_id)));
			}
			break;
	}
}

/*
 * After recovery (a promoted standby, a point-in-time restore, a crash
 * restart) the node may not have the mark of the server whose WAL it
 * replayed.  Every ID that server committed was issued before its commit,
 * at a time at most max_run_ahead_ms ahead of the commit's clock, so the
 * last replayed commit bounds them.  Returns true if the state moved.
 * Called with the lock held.
 */
static bool
apply_floor(const SnowflakeLayout *l)
{
	TimestampTz latest = GetLatestXTime();
	int64		tick;
	int64		ahead;
	int64		floor_id;

	if (latest == 0)
		return false;
	tick = layout_timestamptz_to_tick(l, latest);
	if (tick < 0)
		return false;
	ahead = snowflake_max_run_ahead_ms > 0 ?
		(snowflake_max_run_ahead_ms + l->tick_ms - 1) / l->tick_ms : 0;
	floor_id = tick_ceiling(l, tick + ahead);

	atomic_raise(&snowflake_shared->seen_tick, (uint64) tick);
	if ((uint64) floor_id <= pg_atomic_read_u64(&snowflake_shared->last_id))
		return false;
	atomic_raise(&snowflake_shared->last_id, (uint64) floor_id);
	return true;
}

static void
refuse_broken(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("snowflake state file \"snowflake.state\" cannot be used: %s",
					snowflake_shared->state_problem),
			 errdetail("The file holds the highest ID this node may have issued; without it a restart with the clock set back could repeat IDs."),
			 errhint("Move the file out of the data directory and restart the server; IDs then continue from the system clock.")));
}

/*
 * Make sure a reservation covering id is durable.  With must, wait for the
 * lock; otherwise renew only if nobody else is at it.  Returns true if the
 * state moved under the caller (the recovery floor was applied).
 */
bool
mark_reserve(const SnowflakeLayout *l, int64 id, bool must)
{
	bool		moved = false;

	if (must)
		LWLockAcquire(snowflake_shared->lock, LW_EXCLUSIVE);
	else if (!LWLockConditionalAcquire(snowflake_shared->lock, LW_EXCLUSIVE))
		return false;

	if (snowflake_shared->state_broken)
	{
		LWLockRelease(snowflake_shared->lock);
		refuse_broken();
	}
	if (!snowflake_shared->floor_done)
	{
		moved = apply_floor(l);
		snowflake_shared->floor_done = true;
	}
	if (!moved && (uint64) id > pg_atomic_read_u64(&snowflake_shared->extend_at))
	{
		int64		tick = layout_tick(l, id);
		int64		mark = tick_ceiling(l, tick + window_ticks(l));

		write_mark(l, mark, ERROR);

		/* only now may IDs up to the new mark be handed out */
		pg_atomic_write_u64(&snowflake_shared->reserved, (uint64) mark);
		pg_atomic_write_u64(&snowflake_shared->extend_at,
							(uint64) tick_ceiling(l, tick + window_ticks(l) / 2));
	}
	LWLockRelease(snowflake_shared->lock);
	return moved;
}

/*
 * Apply the recovery floor and make it durable at once, from the keeper as
 * soon as recovery ends, so that a crash before the first ID cannot lose
 * it.
 */
void
generator_settle(void)
{
	const SnowflakeLayout *l = snowflake_layout;

	if (snowflake_shared == NULL)
		return;
	LWLockAcquire(snowflake_shared->lock, LW_EXCLUSIVE);
	if (!snowflake_shared->floor_done && !snowflake_shared->state_broken)
	{
		if (apply_floor(l))
		{
			int64		mark = (int64) pg_atomic_read_u64(&snowflake_shared->last_id);

			write_mark(l, mark, ERROR);
			pg_atomic_write_u64(&snowflake_shared->reserved, (uint64) mark);
			pg_atomic_write_u64(&snowflake_shared->extend_at, (uint64) mark);
		}
		snowflake_shared->floor_done = true;
	}
	LWLockRelease(snowflake_shared->lock);
}

/*
 * Called by the keeper every tenth of a window: once the node has issued
 * IDs, keep the durable reservation at least half a window ahead of both
 * the clock and the last ID, so that backends rarely reach it.
 */
void
generator_keep_ahead(void)
{
	const SnowflakeLayout *l = snowflake_layout;
	int64		last;
	int64		base;
	int64		w = window_ticks(l);

	if (snowflake_shared == NULL || snowflake_shared->state_broken || snowflake_layout_problem != NULL)
		return;
	last = (int64) pg_atomic_read_u64(&snowflake_shared->last_id);
	if (last == 0)
		return;					/* nothing issued yet: nothing to protect */

	base = Max(layout_unix_ms_to_tick(l, clock_unix_ms()), layout_tick(l, last));
	if (layout_tick(l, (int64) pg_atomic_read_u64(&snowflake_shared->reserved)) >= base + w / 2)
		return;
	if (!LWLockConditionalAcquire(snowflake_shared->lock, LW_EXCLUSIVE))
		return;					/* a backend is renewing it */
	if (snowflake_shared->floor_done &&
		layout_tick(l, (int64) pg_atomic_read_u64(&snowflake_shared->reserved)) < base + w / 2)
	{
		int64		mark = tick_ceiling(l, base + w);

		write_mark(l, mark, ERROR);
		pg_atomic_write_u64(&snowflake_shared->reserved, (uint64) mark);
		/* backends renew by themselves only if they outrun the keeper */
		pg_atomic_write_u64(&snowflake_shared->extend_at, (uint64) tick_ceiling(l, base + (3 * w) / 4));
	}
	LWLockRelease(snowflake_shared->lock);
}

/*
 * At a clean shutdown, record the exact last ID (not the reservation), so
 * that a restart does not wait for the clock to pass the reservation.
 */
void
mark_shutdown(int code, Datum arg)
{
	const SnowflakeLayout *l = snowflake_layout;
	int64		last;

	if (code != 0 || snowflake_shared == NULL || snowflake_shared->state_broken)
		return;
	if (!snowflake_shared->floor_done)
		(void) apply_floor(l);
	last = (int64) pg_atomic_read_u64(&snowflake_shared->last_id);
	if (last != 0)
		write_mark(l, last, LOG);
}
