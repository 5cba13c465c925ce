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

extern MarkResult persist_read(PersistedMark *mark, const char **problem);
extern void persist_write(const PersistedMark *mark, int elevel);

#endif							/* SNOWFLAKE_PERSIST_H */
