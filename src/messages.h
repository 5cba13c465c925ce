/*-------------------------------------------------------------------------
 *
 * messages.h
 *	  The catalogue the extension's messages are translated from: a text
 *	  domain of its own, "snowflake-NN" (NN the server's major version),
 *	  bound when the library is loaded (snowflake.c), as PostgreSQL's
 *	  procedural languages bind theirs.  Every source file includes this,
 *	  so that its ereport(), GUC_check_err*() and _() look their words up
 *	  there; `make po/snowflake.pot` writes the catalogue's template from
 *	  the sources.
 *
 *-------------------------------------------------------------------------
 */
#ifndef SNOWFLAKE_MESSAGES_H
#define SNOWFLAKE_MESSAGES_H

#undef TEXTDOMAIN
#define TEXTDOMAIN PG_TEXTDOMAIN("snowflake")

/* words made outside an ereport (a layout's fault, for its detail) */
#undef _
#define _(x) dgettext(TEXTDOMAIN, x)

#endif							/* SNOWFLAKE_MESSAGES_H */
