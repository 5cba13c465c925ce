/*-------------------------------------------------------------------------
 *
 * generator.c
 *	  The lock-free hot path that issues the node's IDs, and the policy for
 *	  a clock that is behind the IDs already issued.
 *
 * The state is the last ID issued on this node, in one 64-bit atomic word
 * (mark.h).  A new ID is computed from it and installed with one
 * compare-and-swap, so every ID the node issues is greater than every ID it
 * issued before, whichever backend or database asks.  Beside it sit the
 * highest clock reading seen, which tells a clock that went backwards from
 * a generator that ran ahead of the clock on purpose; the worker id in
 * force; and the durable reservation (mark.c), which an ID may not pass.
 *
 * The policy, when an ID would carry a time ahead of the clock: issue it if
 * max_run_ahead_ms allows; otherwise wait for the clock if the wait is
 * short (the next tick, up to a window, a step back within
 * max_clock_backward_ms, or the rest of a reservation after a crash);
 * otherwise refuse.  A wait is judged again at every wake-up, against a
 * deadline on the monotonic clock, so it never outlasts the policy
 * whatever the wall clock does.
 *
 * Statistics are kept per backend slot, each written only by its owner, so
 * counting adds no shared write to the hot path; readers add the slots up.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "common/pg_prng.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/timestamp.h"

#include "clock.h"
#include "compat.h"
#include "identity.h"
#include "messages.h"
#include "node.h"
#include "settings.h"
#include "snowflake.h"
#include "mark.h"

/* What to do with a candidate ID that is ahead of the clock. */
typedef enum Verdict
{
	ISSUE,
	WAIT,
	REFUSE
} Verdict;

/* waits under this many microseconds spin: a sleep would overshoot them */
#define SPIN_US		2000

static uint32 wait_event_clock = 0;

/*
 * Add n (the IDs of a block) to a counter of this backend's slot.  The
 * slot has one writer, so a plain read and write suffice; the atomic type
 * only keeps readers from seeing a torn value.
 */
static inline void
count_n(pg_atomic_uint64 *counter, int64 n)
{
	pg_atomic_write_u64(counter, pg_atomic_read_u64(counter) + (uint64) n);
}

static inline void
count(pg_atomic_uint64 *counter)
{
	count_n(counter, 1);
}

static inline CounterSlot *
my_slot(void)
{
	int			i = MyProcNumber;

	return &snowflake_shared->slots[i >= 0 && i < snowflake_shared->nslots ? i : 0];
}

static const char *
unix_ms_to_str(int64 unix_ms)
{
	return pstrdup(timestamptz_to_str((unix_ms - PG_EPOCH_UNIX_MS) * 1000));
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
 * The first sequence number of a block of n in a new tick: first_seq(), or
 * lower when the block would not fit above it.
 */
static inline int64
block_first_seq(const SnowflakeLayout *l, int64 n)
{
	int64		seq = first_seq(l);

	if (n > 1 && seq > layout_max_seq(l) - (n - 1))
		seq = layout_max_seq(l) - (n - 1);
	return seq;
}

/*
 * A sequence number for the first of worker's block of n IDs in tick,
 * whose IDs must be above old, an ID of another worker id in the same
 * tick; -1 when there is none.  Any such ID is above every ID the node
 * issued, so the node need not wait for the next tick because its worker
 * id changed.
 */
static int64
same_tick_seq(const SnowflakeLayout *l, int64 tick, int64 worker, int64 old,
			  int64 n)
{
	int64		seq = block_first_seq(l, n);

	if (layout_compose(l, tick, worker, seq) > old)
		return seq;
	seq = layout_seq(l, old) + 1;
	if (seq <= layout_max_seq(l) - (n - 1) &&
		layout_compose(l, tick, worker, seq) > old)
		return seq;
	return -1;
}

/*
 * Sleep towards unix_ms, but not past the next time the policy must be
 * judged again.  Short waits spin on the clock (a sleep overshoots them);
 * longer ones sleep on the latch.  Interrupts are served either way.
 */
static void
wait_towards(int64 unix_ms)
{
	int64		left = unix_ms * 1000 - clock_unix_us();
	uint32		we = compat_wait_event("SnowflakeClock", &wait_event_clock);

	if (left <= 0)
		return;
	if (left > SPIN_US)
	{
		/* wake at least every 10 ms to see where the clock went */
		long		ms = (long) Min((left - SPIN_US / 2) / 1000, 10);

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Max(ms, 1), we);
		ResetLatch(MyLatch);
	}
	else
	{
		pgstat_report_wait_start(we);
		for (int spins = 0; clock_unix_us() < unix_ms * 1000 && spins < 100000; spins++)
			pg_spin_delay();
		pgstat_report_wait_end();
	}
	CHECK_FOR_INTERRUPTS();
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
 * Judge a candidate tick that is ahead of the clock (now).  *until_ms is set
 * to the clock time at which the candidate may be issued, *limit_ms to how
 * long the policy lets a call wait for it.
 */
static Verdict
judge(const SnowflakeLayout *l, int64 tick, int64 now, int64 now_ms,
	  bool clock_back, int64 *until_ms, int64 *limit_ms)
{
	int64		ahead_ms = (tick - now) * l->tick_ms;
	int64		allowed_ms = snowflake_max_run_ahead_ms;

	/* -1 is the cap: no setting lets any role push IDs further ahead */
	if (allowed_ms < 0)
		allowed_ms = RUN_AHEAD_CAP_MS;
	if (ahead_ms <= allowed_ms)
		return ISSUE;

	*until_ms = layout_tick_to_unix_ms(l, tick - allowed_ms / l->tick_ms);

	/*
	 * Waiting for the next tick is allowed up to a window (a layout's tick
	 * may last a day), and a step back of the clock within
	 * max_clock_backward_ms is waited out.  When the clock did not go back,
	 * the lead comes from this node's own IDs (a reservation resumed after
	 * a crash, a run-ahead that was allowed before a reload): it is waited
	 * out for up to a window.
	 */
	*limit_ms = Max(snowflake_max_clock_backward_ms,
					Min(l->tick_ms, SNOWFLAKE_WINDOW_MS));
	if (!clock_back)
		*limit_ms = Max(*limit_ms, SNOWFLAKE_WINDOW_MS);
	return *until_ms - now_ms <= *limit_ms ? WAIT : REFUSE;
}

/*
 * The time (Unix ms) an ID carries in layout name, the one the node ran
 * before its last layout change, or -1 if that layout cannot be read now
 * (a plain custom layout, whose settings changed).
 */
static int64
prev_layout_ms(const char *name, int64 id)
{
	const SnowflakeLayout *o = layout_find(name);
	SnowflakeLayout buf;
	char	   *why;

	if (o == NULL && layout_named_with_parameters(name) &&
		layout_from_name(&buf, name, &why))
		o = &buf;
	if (o == NULL || id > layout_max_id(o))
		return -1;
	return layout_tick_to_unix_ms(o, layout_tick(o, id));
}

/*
 * A candidate for the next n IDs, as a call makes it now, and what the
 * clock policy says of it.
 */
typedef struct Candidate
{
	int64		now_ms;			/* the clock, Unix ms */
	int64		now;			/* its tick; < 0: before the layout's epoch */
	int64		seen;			/* the highest tick read so far, now's too */
	int64		last_tick;		/* the tick of the last ID */
	int64		tick;			/* the candidate's tick and sequence */
	int64		seq;
	int64		until_ms;		/* not ISSUE: when it may be issued */
	int64		limit_ms;		/* WAIT: how long the policy lets a call wait */
} Candidate;

/*
 * The candidate for worker's next n IDs above old, the last ID, with seen
 * read before the clock (see generate()), and the policy's verdict of it:
 * the one decision of what a call does with the clock, made by calls and
 * shown by the status view.  No shared word is written here.
 */
static pg_attribute_always_inline Verdict
consider(const SnowflakeLayout *l, int64 n, int64 worker, uint64 old,
		 int64 seen, Candidate *c)
{
	c->now_ms = clock_unix_ms();
	c->now = layout_unix_ms_to_tick(l, c->now_ms);
	c->last_tick = layout_tick(l, (int64) old);
	c->seen = Max(seen, c->now);
	c->tick = c->seq = 0;
	if (unlikely(c->now < 0))
		return REFUSE;

	if (c->now > c->last_tick)
	{
		c->tick = c->now;
		c->seq = block_first_seq(l, n);
	}
	else if (layout_worker(l, (int64) old) == worker &&
			 layout_seq(l, (int64) old) < layout_max_seq(l) - (n - 1))
	{
		c->tick = c->last_tick;
		c->seq = layout_seq(l, (int64) old) + 1;
	}
	else if (layout_worker(l, (int64) old) != worker &&
			 (c->seq = same_tick_seq(l, c->last_tick, worker, (int64) old, n)) >= 0)
	{
		/* the worker id changed: its IDs of this tick may go above */
		c->tick = c->last_tick;
	}
	else
	{
		/*
		 * Fewer than n sequence numbers left in the tick, or no room for
		 * the new worker id: the next tick, which holds any block
		 */
		c->tick = c->last_tick + 1;
		c->seq = 0;
	}
	if (unlikely(c->tick > layout_max_tick(l)))
		return REFUSE;
	if (c->tick <= c->now)
		return ISSUE;
	return judge(l, c->tick, c->now, c->now_ms, c->seen > c->now,
				 &c->until_ms, &c->limit_ms);
}

/*
 * Why a candidate the policy does not issue (now, or after the longest
 * wait it allows) is refused, and the values its words name.
 */
static NodeReason
refusal(const SnowflakeLayout *l, int64 n, const Candidate *c, RefuseArgs *a)
{
	int64		last = (int64) pg_atomic_read_u64(&snowflake_shared->last_id);
	char	   *prev = palloc(NAMEDATALEN);
	bool		old_layout;
	int64		old_ms;
	int64		lead_ms = (c->last_tick - c->now) * l->tick_ms;
	const char *at;
	const char *clock = unix_ms_to_str(c->now_ms);
	const char *until;
	const char *ahead = node_num(snowflake_max_run_ahead_ms);

	/* a repair or a replay changes the old layout, under the lock */
	LWLockAcquire(node_shared->lock, LW_SHARED);
	strlcpy(prev, snowflake_shared->prev_layout, NAMEDATALEN);
	LWLockRelease(node_shared->lock);
	/* nothing issued in this layout yet: the state is the old layout's */
	old_layout = prev[0] != '\0' &&
		(uint64) last <= pg_atomic_read_u64(&snowflake_shared->resumed_from);

	if (c->now < 0)
	{
		*a = (RefuseArgs) {{clock, l->name}, {unix_ms_to_str(layout_tick_to_unix_ms(l, 0))}};
		return REASON_CLOCK_BEFORE_EPOCH;
	}
	if (c->tick > layout_max_tick(l))
	{
		*a = (RefuseArgs) {{l->name}, {unix_ms_to_str(layout_tick_to_unix_ms(l, layout_max_tick(l)))}};
		return REASON_LAYOUT_ENDED;
	}
	at = unix_ms_to_str(layout_tick_to_unix_ms(l, c->last_tick));
	until = unix_ms_to_str(c->until_ms);
	*a = (RefuseArgs) {{node_num(lead_ms)}, {at, clock, until}, {ahead}};

	/*
	 * The layout's refusal when the lead comes from the layout change: read
	 * in the old layout, the last ID would have let the node go on (or that
	 * layout cannot be read, and the clock did not go back); otherwise the
	 * clock's, a crash's or the old layout's own lead is the cause.  No
	 * setting lets the node run more than a day ahead of the clock.
	 */
	old_ms = old_layout ? prev_layout_ms(prev, last) : -1;
	if (old_layout &&
		(old_ms >= 0 ? old_ms - c->now_ms <= settings_max_lead_ms() : c->seen <= c->now))
	{
		*a = (RefuseArgs) {{l->name, prev}, {at, clock}, {prev}};
		return REASON_LAYOUT_BELOW;
	}
	if (c->seen > c->now)
	{
		int64		back_ms = (c->seen - c->now) * l->tick_ms;

		*a = (RefuseArgs) {{node_num(back_ms)}, {at, clock, until},
		{node_num(snowflake_max_clock_backward_ms), ahead}};
		if (lead_ms > RUN_AHEAD_CAP_MS)
			return REASON_CLOCK_BACK_FAR;
		/* no wait the setting allows covers it: only running ahead does */
		if (back_ms > MAX_CLOCK_BACKWARD_MS)
		{
			a->hint[0] = ahead;
			return REASON_CLOCK_BACK_LONG;
		}
		return REASON_CLOCK_BACK;
	}
	/* the lead is only the next tick: a long tick, not a clock problem */
	if (c->last_tick <= c->now)
	{
		*a = (RefuseArgs) {{l->name, node_num(n)}, {until, node_num(c->until_ms - c->now_ms)}, {ahead}};
		return n > 1 ? REASON_BLOCK_TOO_LARGE : REASON_TICK_USED_UP;
	}
	return lead_ms > RUN_AHEAD_CAP_MS ? REASON_AHEAD_FAR : REASON_AHEAD_OF_CLOCK;
}

static void
refuse(const SnowflakeLayout *l, int64 n, const Candidate *c)
{
	RefuseArgs	a;
	NodeReason	r = refusal(l, n, c, &a);

	count(&my_slot()->c.refused);
	node_refuse(r, &a);
}

/*
 * Refuse unless this node may generate at all (node.c's verdict, with the
 * worker id configured since applied: identity.c); returns its worker id.
 * A node that may not publishes none, so the hot path has only the cold
 * branch of an unset worker id (and a reload this process read, recovery,
 * and single-user mode, which are this process's) to take.
 */
int
generator_require_ready(void)
{
	int			worker;

	if (unlikely(snowflake_shared == NULL))
		node_refuse(REASON_NOT_PRELOADED, NULL);
	if (unlikely(identity_reload_pending()))
		worker = WORKER_ID_UNSET;
	else
		worker = (int) pg_atomic_read_u32(&snowflake_shared->worker);
	if (unlikely(worker == WORKER_ID_UNSET || !IsUnderPostmaster || RecoveryInProgress()))
	{
		NodeReason	r = identity_verdict(true, CHECK_ALL);

		if (node_refuses(r))
			node_refuse_state(r);
		worker = (int) pg_atomic_read_u32(&snowflake_shared->worker);
		/* a reload between the two: the next call sees it */
		if (worker == WORKER_ID_UNSET)
			node_refuse_state(REASON_NO_WORKER_ID);
	}
	return worker;
}

/*
 * Why a call of one ID would not generate now, or REASON_NONE (or
 * REASON_FLOOR_PENDING: it waits for the keeper, then generates): the
 * node's verdict, then the clock's, as a call makes them.  What the
 * status view shows.
 */
NodeReason
generator_verdict(void)
{
	const SnowflakeLayout *l = snowflake_layout;
	NodeReason	r = identity_verdict(false, CHECK_ALL);
	int64		seen;
	int64		worker;
	Candidate	c;
	RefuseArgs	a;

	if (r != REASON_NONE && r != REASON_FLOOR_PENDING)
		return r;
	seen = (int64) pg_atomic_read_u64(&snowflake_shared->seen_tick);
	worker = node_configured_worker();
	/* the shared words before the clock, as generate() reads them */
	pg_read_barrier();
	if (consider(l, 1, worker, pg_atomic_read_u64(&snowflake_shared->last_id), seen, &c) == REFUSE)
		return refusal(l, 1, &c, &a);
	return r;
}

/*
 * Issue the next n IDs of this node, n consecutive sequence numbers of one
 * tick, and return the first.  The caller has checked that one tick holds
 * n.  The block is claimed as a single ID is, with one compare-and-swap
 * that installs its last ID: every ID of it is then below the next one the
 * node issues, and the policies and the reservation judge the block as a
 * whole (its tick, its last ID).  Inlined with a constant n, so that
 * generator_next() pays nothing for blocks.
 */
static pg_attribute_always_inline int64
generate(int64 n)
{
	const SnowflakeLayout *l = snowflake_layout;
	int64		deadline_us = 0;
	uint64		old;

	(void) generator_require_ready();

	old = pg_atomic_read_u64(&snowflake_shared->last_id);
	for (;;)
	{
		/*
		 * The shared words are read before the clock: any reading in them
		 * was taken before ours, so a seen tick above ours is a clock that
		 * went back, not another backend that read the clock after us.
		 */
		int64		seen = (int64) pg_atomic_read_u64(&snowflake_shared->seen_tick);
		int64		worker = (int64) (int32) pg_atomic_read_u32(&snowflake_shared->worker);
		Candidate	c;
		Verdict		v;
		int64		id;
		int64		last;

		if (unlikely(worker == WORKER_ID_UNSET))
		{
			/* refuses, or a worker id is published now: read it */
			(void) generator_require_ready();
			continue;
		}

		/*
		 * Pairs with the data dependency of every other backend's raise of
		 * seen_tick on its clock reading: a tick read here was read from the
		 * clock before ours (the vDSO orders its own counter read after
		 * earlier loads: rdtsc_ordered(), isb).
		 */
		pg_read_barrier();
		v = consider(l, n, worker, old, seen, &c);
		if (c.now > seen)
			atomic_raise(&snowflake_shared->seen_tick, (uint64) c.now);
		if (unlikely(c.tick > c.now && c.seen > c.now))
			note_clock_back(c.seen, (c.seen - c.now) * l->tick_ms);
		if (v == WAIT)
		{
			int64		mono = clock_monotonic_us();

			/* the policy bounds the whole wait, not each slice of it */
			if (deadline_us == 0)
			{
				deadline_us = mono + c.limit_ms * 1000 + SPIN_US;
				count(&my_slot()->c.waits);
			}
			else if (mono > deadline_us)
				refuse(l, n, &c);
			wait_towards(c.until_ms);
			old = pg_atomic_read_u64(&snowflake_shared->last_id);
			continue;
		}
		if (v == REFUSE)
			refuse(l, n, &c);

		id = layout_compose(l, c.tick, worker, c.seq);
		/* the block's greatest ID, which the reservation must cover */
		last = n == 1 ? id : layout_compose(l, c.tick, worker, c.seq + (n - 1));

		/*
		 * Pairs with mark_repair_save()'s write barrier: the last ID (old)
		 * is read before extend_at, so a backend that read the last ID a
		 * repair installed finds extend_at 0 and asks for a reservation.
		 */
		pg_read_barrier();
		if (unlikely((uint64) last > pg_atomic_read_u64(&snowflake_shared->extend_at)))
		{
			bool		must = (uint64) last > pg_atomic_read_u64(&snowflake_shared->reserved);
			ReserveResult r = mark_reserve(l, last, must);

			if (r == RESERVE_MOVED || (must && r != RESERVE_DONE))
			{
				old = pg_atomic_read_u64(&snowflake_shared->last_id);
				continue;
			}
		}
		if (pg_atomic_compare_exchange_u64(&snowflake_shared->last_id, &old, (uint64) last))
		{
			CounterSlot *s = my_slot();

			count_n(&s->c.issued, n);
			if (c.tick > c.now)
				count_n(&s->c.run_ahead_ids, n);
			return id;
		}
		/* lost the race: old now holds the winner's last ID */
	}
}

/*
 * Issue the next ID of this node.
 */
int64
generator_next(void)
{
	return generate(1);
}

/*
 * The number of IDs one tick holds in the layout in force: the most a
 * block may have.
 */
int64
generator_block_capacity(void)
{
	return layout_max_seq(snowflake_layout) + 1;
}

/*
 * Issue a block of n consecutive sequence numbers, 1 <= n <=
 * generator_block_capacity(), and return its first ID.
 */
int64
generator_next_block(int64 n)
{
	Assert(n >= 1 && n <= generator_block_capacity());
	return generate(n);
}

void
generator_status(GeneratorStatus *st)
{
	const SnowflakeLayout *l = snowflake_layout;
	int64		last;
	int64		now;

	memset(st, 0, sizeof(*st));
	st->worker_id = WORKER_ID_UNSET;
	if (snowflake_shared == NULL)
		return;

	st->worker_id = (int) (int32) pg_atomic_read_u32(&snowflake_shared->worker);
	last = (int64) pg_atomic_read_u64(&snowflake_shared->last_id);
	/* what was issued since start; the floor it resumed from was not */
	st->last_id = (uint64) last > pg_atomic_read_u64(&snowflake_shared->resumed_from) ? last : 0;
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
	st->run_ahead_ms = last > 0 && layout_tick(l, last) > now ?
		(layout_tick(l, last) - now) * l->tick_ms : 0;
}
