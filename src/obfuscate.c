/*-------------------------------------------------------------------------
 *
 * obfuscate.c
 *	  A keyed permutation of the IDs [1, 2^63-1] onto themselves, so that
 *	  public URLs can carry IDs that show neither time nor volume.
 *
 * A six-round Feistel network permutes 64-bit words; cycle walking (apply
 * the network again while the result falls outside the domain) turns it
 * into a permutation of the domain.  Only one 64-bit word in two is
 * outside it, so a call walks two steps on average.  This is obfuscation,
 * not encryption: anyone who learns the key, or enough pairs, can map IDs
 * back.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"

#include "messages.h"

PG_FUNCTION_INFO_V1(snowflake_obfuscate);
PG_FUNCTION_INFO_V1(snowflake_deobfuscate);

#define ROUNDS 6

/* the domain, shifted to start at 0: [0, 2^63 - 1) */
#define DOMAIN_END	((uint64) PG_INT64_MAX)

/* a strong 64-bit mixer, for round keys and the round function */
static inline uint64
mix64(uint64 x)
{
	x ^= x >> 30;
	x *= UINT64CONST(0xbf58476d1ce4e5b9);
	x ^= x >> 27;
	x *= UINT64CONST(0x94d049bb133111eb);
	x ^= x >> 31;
	return x;
}

static void
round_keys(int64 key, uint64 *k)
{
	uint64		s = (uint64) key;

	for (int i = 0; i < ROUNDS; i++)
	{
		s += UINT64CONST(0x9e3779b97f4a7c15);
		k[i] = mix64(s);
	}
}

static inline uint32
feistel_f(uint32 half, uint64 k)
{
	return (uint32) (mix64((uint64) half ^ k) >> 32);
}

static uint64
permute(uint64 x, const uint64 *k)
{
	uint32		l = (uint32) (x >> 32);
	uint32		r = (uint32) x;

	for (int i = 0; i < ROUNDS; i++)
	{
		uint32		t = l ^ feistel_f(r, k[i]);

		l = r;
		r = t;
	}
	return ((uint64) l << 32) | r;
}

static uint64
unpermute(uint64 x, const uint64 *k)
{
	uint32		l = (uint32) (x >> 32);
	uint32		r = (uint32) x;

	for (int i = ROUNDS - 1; i >= 0; i--)
	{
		uint32		t = r ^ feistel_f(l, k[i]);

		r = l;
		l = t;
	}
	return ((uint64) l << 32) | r;
}

static void
check_domain(const char *fname, int64 id)
{
	if (id <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("%s takes a positive ID, not %lld", fname, (long long) id),
				 errdetail("The permutation maps [1, 9223372036854775807] onto itself.")));
}

/* Apply the permutation or its inverse, walking until back in the domain. */
static int64
walk(const char *fname, int64 id, int64 key, bool forward)
{
	uint64		k[ROUNDS];
	uint64		x;

	check_domain(fname, id);
	round_keys(key, k);
	x = (uint64) id - 1;
	do
		x = forward ? permute(x, k) : unpermute(x, k);
	while (x >= DOMAIN_END);
	return (int64) (x + 1);
}

Datum
snowflake_obfuscate(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(walk("snowflake_obfuscate", PG_GETARG_INT64(0), PG_GETARG_INT64(1), true));
}

Datum
snowflake_deobfuscate(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(walk("snowflake_deobfuscate", PG_GETARG_INT64(0), PG_GETARG_INT64(1), false));
}
