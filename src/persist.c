/*-------------------------------------------------------------------------
 *
 * persist.c
 *	  Small durable state files in the data directory: the high-water mark
 *	  ($PGDATA/snowflake.state) and DecimalId's generator id.  This file
 *	  knows nothing of what the records mean.
 *
 * A file is two slots of one sector each.  A slot holds a record with a
 * write counter and a CRC; writes alternate between the slots, and a
 * reader takes the valid slot with the higher counter.  A write torn by a
 * crash therefore damages only the slot being written, and the other still
 * holds the record before it, which is all a caller relied on until the
 * write returned.  The file is created whole (both slots, written to a
 * temporary file and renamed into place), so a later write never needs a
 * new disk block and cannot fail for a full disk, and a file that exists
 * always held a good record once: an empty or unreadable one is damage,
 * not a first start.
 *
 * A file that cannot be written in place (its mode or owner changed, say)
 * is written anew beside it and renamed over it, as PostgreSQL does with
 * postgresql.auto.conf: only a data directory in which the server can
 * create no file makes a write fail.
 *
 * The files themselves are not WAL-logged (the reservations are, by
 * wal.c); a record written by an earlier version may be shorter than
 * today's, and its missing fields read as 0.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "port/pg_crc32c.h"
#include "storage/fd.h"

#include "messages.h"
#include "persist.h"

#define STATE_MAGIC		0x534E4F57	/* "SNOW" */
#define SLOT_SIZE		512
#define MAX_PAYLOAD		480

/* version 1 (snowflake 1.0): one record, no counter, read for upgrades */
typedef struct HeaderV1
{
	uint32		magic;
	uint32		version;
	uint32		length;
} HeaderV1;

/* version 2: a slot is this header, the payload, then a CRC of both */
typedef struct SlotHeader
{
	uint32		magic;
	uint32		version;
	uint32		length;
	uint32		reserved;
	uint64		writes;
} SlotHeader;

static pg_crc32c
state_crc(const char *buf, size_t len)
{
	pg_crc32c	crc;

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, buf, len);
	FIN_CRC32C(crc);
	return crc;
}

static bool
crc_ok(const char *buf, size_t len)
{
	pg_crc32c	crc;

	memcpy(&crc, buf + len, sizeof(crc));
	return EQ_CRC32C(crc, state_crc(buf, len));
}

/*
 * Is one slot a good version-2 record of at most len bytes?  Sets *writes
 * and *got, its length: a record written by an earlier version may be
 * shorter, and its missing fields read as 0.
 */
static bool
slot_ok(const char *slot, size_t len, uint64 *writes, size_t *got)
{
	SlotHeader	h;

	memcpy(&h, slot, sizeof(h));
	if (h.magic != STATE_MAGIC || h.version != 2 || h.length == 0 ||
		h.length > len || !crc_ok(slot, sizeof(h) + h.length))
		return false;
	*writes = h.writes;
	*got = h.length;
	return true;
}

/*
 * Read a state file into payload (len bytes).  Returns MARK_ABSENT when
 * there is no file, MARK_UNREADABLE when it cannot be opened or read (its
 * mode or owner, say: nothing is known of its contents), MARK_BROKEN when
 * no record in it can be trusted (with *fault saying why, for
 * persist_fault()), MARK_OK otherwise, with *writes the record's counter
 * (0 for a version-1 file, which the next write replaces).  Never raises
 * an error: the postmaster calls it.
 */
MarkResult
persist_read_file(const char *path, void *payload, size_t len,
				  uint64 *writes, PersistFault *fault)
{
	char		buf[2 * SLOT_SIZE + 1];
	int			fd;
	ssize_t		n;
	HeaderV1	v1;
	uint64		w[2] = {0, 0};
	bool		ok[2];
	size_t		got[2] = {0, 0};
	int			best;

	Assert(len <= MAX_PAYLOAD);
	fault->kind = FAULT_NONE;
	fault->err = 0;
	fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
	if (fd < 0)
	{
		if (errno == ENOENT)
			return MARK_ABSENT;
		fault->kind = FAULT_OPEN;
		fault->err = errno;
		return MARK_UNREADABLE;
	}
	n = read(fd, buf, sizeof(buf));
	fault->err = errno;
	CloseTransientFile(fd);
	if (n < 0)
	{
		fault->kind = FAULT_READ;
		return MARK_UNREADABLE;
	}

	/* a version-1 record may be shorter: later fields read as 0 */
	memset(&v1, 0, sizeof(v1));
	memcpy(&v1, buf, Min((size_t) n, sizeof(v1)));
	if (v1.magic == STATE_MAGIC && v1.version == 1 && v1.length <= len &&
		n == (ssize_t) (sizeof(v1) + v1.length + sizeof(pg_crc32c)))
	{
		if (!crc_ok(buf, sizeof(v1) + v1.length))
		{
			fault->kind = FAULT_CHECKSUM;
			return MARK_BROKEN;
		}
		memset(payload, 0, len);
		memcpy(payload, buf + sizeof(v1), v1.length);
		*writes = 0;
		return MARK_OK;
	}

	if (n != 2 * SLOT_SIZE)
	{
		fault->kind = n == 0 ? FAULT_EMPTY : FAULT_SIZE;
		return MARK_BROKEN;
	}
	ok[0] = slot_ok(buf, len, &w[0], &got[0]);
	ok[1] = slot_ok(buf + SLOT_SIZE, len, &w[1], &got[1]);
	if (!ok[0] && !ok[1])
	{
		fault->kind = FAULT_RECORDS;
		return MARK_BROKEN;
	}
	best = (!ok[0] || (ok[1] && w[1] > w[0])) ? 1 : 0;
	memset(payload, 0, len);
	memcpy(payload, buf + best * SLOT_SIZE + sizeof(SlotHeader), got[best]);
	*writes = w[best];
	return MARK_OK;
}

/*
 * The words of what a read found wrong with the file at path, inside the
 * caller's ereport (whose hint says what it means there), with errno set
 * to fault->err before it, for %m.
 */
int
persist_fault(const char *path, const PersistFault *fault)
{
	switch (fault->kind)
	{
		case FAULT_OPEN:
			errcode_for_file_access();
			errmsg("could not open file \"%s\": %m", path);
			break;
		case FAULT_READ:
			errcode_for_file_access();
			errmsg("could not read file \"%s\": %m", path);
			break;
		case FAULT_EMPTY:
		case FAULT_SIZE:
		case FAULT_CHECKSUM:
		case FAULT_RECORDS:
			errcode(ERRCODE_DATA_CORRUPTED);
			errmsg("file \"%s\" is damaged", path);
			if (fault->kind == FAULT_EMPTY)
				errdetail("It is empty.");
			else if (fault->kind == FAULT_SIZE)
				errdetail("It has the wrong size.");
			else if (fault->kind == FAULT_CHECKSUM)
				errdetail("Its checksum does not match its record.");
			else
				errdetail("Neither of its two records is intact.");
			break;
		case FAULT_NONE:
			break;
	}
	return 0;
}

static void
fill_slot(char *slot, const void *payload, size_t len, uint64 writes)
{
	SlotHeader	h;
	pg_crc32c	crc;

	memset(slot, 0, SLOT_SIZE);
	memset(&h, 0, sizeof(h));
	h.magic = STATE_MAGIC;
	h.version = 2;
	h.length = (uint32) len;
	h.writes = writes;
	memcpy(slot, &h, sizeof(h));
	memcpy(slot + sizeof(h), payload, len);
	crc = state_crc(slot, sizeof(h) + len);
	memcpy(slot + sizeof(h) + len, &crc, sizeof(crc));
}

/* The directory that holds path, in dir. */
static const char *
parent_dir(const char *path, char *dir)
{
	const char *slash = strrchr(path, '/');

	if (slash == NULL)
		return ".";
	strlcpy(dir, path, Min((size_t) (slash - path) + 1, MAXPGPATH));
	return dir[0] ? dir : "/";
}

/* Write the whole file anew: both slots, a temporary file, a rename. */
static bool
create_file(const char *path, const void *payload, size_t len, int elevel)
{
	char		buf[2 * SLOT_SIZE];
	char		tmp[MAXPGPATH];
	char		dir[MAXPGPATH];
	int			fd;

	/* the record with counter c always lives in slot c % 2 */
	fill_slot(buf, payload, len, 0);
	fill_slot(buf + SLOT_SIZE, payload, len, 1);
	snprintf(tmp, sizeof(tmp), "%s.new", path);

	fd = OpenTransientFile(tmp, O_RDWR | O_CREAT | O_TRUNC | PG_BINARY);
	if (fd < 0)
	{
		ereport(elevel,
				(errcode_for_file_access(),
				 errmsg("could not create file \"%s\": %m", tmp)));
		return false;
	}
	errno = 0;
	if (write(fd, buf, sizeof(buf)) != (ssize_t) sizeof(buf) || pg_fsync(fd) != 0)
	{
		int			save_errno = errno ? errno : ENOSPC;

		CloseTransientFile(fd);
		unlink(tmp);
		errno = save_errno;
		ereport(elevel,
				(errcode_for_file_access(),
				 errmsg("could not write file \"%s\": %m", tmp)));
		return false;
	}
	CloseTransientFile(fd);

	/*
	 * rename() then an fsync of the directory: durable_rename() would open
	 * the old file for writing first, which is what a file the server may
	 * not write refuses.  Its contents were synced when they were written.
	 */
	if (rename(tmp, path) != 0)
	{
		int			save_errno = errno;

		unlink(tmp);
		errno = save_errno;
		ereport(elevel,
				(errcode_for_file_access(),
				 errmsg("could not rename file \"%s\" to \"%s\": %m", tmp, path)));
		return false;
	}
	return fsync_fname_ext(parent_dir(path, dir), true, false, elevel) == 0;
}

/* A step of a write in place, for its message. */
typedef enum WriteStep
{
	STEP_OPEN,
	STEP_WRITE,
	STEP_FSYNC
} WriteStep;

static int
step_message(const char *path, WriteStep step)
{
	switch (step)
	{
		case STEP_OPEN:
			return errmsg("could not open file \"%s\": %m", path);
		case STEP_WRITE:
			return errmsg("could not write file \"%s\": %m", path);
		case STEP_FSYNC:
			return errmsg("could not fsync file \"%s\": %m", path);
	}
	return 0;
}

/*
 * Write the record into its slot of the existing file; false, having said
 * which step failed (in the log: the file is then written anew), if that
 * cannot be done.
 */
static bool
write_in_place(const char *path, const char *slot, uint64 next)
{
	int			fd;
	int			save_errno;
	WriteStep	step;

	fd = OpenTransientFile(path, O_RDWR | PG_BINARY);
	if (fd < 0)
	{
		save_errno = errno;
		step = STEP_OPEN;
	}
	else
	{
		errno = 0;
		if (pg_pwrite(fd, slot, SLOT_SIZE, (off_t) (next % 2) * SLOT_SIZE) != SLOT_SIZE)
		{
			save_errno = errno ? errno : ENOSPC;
			step = STEP_WRITE;
		}
		else if (pg_fdatasync(fd) != 0)
		{
			/*
			 * No PANIC needed: the caller does not rely on this record, and
			 * the file written anew instead is synced whole before it
			 * replaces this one.
			 */
			save_errno = errno;
			step = STEP_FSYNC;
		}
		else
		{
			CloseTransientFile(fd);
			return true;
		}
		CloseTransientFile(fd);
	}
	errno = save_errno;
	ereport(LOG,
			(errcode_for_file_access(),
			 step_message(path, step),
			 errdetail("The file is written anew beside it and renamed over it.")));
	return false;
}

/*
 * Make a record durable.  *writes is the counter of the newest record on
 * disk (0: there is no file of this version yet); on success it becomes
 * the counter of the record written.  The record goes into the slot that
 * does not hold the newest one, and only a successful write moves on to
 * the other slot, so a failed or torn write never touches the last good
 * record.  A file that cannot be written in place is written anew and
 * renamed over it, which leaves the old one whole until the rename.
 * Reports failures at elevel and returns false below ERROR.
 */
bool
persist_write_file(const char *path, const void *payload, size_t len,
				   uint64 *writes, int elevel)
{
	char		slot[SLOT_SIZE];
	uint64		next = *writes + 1;

	StaticAssertStmt(sizeof(SlotHeader) + MAX_PAYLOAD + sizeof(pg_crc32c) <= SLOT_SIZE,
					 "a state record must fit one sector");
	Assert(len <= MAX_PAYLOAD);

	if (*writes > 0)
	{
		fill_slot(slot, payload, len, next);
		if (write_in_place(path, slot, next))
		{
			*writes = next;
			return true;
		}
	}
	if (!create_file(path, payload, len, elevel))
		return false;
	*writes = 1;
	return true;
}
