/*-------------------------------------------------------------------------
 *
 * registry.c
 *	  The node's side of the worker id registry: an ordinary PostgreSQL
 *	  database, named by snowflake.registry, that leases worker ids to the
 *	  servers of a fleet (its side is the section "registry" of
 *	  sql/snowflake.sql).  With snowflake.worker_id unset, the keeper
 *	  leases one for this node's system identifier, keeps it in the node's
 *	  record (so that restarts need no registry, and standbys inherit it
 *	  through WAL), continues above the floor its last holder reached, and
 *	  then lets identity.c apply and publish it as the worker id in force.
 *
 * Only the keeper talks to the registry, through libpq's asynchronous
 * connection, waiting on its latch and the socket, so that it stays
 * interruptible and a registry that does not answer costs a bounded time.
 * A node that holds a lease renews it at each start of the server and
 * every five minutes, generating meanwhile whether or not the registry
 * answers: where the registry lost it (an older backup restored, a
 * failover to a standby without its commit) or a superuser released it,
 * the renewal takes it back; where another lease holds its worker id now,
 * the node refuses (lease_lost) until that changes.  One without a lease
 * refuses (no_lease, node.c) and the keeper tries again with a growing
 * pause.
 * A lease is a server's, not a system's: a random token of its own, in
 * its data directory, goes with each request, so that a copy or a server
 * made from one data directory image is refused (lease_taken) rather
 * than given the same worker id.
 *
 * This file uses node.c, identity.c and mark.c; the keeper calls it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <unistd.h>

#include "libpq-fe.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/guc.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "compat.h"
#include "identity.h"
#include "layout.h"
#include "mark.h"
#include "messages.h"
#include "node.h"
#include "registry.h"
#include "settings.h"

/* this server's lease token, in its data directory */
#define TOKEN_FILE			"snowflake.lease_token"
#define TOKEN_TMP			"snowflake.lease_token.tmp"
/* the largest worker id the registry leases: the widest named layout's */
#define REGISTRY_MAX_WORKER	65535
/* how long one lease may take, its connection included */
#define LEASE_TIMEOUT_MS	10000
/* after a failure the keeper tries again after 1 s, doubling up to 30 s */
#define RETRY_FIRST_MS		1000
#define RETRY_MOST_MS		30000
/* a lease held is renewed this often */
#define RENEW_MS			300000

static uint32 wait_event_registry = 0;

static void try_lease(int held);

/*
 * The setting as libpq takes it: a connection string (keywords or a URI),
 * or else a service name.
 */
static const char *
registry_conninfo(void)
{
	if (strchr(snowflake_registry, '=') != NULL ||
		strncmp(snowflake_registry, "postgres://", 11) == 0 ||
		strncmp(snowflake_registry, "postgresql://", 13) == 0)
		return snowflake_registry;
	return psprintf("service='%s'", snowflake_registry);
}

/*
 * The registry as messages name it: what says where it is and who the node
 * connects as, never a password or anything else the setting holds.
 */
const char *
registry_display(void)
{
	static const char *const shown[] = {"service", "host", "hostaddr", "port", "dbname", "user"};
	PQconninfoOption *opts;
	StringInfoData s;

	if (!settings_registry_named())
		return "";
	opts = PQconninfoParse(registry_conninfo(), NULL);
	if (opts == NULL)
		return "(a setting that could not be parsed)";
	initStringInfo(&s);
	for (PQconninfoOption *o = opts; o->keyword != NULL; o++)
		for (int i = 0; i < (int) lengthof(shown); i++)
			if (o->val != NULL && o->val[0] != '\0' && strcmp(o->keyword, shown[i]) == 0)
				appendStringInfo(&s, "%s%s=%s", s.len > 0 ? " " : "", o->keyword, o->val);
	PQconninfoFree(opts);
	return s.data;
}

/*
 * Wait until the socket is ready for io, or the deadline; false at the
 * deadline.  Interrupts are served meanwhile: a shutdown ends the keeper
 * here too.  So is the reservation, as often as the keeper's own round
 * does it: a node that generates under a lease goes on generating while
 * its renewal waits on a slow registry.
 */
static bool
wait_socket(PGconn *conn, int io, TimestampTz deadline)
{
	for (;;)
	{
		long		ms = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
		int			rc;

		if (ms <= 0)
			return false;
		rc = WaitLatchOrSocket(MyLatch,
							   WL_LATCH_SET | WL_EXIT_ON_PM_DEATH | WL_TIMEOUT | io,
							   PQsocket(conn), Min(ms, SNOWFLAKE_WINDOW_MS / 10),
							   compat_wait_event("SnowflakeRegistry", &wait_event_registry));
		if (rc & WL_LATCH_SET)
		{
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
		mark_keep_ahead();
		if (rc & io)
			return true;
	}
}

/* libpq's words for what failed, on one line */
static void
libpq_error(PGconn *conn, char *err, size_t len)
{
	strlcpy(err, PQerrorMessage(conn), len);
	for (char *p = err; *p; p++)
		if (*p == '\n')
			*p = (p[1] == '\0') ? '\0' : ' ';
}

/*
 * This server's lease token: a random number of its own, written durably
 * to its data directory before its first request, so that the registry
 * tells it from another server of the same system identifier (a copy, a
 * server made from one data directory image), and a crash between the
 * registry's commit and the node's record asks with the same token and
 * gets the same lease back.  false with the reason in err.
 */
static bool
lease_token(int64 *token, char *err, size_t len)
{
	uint64		t;
	int			fd;

	fd = OpenTransientFile(TOKEN_FILE, O_RDONLY | PG_BINARY);
	if (fd >= 0)
	{
		int			n = read(fd, &t, sizeof(t));

		CloseTransientFile(fd);
		if (n == sizeof(t))
		{
			*token = (int64) t;
			return true;
		}
		snprintf(err, len, "file \"%s\" is damaged", TOKEN_FILE);
		return false;
	}
	if (errno != ENOENT)
	{
		snprintf(err, len, "could not open file \"%s\": %m", TOKEN_FILE);
		return false;
	}
	if (!pg_strong_random(&t, sizeof(t)))
	{
		strlcpy(err, "could not generate a random lease token", len);
		return false;
	}
	fd = OpenTransientFile(TOKEN_TMP, O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY);
	if (fd < 0 || write(fd, &t, sizeof(t)) != sizeof(t) || pg_fsync(fd) != 0)
	{
		snprintf(err, len, "could not write file \"%s\": %m", TOKEN_TMP);
		if (fd >= 0)
			CloseTransientFile(fd);
		return false;
	}
	CloseTransientFile(fd);
	if (durable_rename(TOKEN_TMP, TOKEN_FILE, LOG) != 0)
	{
		snprintf(err, len, "could not rename file \"%s\" to \"%s\" (the server log says why)",
				 TOKEN_TMP, TOKEN_FILE);
		return false;
	}
	*token = (int64) t;
	return true;
}

/*
 * Whether the setting parses.  libpq's words for why not may quote the
 * setting, password and all: only the server log, which a superuser
 * reads, gets them.
 */
static bool
conninfo_parses(char *err, size_t len)
{
	char	   *why = NULL;
	PQconninfoOption *opts = PQconninfoParse(registry_conninfo(), &why);

	if (opts != NULL)
	{
		PQconninfoFree(opts);
		return true;
	}
	ereport(LOG,
			(errmsg("snowflake.registry could not be parsed"),
			 errdetail_internal("%s", why != NULL ? why : "out of memory")));
	if (why != NULL)
		PQfreemem(why);
	strlcpy(err, "snowflake.registry could not be parsed as a connection string; the server log says why", len);
	return false;
}

/*
 * The session's options: the setting's own, then READ COMMITTED (the only
 * level at which the lease sees what a concurrent one committed) and a
 * commit that waits for the registry's synchronous standbys.
 */
static const char *
session_options(void)
{
	const char *ours = "-c default_transaction_isolation=read\\ committed -c synchronous_commit=on";
	PQconninfoOption *opts = PQconninfoParse(registry_conninfo(), NULL);
	const char *all = ours;

	if (opts == NULL)
		return ours;
	for (PQconninfoOption *o = opts; o->keyword != NULL; o++)
		if (strcmp(o->keyword, "options") == 0 && o->val != NULL && o->val[0] != '\0')
			all = psprintf("%s %s", o->val, ours);
	PQconninfoFree(opts);
	return all;
}

/*
 * Ask the registry for this node's lease: the worker id and the floor its
 * last holder reached; with held (not 0), renew the lease of that worker
 * id the node holds.  false with libpq's (or the registry's) words in err
 * if it could not, and in *said the reason the registry gave against this
 * server: REASON_LEASE_TAKEN (SR002, another server of this system holds
 * its lease), REASON_LEASE_LOST (SR005, another lease holds the worker id
 * held), else REASON_NONE.
 */
static bool
lease(int held, int *worker, int64 *floor, NodeReason *said, char *err, size_t len)
{
	const char *keys[] = {"dbname", "options", "fallback_application_name", NULL};
	const char *vals[] = {registry_conninfo(), session_options(), "snowflake keeper", NULL};
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), LEASE_TIMEOUT_MS);
	PostgresPollingStatusType st = PGRES_POLLING_WRITING;
	const char *params[5];
	const char *name = GetConfigOption("cluster_name", true, false);
	PGconn	   *conn;
	PGresult   *res;
	int64		token;
	bool		ok = false;
	bool		failed = false;

	*said = REASON_NONE;
	if (!conninfo_parses(err, len))
		return false;
	if (!lease_token(&token, err, len))
		return false;
	conn = PQconnectStartParams(keys, vals, true);
	if (conn == NULL)
	{
		strlcpy(err, "out of memory", len);
		return false;
	}
	while (PQstatus(conn) != CONNECTION_BAD &&
		   st != PGRES_POLLING_OK && st != PGRES_POLLING_FAILED)
	{
		if (!wait_socket(conn, st == PGRES_POLLING_READING ?
						 WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE, deadline))
		{
			snprintf(err, len, "no connection within %d ms", LEASE_TIMEOUT_MS);
			goto done;
		}
		st = PQconnectPoll(conn);
	}
	if (PQstatus(conn) != CONNECTION_OK)
	{
		libpq_error(conn, err, len);
		goto done;
	}

	/* signed, as pg_control_system() and snowflake_workers show it */
	params[0] = psprintf(INT64_FORMAT, (int64) identity_system());
	params[1] = psprintf(INT64_FORMAT, token);
	params[2] = name != NULL ? name : "";
	params[3] = psprintf("%lld", (long long) Min(layout_max_worker(snowflake_layout),
												 REGISTRY_MAX_WORKER));
	params[4] = psprintf("%d", held);
	if (!PQsendQueryParams(conn,
						   "SELECT worker_id, floor FROM snowflake.snowflake_registry_lease($1::pg_catalog.int8, $2::pg_catalog.int8, $3::pg_catalog.text, $4::pg_catalog.int4, $5::pg_catalog.int4)",
						   5, NULL, params, NULL, NULL, 0))
	{
		libpq_error(conn, err, len);
		goto done;
	}
	/* every result to the end: a commit that fails comes after the rows */
	for (;;)
	{
		while (PQisBusy(conn))
		{
			if (!wait_socket(conn, WL_SOCKET_READABLE, deadline))
			{
				snprintf(err, len, "no answer within %d ms", LEASE_TIMEOUT_MS);
				ok = false;
				goto done;
			}
			if (!PQconsumeInput(conn))
			{
				libpq_error(conn, err, len);
				ok = false;
				goto done;
			}
		}
		res = PQgetResult(conn);
		if (res == NULL)
			break;
		if (failed)
			;
		else if (PQresultStatus(res) != PGRES_TUPLES_OK)
		{
			const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);

			if (state != NULL && strcmp(state, "SR002") == 0)
				*said = REASON_LEASE_TAKEN;
			else if (state != NULL && strcmp(state, "SR005") == 0)
				*said = REASON_LEASE_LOST;
			libpq_error(conn, err, len);
			failed = true;
			ok = false;
		}
		else if (ok || PQntuples(res) != 1 || PQnfields(res) != 2 ||
				 PQgetisnull(res, 0, 0) || PQgetisnull(res, 0, 1))
		{
			strlcpy(err, "snowflake_registry_lease() returned no lease", len);
			failed = true;
			ok = false;
		}
		else
		{
			*worker = pg_strtoint32(PQgetvalue(res, 0, 0));
			*floor = pg_strtoint64(PQgetvalue(res, 0, 1));
			ok = true;
		}
		PQclear(res);
	}

done:
	PQfinish(conn);
	return ok;
}

/*
 * Make the lease the node's: in its record, durable, above its floor.  A
 * renewal (renew) changes the record only where it ends a lost lease or
 * the floor is above the last ID (a release of the worker id by a
 * superuser may give one).
 */
static void
record_lease(int worker, int64 floor, bool renew)
{
	NodeRecord	next;
	bool		was_lost;
	bool		write;

	LWLockAcquire(node_shared->lock, LW_EXCLUSIVE);
	next = node_shared->rec;
	was_lost = next.lease_lost != 0 ||
		pg_atomic_read_u32(&node_shared->registry_found) == REASON_LEASE_LOST;
	write = !renew || was_lost || floor > mark_last_id();
	next.leased = worker + 1;
	next.lease_lost = 0;
	if (write && floor > 0)
	{
		/* as a confirmation's floor: logged, so standbys continue above it */
		int64		last = mark_repair_locked(floor, false, true, &next);

		mark_repair_save(&next, true, last, false);
	}
	else if (write && !node_save(&next, SAVE_BOTH, LOG))
	{
		strlcpy(node_shared->registry_error,
				"the lease could not be written to the node's record", sizeof(node_shared->registry_error));
		LWLockRelease(node_shared->lock);
		return;
	}
	node_shared->registry_error[0] = '\0';
	node_shared->registry_gap = RETRY_FIRST_MS;
	node_shared->registry_renew_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), RENEW_MS);
	pg_atomic_write_u32(&node_shared->registry_found, REASON_NONE);
	if (write)
		identity_log_record(&node_shared->rec);
	LWLockRelease(node_shared->lock);
	if (renew && write)
		ereport(LOG,
				(errmsg("snowflake renewed its lease of worker id %d from registry \"%s\"",
						worker, registry_display()),
				 errdetail("New IDs continue above %lld and above every ID this node issued.",
						   (long long) floor)));
	else if (write && floor > 0)
		ereport(LOG,
				(errmsg("snowflake leased worker id %d from registry \"%s\"",
						worker, registry_display()),
				 errdetail("New IDs continue above %lld, the floor its last holder reached.",
						   (long long) floor)));
	else if (write)
		ereport(LOG,
				(errmsg("snowflake leased worker id %d from registry \"%s\"",
						worker, registry_display()),
				 errdetail("No server held it before.")));
	/* apply and publish it, as a reload of the worker id is */
	identity_keep(false);
}

/*
 * The keeper's round: lease a worker id if the node wants one and has none
 * (a registry named, no worker id set by hand, a record it can read and
 * write, recovery's floor applied), at most once per pause; renew the one
 * it holds when that is due.
 */
void
registry_keep(void)
{
	static MemoryContext cxt = NULL;
	MemoryContext old;
	TimestampTz next_try;
	bool		usable;
	int			held;

	if (!settings_registry_named() || node_found(CHECK_CONFIG) != REASON_NONE)
		return;
	/*
	 * Only a node that merely lacks a worker id leases, and only a ready one
	 * renews: one held (a copy above all, whose system identifier is its
	 * source's) never asks.
	 */
	LWLockAcquire(node_shared->lock, LW_SHARED);
	usable = (int) (int32) pg_atomic_read_u32(&node_shared->configured) == WORKER_ID_UNSET &&
		node_shared->rec.reason == REASON_NONE &&
		node_shared->rec.state == NODE_READY &&
		node_found(CHECK_FILE) == REASON_NONE &&
		node_found(CHECK_MARK) == REASON_NONE &&
		node_found(CHECK_FLOOR) == REASON_NONE;
	/* the registry leases from 1 up: 0 held is none to renew */
	held = node_shared->rec.leased > 0 ? node_shared->rec.leased - 1 : -1;
	next_try = held < 0 ? node_shared->registry_next_try : node_shared->registry_renew_at;
	LWLockRelease(node_shared->lock);
	if (!usable || held == 0 || GetCurrentTimestamp() < next_try)
		return;

	/* what a try allocates is freed after it: the registry may be down for days */
	if (cxt == NULL)
		cxt = AllocSetContextCreate(TopMemoryContext, "snowflake registry",
									ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(cxt);
	try_lease(Max(held, 0));
	MemoryContextSwitchTo(old);
	MemoryContextReset(cxt);
}

/*
 * One try: lease (held 0) or renew the lease of worker id held, and record
 * the lease or why there is none.  A renewal that fails for any cause but
 * SR005 leaves the node generating, and a lease lost stays lost until a
 * renewal succeeds.
 */
static void
try_lease(int held)
{
	int			worker = 0;
	int64		floor = 0;
	NodeReason	said = REASON_NONE;
	char		err[sizeof(node_shared->registry_error)] = "";
	const SnowflakeLayout *l = snowflake_layout;
	int			gap;

	LWLockAcquire(node_shared->lock, LW_SHARED);
	gap = node_shared->registry_gap > 0 ? node_shared->registry_gap : RETRY_FIRST_MS;
	LWLockRelease(node_shared->lock);

	if (lease(held, &worker, &floor, &said, err, sizeof(err)))
	{
		/* a lease this layout cannot carry is none */
		if (worker < 0 || worker > layout_max_worker(l))
			snprintf(err, sizeof(err),
					 "the registry leased worker id %d, and the largest of layout \"%s\" is %lld",
					 worker, l->name, (long long) layout_max_worker(l));
		else if (floor < 0 || floor >= layout_max_id(l))
			snprintf(err, sizeof(err),
					 "the registry gave floor %lld, outside layout \"%s\"",
					 (long long) floor, l->name);
		else if (held > 0 && worker != held)
		{
			snprintf(err, sizeof(err),
					 "the registry renewed worker id %d as worker id %d", held, worker);
			said = REASON_LEASE_LOST;
		}
		else
		{
			/*
			 * Should recording it fail (an ERROR ends the keeper), its next
			 * start waits the pause, and the refusal says why.
			 */
			LWLockAcquire(node_shared->lock, LW_EXCLUSIVE);
			if (held == 0)
				snprintf(node_shared->registry_error, sizeof(node_shared->registry_error),
						 "the lease of worker id %d could not be recorded in the node's record; the server log says why",
						 worker);
			node_shared->registry_next_try = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), gap);
			node_shared->registry_renew_at = node_shared->registry_next_try;
			node_shared->registry_gap = Min(gap * 2, RETRY_MOST_MS);
			LWLockRelease(node_shared->lock);
			record_lease(worker, floor, held > 0);
			return;
		}
	}
	/* a renewal the registry answered with another server's lease */
	if (held > 0 && said != REASON_NONE)
		said = REASON_LEASE_LOST;
	LWLockAcquire(node_shared->lock, LW_EXCLUSIVE);
	/* a lost lease keeps the registry's words until it is renewed */
	if (said != REASON_NONE || !node_lease_lost())
		strlcpy(node_shared->registry_error, err, sizeof(node_shared->registry_error));
	if (held == 0)
		pg_atomic_write_u32(&node_shared->registry_found, said);
	else if (said == REASON_LEASE_LOST)
	{
		NodeRecord	next = node_shared->rec;

		/*
		 * Durable and logged, so that neither a restart nor a standby
		 * promoted generates under it before a renewal; should the write
		 * fail, this start still refuses.  The worker id in force is
		 * withdrawn: calls meet the verdict.
		 */
		pg_atomic_write_u32(&node_shared->registry_found, REASON_LEASE_LOST);
		next.lease_lost = 1;
		if (!node_shared->rec.lease_lost && node_save(&next, SAVE_BOTH, LOG))
			identity_log_record(&node_shared->rec);
		identity_publish();
	}
	node_shared->registry_next_try = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), gap);
	node_shared->registry_renew_at = node_shared->registry_next_try;
	node_shared->registry_gap = Min(gap * 2, RETRY_MOST_MS);
	LWLockRelease(node_shared->lock);
	if (held > 0)
		ereport(LOG,
				(errmsg("snowflake could not renew its lease of worker id %d from registry \"%s\"",
						held, registry_display()),
				 errdetail_internal("%s", err),
				 errhint("The keeper tries again in %d ms.", gap)));
	else
		ereport(LOG,
				(errmsg("snowflake could not lease a worker id from registry \"%s\"",
						registry_display()),
				 errdetail_internal("%s", err),
				 errhint("The keeper tries again in %d ms.", gap)));
}
