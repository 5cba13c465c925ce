/*-------------------------------------------------------------------------
 *
 * snowflake.h
 *	  Declarations shared by the files of the snowflake extension.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SNOWFLAKE_H
#define SNOWFLAKE_H

#include "layout.h"

/* settings, owned by snowflake.c */
extern int	snowflake_worker_id;
extern int	snowflake_max_clock_backward_ms;
extern int	snowflake_max_run_ahead_ms;
extern int	snowflake_launch_id;
extern int	snowflake_decimal_generator_min;
extern int	snowflake_decimal_generator_max;
extern const SnowflakeLayout *snowflake_layout;
extern const char *snowflake_layout_problem;	/* custom layout unusable */
extern void snowflake_check_layout(void);

/* how far ahead of the last ID a durable reservation reaches */
#define SNOWFLAKE_WINDOW_MS 1000

/* generator.c: shared state and the hot path */
typedef struct GeneratorStatus
{
	int64		last_id;		/* 0 before the first ID */
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

extern Size generator_shmem_size(void);
extern void generator_shmem_init(void);
extern int64 generator_next(void);
extern void generator_status(GeneratorStatus *st);

/* mark.c: the durable high-water mark */
extern void generator_settle(void);
extern void generator_keep_ahead(void);

/* schemes.c: DecimalId and node-partitioned IDs */
extern Size schemes_shmem_size(void);
extern void schemes_shmem_init(void);

#endif							/* SNOWFLAKE_H */
