/*-------------------------------------------------------------------------
 *
 * persist.c
 *	  Durable state files in the data directory: the high-water mark
 *	  ($PGDATA/snowflake.state) and DecimalId's generator id.
 *
 * The file holds an ID that no ID issued by this node exceeds, the highest
 * clock reading the node had seen, and the layout that wrote it.  DecimalId
 * keeps its generator id in a second file of the same form.  Each is one
 * record under a sector in size, checked by a CRC.  It is not WAL-logged: a server whose library is
 * removed from shared_preload_libraries ignores the file and starts.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "port/pg_crc32c.h"
#include "storage/fd.h"

#include "persist.h"

#define STATE_MAGIC		0x534E4F57	/* "SNOW" */
#define STATE_VERSION	1
#define MAX_PAYLOAD		256

/* a file: magic, version, payload length, payload, CRC of all before it */
typedef struct StateHeader
{
	uint32		magic;
	uint32		version;
	uint32		length;
} StateHeader;

static pg_crc32c
state_crc(const char *buf, size_t len)
{
	pg_crc32c	crc;

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, buf, len);
	FIN_CRC32C(crc);
	return crc;
}

/*
 * Read a state file into payload (len bytes).  Returns MARK_ABSENT when
 * there is no file, MARK_BROKEN (with *problem set) when it cannot be
 * trusted, MARK_OK otherwise.  Never raises an error: the postmaster calls
 * it.
 */
MarkResult
persist_read_file(const char *path, void *payload, size_t len, const char **problem)
{
	char		buf[sizeof(StateHeader) + MAX_PAYLOAD + sizeof(pg_crc32c)];
	size_t		want = sizeof(StateHeader) + len + sizeof(pg_crc32c);
	StateHeader hdr;
	pg_crc32c	crc;
	int			fd;
	ssize_t		n;

	Assert(len <= MAX_PAYLOAD);
	fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
	if (fd < 0)
	{
		if (errno == ENOENT)
			return MARK_ABSENT;
		*problem = "it cannot be opened";
		return MARK_BROKEN;
	}
	n = read(fd, buf, sizeof(buf));
	CloseTransientFile(fd);

	memcpy(&hdr, buf, sizeof(hdr));
	if (n != (ssize_t) want)
		*problem = "it has the wrong size";
	else if (hdr.magic != STATE_MAGIC || hdr.version != STATE_VERSION || hdr.length != len)
		*problem = "it is not a snowflake state file of this version";
	else
	{
		memcpy(&crc, buf + want - sizeof(crc), sizeof(crc));
		if (!EQ_CRC32C(crc, state_crc(buf, want - sizeof(crc))))
			*problem = "its checksum does not match";
		else
		{
			memcpy(payload, buf + sizeof(hdr), len);
			return MARK_OK;
		}
	}
	return MARK_BROKEN;
}

/*
 * Make a state file durable.  Like pg_control, the record is smaller than a
 * disk sector and is overwritten in place: a sector write is atomic on the
 * devices PostgreSQL supports, and the CRC catches the rest.  That costs
 * one fdatasync, where a write to a new file and a rename cost four.
 * Reports failures at elevel: ERROR in backends, so that nothing beyond a
 * state that is not on disk is handed out; LOG in the postmaster.  Returns
 * false on failure below ERROR.
 */
bool
persist_write_file(const char *path, const void *payload, size_t len, int elevel)
{
	char		buf[sizeof(StateHeader) + MAX_PAYLOAD + sizeof(pg_crc32c)];
	size_t		total = sizeof(StateHeader) + len + sizeof(pg_crc32c);
	StateHeader hdr;
	pg_crc32c	crc;
	struct stat st;
	bool		created;
	int			fd;

	StaticAssertStmt(sizeof(buf) <= 512, "a state record must fit one sector");
	Assert(len <= MAX_PAYLOAD);
	memset(buf, 0, sizeof(buf));
	hdr.magic = STATE_MAGIC;
	hdr.version = STATE_VERSION;
	hdr.length = (uint32) len;
	memcpy(buf, &hdr, sizeof(hdr));
	memcpy(buf + sizeof(hdr), payload, len);
	crc = state_crc(buf, total - sizeof(crc));
	memcpy(buf + total - sizeof(crc), &crc, sizeof(crc));

	created = stat(path, &st) != 0;
	fd = OpenTransientFile(path, O_RDWR | O_CREAT | PG_BINARY);
	if (fd < 0)
	{
		ereport(elevel,
				(errcode_for_file_access(),
				 errmsg("could not open file \"%s\": %m", path)));
		return false;
	}
	errno = 0;
	if (pg_pwrite(fd, buf, total, 0) != (ssize_t) total)
	{
		int			save_errno = errno ? errno : ENOSPC;

		CloseTransientFile(fd);
		errno = save_errno;
		ereport(elevel,
				(errcode_for_file_access(),
				 errmsg("could not write file \"%s\": %m", path)));
		return false;
	}
	if (pg_fdatasync(fd) != 0)
	{
		int			save_errno = errno;

		CloseTransientFile(fd);
		errno = save_errno;
		/*
		 * No PANIC needed: the reservation is not advanced, and the next
		 * attempt rewrites the whole record before it syncs again.
		 */
		ereport(elevel,
				(errcode_for_file_access(),
				 errmsg("could not fsync file \"%s\": %m", path)));
		return false;
	}
	CloseTransientFile(fd);

	/* a new file's directory entry must be durable too */
	if (created && fsync_fname_ext(".", true, false, elevel) != 0)
		return false;
	return true;
}

MarkResult
persist_read(PersistedMark *mark, const char **problem)
{
	return persist_read_file(SNOWFLAKE_MARK_FILE, mark, sizeof(*mark), problem);
}

void
persist_write(const PersistedMark *mark, int elevel)
{
	PersistedMark m;

	/* no stray bytes in the file */
	memset(&m, 0, sizeof(m));
	m.mark_id = mark->mark_id;
	m.seen_unix_ms = mark->seen_unix_ms;
	strlcpy(m.layout, mark->layout, sizeof(m.layout));
	(void) persist_write_file(SNOWFLAKE_MARK_FILE, &m, sizeof(m), elevel);
}
