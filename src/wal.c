/*-------------------------------------------------------------------------
 *
 * wal.c
 *	  How reservations reach WAL: the extension's WAL resource manager,
 *	  "snowflake", with its records ("reservation up to ID X, in layout L";
 *	  "the node's identity is now R"), their logging and their replay; and
 *	  the replication origin through which 1.1 logged reservations, read
 *	  once and then dropped.
 *
 * A record is logged and flushed before the reservation it carries is
 * used.  Its replay, in the startup process (crash recovery, standbys,
 * point-in-time recovery), hands the mark to the hook mark.c registers,
 * which raises the floor and makes it durable in the state file before
 * replay goes on, so no restartpoint passes a record whose mark is not in
 * the file.
 *
 * An identity record carries the node's identity as identity.c keeps it
 * (whether the node may generate, and why not); a standby replays it so
 * that it is, once promoted, what its primary was.
 *
 * This file knows nothing of the floor or of identities: mark.c and
 * identity.c call it, and module initialization gives it the replay hooks.
 * It takes no lock and no capacity that users' replication counts on: the
 * records need neither a replication origin nor a slot, and the old origin
 * is read and dropped only under locks taken conditionally.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "access/xloginsert.h"
#include "catalog/pg_replication_origin.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/memutils.h"

#include "compat.h"
#include "messages.h"
#include "wal.h"

/* every ID up to mark may have been issued */
#define XLOG_SNOWFLAKE_RESERVE	0x00
/* the node's identity record, as identity.c keeps it */
#define XLOG_SNOWFLAKE_IDENTITY	0x10

typedef struct xl_snowflake_reserve
{
	int64		mark;			/* no ID above it is issued before the next */
	char		layout[NAMEDATALEN];	/* the layout the mark belongs to */
	int64		lead_ms;		/* how far the policy let IDs lead the clock */
} xl_snowflake_reserve;

static wal_redo_hook redo_hook = NULL;
static wal_identity_hook identity_hook = NULL;

static void
snowflake_rm_redo(XLogReaderState *record)
{
	uint8		info = XLogRecGetInfo(record) & ~XLR_INFO_MASK;
	uint32		len = XLogRecGetDataLen(record);
	xl_snowflake_reserve xlrec;

	if (info == XLOG_SNOWFLAKE_IDENTITY && len > 0 && len <= WAL_IDENTITY_MAX)
	{
		if (identity_hook)
			identity_hook(XLogRecGetData(record), len);
		return;
	}
	if (info != XLOG_SNOWFLAKE_RESERVE || len != sizeof(xl_snowflake_reserve))
		elog(PANIC, "snowflake_rm_redo: unknown record (info %u, length %u)",
			 info, len);
	memcpy(&xlrec, XLogRecGetData(record), sizeof(xlrec));
	xlrec.layout[NAMEDATALEN - 1] = '\0';
	if (redo_hook)
		redo_hook(xlrec.mark, xlrec.layout, xlrec.lead_ms);
}

static void
snowflake_rm_desc(StringInfo buf, XLogReaderState *record)
{
	uint8		info = XLogRecGetInfo(record) & ~XLR_INFO_MASK;
	xl_snowflake_reserve *xlrec = (xl_snowflake_reserve *) XLogRecGetData(record);

	if (info == XLOG_SNOWFLAKE_RESERVE &&
		XLogRecGetDataLen(record) == sizeof(xl_snowflake_reserve))
		appendStringInfo(buf, "up to " INT64_FORMAT ", layout %.*s",
						 xlrec->mark, NAMEDATALEN, xlrec->layout);
	else if (info == XLOG_SNOWFLAKE_IDENTITY)
		appendStringInfo(buf, "%u bytes", XLogRecGetDataLen(record));
}

static const char *
snowflake_rm_identify(uint8 info)
{
	switch (info & ~XLR_INFO_MASK)
	{
		case XLOG_SNOWFLAKE_RESERVE:
			return "RESERVE";
		case XLOG_SNOWFLAKE_IDENTITY:
			return "IDENTITY";
	}
	return NULL;
}

static RmgrData snowflake_rmgr = {
	.rm_name = SNOWFLAKE_RMGR_NAME,
	.rm_redo = snowflake_rm_redo,
	.rm_desc = snowflake_rm_desc,
	.rm_identify = snowflake_rm_identify,
};

/* Called from _PG_init while preloading: recovery needs it from the start. */
void
wal_register(wal_redo_hook redo, wal_identity_hook identity)
{
	redo_hook = redo;
	identity_hook = identity;
	RegisterCustomRmgr(SNOWFLAKE_RMGR_ID, &snowflake_rmgr);
}

/*
 * Log a reservation and flush it.  Needs no transaction, no database and
 * no lock but WAL's own.
 */
void
wal_log_reservation(int64 mark, const char *layout, int64 lead_ms)
{
	xl_snowflake_reserve xlrec;
	XLogRecPtr	lsn;

	memset(&xlrec, 0, sizeof(xlrec));
	xlrec.mark = mark;
	strlcpy(xlrec.layout, layout, sizeof(xlrec.layout));
	xlrec.lead_ms = lead_ms;
	XLogBeginInsert();
	XLogRegisterData((char *) &xlrec, sizeof(xlrec));
	lsn = XLogInsert(SNOWFLAKE_RMGR_ID, XLOG_SNOWFLAKE_RESERVE);
	XLogFlush(lsn);
}

/*
 * Log the node's identity record and flush it, so that a standby that
 * replays anything logged after it knows it too.
 */
void
wal_log_identity(const void *rec, Size len)
{
	XLogRecPtr	lsn;

	Assert(len > 0 && len <= WAL_IDENTITY_MAX);
	XLogBeginInsert();
	XLogRegisterData((char *) rec, len);
	lsn = XLogInsert(SNOWFLAKE_RMGR_ID, XLOG_SNOWFLAKE_IDENTITY);
	XLogFlush(lsn);
}

/*
 * The progress of 1.1's origin, the last reservation it logged (or
 * replayed from a primary that ran 1.1).  Reads only the shared catalog,
 * so it works without a database; takes its lock only if it is free.
 */
LegacyOrigin
wal_legacy_mark(int64 *mark)
{
	bool		own_xact = !IsTransactionState();
	LegacyOrigin result = LEGACY_NONE;
	compat_origin_id origin;

	*mark = 0;
	if (own_xact)
		StartTransactionCommand();
	if (!ConditionalLockRelationOid(ReplicationOriginRelationId, AccessShareLock))
		result = LEGACY_BUSY;
	else
	{
		origin = replorigin_by_name(SNOWFLAKE_LEGACY_ORIGIN, true);
		if (origin != COMPAT_INVALID_ORIGIN)
		{
			*mark = (int64) replorigin_get_progress(origin, false);

			/*
			 * Without state slots for origins, progress is neither restored
			 * at start nor replayed: 0 then means unknown, not none.
			 */
			result = (*mark == 0 && compat_origin_slots() == 0) ?
				LEGACY_UNREADABLE : LEGACY_FOUND;
		}
		UnlockRelationOid(ReplicationOriginRelationId, AccessShareLock);
	}
	if (own_xact)
		CommitTransactionCommand();
	return result;
}

/*
 * Drop 1.1's origin, so that it takes no state slot any longer.  Never
 * waits: if the catalog is locked (a DROP SUBSCRIPTION waiting on its
 * publisher, say) or a session has set the origin up, it says BUSY and the
 * caller tries again later.  Runs in a transaction of its own.
 */
LegacyOrigin
wal_drop_legacy_origin(void)
{
	MemoryContext cxt = CurrentMemoryContext;
	volatile LegacyOrigin result = LEGACY_NONE;

	StartTransactionCommand();
	if (!ConditionalLockRelationOid(ReplicationOriginRelationId,
									COMPAT_ORIGIN_DROP_LOCKMODE))
	{
		AbortCurrentTransaction();
		return LEGACY_BUSY;
	}
	if (replorigin_by_name(SNOWFLAKE_LEGACY_ORIGIN, true) == COMPAT_INVALID_ORIGIN)
	{
		CommitTransactionCommand();
		return LEGACY_NONE;
	}
	PG_TRY();
	{
		replorigin_drop_by_name(SNOWFLAKE_LEGACY_ORIGIN, true, true);
		CommitTransactionCommand();
		result = LEGACY_FOUND;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		/* in use by a session: try again later */
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();
		ereport(DEBUG1,
				(errmsg("snowflake could not drop replication origin \"%s\" yet",
						SNOWFLAKE_LEGACY_ORIGIN),
				 errdetail_internal("%s", edata->message)));
		FreeErrorData(edata);
		result = LEGACY_BUSY;
	}
	PG_END_TRY();
	if (result == LEGACY_FOUND)
		ereport(LOG,
				(errmsg("snowflake dropped replication origin \"%s\"",
						SNOWFLAKE_LEGACY_ORIGIN),
				 errdetail("Reservations are logged by the extension's own WAL records now.")));
	return result;
}
