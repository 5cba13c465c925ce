/*-------------------------------------------------------------------------
 *
 * identity.h
 *	  Which node this data directory is (identity.c): the evidence at
 *	  start, the worker id applied, claims, replay and confirmation, as
 *	  events of node.c's model.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SNOWFLAKE_IDENTITY_H
#define SNOWFLAKE_IDENTITY_H

#include "node.h"

extern void identity_start(void);
extern void identity_started(void);
extern void identity_configured(int worker);
extern void identity_publish(void);
extern void identity_keep(bool first);
extern void identity_replay(const void *data, Size len);
extern NodeReason identity_verdict(bool settle_now, NodeCheck upto);
extern void identity_upgrade_noticed(void);

#endif							/* SNOWFLAKE_IDENTITY_H */
