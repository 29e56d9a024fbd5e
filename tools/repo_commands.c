/* tools/repo_commands.c — expire: removes what retention no longer keeps (info: tools/info_command.c). */
#include "tools/commands.h"
#include "tools/annotations.h"

#include "engine/wal/wal.h"
#include "engine/chain/chain.h"
#include "common/fault.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- expire ---- */

/* A usage problem of expire's options in one line, or NULL when they are complete. */
static const char *expire_usage(const pb_options *o)
{
    int ways = (o->retain_full > 0) + (o->retain_full_days > 0) + (o->restore.set != NULL);
    if (ways == 0)
        return "expire needs --retain-full N, --retain-full-days D or --set ID";
    if (ways > 1)
        return "expire takes one of --retain-full, --retain-full-days and --set";
    return NULL;
}

/* The time a retention window is measured from: the clock, or
 * PAGEBACK_TEST_RETENTION_NOW (unix seconds): a test cannot wait days, so it moves "now"
 * instead of the backups. */
static int64_t retention_now(void)
{
    const char *v = getenv("PAGEBACK_TEST_RETENTION_NOW"); /* tests only */
    char *end;
    long long t = v && *v ? strtoll(v, &end, 10) : 0;
    return v && *v && !*end && t > 0 ? (int64_t)t : (int64_t)time(NULL);
}

/* Expire removes backups: it holds the repository's writer lock (storage.h) so that no
 * backup builds on a parent it is removing, and no rebase reads one. */
int cmd_expire(pb_options *o, cmd_outcome *res)
{
    const char *usage = expire_usage(o);
    if (usage)
        return cmd_usage_error(res, "%s", usage);
    pb_error err = PB_ERROR_INIT;
    repo *r = NULL;
    repo_lock *lock = NULL;
    int rc = cmd_open_repo(&r, o, &err);
    if (rc == 0)
        rc = repo_lock_acquire(r, "expire", &lock, &err);
    /* What a killed backup, rebase or expire left goes first (as backup does it), so an
     * expire killed between a manifest and its packs is finished by the next one; that
     * failing does not block the expire. */
    pb_error cerr = PB_ERROR_INIT;
    if (rc == 0 && !o->dry_run && chain_cleanup(r, lock, &cerr) != 0)
        pb_warn("could not clean up after earlier interrupted runs: %s", cerr.msg);
    chain_expire_opts eo = {(unsigned)o->retain_full, o->retain_full_days, o->retain_archive,
                            o->restore.set, o->dry_run, retention_now(),
                            o->quiet ? NULL : stdout};
    if (rc == 0)
        rc = chain_expire(r, &eo, &err);
    repo_lock_release(lock);
    repo_free(r);
    return rc ? cmd_report(res, &err) : 0;
}
