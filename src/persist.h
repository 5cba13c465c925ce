/*-------------------------------------------------------------------------
 *
 * persist.h
 *	  Small durable state files in the data directory.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SNOWFLAKE_PERSIST_H
#define SNOWFLAKE_PERSIST_H

/* The durable high-water mark, as $PGDATA/snowflake.state holds it. */
typedef struct PersistedMark
{
	int64		mark_id;		/* no ID issued by this node is greater */
	int64		seen_unix_ms;	/* highest clock reading seen, Unix ms */
	char		layout[NAMEDATALEN];	/* the layout mark_id was made in */
	uint32		flags;			/* MARK_*; 1.0's files have none */
	uint32		padding;
	/*
	 * After a repair that raised the state and before any reservation above
	 * it: the last ID before the repair, which bounds every ID the node
	 * issued, so that the repair can be undone; 0 otherwise.  1.1's files
	 * end before it (it reads as 0).
	 */
	int64		undo_floor;
} PersistedMark;

/*
 * The node started in recovery (or without a file) and has not yet raised
 * its state to what recovery found: a restart must apply the floor, even
 * after a clean shutdown.
 */
#define MARK_FLOOR_PENDING	0x1

/* 1.1's replication origin is known to be gone from this data directory */
#define MARK_LEGACY_GONE	0x2

typedef enum MarkResult
{
	MARK_ABSENT,
	MARK_OK,
	MARK_BROKEN,				/* its contents cannot be trusted */
	MARK_UNREADABLE				/* it exists, but cannot be opened or read */
} MarkResult;

#define SNOWFLAKE_MARK_FILE		"snowflake.state"
#define SNOWFLAKE_DECIMAL_FILE	"snowflake.decimal"

extern MarkResult persist_read_file(const char *path, void *payload, size_t len,
									uint64 *writes, const char **problem);
extern bool persist_write_file(const char *path, const void *payload,
							   size_t len, uint64 *writes, int elevel);

#endif							/* SNOWFLAKE_PERSIST_H */
