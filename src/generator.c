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
 * The IDs a node may issue are bounded by a durable reservation (mark.c):
 * the hot path compares each new ID against one more word on the same
 * cache line, and only an ID beyond it goes to mark.c.
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
#include "common/pg_prng.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "storage/s_lock.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "snowflake.h"
#include "state.h"

GeneratorShared *snowflake_shared = NULL;

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
void
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
int64
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

	snowflake_shared = ShmemInitStruct("snowflake generator", generator_shmem_size(), &found);
	if (found)
		return;

	pg_atomic_init_u64(&snowflake_shared->last_id, 0);
	pg_atomic_init_u64(&snowflake_shared->seen_tick, 0);
	pg_atomic_init_u64(&snowflake_shared->extend_at, 0);
	pg_atomic_init_u64(&snowflake_shared->reserved, 0);
	snowflake_shared->lock = &(GetNamedLWLockTranche("snowflake"))->lock;
	snowflake_shared->floor_done = false;
	snowflake_shared->state_broken = false;
	snowflake_shared->prev_layout[0] = '\0';
	pg_atomic_init_u64(&snowflake_shared->back_counted_tick, 0);
	pg_atomic_init_u64(&snowflake_shared->clock_back_events, 0);
	pg_atomic_init_u64(&snowflake_shared->clock_back_max_ms, 0);
	snowflake_shared->started = GetCurrentTimestamp();
	snowflake_shared->nslots = slot_count();
	for (int i = 0; i < snowflake_shared->nslots; i++)
	{
		pg_atomic_init_u64(&snowflake_shared->slots[i].c.issued, 0);
		pg_atomic_init_u64(&snowflake_shared->slots[i].c.waits, 0);
		pg_atomic_init_u64(&snowflake_shared->slots[i].c.run_ahead_ids, 0);
		pg_atomic_init_u64(&snowflake_shared->slots[i].c.refused, 0);
	}
	mark_load(snowflake_layout);

	if (!IsUnderPostmaster)
		on_shmem_exit(mark_shutdown, (Datum) 0);
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
	int			i = MyProcNumber >= 0 ? MyProcNumber : 0;

	return &snowflake_shared->slots[i < snowflake_shared->nslots ? i : 0];
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
	uint64		counted = pg_atomic_read_u64(&snowflake_shared->back_counted_tick);

	if (counted != (uint64) seen &&
		pg_atomic_compare_exchange_u64(&snowflake_shared->back_counted_tick, &counted,
									   (uint64) seen))
		pg_atomic_fetch_add_u64(&snowflake_shared->clock_back_events, 1);
	atomic_raise(&snowflake_shared->clock_back_max_ms, (uint64) back_ms);
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
	if (snowflake_shared->prev_layout[0] != '\0')
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("snowflake layout \"%s\" cannot continue above the IDs issued under layout \"%s\"",
						l->name, snowflake_shared->prev_layout),
				 errdetail("The last ID, read in the \"%s\" layout, carries the time %s; new IDs must be greater, and the clock reads %s.",
						   l->name, unix_ms_to_str(layout_tick_to_unix_ms(l, last_tick)),
						   unix_ms_to_str(now_ms)),
				 errhint("Go back to snowflake.layout = '%s', or choose a layout whose IDs at this time are greater than the last ID.",
						 snowflake_shared->prev_layout)));
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

	if (unlikely(snowflake_shared == NULL))
		not_preloaded();
	if (unlikely(snowflake_layout_problem != NULL))
		snowflake_check_layout();
	if (unlikely(RecoveryInProgress()))
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot generate snowflake IDs during recovery"),
				 errdetail("A standby shares the worker id of its primary; IDs it issued would collide."),
				 errhint("Generate IDs on the primary, or promote this standby first.")));

	old = pg_atomic_read_u64(&snowflake_shared->last_id);
	for (;;)
	{
		int64		now_ms = clock_unix_ms();
		int64		now = layout_unix_ms_to_tick(l, now_ms);
		int64		seen = (int64) pg_atomic_read_u64(&snowflake_shared->seen_tick);
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
			atomic_raise(&snowflake_shared->seen_tick, (uint64) now);
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
				old = pg_atomic_read_u64(&snowflake_shared->last_id);
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
				old = pg_atomic_read_u64(&snowflake_shared->last_id);
				continue;
			}
			if (v != ISSUE)
				refuse(v, l, last_tick, now_ms, back_ms,
					   (tick - now) * l->tick_ms, until_ms);
		}

		id = layout_compose(l, tick, worker, seq);
		if (unlikely((uint64) id > pg_atomic_read_u64(&snowflake_shared->extend_at)))
		{
			bool		must = (uint64) id > pg_atomic_read_u64(&snowflake_shared->reserved);

			if (mark_reserve(l, id, must) || must)
			{
				old = pg_atomic_read_u64(&snowflake_shared->last_id);
				continue;
			}
		}
		if (pg_atomic_compare_exchange_u64(&snowflake_shared->last_id, &old, (uint64) id))
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
	if (snowflake_shared == NULL)
		not_preloaded();

	st->last_id = (int64) pg_atomic_read_u64(&snowflake_shared->last_id);
	st->high_water_mark = (int64) pg_atomic_read_u64(&snowflake_shared->reserved);
	for (int i = 0; i < snowflake_shared->nslots; i++)
	{
		st->issued += pg_atomic_read_u64(&snowflake_shared->slots[i].c.issued);
		st->waits += pg_atomic_read_u64(&snowflake_shared->slots[i].c.waits);
		st->run_ahead_ids += pg_atomic_read_u64(&snowflake_shared->slots[i].c.run_ahead_ids);
		st->refused += pg_atomic_read_u64(&snowflake_shared->slots[i].c.refused);
	}
	st->clock_back_events = pg_atomic_read_u64(&snowflake_shared->clock_back_events);
	st->clock_back_max_ms = pg_atomic_read_u64(&snowflake_shared->clock_back_max_ms);
	st->started = snowflake_shared->started;

	now = layout_unix_ms_to_tick(l, clock_unix_ms());
	last_tick = layout_tick(l, st->last_id);
	st->run_ahead_ms = st->last_id > 0 && last_tick > now ?
		(last_tick - now) * l->tick_ms : 0;
}
