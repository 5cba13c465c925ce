/*-------------------------------------------------------------------------
 *
 * mark.h
 *	  The node's generator state in shared memory and the durable mark that
 *	  bounds it: the interface of mark.c, which owns them (setting them up,
 *	  the reservations, the worker id in force, the repair).  generator.c
 *	  reads and advances the hot fields; nothing else touches them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SNOWFLAKE_MARK_H
#define SNOWFLAKE_MARK_H

#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "utils/timestamp.h"

#include "layout.h"
#include "node.h"

/* how far ahead of the last ID a durable reservation reaches */
#define SNOWFLAKE_WINDOW_MS 1000

/* keeper_proc when no keeper runs */
#define NO_KEEPER	PG_UINT32_MAX

/* how long a backend waits for the keeper (a reservation, a reload) */
#define KEEPER_WAIT_MS	5000

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

/*
 * Every field is a pg_atomic word (read anywhere: DESIGN.md, "Memory
 * ordering", names each handshake and its barriers), or read and written
 * under node.c's lock, or set by the postmaster at start, before any other
 * process runs.
 */
typedef struct GeneratorShared
{
	/* the hot cache line: last_id is written once per ID */
	pg_atomic_uint64 last_id;	/* no ID this node issued is above it */
	pg_atomic_uint64 seen_tick; /* highest clock tick read so far */
	pg_atomic_uint64 extend_at; /* an ID above this renews the reservation */
	pg_atomic_uint64 reserved;	/* durable: no ID above it is issued */
	pg_atomic_uint32 worker;	/* worker id in force, or -1: not set;
								 * written under node.c's lock */
	char		pad[PG_CACHE_LINE_SIZE - 4 * sizeof(pg_atomic_uint64) -
					sizeof(pg_atomic_uint32)];

	/* the highest ID a backend asked to have reserved */
	pg_atomic_uint64 requested;
	/* the keeper's process number, or NO_KEEPER: whose latch a request sets */
	pg_atomic_uint32 keeper_proc;
	ConditionVariable renewed;	/* a renewal finished (or failed) */

	/* written under node.c's lock, read anywhere */
	pg_atomic_uint32 legacy_state;	/* 1.1's origin: LegacyState */
	pg_atomic_uint64 resumed_from;	/* last_id at start, after any floor */

	/* read and written under node.c's lock */
	int64		legacy_mark;	/* its progress, if LEGACY_PRESENT */
	bool		origin_failed;	/* the worker that reads it failed */
	char		prev_layout[NAMEDATALEN];	/* set when the layout changed */
	int64		undo_floor;		/* a repair may be undone down to it; 0: none */

	/* written only when the clock goes backwards */
	pg_atomic_uint64 back_counted_tick;
	pg_atomic_uint64 clock_back_events;
	pg_atomic_uint64 clock_back_max_ms;

	/* set at start */
	TimestampTz started;
	int			nslots;
	CounterSlot slots[FLEXIBLE_ARRAY_MEMBER];
} GeneratorShared;

extern GeneratorShared *snowflake_shared;

/* What is known of the replication origin through which 1.1 logged. */
typedef enum LegacyState
{
	LEGACY_UNKNOWN,				/* not looked at yet */
	LEGACY_PRESENT,				/* there, at legacy_mark */
	LEGACY_COVERED,				/* there, and a reservation of ours covers it */
	LEGACY_GONE					/* absent or dropped; the state file says so */
} LegacyState;

/* What mark_reserve() did. */
typedef enum ReserveResult
{
	RESERVE_DONE,				/* the reservation covers the ID */
	RESERVE_MOVED,				/* waited; the state may have moved: retry */
	RESERVE_SKIPPED				/* asked for; the room left suffices */
} ReserveResult;

extern Size mark_shmem_size(void);
extern void mark_shmem_init(bool recovered);
extern int64 mark_last_id(void);
extern ReserveResult mark_reserve(const SnowflakeLayout *l, int64 id, bool must);
extern void mark_keeper_arrived(void);
extern void mark_keeper_start(bool legacy_failed);
extern void mark_keeper_exit(void);
extern void mark_keep_ahead(void);
extern void mark_publish_worker(int worker);
extern void mark_check_floor(int64 above);
extern int64 mark_repair_locked(int64 above, bool lower, bool log,
								NodeRecord *next);
extern void mark_repair_save(const NodeRecord *next, bool node_part, int64 last,
							 bool lower);
extern void mark_replay(int64 mark, const char *layout, int64 lead_ms);
extern bool mark_legacy_wanted(void);
extern void mark_legacy_found(bool found, int64 mark);
extern bool mark_legacy_may_drop(void);
extern void mark_legacy_gone(void);

#endif							/* SNOWFLAKE_MARK_H */
