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
#include "replication/origin.h"
#include "replication/slot.h"
#include "utils/guc_tables.h"
#include "utils/wait_event.h"

/* 18 marks functions that do not return with pg_noreturn, before them */
#ifndef pg_noreturn
#define pg_noreturn pg_attribute_noreturn()
#endif

/* 17 replaced PGPROC.pgprocno by ProcNumber and MyProcNumber */
#if PG_VERSION_NUM < 170000
#define MyProcNumber	(MyProc ? MyProc->pgprocno : -1)
#endif

/*
 * 17 lets an extension name its own wait events; before, they all show as
 * "Extension".  *cache keeps the number a name got in this process.
 */
static inline uint32
compat_wait_event(const char *name, uint32 *cache)
{
#if PG_VERSION_NUM >= 170000
	if (*cache == 0)
		*cache = WaitEventExtensionNew(name);
	return *cache;
#else
	return PG_WAIT_EXTENSION;
#endif
}

/* 19 renamed RepOriginId to ReplOriginId */
#if PG_VERSION_NUM >= 190000
typedef ReplOriginId compat_origin_id;
#define COMPAT_INVALID_ORIGIN	InvalidReplOriginId
#else
typedef RepOriginId compat_origin_id;
#define COMPAT_INVALID_ORIGIN	InvalidRepOriginId
#endif

/* 18 gave origins their own count of state slots */
#if PG_VERSION_NUM >= 180000
#define compat_origin_slots() (max_active_replication_origins)
#else
#define compat_origin_slots() (max_replication_slots)
#endif

/*
 * The lock on pg_replication_origin under which an origin is dropped: 16
 * made it weaker, with a lock on the origin itself
 */
#if PG_VERSION_NUM >= 160000
#define COMPAT_ORIGIN_DROP_LOCKMODE RowExclusiveLock
#else
#define COMPAT_ORIGIN_DROP_LOCKMODE ExclusiveLock
#endif

/* 16 made get_guc_variables() return its length */
static inline struct config_generic **
compat_guc_variables(int *n)
{
#if PG_VERSION_NUM >= 160000
	return get_guc_variables(n);
#else
	*n = GetNumConfigOptions();
	return get_guc_variables();
#endif
}

/*
 * 16 moved the memory of settings' values into a context of its own: a
 * check hook's replacement value and its extra come from there, and from
 * malloc() before
 */
#if PG_VERSION_NUM >= 160000
#define compat_guc_malloc(size)	guc_malloc(LOG, (size))
#define compat_guc_strdup(s)	guc_strdup(LOG, (s))
#define compat_guc_free(p)		guc_free(p)
#else
#define compat_guc_malloc(size)	malloc(size)
#define compat_guc_strdup(s)	strdup(s)
#define compat_guc_free(p)		free(p)
#endif

#endif							/* SNOWFLAKE_COMPAT_H */
