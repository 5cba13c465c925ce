/*-------------------------------------------------------------------------
 *
 * layout.c
 *	  The layout presets, the custom layout built from settings, their
 *	  validation, and the conversions between ticks and timestamps.
 *
 * Each preset reproduces the ID format of an existing generator exactly, so
 * IDs made elsewhere decode and sort together with ours.  Nothing here
 * raises an error: the postmaster builds layouts while it reads its
 * settings, so problems come back as text for the caller to report.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/int.h"
#include "utils/datetime.h"
#include "utils/timestamp.h"

#include "layout.h"


static SnowflakeLayout presets[] = {
	{"shardingsphere", 41, 10, 12, false, INT64CONST(1477958400000), 1,
	"1 ms ticks since 2016-11-01, 10-bit worker, 12-bit sequence (Apache ShardingSphere)"},
	{"twitter", 41, 10, 12, false, INT64CONST(1288834974657), 1,
	"1 ms ticks since 2010-11-04 01:42:54.657, 5-bit datacenter + 5-bit worker, 12-bit sequence"},
	{"discord", 42, 10, 12, false, INT64CONST(1420070400000), 1,
	"1 ms ticks since 2015-01-01, 5-bit worker + 5-bit process, 12-bit increment"},
	{"instagram", 41, 13, 10, false, INT64CONST(1314220021721), 1,
	"1 ms ticks since 2011-08-24 21:07:01.721, 13-bit shard, 10-bit sequence"},
	{"sonyflake", 39, 16, 8, true, INT64CONST(1409529600000), 10,
	"10 ms ticks since 2014-09-01, 8-bit sequence, then 16-bit machine id"},
	{"javascript", 38, 6, 9, false, INT64CONST(1735689600000), 10,
	"10 ms ticks since 2025-01-01, 6-bit worker, 9-bit sequence; every ID below 2^53"},
};

static bool presets_ready = false;

static void
presets_finish(void)
{
	if (presets_ready)
		return;
	for (int i = 0; i < (int) lengthof(presets); i++)
	{
		char	   *why;

		if (!layout_finish(&presets[i], &why))
			elog(ERROR, "snowflake layout preset \"%s\" is invalid: %s",
				 presets[i].name, why);
	}
	presets_ready = true;
}

const SnowflakeLayout *
layout_presets(int *count)
{
	presets_finish();
	*count = (int) lengthof(presets);
	return presets;
}

const SnowflakeLayout *
layout_default(void)
{
	presets_finish();
	return &presets[0];
}

const SnowflakeLayout *
layout_find(const char *name)
{
	presets_finish();
	for (int i = 0; i < (int) lengthof(presets); i++)
	{
		if (pg_strcasecmp(presets[i].name, name) == 0)
			return &presets[i];
	}
	return NULL;
}

/*
 * Check a layout and derive its shifts.  On failure *why says what is wrong,
 * in a form fit for errdetail.  Never raises an error itself, so it can
 * serve GUC check hooks.
 */
bool
layout_finish(SnowflakeLayout *l, char **why)
{
	static char buf[256];
	int64		span;
	int64		end_ms;

	*why = buf;
	if (l->time_bits < 1 || l->seq_bits < 1 || l->worker_bits < 0)
	{
		snprintf(buf, sizeof(buf),
				 "The time and sequence fields need at least 1 bit each and the worker field at least 0.");
		return false;
	}
	/* decoding returns the worker and sequence as integer */
	if (l->worker_bits > 31 || l->seq_bits > 31)
	{
		snprintf(buf, sizeof(buf),
				 "The worker and sequence fields may have at most 31 bits each.");
		return false;
	}
	if (l->time_bits + l->worker_bits + l->seq_bits > 64 ||
		l->worker_bits + l->seq_bits > 62)
	{
		snprintf(buf, sizeof(buf),
				 "The fields take %d bits, of which %d below the time field; an ID has 64, and at least one time bit below the sign bit.",
				 l->time_bits + l->worker_bits + l->seq_bits,
				 l->worker_bits + l->seq_bits);
		return false;
	}
	if (l->tick_ms < 1)
	{
		snprintf(buf, sizeof(buf), "The time unit must be at least 1 ms.");
		return false;
	}
	if (l->epoch_ms < 0 || l->epoch_ms > LAYOUT_MAX_UNIX_MS)
	{
		snprintf(buf, sizeof(buf), "The epoch must lie between 1970-01-01 and the end of timestamp with time zone.");
		return false;
	}

	if (l->seq_above_worker)
	{
		l->worker_shift = 0;
		l->seq_shift = l->worker_bits;
	}
	else
	{
		l->seq_shift = 0;
		l->worker_shift = l->seq_bits;
	}
	l->time_shift = l->worker_bits + l->seq_bits;
	/* the sign bit is never set, whatever the declared time width */
	l->max_tick = Min((int64) LAYOUT_MASK(l->time_bits),
					  PG_INT64_MAX >> l->time_shift);

	/*
	 * The layout's end of life must be a representable timestamp.  Every
	 * step is checked: a wide field times a long tick overflows int64.
	 */
	if (pg_mul_s64_overflow(layout_max_tick(l) + 1, l->tick_ms, &span) ||
		pg_add_s64_overflow(l->epoch_ms, span, &end_ms) ||
		end_ms > LAYOUT_MAX_UNIX_MS)
	{
		snprintf(buf, sizeof(buf),
				 "The time field outlasts the range of timestamp with time zone; use fewer time bits or a shorter time unit.");
		return false;
	}
	*why = NULL;
	return true;
}

/*
 * Parse an epoch given as "YYYY-MM-DD[ HH:MM:SS[.fff]]" in UTC, or as Unix
 * milliseconds.  A date that does not exist (2024-02-31) is refused, not
 * carried into the next month.
 */
static bool
parse_epoch(const char *s, int64 *unix_ms)
{
	int			y,
				mo,
				d,
				h = 0,
				mi = 0,
				sec = 0,
				frac = 0,
				n,
				used = 0;
	char		fracbuf[4] = "000";

	if (s == NULL)
		return false;
	if (sscanf(s, "%d-%d-%d%n", &y, &mo, &d, &used) == 3)
	{
		const char *rest = s + used;
		int			jy,
					jm,
					jd;

		if (*rest == ' ' || *rest == 'T')
		{
			n = 0;
			if (sscanf(rest + 1, "%d:%d:%d%n", &h, &mi, &sec, &n) != 3)
				return false;
			rest += 1 + n;
			if (*rest == '.')
			{
				for (int i = 0; i < 3 && rest[1 + i] >= '0' && rest[1 + i] <= '9'; i++)
					fracbuf[i] = rest[1 + i];
				frac = atoi(fracbuf);
				rest++;
				while (*rest >= '0' && *rest <= '9')
					rest++;
			}
		}
		if (*rest != '\0' || y < 1970 || y > 200000 || mo < 1 || mo > 12 ||
			d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 || mi > 59 ||
			sec < 0 || sec > 59)
			return false;
		j2date(date2j(y, mo, d), &jy, &jm, &jd);
		if (jy != y || jm != mo || jd != d)
			return false;
		*unix_ms = (int64) (date2j(y, mo, d) - UNIX_EPOCH_JDATE) * 86400000 +
			(int64) h * 3600000 + mi * 60000 + sec * 1000 + frac;
		return true;
	}
	n = 0;
	if (sscanf(s, INT64_FORMAT "%n", unix_ms, &n) == 1 && s[n] == '\0' && n > 0)
		return true;
	return false;
}

/*
 * Build the custom layout from its settings.  Returns false with *why set
 * when it is unusable.
 */
bool
layout_build_custom(SnowflakeLayout *l, int time_bits, int worker_bits,
					int seq_bits, int tick_ms, bool seq_above_worker,
					const char *epoch, int64 now_unix_ms, char **why)
{
	static char buf[256];

	memset(l, 0, sizeof(*l));
	l->name = "custom";
	l->description = "from the snowflake.custom_* settings";
	l->time_bits = time_bits;
	l->worker_bits = worker_bits;
	l->seq_bits = seq_bits;
	l->tick_ms = tick_ms;
	l->seq_above_worker = seq_above_worker;

	*why = buf;
	if (!parse_epoch(epoch, &l->epoch_ms))
	{
		snprintf(buf, sizeof(buf),
				 "snowflake.custom_epoch \"%s\" is not a date (YYYY-MM-DD[ HH:MM:SS[.fff]], UTC) or Unix milliseconds from 1970 on",
				 epoch ? epoch : "");
		return false;
	}
	if (l->epoch_ms > now_unix_ms)
	{
		snprintf(buf, sizeof(buf), "snowflake.custom_epoch is in the future");
		return false;
	}
	return layout_finish(l, why);
}

TimestampTz
layout_tick_to_timestamptz(const SnowflakeLayout *l, int64 tick)
{
	return (layout_tick_to_unix_ms(l, tick) - PG_EPOCH_UNIX_MS) * 1000;
}

/* The tick that holds ts; the caller checks the result against the range. */
int64
layout_timestamptz_to_tick(const SnowflakeLayout *l, TimestampTz ts)
{
	int64		pg_ms;

	/* floor, so that an instant a few microseconds into a ms stays in it */
	pg_ms = ts >= 0 ? ts / 1000 : -((-ts + 999) / 1000);
	return layout_unix_ms_to_tick(l, pg_ms + PG_EPOCH_UNIX_MS);
}
