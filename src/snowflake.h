/*-------------------------------------------------------------------------
 *
 * snowflake.h
 *	  The generator's interface (generator.c) for the SQL functions, and
 *	  the other entry points module initialization wires together.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SNOWFLAKE_H
#define SNOWFLAKE_H

#include "datatype/timestamp.h"

#include "layout.h"
#include "node.h"

/* generator.c: the hot path and what it has done */
typedef struct GeneratorStatus
{
	int			worker_id;		/* in force; -1 if not set */
	int64		last_id;		/* last issued since start; 0 if none */
	int64		high_water_mark;	/* durable reservation, 0 if none */
	int64		issued;
	int64		waits;
	int64		run_ahead_ids;
	int64		refused;
	int64		clock_back_events;
	int64		clock_back_max_ms;
	int64		run_ahead_ms;	/* how far the last ID is ahead of the clock */
	TimestampTz started;
} GeneratorStatus;

extern int	generator_require_ready(void);
extern NodeReason generator_verdict(void);
extern int64 generator_next(void);
extern int64 generator_next_block(int64 n);
extern int64 generator_block_capacity(void);
extern void generator_status(GeneratorStatus *st);

/* functions.c: what the SQL-callable functions of other files share */
typedef struct LayoutCache LayoutCache;
extern const char *snowflake_echo(const char *s);
extern const SnowflakeLayout *layout_cached(LayoutCache **cache,
											MemoryContext mcxt, text *name);
extern void check_id(const SnowflakeLayout *l, int64 id);

/* keeper.c: the background worker */
extern void keeper_register(void);

/* schemes.c: DecimalId and node-partitioned IDs */
extern Size schemes_shmem_size(void);
extern void schemes_shmem_init(void);

#endif							/* SNOWFLAKE_H */
