/*-------------------------------------------------------------------------
 *
 * generator.c
 *	  The node's generator state in shared memory, the lock-free hot path
 *	  and the policy for a clock that is behind the IDs already issued.
 *
 * The whole state is the last ID issued on this node, in one 64-bit atomic
 * word.  A new ID is computed from it and installed with one
 * compare-and-swap, so every ID the node issues is greater than every ID it
 * issued before, whichever backend or database asks.  Beside it sits the
 * highest clock reading seen, which tells a clock that went backwards from
 * a generator that ran ahead of the clock on purpose.
 *
 * The IDs a node may issue are bounded by a durable reservation (see
 * persist.c): an ID above it is only handed out once the next reservation,
 * a window ahead, is on disk.  The hot path compares against one more word
 * on the same cache line.  The keeper worker renews the reservation ahead
 * of time; a backend that outruns it renews it itself (without blocking the
 * others while there is room), and waits only at the reservation's end.
 *
 * Statistics are kept per backend slot, each written only by its owner, so
 * counting adds no shared write to the hot path; readers add the slots up.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <time.h>

#include "access/twophase.h"
#include "access/xlog.h"
#include "access/xlogrecovery.h"
#include "common/pg_prng.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/s_lock.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"

#include "persist.h"
#include "snowflake.h"

/* Counters of one backend slot, alone on a cache line. */
typedef union CounterSlot
{
	struct
	{
		pg_atomic_uint64 issued;
		pg_atomic_uint64 waits;
		pg_atomic_uint64 run_ahead_ids;
		pg_atomic_uint64 refused;
	}			c;
	char		pad[PG_CACHE_LINE_SIZE];
} CounterSlot;

typedef struct GeneratorShared
{
	/* the hot cache line: written once per ID */
	pg_atomic_uint64 last_id;
	pg_atomic_uint64 seen_tick;	/* highest clock tick read so far */
	pg_atomic_uint64 extend_at;	/* an ID above this renews the reservation */
	pg_atomic_uint64 reserved;	/* durable: no ID above it is issued */
	char		pad[PG_CACHE_LINE_SIZE - 4 * sizeof(pg_atomic_uint64)];

	/* the reservation; fields below are changed under the lock */
	LWLock	   *lock;
	bool		floor_done;		/* the recovery floor has been applied */
	bool		state_broken;	/* the state file cannot be trusted */
	char		state_problem[64];
	char		prev_layout[NAMEDATALEN];	/* set when the layout changed */

	/* written only when the clock goes backwards */
	pg_atomic_uint64 back_counted_tick;
	pg_atomic_uint64 clock_back_events;
	pg_atomic_uint64 clock_back_max_ms;

	TimestampTz started;
	int			nslots;
	CounterSlot slots[FLEXIBLE_ARRAY_MEMBER];
} GeneratorShared;

static GeneratorShared *gen = NULL;

/* What to do with a candidate ID that is ahead of the clock. */
typedef enum Verdict
{
	ISSUE,
	WAIT,
	REFUSE_CLOCK_BACK,
	REFUSE_AHEAD
} Verdict;

static int
slot_count(void)
{
	return MaxBackends + NUM_AUXILIARY_PROCS + max_prepared_xacts;
}

/* Raise a shared maximum; lock-free, used off the hot path only. */
static void
atomic_raise(pg_atomic_uint64 *ptr, uint64 value)
{
	uint64		cur = pg_atomic_read_u64(ptr);

	while (cur < value)
	{
		if (pg_atomic_compare_exchange_u64(ptr, &cur, value))
			break;
	}
}

/* Unix time in ms; clock_gettime is a vDSO call, no system call. */
static inline int64
clock_unix_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline int64
clock_unix_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
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
	return layout_compose(l, Min(tick, layout_max_tick(l)),
						  layout_max_worker(l), layout_max_seq(l));
}

/* Set the state from the mark the file holds, at server start. */
static void
load_mark(const SnowflakeLayout *l)
{
	PersistedMark m;
	const char *problem = NULL;

	switch (persist_read(&m, &problem))
	{
		case MARK_ABSENT:
			break;
		case MARK_BROKEN:
			gen->state_broken = true;
			strlcpy(gen->state_problem, problem, sizeof(gen->state_problem));
			ereport(WARNING,
					(errmsg("snowflake state file \"snowflake.state\" cannot be used: %s", problem),
					 errdetail("The generator refuses to issue IDs until it is repaired.")));
			break;
		case MARK_OK:
			pg_atomic_write_u64(&gen->last_id, (uint64) m.mark_id);
			pg_atomic_write_u64(&gen->reserved, (uint64) m.mark_id);
			pg_atomic_write_u64(&gen->extend_at, (uint64) m.mark_id);
			pg_atomic_write_u64(&gen->seen_tick,
								(uint64) Max(0, layout_unix_ms_to_tick(l, m.seen_unix_ms)));
			if (strcmp(m.layout, l->name) != 0)
			{
				strlcpy(gen->prev_layout, m.layout, sizeof(gen->prev_layout));
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

	atomic_raise(&gen->seen_tick, (uint64) tick);
	if ((uint64) floor_id <= pg_atomic_read_u64(&gen->last_id))
		return false;
	atomic_raise(&gen->last_id, (uint64) floor_id);
	return true;
}

static void
refuse_broken(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("snowflake state file \"snowflake.state\" cannot be used: %s",
					gen->state_problem),
			 errdetail("The file holds the highest ID this node may have issued; without it a restart with the clock set back could repeat IDs."),
			 errhint("Move the file out of the data directory and restart the server; IDs then continue from the system clock.")));
}

/*
 * Make sure a reservation covering id is durable.  With must, wait for the
 * lock; otherwise renew only if nobody else is at it.  Returns true if the
 * state moved under the caller (the recovery floor was applied).
 */
static bool
reserve(const SnowflakeLayout *l, int64 id, bool must)
{
	bool		moved = false;

	if (must)
		LWLockAcquire(gen->lock, LW_EXCLUSIVE);
	else if (!LWLockConditionalAcquire(gen->lock, LW_EXCLUSIVE))
		return false;

	if (gen->state_broken)
	{
		LWLockRelease(gen->lock);
		refuse_broken();
	}
	if (!gen->floor_done)
	{
		moved = apply_floor(l);
		gen->floor_done = true;
	}
	if (!moved && (uint64) id > pg_atomic_read_u64(&gen->extend_at))
	{
		int64		tick = layout_tick(l, id);
		PersistedMark m;

		m.mark_id = tick_ceiling(l, tick + window_ticks(l));
		m.seen_unix_ms = layout_tick_to_unix_ms(l, (int64) pg_atomic_read_u64(&gen->seen_tick));
		strlcpy(m.layout, l->name, sizeof(m.layout));
		persist_write(&m, ERROR);

		/* only now may IDs up to the new mark be handed out */
		pg_atomic_write_u64(&gen->reserved, (uint64) m.mark_id);
		pg_atomic_write_u64(&gen->extend_at,
							(uint64) tick_ceiling(l, tick + window_ticks(l) / 2));
	}
	LWLockRelease(gen->lock);
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

	if (gen == NULL)
		return;
	LWLockAcquire(gen->lock, LW_EXCLUSIVE);
	if (!gen->floor_done && !gen->state_broken)
	{
		if (apply_floor(l))
		{
			PersistedMark m;

			m.mark_id = (int64) pg_atomic_read_u64(&gen->last_id);
			m.seen_unix_ms = layout_tick_to_unix_ms(l, (int64) pg_atomic_read_u64(&gen->seen_tick));
			strlcpy(m.layout, l->name, sizeof(m.layout));
			persist_write(&m, ERROR);
			pg_atomic_write_u64(&gen->reserved, (uint64) m.mark_id);
			pg_atomic_write_u64(&gen->extend_at, (uint64) m.mark_id);
		}
		gen->floor_done = true;
	}
	LWLockRelease(gen->lock);
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

	if (gen == NULL || gen->state_broken || snowflake_layout_problem != NULL)
		return;
	last = (int64) pg_atomic_read_u64(&gen->last_id);
	if (last == 0)
		return;					/* nothing issued yet: nothing to protect */

	base = Max(layout_unix_ms_to_tick(l, clock_unix_ms()), layout_tick(l, last));
	if (layout_tick(l, (int64) pg_atomic_read_u64(&gen->reserved)) >= base + w / 2)
		return;
	if (!LWLockConditionalAcquire(gen->lock, LW_EXCLUSIVE))
		return;					/* a backend is renewing it */
	if (gen->floor_done &&
		layout_tick(l, (int64) pg_atomic_read_u64(&gen->reserved)) < base + w / 2)
	{
		PersistedMark m;

		m.mark_id = tick_ceiling(l, base + w);
		m.seen_unix_ms = layout_tick_to_unix_ms(l, (int64) pg_atomic_read_u64(&gen->seen_tick));
		strlcpy(m.layout, l->name, sizeof(m.layout));
		persist_write(&m, ERROR);
		pg_atomic_write_u64(&gen->reserved, (uint64) m.mark_id);
		/* backends renew by themselves only if they outrun the keeper */
		pg_atomic_write_u64(&gen->extend_at, (uint64) tick_ceiling(l, base + (3 * w) / 4));
	}
	LWLockRelease(gen->lock);
}

/*
 * At a clean shutdown, record the exact last ID (not the reservation), so
 * that a restart does not wait for the clock to pass the reservation.
 */
static void
generator_shutdown(int code, Datum arg)
{
	const SnowflakeLayout *l = snowflake_layout;
	PersistedMark m;

	if (code != 0 || gen == NULL || gen->state_broken)
		return;
	if (!gen->floor_done)
		(void) apply_floor(l);
	m.mark_id = (int64) pg_atomic_read_u64(&gen->last_id);
	if (m.mark_id == 0)
		return;
	m.seen_unix_ms = layout_tick_to_unix_ms(l, (int64) pg_atomic_read_u64(&gen->seen_tick));
	strlcpy(m.layout, l->name, sizeof(m.layout));
	persist_write(&m, LOG);
}

Size
generator_shmem_size(void)
{
	return add_size(offsetof(GeneratorShared, slots),
					mul_size(slot_count(), sizeof(CounterSlot)));
}

/* Called with AddinShmemInitLock held. */
void
generator_shmem_init(void)
{
	bool		found;

	gen = ShmemInitStruct("snowflake generator", generator_shmem_size(), &found);
	if (found)
		return;

	pg_atomic_init_u64(&gen->last_id, 0);
	pg_atomic_init_u64(&gen->seen_tick, 0);
	pg_atomic_init_u64(&gen->extend_at, 0);
	pg_atomic_init_u64(&gen->reserved, 0);
	gen->lock = &(GetNamedLWLockTranche("snowflake"))->lock;
	gen->floor_done = false;
	gen->state_broken = false;
	gen->prev_layout[0] = '\0';
	pg_atomic_init_u64(&gen->back_counted_tick, 0);
	pg_atomic_init_u64(&gen->clock_back_events, 0);
	pg_atomic_init_u64(&gen->clock_back_max_ms, 0);
	gen->started = GetCurrentTimestamp();
	gen->nslots = slot_count();
	for (int i = 0; i < gen->nslots; i++)
	{
		pg_atomic_init_u64(&gen->slots[i].c.issued, 0);
		pg_atomic_init_u64(&gen->slots[i].c.waits, 0);
		pg_atomic_init_u64(&gen->slots[i].c.run_ahead_ids, 0);
		pg_atomic_init_u64(&gen->slots[i].c.refused, 0);
	}
	load_mark(snowflake_layout);

	if (!IsUnderPostmaster)
		on_shmem_exit(generator_shutdown, (Datum) 0);
}

bool
generator_attached(void)
{
	return gen != NULL;
}

/*
 * Add one to a counter of this backend's slot.  The slot has one writer, so
 * a plain read and write suffice; the atomic type only keeps readers from
 * seeing a torn value.
 */
static inline void
count(pg_atomic_uint64 *counter)
{
	pg_atomic_write_u64(counter, pg_atomic_read_u64(counter) + 1);
}

static inline CounterSlot *
my_slot(void)
{
	int			i = MyProc ? MyProc->pgprocno : 0;

	return &gen->slots[i < gen->nslots ? i : 0];
}

static char *
unix_ms_to_str(int64 unix_ms)
{
	const SnowflakeLayout *l = snowflake_layout;

	/* any layout converts ms the same way; go through tick 0 of this one */
	return pstrdup(timestamptz_to_str(layout_tick_to_timestamptz(l, 0) +
									  (unix_ms - l->epoch_ms) * 1000));
}

/*
 * The first sequence number of a new tick.  Starting at a random point in
 * the lowest 1/64 of the sequence range keeps the low bits of IDs spread
 * when traffic is low (one ID per tick would otherwise always end in 0),
 * at a cost of 1/128 of a tick's capacity on average.
 */
static inline int64
first_seq(const SnowflakeLayout *l)
{
	int			bits = l->seq_bits > 6 ? l->seq_bits - 6 : 0;

	if (bits == 0)
		return 0;
	return (int64) (pg_prng_uint64(&pg_global_prng_state) & LAYOUT_MASK(bits));
}

/*
 * Wait until the clock reads unix_ms.  The common wait, for the next tick
 * after a tick's sequence numbers ran out, is shorter than the timer
 * slack of a sleep, so short waits spin on the clock (as ShardingSphere's
 * generator does); longer ones sleep.  Interrupts are served either way.
 */
static void
wait_until(int64 unix_ms)
{
	int			spins = 0;

	for (;;)
	{
		int64		left = unix_ms * 1000 - clock_unix_us();

		if (left <= 0)
			return;
		if (left > 2000)
		{
			CHECK_FOR_INTERRUPTS();
			pg_usleep(Min(left - 1000, 100000));
		}
		else if (++spins % 1024 == 0)
			CHECK_FOR_INTERRUPTS();
		else
			pg_spin_delay();
	}
}

/* Count one episode of the clock going back, once across all backends. */
static void
note_clock_back(int64 seen, int64 back_ms)
{
	uint64		counted = pg_atomic_read_u64(&gen->back_counted_tick);

	if (counted != (uint64) seen &&
		pg_atomic_compare_exchange_u64(&gen->back_counted_tick, &counted,
									   (uint64) seen))
		pg_atomic_fetch_add_u64(&gen->clock_back_events, 1);
	atomic_raise(&gen->clock_back_max_ms, (uint64) back_ms);
}

/*
 * Decide about a candidate tick that is ahead of the clock, either because
 * this tick's sequence is used up or because the clock is behind the last
 * ID.  back_ms is how far the clock is behind the highest reading seen
 * (0 when it has not gone backwards).  *until_ms is set to the time at
 * which waiting ends.
 */
static Verdict
judge(const SnowflakeLayout *l, int64 tick, int64 now, int64 seen,
	  int64 back_ms, int64 *until_ms)
{
	int64		ahead_ms = (tick - now) * l->tick_ms;
	int64		allowed_ms = snowflake_max_run_ahead_ms;

	/* a small step back is waited out, as ShardingSphere does */
	if (back_ms > 0 && back_ms <= snowflake_max_clock_backward_ms)
	{
		*until_ms = layout_tick_to_unix_ms(l, seen);
		return WAIT;
	}
	if (allowed_ms < 0 || ahead_ms <= allowed_ms)
		return ISSUE;

	/* the clock must reach the candidate's tick, less what may run ahead */
	*until_ms = layout_tick_to_unix_ms(l, tick - allowed_ms / l->tick_ms);
	if (back_ms > 0)
		return REFUSE_CLOCK_BACK;
	/*
	 * The clock did not go back: the generator is ahead because a tick was
	 * used up, or it resumed from a reservation after a crash.  Wait, but
	 * not for longer than a reservation reaches.
	 */
	if (ahead_ms - allowed_ms <= Max(SNOWFLAKE_WINDOW_MS, snowflake_max_clock_backward_ms))
		return WAIT;
	return REFUSE_AHEAD;
}

static void
refuse(Verdict v, const SnowflakeLayout *l, int64 last_tick, int64 now_ms,
	   int64 back_ms, int64 ahead_ms, int64 until_ms)
{
	count(&my_slot()->c.refused);

	if (v == REFUSE_CLOCK_BACK)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("system clock moved backwards by " INT64_FORMAT " ms", back_ms),
				 errdetail("The last snowflake ID carries the time %s and the clock reads %s; "
						   "IDs can be issued again when the clock reaches %s.",
						   unix_ms_to_str(layout_tick_to_unix_ms(l, last_tick)),
						   unix_ms_to_str(now_ms),
						   unix_ms_to_str(until_ms)),
				 errhint("snowflake.max_clock_backward_ms (%d ms) limits waiting for the clock and snowflake.max_run_ahead_ms (%d ms) limits issuing IDs ahead of it; raise either to keep generating.",
						 snowflake_max_clock_backward_ms,
						 snowflake_max_run_ahead_ms)));
	if (gen->prev_layout[0] != '\0')
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("snowflake layout \"%s\" cannot continue above the IDs issued under layout \"%s\"",
						l->name, gen->prev_layout),
				 errdetail("The last ID, read in the \"%s\" layout, carries the time %s; new IDs must be greater, and the clock reads %s.",
						   l->name, unix_ms_to_str(layout_tick_to_unix_ms(l, last_tick)),
						   unix_ms_to_str(now_ms)),
				 errhint("Go back to snowflake.layout = '%s', or choose a layout whose IDs at this time are greater than the last ID.",
						 gen->prev_layout)));
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("snowflake generator is " INT64_FORMAT " ms ahead of the system clock",
					ahead_ms),
			 errdetail("The last snowflake ID carries the time %s and the clock reads %s; "
					   "IDs can be issued again when the clock reaches %s.",
					   unix_ms_to_str(layout_tick_to_unix_ms(l, last_tick)),
					   unix_ms_to_str(now_ms),
					   unix_ms_to_str(until_ms)),
			 errhint("snowflake.max_run_ahead_ms (%d ms) limits issuing IDs ahead of the clock; raise it to keep generating.",
					 snowflake_max_run_ahead_ms)));
}

static void
not_preloaded(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("snowflake must be loaded via \"shared_preload_libraries\""),
			 errdetail("The generator keeps its state in shared memory, which is set up at server start."),
			 errhint("Add 'snowflake' to shared_preload_libraries in postgresql.conf and restart the server.")));
}

/*
 * Issue the next ID of this node.
 */
int64
generator_next(void)
{
	const SnowflakeLayout *l = snowflake_layout;
	int64		worker = snowflake_worker_id;
	bool		fresh_clock = false;
	uint64		old;

	if (unlikely(gen == NULL))
		not_preloaded();
	if (unlikely(snowflake_layout_problem != NULL))
		snowflake_check_layout();
	if (unlikely(RecoveryInProgress()))
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot generate snowflake IDs during recovery"),
				 errdetail("A standby shares the worker id of its primary; IDs it issued would collide."),
				 errhint("Generate IDs on the primary, or promote this standby first.")));

	old = pg_atomic_read_u64(&gen->last_id);
	for (;;)
	{
		int64		now_ms = clock_unix_ms();
		int64		now = layout_unix_ms_to_tick(l, now_ms);
		int64		seen = (int64) pg_atomic_read_u64(&gen->seen_tick);
		int64		last_tick = layout_tick(l, (int64) old);
		int64		tick;
		int64		seq;
		int64		id;

		if (unlikely(now < 0))
			ereport(ERROR,
					(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
					 errmsg("system clock reads %s, before the epoch of the snowflake layout \"%s\"",
							unix_ms_to_str(now_ms), l->name),
					 errhint("Set the system clock right.")));
		if (now > seen)
		{
			atomic_raise(&gen->seen_tick, (uint64) now);
			seen = now;
		}

		if (now > last_tick)
		{
			tick = now;
			seq = first_seq(l);
		}
		else if (layout_worker(l, (int64) old) == worker &&
				 layout_seq(l, (int64) old) < layout_max_seq(l))
		{
			tick = last_tick;
			seq = layout_seq(l, (int64) old) + 1;
		}
		else
		{
			/* sequence used up, or the worker id changed: next tick */
			tick = last_tick + 1;
			seq = 0;
		}

		if (unlikely(tick > layout_max_tick(l)))
			ereport(ERROR,
					(errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
					 errmsg("snowflake layout \"%s\" has run out of time bits", l->name),
					 errdetail("Its last representable time is %s.",
							   unix_ms_to_str(layout_tick_to_unix_ms(l, layout_max_tick(l)))),
					 errhint("Move to a layout with a later end of life.")));

		if (tick > now)
		{
			int64		back_ms;
			int64		until_ms = 0;
			Verdict		v;

			/*
			 * Another backend may have read the clock a moment after us and
			 * moved the state on; read it again before judging.
			 */
			if (!fresh_clock)
			{
				fresh_clock = true;
				old = pg_atomic_read_u64(&gen->last_id);
				continue;
			}
			fresh_clock = false;

			back_ms = seen > now ? (seen - now) * l->tick_ms : 0;
			if (back_ms > 0)
				note_clock_back(seen, back_ms);
			v = judge(l, tick, now, seen, back_ms, &until_ms);
			if (v == WAIT)
			{
				count(&my_slot()->c.waits);
				wait_until(until_ms);
				old = pg_atomic_read_u64(&gen->last_id);
				continue;
			}
			if (v != ISSUE)
				refuse(v, l, last_tick, now_ms, back_ms,
					   (tick - now) * l->tick_ms, until_ms);
		}

		id = layout_compose(l, tick, worker, seq);
		if (unlikely((uint64) id > pg_atomic_read_u64(&gen->extend_at)))
		{
			bool		must = (uint64) id > pg_atomic_read_u64(&gen->reserved);

			if (reserve(l, id, must) || must)
			{
				old = pg_atomic_read_u64(&gen->last_id);
				continue;
			}
		}
		if (pg_atomic_compare_exchange_u64(&gen->last_id, &old, (uint64) id))
		{
			CounterSlot *s = my_slot();

			count(&s->c.issued);
			if (tick > now)
				count(&s->c.run_ahead_ids);
			return id;
		}
		/* lost the race: old now holds the winner's ID */
	}
}

void
generator_status(GeneratorStatus *st)
{
	const SnowflakeLayout *l = snowflake_layout;
	int64		last_tick;
	int64		now;

	memset(st, 0, sizeof(*st));
	if (gen == NULL)
		not_preloaded();

	st->last_id = (int64) pg_atomic_read_u64(&gen->last_id);
	st->high_water_mark = (int64) pg_atomic_read_u64(&gen->reserved);
	for (int i = 0; i < gen->nslots; i++)
	{
		st->issued += pg_atomic_read_u64(&gen->slots[i].c.issued);
		st->waits += pg_atomic_read_u64(&gen->slots[i].c.waits);
		st->run_ahead_ids += pg_atomic_read_u64(&gen->slots[i].c.run_ahead_ids);
		st->refused += pg_atomic_read_u64(&gen->slots[i].c.refused);
	}
	st->clock_back_events = pg_atomic_read_u64(&gen->clock_back_events);
	st->clock_back_max_ms = pg_atomic_read_u64(&gen->clock_back_max_ms);
	st->started = gen->started;

	now = layout_unix_ms_to_tick(l, clock_unix_ms());
	last_tick = layout_tick(l, st->last_id);
	st->run_ahead_ms = st->last_id > 0 && last_tick > now ?
		(last_tick - now) * l->tick_ms : 0;
}
