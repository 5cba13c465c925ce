/*-------------------------------------------------------------------------
 *
 * identity.h
 *	  Which node this data directory is: the evidence a start finds, the
 *	  worker id applied, a standby's replay of its primary's record
 *	  (identity.c); other systems' claims (claims.c); the operator's
 *	  confirmation and the install script's word (confirm.c).  Each finds
 *	  an event of node.c's model and applies it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SNOWFLAKE_IDENTITY_H
#define SNOWFLAKE_IDENTITY_H

#include "node.h"
#include "settings.h"

/* What a start found in the data directory, gathered once at its start. */
typedef struct StartEvidence
{
	bool		standby;		/* standby.signal, following a primary */
	bool		recovered;		/* recovery ran or must run: an unclean stop,
								 * a signal file, backup_label */
	bool		found;			/* a file held the node's part */
	NodeRecord	state_as_read;	/* snowflake.state as read (zeros: none) */
} StartEvidence;

/* identity.c */
extern void identity_start(StartEvidence *ev);
extern void identity_started(const StartEvidence *ev);
extern void identity_configured(int worker);
extern void identity_publish(void);
extern void identity_keep(bool first);
extern void identity_replay(const void *data, Size len);
extern NodeReason identity_verdict(bool settle_now, NodeCheck upto);
extern void identity_upgrade_noticed(void);
extern void identity_change(bool (*change) (NodeRecord *r, const void *arg),
							const void *arg, int elevel);
extern void identity_log_record(const NodeRecord *r);
extern uint64 identity_system(void);
extern bool identity_ran_before(void);
extern void identity_note_ran(void);
extern uint64 identity_directory(void);

/*
 * Whether this process read a reload of the worker id that the worker id
 * in force was not yet published from (its reading is later, and
 * differs): its call then takes the cold path, which takes the reading for
 * the node and publishes it.  Pairs with identity_publish(), which writes the word in force
 * before the reading it came from: a reading seen here is in force, read
 * after this.
 */
static inline bool
identity_reload_pending(void)
{
	bool		pending =
		(int) (int32) pg_atomic_read_u32(&node_shared->published) != settings_worker_reading &&
		settings_worker_read_at() > pg_atomic_read_u64(&node_shared->published_at);

	pg_read_barrier();
	return pending;
}

/* claims.c */
extern void claims_register_callbacks(void);
extern void claims_pend(int32 worker, uint64 system);

#endif							/* SNOWFLAKE_IDENTITY_H */
