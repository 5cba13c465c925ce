/*-------------------------------------------------------------------------
 *
 * persist.c
 *	  The durable high-water mark: the file $PGDATA/snowflake.state.
 *
 * The file holds an ID that no ID issued by this node exceeds, the highest
 * clock reading the node had seen, and the layout that wrote it.  It is
 * replaced atomically (written to a temporary name, fsync'd, renamed, the
 * directory fsync'd), so after a crash it holds either the old or the new
 * mark, never a torn one.  It is not WAL-logged: a server whose library is
 * removed from shared_preload_libraries ignores the file and starts.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <unistd.h>

#include "port/pg_crc32c.h"
#include "storage/fd.h"

#include "persist.h"

#define STATE_FILE		"snowflake.state"
#define STATE_TMP_FILE	"snowflake.state.tmp"
#define STATE_MAGIC		0x534E4F57	/* "SNOW" */
#define STATE_VERSION	1

typedef struct StateFile
{
	uint32		magic;
	uint32		version;
	int64		mark_id;
	int64		seen_unix_ms;
	char		layout[NAMEDATALEN];
	pg_crc32c	crc;			/* of all the fields above */
} StateFile;

static pg_crc32c
state_crc(const StateFile *f)
{
	pg_crc32c	crc;

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, f, offsetof(StateFile, crc));
	FIN_CRC32C(crc);
	return crc;
}

/*
 * Read the mark.  Returns MARK_ABSENT when there is no file, MARK_BROKEN
 * (with *problem set) when it cannot be trusted, MARK_OK otherwise.  Never
 * raises an error: the postmaster calls it.
 */
MarkResult
persist_read(PersistedMark *mark, const char **problem)
{
	StateFile	f;
	int			fd;
	ssize_t		n;

	fd = OpenTransientFile(STATE_FILE, O_RDONLY | PG_BINARY);
	if (fd < 0)
	{
		if (errno == ENOENT)
			return MARK_ABSENT;
		*problem = "it cannot be opened";
		return MARK_BROKEN;
	}
	n = read(fd, &f, sizeof(f));
	CloseTransientFile(fd);

	if (n != sizeof(f))
		*problem = "it has the wrong size";
	else if (f.magic != STATE_MAGIC || f.version != STATE_VERSION)
		*problem = "it is not a snowflake state file of this version";
	else if (!EQ_CRC32C(f.crc, state_crc(&f)))
		*problem = "its checksum does not match";
	else
	{
		mark->mark_id = f.mark_id;
		mark->seen_unix_ms = f.seen_unix_ms;
		strlcpy(mark->layout, f.layout, sizeof(mark->layout));
		return MARK_OK;
	}
	return MARK_BROKEN;
}

/*
 * Make the mark durable.  Reports failures at elevel: ERROR in backends, so
 * that no ID beyond a mark that is not on disk is handed out; LOG at
 * shutdown.
 */
void
persist_write(const PersistedMark *mark, int elevel)
{
	StateFile	f;
	int			fd;

	memset(&f, 0, sizeof(f));
	f.magic = STATE_MAGIC;
	f.version = STATE_VERSION;
	f.mark_id = mark->mark_id;
	f.seen_unix_ms = mark->seen_unix_ms;
	strlcpy(f.layout, mark->layout, sizeof(f.layout));
	f.crc = state_crc(&f);

	fd = OpenTransientFile(STATE_TMP_FILE, O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY);
	if (fd < 0)
	{
		ereport(elevel,
				(errcode_for_file_access(),
				 errmsg("could not create file \"%s\": %m", STATE_TMP_FILE)));
		return;
	}
	errno = 0;
	if (write(fd, &f, sizeof(f)) != sizeof(f))
	{
		int			save_errno = errno ? errno : ENOSPC;

		CloseTransientFile(fd);
		errno = save_errno;
		ereport(elevel,
				(errcode_for_file_access(),
				 errmsg("could not write file \"%s\": %m", STATE_TMP_FILE)));
		return;
	}
	if (pg_fsync(fd) != 0)
	{
		int			save_errno = errno;

		CloseTransientFile(fd);
		errno = save_errno;
		ereport(elevel,
				(errcode_for_file_access(),
				 errmsg("could not fsync file \"%s\": %m", STATE_TMP_FILE)));
		return;
	}
	CloseTransientFile(fd);

	/* renames, and fsyncs the file and its directory */
	durable_rename(STATE_TMP_FILE, STATE_FILE, elevel);
}
