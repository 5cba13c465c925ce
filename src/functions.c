/*-------------------------------------------------------------------------
 *
 * functions.c
 *	  The SQL-callable functions: generating, decoding, range bounds,
 *	  status, the list of layouts and the repair of the state file.  They
 *	  check their arguments and call the generator, mark.c or the layouts.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "settings.h"
#include "snowflake.h"
#include "state.h"

PG_FUNCTION_INFO_V1(snowflake_nextval);
PG_FUNCTION_INFO_V1(snowflake_currval);
PG_FUNCTION_INFO_V1(snowflake_decode);
PG_FUNCTION_INFO_V1(snowflake_decode_layout);
PG_FUNCTION_INFO_V1(snowflake_timestamp);
PG_FUNCTION_INFO_V1(snowflake_timestamp_layout);
PG_FUNCTION_INFO_V1(snowflake_from_timestamp);
PG_FUNCTION_INFO_V1(snowflake_from_timestamp_layout);
PG_FUNCTION_INFO_V1(snowflake_status);
PG_FUNCTION_INFO_V1(snowflake_layouts);
PG_FUNCTION_INFO_V1(snowflake_repair_state);
PG_FUNCTION_INFO_V1(snowflake_worker_id_fn);

/* the last ID snowflake_nextval() returned in this session */
static int64 session_last_id = 0;
static bool session_has_id = false;

static const SnowflakeLayout *
layout_arg(text *name)
{
	char	   *s = text_to_cstring(name);
	const SnowflakeLayout *l = layout_find(s);

	/* the custom layout is known by name where the server runs it */
	if (l == NULL && pg_strcasecmp(s, "custom") == 0 &&
		strcmp(snowflake_layout->name, "custom") == 0)
	{
		settings_require_usable();
		l = snowflake_layout;
	}
	if (l == NULL)
	{
		int			n;
		const SnowflakeLayout *p = layout_presets(&n);
		StringInfoData names;

		initStringInfo(&names);
		for (int i = 0; i < n; i++)
			appendStringInfo(&names, "%s%s", i ? ", " : "", p[i].name);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown snowflake layout \"%s\"", s),
				 errhint("Known layouts are: %s.", names.data)));
	}
	return l;
}

/* The server's layout, for the one-argument functions. */
static const SnowflakeLayout *
server_layout(void)
{
	settings_require_usable();
	return snowflake_layout;
}

/* Reject what no generator of the layout can have made. */
static void
check_id(const SnowflakeLayout *l, int64 id)
{
	int64		max_id = layout_max_id(l);

	if (id <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("snowflake ID must be positive, not " INT64_FORMAT, id),
				 errdetail("Snowflake IDs run from 1 to " INT64_FORMAT ".", max_id)));
	if (id > max_id)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("snowflake ID " INT64_FORMAT " is out of range for the \"%s\" layout", id, l->name),
				 errdetail("IDs of this layout run from 1 to " INT64_FORMAT ".", max_id)));
}

static int64
from_timestamp(const SnowflakeLayout *l, TimestampTz ts)
{
	int64		tick;

	if (TIMESTAMP_NOT_FINITE(ts))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("infinite timestamp has no snowflake ID")));

	tick = layout_timestamptz_to_tick(l, ts);
	if (tick < 0 || tick > layout_max_tick(l))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp %s is out of range for the snowflake layout \"%s\"",
						timestamptz_to_str(ts), l->name),
				 errdetail("The layout covers %s to %s.",
						   pstrdup(timestamptz_to_str(layout_tick_to_timestamptz(l, 0))),
						   pstrdup(timestamptz_to_str(layout_tick_to_timestamptz(l, layout_max_tick(l) + 1) - 1)))));

	/* the smallest ID of that tick; ID 0 does not exist */
	return Max(layout_compose(l, tick, 0, 0), 1);
}

static Datum
decode(FunctionCallInfo fcinfo, const SnowflakeLayout *l, int64 id)
{
	TupleDesc	tupdesc;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};
	SnowflakeFields f;

	check_id(l, id);
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	layout_decompose(l, id, &f);
	values[0] = TimestampTzGetDatum(layout_tick_to_timestamptz(l, f.tick));
	values[1] = Int32GetDatum((int32) f.worker);
	values[2] = Int32GetDatum((int32) f.seq);
	return HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls));
}

Datum
snowflake_nextval(PG_FUNCTION_ARGS)
{
	int64		id = generator_next();

	session_last_id = id;
	session_has_id = true;
	PG_RETURN_INT64(id);
}

Datum
snowflake_currval(PG_FUNCTION_ARGS)
{
	if (!session_has_id)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("snowflake_currval is not yet defined in this session"),
				 errhint("Call snowflake_nextval() first.")));
	PG_RETURN_INT64(session_last_id);
}

Datum
snowflake_decode(PG_FUNCTION_ARGS)
{
	return decode(fcinfo, server_layout(), PG_GETARG_INT64(0));
}

Datum
snowflake_decode_layout(PG_FUNCTION_ARGS)
{
	return decode(fcinfo, layout_arg(PG_GETARG_TEXT_PP(1)), PG_GETARG_INT64(0));
}

static TimestampTz
id_timestamp(const SnowflakeLayout *l, int64 id)
{
	check_id(l, id);
	return layout_tick_to_timestamptz(l, layout_tick(l, id));
}

Datum
snowflake_timestamp(PG_FUNCTION_ARGS)
{
	PG_RETURN_TIMESTAMPTZ(id_timestamp(server_layout(), PG_GETARG_INT64(0)));
}

Datum
snowflake_timestamp_layout(PG_FUNCTION_ARGS)
{
	PG_RETURN_TIMESTAMPTZ(id_timestamp(layout_arg(PG_GETARG_TEXT_PP(1)),
									   PG_GETARG_INT64(0)));
}

Datum
snowflake_from_timestamp(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(from_timestamp(server_layout(), PG_GETARG_TIMESTAMPTZ(0)));
}

Datum
snowflake_from_timestamp_layout(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(from_timestamp(layout_arg(PG_GETARG_TEXT_PP(1)),
								   PG_GETARG_TIMESTAMPTZ(0)));
}

Datum
snowflake_status(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	GeneratorStatus st;
	Datum		values[14];
	bool		nulls[14];
	int			i = 0;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	generator_status(&st);
	memset(nulls, 0, sizeof(nulls));

	nulls[i] = st.worker_id < 0;
	values[i++] = Int32GetDatum(st.worker_id);
	values[i++] = CStringGetTextDatum(snowflake_layout->name);
	nulls[i] = nulls[i + 1] = (st.last_id == 0);
	values[i++] = Int64GetDatum(st.last_id);
	values[i++] = st.last_id ?
		TimestampTzGetDatum(layout_tick_to_timestamptz(snowflake_layout,
													   layout_tick(snowflake_layout, st.last_id))) : 0;
	values[i++] = Int64GetDatum(st.issued);
	values[i++] = Int64GetDatum(st.waits);
	values[i++] = Int64GetDatum(st.clock_back_events);
	values[i++] = Int64GetDatum(st.clock_back_max_ms);
	values[i++] = Int64GetDatum(st.run_ahead_ids);
	values[i++] = Int64GetDatum(st.run_ahead_ms);
	values[i++] = Int64GetDatum(st.refused);
	nulls[i] = nulls[i + 1] = (st.high_water_mark == 0);
	values[i++] = Int64GetDatum(st.high_water_mark);
	values[i++] = st.high_water_mark ?
		TimestampTzGetDatum(layout_tick_to_timestamptz(snowflake_layout,
													   layout_tick(snowflake_layout, st.high_water_mark))) : 0;
	values[i++] = TimestampTzGetDatum(st.started);
	Assert(i == lengthof(values));
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc),
													  values, nulls)));
}

Datum
snowflake_layouts(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int			n;
	const SnowflakeLayout *p = layout_presets(&n);

	InitMaterializedSRF(fcinfo, 0);
	for (int i = 0; i < n; i++)
	{
		const SnowflakeLayout *l = &p[i];
		Datum		values[9];
		bool		nulls[9] = {0};

		values[0] = CStringGetTextDatum(l->name);
		values[1] = Int32GetDatum(l->time_bits);
		values[2] = Int32GetDatum(l->worker_bits);
		values[3] = Int32GetDatum(l->seq_bits);
		values[4] = Int64GetDatum(l->tick_ms);
		values[5] = TimestampTzGetDatum(layout_tick_to_timestamptz(l, 0));
		values[6] = TimestampTzGetDatum(layout_tick_to_timestamptz(l, layout_max_tick(l) + 1));
		values[7] = Int64GetDatum(layout_max_id(l));
		values[8] = CStringGetTextDatum(l->description);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * snowflake_repair_state(above bigint): the operator's way out of a
 * damaged state file.  Superuser only (the SQL script revokes it from
 * PUBLIC).
 */
Datum
snowflake_repair_state(PG_FUNCTION_ARGS)
{
	(void) generator_require_ready();
	PG_RETURN_INT64(mark_repair(PG_GETARG_INT64(0)));
}

/* snowflake_worker_id(): the worker id in force, or why there is none. */
Datum
snowflake_worker_id_fn(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(generator_require_ready());
}
