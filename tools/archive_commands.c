/*
 * tools/archive_commands.c — archive-push (archive_command) and archive-get
 * (restore_command).
 *
 * archive-get is on the critical path of replay: PostgreSQL runs it once per segment,
 * one after the other. After serving a segment it forks a short-lived child that fetches
 * the next N segments (PAGEBACK_ARCHIVE_PREFETCH, default 4, 0 = off) into a spool
 * beside the destination (pg_wal/pageback-spool) and exits; the next call finds its
 * segment there and only verifies and decompresses it. The fork lives here, not in the
 * engine, because only the program may decide about processes.
 */
#include "tools/commands.h"

#include "engine/wal/wal.h"
#include "engine/chain/chain.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PREFETCH_DEFAULT 4u
#define PREFETCH_MAX 64u
#define SPOOL_NAME "pageback-spool"

/* What a WAL segment's first page says must match its name before it enters the
 * repository (arch_check_local_segment), and its xlp_sysid the cluster's: a segment of
 * another cluster must not enter this repository. The first segment pushed to a new
 * repository records the identity. */
static int check_wal_identity(repo *r, const char *path, pb_error *err)
{
    const char *name = strrchr(path, '/');
    name = name ? name + 1 : path;
    bool segment = false;
    uint64_t sysid = 0;
    int rc = arch_check_local_segment(path, &segment, &sysid, err);
    if (rc == 0 && segment)
        rc = chain_check_identity(r, sysid, true, err);
    return rc ? pb_error_wrap(err, "refusing to archive %s", name) : 0;
}

int cmd_archive_push(pb_options *o, cmd_outcome *res)
{
    pb_error err = PB_ERROR_INIT;
    if (o->nargs != 1) {
        return cmd_usage_error(res, "archive-push needs the WAL file path (%%p)");
    }
    repo *r = NULL;
    int rc = cmd_open_repo(&r, o, &err);
    if (rc == 0)
        rc = check_wal_identity(r, o->args[0], &err);
    if (rc == 0)
        rc = arch_push(r, o->args[0], &err);
    repo_free(r);
    cmd_note_archive_push(o, rc == 0);
    return rc ? cmd_report(res, &err) : 0;
}

/* Segments to fetch ahead: PAGEBACK_ARCHIVE_PREFETCH, bounded. */
static unsigned prefetch_count(void)
{
    const char *v = getenv("PAGEBACK_ARCHIVE_PREFETCH");
    if (!v || !*v)
        return PREFETCH_DEFAULT;
    char *end;
    unsigned long n = strtoul(v, &end, 10);
    if (*end) {
        pb_warn("PAGEBACK_ARCHIVE_PREFETCH='%s' is not a number: using %u", v,
                PREFETCH_DEFAULT);
        return PREFETCH_DEFAULT;
    }
    return n > PREFETCH_MAX ? PREFETCH_MAX : (unsigned)n;
}

/* pg_wal/RECOVERYXLOG -> pg_wal/pageback-spool */
static void spool_dir_of(const char *dest, char *out, size_t cap)
{
    const char *slash = strrchr(dest, '/');
    if (slash)
        snprintf(out, cap, "%.*s/%s", (int)(slash - dest), dest, SPOOL_NAME);
    else
        snprintf(out, cap, "%s", SPOOL_NAME);
}

/* The spool is tied to one repository: its location and S3 endpoint. */
static void repo_identity(const pb_options *o, char *out, size_t cap)
{
    snprintf(out, cap, "%s %s", o->repo.location ? o->repo.location : "",
             o->repo.s3_endpoint ? o->repo.s3_endpoint : "");
}

/* Child: fetch ahead, then leave. Never returns. */
static void prefetch_child(pb_options *o, const char *spool, const char *name,
                           uint32_t seg_size, unsigned count)
{
    setsid(); /* not part of the server's process group: its signals are for it */
    int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
        dup2(devnull, STDIN_FILENO);
        dup2(devnull, STDOUT_FILENO);
        close(devnull);
    }
    pb_error err = PB_ERROR_INIT;
    repo *r = NULL;
    int rc = cmd_open_repo(&r, o, &err);
    if (rc == 0)
        rc = arch_prefetch(r, spool, name, seg_size, count, &err);
    if (rc)
        pb_warn("prefetch after %s stopped: %s", name, err.msg);
    repo_free(r);
    _exit(rc ? 1 : 0);
}

static void start_prefetch(pb_options *o, const char *spool, const char *name,
                           const char *dest, unsigned count)
{
    struct stat st;
    if (stat(dest, &st) != 0 || !arch_valid_seg_size((uint64_t)st.st_size))
        return; /* not a full segment: nothing sensible follows */
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0)
        prefetch_child(o, spool, name, (uint32_t)st.st_size, count);
    if (pid < 0)
        pb_debug("cannot fork the prefetcher: fetching on demand");
    /* The parent does not wait: the child is reparented and reaped by init. */
}

static bool is_plain_segment(const char *name)
{
    uint32_t tli;
    uint64_t segno;
    /* 1 MiB segments allow the widest segment field: every valid name parses. */
    return arch_parse_segment(name, 1u << 20, &tli, &segno);
}

/* Serve name from the spool (0), or say it is not there (PB_ENOENT). */
static int take_from_spool(pb_options *o, const char *spool, const char *name,
                           const char *dest, pb_error *err)
{
    char id[1200];
    repo_identity(o, id, sizeof(id));
    pb_error serr = PB_ERROR_INIT;
    if (arch_spool_prepare(spool, name, id, &serr) != 0) {
        pb_debug("spool unusable, fetching directly: %s", serr.msg);
        return PB_ENOENT;
    }
    int rc = arch_spool_take(spool, name, dest, err);
    if (rc == 0)
        pb_debug("%s served from the prefetch spool %s", name, spool);
    return rc;
}

int cmd_archive_get(pb_options *o, cmd_outcome *res)
{
    pb_error err = PB_ERROR_INIT;
    if (o->nargs != 2) {
        return cmd_usage_error(res, "archive-get needs the WAL file name (%%f) and destination (%%p)");
    }
    const char *name = o->args[0], *dest = o->args[1];
    unsigned ahead = prefetch_count();
    bool spooled = ahead > 0 && is_plain_segment(name);
    char spool[PATH_MAX];
    spool_dir_of(dest, spool, sizeof(spool));
    int rc = spooled ? take_from_spool(o, spool, name, dest, &err) : PB_ENOENT;
    if (rc == PB_ENOENT) {
        repo *r = NULL;
        rc = cmd_open_repo(&r, o, &err);
        if (rc == 0)
            rc = arch_get(r, name, dest, &err);
        repo_free(r);
    }
    if (rc == PB_ENOENT) {
        /* Normal at the end of the archive and when PostgreSQL probes for timelines:
         * a non-zero exit tells it "not found". */
        pb_debug("%s is not in the archive", name);
        return 1;
    }
    if (rc)
        return cmd_report(res, &err);
    if (spooled)
        start_prefetch(o, spool, name, dest, ahead);
    return 0;
}
