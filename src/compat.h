/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  The differences between the PostgreSQL versions snowflake supports
 *	  (15 to 19), in one place.  Every other file writes against the newest
 *	  API and includes this header to get it on older servers.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SNOWFLAKE_COMPAT_H
#define SNOWFLAKE_COMPAT_H

#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/wait_event.h"

/* 17 replaced PGPROC.pgprocno by ProcNumber and MyProcNumber */
#if PG_VERSION_NUM < 170000
#define MyProcNumber	(MyProc ? MyProc->pgprocno : -1)
#endif

/*
 * 17 lets an extension name its own wait events; before, they all show as
 * "Extension".  snowflake_wait_event() returns the named one where it can.
 */
#if PG_VERSION_NUM >= 170000
#define SNOWFLAKE_NAMED_WAIT_EVENTS 1
#endif

#endif							/* SNOWFLAKE_COMPAT_H */
