/*-------------------------------------------------------------------------
 *
 * node.h
 *	  What the node knows (node.c): its states and the reasons for them,
 *	  the events that move it and the one table of its transitions, the
 *	  durable record that holds it, what a start found beside the record,
 *	  the one verdict a call and the status view share, and every refusal
 *	  the node makes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SNOWFLAKE_NODE_H
#define SNOWFLAKE_NODE_H

#include "datatype/timestamp.h"
#include "port/atomics.h"
#include "storage/lwlock.h"

#include "compat.h"
#include "persist.h"

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
 * its SQLSTATE, name and words); the durable ones are kept in the record
 * by number, so new ones go at the end.
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
	REASON_NOT_PRELOADED,
	REASON_SINGLE_USER,
	/* NODE_STANDBY */
	REASON_IN_RECOVERY,
	/* NODE_DISABLED */
	REASON_NO_WORKER_ID,
	/* NODE_BLOCKED */
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
	/* NODE_DISABLED */
	REASON_SETTING_UNKNOWN,
	REASON_LAYOUT_REJECTED,
	REASON_LAYOUT_UNUSABLE,
	REASON_WORKER_ID_REJECTED,
	/* NODE_STARTING */
	REASON_FLOOR_PENDING,
	/* NODE_BLOCKED */
	REASON_CLOCK_BEFORE_EPOCH,
	REASON_LAYOUT_ENDED,
	/* DecimalId's generator, not the node's */
	REASON_DECIMAL_RANGE,
	REASON_DECIMAL_FILE,
	REASON_DECIMAL_USED_UP,
	/* NODE_HELD_COPY */
	REASON_FILES_REMOVED,
	REASON_RECOVERY_TARGET,
	REASON_ARCHIVE_STANDBY,
	/* NODE_DISABLED */
	REASON_WORKER_ID_UNSET,
	/* NODE_HELD_CLAIMED */
	REASON_UNCLAIMED,
	/* NODE_BLOCKED */
	REASON_NO_LEASE,
	REASON_LEASE_TAKEN,
	REASON_LEASE_LOST,
	NUM_REASONS
} NodeReason;

/*
 * What moves the node's durable state: each event is what identity.c, its
 * claims and its confirmation found, and node.c's table of transitions
 * says what it does in each state.
 */
typedef enum NodeEvent
{
	EV_START_COPY,				/* start: a sign of a copy (the reason) */
	EV_START_NO_RECORD,			/* start: neither file (the reason) */
	EV_START_RECORD_DAMAGED,	/* start: snowflake.identity damaged, alone */
	EV_RAN_BEFORE,				/* the extension ran here before: its mark in
								 * the catalog */
	EV_INSTALLED,				/* an install script ran here */
	EV_UPGRADED,				/* pg_upgrade made this data directory */
	EV_WORKER_SAME,				/* the worker id in force is the one it names */
	EV_WORKER_OWN,				/* ... one it may use */
	EV_WORKER_SOURCE,			/* ... its source's, after a copy's release */
	EV_WORKER_CLAIMED,			/* ... one another system claimed */
	EV_WORKER_GIVEN_UP,			/* ... (a standby's) one its primary gave up */
	EV_WORKER_UNCLAIMED,		/* ... not one this system claimed, where it
								 * claimed others */
	EV_CONFIRMED,				/* snowflake_confirm_node(), committed */
	EV_REPLAYED,				/* (a standby) its primary's record replayed */
	NUM_EVENTS
} NodeEvent;

/* Worker ids other systems claimed: a bitmap below CLAIM_BITS, a list above */
#define CLAIM_BITS		1024
#define CLAIM_HIGH		32
/* worker ids the node gave up, the latest first */
#define RETIRED_MAX		8
/* worker ids this system claimed, the latest first */
#define OWN_MAX			6

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
	uint32		nown;			/* claims this system made; 1.2's first
								 * files: 0 */
	int32		own[OWN_MAX];	/* the latest of them */
	int32		leased;			/* 1 + the worker id the registry leased this
								 * node (its system identifier); 0: none */
	int32		lease_lost;		/* 1: the registry said that worker id is no
								 * longer this node's lease (lease_lost) */
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

/* the node's part of the record: what a standby takes from its primary */
#define NODE_PART		offsetof(NodeRecord, system_identifier)

#define SNOWFLAKE_STATE_FILE	"snowflake.state"
#define SNOWFLAKE_IDENTITY_FILE	"snowflake.identity"

/*
 * The replication origin (a row of a shared catalog, no slot) the install
 * scripts and a confirmation leave, so that a data directory whose files
 * are gone still shows it ran the extension: copied with it, kept by DROP
 * EXTENSION, seen from every database.
 */
#define SNOWFLAKE_NODE_ORIGIN	"snowflake_node"

/*
 * What node_verdict() asks, in its order; the state shown is the one of
 * the first that holds, and a step that mends one asks only those before
 * it.  The record holds CHECK_HOLD, this process CHECK_RECOVERY, the
 * configuration CHECK_WORKER; the others are what was found (found[]).
 */
typedef enum NodeCheck
{
	CHECK_CONFIG,				/* the configuration read at start, pg_upgrade */
	CHECK_FILE,					/* a file of the record it cannot read */
	CHECK_HOLD,					/* the record's durable hold */
	CHECK_RECOVERY,				/* this server is a standby */
	CHECK_MARK,					/* the mark cannot be trusted */
	CHECK_WORKER,				/* no worker id, or one rejected */
	CHECK_KEEPER,				/* the keeper could not renew the reservation */
	CHECK_FLOOR,				/* recovery's floor is not applied yet */
	CHECK_ALL
} NodeCheck;

/*
 * Shared memory: the record as the files hold it and what was found beside
 * it, under the one lock that serializes every change of them and every
 * write of the files.  Every field is written under the lock (or by the
 * postmaster at start, before any other process runs); the pg_atomic ones
 * are also read without it, one word at a time, and the others only under
 * it.  The postmaster writes none of it after start.
 */
typedef struct NodeShared
{
	LWLock	   *lock;
	NodeRecord	rec;
	pg_atomic_uint32 found[CHECK_ALL];	/* NodeReason by check; NONE:
										 * nothing found */
	uint64		state_writes;	/* persist.c's counters of the two files */
	uint64		identity_writes;
	int64		trouble_id;		/* the ID beyond the layout, for the message */
	char		trouble_layout[NAMEDATALEN];	/* the layout it was issued in */
	/* snowflake.worker_id, as the configuration read at configured_at gave it */
	pg_atomic_uint32 configured;
	pg_atomic_uint64 configured_at; /* settings_worker_read_at() of that read */
	/* the reading the worker id in force was last published from */
	pg_atomic_uint32 published;
	pg_atomic_uint64 published_at;
	/* why the keeper's last lease from the registry failed; "": not tried */
	char		registry_error[256];
	/*
	 * What the registry last said against this server (a NodeReason):
	 * REASON_LEASE_TAKEN, another server of this system holds its lease;
	 * REASON_LEASE_LOST, the worker id it holds is no longer its lease (the
	 * record keeps that too, lease_lost, across restarts and for standbys)
	 */
	pg_atomic_uint32 registry_found;
	/* the keeper's next try and its pause after a failure: kept across its restarts */
	TimestampTz registry_next_try;
	int			registry_gap;
	/* when the keeper next renews the lease the node holds; 0: at once */
	TimestampTz registry_renew_at;
} NodeShared;

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

/* What reading the record's two files found (node_read()). */
typedef struct RecordFiles
{
	bool		found;			/* either held the node's part */
	MarkResult	state;			/* what reading snowflake.state gave */
	MarkResult	identity;		/* ... and snowflake.identity */
	PersistFault state_fault;	/* why, for persist_fault() */
	PersistFault identity_fault;
	uint64		state_writes;	/* their write counters */
	uint64		identity_writes;
} RecordFiles;

/* which files node_save() writes */
#define SAVE_STATE		0x1
#define SAVE_IDENTITY	0x2
#define SAVE_BOTH		(SAVE_STATE | SAVE_IDENTITY)

/* the node's model */
extern Size node_shmem_size(void);
extern void node_shmem_init(void);
extern const char *node_state_name(NodeState s);
extern const char *node_reason_name(NodeReason r);
extern NodeState node_reason_state(NodeReason r);
extern bool node_apply(NodeRecord *r, NodeEvent ev, NodeReason found);
extern bool node_acts(const NodeRecord *r, NodeEvent ev);
extern bool node_follows_worker(const NodeRecord *r);
extern void node_find(NodeCheck check, NodeReason r);
extern NodeReason node_found(NodeCheck check);
extern NodeReason node_settings_reason(void);
extern int	node_configured_worker(void);
extern const char *node_worker_source(void);
extern NodeReason node_verdict_before(const NodeRecord *rec, NodeCheck upto);
extern bool node_lease_lost(void);
extern NodeReason node_verdict(const NodeRecord *rec);
extern bool node_refuses(NodeReason r);
extern bool node_mark_readable(void);
extern bool node_mark_trusted(void);

/* the record */
extern void node_read(const char *dir, NodeRecord *rec, RecordFiles *files);
extern bool node_save(const NodeRecord *next, int files, int elevel);
extern bool node_save_at_exit(const NodeRecord *last, int elevel);
extern bool node_claimed(const NodeRecord *r, int worker);
extern void node_add_claim(NodeRecord *r, int worker);
extern void node_drop_claim(NodeRecord *r, int worker);
extern bool node_own_claimed(const NodeRecord *r, int worker);
extern void node_add_own_claim(NodeRecord *r, int worker);
extern void node_drop_own_claim(NodeRecord *r, int worker);
extern bool node_retired(const NodeRecord *r, int worker);
extern void node_move_worker(NodeRecord *r, int worker);

/* refusals */
pg_noreturn extern void node_refuse(NodeReason r, const RefuseArgs *a);
pg_noreturn extern void node_refuse_state(NodeReason r);
extern const char *node_num(int64 v);

#endif							/* SNOWFLAKE_NODE_H */
