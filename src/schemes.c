/*-------------------------------------------------------------------------
 *
 * schemes.c
 *	  The other ID schemes of the source documents: DecimalId and
 *	  node-partitioned auto-increment.
 *
 * DecimalId (id = counter * 10^10 + generator_id * 10^5 + launch_id) keeps
 * its counter in shared memory, packed with the generator id into one
 * atomic word.  The generator id is durable and cluster-wide: it advances
 * at every server start and whenever the counter is used up, so two
 * launches never share one.
 *
 * Node-partitioned auto-increment puts this node's worker id above an
 * ordinary sequence's value, so each node counts densely and durably in a
 * range of its own (SingleStore's aggregators do the same).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xlog.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/fmgrprotos.h"
#include "utils/syscache.h"

#include "messages.h"
#include "node.h"
#include "persist.h"
#include "settings.h"
#include "snowflake.h"

PG_FUNCTION_INFO_V1(decimal_id_nextval);
PG_FUNCTION_INFO_V1(decimal_id_decode);
PG_FUNCTION_INFO_V1(snowflake_node_nextval);
PG_FUNCTION_INFO_V1(snowflake_node_decode);

/*
 * word is read anywhere; refusal is written at start or under lock, and
 * read anywhere; the rest is set at start or read and written under lock.
 */
typedef struct DecimalShared
{
	pg_atomic_uint64 word;		/* generator id and last counter: decimal_word() */
	LWLock	   *lock;
	uint64		writes;			/* counter of the file's newest record */
	pg_atomic_uint32 refusal;	/* NodeReason: why it cannot generate */
} DecimalShared;

typedef struct DecimalFile
{
	int64		generator_id;	/* the last generator id handed out */
} DecimalFile;

static DecimalShared *dec = NULL;

Size
schemes_shmem_size(void)
{
	return sizeof(DecimalShared);
}

static void
decimal_unusable(NodeReason r)
{
	pg_atomic_write_u32(&dec->refusal, (uint32) r);
}

/*
 * The next generator id after last, within this node's range, made durable
 * before it is used.  Returns -1 when the range is used up or the file
 * cannot be written (at elevel below ERROR).
 */
static int64
next_generator(int64 last, int elevel)
{
	int64		g = Max(last + 1, snowflake_decimal_generator_min);
	DecimalFile f;

	if (g > snowflake_decimal_generator_max)
		return -1;
	memset(&f, 0, sizeof(f));
	f.generator_id = g;
	if (!persist_write_file(SNOWFLAKE_DECIMAL_FILE, &f, sizeof(f), &dec->writes, elevel))
		return -1;
	return g;
}

/* What a file DecimalId cannot use at start means. */
static int
file_hint(void)
{
	return errhint("DecimalId's generator refuses until the file is restored or removed.");
}

/* At server start: take the next generator id.  Called with AddinShmemInitLock. */
void
schemes_shmem_init(void)
{
	bool		found;
	DecimalFile f;
	PersistFault fault;
	int64		last = -1;
	int64		g;

	dec = ShmemInitStruct("snowflake decimal id", sizeof(DecimalShared), &found);
	if (found)
		return;
	pg_atomic_init_u64(&dec->word, 0);
	dec->lock = &(GetNamedLWLockTranche("snowflake"))[1].lock;
	pg_atomic_init_u32(&dec->refusal, REASON_NONE);
	dec->writes = 0;

	/* the node's configuration refuses first (decimal_refuse()) */
	if (node_settings_reason() != REASON_NONE)
		return;
	if (snowflake_decimal_generator_min > snowflake_decimal_generator_max)
	{
		decimal_unusable(REASON_DECIMAL_RANGE);
		return;
	}
	switch (persist_read_file(SNOWFLAKE_DECIMAL_FILE, &f, sizeof(f), &dec->writes, &fault))
	{
		case MARK_ABSENT:
			break;
		case MARK_OK:
			if (f.generator_id < 0 || f.generator_id > DECIMAL_FIELD_MAX)
			{
				decimal_unusable(REASON_DECIMAL_FILE);
				ereport(WARNING,
						(errcode(ERRCODE_DATA_CORRUPTED),
						 errmsg("DecimalId state file \"%s\" holds an invalid generator id, %lld",
								SNOWFLAKE_DECIMAL_FILE, (long long) f.generator_id),
						 file_hint()));
				return;
			}
			last = f.generator_id;
			break;
		case MARK_BROKEN:
		case MARK_UNREADABLE:
			decimal_unusable(REASON_DECIMAL_FILE);
			errno = fault.err;
			ereport(WARNING,
					(persist_fault(SNOWFLAKE_DECIMAL_FILE, &fault),
					 file_hint()));
			return;
	}
	g = next_generator(last, LOG);
	if (g < 0)
	{
		decimal_unusable(REASON_DECIMAL_USED_UP);
		return;
	}
	pg_atomic_write_u64(&dec->word, decimal_word(g, 0));
}

/*
 * Refuse unless DecimalId's generator may generate: the node's
 * configuration first, as every generator's, then its own reason, both
 * from node.c's table of refusals.
 */
static void
decimal_require_ready(void)
{
	NodeReason	r;
	NodeReason	own;
	const char *min = node_num(snowflake_decimal_generator_min);
	const char *max = node_num(snowflake_decimal_generator_max);
	RefuseArgs	a = {{0}};

	if (dec == NULL)
		node_refuse(REASON_NOT_PRELOADED, NULL);
	if ((r = node_settings_reason()) != REASON_NONE)
		node_refuse_state(r);
	if (RecoveryInProgress())
		node_refuse(REASON_IN_RECOVERY, NULL);
	own = (NodeReason) pg_atomic_read_u32(&dec->refusal);
	if (own == REASON_NONE)
		return;
	if (own == REASON_DECIMAL_RANGE)
		a = (RefuseArgs) {{0}, {min, max}};
	else if (own == REASON_DECIMAL_FILE)
		a = (RefuseArgs) {{SNOWFLAKE_DECIMAL_FILE}};
	else
		a = (RefuseArgs) {{0}, {min, max, SNOWFLAKE_DECIMAL_FILE}};
	node_refuse(own, &a);
}

/* The counter of generator g is used up: move to the next generator id. */
static void
advance_generator(uint64 g)
{
	uint64		cur;
	int64		next;

	LWLockAcquire(dec->lock, LW_EXCLUSIVE);
	cur = pg_atomic_read_u64(&dec->word);
	if (decimal_word_generator(cur) == (int64) g)
	{
		next = next_generator((int64) g, ERROR);
		if (next < 0)
		{
			decimal_unusable(REASON_DECIMAL_USED_UP);
			LWLockRelease(dec->lock);
			decimal_require_ready();
		}
		/* others keep adding to the old word; this one wins or retries */
		while (!pg_atomic_compare_exchange_u64(&dec->word, &cur, decimal_word(next, 0)))
		{
			if (decimal_word_generator(cur) != (int64) g)
				break;
		}
	}
	LWLockRelease(dec->lock);
}

Datum
decimal_id_nextval(PG_FUNCTION_ARGS)
{
	for (;;)
	{
		uint64		w;
		uint64		g;
		int64		counter;

		decimal_require_ready();
		w = pg_atomic_add_fetch_u64(&dec->word, 1);
		g = decimal_word_generator(w);
		counter = decimal_word_counter(w);
		if (counter <= DECIMAL_COUNTER_MAX)
			PG_RETURN_INT64(decimal_id_compose(counter, (int64) g, snowflake_launch_id));
		advance_generator(g);
	}
}

Datum
decimal_id_decode(PG_FUNCTION_ARGS)
{
	int64		id = PG_GETARG_INT64(0);
	TupleDesc	tupdesc;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};

	if (id < DECIMAL_COUNTER_UNIT || id / DECIMAL_COUNTER_UNIT > DECIMAL_COUNTER_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("DecimalId %lld is out of range", (long long) id),
				 errdetail("A DecimalId is counter * 10^10 + generator_id * 10^5 + launch_id, with a counter from 1 to %lld.",
						   (long long) DECIMAL_COUNTER_MAX)));
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	values[0] = Int64GetDatum(id / DECIMAL_COUNTER_UNIT);
	values[1] = Int32GetDatum((int32) ((id / DECIMAL_GENERATOR_UNIT) % 100000));
	values[2] = Int32GetDatum((int32) (id % 100000));
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls)));
}

Datum
snowflake_node_nextval(PG_FUNCTION_ARGS)
{
	Oid			seq = PG_GETARG_OID(0);
	int64		node = generator_require_ready();
	int64		value;

	/* nextval() reports an OID that names nothing as an internal error */
	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(seq)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", seq)));
	if (node > NODE_ID_NODE_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("snowflake.worker_id %d does not fit the %d-bit node field of node-partitioned IDs",
						(int) node, NODE_ID_NODE_BITS),
				 errhint("Use worker ids from 0 to %lld on nodes that use snowflake_node_nextval().",
						 (long long) NODE_ID_NODE_MAX)));

	value = DatumGetInt64(DirectFunctionCall1(nextval_oid, ObjectIdGetDatum(seq)));
	if (value < 1 || value > NODE_ID_COUNTER_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
				 errmsg("sequence value %lld is outside the node-partitioned range 1 to %lld",
						(long long) value, (long long) NODE_ID_COUNTER_MAX),
				 errdetail("Node-partitioned IDs keep the worker id in the top %d bits and the sequence in the low %d; a larger value would fall into another node's range.",
						   NODE_ID_NODE_BITS, NODE_ID_COUNTER_BITS),
				 errhint("Give the sequence MINVALUE 1 and MAXVALUE %lld, and NO CYCLE.",
						 (long long) NODE_ID_COUNTER_MAX)));
	PG_RETURN_INT64(node_id_compose(node, value));
}

Datum
snowflake_node_decode(PG_FUNCTION_ARGS)
{
	int64		id = PG_GETARG_INT64(0);
	TupleDesc	tupdesc;
	Datum		values[2];
	bool		nulls[2] = {false, false};

	if (id <= 0 || node_id_counter(id) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("node-partitioned ID must be positive with a counter of at least 1, not %lld",
						(long long) id)));
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	values[0] = Int32GetDatum((int32) node_id_node(id));
	values[1] = Int64GetDatum(node_id_counter(id));
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls)));
}
