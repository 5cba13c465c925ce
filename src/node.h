/*-------------------------------------------------------------------------
 *
 * node.h
 *	  What the node knows (node.c): its state and the reason for it, the
 *	  one durable record that holds them, the transitions between states,
 *	  and every refusal the node makes, from one table.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SNOWFLAKE_NODE_H
#define SNOWFLAKE_NODE_H

#include "port/atomics.h"
#include "storage/lwlock.h"

#include "compat.h"

/*
 * The node's state, as snowflake_status shows it.  The held ones but
 * held_file are durable (the record keeps them across restarts); the
 * others come from what this start, this process or the clock found, and
 * are worked out again each time.
 */
typedef enum NodeState
{
	NODE_READY = 0,				/* generates */
	NODE_HELD_COPY,				/* a copy of the node of its worker id */
	NODE_HELD_FLOOR,			/* cannot know how far its IDs went */
	NODE_HELD_CLAIMED,			/* its worker id is not its own to use */
	NODE_HELD_FILE,				/* a file of it cannot be read */
	NODE_BROKEN,				/* its state file cannot be trusted */
	NODE_STARTING,				/* recovery's floor is not applied yet */
	NODE_DISABLED,				/* its configuration does not let it generate */
	NODE_STANDBY,				/* in recovery: generates once promoted */
	NODE_BLOCKED				/* the clock, the layout or the keeper stop
								 * calls now; no step but time, or the one
								 * the hint names */
} NodeState;

/*
 * Why.  Each reason belongs to one state (node.c's table says which, with
 * its SQLSTATE and name); the refusals that are not states (the clock's,
 * a missing worker id) have reasons too, so that every refusal the node
 * makes comes from one place.
 */
typedef enum NodeReason
{
	REASON_NONE = 0,
	/* NODE_HELD_COPY */
	REASON_BACKUP_LABEL,
	REASON_RECOVERY_SIGNAL,
	REASON_OTHER_DIRECTORY,
	REASON_OTHER_SYSTEM,
	REASON_RECORD_DAMAGED,
	/* NODE_HELD_FLOOR */
	REASON_NEVER_INSTALLED,
	REASON_NEW_AS_STANDBY,
	REASON_UPGRADED,
	/* NODE_HELD_CLAIMED */
	REASON_CLAIMED_ELSEWHERE,
	REASON_WORKER_RETIRED,
	/* NODE_HELD_FILE */
	REASON_RECORD_UNREADABLE,
	REASON_STATE_UNREADABLE,
	/* NODE_BROKEN */
	REASON_STATE_DAMAGED,
	REASON_STATE_BEYOND_LAYOUT,
	/* NODE_DISABLED */
	REASON_SETTINGS_REJECTED,
	REASON_BINARY_UPGRADE,
	/* refusals of one call, not states */
	REASON_NOT_PRELOADED,
	REASON_SINGLE_USER,
	REASON_IN_RECOVERY,
	REASON_NO_WORKER_ID,
	REASON_LAYOUT_BELOW,
	REASON_CLOCK_BACK,
	REASON_CLOCK_BACK_LONG,
	REASON_CLOCK_BACK_FAR,
	REASON_AHEAD_OF_CLOCK,
	REASON_AHEAD_FAR,
	REASON_TICK_USED_UP,
	REASON_BLOCK_TOO_LARGE,
	REASON_KEEPER_LATE,
	REASON_KEEPER_ORIGIN,
	/* since the status view became the refusals' twin */
	REASON_SETTING_UNKNOWN,
	REASON_LAYOUT_REJECTED,
	REASON_LAYOUT_UNUSABLE,
	REASON_WORKER_ID_REJECTED,
	REASON_FLOOR_PENDING,
	REASON_CLOCK_BEFORE_EPOCH,
	REASON_LAYOUT_ENDED,
	NUM_REASONS
} NodeReason;

/* Worker ids other systems claimed: a bitmap below CLAIM_BITS, a list above */
#define CLAIM_BITS		1024
#define CLAIM_HIGH		32
/* worker ids the node gave up, the latest first */
#define RETIRED_MAX		8

/*
 * The node's record, as $PGDATA/snowflake.state holds it (whole, at every
 * change) and $PGDATA/snowflake.identity too (at every change of the
 * node's part), so that either file alone keeps a hold.  It begins with
 * the mark as 1.0 and 1.1 wrote it; their files read with the rest 0.
 */
typedef struct NodeRecord
{
	/* the mark: how far the node's IDs may have gone */
	int64		mark_id;		/* no ID issued by this node is greater */
	int64		seen_unix_ms;	/* highest clock reading seen, Unix ms */
	char		layout[NAMEDATALEN];	/* the layout mark_id was made in */
	uint32		flags;			/* RECORD_*; 1.0's files have none */
	uint32		padding;
	int64		undo_floor;		/* see mark_repair(); 1.1's files: 0 */
	int64		lead_ms;		/* how far the clock policy let IDs lead the
								 * clock at the last reservation made or
								 * replayed; 1.1's files: 0 */

	/* the node: which node this data directory is (since 1.2) */
	uint64		system_identifier;
	uint64		directory_inode;
	int32		worker;			/* the worker id last in force; -1: none yet */
	uint8		state;			/* NodeState: a durable one */
	uint8		reason;			/* NodeReason */
	uint16		nretired;
	int32		retired[RETIRED_MAX];	/* worker ids the node gave up */
	int32		copy_of;		/* if RECORD_COPY_OF: the worker id of the node
								 * it is a copy of, and why it was held */
	uint32		copy_reason;
	uint64		changes;		/* counts changes of the node's part */
	uint64		other_system;	/* who claimed the worker id, for the message */
	uint32		nhigh;			/* claims at or above CLAIM_BITS; may exceed
								 * CLAIM_HIGH */
	int32		high[CLAIM_HIGH];
	uint8		claimed[CLAIM_BITS / 8];
} NodeRecord;

/* the node started in recovery or without a file: apply the floor */
#define RECORD_FLOOR_PENDING	0x1
/* 1.1's replication origin is known to be gone from this data directory */
#define RECORD_LEGACY_GONE		0x2
/* the node's part is there (files of 1.2 and later) */
#define RECORD_NODE				0x4
/* worker is the primary's, replayed; this node's own is not applied yet */
#define RECORD_WORKER_REPLAYED	0x8
/* released as a copy by a worker id of its own: copy_of is its source's */
#define RECORD_COPY_OF			0x10

#define SNOWFLAKE_STATE_FILE	"snowflake.state"
#define SNOWFLAKE_IDENTITY_FILE	"snowflake.identity"

/*
 * Shared memory: the record as the files hold it, under the one lock that
 * serializes every change of it and every write of the files.  The state
 * published is read without the lock (the postmaster takes none).
 */
typedef struct NodeShared
{
	LWLock	   *lock;
	NodeRecord	rec;
	uint64		state_writes;	/* persist.c's counters of the two files */
	uint64		identity_writes;
	NodeReason	mark_trouble;	/* why the mark cannot be trusted, or NONE */
	NodeReason	disabled;		/* settings rejected, binary upgrade, NONE */
	NodeReason	file_trouble;	/* a file that could not be read, NONE */
	NodeReason	keeper_trouble; /* why calls cannot get a reservation, NONE */
	bool		floor_pending;	/* recovery's floor not applied yet */
	int64		trouble_id;		/* the ID beyond the layout, for the message */
	char		trouble_layout[NAMEDATALEN];	/* the layout it was issued in */
	pg_atomic_uint32 published; /* NodeState | NodeReason << 8 */
	pg_atomic_uint32 configured;	/* snowflake.worker_id, as last read */
} NodeShared;

/* configured: the value of snowflake.worker_id was rejected at start */
#define WORKER_ID_REJECTED	(-2)

extern NodeShared *node_shared;

/*
 * The values a refusal's words name, as text, in the order its message,
 * detail and hint name them (node.c's table says which).
 */
typedef struct RefuseArgs
{
	const char *msg[2];
	const char *detail[3];
	const char *hint[2];
} RefuseArgs;

extern Size node_shmem_size(void);
extern void node_shmem_init(void);
extern const char *node_state_name(NodeState s);
extern const char *node_reason_name(NodeReason r);
extern NodeState node_reason_state(NodeReason r);
extern NodeState node_state(NodeReason *reason);
extern int	node_configured_worker(void);
extern NodeReason node_settings_reason(void);
/* What node_verdict() asks, in its order: a check asks those before it. */
typedef enum NodeCheck
{
	CHECK_CONFIG,				/* the configuration read at start */
	CHECK_FILE,					/* a file of the record it cannot read */
	CHECK_HOLD,					/* the record's durable hold */
	CHECK_RECOVERY,				/* this server is a standby */
	CHECK_MARK,					/* the mark cannot be trusted */
	CHECK_WORKER,				/* no worker id, or one rejected */
	CHECK_KEEPER,				/* the keeper: recovery's floor, a renewal */
	CHECK_ALL
} NodeCheck;

extern NodeReason node_verdict_before(const NodeRecord *rec, NodeCheck upto);
extern NodeReason node_verdict(const NodeRecord *rec);
extern bool node_refuses(NodeReason r);
extern void node_publish(void);
/* which files node_save() writes */
#define SAVE_STATE		0x1
#define SAVE_IDENTITY	0x2
#define SAVE_BOTH		(SAVE_STATE | SAVE_IDENTITY)

extern bool node_save(const NodeRecord *next, int files, int elevel);
pg_noreturn extern void node_refuse(NodeReason r, const RefuseArgs *a);
pg_noreturn extern void node_refuse_state(NodeReason r);
extern const char *node_num(int64 v);

#endif							/* SNOWFLAKE_NODE_H */
