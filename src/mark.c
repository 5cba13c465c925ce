/*-------------------------------------------------------------------------
 *
 * mark.c
 *	  The node's generator state in shared memory and the durable
 *	  high-water mark that bounds it: loading and validating the mark at
 *	  server start, the floor after recovery, the reservations that bound
 *	  the IDs a node may issue, the worker id in force, the operator's
 *	  repair, and the exact record at shutdown.
 *
 * No ID above the reservation is issued.  A reservation reaches a window
 * of ID time ahead of the IDs being issued (never of the clock alone), and
 * only the keeper makes one: it writes it to the state file (persist.c)
 * and to WAL before any backend may use it.  Backends ask for one when
 * they come near the end of the current one, and wait for it
 * (interruptibly, and for a bounded time) only when they reach that end.
 *
 * In WAL the reservation is the progress of the replication origin
 * "snowflake_high_water_mark", which PostgreSQL itself replays on standbys,
 * keeps across their restarts (it is part of every checkpoint and
 * restartpoint) and restores from backups.  A promoted standby, a restored
 * backup or a node whose state file is gone therefore continues above the
 * last reservation of the server whose WAL it replayed: every ID of that
 * server that reached it was issued under a reservation logged before the
 * commit that carried it.  No WAL record of the extension's own is needed,
 * so a server without the library still replays and starts.  The keeper
 * looks the origin up by name, under the lock that keeps it from being
 * dropped meanwhile, every time it logs a reservation.
 *
 * Nothing computed under layout or settings that cannot be trusted is
 * written: such a node neither loads nor writes the file.
 *
 * This file uses layouts, settings and persist.c; generator.c, the keeper
 * and the SQL functions use it, never the other way round.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "access/twophase.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlogrecovery.h"
#include "catalog/pg_control.h"
#include "catalog/pg_replication_origin.h"
#include "common/controldata_utils.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/shmem.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "clock.h"
#include "compat.h"
#include "persist.h"
#include "settings.h"
#include "state.h"

#define ORIGIN_NAME		"snowflake_high_water_mark"

/* how long a backend waits for the keeper's reservation before refusing */
#define KEEPER_WAIT_MS	5000

GeneratorShared *snowflake_shared = NULL;

/* this start recovers: a crash, a standby, a restore; set at shmem init */
static bool recovering = false;

/* the checkpoint recovery started from, in Unix ms; 0 if none */
static int64 checkpoint_floor_ms = 0;

/* the state file was absent at start */
static bool file_absent = false;

static uint32 wait_event_reserve = 0;

static void mark_shutdown(int code, Datum arg);

static int
slot_count(void)
{
	return MaxBackends + NUM_AUXILIARY_PROCS + max_prepared_xacts;
}

Size
mark_shmem_size(void)
{
	return add_size(offsetof(GeneratorShared, slots),
					mul_size(slot_count(), sizeof(CounterSlot)));
}

/* How far ahead of the last ID a reservation reaches: a second of ID time. */
static int64
window_ticks(const SnowflakeLayout *l)
{
	return Max(1, SNOWFLAKE_WINDOW_MS / l->tick_ms);
}

/* The largest ID of a tick, the end of the layout if it is beyond it. */
static int64
tick_ceiling(const SnowflakeLayout *l, int64 tick)
{
	return layout_compose(l, Max(0, Min(tick, layout_max_tick(l))),
						  layout_max_worker(l), layout_max_seq(l));
}

static void
set_broken(const char *problem)
{
	snowflake_shared->state_broken = true;
	strlcpy(snowflake_shared->state_problem, problem,
			sizeof(snowflake_shared->state_problem));
}

/* Make mark_id durable in the state file.  Called with the lock held. */
static bool
write_mark(const SnowflakeLayout *l, int64 mark_id, int elevel)
{
	PersistedMark m;

	Assert(snowflake_shared->usable);
	memset(&m, 0, sizeof(m));
	m.mark_id = mark_id;
	m.seen_unix_ms = layout_tick_to_unix_ms(l, (int64) pg_atomic_read_u64(&snowflake_shared->seen_tick));
	strlcpy(m.layout, l->name, sizeof(m.layout));
	if (!snowflake_shared->floor_done)
		m.flags |= MARK_FLOOR_PENDING;
	return persist_write_file(SNOWFLAKE_MARK_FILE, &m, sizeof(m),
							  &snowflake_shared->writes, elevel);
}

/*
 * Set the state from the mark the file holds, at server start.  Every value
 * is checked against the layout in force before it is used.
 */
static void
load_mark(const SnowflakeLayout *l)
{
	PersistedMark m;
	const char *problem = NULL;
	static char buf[128];

	switch (persist_read_file(SNOWFLAKE_MARK_FILE, &m, sizeof(m),
							  &snowflake_shared->writes, &problem))
	{
		case MARK_ABSENT:
			file_absent = true;
			return;
		case MARK_BROKEN:
			set_broken(problem);
			return;
		case MARK_OK:
			break;
	}

	if (memchr(m.layout, '\0', sizeof(m.layout)) == NULL || m.layout[0] == '\0' ||
		m.mark_id <= 0 || m.seen_unix_ms < 0 || m.seen_unix_ms > LAYOUT_MAX_UNIX_MS)
	{
		set_broken("it holds values no snowflake layout can have made");
		return;
	}
	if (m.flags & MARK_FLOOR_PENDING)
		recovering = true;
	if (strcmp(m.layout, l->name) != 0)
		strlcpy(snowflake_shared->prev_layout, m.layout, NAMEDATALEN);
	if (m.mark_id >= layout_max_id(l))
	{
		/* no ID of this layout is greater than the mark */
		snprintf(buf, sizeof(buf),
				 "its mark " INT64_FORMAT " (layout \"%s\") is at or beyond the largest ID of layout \"%s\"",
				 m.mark_id, m.layout, l->name);
		set_broken(buf);
		return;
	}

	pg_atomic_write_u64(&snowflake_shared->last_id, (uint64) m.mark_id);
	pg_atomic_write_u64(&snowflake_shared->reserved, (uint64) m.mark_id);
	pg_atomic_write_u64(&snowflake_shared->extend_at, (uint64) m.mark_id);
	pg_atomic_write_u64(&snowflake_shared->seen_tick,
						(uint64) Max(0, layout_unix_ms_to_tick(l, m.seen_unix_ms)));
	if (snowflake_shared->prev_layout[0] != '\0')
		ereport(LOG,
				(errmsg("snowflake layout changed from \"%s\" to \"%s\"; new IDs continue above " INT64_FORMAT,
						m.layout, l->name, m.mark_id)));
}

/*
 * The time of the last checkpoint, in Unix ms (0 if unknown).  Every commit
 * before its redo point happened before it, on the clock of the server
 * that made it.
 */
static int64
checkpoint_time_ms(bool *shut_down_cleanly)
{
	bool		crc_ok = false;
	ControlFileData *cf = get_controlfile(DataDir, &crc_ok);
	int64		ms = 0;

	*shut_down_cleanly = crc_ok && cf->state == DB_SHUTDOWNED;
	if (crc_ok && cf->checkPointCopy.time > 0)
		ms = ((int64) cf->checkPointCopy.time + 1) * 1000;
	pfree(cf);
	return ms;
}

/* Called by the postmaster with AddinShmemInitLock held. */
void
mark_shmem_init(void)
{
	const SnowflakeLayout *l = snowflake_layout;
	GeneratorShared *s;
	bool		found;
	bool		clean;

	s = ShmemInitStruct("snowflake generator", mark_shmem_size(), &found);
	snowflake_shared = s;
	if (found)
		return;

	pg_atomic_init_u64(&s->last_id, 0);
	pg_atomic_init_u64(&s->seen_tick, 0);
	pg_atomic_init_u64(&s->extend_at, 0);
	pg_atomic_init_u64(&s->reserved, 0);
	pg_atomic_init_u32(&s->worker, (uint32) snowflake_worker_id);
	pg_atomic_init_u64(&s->requested, 0);
	s->lock = &(GetNamedLWLockTranche("snowflake"))->lock;
	ConditionVariableInit(&s->renewed);
	s->keeper_latch = NULL;
	s->origin = COMPAT_INVALID_ORIGIN;
	s->origin_problem[0] = '\0';
	s->keeper_problem[0] = '\0';
	s->usable = settings_problem() == NULL;
	s->floor_done = false;
	s->state_broken = false;
	s->state_problem[0] = '\0';
	s->prev_layout[0] = '\0';
	s->writes = 0;
	pg_atomic_init_u64(&s->back_counted_tick, 0);
	pg_atomic_init_u64(&s->clock_back_events, 0);
	pg_atomic_init_u64(&s->clock_back_max_ms, 0);
	s->started = GetCurrentTimestamp();
	s->nslots = slot_count();
	for (int i = 0; i < s->nslots; i++)
	{
		pg_atomic_init_u64(&s->slots[i].c.issued, 0);
		pg_atomic_init_u64(&s->slots[i].c.waits, 0);
		pg_atomic_init_u64(&s->slots[i].c.run_ahead_ids, 0);
		pg_atomic_init_u64(&s->slots[i].c.refused, 0);
	}

	if (!s->usable)
	{
		ereport(WARNING,
				(errmsg("snowflake cannot generate IDs: %s", settings_problem()),
				 errdetail("Every snowflake generator of this server refuses until the configuration is fixed and the server restarted; \"%s\" is left as it is.",
						   SNOWFLAKE_MARK_FILE)));
		pg_atomic_write_u32(&s->worker, (uint32) WORKER_ID_UNSET);
	}
	else
	{
		checkpoint_floor_ms = checkpoint_time_ms(&clean);
		recovering = !clean || access("standby.signal", F_OK) == 0 ||
			access("recovery.signal", F_OK) == 0 ||
			access("backup_label", F_OK) == 0;
		load_mark(l);

		/*
		 * Until the keeper has raised the state to what recovery finds, a
		 * restart must do it again, even after a clean shutdown: the
		 * evidence of recovery (signal files, pg_control's state) is gone
		 * by then.
		 */
		if (!s->state_broken && (recovering || file_absent))
			(void) write_mark(l, Max(1, (int64) pg_atomic_read_u64(&s->last_id)), LOG);
		if (s->state_broken)
			ereport(WARNING,
					(errmsg("snowflake state file \"%s\" cannot be used: %s",
							SNOWFLAKE_MARK_FILE, s->state_problem),
					 errdetail("The generator refuses to issue IDs until it is repaired with snowflake_repair_state().")));
		else if (snowflake_worker_id == WORKER_ID_UNSET)
			ereport(WARNING,
					(errmsg("snowflake.worker_id is not set: this server generates no snowflake IDs"),
					 errhint("Give every node a worker id of its own in postgresql.conf and reload.")));
		else
			ereport(LOG,
					(errmsg("snowflake: worker id %d, layout \"%s\", IDs continue above " INT64_FORMAT "%s",
							snowflake_worker_id, l->name,
							(int64) pg_atomic_read_u64(&s->last_id),
							recovering || file_absent ? " and above what recovery finds" : "")));
	}
	s->resumed_from = (int64) pg_atomic_read_u64(&s->last_id);

	if (!IsUnderPostmaster)
		on_shmem_exit(mark_shutdown, (Datum) 0);
}

/*
 * The replication origin that carries reservations in WAL, made if create
 * and it does not exist.  Called in a transaction, with
 * pg_replication_origin locked so that the origin cannot be dropped before
 * the caller is done with it.
 */
static compat_origin_id
lookup_origin(bool create)
{
	compat_origin_id origin = replorigin_by_name(ORIGIN_NAME, true);

	if (origin == COMPAT_INVALID_ORIGIN && create)
		origin = replorigin_create(ORIGIN_NAME);
	snowflake_shared->origin = origin;
	return origin;
}

/* The reservation last logged in WAL, by this node or the one it follows. */
static int64
origin_mark(bool create)
{
	compat_origin_id origin;
	int64		mark = 0;

	LockRelationOid(ReplicationOriginRelationId, RowExclusiveLock);
	origin = lookup_origin(create);
	if (origin != COMPAT_INVALID_ORIGIN)
		mark = (int64) replorigin_get_progress(origin, false);
	return mark;
}

/*
 * Raise the state to what bounds the IDs this node, or the server whose WAL
 * it replayed, may have issued: the reservation logged in WAL, and the
 * last replayed commit and the last checkpoint (each plus the run-ahead
 * allowed).  The commit and checkpoint times cover what WAL of an older
 * version of this extension does not.  Returns true if the state moved.
 * Called with the lock held.
 */
static bool
apply_floor(const SnowflakeLayout *l, int64 checkpoint_ms, int64 wal_mark,
			bool recovered)
{
	TimestampTz latest;
	int64		floor_ms = checkpoint_ms;
	int64		floor_id;
	static char buf[128];

	/*
	 * After a clean shutdown the state file holds the exact last ID, below
	 * the last reservation: nothing to raise.
	 */
	if (!recovered)
		return false;

	floor_id = wal_mark;
	latest = GetLatestXTime();
	if (latest != 0)
		floor_ms = Max(floor_ms, latest / 1000 + PG_EPOCH_UNIX_MS + 1);
	if (floor_ms > 0)
	{
		if (snowflake_max_run_ahead_ms > 0)
			floor_ms += snowflake_max_run_ahead_ms;
		floor_id = Max(floor_id, tick_ceiling(l, layout_unix_ms_to_tick(l, floor_ms)));
	}
	if (floor_id >= layout_max_id(l))
	{
		snprintf(buf, sizeof(buf),
				 "the reservation " INT64_FORMAT " logged in WAL is at or beyond the largest ID of layout \"%s\"",
				 floor_id, l->name);
		set_broken(buf);
		return false;
	}
	if ((uint64) floor_id <= pg_atomic_read_u64(&snowflake_shared->last_id))
		return false;
	atomic_raise(&snowflake_shared->last_id, (uint64) floor_id);
	snowflake_shared->resumed_from = Max(snowflake_shared->resumed_from, floor_id);
	return true;
}

static void
refuse_broken(void)
{
	if (snowflake_shared->prev_layout[0] != '\0' &&
		strstr(snowflake_shared->state_problem, "beyond the largest ID") != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("snowflake layout \"%s\" cannot continue above the IDs issued under layout \"%s\"",
						snowflake_layout->name, snowflake_shared->prev_layout),
				 errdetail("The state file \"%s\" says: %s.", SNOWFLAKE_MARK_FILE,
						   snowflake_shared->state_problem),
				 errhint("Go back to snowflake.layout = '%s', or choose a layout with room above that ID.",
						 snowflake_shared->prev_layout)));
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("snowflake state file \"%s\" cannot be used: %s",
					SNOWFLAKE_MARK_FILE, snowflake_shared->state_problem),
			 errdetail("The file holds the highest ID this node may have issued; without it a restart with the clock set back could repeat IDs."),
			 errhint("As a superuser, run SELECT snowflake_repair_state(above => ...) with the largest ID your tables hold; IDs then continue above it, the reservation logged in WAL, the last checkpoint and the last replayed commit.")));
}

static void
refuse_no_origin(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("snowflake cannot log its reservations in WAL: %s",
					snowflake_shared->origin_problem),
			 errdetail("Standbys and restores learn from WAL which IDs this node may have issued."),
			 errhint("Set " COMPAT_MAX_ORIGINS_NAME " to 1 or more (every standby too) and restart the server.")));
}

/*
 * Make sure a reservation covering id exists.  The keeper makes it: with
 * must, the caller has no room left and waits for it, interruptibly, and
 * refuses if it does not come; otherwise the caller only asks and goes on
 * with the room it has.
 */
ReserveResult
mark_reserve(const SnowflakeLayout *l, int64 id, bool must)
{
	uint32		we;
	int64		deadline;

	atomic_raise(&snowflake_shared->requested, (uint64) id);
	if (snowflake_shared->keeper_latch)
		SetLatch(snowflake_shared->keeper_latch);
	if (!must)
		return RESERVE_SKIPPED;

	we = compat_wait_event("SnowflakeReservation", &wait_event_reserve);
	deadline = clock_monotonic_us() + KEEPER_WAIT_MS * INT64CONST(1000);
	for (;;)
	{
		if (snowflake_shared->state_broken)
		{
			ConditionVariableCancelSleep();
			refuse_broken();
		}
		if (snowflake_shared->origin_problem[0] != '\0')
		{
			ConditionVariableCancelSleep();
			refuse_no_origin();
		}
		if (snowflake_shared->floor_done &&
			(uint64) id <= pg_atomic_read_u64(&snowflake_shared->reserved))
			break;
		if (clock_monotonic_us() > deadline)
		{
			ConditionVariableCancelSleep();
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("snowflake reservation was not renewed within %d ms", KEEPER_WAIT_MS),
					 snowflake_shared->keeper_problem[0] ?
					 errdetail("The background worker \"snowflake keeper\" could not make it durable: %s",
							   snowflake_shared->keeper_problem) :
					 errdetail("The background worker \"snowflake keeper\" makes every reservation durable, in \"%s\" and in WAL, before IDs may use it.",
							   SNOWFLAKE_MARK_FILE),
					 errhint("Check that it runs (pg_stat_activity, backend_type 'snowflake keeper'), and the server log for why it cannot write \"%s\" or log in WAL.",
							 SNOWFLAKE_MARK_FILE)));
		}
		if (snowflake_shared->keeper_latch)
			SetLatch(snowflake_shared->keeper_latch);
		(void) ConditionVariableTimedSleep(&snowflake_shared->renewed, 10, we);
	}
	ConditionVariableCancelSleep();
	/* the floor may have moved the state: the caller computes again */
	return RESERVE_MOVED;
}

/*
 * The keeper's start, once recovery has ended: find (or make) the origin,
 * then raise the state to the floor and make it durable, before any
 * backend may have a reservation.
 */
void
mark_keeper_start(void)
{
	const SnowflakeLayout *l = snowflake_layout;
	int64		wal_mark = 0;

	if (snowflake_shared == NULL || !snowflake_shared->usable)
		return;
	snowflake_shared->keeper_latch = MyLatch;

	if (compat_max_origins() < 1)
		snprintf(snowflake_shared->origin_problem, sizeof(snowflake_shared->origin_problem),
				 "%s = 0", COMPAT_MAX_ORIGINS_NAME);
	else
	{
		StartTransactionCommand();
		wal_mark = origin_mark(true);
		CommitTransactionCommand();
	}

	LWLockAcquire(snowflake_shared->lock, LW_EXCLUSIVE);
	if (!snowflake_shared->floor_done && !snowflake_shared->state_broken &&
		snowflake_shared->origin_problem[0] == '\0')
	{
		(void) apply_floor(l, checkpoint_floor_ms, wal_mark, recovering || file_absent);
		snowflake_shared->floor_done = true;
		/* durable, and no longer pending, before anything is issued above */
		if (!snowflake_shared->state_broken)
		{
			int64		mark = Max(1, (int64) pg_atomic_read_u64(&snowflake_shared->last_id));

			if ((recovering || file_absent) && write_mark(l, mark, WARNING))
			{
				pg_atomic_write_u64(&snowflake_shared->reserved, (uint64) mark);
				pg_atomic_write_u64(&snowflake_shared->extend_at, (uint64) mark);
			}
		}
	}
	LWLockRelease(snowflake_shared->lock);
	ConditionVariableBroadcast(&snowflake_shared->renewed);
}

/*
 * Log a reservation in WAL, flushed, before any ID may use it.  A failure
 * (no free origin state slot, say) is logged and kept for the backends
 * that wait; the keeper goes on and tries again.
 */
static bool
log_reservation(int64 mark)
{
	MemoryContext cxt = CurrentMemoryContext;
	volatile bool ok = true;

	PG_TRY();
	{
		compat_origin_id origin;

		StartTransactionCommand();
		/* as pg_replication_origin_advance(): the origin must not vanish */
		LockRelationOid(ReplicationOriginRelationId, RowExclusiveLock);
		origin = lookup_origin(true);
		replorigin_advance(origin, (XLogRecPtr) mark, InvalidXLogRecPtr,
						   false, true);
		XLogFlush(GetXLogInsertRecPtr());
		CommitTransactionCommand();
		snowflake_shared->keeper_problem[0] = '\0';
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();
		strlcpy(snowflake_shared->keeper_problem, edata->message,
				sizeof(snowflake_shared->keeper_problem));
		ereport(WARNING,
				(errmsg("snowflake could not log a reservation in WAL: %s", edata->message)));
		FreeErrorData(edata);
		ok = false;
	}
	PG_END_TRY();
	return ok;
}

/*
 * Called by the keeper every tenth of a window and whenever a backend asks:
 * keep the durable reservation at least half a window ahead of the IDs
 * being issued and asked for.  The reservation follows the IDs, not the
 * clock: an idle node reserves nothing.
 */
void
mark_keep_ahead(void)
{
	const SnowflakeLayout *l = snowflake_layout;
	int64		target;
	int64		w = window_ticks(l);
	int64		tick;
	int64		mark;

	if (snowflake_shared == NULL || !snowflake_shared->usable ||
		snowflake_shared->state_broken || !snowflake_shared->floor_done ||
		snowflake_shared->origin_problem[0] != '\0')
		return;
	target = Max((int64) pg_atomic_read_u64(&snowflake_shared->last_id),
				 (int64) pg_atomic_read_u64(&snowflake_shared->requested));
	if (target <= snowflake_shared->resumed_from)
		return;					/* nothing issued or asked for since start */
	tick = layout_tick(l, target);
	if ((int64) pg_atomic_read_u64(&snowflake_shared->reserved) >= tick_ceiling(l, tick + w / 2))
		return;

	mark = tick_ceiling(l, tick + w);
	if (!log_reservation(mark))
		return;
	LWLockAcquire(snowflake_shared->lock, LW_EXCLUSIVE);
	/* a repair meanwhile may have moved the state above the mark */
	if (!snowflake_shared->state_broken &&
		mark > (int64) pg_atomic_read_u64(&snowflake_shared->last_id) &&
		mark > (int64) pg_atomic_read_u64(&snowflake_shared->reserved) &&
		write_mark(l, mark, WARNING))
	{
		/* only now may IDs up to the new mark be handed out */
		pg_atomic_write_u64(&snowflake_shared->reserved, (uint64) mark);
		pg_atomic_write_u64(&snowflake_shared->extend_at,
							(uint64) tick_ceiling(l, tick + w / 2));
	}
	LWLockRelease(snowflake_shared->lock);
	ConditionVariableBroadcast(&snowflake_shared->renewed);
}

/* The keeper is going away: backends must not wake a latch that is gone. */
void
mark_keeper_exit(void)
{
	if (snowflake_shared != NULL)
		snowflake_shared->keeper_latch = NULL;
}

/*
 * Make a worker id the node's, in one step that every backend sees at its
 * next ID.  Called by the postmaster when it reads its configuration.
 */
void
mark_publish_worker(int worker)
{
	if (snowflake_shared == NULL || !snowflake_shared->usable)
		return;
	pg_atomic_write_u32(&snowflake_shared->worker, (uint32) worker);
}

/*
 * The operator's way out of a damaged state file: continue above the
 * largest of the given ID, the reservation logged in WAL, the last
 * checkpoint, the last replayed commit and whatever the node still holds,
 * and write a new file.  Returns the ID that new IDs continue above.
 *
 * With lower, what the node holds is dropped first, so the state may go
 * down to the other bounds (the undoing of a forced repair); only while
 * no ID was issued since the server started or the last repair, and only
 * where the reservations are logged in WAL, which bounds every ID the
 * node ever issued.
 */
int64
mark_repair(int64 above, bool lower)
{
	const SnowflakeLayout *l = snowflake_layout;
	int64		last;
	bool		clean;
	int64		checkpoint_ms;
	int64		wal_mark;

	settings_require_usable();
	if (above < 0 || above >= layout_max_id(l))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("snowflake ID " INT64_FORMAT " is out of range for the \"%s\" layout",
						above, l->name),
				 errdetail("New IDs must be greater than it, and the largest ID of the layout is " INT64_FORMAT ".",
						   layout_max_id(l))));

	checkpoint_ms = checkpoint_time_ms(&clean);
	wal_mark = compat_max_origins() > 0 ? origin_mark(false) : 0;
	LWLockAcquire(snowflake_shared->lock, LW_EXCLUSIVE);
	if (snowflake_shared->state_broken && snowflake_shared->prev_layout[0] != '\0' &&
		strstr(snowflake_shared->state_problem, "beyond the largest ID") != NULL)
	{
		LWLockRelease(snowflake_shared->lock);
		refuse_broken();
	}
	if (lower)
	{
		uint64		held = (uint64) snowflake_shared->resumed_from;
		uint64		reserved = pg_atomic_read_u64(&snowflake_shared->reserved);
		uint64		extend_at = pg_atomic_read_u64(&snowflake_shared->extend_at);
		bool		lowered = false;

		/* a backend that read the old state must ask for a reservation */
		pg_atomic_write_u64(&snowflake_shared->extend_at, 0);
		pg_atomic_write_u64(&snowflake_shared->reserved, 0);
		if (wal_mark > 0)
			lowered = pg_atomic_compare_exchange_u64(&snowflake_shared->last_id,
													 &held, (uint64) above);
		if (!lowered)
		{
			pg_atomic_write_u64(&snowflake_shared->reserved, reserved);
			pg_atomic_write_u64(&snowflake_shared->extend_at, extend_at);
			LWLockRelease(snowflake_shared->lock);
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("snowflake state cannot be lowered to " INT64_FORMAT, above),
					 wal_mark == 0 ?
					 errdetail("No reservation of this node is logged in WAL, so nothing bounds the IDs it issued.") :
					 errdetail("The node issued IDs after it resumed at " INT64_FORMAT "; new IDs stay above them.",
							   snowflake_shared->resumed_from),
					 errhint("Repair to a value at or above the node's last ID, which snowflake_status shows.")));
		}
	}
	(void) apply_floor(l, checkpoint_ms, wal_mark, true);
	if (snowflake_shared->state_broken &&
		strstr(snowflake_shared->state_problem, "beyond the largest ID") != NULL)
	{
		LWLockRelease(snowflake_shared->lock);
		refuse_broken();
	}
	atomic_raise(&snowflake_shared->last_id, (uint64) above);
	last = (int64) pg_atomic_read_u64(&snowflake_shared->last_id);

	/*
	 * A new file, whole, whatever the old one holds.  It reserves nothing
	 * above the last ID: the keeper logs the next reservation first.
	 */
	snowflake_shared->writes = 0;
	(void) write_mark(l, Max(last, 1), ERROR);

	pg_atomic_write_u64(&snowflake_shared->reserved, (uint64) last);
	pg_atomic_write_u64(&snowflake_shared->extend_at, (uint64) last);
	snowflake_shared->resumed_from = last;
	snowflake_shared->floor_done = true;
	snowflake_shared->state_broken = false;
	snowflake_shared->state_problem[0] = '\0';
	LWLockRelease(snowflake_shared->lock);
	ConditionVariableBroadcast(&snowflake_shared->renewed);

	ereport(LOG,
			(errmsg("snowflake state file \"%s\" rewritten: new IDs continue above " INT64_FORMAT,
					SNOWFLAKE_MARK_FILE, last)));
	return last;
}

/*
 * At a clean shutdown, record the exact last ID (not the reservation), so
 * that a restart does not wait for the clock to pass the reservation.
 * Runs in the postmaster after every other process has exited.
 */
static void
mark_shutdown(int code, Datum arg)
{
	const SnowflakeLayout *l = snowflake_layout;
	int64		last;

	if (code != 0 || snowflake_shared == NULL || !snowflake_shared->usable ||
		snowflake_shared->state_broken || !snowflake_shared->floor_done)
		return;
	last = (int64) pg_atomic_read_u64(&snowflake_shared->last_id);
	if (last > snowflake_shared->resumed_from)
		(void) write_mark(l, last, LOG);
}
