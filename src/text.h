/*-------------------------------------------------------------------------
 *
 * text.h
 *	  The hooks of snowflake.opaque_key, the key of the opaque text form of
 *	  IDs (text.c), which settings.c defines with the other settings.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SNOWFLAKE_TEXT_H
#define SNOWFLAKE_TEXT_H

#include "utils/guc.h"

extern char *text_opaque_key_setting;

extern bool text_check_opaque_key(char **newval, void **extra, GucSource source);
extern void text_assign_opaque_key(const char *newval, void *extra);
extern const char *text_show_opaque_key(void);
extern void text_opaque_key_preloaded(void);

#endif							/* SNOWFLAKE_TEXT_H */
