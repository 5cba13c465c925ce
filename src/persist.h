/*-------------------------------------------------------------------------
 *
 * persist.h
 *	  Small durable state files in the data directory.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SNOWFLAKE_PERSIST_H
#define SNOWFLAKE_PERSIST_H

typedef enum MarkResult
{
	MARK_ABSENT,
	MARK_OK,
	MARK_BROKEN,				/* its contents cannot be trusted */
	MARK_UNREADABLE				/* it exists, but cannot be opened or read */
} MarkResult;

#define SNOWFLAKE_DECIMAL_FILE	"snowflake.decimal"

extern MarkResult persist_read_file(const char *path, void *payload, size_t len,
									uint64 *writes, const char **problem);
extern bool persist_write_file(const char *path, const void *payload,
							   size_t len, uint64 *writes, int elevel);

#endif							/* SNOWFLAKE_PERSIST_H */
