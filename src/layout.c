/*-------------------------------------------------------------------------
 *
 * layout.c
 *	  The layout presets, the custom layout built from settings, the
 *	  layouts named with their parameters (custom ones, and ShardingSphere's
 *	  for a JVM in a given time zone), their validation, and the conversions
 *	  between ticks and timestamps.
 *
 * Each preset reproduces the ID format of an existing generator exactly, so
 * IDs made elsewhere decode and sort together with ours.  Nothing here
 * raises an error: the postmaster builds layouts while it reads its
 * settings, so problems come back as text for the caller to report.  Time
 * zones are PostgreSQL's own (pgtime.h), never the C library's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <errno.h>

#include "common/int.h"
#include "common/string.h"
#include "pgtime.h"
#include "utils/datetime.h"
#include "utils/timestamp.h"

#include "layout.h"
#include "messages.h"


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
				 _("The time and sequence fields need at least 1 bit each and the worker field at least 0."));
		return false;
	}
	/* decoding returns the worker and sequence as integer */
	if (l->worker_bits > 31 || l->seq_bits > 31)
	{
		snprintf(buf, sizeof(buf),
				 _("The worker and sequence fields may have at most 31 bits each."));
		return false;
	}
	if (l->time_bits + l->worker_bits + l->seq_bits > 64 ||
		l->worker_bits + l->seq_bits > 62)
	{
		snprintf(buf, sizeof(buf),
				 _("The fields take %d bits, of which %d below the time field; an ID has 64, and at least one time bit below the sign bit."),
				 l->time_bits + l->worker_bits + l->seq_bits,
				 l->worker_bits + l->seq_bits);
		return false;
	}
	if (l->tick_ms < 1)
	{
		snprintf(buf, sizeof(buf), _("The time unit must be at least 1 ms."));
		return false;
	}
	if (l->epoch_ms < 0 || l->epoch_ms > LAYOUT_MAX_UNIX_MS)
	{
		snprintf(buf, sizeof(buf), _("The epoch must lie between 1970-01-01 and the end of timestamp with time zone."));
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
				 _("The time field outlasts the range of timestamp with time zone; use fewer time bits or a shorter time unit."));
		return false;
	}
	*why = NULL;
	return true;
}

/* What parse_epoch() made of its text. */
typedef enum EpochParse
{
	EPOCH_OK,
	EPOCH_NOT_A_TIME,
	EPOCH_OUT_OF_RANGE
} EpochParse;

/*
 * Parse an epoch given as "YYYY-MM-DD[ HH:MM:SS[.fff]]" in UTC, or as Unix
 * milliseconds.  A date that does not exist (2024-02-31) is refused, not
 * carried into the next month; a number too large for int64 is out of
 * range, not a time in the far future.
 */
static EpochParse
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
	char	   *end;

	if (s == NULL)
		return EPOCH_NOT_A_TIME;
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
				return EPOCH_NOT_A_TIME;
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
		if (*rest != '\0' || mo < 1 || mo > 12 || d < 1 || d > 31 ||
			h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 || sec > 59)
			return EPOCH_NOT_A_TIME;
		if (y < 1970 || y > 200000)
			return EPOCH_OUT_OF_RANGE;
		j2date(date2j(y, mo, d), &jy, &jm, &jd);
		if (jy != y || jm != mo || jd != d)
			return EPOCH_NOT_A_TIME;
		*unix_ms = (int64) (date2j(y, mo, d) - UNIX_EPOCH_JDATE) * 86400000 +
			(int64) h * 3600000 + mi * 60000 + sec * 1000 + frac;
		return EPOCH_OK;
	}
	if (*s == '\0' || strspn(s + (*s == '-'), "0123456789") != strlen(s + (*s == '-')))
		return EPOCH_NOT_A_TIME;
	errno = 0;
	*unix_ms = strtoi64(s, &end, 10);
	if (errno == ERANGE)
		return EPOCH_OUT_OF_RANGE;
	return *end == '\0' && end != s ? EPOCH_OK : EPOCH_NOT_A_TIME;
}

/* A Unix time in ms as "YYYY-MM-DD[ HH:MM:SS[.fff]]" UTC, parse_epoch's form. */
static void
format_unix_ms(int64 unix_ms, char *buf, size_t len)
{
	int64		day = unix_ms / 86400000;
	int64		in_day = unix_ms % 86400000;
	int			y,
				m,
				d;

	j2date((int) (day + UNIX_EPOCH_JDATE), &y, &m, &d);
	if (in_day == 0)
		snprintf(buf, len, "%04d-%02d-%02d", y, m, d);
	else if (in_day % 1000 == 0)
		snprintf(buf, len, "%04d-%02d-%02d %02d:%02d:%02d", y, m, d,
				 (int) (in_day / 3600000), (int) (in_day / 60000 % 60),
				 (int) (in_day / 1000 % 60));
	else
		snprintf(buf, len, "%04d-%02d-%02d %02d:%02d:%02d.%03d", y, m, d,
				 (int) (in_day / 3600000), (int) (in_day / 60000 % 60),
				 (int) (in_day / 1000 % 60), (int) (in_day % 1000));
}

/*
 * The name that carries a custom layout's parameters, which decoding
 * functions accept anywhere: "custom:T/W/S/Nms/EPOCH", with
 * "/seq_above_worker" at the end for the Sonyflake order.  This is the
 * canonical form; layout_from_name() also takes the epoch in Unix ms.
 */
void
layout_custom_name(const SnowflakeLayout *l, char *buf, size_t len)
{
	char		epoch[40];

	format_unix_ms(l->epoch_ms, epoch, sizeof(epoch));
	snprintf(buf, len, "custom:%d/%d/%d/" INT64_FORMAT "ms/%s%s",
			 l->time_bits, l->worker_bits, l->seq_bits, l->tick_ms, epoch,
			 l->seq_above_worker ? "/seq_above_worker" : "");
}

/* Parse a decimal field of a custom layout's name, up to the next '/'. */
static bool
name_field(const char **p, const char *unit, int64 max, int64 *value)
{
	const char *s = *p;
	int64		v = 0;

	if (*s < '0' || *s > '9')
		return false;
	while (*s >= '0' && *s <= '9')
	{
		v = v * 10 + (*s++ - '0');
		if (v > max)
			return false;
	}
	if (strncmp(s, unit, strlen(unit)) != 0)
		return false;
	s += strlen(unit);
	if (*s != '/')
		return false;
	*p = s + 1;
	*value = v;
	return true;
}

/*
 * ShardingSphere's generator (SnowflakeKeyGenerateAlgorithm) takes as its
 * epoch a java.util.Calendar set to 2016-11-01 00:00:00.000 in the JVM's
 * default time zone: local midnight, at the UTC offset the zone had on that
 * day by its rules in the tz database (not the offset of the day the JVM
 * runs).  In UTC that is this instant, the "shardingsphere" preset's epoch.
 */
#define SHARDINGSPHERE_EPOCH_UTC_MS	INT64CONST(1477958400000)

/* Java's custom time zone ids ("GMT+hh:mm") go up to 23:59 either way */
#define ZONE_OFFSET_MAX_MINUTES	(23 * 60 + 59)

/*
 * Parse a fixed UTC offset, east of UTC positive as in ISO 8601: "+08:00",
 * "+0800", "+8" or "+08".  Returns false when s is not written so; the
 * range is the caller's to check.
 */
static bool
parse_zone_offset(const char *s, int *minutes)
{
	int			sign = (*s == '-') ? -1 : 1;
	int			h,
				m = 0;
	size_t		digits;

	if (*s != '+' && *s != '-')
		return false;
	s++;
	digits = strspn(s, "0123456789");
	if (digits == 4 && s[4] == '\0')
	{
		h = (s[0] - '0') * 10 + (s[1] - '0');
		m = (s[2] - '0') * 10 + (s[3] - '0');
	}
	else if (digits == 1 || digits == 2)
	{
		h = atoi(s);
		s += digits;
		if (*s == ':')
		{
			if (strspn(s + 1, "0123456789") != 2 || s[3] != '\0')
				return false;
			m = atoi(s + 1);
		}
		else if (*s != '\0')
			return false;
	}
	else
		return false;
	if (m > 59)
		h = 99;					/* out of range below */
	*minutes = sign * (h * 60 + m);
	return true;
}

/* The layout's name for a fixed UTC offset of minutes east: "+HH:MM". */
static void
offset_name(SnowflakeLayout *l, int minutes)
{
	snprintf(l->name_buf, sizeof(l->name_buf), "%s%c%02d:%02d",
			 LAYOUT_ZONE_PREFIX, minutes < 0 ? '-' : '+',
			 abs(minutes) / 60, abs(minutes) % 60);
}

/*
 * Parse the day a JVM started, "YYYY-MM-DD", into tm at noon local time,
 * which has the day's own offset: clocks change at night.  Returns false
 * when s is not a day of the calendar written so.
 */
static bool
parse_start_day(const char *s, struct pg_tm *tm)
{
	int			y,
				m,
				d,
				jy,
				jm,
				jd;

	if (strlen(s) != 10 || strspn(s, "0123456789") != 4 || s[4] != '-' ||
		strspn(s + 5, "0123456789") != 2 || s[7] != '-' ||
		strspn(s + 8, "0123456789") != 2)
		return false;
	y = atoi(s);
	m = atoi(s + 5);
	d = atoi(s + 8);
	if (m < 1 || m > 12 || d < 1 || d > 31)
		return false;
	j2date(date2j(y, m, d), &jy, &jm, &jd);
	if (jy != y || jm != m || jd != d)
		return false;
	memset(tm, 0, sizeof(*tm));
	tm->tm_year = y;
	tm->tm_mon = m;
	tm->tm_mday = d;
	tm->tm_hour = 12;
	return true;
}

/*
 * ShardingSphere's layout as a JVM whose default time zone is zone makes
 * it: a time zone name of the tz database (looked up as a file of the time
 * zone database only, never as a POSIX TZ string such as "UTC+8", whose
 * sign is the opposite of Java's "GMT+8"), or a fixed UTC offset.
 *
 * Releases up to 5.3 take the epoch as a Calendar of the zone set to
 * 2016-11-01 00:00: local midnight at the offset the zone had that day.
 * Releases from 5.4 take local midnight at the offset in force when the
 * class loads, which "ZONE@YYYY-MM-DD" names by the day the JVM started.
 * That layout is the fixed offset's, and has its name.  The layout's name
 * is canonical: the zone as the database spells it, or the offset as
 * "+HH:MM".
 */
static bool
zone_layout(SnowflakeLayout *l, const char *name, char **why)
{
	static char buf[256];
	const char *spec = name + strlen(LAYOUT_ZONE_PREFIX);
	const char *at = strchr(spec, '@');
	char		zone[NAMEDATALEN];
	struct pg_tm start;
	int64		epoch_ms;
	int			minutes = 0;

	*why = buf;
	*l = *layout_find("shardingsphere");
	if (strlen(name) >= NAMEDATALEN)
	{
		snprintf(buf, sizeof(buf),
				 _("A layout's name has at most %d characters; this one has %d."),
				 NAMEDATALEN - 1, (int) strlen(name));
		return false;
	}
	strlcpy(zone, spec, at != NULL ? (size_t) (at - spec) + 1 : sizeof(zone));
	if (*zone == '\0')
	{
		snprintf(buf, sizeof(buf),
				 _("No time zone follows \"%s\"."), LAYOUT_ZONE_PREFIX);
		return false;
	}
	if (at != NULL)
	{
		if (!parse_start_day(at + 1, &start))
		{
			snprintf(buf, sizeof(buf),
					 _("\"%s\" is not a day written as YYYY-MM-DD, such as 2026-07-01."),
					 at + 1);
			return false;
		}
		if (date2j(start.tm_year, start.tm_mon, start.tm_mday) < date2j(2016, 11, 1))
		{
			snprintf(buf, sizeof(buf),
					 _("No ShardingSphere generator started before its epoch, 2016-11-01; %s is earlier."),
					 at + 1);
			return false;
		}
	}
	if (parse_zone_offset(zone, &minutes))
	{
		if (abs(minutes) > ZONE_OFFSET_MAX_MINUTES)
		{
			snprintf(buf, sizeof(buf),
					 _("The UTC offset \"%s\" is out of range: offsets run from -23:59 to +23:59."),
					 zone);
			return false;
		}
		offset_name(l, minutes);
		epoch_ms = SHARDINGSPHERE_EPOCH_UTC_MS - (int64) minutes * 60000;
	}
	else
	{
		char		file[NAMEDATALEN + 1];
		pg_tz	   *tz;
		struct pg_tm tm;

		/* the machine's own zone, which can change under an index */
		if (pg_strcasecmp(zone, "localtime") == 0)
		{
			snprintf(buf, sizeof(buf),
					 _("\"localtime\" is whatever zone the machine is set to; name that zone."));
			return false;
		}
		/* a leading colon makes pg_tzset() read only the zone files */
		snprintf(file, sizeof(file), ":%s", zone);
		tz = (*zone == '+' || *zone == '-') ? NULL : pg_tzset(file);
		if (tz == NULL)
		{
			if ((pg_strncasecmp(zone, "GMT", 3) == 0 ||
				 pg_strncasecmp(zone, "UTC", 3) == 0) &&
				(zone[3] == '+' || zone[3] == '-'))
				snprintf(buf, sizeof(buf),
						 _("\"%s\" is not a time zone name; write a fixed UTC offset as \"+08:00\", east of UTC positive (Java's \"GMT+08:00\")."),
						 zone);
			else if (*zone == '+' || *zone == '-')
				snprintf(buf, sizeof(buf),
						 _("\"%s\" is not a UTC offset; write one as \"+08:00\" or \"-04:00\"."),
						 zone);
			else
				snprintf(buf, sizeof(buf),
						 _("Time zone \"%s\" is not in this server's time zone database."),
						 zone);
			return false;
		}
		if (!pg_tz_acceptable(tz))
		{
			snprintf(buf, sizeof(buf),
					 _("Time zone \"%s\" counts leap seconds, which neither PostgreSQL nor Java does."),
					 zone);
			return false;
		}
		if (at != NULL)
		{
			/*
			 * The offset returned counts seconds west of UTC; every zone's
			 * is a whole minute since 1972, and the day is from 2016 on.
			 */
			minutes = -DetermineTimeZoneOffset(&start, tz) / 60;
			offset_name(l, minutes);
			epoch_ms = SHARDINGSPHERE_EPOCH_UTC_MS - (int64) minutes * 60000;
		}
		else
		{
			snprintf(l->name_buf, sizeof(l->name_buf), "%s%s",
					 LAYOUT_ZONE_PREFIX, pg_get_timezone_name(tz));

			/* local midnight; the offset returned counts seconds west of UTC */
			memset(&tm, 0, sizeof(tm));
			tm.tm_year = 2016;
			tm.tm_mon = 11;
			tm.tm_mday = 1;
			epoch_ms = SHARDINGSPHERE_EPOCH_UTC_MS +
				(int64) DetermineTimeZoneOffset(&tm, tz) * 1000;
		}
	}
	l->name = l->name_buf;
	l->epoch_ms = epoch_ms;
	l->description = "ShardingSphere's layout for a JVM in a named time zone: 1 ms ticks since local midnight of 2016-11-01 there";
	if (!layout_finish(l, why))
		return false;

	/*
	 * A JVM started after the layout's last tick makes no ID: the day, from
	 * its local midnight, must begin before the end of life.
	 */
	if (at != NULL)
	{
		int64		end_ms = l->epoch_ms + (layout_max_tick(l) + 1) * l->tick_ms;
		int64		day_ms = (int64) (date2j(start.tm_year, start.tm_mon, start.tm_mday) -
									  UNIX_EPOCH_JDATE) * 86400000 - (int64) minutes * 60000;
		int			y,
					m,
					d;

		if (day_ms >= end_ms)
		{
			j2date((int) (end_ms / 86400000) + UNIX_EPOCH_JDATE, &y, &m, &d);
			*why = buf;
			snprintf(buf, sizeof(buf),
					 _("No ShardingSphere generator makes IDs after its layout's end of life, %04d-%02d-%02d (UTC); %s is later."),
					 y, m, d, at + 1);
			return false;
		}
	}
	return true;
}

/* Whether a name is one that layout_from_name() reads. */
bool
layout_named_with_parameters(const char *name)
{
	return pg_strncasecmp(name, LAYOUT_CUSTOM_PREFIX, strlen(LAYOUT_CUSTOM_PREFIX)) == 0 ||
		pg_strncasecmp(name, LAYOUT_ZONE_PREFIX, strlen(LAYOUT_ZONE_PREFIX)) == 0;
}

/*
 * Build a layout from a name that carries its parameters: a custom layout
 * (layout_custom_name()'s form) or ShardingSphere's for a time zone.  The
 * name alone decides the result: no setting and no clock enter it, so the
 * functions that take it can be IMMUTABLE (as PostgreSQL's own time zone
 * conversions are, which read the same time zone database).  Returns false
 * with *why set when the name is not such a name or the layout it
 * describes is unusable.
 */
bool
layout_from_name(SnowflakeLayout *l, const char *name, char **why)
{
	static char buf[256];
	const char *p = name + strlen(LAYOUT_CUSTOM_PREFIX);
	int64		t,
				w,
				s,
				tick;
	const char *slash;
	size_t		epoch_len;
	char		epoch[64];

	if (pg_strncasecmp(name, LAYOUT_ZONE_PREFIX, strlen(LAYOUT_ZONE_PREFIX)) == 0)
		return zone_layout(l, name, why);
	memset(l, 0, sizeof(*l));
	*why = buf;
	if (pg_strncasecmp(name, LAYOUT_CUSTOM_PREFIX, strlen(LAYOUT_CUSTOM_PREFIX)) != 0 ||
		!name_field(&p, "", 64, &t) || !name_field(&p, "", 64, &w) ||
		!name_field(&p, "", 64, &s) || !name_field(&p, "ms", 86400000, &tick))
	{
		snprintf(buf, sizeof(buf),
				 _("A custom layout is named \"custom:TIME_BITS/WORKER_BITS/SEQ_BITS/TICKms/EPOCH\", as in \"custom:41/10/12/1ms/2016-11-01\", with \"/seq_above_worker\" at the end for the Sonyflake order."));
		return false;
	}
	slash = strchr(p, '/');
	if (slash != NULL && pg_strcasecmp(slash + 1, "seq_above_worker") != 0)
	{
		snprintf(buf, sizeof(buf),
				 _("The only option after the epoch is \"/seq_above_worker\"."));
		return false;
	}
	epoch_len = slash ? (size_t) (slash - p) : strlen(p);
	if (epoch_len >= sizeof(epoch))
	{
		snprintf(buf, sizeof(buf), _("The epoch is not a date (YYYY-MM-DD[ HH:MM:SS[.fff]], UTC) or Unix milliseconds."));
		return false;
	}
	strlcpy(epoch, p, epoch_len + 1);
	l->name = name;
	l->description = "a custom layout named with its parameters";
	l->time_bits = (int) t;
	l->worker_bits = (int) w;
	l->seq_bits = (int) s;
	l->tick_ms = tick;
	l->seq_above_worker = slash != NULL;
	if (parse_epoch(epoch, &l->epoch_ms) != EPOCH_OK)
	{
		snprintf(buf, sizeof(buf),
				 _("The epoch \"%s\" is not a date (YYYY-MM-DD[ HH:MM:SS[.fff]], UTC) or Unix milliseconds from 1970 to the end of timestamp with time zone."),
				 epoch);
		return false;
	}
	return layout_finish(l, why);
}

/*
 * Build the custom layout from its settings.  Returns false with *why set
 * when it is unusable, naming the setting: an epoch that cannot be read or
 * lies in the future, fields that do not fit, or a layout whose last tick
 * has already begun, which leaves no ID above the ones a restart must
 * assume issued.
 */
bool
layout_build_custom(SnowflakeLayout *l, int time_bits, int worker_bits,
					int seq_bits, int tick_ms, bool seq_above_worker,
					const char *epoch, int64 now_unix_ms, char **why)
{
	static char buf[256];
	char		end[40];

	memset(l, 0, sizeof(*l));
	l->name = "custom";
	l->description = "from the snowflake.custom_* settings";
	l->time_bits = time_bits;
	l->worker_bits = worker_bits;
	l->seq_bits = seq_bits;
	l->tick_ms = tick_ms;
	l->seq_above_worker = seq_above_worker;

	*why = buf;
	switch (parse_epoch(epoch, &l->epoch_ms))
	{
		case EPOCH_OK:
			break;
		case EPOCH_NOT_A_TIME:
			snprintf(buf, sizeof(buf),
					 _("snowflake.custom_epoch \"%.40s\" is not a date (YYYY-MM-DD[ HH:MM:SS[.fff]], UTC) or Unix milliseconds from 1970 on."),
					 epoch ? epoch : "");
			return false;
		case EPOCH_OUT_OF_RANGE:
			snprintf(buf, sizeof(buf),
					 _("snowflake.custom_epoch \"%.40s\" is out of range: an epoch lies between 1970-01-01 and the end of timestamp with time zone."),
					 epoch);
			return false;
	}
	if (l->epoch_ms > now_unix_ms)
	{
		snprintf(buf, sizeof(buf), _("snowflake.custom_epoch is in the future."));
		return false;
	}
	if (!layout_finish(l, why))
		return false;
	if (layout_unix_ms_to_tick(l, now_unix_ms) >= layout_max_tick(l))
	{
		*why = buf;
		format_unix_ms(layout_tick_to_unix_ms(l, layout_max_tick(l)), end, sizeof(end));
		snprintf(buf, sizeof(buf),
				 _("snowflake.custom_time_bits = %d leaves no room to issue an ID: with snowflake.custom_tick_ms = %d the last tick of the layout begins at %s UTC and has begun."),
				 time_bits, tick_ms, end);
		return false;
	}
	return true;
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
