/*-------------------------------------------------------------------------
 *
 * wal.h
 *	  How reservations and the node's identity reach WAL (wal.c): the
 *	  extension's WAL resource manager and its records, and the replication
 *	  origin that carried reservations before 1.2.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SNOWFLAKE_WAL_H
#define SNOWFLAKE_WAL_H

/*
 * The resource manager's ID, in the range PostgreSQL keeps for extensions
 * (128-255, 128 being RM_EXPERIMENTAL_ID); to be listed on the PostgreSQL
 * wiki page "CustomWALResourceManagers".
 */
#define SNOWFLAKE_RMGR_ID		187
#define SNOWFLAKE_RMGR_NAME		"snowflake"

/* the origin through which 1.1 logged reservations */
#define SNOWFLAKE_LEGACY_ORIGIN	"snowflake_high_water_mark"

/* Called in the startup process for every reservation replayed. */
typedef void (*wal_redo_hook) (int64 mark, const char *layout, int64 lead_ms);

/*
 * Called in the startup process for every identity record replayed, with
 * the record as identity.c logged it (at most WAL_IDENTITY_MAX bytes).
 */
#define WAL_IDENTITY_MAX	512
typedef void (*wal_identity_hook) (const void *rec, Size len);

/* What the origin of 1.1 says; see wal_legacy_mark(). */
typedef enum LegacyOrigin
{
	LEGACY_NONE,				/* there is no such origin */
	LEGACY_FOUND,				/* it exists; *mark is its progress */
	LEGACY_BUSY,				/* its catalog is locked: ask again later */
	LEGACY_UNREADABLE			/* it exists, but no state slot holds its
								 * progress */
} LegacyOrigin;

extern void wal_register(wal_redo_hook redo, wal_identity_hook identity);
extern void wal_log_reservation(int64 mark, const char *layout, int64 lead_ms);
extern void wal_log_identity(const void *rec, Size len);
extern LegacyOrigin wal_legacy_mark(int64 *mark);
extern LegacyOrigin wal_drop_legacy_origin(void);

#endif							/* SNOWFLAKE_WAL_H */
