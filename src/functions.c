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
#include "mb/pg_wchar.h"
#include "nodes/nodeFuncs.h"
#include "nodes/supportnodes.h"
#include "optimizer/optimizer.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "clock.h"
#include "identity.h"
#include "messages.h"
#include "node.h"
#include "settings.h"
#include "snowflake.h"
#include "mark.h"

PG_FUNCTION_INFO_V1(snowflake_nextval);
PG_FUNCTION_INFO_V1(snowflake_nextval_block);
PG_FUNCTION_INFO_V1(snowflake_nextval_series);
PG_FUNCTION_INFO_V1(snowflake_nextval_series_support);
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

/* At most this many characters of a name given by the caller are echoed. */
#define ECHO_CHARS	64

/* A caller's text for a message: its start when it is long. */
const char *
snowflake_echo(const char *s)
{
	int			len = strlen(s);
	int			keep = pg_mbcliplen(s, len, ECHO_CHARS);

	return keep < len ? psprintf("%s...", pnstrdup(s, keep)) : s;
}

/* The name that carries the server's custom layout's parameters. */
static const char *
server_custom_name(void)
{
	char	   *buf = palloc(LAYOUT_NAME_LEN);

	layout_custom_name(snowflake_layout, buf, LAYOUT_NAME_LEN);
	return buf;
}

/*
 * The layout a decoding function names.  These functions are IMMUTABLE, so
 * the name alone must decide the layout: a preset, or a layout named with
 * its parameters (a custom one, or ShardingSphere's for a time zone).
 * Plain "custom" follows settings that change across restarts, and an index
 * built on it would answer wrong after one.
 */
static const SnowflakeLayout *
layout_by_name(const char *s, SnowflakeLayout *buf)
{
	const SnowflakeLayout *l = layout_find(s);
	bool		custom_server = strcmp(snowflake_layout->name, "custom") == 0;
	int			n;
	const SnowflakeLayout *p;
	StringInfoData names;

	if (l != NULL)
		return l;
	if (layout_named_with_parameters(s))
	{
		char	   *why;
		bool		zone = pg_strncasecmp(s, LAYOUT_ZONE_PREFIX, strlen(LAYOUT_ZONE_PREFIX)) == 0;

		if (!layout_from_name(buf, s, &why))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 zone ?
					 errmsg("invalid snowflake layout \"%s\"", snowflake_echo(s)) :
					 errmsg("invalid custom snowflake layout \"%s\"", snowflake_echo(s)),
					 errdetail("%s", why),
					 zone ?
					 errhint("Name ShardingSphere's layout for a JVM's default time zone as 'shardingsphere@ZONE' (releases up to 5.3) or as 'shardingsphere@ZONE@YYYY-MM-DD' with the day the JVM started (releases from 5.4), ZONE being a time zone name such as 'Asia/Shanghai' (pg_timezone_names lists them) or a UTC offset such as '+08:00'.") : 0));
		return buf;
	}
	if (pg_strcasecmp(s, "custom") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("snowflake layout \"custom\" cannot be named in a function that takes a layout"),
				 errdetail("\"custom\" follows the snowflake.custom_* settings, which can change at a restart; these functions are IMMUTABLE, so the name must fix the layout."),
				 custom_server ?
				 errhint("Name the layout with its parameters, '%s', or use the one-argument function, which follows the server's layout.",
						 server_custom_name()) :
				 errhint("Name a custom layout with its parameters, as in 'custom:41/10/12/1ms/2016-11-01'.")));

	p = layout_presets(&n);
	initStringInfo(&names);
	for (int i = 0; i < n; i++)
		appendStringInfo(&names, "%s, ", p[i].name);
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown snowflake layout \"%s\"", snowflake_echo(s)),
			 errhint("Known layouts are: %sShardingSphere's for a JVM's time zone, as in 'shardingsphere@Asia/Shanghai' or 'shardingsphere@Asia/Shanghai@2026-07-01', and custom layouts named with their parameters, as in 'custom:41/10/12/1ms/2016-11-01'.",
					 names.data)));
	return NULL;				/* keep the compiler quiet */
}

/*
 * The layout a call names, kept for the next call of the same expression
 * with the same name (a query that decodes many rows looks it up once).
 */
struct LayoutCache
{
	char	   *name;			/* NULL while nothing is kept */
	const SnowflakeLayout *layout;
	SnowflakeLayout built;		/* a layout named with its parameters */
};

/*
 * The layout name names, kept in *cache (allocated in mcxt, which must
 * live as long as the cache) for the next call with the same name.
 */
const SnowflakeLayout *
layout_cached(LayoutCache **cache, MemoryContext mcxt, text *name)
{
	LayoutCache *c = *cache;
	char	   *s;

	if (c == NULL)
		c = *cache = MemoryContextAllocZero(mcxt, sizeof(LayoutCache));
	else if (c->name != NULL &&
			 strlen(c->name) == VARSIZE_ANY_EXHDR(name) &&
			 memcmp(c->name, VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name)) == 0)
		return c->layout;

	if (c->name != NULL)
		pfree(c->name);
	c->name = NULL;
	/* kept as long as the layout: a custom layout's name points to it */
	s = MemoryContextStrdup(mcxt, text_to_cstring(name));
	c->layout = layout_by_name(s, &c->built);
	c->name = s;
	return c->layout;
}

static const SnowflakeLayout *
layout_arg(FunctionCallInfo fcinfo, int argno)
{
	return layout_cached((LayoutCache **) &fcinfo->flinfo->fn_extra,
						 fcinfo->flinfo->fn_mcxt, PG_GETARG_TEXT_PP(argno));
}

/* The server's layout, for the one-argument functions. */
static const SnowflakeLayout *
server_layout(void)
{
	NodeReason	r = node_settings_reason();

	if (r != REASON_NONE)
		node_refuse_state(r);
	return snowflake_layout;
}

/* Reject what no generator of the layout can have made. */
void
check_id(const SnowflakeLayout *l, int64 id)
{
	int64		max_id = layout_max_id(l);

	if (id <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("snowflake ID must be positive, not %lld", (long long) id),
				 errdetail("Snowflake IDs run from 1 to %lld.", (long long) max_id)));
	if (id > max_id)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("snowflake ID %lld is out of range for the \"%s\" layout",
						(long long) id, l->name),
				 errdetail("IDs of this layout run from 1 to %lld.", (long long) max_id)));
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

/*
 * Refuse a block size one tick of the layout in force cannot hold.  A block
 * handed out as its first ID stands for first..first+n-1, which are this
 * node's IDs only where the sequence is the lowest field.
 */
static void
check_block(int32 n, bool as_first_id)
{
	const SnowflakeLayout *l;
	int64		capacity;

	(void) generator_require_ready();
	l = snowflake_layout;
	capacity = generator_block_capacity();
	if (n < 1 || n > capacity)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("snowflake block size %d is out of range", n),
				 errdetail("A block holds from 1 to %lld IDs: one tick of the layout \"%s\" holds %lld sequence numbers.",
						   (long long) capacity, l->name, (long long) capacity),
				 n < 1 ? errhint("A block holds at least one ID.") :
				 errhint("Reserve several blocks of at most %lld IDs.", (long long) capacity)));
	if (as_first_id && n > 1 &&
		layout_compose(l, 0, 0, 1) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("snowflake layout \"%s\" does not issue consecutive IDs", l->name),
				 errdetail("Its sequence number sits above the worker id, so the IDs of a block are %lld apart, not first to first + n - 1.",
						   (long long) layout_compose(l, 0, 0, 1)),
				 errhint("Use snowflake_nextval_series(n), which returns the IDs of the block.")));
}

Datum
snowflake_nextval_block(PG_FUNCTION_ARGS)
{
	int32		n = PG_GETARG_INT32(0);

	check_block(n, true);
	PG_RETURN_INT64(generator_next_block(n));
}

/* What snowflake_nextval_series() keeps between calls: the block's first ID. */
typedef struct SeriesState
{
	const SnowflakeLayout *layout;
	SnowflakeFields first;
} SeriesState;

/*
 * The IDs of one block, one per call: the block is claimed on the first
 * call, so the rows cost one reservation, and none is kept in memory.
 */
Datum
snowflake_nextval_series(PG_FUNCTION_ARGS)
{
	FuncCallContext *funcctx;
	SeriesState *st;

	if (SRF_IS_FIRSTCALL())
	{
		int32		n = PG_GETARG_INT32(0);
		MemoryContext oldctx;

		check_block(n, false);
		funcctx = SRF_FIRSTCALL_INIT();
		oldctx = MemoryContextSwitchTo(funcctx->multi_call_memory_ctx);
		st = palloc(sizeof(SeriesState));
		MemoryContextSwitchTo(oldctx);
		st->layout = snowflake_layout;
		layout_decompose(st->layout, generator_next_block(n), &st->first);
		funcctx->user_fctx = st;
		funcctx->max_calls = (uint64) n;
	}
	funcctx = SRF_PERCALL_SETUP();
	st = (SeriesState *) funcctx->user_fctx;
	if (funcctx->call_cntr < funcctx->max_calls)
	{
		/* computed first: SRF_RETURN_NEXT advances call_cntr */
		int64		id = layout_compose(st->layout, st->first.tick,
										st->first.worker,
										st->first.seq + (int64) funcctx->call_cntr);

		SRF_RETURN_NEXT(funcctx, Int64GetDatum(id));
	}
	SRF_RETURN_DONE(funcctx);
}

/*
 * The planner's estimate of the rows of snowflake_nextval_series(n): n,
 * when n is known at planning time.
 */
Datum
snowflake_nextval_series_support(PG_FUNCTION_ARGS)
{
	Node	   *rawreq = (Node *) PG_GETARG_POINTER(0);

	if (IsA(rawreq, SupportRequestRows))
	{
		SupportRequestRows *req = (SupportRequestRows *) rawreq;

		if (is_funcclause(req->node))
		{
			Node	   *arg = linitial(((FuncExpr *) req->node)->args);

			if (req->root)
				arg = estimate_expression_value(req->root, arg);
			if (IsA(arg, Const) && !((Const *) arg)->constisnull)
			{
				req->rows = Max(DatumGetInt32(((Const *) arg)->constvalue), 1);
				PG_RETURN_POINTER(req);
			}
		}
	}
	PG_RETURN_POINTER(NULL);
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
	return decode(fcinfo, layout_arg(fcinfo, 1), PG_GETARG_INT64(0));
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
	PG_RETURN_TIMESTAMPTZ(id_timestamp(layout_arg(fcinfo, 1),
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
	PG_RETURN_INT64(from_timestamp(layout_arg(fcinfo, 1),
								   PG_GETARG_TIMESTAMPTZ(0)));
}

Datum
snowflake_status(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	GeneratorStatus st;
	Datum		values[17];
	bool		nulls[17];
	int			i = 0;
	NodeReason	reason;
	const char *source;
	NodeState	state;
	const SnowflakeLayout *layout;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	generator_status(&st);
	memset(nulls, 0, sizeof(nulls));

	/* what a call would meet now: the same verdict */
	reason = generator_verdict();
	state = node_reason_state(reason);
	values[i++] = CStringGetTextDatum(node_state_name(state));
	nulls[i] = reason == REASON_NONE;
	values[i++] = reason == REASON_NONE ? (Datum) 0 : CStringGetTextDatum(node_reason_name(reason));

	nulls[i] = st.worker_id < 0;
	values[i++] = Int32GetDatum(st.worker_id);
	/* a layout the configuration named that was rejected is not in force */
	layout = settings_layout_in_force();
	nulls[i] = layout == NULL;
	values[i++] = layout == NULL ? (Datum) 0 : CStringGetTextDatum(layout->name);
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
	nulls[i] = st.started == 0;
	values[i++] = TimestampTzGetDatum(st.started);
	source = node_shared != NULL ? node_worker_source() : NULL;
	nulls[i] = source == NULL;
	values[i++] = source == NULL ? (Datum) 0 : CStringGetTextDatum(source);
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
 * snowflake_repair_state(above bigint, force boolean): the operator's way
 * out of a damaged state file.  Superuser only (the SQL script revokes it
 * from PUBLIC).  A value the node could not generate above soon (ahead of
 * the clock by more than the policy lets it run or wait, or in the
 * layout's last tick) is a typo until the operator says otherwise with
 * force; force also lets a repair lower the state again, which undoes a
 * forced repair while no ID was issued above it.
 */
Datum
snowflake_repair_state(PG_FUNCTION_ARGS)
{
	int64		above = PG_GETARG_INT64(0);
	bool		force = PG_GETARG_BOOL(1);
	const SnowflakeLayout *l = snowflake_layout;
	int64		now_ms;
	int64		lead_ms;
	int64		allowed_ms;
	int64		last;
	bool		lower;
	NodeRecord	next;
	NodeReason	r = identity_verdict(true, CHECK_MARK);

	/* what stands before the mark refuses; the mark is what it mends */
	if (node_refuses(r))
		node_refuse_state(r);
	now_ms = clock_unix_ms();
	allowed_ms = settings_max_lead_ms();
	if (!force && above > 0 && above < layout_max_id(l))
	{
		int64		tick = layout_tick(l, above);

		lead_ms = layout_tick_to_unix_ms(l, tick) - now_ms;
		if (tick >= layout_max_tick(l))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("snowflake ID %lld is in the last tick of the \"%s\" layout",
							(long long) above, l->name),
					 errdetail("New IDs would have to be greater, and the layout ends at %s: the node could issue almost no ID.",
							   timestamptz_to_str(layout_tick_to_timestamptz(l, layout_max_tick(l) + 1))),
					 errhint("Check the value; to repair to it anyway, add force => true.")));
		if (allowed_ms >= 0 && lead_ms > allowed_ms)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("snowflake ID %lld is %lld ms ahead of the system clock",
							(long long) above, (long long) lead_ms),
					 errdetail("It carries the time %s; the clock policy lets the node's IDs lead the clock by at most %lld ms, so the node would refuse to generate until the clock reaches that time.",
							   timestamptz_to_str(layout_tick_to_timestamptz(l, tick)), (long long) allowed_ms),
					 errhint("Check the value; to repair to it anyway, add force => true. A forced repair can be undone with another forced one while no ID was issued after it.")));
	}
	LWLockAcquire(node_shared->lock, LW_EXCLUSIVE);
	next = node_shared->rec;
	lower = force && (uint64) above < pg_atomic_read_u64(&snowflake_shared->last_id);
	last = mark_repair_locked(above, lower, false, &next);
	mark_repair_save(&next, false, last, lower);
	LWLockRelease(node_shared->lock);
	PG_RETURN_INT64(last);
}

/* snowflake_worker_id(): the worker id in force, or why there is none. */
Datum
snowflake_worker_id_fn(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(generator_require_ready());
}
