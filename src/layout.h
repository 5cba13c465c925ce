/*-------------------------------------------------------------------------
 *
 * layout.h
 *	  The shape of a Snowflake ID: field widths, their order, the time unit
 *	  and the epoch.  This is the only place that shifts or masks ID bits;
 *	  everything else composes and decomposes IDs through these functions.
 *
 * An ID has three fields: time (ticks since the epoch), worker and
 * sequence.  Time is always the most significant field so that IDs sort by
 * time; the order of the two lower fields is part of the layout (Sonyflake
 * puts the sequence above the machine id).  The sign bit is never used, so
 * every ID is a positive int64.  A source format whose fields add up to 64
 * bits (Instagram's, Discord's) is kept as declared, and its usable ticks
 * end where the top bit would be set.
 *
 * ShardingSphere's epoch is local midnight in the default time zone of the
 * JVM that makes the IDs; "shardingsphere" is a JVM in UTC, and
 * "shardingsphere@ZONE" (LAYOUT_ZONE_PREFIX) one in another zone, at the
 * offset the zone had on the epoch's day.  From release 5.4 the offset is
 * the one in force when the JVM started: "shardingsphere@ZONE@DAY", whose
 * layout is that fixed offset's.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SNOWFLAKE_LAYOUT_H
#define SNOWFLAKE_LAYOUT_H

#include "datatype/timestamp.h"

typedef struct SnowflakeLayout
{
	const char *name;
	int			time_bits;
	int			worker_bits;
	int			seq_bits;
	bool		seq_above_worker;	/* Sonyflake order: time | seq | worker */
	int64		epoch_ms;		/* Unix time, in ms, of tick 0 */
	int64		tick_ms;		/* length of one tick in ms */
	const char *description;
	/* derived by layout_finish(), never set by hand */
	int			time_shift;
	int			worker_shift;
	int			seq_shift;
	int64		max_tick;		/* last tick whose IDs are still positive */

	/*
	 * A name made here (a zone layout's canonical name), to which name then
	 * points: such a layout is built in place and never copied.
	 */
	char		name_buf[NAMEDATALEN];
} SnowflakeLayout;

/* The decoded fields of one ID. */
typedef struct SnowflakeFields
{
	int64		tick;
	int64		worker;
	int64		seq;
} SnowflakeFields;

#define LAYOUT_MASK(bits)	((((uint64) 1) << (bits)) - 1)

/* Unix ms of 2000-01-01, PostgreSQL's timestamp epoch */
#define PG_EPOCH_UNIX_MS	INT64CONST(946684800000)
/* the last Unix ms a timestamp with time zone can hold */
#define LAYOUT_MAX_UNIX_MS	(END_TIMESTAMP / 1000 - 1 + PG_EPOCH_UNIX_MS)

static inline int64
layout_max_tick(const SnowflakeLayout *l)
{
	return l->max_tick;
}

static inline int64
layout_max_worker(const SnowflakeLayout *l)
{
	return (int64) LAYOUT_MASK(l->worker_bits);
}

static inline int64
layout_max_seq(const SnowflakeLayout *l)
{
	return (int64) LAYOUT_MASK(l->seq_bits);
}

/* Callers guarantee every field is within its width. */
static inline int64
layout_compose(const SnowflakeLayout *l, int64 tick, int64 worker, int64 seq)
{
	return (int64) (((uint64) tick << l->time_shift) |
					((uint64) worker << l->worker_shift) |
					((uint64) seq << l->seq_shift));
}

static inline int64
layout_tick(const SnowflakeLayout *l, int64 id)
{
	return (int64) (((uint64) id >> l->time_shift) & LAYOUT_MASK(l->time_bits));
}

static inline int64
layout_worker(const SnowflakeLayout *l, int64 id)
{
	return (int64) (((uint64) id >> l->worker_shift) & LAYOUT_MASK(l->worker_bits));
}

static inline int64
layout_seq(const SnowflakeLayout *l, int64 id)
{
	return (int64) (((uint64) id >> l->seq_shift) & LAYOUT_MASK(l->seq_bits));
}

static inline void
layout_decompose(const SnowflakeLayout *l, int64 id, SnowflakeFields *f)
{
	f->tick = layout_tick(l, id);
	f->worker = layout_worker(l, id);
	f->seq = layout_seq(l, id);
}

/* Unix time in ms at the start of a tick, and the tick that holds a time. */
static inline int64
layout_tick_to_unix_ms(const SnowflakeLayout *l, int64 tick)
{
	return l->epoch_ms + tick * l->tick_ms;
}

static inline int64
layout_unix_ms_to_tick(const SnowflakeLayout *l, int64 unix_ms)
{
	int64		since = unix_ms - l->epoch_ms;

	/* floor division: a time before the epoch maps to a negative tick */
	if (since >= 0)
		return since / l->tick_ms;
	return -((-since + l->tick_ms - 1) / l->tick_ms);
}

/*
 * Node-partitioned IDs (seed 003): a node id in the top 13 bits below the
 * sign bit, a sequence's value in the low 50.
 */
#define NODE_ID_COUNTER_BITS	50
#define NODE_ID_NODE_BITS		13
#define NODE_ID_COUNTER_MAX		((int64) LAYOUT_MASK(NODE_ID_COUNTER_BITS))
#define NODE_ID_NODE_MAX		((int64) LAYOUT_MASK(NODE_ID_NODE_BITS))

static inline int64
node_id_compose(int64 node, int64 counter)
{
	return (int64) (((uint64) node << NODE_ID_COUNTER_BITS) | (uint64) counter);
}

static inline int64
node_id_node(int64 id)
{
	return (int64) ((uint64) id >> NODE_ID_COUNTER_BITS);
}

static inline int64
node_id_counter(int64 id)
{
	return id & NODE_ID_COUNTER_MAX;
}

/*
 * DecimalId (seed 001): counter * 10^10 + generator_id * 10^5 + launch_id,
 * readable in decimal.  In shared memory the generator id and the last
 * counter share one atomic word, the generator id in the high half.
 */
#define DECIMAL_COUNTER_MAX		INT64CONST(922337202)
#define DECIMAL_COUNTER_UNIT	INT64CONST(10000000000)
#define DECIMAL_GENERATOR_UNIT	INT64CONST(100000)
#define DECIMAL_FIELD_MAX		99999

static inline int64
decimal_id_compose(int64 counter, int64 generator, int64 launch)
{
	return counter * DECIMAL_COUNTER_UNIT + generator * DECIMAL_GENERATOR_UNIT + launch;
}

static inline uint64
decimal_word(int64 generator, int64 counter)
{
	return ((uint64) generator << 32) | (uint64) counter;
}

static inline int64
decimal_word_generator(uint64 word)
{
	return (int64) (word >> 32);
}

static inline int64
decimal_word_counter(uint64 word)
{
	return (int64) (word & 0xFFFFFFFF);
}

extern const SnowflakeLayout *layout_default(void);
extern const SnowflakeLayout *layout_find(const char *name);
extern const SnowflakeLayout *layout_presets(int *count);
extern bool layout_finish(SnowflakeLayout *l, char **why);
/* the prefix of a custom layout's name that carries its parameters */
#define LAYOUT_CUSTOM_PREFIX	"custom:"
/* the prefix of ShardingSphere's layout for a JVM in a named time zone */
#define LAYOUT_ZONE_PREFIX		"shardingsphere@"
/* room for any such name */
#define LAYOUT_NAME_LEN		96

extern void layout_custom_name(const SnowflakeLayout *l, char *buf, size_t len);
extern bool layout_named_with_parameters(const char *name);
extern bool layout_from_name(SnowflakeLayout *l, const char *name, char **why);
extern bool layout_build_custom(SnowflakeLayout *l, int time_bits,
								int worker_bits, int seq_bits, int tick_ms,
								bool seq_above_worker, const char *epoch,
								int64 now_unix_ms, char **why);

/* The largest ID of a layout. */
static inline int64
layout_max_id(const SnowflakeLayout *l)
{
	return layout_compose(l, layout_max_tick(l), layout_max_worker(l),
						  layout_max_seq(l));
}

extern TimestampTz layout_tick_to_timestamptz(const SnowflakeLayout *l,
											  int64 tick);
extern int64 layout_timestamptz_to_tick(const SnowflakeLayout *l,
										TimestampTz ts);

#endif							/* SNOWFLAKE_LAYOUT_H */
