/*-------------------------------------------------------------------------
 *
 * clock.h
 *	  The clocks the generator reads and the one atomic helper it needs,
 *	  at the bottom of the dependency order: this header includes nothing
 *	  of the extension's and every other file may include it.
 *
 * IDs carry wall-clock time (CLOCK_REALTIME), which may step backwards.
 * How long a call has waited is measured on CLOCK_MONOTONIC, which does
 * not, so that a policy's bound on waiting holds whatever the wall clock
 * does.  Both are vDSO calls, no system call.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SNOWFLAKE_CLOCK_H
#define SNOWFLAKE_CLOCK_H

#include <time.h>

#include "port/atomics.h"

/* Wall-clock time in Unix ms. */
static inline int64
clock_unix_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wall-clock time in Unix microseconds. */
static inline int64
clock_unix_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Monotonic time in microseconds, for bounding waits. */
static inline int64
clock_monotonic_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Raise a shared maximum, lock-free; off the hot path only. */
static inline void
atomic_raise(pg_atomic_uint64 *ptr, uint64 value)
{
	uint64		cur = pg_atomic_read_u64(ptr);

	while (cur < value)
	{
		if (pg_atomic_compare_exchange_u64(ptr, &cur, value))
			break;
	}
}

#endif							/* SNOWFLAKE_CLOCK_H */
