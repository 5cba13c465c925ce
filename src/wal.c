/*-------------------------------------------------------------------------
 *
 * wal.c
 *	  How reservations reach WAL: the extension's WAL resource manager,
 *	  "snowflake", with one record ("reservation up to ID X, in layout L"),
 *	  its logging and its replay; and the replication origin through which
 *	  1.1 logged reservations, read once and then dropped.
 *
 * A record is logged and flushed before the reservation it carries is
 * used.  Its replay, in the startup process (crash recovery, standbys,
 * point-in-time recovery), hands the mark to the hook mark.c registers,
 * which raises the floor and makes it durable in the state file before
 * replay goes on, so no restartpoint passes a record whose mark is not in
 * the file.
 *
 * This file knows nothing of the floor: mark.c calls it, and module
 * initialization gives it the replay hook.  It takes no lock and no
 * capacity that users' replication counts on: the record needs neither a
 * replication origin nor a slot, and the old origin is read and dropped
 * only under locks taken conditionally.
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
#include "wal.h"

/* the one record: every ID up to mark may have been issued */
#define XLOG_SNOWFLAKE_RESERVE	0x00

typedef struct xl_snowflake_reserve
{
	int64		mark;			/* no ID above it is issued before the next */
	char		layout[NAMEDATALEN];	/* the layout the mark belongs to */
} xl_snowflake_reserve;

static wal_redo_hook redo_hook = NULL;

static void
snowflake_rm_redo(XLogReaderState *record)
{
	uint8		info = XLogRecGetInfo(record) & ~XLR_INFO_MASK;
	xl_snowflake_reserve xlrec;

	if (info != XLOG_SNOWFLAKE_RESERVE ||
		XLogRecGetDataLen(record) != sizeof(xl_snowflake_reserve))
		elog(PANIC, "snowflake_rm_redo: unknown record (info %u, length %u)",
			 info, XLogRecGetDataLen(record));
	memcpy(&xlrec, XLogRecGetData(record), sizeof(xlrec));
	xlrec.layout[NAMEDATALEN - 1] = '\0';
	if (redo_hook)
		redo_hook(xlrec.mark, xlrec.layout);
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
}

static const char *
snowflake_rm_identify(uint8 info)
{
	if ((info & ~XLR_INFO_MASK) == XLOG_SNOWFLAKE_RESERVE)
		return "RESERVE";
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
wal_register(wal_redo_hook redo)
{
	redo_hook = redo;
	RegisterCustomRmgr(SNOWFLAKE_RMGR_ID, &snowflake_rmgr);
}

/*
 * Log a reservation and flush it.  Needs no transaction, no database and
 * no lock but WAL's own.
 */
void
wal_log_reservation(int64 mark, const char *layout)
{
	xl_snowflake_reserve xlrec;
	XLogRecPtr	lsn;

	memset(&xlrec, 0, sizeof(xlrec));
	xlrec.mark = mark;
	strlcpy(xlrec.layout, layout, sizeof(xlrec.layout));
	XLogBeginInsert();
	XLogRegisterData((char *) &xlrec, sizeof(xlrec));
	lsn = XLogInsert(SNOWFLAKE_RMGR_ID, XLOG_SNOWFLAKE_RESERVE);
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
				(errmsg("snowflake could not drop replication origin \"%s\" yet: %s",
						SNOWFLAKE_LEGACY_ORIGIN, edata->message)));
		FreeErrorData(edata);
		result = LEGACY_BUSY;
	}
	PG_END_TRY();
	if (result == LEGACY_FOUND)
		ereport(LOG,
				(errmsg("snowflake dropped replication origin \"%s\": reservations are logged by its own WAL records now",
						SNOWFLAKE_LEGACY_ORIGIN)));
	return result;
}
