/*
 * bench_floor.c
 *	  The floor under every generator in the benchmark: a C function that
 *	  only returns a counter, so its time is the cost of a function call.
 */
#include "postgres.h"

#include "fmgr.h"

PG_MODULE_MAGIC;

PG_FUNCTION_INFO_V1(bench_counter);

static int64 counter = 0;

Datum
bench_counter(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(++counter);
}
