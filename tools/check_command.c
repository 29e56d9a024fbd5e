/*
 * tools/check_command.c — `pageback init` (the repository made for one cluster, by a
 * deliberate step: a mistyped --repo must not create a new repository) and `pageback
 * check` (engine/backup/backup.h: would a backup succeed now?).
 */
#include "tools/commands.h"

#include "engine/chain/chain.h"
#include "engine/backup/backup.h"
#include "engine/pg/pg.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

typedef struct check_out {
    const pb_options *o;
    cmd_outcome *res;
} check_out;

static void print_note(void *ctx, ck_status st, const char *setting, const char *what,
                       const char *fix)
{
    check_out *c = ctx;
    if (st == CK_FAIL) {
        /* The first failure is the run's error in --report. */
        if (!c->res->failed) {
            c->res->failed = true;
            c->res->err.code = PB_ESTATE;
            snprintf(c->res->err.msg, sizeof(c->res->err.msg), "%.40s: %.900s", setting,
                     what);
        }
        pb_log(PB_LOG_ERROR, "%s: %s; fix: %s", setting, what, fix ? fix : "-");
    } else if (st == CK_WARN) {
        pb_warn("%s: %s (%s)", setting, what, fix ? fix : "");
    } else if (!c->o->quiet) {
        printf("%-5s %s: %s\n", st == CK_OK ? "ok" : "skip", setting, what);
        fflush(stdout);
    }
}

int cmd_check(pb_options *o, cmd_outcome *res)
{
    if (o->nargs)
        return cmd_usage_error(res, "check takes no arguments, not '%s'", o->args[0]);
    pb_error err = PB_ERROR_INIT;
    check_out out = {o, res};
    ck_opts co = {
        .conninfo = o->backup.conninfo, .pgdata = o->backup.pgdata,
        .target = {o->repo.location, o->config_file, o->cluster},
        .archive_timeout_secs = o->archive_timeout, .note = print_note, .note_ctx = &out,
    };
    repo *r = NULL;
    unsigned failures = 0;
    if (cmd_open_repo(&r, o, &err)) {
        char fix[1200];
        snprintf(fix, sizeof(fix), "check --repo, or create the repository with pageback "
                 "init --repo %s", o->repo.location);
        print_note(&out, CK_FAIL, "--repo", err.msg, fix);
        failures++;
    }
    unsigned more = 0;
    ck_run(r, &co, &more, &err);
    failures += more;
    repo_free(r);
    if (failures) {
        pb_log(PB_LOG_ERROR, "check failed: %u problem%s (each above names its setting and "
               "fix); a backup would not succeed", failures, failures == 1 ? "" : "s");
        return CMD_EXIT_FAILED;
    }
    if (!o->quiet)
        printf("check passed: a backup of this cluster into %s can start\n",
               o->repo.location);
    return CMD_EXIT_OK;
}

/* The cluster's system identifier: --pgdata's pg_control, else the server's. */
static int init_system_id(const pb_options *o, uint64_t *out, pb_error *err)
{
    if (o->backup.pgdata)
        return ck_pgdata_system_id(o->backup.pgdata, out, err);
    pgc *c = NULL;
    pgc_info info;
    int rc = pgc_connect(&c, o->backup.conninfo, err);
    if (rc == 0 && (rc = pgc_info_get(c, &info, err)) == 0)
        *out = info.system_id;
    pgc_free(c);
    return rc ? pb_error_wrap(err, "init needs the cluster's system identifier: give "
                              "--pgdata DIR or a connection (--dbname, PG*)") : 0;
}

static int count_object(void *ctx, const char *key, uint64_t size)
{
    (void)key;
    (void)size;
    ++*(size_t *)ctx;
    return 0;
}

/* A local repository directory is made here (its parent must exist: a path with
 * several missing parts is more likely a typo than a plan). */
static int make_local(const char *loc, pb_error *err)
{
    if (strncmp(loc, "s3://", 5) == 0 || mkdir(loc, 0750) == 0 || errno == EEXIST)
        return 0;
    return pb_fail_errno(err, PB_EIO, "cannot create repository directory %s", loc);
}

static int init_repo(repo *r, uint64_t sysid, bool *created, pb_error *err)
{
    *created = false;
    int rc = repo_stat(r, CHAIN_IDENTITY_KEY, NULL, err);
    if (rc == 0)
        return chain_check_identity(r, sysid, false, err);
    if (rc != PB_ENOENT)
        return rc;
    size_t n = 0;
    if ((rc = repo_list(r, "", count_object, &n, err)))
        return rc;
    if (n)
        return pb_fail(err, PB_ESTATE, "%s holds %zu objects but no %s: not a pageback "
                       "repository, and init does not take over a location in use (give "
                       "an empty or new location)", repo_location(r), n, CHAIN_IDENTITY_KEY);
    *created = true;
    return chain_check_identity(r, sysid, true, err);
}

int cmd_init(pb_options *o, cmd_outcome *res)
{
    if (o->nargs)
        return cmd_usage_error(res, "init takes no arguments, not '%s'", o->args[0]);
    pb_error err = PB_ERROR_INIT;
    uint64_t sysid = 0;
    repo *r = NULL;
    bool created = false;
    int rc = init_system_id(o, &sysid, &err);
    if (rc == 0)
        rc = make_local(o->repo.location, &err);
    if (rc == 0)
        rc = cmd_open_repo(&r, o, &err);
    if (rc == 0)
        rc = init_repo(r, sysid, &created, &err);
    repo_free(r);
    if (rc)
        return cmd_report(res, &err);
    if (!o->quiet)
        printf("repository %s %s for the cluster with system identifier %" PRIu64 "\n",
               o->repo.location, created ? "initialized" : "already initialized", sysid);
    return CMD_EXIT_OK;
}
