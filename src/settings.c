/*-------------------------------------------------------------------------
 *
 * settings.c
 *	  The snowflake.* settings: their definitions, their validation when
 *	  they are set, and whether the settings read at server start let the
 *	  node generate at all.
 *
 * A Snowflake node that guesses is a node that collides, so the settings
 * fail closed.  A value that PostgreSQL rejects at server start would
 * otherwise leave the setting at its default with only a WARNING in the
 * log (that is how custom settings behave); here each such rejection, an
 * unknown snowflake.* name or an unusable custom layout is kept as what
 * the start found (settings_found()), and node.c decides what it means:
 * every generator refuses until the configuration is fixed.  A worker id
 * rejected at start is kept apart (settings_worker_rejected()): it is
 * fixed by a reload, as snowflake.worker_id is.
 *
 * This file knows layouts (layout.h) and the opaque key's hooks (text.h),
 * nothing else of the extension's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "clock.h"
#include "compat.h"
#include "messages.h"
#include "settings.h"
#include "text.h"

int			snowflake_worker_id = WORKER_ID_UNSET;
int			snowflake_max_clock_backward_ms = 10;
int			snowflake_max_run_ahead_ms = 0;
int			snowflake_launch_id = 0;
char	   *snowflake_registry = NULL;
int			snowflake_decimal_generator_min = 0;
int			snowflake_decimal_generator_max = 99999;
const SnowflakeLayout *snowflake_layout = NULL;

void		(*settings_worker_assigned) (int worker) = NULL;
int			settings_worker_reading = WORKER_ID_UNSET;

/* snowflake.layout: a preset, custom or shardingsphere@ZONE[@DAY] */
static char *layout_setting = NULL;

/* snowflake.layout = custom: the layout the custom_* settings describe */
static SnowflakeLayout custom_layout;
static int	custom_time_bits = 41;
static int	custom_worker_bits = 10;
static int	custom_seq_bits = 12;
static int	custom_tick_ms = 1;
static bool custom_seq_above_worker = false;
static char *custom_epoch = NULL;

/* what the settings read at server start found: the first trouble */
static SettingsFound found;

/* the text of snowflake.worker_id rejected at server start, or "" */
static char worker_rejected[64];

/* when this process last read snowflake.worker_id (CLOCK_MONOTONIC, us) */
static uint64 worker_read_at = 0;

/* every setting of ours, for checking what the configuration gave them */
static const char *const setting_names[] = {
	"snowflake.custom_time_bits",
	"snowflake.custom_worker_bits",
	"snowflake.custom_seq_bits",
	"snowflake.custom_tick_ms",
	"snowflake.custom_seq_above_worker",
	"snowflake.custom_epoch",
	"snowflake.registry",
	"snowflake.launch_id",
	"snowflake.decimal_generator_min",
	"snowflake.decimal_generator_max",
	"snowflake.layout",
	"snowflake.worker_id",
	"snowflake.max_clock_backward_ms",
	"snowflake.max_run_ahead_ms",
	"snowflake.opaque_key",
};

/* Keep the first trouble the start found: what it was, and what it named. */
static void
set_found(SettingsTrouble trouble, const char *name, const char *value,
		  const char *why)
{
	if (found.trouble != SETTINGS_OK)
		return;
	found.trouble = trouble;
	strlcpy(found.name, name ? name : "", sizeof(found.name));
	strlcpy(found.value, value ? value : "", sizeof(found.value));
	strlcpy(found.why, why ? why : "", sizeof(found.why));
}

/*
 * What the settings read at server start found that the node cannot
 * trust (trouble SETTINGS_OK: nothing).  The worker id is not among them:
 * settings_worker_rejected().
 */
const SettingsFound *
settings_found(void)
{
	return &found;
}

/* The text of snowflake.worker_id rejected at server start, or NULL. */
const char *
settings_worker_rejected(void)
{
	return worker_rejected[0] ? worker_rejected : NULL;
}

/*
 * When this process last read snowflake.worker_id: at server start, or at
 * a reload (its own, or the postmaster's before this process was forked).
 * The clock is the machine's monotonic one, which every process shares, so
 * that readings of different processes compare.
 */
uint64
settings_worker_read_at(void)
{
	return worker_read_at;
}

/*
 * The layout in force, or NULL when none is: the configured one was
 * rejected or cannot be built, and snowflake_layout is only the default
 * the extension falls back on internally.
 */
const SnowflakeLayout *
settings_layout_in_force(void)
{
	if (found.trouble == SETTINGS_LAYOUT_REJECTED ||
		found.trouble == SETTINGS_LAYOUT_UNUSABLE)
		return NULL;
	return snowflake_layout;
}

/*
 * How far ahead of the clock the policy lets the node's last ID be and
 * still issue IDs, by running ahead or by a wait.
 */
int64
settings_max_lead_ms(void)
{
	/* -1 runs ahead as far as the cap, no further */
	if (snowflake_max_run_ahead_ms < 0)
		return RUN_AHEAD_CAP_MS;
	/* a call waits for the clock up to a second (mark.h's window) */
	return Max((int64) snowflake_max_run_ahead_ms,
			   Max((int64) snowflake_max_clock_backward_ms, 1000));
}

static void
build_custom_layout(void)
{
	char	   *why;

	if (!layout_build_custom(&custom_layout, custom_time_bits,
							 custom_worker_bits, custom_seq_bits,
							 custom_tick_ms, custom_seq_above_worker,
							 custom_epoch, clock_unix_ms(), &why))
		set_found(SETTINGS_LAYOUT_UNUSABLE, "custom", NULL, why);
	snowflake_layout = &custom_layout;
}

/*
 * Accept a preset, "custom" or "shardingsphere@ZONE[@DAY]", and store its
 * canonical name (so SHOW gives the preset's name as written in the list,
 * and the state file and WAL the zone as the time zone database spells
 * it).  A zone layout is built here, into extra, where assign_layout()
 * finds it.
 */
static bool
check_layout(char **newval, void **extra, GucSource source)
{
	const SnowflakeLayout *preset = layout_find(*newval);
	const char *canonical = NULL;
	char	   *why;

	if (preset != NULL)
		canonical = preset->name;
	else if (pg_strcasecmp(*newval, "custom") == 0)
		canonical = "custom";
	else if (pg_strncasecmp(*newval, LAYOUT_ZONE_PREFIX, strlen(LAYOUT_ZONE_PREFIX)) == 0)
	{
		SnowflakeLayout *l = compat_guc_malloc(sizeof(SnowflakeLayout));

		if (l == NULL)
			return false;
		if (!layout_from_name(l, *newval, &why))
		{
			compat_guc_free(l);
			GUC_check_errdetail("%s", why);
			GUC_check_errhint("Write ZONE as a time zone name such as Asia/Shanghai (pg_timezone_names lists them) or as a UTC offset such as +08:00, east of UTC positive; for ShardingSphere 5.4 or later, add the day the JVM started, as in shardingsphere@Asia/Shanghai@2026-07-01.");
			return false;
		}
		*extra = l;
		canonical = l->name;
	}
	else
	{
		int			n;
		const SnowflakeLayout *p = layout_presets(&n);
		char		names[256] = "";

		for (int i = 0; i < n; i++)
		{
			if (i > 0)
				strlcat(names, ", ", sizeof(names));
			strlcat(names, p[i].name, sizeof(names));
		}
		if (pg_strncasecmp(*newval, LAYOUT_CUSTOM_PREFIX, strlen(LAYOUT_CUSTOM_PREFIX)) == 0)
			GUC_check_errdetail("A custom layout is set with snowflake.layout = custom and the snowflake.custom_* settings.");
		GUC_check_errhint("Available values: %s, custom, shardingsphere@ZONE and shardingsphere@ZONE@YYYY-MM-DD (ZONE: a time zone name such as Asia/Shanghai, or a UTC offset such as +08:00; YYYY-MM-DD: the day a JVM of ShardingSphere 5.4 or later started).",
						  names);
		return false;
	}

	if (strcmp(*newval, canonical) != 0)
	{
		char	   *s = compat_guc_strdup(canonical);

		if (s == NULL)
		{
			if (*extra != NULL)
				compat_guc_free(*extra);
			*extra = NULL;
			return false;
		}
		compat_guc_free(*newval);
		*newval = s;
	}
	return true;
}

static void
assign_layout(const char *newval, void *extra)
{
	if (extra != NULL)
		snowflake_layout = (const SnowflakeLayout *) extra;
	else if (strcmp(newval, "custom") == 0)
		build_custom_layout();
	else
		snowflake_layout = layout_find(newval);
}

/* the layout whose worker field bounds snowflake.worker_id */
static const SnowflakeLayout *
worker_layout(void)
{
	return snowflake_layout ? snowflake_layout : layout_default();
}

static bool
check_worker_id(int *newval, void **extra, GucSource source)
{
	const SnowflakeLayout *l = worker_layout();

	if (*newval > layout_max_worker(l))
	{
		GUC_check_errdetail("The \"%s\" layout has a %d-bit worker field, so worker ids run from 0 to %lld.",
							l->name, l->worker_bits, (long long) layout_max_worker(l));
		return false;
	}
	return true;
}

/*
 * Every process reads the configuration at a reload; this keeps what it
 * read and when, and writes nothing shared (the postmaster writes no
 * shared memory after start).  identity.c makes it the node's worker id in
 * the keeper, or in the startup process during recovery
 * (settings_worker_assigned); a backend that read it first waits for that.
 */
static void
assign_worker_id(int newval, void *extra)
{
	/* a valid one read: no longer rejected, also for a crash's restart */
	worker_rejected[0] = '\0';
	settings_worker_reading = newval;
	worker_read_at = (uint64) clock_monotonic_us();
	if (settings_worker_assigned)
		settings_worker_assigned(newval);
}

static void
define_postmaster_int(const char *name, const char *desc, int *var, int def,
					  int min, int max, int flags)
{
	DefineCustomIntVariable(name, desc, NULL, var, def, min, max,
							PGC_POSTMASTER, flags, NULL, NULL, NULL);
}

/* The settings fixed at server start: the layout and DecimalId's. */
static void
define_start_settings(void)
{
	/* the custom layout's parts first: choosing it reads them */
	define_postmaster_int("snowflake.custom_time_bits",
						  "Width of the time field of the custom layout.",
						  &custom_time_bits, 41, 1, 63, 0);
	define_postmaster_int("snowflake.custom_worker_bits",
						  "Width of the worker field of the custom layout.",
						  &custom_worker_bits, 10, 0, 31, 0);
	define_postmaster_int("snowflake.custom_seq_bits",
						  "Width of the sequence field of the custom layout.",
						  &custom_seq_bits, 12, 1, 31, 0);
	define_postmaster_int("snowflake.custom_tick_ms",
						  "Time unit of the custom layout.",
						  &custom_tick_ms, 1, 1, 86400 * 1000, GUC_UNIT_MS);
	DefineCustomBoolVariable("snowflake.custom_seq_above_worker",
							 "Put the sequence above the worker field in the custom layout, as Sonyflake does.",
							 NULL, &custom_seq_above_worker, false,
							 PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineCustomStringVariable("snowflake.custom_epoch",
							   "Epoch of the custom layout: a UTC date and time, or Unix milliseconds.",
							   NULL, &custom_epoch, "2016-11-01 00:00:00",
							   PGC_POSTMASTER, 0, NULL, NULL, NULL);

	/* it may hold a password: only superusers read it */
	DefineCustomStringVariable("snowflake.registry",
							   "Registry database this node leases its worker id from, while snowflake.worker_id is not set: a libpq connection string or service name.",
							   "Empty: no registry.",
							   &snowflake_registry, "",
							   PGC_POSTMASTER, GUC_SUPERUSER_ONLY, NULL, NULL, NULL);

	define_postmaster_int("snowflake.launch_id",
						  "DecimalId launch id, given by the deployment (0 only for tests).",
						  &snowflake_launch_id, 0, 0, 99999, 0);
	DefineCustomIntVariable("snowflake.decimal_generator_min",
							"Lowest DecimalId generator id this node may take.",
							"Give the nodes of one system disjoint ranges.",
							&snowflake_decimal_generator_min, 0, 0, 99999,
							PGC_POSTMASTER, 0, NULL, NULL, NULL);
	define_postmaster_int("snowflake.decimal_generator_max",
						  "Highest DecimalId generator id this node may take.",
						  &snowflake_decimal_generator_max, 99999, 0, 99999, 0);

	DefineCustomStringVariable("snowflake.layout",
							   "Layout of the IDs this node generates and decodes by default.",
							   "Presets reproduce the ID formats of ShardingSphere, Twitter, Discord, Instagram and Sonyflake, and a layout whose IDs stay below 2^53 for JavaScript; shardingsphere@ZONE is ShardingSphere's for a JVM whose default time zone is ZONE (releases up to 5.3), shardingsphere@ZONE@YYYY-MM-DD for one of release 5.4 or later started that day.",
							   &layout_setting,
							   "shardingsphere",
							   PGC_POSTMASTER,
							   0,
							   check_layout, assign_layout, NULL);
}

static void
define_runtime_settings(void)
{
	DefineCustomIntVariable("snowflake.worker_id",
							"Worker id of this node, written into every ID it generates; -1 means not set.",
							"Must differ on every node that generates IDs for the same tables. The node generates no ID until it is set.",
							&snowflake_worker_id,
							WORKER_ID_UNSET,
							WORKER_ID_UNSET, 65535,
							PGC_SIGHUP,
							0,
							check_worker_id, assign_worker_id, NULL);

	DefineCustomIntVariable("snowflake.max_clock_backward_ms",
							"How long to wait for a clock that went backwards before running ahead or refusing.",
							NULL,
							&snowflake_max_clock_backward_ms,
							10,
							0, MAX_CLOCK_BACKWARD_MS,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("snowflake.max_run_ahead_ms",
							"How far IDs may carry a time ahead of the system clock; -1 means as far as allowed, one day.",
							"Running ahead happens when a tick's sequence numbers are used up or when the clock went backwards.",
							&snowflake_max_run_ahead_ms,
							0,
							-1, RUN_AHEAD_CAP_MS,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	/*
	 * Only in the configuration files (SIGHUP: no SET, no ALTER ROLE or
	 * DATABASE SET, whose values every role can read in the catalogs), and
	 * shown to no one: SHOW gives a fingerprint (text.c).
	 */
	DefineCustomStringVariable("snowflake.opaque_key",
							   "Key of the opaque text form of IDs (snowflake_opaque()): 32 to 128 hexadecimal digits.",
							   "Set it in postgresql.conf; SHOW gives only its fingerprint.",
							   &text_opaque_key_setting,
							   "",
							   PGC_SIGHUP,
							   GUC_SUPERUSER_ONLY | GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE,
							   text_check_opaque_key, text_assign_opaque_key,
							   text_show_opaque_key);
}

/*
 * Without preloading, snowflake.layout cannot be defined (it is fixed at
 * server start); the decoding functions follow the value the configuration
 * file gives it, which stays visible as a placeholder.
 */
static void
layout_from_placeholder(void)
{
	const char *name = GetConfigOption("snowflake.layout", true, false);
	const SnowflakeLayout *l = name ? layout_find(name) : NULL;
	static SnowflakeLayout zone;
	char	   *why;

	if (l == NULL && name &&
		pg_strncasecmp(name, LAYOUT_ZONE_PREFIX, strlen(LAYOUT_ZONE_PREFIX)) == 0)
	{
		if (layout_from_name(&zone, name, &why))
			l = &zone;
		else
			set_found(SETTINGS_LAYOUT_UNUSABLE, name, NULL, why);
	}
	snowflake_layout = l ? l : layout_default();
	if (name && pg_strcasecmp(name, "custom") == 0)
		set_found(SETTINGS_LAYOUT_UNUSABLE, "custom", NULL,
				  _("The custom layout is read only when the library is preloaded."));
}

/*
 * Names under snowflake. that are none of ours: a misspelt setting, which
 * PostgreSQL removes with a WARNING.  Called before the prefix is reserved.
 */
static void
find_unknown_names(void)
{
	int			n;
	struct config_generic **vars = compat_guc_variables(&n);

	for (int i = 0; i < n; i++)
	{
		struct config_generic *g = vars[i];
		bool		ours = false;

		/* setting names are case-insensitive */
		if (g == NULL || pg_strncasecmp(g->name, "snowflake.", 10) != 0)
			continue;
		for (int j = 0; j < (int) lengthof(setting_names); j++)
			ours |= pg_strcasecmp(g->name, setting_names[j]) == 0;
		if (!ours)
			set_found(SETTINGS_UNKNOWN, g->name, NULL, NULL);
	}
}

/*
 * A value the configuration gave a setting was rejected at server start:
 * kept, so that every refusal names it to the client, not only the server
 * log's WARNING.  The worker id's is kept apart, as a reload fixes it.
 */
static void
rejected_at_start(const char *name, const char *value)
{
	if (strcmp(name, "snowflake.worker_id") == 0)
	{
		strlcpy(worker_rejected, value, sizeof(worker_rejected));
		settings_worker_reading = WORKER_ID_REJECTED;
	}
	else if (strcmp(name, "snowflake.layout") == 0)
		set_found(SETTINGS_LAYOUT_REJECTED, name, value, NULL);
	else
		set_found(SETTINGS_REJECTED, name, value, NULL);
}

/*
 * Define the settings.  When preloaded, a value the configuration gives one
 * of them that PostgreSQL rejects (leaving the default in place) is found
 * by validating the configured text again, and disables generation.
 */
void
settings_define(bool preloaded)
{
	char	   *given[lengthof(setting_names)];

	if (!preloaded)
	{
		layout_from_placeholder();
		define_runtime_settings();
		return;
	}

	for (int i = 0; i < (int) lengthof(setting_names); i++)
	{
		const char *v = GetConfigOption(setting_names[i], true, false);

		/* the opaque key's hooks judge it and never reject it (text.c) */
		if (strcmp(setting_names[i], "snowflake.opaque_key") == 0)
			v = NULL;
		given[i] = v ? MemoryContextStrdup(TopMemoryContext, v) : NULL;
	}

	define_start_settings();
	define_runtime_settings();
	text_opaque_key_preloaded();
	find_unknown_names();
	MarkGUCPrefixReserved("snowflake");

	for (int i = 0; i < (int) lengthof(setting_names); i++)
	{
		bool		rejected;

		if (given[i] == NULL)
			continue;
		/* with changeVal false, 0 means invalid and -1 valid */
		rejected = set_config_option(setting_names[i], given[i], PGC_POSTMASTER,
									 PGC_S_FILE, GUC_ACTION_SET, false, DEBUG1,
									 false) == 0;
		if (rejected)
			rejected_at_start(setting_names[i], given[i]);
		pfree(given[i]);
	}
	if (snowflake_layout == NULL)
		snowflake_layout = layout_default();
	/* PostgreSQL says which values it rejected; this, nobody else says */
	if (found.trouble == SETTINGS_LAYOUT_UNUSABLE)
		ereport(WARNING,
				(errmsg("snowflake layout \"%s\" cannot be used", found.name),
				 errdetail("%s", found.why),
				 errhint("Every snowflake generator of this server refuses until the configuration is fixed and the server restarted.")));
}
