/*-------------------------------------------------------------------------
 *
 * state.h
 *	  The generator's shared memory, for generator.c (the hot path) and
 *	  mark.c (the durable high-water mark).  Nothing else touches it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SNOWFLAKE_STATE_H
#define SNOWFLAKE_STATE_H

#include "port/atomics.h"
#include "storage/lwlock.h"

#include "layout.h"

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

extern GeneratorShared *snowflake_shared;

/* generator.c */
extern void atomic_raise(pg_atomic_uint64 *ptr, uint64 value);
extern int64 clock_unix_ms(void);

/* mark.c */
extern void mark_load(const SnowflakeLayout *l);
extern bool mark_reserve(const SnowflakeLayout *l, int64 id, bool must);
extern void mark_shutdown(int code, Datum arg);

#endif							/* SNOWFLAKE_STATE_H */
