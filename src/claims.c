/*-------------------------------------------------------------------------
 *
 * claims.c
 *	  Other systems' claims of worker ids, as snowflake_workers brings them:
 *	  each claim that arrives (INSERT or COPY: a restored dump, an
 *	  aggregator's or a mesh member's replication) is kept in the node's
 *	  record once its transaction commits, and holds the node back whenever
 *	  it names the worker id in force, now or after a reload (the worker
 *	  id's event, identity.c and node.c).  And the guard that lets only a
 *	  superuser change the table.
 *
 * A claim rolled back (a restore that failed, a savepoint) holds nothing
 * back, and one kept by a commit that then fails (a serialization failure,
 * a PREPARE refused) is taken back.  A transaction prepared and later
 * rolled back (ROLLBACK PREPARED, in another session) leaves its claims
 * kept.  Claims are kept before the commit record (pre-commit), so that no
 * crash loses them.
 *
 * This file uses node.c and identity.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type_d.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "replication/logicalworker.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "identity.h"
#include "messages.h"
#include "node.h"

PG_FUNCTION_INFO_V1(snowflake_identity_claim_seen);
PG_FUNCTION_INFO_V1(snowflake_identity_claimable);
PG_FUNCTION_INFO_V1(snowflake_workers_guard);

/* A claim of another system that arrived in this transaction. */
typedef struct PendingClaim
{
	int32		worker;
	int			level;			/* the transaction nesting level it came in */
	bool		added;			/* kept by this transaction, new there */
	uint64		system;
} PendingClaim;

/* this transaction's claims, in TopMemoryContext */
static PendingClaim *pending = NULL;
static int	npending = 0;
static int	maxpending = 0;

static bool
change_claims(NodeRecord *r, const void *arg)
{
	bool		changed = false;

	for (int i = 0; i < npending; i++)
	{
		/* this system's own: the worker ids it may run under */
		if (pending[i].system == r->system_identifier)
		{
			if (r->nown > 0 && r->own[0] == pending[i].worker)
				continue;
			pending[i].added = !node_own_claimed(r, pending[i].worker);
			node_add_own_claim(r, pending[i].worker);
			changed = true;
			continue;
		}
		if (node_claimed(r, pending[i].worker))
			continue;
		node_add_claim(r, pending[i].worker);
		if (pending[i].worker == r->worker)
			r->other_system = pending[i].system;
		pending[i].added = true;
		changed = true;
	}
	return changed;
}

static bool
change_unclaim(NodeRecord *r, const void *arg)
{
	bool		changed = false;

	for (int i = 0; i < npending; i++)
	{
		if (!pending[i].added)
			continue;
		if (pending[i].system == r->system_identifier)
			node_drop_own_claim(r, pending[i].worker);
		else
			node_drop_claim(r, pending[i].worker);
		changed = true;
	}
	return changed;
}

static void
claims_xact_callback(XactEvent event, void *arg)
{
	bool		taken_back = false;

	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
			/* still in the transaction: a failure here aborts it */
			if (npending > 0)
				identity_change(change_claims, NULL, ERROR);
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PREPARE:
			npending = 0;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			/* the commit failed after they were kept: take them back */
			for (int i = 0; i < npending; i++)
				taken_back |= pending[i].added;
			if (taken_back)
				identity_change(change_unclaim, NULL, WARNING);
			npending = 0;
			break;
		default:
			break;
	}
}

static void
claims_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();
	int			n = 0;

	if (event != SUBXACT_EVENT_ABORT_SUB && event != SUBXACT_EVENT_COMMIT_SUB)
		return;
	for (int i = 0; i < npending; i++)
	{
		if (pending[i].level < level)
			pending[n++] = pending[i];
		else if (event == SUBXACT_EVENT_COMMIT_SUB)
		{
			/* the parent has it now */
			pending[i].level = level - 1;
			pending[n++] = pending[i];
		}
	}
	npending = n;
}

/*
 * Once per backend.  A confirmation's callbacks (confirm.c) register after
 * these, and so run before them: a confirmation is applied before the
 * claims its transaction brings, and taken back before them.
 */
void
claims_register_callbacks(void)
{
	static bool registered = false;

	if (!registered)
	{
		RegisterXactCallback(claims_xact_callback, NULL);
		RegisterSubXactCallback(claims_subxact_callback, NULL);
		registered = true;
	}
}

/* A claim of another system, kept if this transaction commits. */
void
claims_pend(int32 worker, uint64 system)
{
	claims_register_callbacks();
	if (npending == maxpending)
	{
		maxpending = Max(16, maxpending * 2);
		pending = pending == NULL ?
			MemoryContextAlloc(TopMemoryContext, maxpending * sizeof(PendingClaim)) :
			repalloc(pending, maxpending * sizeof(PendingClaim));
	}
	pending[npending].worker = worker;
	pending[npending].system = system;
	pending[npending].level = GetCurrentTransactionNestLevel();
	pending[npending].added = false;
	npending++;
}

/*
 * Called by the trigger on snowflake_workers for each claim that arrives
 * by INSERT or COPY (a restored dump; logical replication too, which an
 * aggregator or a mesh member receives every node's claims by): another
 * system's claim of a worker id is kept once its transaction commits, and
 * holds the node back whenever that is its worker id, now or after a
 * reload.
 */
Datum
snowflake_identity_claim_seen(PG_FUNCTION_ARGS)
{
	claims_pend(PG_GETARG_INT32(0), (uint64) PG_GETARG_INT64(1));
	PG_RETURN_VOID();
}

/*
 * snowflake_identity_claimable(): the worker id snowflake_claim_worker()
 * claims, the one configured.  It refuses as snowflake_worker_id() does,
 * but for a node held back because this system has not claimed that
 * worker id: the claim is the step that releases it.
 */
Datum
snowflake_identity_claimable(PG_FUNCTION_ARGS)
{
	NodeReason	r = identity_verdict(true, CHECK_ALL);

	if (r != REASON_UNCLAIMED && node_refuses(r))
		node_refuse_state(r);
	PG_RETURN_INT32(node_configured_worker());
}

/*
 * Another system's claim that a restore (INSERT or COPY in a backend)
 * brings for a worker id this system already claimed in the table: the
 * dump of another system's node of that worker id, restored into a
 * cluster that claimed it first.  It is kept as an arriving claim is, and
 * left out of the table, where this system's claim stands, so that the
 * restore goes on rather than failing on the key with the claim lost (or
 * skipped by ON CONFLICT, whose DO UPDATE it leaves undone too, with the
 * WARNING).  Logical replication's apply still fails on the key: that is
 * how two members of a mesh that claim one worker id are found.
 */
static bool
claim_meets_own(TriggerData *trigdata)
{
	Relation	rel = trigdata->tg_relation;
	TupleDesc	desc = RelationGetDescr(rel);
	int			wcol = SPI_fnumber(desc, "worker_id");
	int			scol = SPI_fnumber(desc, "system_identifier");
	Datum		worker;
	Datum		system;
	bool		isnull;
	bool		own;
	Oid			argtypes[1] = {INT4OID};
	char	   *query;

	if (wcol <= 0 || scol <= 0)
		return false;
	worker = heap_getattr(trigdata->tg_trigtuple, wcol, desc, &isnull);
	if (isnull)
		return false;
	system = heap_getattr(trigdata->tg_trigtuple, scol, desc, &isnull);
	/* this system's own claim again (its own dump) meets the key as before */
	if (isnull || (uint64) DatumGetInt64(system) == GetSystemIdentifier())
		return false;

	query = psprintf("SELECT system_identifier FROM %s WHERE worker_id OPERATOR(pg_catalog.=) $1",
					 quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
												RelationGetRelationName(rel)));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (SPI_execute_with_args(query, 1, argtypes, &worker, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "SPI_execute_with_args failed");
	own = false;
	if (SPI_processed == 1)
	{
		Datum		claimant = SPI_getbinval(SPI_tuptable->vals[0],
											 SPI_tuptable->tupdesc, 1, &isnull);

		own = !isnull && (uint64) DatumGetInt64(claimant) == GetSystemIdentifier();
	}
	SPI_finish();
	if (!own)
		return false;
	claims_pend(DatumGetInt32(worker), (uint64) DatumGetInt64(system));
	ereport(WARNING,
			(errmsg("claim of snowflake worker id %d by system %llu is kept aside",
					DatumGetInt32(worker), (unsigned long long) DatumGetInt64(system)),
			 errdetail("This system claimed that worker id here; the other system's claim holds back any server of this system that runs under it, and is left out of the table.")));
	return true;
}

/*
 * Trigger on snowflake_workers, before each row's INSERT, UPDATE or DELETE
 * and before TRUNCATE: only a superuser changes the claims.  Privileges on
 * the table do not decide it, since pg_write_all_data grants INSERT, UPDATE
 * and DELETE on every table, and a subscription applies with the rights of
 * its owner.  The trigger is enabled ALWAYS, so it fires in logical
 * replication's apply too, where superuser() asks about the role the
 * change is applied as (the table's owner; the subscription's owner with
 * run_as_owner, and before PostgreSQL 16), as the privilege checks do.
 * A restore's claim of a worker id this system claimed is kept aside
 * (claim_meets_own()).
 */
Datum
snowflake_workers_guard(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	TriggerEvent event;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("snowflake_workers_guard() was not called by the trigger manager")));
	event = trigdata->tg_event;
	if (!TRIGGER_FIRED_BEFORE(event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("snowflake_workers_guard() must be fired before the change")));

	if (!superuser())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s",
						RelationGetRelationName(trigdata->tg_relation)),
				 errdetail("Only superusers may change the claims of worker ids."),
				 errhint("A superuser claims this node's worker id with snowflake.snowflake_claim_worker().")));

	if (!TRIGGER_FIRED_FOR_ROW(event))
		return PointerGetDatum(NULL);
	if (TRIGGER_FIRED_BY_INSERT(event) && !IsLogicalWorker() &&
		claim_meets_own(trigdata))
		return PointerGetDatum(NULL);
	if (TRIGGER_FIRED_BY_UPDATE(event))
		return PointerGetDatum(trigdata->tg_newtuple);
	return PointerGetDatum(trigdata->tg_trigtuple);
}
