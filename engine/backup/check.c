/*
 * engine/backup/check.c — `pageback check` (engine/backup/backup.h): the server's side (data
 * directory, wal_level, archive_mode, archive_command, the archiver's failures), the
 * repository's (initialized for this cluster, writable, private) and the round trip of
 * one forced WAL segment, which is the proof the others only point at: a backup waits
 * for exactly that trip at its stop point.
 */
#include "engine/backup/backup.h"

#include "engine/backup/backup_internal.h"
#include "engine/backup/backup_identity_internal.h"
#include "engine/chain/chain.h"
#include "engine/pg/pg.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define PROBE_KEY "pageback.check"

typedef struct run {
    const ck_opts *o;
    unsigned failures;
} run;

static void note(run *k, ck_status st, const char *setting, const char *fix,
                 const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void note(run *k, ck_status st, const char *setting, const char *fix,
                 const char *fmt, ...)
{
    char what[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    if (st == CK_FAIL)
        k->failures++;
    if (k->o->note)
        k->o->note(k->o->note_ctx, st, setting, what, fix);
}

static void check_pgdata(run *k, const pgc_info *info)
{
    pb_error err = PB_ERROR_INIT;
    const char *pgdata = k->o->pgdata ? k->o->pgdata : info->data_directory;
    if (bk_check_pgdata(pgdata, info, &err))
        note(k, CK_FAIL, "--pgdata", "give --pgdata the server's data_directory (SHOW "
             "data_directory), on the server's host", "%s", err.msg);
    else
        note(k, CK_OK, "--pgdata", NULL, "%s is the server's data directory (system "
             "identifier %" PRIu64 ")", pgdata, info->system_id);
    if (!strcmp(info->wal_level, "minimal"))
        note(k, CK_FAIL, "wal_level", "set wal_level = replica in postgresql.conf and "
             "restart the server", "wal_level is minimal: WAL cannot restore a backup");
}

/* archive_mode; true when this server archives (a standby with archive_mode = on
 * leaves it to the primary). */
static bool check_archive_mode(run *k, pgc *c, const pgc_info *info)
{
    pb_error err = PB_ERROR_INIT;
    char mode[32];
    if (pgc_query_text(c, "SHOW archive_mode", mode, sizeof(mode), &err)) {
        note(k, CK_FAIL, "archive_mode", "grant the check's role pg_read_all_settings",
             "%s", err.msg);
        return false;
    }
    if (!strcmp(mode, "off")) {
        note(k, CK_FAIL, "archive_mode", "set archive_mode = on in postgresql.conf and "
             "restart the server", "archive_mode is off: no WAL reaches the repository");
        return false;
    }
    if (info->in_recovery && strcmp(mode, "always"))
        note(k, CK_SKIP, "archive_mode", NULL, "archive_mode is %s on a standby: the primary "
             "archives (run pageback check against the primary to test it)", mode);
    else
        note(k, CK_OK, "archive_mode", NULL, "archive_mode is %s", mode);
    return !info->in_recovery || !strcmp(mode, "always");
}

static void check_archive_command(run *k, pgc *c)
{
    pb_error err = PB_ERROR_INIT;
    char cmd[4096], lib[256], why[1024], fix[4096];
    if (pgc_query_text(c, "SELECT current_setting('archive_library', true) IS NOT NULL "
                       "AND current_setting('archive_library', true) <> ''", lib,
                       sizeof(lib), &err) == 0 && !strcmp(lib, "t")) {
        note(k, CK_FAIL, "archive_library", "set archive_library = '' and archive_command "
             "= 'pageback archive-push %p ...', then SELECT pg_reload_conf()",
             "archive_library is set: the server archives through a module, not "
             "archive_command");
        return;
    }
    if (pgc_query_text(c, "SHOW archive_command", cmd, sizeof(cmd), &err)) {
        note(k, CK_FAIL, "archive_command", "grant the check's role pg_read_all_settings",
             "%s", err.msg);
        return;
    }
    snprintf(fix, sizeof(fix), "set archive_command = 'pageback archive-push %%p --repo "
             "%s%s%s%s%s', then SELECT pg_reload_conf()", k->o->target.repo,
             k->o->target.config ? " --config " : "",
             k->o->target.config ? k->o->target.config : "",
             k->o->target.cluster ? " --cluster " : "",
             k->o->target.cluster ? k->o->target.cluster : "");
    switch (ck_archive_command(cmd, &k->o->target, why, sizeof(why))) {
    case CK_CMD_SAME: note(k, CK_OK, "archive_command", NULL, "%s", why); break;
    case CK_CMD_UNKNOWN:
        note(k, CK_WARN, "archive_command", "the round trip below decides", "%s", why);
        break;
    default: note(k, CK_FAIL, "archive_command", fix, "%s", why); break;
    }
}

/* pg_stat_archiver: a failure newer than the last success means archiving is stuck. */
static void check_archiver(run *k, pgc *c)
{
    pb_error err = PB_ERROR_INIT;
    char v[512];
    static const char q[] =
        "SELECT CASE WHEN last_failed_time IS NOT NULL AND last_failed_time > "
        "coalesce(last_archived_time, '-infinity') THEN failed_count || ' failures, the "
        "last of ' || coalesce(last_failed_wal, '?') || ' at ' || last_failed_time || ' (last "
        "archived: ' || coalesce(last_archived_wal || ' at ' || last_archived_time, 'none') "
        "|| ')' ELSE '' END FROM pg_stat_archiver";
    if (pgc_query_text(c, q, v, sizeof(v), &err))
        note(k, CK_FAIL, "pg_stat_archiver", "grant the check's role pg_monitor", "%s",
             err.msg);
    else if (v[0])
        note(k, CK_FAIL, "archive_command", "read the server log for archive_command's "
             "error and fix it; archiving resumes by itself", "the archiver is failing "
             "(pg_stat_archiver): %s", v);
    else
        note(k, CK_OK, "pg_stat_archiver", NULL, "no archive failure since the last "
             "success");
}

static void check_permissions(run *k, const char *loc)
{
    struct stat st;
    if (strncmp(loc, "s3://", 5) == 0 || stat(loc, &st) != 0)
        return;
    if (st.st_mode & (S_IWGRP | S_IRWXO))
        note(k, CK_FAIL, "repository", "chmod 0750 the repository directory (objects "
             "are 0640, directories 0750)", "repository directory %s has mode %04o: "
             "others may read it or others may write it", loc,
             (unsigned)(st.st_mode & 07777));
    else
        note(k, CK_OK, "repository", NULL, "%s has private permissions (%04o)", loc,
             (unsigned)(st.st_mode & 07777));
}

/* Initialized for this cluster, writable, private: false when WAL cannot go there. */
static bool check_repo(run *k, repo *r, const pgc_info *info)
{
    pb_error err = PB_ERROR_INIT;
    const char *loc = repo_location(r);
    char fix[8400];
    uint64_t size;
    int rc = repo_stat(r, CHAIN_IDENTITY_KEY, &size, &err);
    snprintf(fix, sizeof(fix), "pageback init --repo %s --pgdata %s", loc,
             k->o->pgdata ? k->o->pgdata : info->data_directory);
    if (rc == PB_ENOENT) {
        note(k, CK_FAIL, "repository", fix, "%s is not initialized (no %s)", loc,
             CHAIN_IDENTITY_KEY);
        return false;
    }
    if (rc || (rc = chain_check_identity(r, info->system_id, false, &err))) {
        note(k, CK_FAIL, "--repo", "give --repo (and archive_command) this cluster's "
             "repository", "%s", err.msg);
        return false;
    }
    note(k, CK_OK, "repository", NULL, "%s is initialized for system identifier %" PRIu64,
         loc, info->system_id);
    if (repo_put(r, PROBE_KEY, "check\n", 6, &err) || repo_delete(r, PROBE_KEY, &err)) {
        note(k, CK_FAIL, "repository", "let the server's user (who runs archive_command) "
             "write the repository", "%s", err.msg);
        return false;
    }
    note(k, CK_OK, "repository", NULL, "%s is writable", loc);
    check_permissions(k, loc);
    return true;
}

/* Something to switch away from (an xid's commit record), the switch, and the wait. */
static void round_trip(run *k, pgc *c, repo *r)
{
    pb_error err = PB_ERROR_INIT;
    char xid[32], seg[64];
    double t0 = pb_now();
    bool arrived = false;
    if (pgc_query_text(c, "SELECT pg_current_xact_id()", xid, sizeof(xid), &err) ||
        pgc_query_text(c, "SELECT pg_walfile_name(pg_switch_wal())", seg, sizeof(seg),
                       &err)) {
        note(k, CK_FAIL, "pg_switch_wal", "run check as a superuser or GRANT EXECUTE ON "
             "FUNCTION pg_switch_wal() to the check's role", "%s", err.msg);
        return;
    }
    if (ck_wait_archived(r, seg, k->o->archive_timeout_secs, &arrived, &err)) {
        note(k, CK_FAIL, "repository", "make the repository readable", "%s", err.msg);
        return;
    }
    if (!arrived) {
        char v[512] = "";
        /* A server that reports the segment archived ran a command that did not push
         * it here; one that reports a failure has the error in its log. */
        pgc_query_text(c, "SELECT ' (pg_stat_archiver: ' || CASE WHEN last_failed_time > "
                       "coalesce(last_archived_time, '-infinity') THEN 'last failed ' || "
                       "last_failed_wal || ' at ' || last_failed_time ELSE 'last archived ' "
                       "|| coalesce(last_archived_wal, 'none') END || ')' FROM "
                       "pg_stat_archiver", v, sizeof(v), &err);
        note(k, CK_FAIL, "archive_command", "fix archive_command (the server log has its "
             "error), or raise --archive-timeout if archiving is only slow",
             "WAL segment %s (switched by pg_switch_wal) did not reach %s within "
             "--archive-timeout %u s%s", seg, repo_location(r), k->o->archive_timeout_secs,
             v);
        return;
    }
    note(k, CK_OK, "archive", NULL, "WAL segment %s reached %s in %.1f s", seg,
         repo_location(r), pb_now() - t0);
}

int ck_run(repo *r, const ck_opts *o, unsigned *failures, pb_error *err)
{
    run k = {o, 0};
    pgc *c = NULL;
    pgc_info info;
    int rc = pgc_connect(&c, o->conninfo, err);
    if (rc == 0)
        rc = pgc_info_get(c, &info, err);
    if (rc) {
        note(&k, CK_FAIL, "--dbname", "give --dbname a connection to the server (or PG* "
             "variables)", "%s", err->msg);
        pgc_free(c);
        *failures = k.failures;
        return rc;
    }
    check_pgdata(&k, &info);
    bool archiving = check_archive_mode(&k, c, &info);
    bool here = !info.in_recovery; /* a standby cannot switch WAL */
    if (archiving) {
        check_archive_command(&k, c);
        check_archiver(&k, c);
    }
    bool repo_ok = r && check_repo(&k, r, &info);
    if (!here)
        note(&k, CK_SKIP, "archive", NULL, "the server is a standby: a WAL switch cannot be "
             "forced here, so the round trip is left to pageback check on the primary");
    else if (archiving && repo_ok)
        round_trip(&k, c, r);
    pgc_free(c);
    *failures = k.failures;
    return 0;
}
