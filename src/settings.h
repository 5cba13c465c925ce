/*-------------------------------------------------------------------------
 *
 * settings.h
 *	  The snowflake.* settings and whether they let the node generate.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SNOWFLAKE_SETTINGS_H
#define SNOWFLAKE_SETTINGS_H

#include "layout.h"

/* snowflake.worker_id's value when it is not set */
#define WORKER_ID_UNSET		(-1)

/* what a process read of snowflake.worker_id when its value was rejected */
#define WORKER_ID_REJECTED	(-2)

/*
 * The furthest IDs may run ahead of the clock, whatever
 * snowflake.max_run_ahead_ms says (-1 means this much).  Every role that
 * may generate can push the node's IDs ahead up to the bound in force, and
 * the node refuses for as long once the bound is lowered: one day bounds
 * that harm and still rides out a clock stepped back by hours.
 */
#define RUN_AHEAD_CAP_MS	(86400 * 1000)

/* the longest snowflake.max_clock_backward_ms: a call waits an hour at most */
#define MAX_CLOCK_BACKWARD_MS	(3600 * 1000)

/*
 * This process's view of the settings.  The worker id that goes into IDs
 * is the node's, in shared memory (mark.h); snowflake_worker_id is only
 * what this process read from the configuration.
 */
extern int	snowflake_worker_id;
extern int	snowflake_max_clock_backward_ms;
extern int	snowflake_max_run_ahead_ms;
extern int	snowflake_launch_id;
extern char *snowflake_registry;
extern int	snowflake_decimal_generator_min;
extern int	snowflake_decimal_generator_max;

/* the layout of this server; never NULL once settings_define() ran */
extern const SnowflakeLayout *snowflake_layout;

/* called in every process that reads snowflake.worker_id (at start, a reload) */
extern void (*settings_worker_assigned) (int worker);

/*
 * What this process read of snowflake.worker_id: the value, WORKER_ID_UNSET,
 * or WORKER_ID_REJECTED; settings_worker_read_at() says when.
 */
extern int	settings_worker_reading;

/* What the settings read at server start found that the node cannot trust. */
typedef enum SettingsTrouble
{
	SETTINGS_OK = 0,
	SETTINGS_REJECTED,			/* a value rejected: name, value */
	SETTINGS_UNKNOWN,			/* a snowflake.* name none of ours: name */
	SETTINGS_LAYOUT_REJECTED,	/* snowflake.layout's value rejected: value */
	SETTINGS_LAYOUT_UNUSABLE	/* the layout cannot be built: name, why */
} SettingsTrouble;

typedef struct SettingsFound
{
	SettingsTrouble trouble;
	char		name[NAMEDATALEN * 2];
	char		value[256];
	char		why[256];
} SettingsFound;

extern void settings_define(bool preloaded);
extern const SettingsFound *settings_found(void);
extern const char *settings_worker_rejected(void);
extern uint64 settings_worker_read_at(void);
extern const SnowflakeLayout *settings_layout_in_force(void);
extern int64 settings_max_lead_ms(void);

/* a registry to lease the worker id from is named */
static inline bool
settings_registry_named(void)
{
	return snowflake_registry != NULL && snowflake_registry[0] != '\0';
}

#endif							/* SNOWFLAKE_SETTINGS_H */
