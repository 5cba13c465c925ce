/*-------------------------------------------------------------------------
 *
 * registry.h
 *	  The node's side of the worker id registry (registry.c): the keeper's
 *	  lease, and the registry's name as messages give it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SNOWFLAKE_REGISTRY_H
#define SNOWFLAKE_REGISTRY_H

extern const char *registry_display(void);
extern void registry_keep(void);

#endif							/* SNOWFLAKE_REGISTRY_H */
