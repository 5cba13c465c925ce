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
 * only the keeper makes one: it logs it in WAL (wal.c), then writes it to
 * the state file (persist.c), before any backend may use it.  Backends ask
 * for one when they come near the end of the current one, and wait for it
 * (interruptibly, and for a bounded time) only when they reach that end.
 *
 * Replaying a reservation (crash recovery, a standby, a restore) raises the
 * state to it and writes it to the state file at once, so a promoted
 * standby, a restored backup or a crashed node continues above the last
 * reservation of the server whose WAL it replayed: every ID of that server
 * that reached it was issued under a reservation logged before the commit
 * that carried it.  Floors come only from reservations, never from a clock
 * reading: a time the node never issued IDs at bounds nothing.  The one
 * other floor is the replication origin through which 1.1 logged its
 * reservations, read once, when recovery ends.
 *
 * Nothing computed under layout or settings that cannot be trusted is
 * written: such a node neither loads the file nor writes what it computes,
 * and keeps only the reservations it replays, as the records give them.
 *
 * This file uses layouts, settings, persist.c and wal.c; generator.c, the
 * keeper and the SQL functions use it, never the other way round.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "access/twophase.h"
#include "access/xlog.h"
#include "catalog/pg_control.h"
#include "common/controldata_utils.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"

#include "clock.h"
#include "compat.h"
#include "persist.h"
#include "settings.h"
#include "state.h"
#include "wal.h"

/* how long a backend waits for the keeper's reservation before refusing */
#define KEEPER_WAIT_MS	5000

GeneratorShared *snowflake_shared = NULL;

/* this start recovers: a crash, a standby, a restore; set at shmem init */
static bool recovering = false;

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

/*
 * Make mark_id durable in the state file.  Called with the lock held.  The
 * mark is recorded as the layout's in force, or as the old layout's while
 * the state is still that layout's (nothing issued in this one since the
 * change), so that a restart still knows it.
 */
static bool
write_mark(const SnowflakeLayout *l, int64 mark_id, int elevel)
{
	PersistedMark m;
	bool		old_layout = snowflake_shared->prev_layout[0] != '\0' &&
		(int64) pg_atomic_read_u64(&snowflake_shared->last_id) <= snowflake_shared->resumed_from;

	Assert(snowflake_shared->usable);
	memset(&m, 0, sizeof(m));
	m.mark_id = mark_id;
	m.seen_unix_ms = layout_tick_to_unix_ms(l, (int64) pg_atomic_read_u64(&snowflake_shared->seen_tick));
	strlcpy(m.layout, old_layout ? snowflake_shared->prev_layout : l->name, sizeof(m.layout));
	if (!snowflake_shared->floor_done)
		m.flags |= MARK_FLOOR_PENDING;
	if (snowflake_shared->legacy_state == LEGACY_GONE)
		m.flags |= MARK_LEGACY_GONE;
	m.undo_floor = snowflake_shared->undo_floor;
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
		case MARK_UNREADABLE:
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
	if (m.flags & MARK_LEGACY_GONE)
		snowflake_shared->legacy_state = LEGACY_GONE;
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
	if (m.undo_floor > 0 && m.undo_floor < m.mark_id)
		snowflake_shared->undo_floor = m.undo_floor;
	pg_atomic_write_u64(&snowflake_shared->reserved, (uint64) m.mark_id);
	pg_atomic_write_u64(&snowflake_shared->extend_at, (uint64) m.mark_id);
	pg_atomic_write_u64(&snowflake_shared->seen_tick,
						(uint64) Max(0, layout_unix_ms_to_tick(l, m.seen_unix_ms)));
	if (snowflake_shared->prev_layout[0] != '\0')
		ereport(LOG,
				(errmsg("snowflake layout changed from \"%s\" to \"%s\"; new IDs continue above " INT64_FORMAT,
						m.layout, l->name, m.mark_id)));
}

/* Called by the postmaster with AddinShmemInitLock held. */
void
mark_shmem_init(void)
{
	const SnowflakeLayout *l = snowflake_layout;
	GeneratorShared *s;
	bool		found;

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
	s->legacy_state = LEGACY_UNKNOWN;
	s->legacy_mark = 0;
	s->keeper_problem[0] = '\0';
	s->usable = settings_problem() == NULL;
	s->floor_done = false;
	s->state_broken = false;
	s->state_problem[0] = '\0';
	s->prev_layout[0] = '\0';
	s->writes = 0;
	s->undo_floor = 0;
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

	if (IsBinaryUpgrade)
	{
		/*
		 * pg_upgrade's servers issue no ID and must leave the state file as
		 * it is: neither read nor written, and every generator refuses.
		 */
		s->usable = false;
		pg_atomic_write_u32(&s->worker, (uint32) WORKER_ID_UNSET);
	}
	else if (!s->usable)
	{
		ereport(WARNING,
				(errmsg("snowflake cannot generate IDs: %s", settings_problem()),
				 errdetail("Every snowflake generator of this server refuses until the configuration is fixed and the server restarted; \"%s\" is left as it is.",
						   SNOWFLAKE_MARK_FILE)));
		pg_atomic_write_u32(&s->worker, (uint32) WORKER_ID_UNSET);
	}
	else
	{
		bool		crc_ok = false;
		ControlFileData *cf = get_controlfile(DataDir, &crc_ok);

		recovering = !crc_ok || cf->state != DB_SHUTDOWNED ||
			access("standby.signal", F_OK) == 0 ||
			access("recovery.signal", F_OK) == 0 ||
			access("backup_label", F_OK) == 0;
		pfree(cf);
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
 * Raise the state to a floor: a replayed reservation, or the one 1.1
 * logged through its replication origin.  Returns true if the state moved.
 * Called with the lock held.
 */
static bool
apply_floor(const SnowflakeLayout *l, int64 floor_id)
{
	static char buf[128];

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

/*
 * A reservation replayed where the settings cannot be trusted (a standby
 * started with a setting it rejected): nothing is computed in the layout
 * in force, but the mark itself, an ID and the layout it belongs to as the
 * record says, is kept in the state file, so that the start that can use
 * the file (the setting fixed) continues above it.  A file that cannot be
 * read is left as it is; it is refused as damaged at that start.
 */
static void
keep_replayed_raw(int64 mark, const char *layout, bool *warned)
{
	PersistedMark m;
	uint64		writes = 0;
	const char *problem = NULL;

	switch (persist_read_file(SNOWFLAKE_MARK_FILE, &m, sizeof(m), &writes, &problem))
	{
		case MARK_ABSENT:
			memset(&m, 0, sizeof(m));
			m.flags = MARK_FLOOR_PENDING;
			break;
		case MARK_OK:
			if (mark <= m.mark_id)
				return;
			break;
		case MARK_BROKEN:
		case MARK_UNREADABLE:
			if (!*warned)
				ereport(WARNING,
						(errmsg("snowflake cannot keep the reservations it replays: state file \"%s\" %s",
								SNOWFLAKE_MARK_FILE, problem)));
			*warned = true;
			return;
	}
	m.mark_id = mark;
	strlcpy(m.layout, layout, sizeof(m.layout));
	m.undo_floor = 0;
	if (!persist_write_file(SNOWFLAKE_MARK_FILE, &m, sizeof(m), &writes, LOG))
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not keep the reservation " INT64_FORMAT " replayed from WAL in \"%s\"",
						mark, SNOWFLAKE_MARK_FILE)));
	if (!*warned)
		ereport(LOG,
				(errmsg("snowflake keeps the reservations it replays in \"%s\" while it cannot generate: %s",
						SNOWFLAKE_MARK_FILE,
						settings_problem() ? settings_problem() : "its settings are unusable")));
	*warned = true;
}

/*
 * Replay of a reservation, in the startup process: no ID above the mark
 * was issued, and IDs up to it may have been.  The state rises to it and
 * the state file holds it before replay goes on, so that no restartpoint
 * passes a record whose mark the file lacks.  A failed write stops
 * recovery: going on would lose the mark at the next restart.
 */
void
mark_replay(int64 mark, const char *layout)
{
	const SnowflakeLayout *l = snowflake_layout;
	static bool warned = false;

	if (snowflake_shared == NULL || IsBinaryUpgrade)
		return;
	if (!snowflake_shared->usable)
	{
		keep_replayed_raw(mark, layout, &warned);
		return;
	}
	LWLockAcquire(snowflake_shared->lock, LW_EXCLUSIVE);
	if (mark > (int64) pg_atomic_read_u64(&snowflake_shared->last_id))
	{
		/* the state is now that record's: of its layout, or of ours */
		if (strcmp(layout, l->name) != 0)
			strlcpy(snowflake_shared->prev_layout, layout, NAMEDATALEN);
		else
			snowflake_shared->prev_layout[0] = '\0';
		if (apply_floor(l, mark) && !snowflake_shared->state_broken)
		{
			snowflake_shared->undo_floor = 0;
			(void) write_mark(l, mark, ERROR);
			atomic_raise(&snowflake_shared->reserved, (uint64) mark);
			atomic_raise(&snowflake_shared->extend_at, (uint64) mark);
		}
	}
	LWLockRelease(snowflake_shared->lock);
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
			 errhint("As a superuser, run SELECT snowflake.snowflake_repair_state(above => ...) with the largest ID your tables hold; IDs then continue above it and above every reservation replayed from WAL since the server started.")));
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
 * Whether 1.1's replication origin must still be looked for: the state file
 * does not say it is gone.  Its catalog can be read only from a database,
 * which the keeper does not connect to: the keeper starts a worker that
 * does (keeper.c), once in the life of a data directory.
 */
bool
mark_legacy_wanted(void)
{
	return snowflake_shared != NULL && snowflake_shared->usable &&
		!snowflake_shared->state_broken &&
		snowflake_shared->legacy_state != LEGACY_GONE;
}

/* The origin worker found the origin at mark, or found none (mark 0). */
void
mark_legacy_found(bool found, int64 mark)
{
	LWLockAcquire(snowflake_shared->lock, LW_EXCLUSIVE);
	snowflake_shared->legacy_mark = mark;
	snowflake_shared->legacy_state = found ? LEGACY_PRESENT : LEGACY_GONE;
	LWLockRelease(snowflake_shared->lock);
	if (snowflake_shared->keeper_latch)
		SetLatch(snowflake_shared->keeper_latch);
}

/*
 * The origin may be dropped once a reservation of ours, logged after the
 * floor was applied, covers every ID issued under it.
 */
bool
mark_legacy_may_drop(void)
{
	return snowflake_shared->legacy_state == LEGACY_COVERED;
}

/* The origin is gone: say so in the state file, never to look again. */
void
mark_legacy_gone(void)
{
	LWLockAcquire(snowflake_shared->lock, LW_EXCLUSIVE);
	snowflake_shared->legacy_state = LEGACY_GONE;
	if (!snowflake_shared->state_broken)
		(void) write_mark(snowflake_layout,
						  Max(1, (int64) Max(pg_atomic_read_u64(&snowflake_shared->reserved),
											 pg_atomic_read_u64(&snowflake_shared->last_id))),
						  WARNING);
	LWLockRelease(snowflake_shared->lock);
}

/*
 * The keeper's start, once recovery has ended, and again at every round
 * until it is done: raise the state to the floor and make it durable,
 * before any backend may have a reservation.  After recovery the floor
 * includes 1.1's origin, which the origin worker reads; IDs wait for it
 * (and refuse after 5 s, saying why).  failed: that worker exited without
 * an answer.
 */
void
mark_keeper_start(bool legacy_failed)
{
	const SnowflakeLayout *l = snowflake_layout;

	if (snowflake_shared == NULL || !snowflake_shared->usable)
		return;
	snowflake_shared->keeper_latch = MyLatch;
	if (snowflake_shared->floor_done)
		return;

	if ((recovering || file_absent) && !snowflake_shared->state_broken &&
		snowflake_shared->legacy_state == LEGACY_UNKNOWN)
	{
		if (legacy_failed)
			strlcpy(snowflake_shared->keeper_problem,
					"the floor after recovery needs replication origin \"" SNOWFLAKE_LEGACY_ORIGIN "\", and the worker that reads it failed (see the server log)",
					sizeof(snowflake_shared->keeper_problem));
		return;
	}

	LWLockAcquire(snowflake_shared->lock, LW_EXCLUSIVE);
	if (!snowflake_shared->floor_done && !snowflake_shared->state_broken)
	{
		/* after a clean shutdown the file holds the exact last ID */
		if ((recovering || file_absent) &&
			snowflake_shared->legacy_state == LEGACY_PRESENT)
			(void) apply_floor(l, snowflake_shared->legacy_mark);
		snowflake_shared->floor_done = true;
		snowflake_shared->keeper_problem[0] = '\0';
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
		snowflake_shared->state_broken || !snowflake_shared->floor_done)
		return;
	if (snowflake_shared->legacy_state == LEGACY_PRESENT)
	{
		/*
		 * A record of ours covering every ID issued so far, so that 1.1's
		 * origin can go at once, even on an idle node.
		 */
		mark = Max((int64) pg_atomic_read_u64(&snowflake_shared->last_id),
				   (int64) pg_atomic_read_u64(&snowflake_shared->reserved));
		wal_log_reservation(mark, l->name);
		snowflake_shared->legacy_state = LEGACY_COVERED;
	}
	target = Max((int64) pg_atomic_read_u64(&snowflake_shared->last_id),
				 (int64) pg_atomic_read_u64(&snowflake_shared->requested));
	if (target <= snowflake_shared->resumed_from)
		return;					/* nothing issued or asked for since start */
	tick = layout_tick(l, target);
	if ((int64) pg_atomic_read_u64(&snowflake_shared->reserved) >= tick_ceiling(l, tick + w / 2))
		return;

	mark = tick_ceiling(l, tick + w);
	wal_log_reservation(mark, l->name);
	LWLockAcquire(snowflake_shared->lock, LW_EXCLUSIVE);
	/* a repair meanwhile may have moved the state above the mark */
	if (!snowflake_shared->state_broken &&
		mark > (int64) pg_atomic_read_u64(&snowflake_shared->last_id) &&
		mark > (int64) pg_atomic_read_u64(&snowflake_shared->reserved))
	{
		/* IDs go above a repair: it can no longer be undone */
		snowflake_shared->undo_floor = 0;
		if (write_mark(l, mark, WARNING))
		{
			/* only now may IDs up to the new mark be handed out */
			pg_atomic_write_u64(&snowflake_shared->reserved, (uint64) mark);
			pg_atomic_write_u64(&snowflake_shared->extend_at,
								(uint64) tick_ceiling(l, tick + w / 2));
		}
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
 * largest of the given ID, the reservations replayed since the server
 * started, 1.1's origin if it is still there and whatever the node still
 * holds, and write a new file.  Returns the ID that new IDs continue above.
 *
 * A repair that raises the state remembers the last ID before it, which
 * bounds every ID the node issued, until the first reservation above it.
 * Until then, lower undoes it: what the node holds is dropped, and the
 * state goes down to the larger of the given ID and that bound.  log: the
 * floor comes from outside this node's WAL (another cluster's IDs), so it
 * is logged, and a standby continues above it too.
 */
int64
mark_repair(int64 above, bool lower, bool log)
{
	const SnowflakeLayout *l = snowflake_layout;
	int64		last;
	int64		legacy = 0;
	int64		reserved = 0;
	int64		bound;
	int64		mark;

	settings_require_usable();
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("snowflake state cannot be repaired during recovery"),
				 errdetail("A standby takes its state from the reservations it replays."),
				 errhint("Run it on the primary, or on this server once it is promoted.")));
	if (above < 0 || above >= layout_max_id(l))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("snowflake ID " INT64_FORMAT " is out of range for the \"%s\" layout",
						above, l->name),
				 errdetail("New IDs must be greater than it, and the largest ID of the layout is " INT64_FORMAT ".",
						   layout_max_id(l))));

	switch (wal_legacy_mark(&legacy))
	{
		case LEGACY_BUSY:
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("snowflake cannot read replication origin \"%s\": its catalog is locked",
							SNOWFLAKE_LEGACY_ORIGIN),
					 errhint("Try again once the command holding the lock on pg_replication_origin has finished.")));
			break;
		case LEGACY_UNREADABLE:
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("snowflake cannot read the progress of replication origin \"%s\"",
							SNOWFLAKE_LEGACY_ORIGIN),
					 errdetail("The server has no state slots for replication origins, so the progress was not restored."),
					 errhint("Set %s to at least 1, restart the server and repair again.",
							 PG_VERSION_NUM >= 180000 ? "max_active_replication_origins" : "max_replication_slots")));
			break;
		default:
			break;
	}
	LWLockAcquire(snowflake_shared->lock, LW_EXCLUSIVE);
	if (snowflake_shared->state_broken && snowflake_shared->prev_layout[0] != '\0' &&
		strstr(snowflake_shared->state_problem, "beyond the largest ID") != NULL)
	{
		LWLockRelease(snowflake_shared->lock);
		refuse_broken();
	}
	/* a reservation made before bounds IDs that backends may still issue */
	if (!snowflake_shared->state_broken)
		reserved = (int64) pg_atomic_read_u64(&snowflake_shared->reserved);
	if (lower)
	{
		int64		undo = snowflake_shared->undo_floor;

		if (undo <= 0 || snowflake_shared->state_broken ||
			(int64) pg_atomic_read_u64(&snowflake_shared->last_id) != snowflake_shared->resumed_from)
		{
			LWLockRelease(snowflake_shared->lock);
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("snowflake state cannot be lowered to " INT64_FORMAT, above),
					 undo <= 0 ?
					 errdetail("No repair of this node is waiting to be undone, and nothing else bounds the IDs it issued below its state.") :
					 errdetail("The node issued IDs after it resumed at " INT64_FORMAT "; new IDs stay above them.",
							   snowflake_shared->resumed_from),
					 errhint("Repair to a value at or above the node's last ID, which snowflake_status shows.")));
		}

		/*
		 * A backend that read the old state must ask for a reservation: the
		 * barrier orders the lowered words before the lowered last ID, which
		 * the generator reads first.
		 */
		pg_atomic_write_u64(&snowflake_shared->extend_at, 0);
		pg_atomic_write_u64(&snowflake_shared->reserved, 0);
		pg_write_barrier();
		pg_atomic_write_u64(&snowflake_shared->last_id, (uint64) Max(above, undo));
		snowflake_shared->undo_floor = 0;
		reserved = 0;
	}
	(void) apply_floor(l, legacy);
	if (snowflake_shared->state_broken &&
		strstr(snowflake_shared->state_problem, "beyond the largest ID") != NULL)
	{
		LWLockRelease(snowflake_shared->lock);
		refuse_broken();
	}
	bound = Max((int64) pg_atomic_read_u64(&snowflake_shared->last_id), reserved);
	atomic_raise(&snowflake_shared->last_id, (uint64) above);
	last = (int64) pg_atomic_read_u64(&snowflake_shared->last_id);
	/* a raise remembers what bounds every ID below it, the first one's */
	if (!lower && last > bound && bound > 0 && snowflake_shared->undo_floor == 0)
		snowflake_shared->undo_floor = bound;

	/*
	 * A new file, whole, whatever the old one holds, no longer pending.  It
	 * covers the reservation in force, which backends may be using; beyond
	 * that it reserves nothing above the last ID: the keeper logs the next
	 * reservation first.
	 */
	mark = Max(Max(last, reserved), 1);
	/* a floor from outside this node's WAL reaches its standbys too */
	if (log)
		wal_log_reservation(mark, l->name);
	snowflake_shared->writes = 0;
	snowflake_shared->floor_done = true;
	if (!write_mark(l, mark, WARNING))
	{
		LWLockRelease(snowflake_shared->lock);
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not write snowflake state file \"%s\"", SNOWFLAKE_MARK_FILE),
				 errhint("The server log says why; the node goes on refusing until a repair succeeds.")));
	}
	if (reserved <= last)
	{
		pg_atomic_write_u64(&snowflake_shared->reserved, (uint64) last);
		pg_atomic_write_u64(&snowflake_shared->extend_at, (uint64) last);
	}
	snowflake_shared->resumed_from = last;
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
	{
		/* IDs were issued above a repair: it can no longer be undone */
		snowflake_shared->undo_floor = 0;
		(void) write_mark(l, last, LOG);
	}
}
