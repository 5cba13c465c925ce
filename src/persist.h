/*-------------------------------------------------------------------------
 *
 * persist.h
 *	  The durable high-water mark file.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SNOWFLAKE_PERSIST_H
#define SNOWFLAKE_PERSIST_H

typedef struct PersistedMark
{
	int64		mark_id;		/* no ID issued by this node is greater */
	int64		seen_unix_ms;	/* highest clock reading seen, Unix ms */
	char		layout[NAMEDATALEN];	/* the layout mark_id was made in */
} PersistedMark;

typedef enum MarkResult
{
	MARK_ABSENT,
	MARK_OK,
	MARK_BROKEN
} MarkResult;

#define SNOWFLAKE_MARK_FILE		"snowflake.state"
#define SNOWFLAKE_DECIMAL_FILE	"snowflake.decimal"

extern MarkResult persist_read_file(const char *path, void *payload, size_t len,
									const char **problem);
extern bool persist_write_file(const char *path, const void *payload, size_t len,
							   int elevel);
extern MarkResult persist_read(PersistedMark *mark, const char **problem);
extern void persist_write(const PersistedMark *mark, int elevel);

#endif							/* SNOWFLAKE_PERSIST_H */
