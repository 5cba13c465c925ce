/*-------------------------------------------------------------------------
 *
 * identity.h
 *	  Whether this data directory may issue IDs under its worker id
 *	  (identity.c): copies, upgrades and restores held back until the
 *	  operator says which node they are.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SNOWFLAKE_IDENTITY_H
#define SNOWFLAKE_IDENTITY_H

extern Size identity_shmem_size(void);
extern void identity_shmem_init(void);
extern void identity_configured(int worker);
extern void identity_start(void);
extern void identity_keep(bool first);
extern void identity_replay(const void *data, Size len);
extern void identity_require_ok(void);
extern void identity_upgrade_noticed(void);

#endif							/* SNOWFLAKE_IDENTITY_H */
