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

/* What a read found wrong with a file, for its message (persist_fault()). */
typedef enum PersistFaultKind
{
	FAULT_NONE,
	FAULT_OPEN,					/* it could not be opened: err */
	FAULT_READ,					/* it could not be read: err */
	FAULT_EMPTY,
	FAULT_SIZE,
	FAULT_CHECKSUM,				/* 1.0's one record */
	FAULT_RECORDS				/* neither of its records is intact */
} PersistFaultKind;

typedef struct PersistFault
{
	PersistFaultKind kind;
	int			err;			/* errno of the call that failed */
} PersistFault;

#define SNOWFLAKE_DECIMAL_FILE	"snowflake.decimal"

extern MarkResult persist_read_file(const char *path, void *payload, size_t len,
									uint64 *writes, PersistFault *fault);
extern int	persist_fault(const char *path, const PersistFault *fault);
extern bool persist_write_file(const char *path, const void *payload,
							   size_t len, uint64 *writes, int elevel);

#endif							/* SNOWFLAKE_PERSIST_H */
