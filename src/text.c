/*-------------------------------------------------------------------------
 *
 * text.c
 *	  IDs as text, for the APIs and browsers that cannot hold a 64-bit
 *	  number: Crockford's base32 and base62, both ways, each with an
 *	  optional type prefix; and the opaque form, a keyed, authenticated
 *	  encryption of an ID for public URLs, with the hooks of its key's
 *	  setting, snowflake.opaque_key.
 *
 * Both forms write the ID as a number in their base, left-padded to a fixed
 * width (13 base32 digits, 11 base62 ones), so that the strings sort as the
 * IDs do, byte by byte.  Base32 is written in lower case, as TypeID writes
 * it, and read in either case, with Crockford's I and L for 1 and O for 0.
 * Base62's digits are 0-9, A-Z, a-z, in ASCII order.  A prefix is what
 * TypeID allows: lower-case letters and underscores, at most 63, beginning
 * and ending with a letter; "_" separates it from the digits.  Readers name
 * the first character that is no digit before they judge the length, so a
 * hyphenated string is refused for its hyphen.
 *
 * The opaque form is deterministic authenticated encryption in the SIV
 * construction, with HMAC-SHA-256 (PostgreSQL's own) as its pseudo-random
 * function: a 64-bit tag T = HMAC(key, "tag", prefix, ID), then the ID
 * XORed with HMAC(key, "pad", prefix, T).  The 128 bits T || ciphertext are
 * written as 26 base32 digits, in lower case only: the reader takes no
 * other case and none of base32's aliases, so that an ID has one public
 * string.  Reading recomputes the tag: a string made with another key or
 * prefix, or altered, passes with probability 2^-64.
 *
 * The key's setting never holds the key: its check hook decodes the text
 * into the setting's extra and empties the text, so that nothing PostgreSQL
 * prints of a setting (a reload's "parameter changed to", a rejected value)
 * can print the key, and never rejects a value, judging it instead.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hmac.h"
#include "common/sha2.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/resowner.h"

#include "compat.h"
#include "layout.h"
#include "messages.h"
#include "snowflake.h"
#include "text.h"

PG_FUNCTION_INFO_V1(snowflake_base32);
PG_FUNCTION_INFO_V1(snowflake_from_base32);
PG_FUNCTION_INFO_V1(snowflake_base62);
PG_FUNCTION_INFO_V1(snowflake_from_base62);
PG_FUNCTION_INFO_V1(snowflake_opaque);
PG_FUNCTION_INFO_V1(snowflake_from_opaque);

/* the longest prefix TypeID allows */
#define PREFIX_MAX	63

#define B32_WIDTH	13
#define B62_WIDTH	11
#define OPAQUE_WIDTH	26

/*
 * Each digit's value plus one, by byte; 0 for a byte that is no digit.
 * Base32 takes both cases and Crockford's confusables; never U.  The
 * opaque form takes only the digits it writes, base32's in lower case.
 */
#define B32_WRITTEN_DIGITS \
	['0'] = 1, ['1'] = 2, ['2'] = 3, ['3'] = 4, ['4'] = 5, \
	['5'] = 6, ['6'] = 7, ['7'] = 8, ['8'] = 9, ['9'] = 10, \
	['a'] = 11, ['b'] = 12, ['c'] = 13, ['d'] = 14, ['e'] = 15, \
	['f'] = 16, ['g'] = 17, ['h'] = 18, ['j'] = 19, ['k'] = 20, \
	['m'] = 21, ['n'] = 22, ['p'] = 23, ['q'] = 24, ['r'] = 25, \
	['s'] = 26, ['t'] = 27, ['v'] = 28, ['w'] = 29, ['x'] = 30, \
	['y'] = 31, ['z'] = 32

static const uint8 b32_values[256] = {
	B32_WRITTEN_DIGITS,
	['A'] = 11, ['B'] = 12, ['C'] = 13, ['D'] = 14, ['E'] = 15,
	['F'] = 16, ['G'] = 17, ['H'] = 18, ['J'] = 19, ['K'] = 20,
	['M'] = 21, ['N'] = 22, ['P'] = 23, ['Q'] = 24, ['R'] = 25,
	['S'] = 26, ['T'] = 27, ['V'] = 28, ['W'] = 29, ['X'] = 30,
	['Y'] = 31, ['Z'] = 32,
	['i'] = 2, ['I'] = 2, ['l'] = 2, ['L'] = 2, ['o'] = 1, ['O'] = 1,
};

static const uint8 opaque_values[256] = {
	B32_WRITTEN_DIGITS,
};

static const uint8 b62_values[256] = {
	['0'] = 1, ['1'] = 2, ['2'] = 3, ['3'] = 4, ['4'] = 5,
	['5'] = 6, ['6'] = 7, ['7'] = 8, ['8'] = 9, ['9'] = 10,
	['A'] = 11, ['B'] = 12, ['C'] = 13, ['D'] = 14, ['E'] = 15,
	['F'] = 16, ['G'] = 17, ['H'] = 18, ['I'] = 19, ['J'] = 20,
	['K'] = 21, ['L'] = 22, ['M'] = 23, ['N'] = 24, ['O'] = 25,
	['P'] = 26, ['Q'] = 27, ['R'] = 28, ['S'] = 29, ['T'] = 30,
	['U'] = 31, ['V'] = 32, ['W'] = 33, ['X'] = 34, ['Y'] = 35,
	['Z'] = 36,
	['a'] = 37, ['b'] = 38, ['c'] = 39, ['d'] = 40, ['e'] = 41,
	['f'] = 42, ['g'] = 43, ['h'] = 44, ['i'] = 45, ['j'] = 46,
	['k'] = 47, ['l'] = 48, ['m'] = 49, ['n'] = 50, ['o'] = 51,
	['p'] = 52, ['q'] = 53, ['r'] = 54, ['s'] = 55, ['t'] = 56,
	['u'] = 57, ['v'] = 58, ['w'] = 59, ['x'] = 60, ['y'] = 61,
	['z'] = 62,
};

static const char b32_digits[] = "0123456789abcdefghjkmnpqrstvwxyz";
static const char b62_digits[] =
"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/* A text form: its name in messages, its width and its digits. */
typedef struct TextForm
{
	const char *name;			/* "base32" */
	const char *reader;			/* the SQL function that reads it */
	int			width;
	const uint8 *values;
} TextForm;

static const TextForm base32 = {"base32", "snowflake_from_base32", B32_WIDTH, b32_values};
static const TextForm base62 = {"base62", "snowflake_from_base62", B62_WIDTH, b62_values};
static const TextForm opaque = {"opaque", "snowflake_from_opaque", OPAQUE_WIDTH, opaque_values};

static inline void
b32_put(uint64 v, char *out)
{
	for (int i = B32_WIDTH - 1; i >= 0; i--)
	{
		out[i] = b32_digits[v & 31];
		v >>= 5;
	}
}

/* 62^5, below 2^30: five digits at a time in 32-bit arithmetic */
#define B62_POW5	UINT64CONST(916132832)

static inline void
b62_put5(uint32 v, char *out)
{
	for (int i = 4; i >= 0; i--)
	{
		out[i] = b62_digits[v % 62];
		v /= 62;
	}
}

/*
 * Two divisions of 64 bits, then two independent runs of 32-bit ones,
 * which the processor overlaps, where eleven 64-bit divisions would each
 * wait for the one before.
 */
static inline void
b62_put(uint64 v, char *out)
{
	uint64		high = v / B62_POW5;

	b62_put5((uint32) (v % B62_POW5), out + 6);
	b62_put5((uint32) (high % B62_POW5), out + 1);
	out[0] = b62_digits[high / B62_POW5];
}

/* Whether the n bytes at p are a prefix as TypeID has it. */
static bool
is_prefix(const char *p, int n)
{
	bool		ok = n >= 1 && n <= PREFIX_MAX;

	for (int i = 0; ok && i < n; i++)
		ok = (p[i] >= 'a' && p[i] <= 'z') || (p[i] == '_' && i > 0 && i < n - 1);
	return ok;
}

/*
 * A prefix argument: NULL for none (''), else checked as TypeID has it.
 * Its length goes to *len.
 */
static const char *
prefix_arg(text *arg, int *len)
{
	const char *p = VARDATA_ANY(arg);
	int			n = VARSIZE_ANY_EXHDR(arg);

	*len = n;
	if (n == 0)
		return NULL;
	if (!is_prefix(p, n))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid snowflake ID prefix \"%s\"",
						snowflake_echo(text_to_cstring(arg))),
				 errdetail("A prefix has 1 to 63 characters, lower-case letters a to z and underscores, and begins and ends with a letter, as TypeID's do."),
				 errhint("Pass '' for no prefix.")));
	return p;
}

/* The text prefix_ + digits, with room for width digits left at *digits. */
static text *
text_result(const char *prefix, int plen, int width, char **digits)
{
	int			len = (prefix ? plen + 1 : 0) + width;
	text	   *t = (text *) palloc(VARHDRSZ + len);
	char	   *d = VARDATA(t);

	SET_VARSIZE(t, VARHDRSZ + len);
	if (prefix)
	{
		memcpy(d, prefix, plen);
		d[plen] = '_';
		d += plen + 1;
	}
	*digits = d;
	return t;
}

/* The ID an encoding function takes, checked against its layout, if any. */
static int64
id_arg(FunctionCallInfo fcinfo, int layout_argno)
{
	int64		id = PG_GETARG_INT64(0);
	const SnowflakeLayout *l = layout_default();

	if (PG_NARGS() > layout_argno)
		l = layout_cached((LayoutCache **) &fcinfo->flinfo->fn_extra,
						  fcinfo->flinfo->fn_mcxt, PG_GETARG_TEXT_PP(layout_argno));
	/* every layout's IDs are within the default's [1, 2^63 - 1] */
	if (id <= 0 || l != layout_default())
		check_id(l, id);
	return id;
}

/* The error for a byte that is no digit: its character and position. */
static void
bad_digit(const TextForm *f, const char *whole, int whole_len, const char *at)
{
	int			pos = pg_mbstrlen_with_len(whole, at - whole) + 1;
	char	   *ch = pnstrdup(at, pg_mblen(at));
	const char *s = snowflake_echo(pnstrdup(whole, whole_len));

	if (f->values == b32_values)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid character \"%s\" at position %d of snowflake %s ID \"%s\"",
						ch, pos, f->name, s),
				 errdetail("Crockford's base32 digits are 0 to 9 and the letters A to Z but U, in either case; I and L are read as 1, O as 0. Hyphens are not read.")));
	if (f->values == opaque_values)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid character \"%s\" at position %d of snowflake %s ID \"%s\"",
						ch, pos, f->name, s),
				 errdetail("The digits of a snowflake opaque ID are 0 to 9 and the lower-case letters a to z but i, l, o and u, as snowflake_opaque() writes them.")));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
			 errmsg("invalid character \"%s\" at position %d of snowflake %s ID \"%s\"",
					ch, pos, f->name, s),
			 errdetail("Base62 digits are 0 to 9, A to Z and a to z.")));
}

/*
 * The digits of a text form, found after the prefix the call expects: the
 * string must be exactly prefix_ + width digits.  Anything else is an
 * error naming what is wrong: a prefix, then a character that is no digit
 * (a hyphen too: the error names it, not the length it changes), then the
 * length.
 */
static const char *
find_digits(const TextForm *f, const char *s, int len,
			const char *prefix, int plen)
{
	const char *d = s;
	int			n = len;

	if (prefix)
	{
		if (len <= plen || memcmp(s, prefix, plen) != 0 || s[plen] != '_')
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
					 errmsg("snowflake %s ID \"%s\" does not have the prefix \"%.*s\"",
							f->name, snowflake_echo(pnstrdup(s, len)), plen, prefix),
					 errdetail("It must begin with \"%.*s_\", followed by %d characters.",
							   plen, prefix, f->width)));
		d += plen + 1;
		n -= plen + 1;
	}
	else if (len != f->width)
	{
		/* a prefix makes the string longer: looked for only then */
		int			last = len - 1;

		while (last >= 0 && s[last] != '_')
			last--;
		/* a prefix: the hint's call is one that takes it */
		if (last >= 0 && is_prefix(s, last))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
					 errmsg("unexpected prefix \"%.*s\" in snowflake %s ID \"%s\"",
							last, s, f->name, snowflake_echo(pnstrdup(s, len))),
					 errhint("Pass the prefix the ID must have as the second argument, as in %s(id_text, '%.*s').",
							 f->reader, last, s)));
		/* "_" and a form's digits after text that is no prefix */
		if (last > 0 && last == len - f->width - 1)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
					 errmsg("unexpected prefix \"%s\" in snowflake %s ID \"%s\"",
							snowflake_echo(pnstrdup(s, last)), f->name,
							snowflake_echo(pnstrdup(s, len))),
					 errdetail("A prefix has 1 to 63 characters, lower-case letters a to z and underscores, and begins and ends with a letter, as TypeID's do.")));
	}
	/* the common case: the reader judges each digit as it reads it */
	if (n == f->width)
		return d;
	for (int i = 0; i < n; i++)
		if (f->values[(unsigned char) d[i]] == 0)
			bad_digit(f, s, len, d + i);
	/* only digits, so as many characters as bytes */
	if (prefix)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid length of snowflake %s ID \"%s\"",
						f->name, snowflake_echo(pnstrdup(s, len))),
				 errdetail("A snowflake %s ID has %d characters after \"%.*s_\"; this one has %d.",
						   f->name, f->width, plen, prefix, n)));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
			 errmsg("invalid length of snowflake %s ID \"%s\"",
					f->name, snowflake_echo(pnstrdup(s, len))),
			 errdetail("A snowflake %s ID has %d characters; this one has %d.",
					   f->name, f->width, n)));
	return NULL;				/* keep the compiler quiet */
}

/*
 * The value of the width digits at d (in a string that begins at whole):
 * false when it is 2^63 or more.  Every byte is looked up before any is
 * judged, so that the common case takes no branch per digit.
 */
static bool
read_id_digits(const TextForm *f, const char *whole, int whole_len,
			   const char *d, uint64 *value)
{
	uint64		v = 0;
	int			all_digits = 1;
	int			first = f->values[(unsigned char) d[0]];

	for (int i = 0; i < f->width; i++)
		all_digits &= f->values[(unsigned char) d[i]] != 0;
	if (!all_digits)
	{
		for (int i = 0; i < f->width; i++)
			if (f->values[(unsigned char) d[i]] == 0)
				bad_digit(f, whole, whole_len, d + i);
	}
	if (f == &base32)
	{
		/* 13 digits hold 65 bits: the first must leave the top two clear */
		for (int i = 0; i < B32_WIDTH; i++)
			v = (v << 5) | (uint64) (f->values[(unsigned char) d[i]] - 1);
		*value = v;
		return first - 1 <= 7;
	}
	/* ten base62 digits stay below 2^60; the eleventh may overflow */
	for (int i = 0; i < B62_WIDTH - 1; i++)
		v = v * 62 + (uint64) (f->values[(unsigned char) d[i]] - 1);
	{
		uint64		last = (uint64) (f->values[(unsigned char) d[B62_WIDTH - 1]] - 1);

		if (v > ((uint64) PG_INT64_MAX - last) / 62)
			return false;
		*value = v * 62 + last;
	}
	return true;
}

/*
 * The 128-bit value of the opaque form's 26 base32 digits, hi and lo;
 * false when it does not fit in 128 bits.
 */
static bool
read_opaque_digits(const char *whole, int whole_len, const char *d,
				   uint64 *hi, uint64 *lo)
{
	uint64		h = 0,
				l = 0;
	bool		fits = true;

	for (int i = 0; i < OPAQUE_WIDTH; i++)
	{
		int			v = opaque_values[(unsigned char) d[i]];

		if (v == 0)
			bad_digit(&opaque, whole, whole_len, d + i);
		fits &= (h >> 59) == 0;
		h = (h << 5) | (l >> 59);
		l = (l << 5) | (uint64) (v - 1);
	}
	*hi = h;
	*lo = l;
	return fits;
}

/* The error for a well-formed string beyond the layout's IDs. */
static void
out_of_range(const TextForm *f, const char *s, int len,
			 const SnowflakeLayout *l, bool named)
{
	char		one[B32_WIDTH + 1],
				max[B32_WIDTH + 1];
	int64		max_id = layout_max_id(l);

	if (f == &base32)
	{
		b32_put(1, one);
		b32_put((uint64) max_id, max);
	}
	else
	{
		b62_put(1, one);
		b62_put((uint64) max_id, max);
	}
	one[f->width] = max[f->width] = '\0';
	if (named)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("snowflake %s ID \"%s\" is out of range for the \"%s\" layout",
						f->name, snowflake_echo(pnstrdup(s, len)), l->name),
				 errdetail("IDs of this layout run from 1 (\"%s\") to %lld (\"%s\").",
						   one, (long long) max_id, max)));
	ereport(ERROR,
			(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
			 errmsg("snowflake %s ID \"%s\" is out of range",
					f->name, snowflake_echo(pnstrdup(s, len))),
			 errdetail("IDs run from 1 (\"%s\") to %lld (\"%s\").",
					   one, (long long) max_id, max)));
}

/*
 * Read a base32 or base62 string, with the prefix and in the layout the
 * call names: (s), (s, prefix) or (s, prefix, layout).
 */
static int64
read_form(FunctionCallInfo fcinfo, const TextForm *f)
{
	text	   *arg = PG_GETARG_TEXT_PP(0);
	const char *s = VARDATA_ANY(arg);
	int			len = VARSIZE_ANY_EXHDR(arg);
	const char *prefix = NULL;
	int			plen = 0;
	const SnowflakeLayout *l = layout_default();
	const char *d;
	uint64		value;

	if (PG_NARGS() > 1)
		prefix = prefix_arg(PG_GETARG_TEXT_PP(1), &plen);
	if (PG_NARGS() > 2)
		l = layout_cached((LayoutCache **) &fcinfo->flinfo->fn_extra,
						  fcinfo->flinfo->fn_mcxt, PG_GETARG_TEXT_PP(2));
	d = find_digits(f, s, len, prefix, plen);
	if (!read_id_digits(f, s, len, d, &value) ||
		value == 0 || value > (uint64) layout_max_id(l))
		out_of_range(f, s, len, l, PG_NARGS() > 2);
	return (int64) value;
}

/* snowflake_base32(id [, prefix [, layout]]) */
Datum
snowflake_base32(PG_FUNCTION_ARGS)
{
	int64		id = id_arg(fcinfo, 2);
	const char *prefix = NULL;
	int			plen = 0;
	char	   *d;
	text	   *t;

	if (PG_NARGS() > 1)
		prefix = prefix_arg(PG_GETARG_TEXT_PP(1), &plen);
	t = text_result(prefix, plen, B32_WIDTH, &d);
	b32_put((uint64) id, d);
	PG_RETURN_TEXT_P(t);
}

Datum
snowflake_from_base32(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(read_form(fcinfo, &base32));
}

/* snowflake_base62(id [, prefix [, layout]]) */
Datum
snowflake_base62(PG_FUNCTION_ARGS)
{
	int64		id = id_arg(fcinfo, 2);
	const char *prefix = NULL;
	int			plen = 0;
	char	   *d;
	text	   *t;

	if (PG_NARGS() > 1)
		prefix = prefix_arg(PG_GETARG_TEXT_PP(1), &plen);
	t = text_result(prefix, plen, B62_WIDTH, &d);
	b62_put((uint64) id, d);
	PG_RETURN_TEXT_P(t);
}

Datum
snowflake_from_base62(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(read_form(fcinfo, &base62));
}

/*
 * The opaque form's key: snowflake.opaque_key, hexadecimal.  The check hook
 * judges a value into a KeyValue, the setting's extra, and empties the
 * value's text; the assign hook puts the key in force or, for a value it
 * cannot use, keeps the key in force and says why, never what.
 */
#define KEY_MIN_BYTES	16
#define KEY_MAX_BYTES	64

typedef enum KeyFault
{
	KEY_USABLE,					/* a key, or none ('') */
	KEY_NOT_HEX,				/* a character that is no hexadecimal digit */
	KEY_BAD_LENGTH,				/* not 32 to 128 digits, or an odd number */
} KeyFault;

typedef struct KeyValue
{
	KeyFault	fault;
	int			at;				/* the position at fault, or the digits */
	int			len;			/* bytes of the key; 0 for none */
	uint8		bytes[KEY_MAX_BYTES];
} KeyValue;

char	   *text_opaque_key_setting = NULL;
static uint8 key[KEY_MAX_BYTES];
static int	key_len = 0;
static bool value_rejected = false; /* the value last given is unusable */
static bool preloaded = false;

static int
hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * Judge a value, and leave its text empty: every value of the setting is
 * '' to PostgreSQL, so a reload that changes the key changes nothing it
 * would log ("parameter changed to" quotes the file's text when the
 * setting's text differs before and after).  Never false: PostgreSQL's
 * message for a rejected value quotes it, to the log and, at DEBUG3, to
 * any session; an unusable value is judged so in the extra instead.
 */
bool
text_check_opaque_key(char **newval, void **extra, GucSource source)
{
	char	   *s = *newval;
	int			n = s ? (int) strlen(s) : 0;
	KeyValue   *v = (KeyValue *) compat_guc_malloc(sizeof(KeyValue));

	if (v != NULL)
	{
		memset(v, 0, sizeof(KeyValue));
		for (int i = 0; i < n && v->fault == KEY_USABLE; i++)
		{
			if (hex_value(s[i]) < 0)
			{
				v->fault = KEY_NOT_HEX;
				/* the bytes before it are digits: its byte is its character */
				v->at = i + 1;
			}
		}
		if (v->fault == KEY_USABLE && n != 0 &&
			(n % 2 != 0 || n < KEY_MIN_BYTES * 2 || n > KEY_MAX_BYTES * 2))
		{
			v->fault = KEY_BAD_LENGTH;
			v->at = n;
		}
		if (v->fault == KEY_USABLE)
		{
			v->len = n / 2;
			for (int i = 0; i < v->len; i++)
				v->bytes[i] = (uint8) (hex_value(s[2 * i]) << 4 | hex_value(s[2 * i + 1]));
		}
	}
	if (s)
		explicit_bzero(s, n);
	if (v == NULL)
	{
		GUC_check_errmsg("out of memory");
		return false;
	}
	*extra = v;
	return true;
}

void
text_assign_opaque_key(const char *newval, void *extra)
{
	const KeyValue *v = (const KeyValue *) extra;

	/* every value has an extra: the check hook made it */
	if (v == NULL)
		return;
	if (v->fault == KEY_USABLE)
	{
		explicit_bzero(key, sizeof(key));
		memcpy(key, v->bytes, v->len);
		key_len = v->len;
		value_rejected = false;
		return;
	}
	value_rejected = true;

	/*
	 * Said once, by the postmaster, which reads the configuration first;
	 * every backend judges the same value the same way, in silence.
	 */
	if (!IsUnderPostmaster)
		ereport(LOG,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for parameter \"%s\"", "snowflake.opaque_key"),
				 v->fault == KEY_NOT_HEX ?
				 errdetail("Character %d of the value is not a hexadecimal digit. The value is not repeated here.", v->at) :
				 errdetail("A key has 32 to 128 hexadecimal digits, an even number; the value has %d. The value is not repeated here.", v->at),
				 key_len > 0 ?
				 errhint("The key in force stays until the configuration gives a valid key, or none, and is reloaded.") :
				 errhint("The opaque form refuses until the configuration gives a valid key and is reloaded.")));
}

/* settings.c: the library was preloaded, so the key is no placeholder */
void
text_opaque_key_preloaded(void)
{
	preloaded = true;
}

static pg_hmac_ctx *
hmac_create(void)
{
	pg_hmac_ctx *ctx = pg_hmac_create(PG_SHA256);

	if (ctx == NULL)
		elog(ERROR, "could not create an HMAC-SHA-256 context: out of memory");
	return ctx;
}

/*
 * HMAC-SHA-256 of key with label, the prefix and an 8-byte value; its first
 * 8 bytes to out.  The label and the prefix each end in a zero byte, which
 * neither holds, so no two inputs run together.  One context serves the
 * calls of one ID: making it is most of an HMAC's cost.
 */
static void
prf(pg_hmac_ctx *ctx, const char *label, const char *prefix, int plen,
	const uint8 *value, uint8 *out, int outlen)
{
	uint8		digest[PG_SHA256_DIGEST_LENGTH];
	const uint8 zero = 0;

	if (pg_hmac_init(ctx, key, key_len) < 0 ||
		pg_hmac_update(ctx, (const uint8 *) label, strlen(label) + 1) < 0 ||
		pg_hmac_update(ctx, (const uint8 *) prefix, plen) < 0 ||
		pg_hmac_update(ctx, &zero, 1) < 0 ||
		(value && pg_hmac_update(ctx, value, 8) < 0) ||
		pg_hmac_final(ctx, digest, sizeof(digest)) < 0)
		elog(ERROR, "could not compute HMAC-SHA-256: %s", pg_hmac_error(ctx));
	memcpy(out, digest, outlen);
}

/*
 * What SHOW says of the key: whether it is set and, where a query runs, a
 * fingerprint to compare across nodes, which tells nothing of the key; and
 * whether the value last given was rejected, so that it is not in force.
 */
const char *
text_show_opaque_key(void)
{
	static char buf[80];
	uint8		fp[4];
	pg_hmac_ctx *ctx;

	if (key_len == 0)
		return value_rejected ? "not set; a rejected value is pending" : "";
	if (CurrentResourceOwner == NULL)
		return value_rejected ? "set; a rejected value is pending" : "set";
	ctx = hmac_create();
	prf(ctx, "snowflake opaque key fingerprint", "", 0, NULL, fp, sizeof(fp));
	pg_hmac_free(ctx);
	if (value_rejected)
		snprintf(buf, sizeof(buf), "set, fingerprint %02x%02x%02x%02x; a rejected value is pending",
				 fp[0], fp[1], fp[2], fp[3]);
	else
		snprintf(buf, sizeof(buf), "set, fingerprint %02x%02x%02x%02x",
				 fp[0], fp[1], fp[2], fp[3]);
	return buf;
}

static void
require_key(void)
{
	if (!preloaded)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("snowflake opaque IDs need the library preloaded"),
				 errdetail("Without preloading, snowflake.opaque_key would be a placeholder setting that every role can read."),
				 errhint("Add snowflake to shared_preload_libraries and restart the server.")));
	if (key_len == 0 && value_rejected)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("snowflake.opaque_key holds no usable key"),
				 errdetail("The value the configuration gives it was rejected; the server log says why."),
				 errhint("Give it 32 to 128 hexadecimal digits in postgresql.conf and reload.")));
	if (key_len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("snowflake.opaque_key is not set"),
				 errhint("Set it in postgresql.conf to 32 to 128 hexadecimal digits, such as the output of \"openssl rand -hex 32\", and reload.")));
}

static void
put_be64(uint64 v, uint8 *b)
{
	for (int i = 7; i >= 0; i--)
	{
		b[i] = (uint8) v;
		v >>= 8;
	}
}

static uint64
get_be64(const uint8 *b)
{
	uint64		v = 0;

	for (int i = 0; i < 8; i++)
		v = (v << 8) | b[i];
	return v;
}

/* snowflake_opaque(id [, prefix]) */
Datum
snowflake_opaque(PG_FUNCTION_ARGS)
{
	int64		id = id_arg(fcinfo, 2);
	const char *prefix = NULL;
	int			plen = 0;
	uint8		plain[8],
				tag[8],
				pad[8];
	uint64		hi,
				lo;
	char	   *d;
	text	   *t;
	pg_hmac_ctx *ctx;

	if (PG_NARGS() > 1)
		prefix = prefix_arg(PG_GETARG_TEXT_PP(1), &plen);
	require_key();
	put_be64((uint64) id, plain);
	ctx = hmac_create();
	prf(ctx, "snowflake opaque tag", prefix ? prefix : "", plen, plain, tag, 8);
	prf(ctx, "snowflake opaque pad", prefix ? prefix : "", plen, tag, pad, 8);
	pg_hmac_free(ctx);
	hi = get_be64(tag);
	lo = (uint64) id ^ get_be64(pad);
	t = text_result(prefix, plen, OPAQUE_WIDTH, &d);
	/* 26 digits of 5 bits: the lowest 13 from lo, then the bits across */
	for (int i = 0; i < OPAQUE_WIDTH; i++)
	{
		int			bit = 5 * i;
		uint64		v;

		if (bit + 5 <= 64)
			v = lo >> bit;
		else if (bit >= 64)
			v = hi >> (bit - 64);
		else
			v = (lo >> bit) | (hi << (64 - bit));
		d[OPAQUE_WIDTH - 1 - i] = b32_digits[v & 31];
	}
	PG_RETURN_TEXT_P(t);
}

/* snowflake_from_opaque(s [, prefix]) */
Datum
snowflake_from_opaque(PG_FUNCTION_ARGS)
{
	text	   *arg = PG_GETARG_TEXT_PP(0);
	const char *s = VARDATA_ANY(arg);
	int			len = VARSIZE_ANY_EXHDR(arg);
	const char *prefix = NULL;
	int			plen = 0;
	const char *d;
	uint64		hi,
				lo,
				id;
	uint8		tag[8],
				pad[8],
				plain[8],
				diff = 0;

	if (PG_NARGS() > 1)
		prefix = prefix_arg(PG_GETARG_TEXT_PP(1), &plen);
	require_key();
	d = find_digits(&opaque, s, len, prefix, plen);
	if (read_opaque_digits(s, len, d, &hi, &lo))
	{
		pg_hmac_ctx *ctx = hmac_create();

		put_be64(hi, tag);
		prf(ctx, "snowflake opaque pad", prefix ? prefix : "", plen, tag, pad, 8);
		id = lo ^ get_be64(pad);
		put_be64(id, plain);
		prf(ctx, "snowflake opaque tag", prefix ? prefix : "", plen, plain, pad, 8);
		pg_hmac_free(ctx);
		/* compared in constant time: the time of a refusal tells nothing */
		for (int i = 0; i < 8; i++)
			diff |= pad[i] ^ tag[i];
		if (diff == 0 && id >= 1 && id <= (uint64) PG_INT64_MAX)
			PG_RETURN_INT64((int64) id);
	}
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
			 errmsg("snowflake opaque ID \"%s\" was not made with this server's key",
					snowflake_echo(pnstrdup(s, len))),
			 errdetail("It was made with another snowflake.opaque_key or another prefix, or it was altered.")));
	PG_RETURN_NULL();			/* keep the compiler quiet */
}
