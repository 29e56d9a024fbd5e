/* tools/commands.c — the pageback commands: parse-free glue between options and modules. */
#include "tools/commands.h"

#include "engine/wal/wal.h"
#include "engine/chain.h"
#include "engine/scan.h"

#include <inttypes.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The repository location as one string per repository: "/srv/r", "/srv/r/" and
 * "/srv/./r" give one state directory (and a local path resolves through links). */
static void canonical_location(const char *loc, char *out, size_t cap)
{
    char real[PATH_MAX];
    if (strncmp(loc, "s3://", 5) != 0 && realpath(loc, real))
        loc = real;
    size_t n = strlen(loc);
    while (n > 1 && loc[n - 1] == '/')
        n--;
    snprintf(out, cap, "%.*s", (int)n, loc);
}

/* The local catalog cache: one directory per repository, under the user's own state
 * directory ($XDG_STATE_HOME, else ~/.local/state), never at a predictable path in a
 * shared directory such as /tmp where another user could plant it first. The backup
 * refuses a state directory that is not the user's own or that others may write. */
static const char *state_dir(pb_options *o, char *buf, size_t cap)
{
    if (o->state_dir)
        return o->state_dir;
    char loc[PATH_MAX + 8];
    canonical_location(o->repo.location, loc, sizeof(loc));
    uint64_t h = pb_hash64(loc, strlen(loc));
    const char *xdg = getenv("XDG_STATE_HOME");
    if (xdg && xdg[0] == '/') {
        snprintf(buf, cap, "%s/pageback/%016" PRIx64, xdg, h);
        return buf;
    }
    const char *home = getenv("HOME");
    struct passwd *pw = NULL;
    if (!home || home[0] != '/')
        home = (pw = getpwuid(geteuid())) && pw->pw_dir && pw->pw_dir[0] == '/' ? pw->pw_dir
                                                                                : NULL;
    if (!home)
        return NULL;
    snprintf(buf, cap, "%s/.local/state/pageback/%016" PRIx64, home, h);
    return buf; /* created by the backup when missing */
}

const char *cmd_state_dir(pb_options *o, char *buf, size_t cap)
{
    return state_dir(o, buf, cap);
}

static void human(double bytes, char *out, size_t cap)
{
    const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024 && u < 4) {
        bytes /= 1024;
        u++;
    }
    snprintf(out, cap, "%.1f %s", bytes, units[u]);
}

int cmd_backup(pb_options *o)
{
    pb_error err = PB_ERROR_INIT;
    repo *r = NULL;
    char sd[4096];
    o->backup.state_dir = state_dir(o, sd, sizeof(sd));
    if (!o->backup.state_dir) {
        pb_log(PB_LOG_ERROR, "no home directory to keep the local catalog in: set "
               "--state-dir, PAGEBACK_STATE_DIR, XDG_STATE_HOME or HOME");
        return 2;
    }
    int rc = cmd_open_repo(&r, o, &err);
    mf_manifest *m = NULL; /* the committed manifest bk_run hands back */
    if (rc == 0)
        rc = bk_run(r, &o->backup, &m, &err);
    if (rc == 0) {
        const mf_backup *h = mf_header(m);
        char rd[32], st[32], a[32], b[32];
        human((double)h->bytes_read, rd, sizeof(rd));
        human((double)h->bytes_stored, st, sizeof(st));
        pb_lsn_format(h->start_lsn, a);
        pb_lsn_format(h->stop_lsn, b);
        printf("backup %s (%s) complete: LSN %s..%s, read %s in %.1f s (%.0f MB/s), "
               "pages scanned %" PRIu64 ", changed %" PRIu64 ", stored %s, checksum errors %"
               PRIu64 "\n", h->id, h->type == 'F' ? "full" : "incremental", a, b, rd,
               h->seconds, h->seconds > 0 ? h->bytes_read / h->seconds / 1e6 : 0.0,
               h->pages_scanned, h->pages_changed, st, h->checksum_errors);
        if (h->files_skipped || h->pages_missed || h->verify_scan) {
            human((double)h->bytes_skipped, rd, sizeof(rd));
            printf("  files skipped %" PRIu64 " (%s unread)%s, missed pages %" PRIu64 "\n",
                   h->files_skipped, rd, h->verify_scan ? ", verify scan" : "",
                   h->pages_missed);
        }
    }
    mf_free(m);
    repo_free(r);
    return rc ? cmd_report(&err) : 0;
}

static char *restore_command(pb_options *o)
{
    char *cmd = malloc(8192);
    if (!cmd)
        return NULL;
    int n = snprintf(cmd, 8192, "\"%s\" archive-get %%f \"%%p\" --repo \"%s\"", o->program,
                     o->repo.location);
    if (o->repo.s3_endpoint)
        n += snprintf(cmd + n, 8192 - (size_t)n, " --s3-endpoint \"%s\"", o->repo.s3_endpoint);
    if (o->repo.s3_region && strcmp(o->repo.s3_region, "us-east-1"))
        n += snprintf(cmd + n, 8192 - (size_t)n, " --s3-region \"%s\"", o->repo.s3_region);
    if (o->s3_uri_style)
        n += snprintf(cmd + n, 8192 - (size_t)n, " --s3-uri-style %s", o->s3_uri_style);
    if (o->s3_insecure_given)
        n += snprintf(cmd + n, 8192 - (size_t)n, " --s3-insecure");
    if (o->repo.s3_ca_file)
        n += snprintf(cmd + n, 8192 - (size_t)n, " --s3-ca-file \"%s\"", o->repo.s3_ca_file);
    if (o->config_file)
        snprintf(cmd + n, 8192 - (size_t)n, " --config \"%s\"", o->config_file);
    return cmd;
}

int cmd_restore(pb_options *o)
{
    pb_error err = PB_ERROR_INIT;
    if (!o->restore.target_dir) {
        pb_log(PB_LOG_ERROR, "restore needs --target-dir DIR");
        return 2;
    }
    if (o->restore.delta && o->restore.force) {
        pb_log(PB_LOG_ERROR, "give --delta or --force, not both");
        return 2;
    }
    repo *r = NULL;
    char *cmd = restore_command(o);
    o->restore.restore_command = cmd;
    char sd[4096];
    o->restore.state_dir = state_dir(o, sd, sizeof(sd)); /* caches what the WAL holds */
    rs_stats st;
    int rc = cmd_open_repo(&r, o, &err);
    if (rc == 0)
        rc = rs_restore(r, &o->restore, &st, &err);
    if (rc == 0) {
        char w[32], f[32];
        human((double)st.bytes_written, w, sizeof(w));
        human((double)st.bytes_fetched, f, sizeof(f));
        printf("restored backup %s (chain of %zu) into %s in %.1f s: %" PRIu64 " files, %"
               PRIu64 " pages written, %" PRIu64 " pages already right, %" PRIu64
               " frames read (%s fetched, %s written), %" PRIu64 " entries removed\n",
               st.id, st.chain_length, o->restore.target_dir, st.seconds, st.files_written,
               st.pages_written, st.pages_skipped, st.frames_read, f, w, st.files_removed);
    }
    free(cmd);
    repo_free(r);
    return rc ? cmd_report(&err) : 0;
}

/* One report line per backup and per problem; problems also go to stderr's log. */
static void verify_note(void *ctx, const char *id, bool problem, const char *msg)
{
    (void)ctx;
    if (problem)
        printf("  problem in %s: %s\n", id ? id : "the WAL archive", msg);
    else
        printf("%s%s\n", id ? "backup " : "", msg);
}

int cmd_verify(pb_options *o)
{
    pb_error err = PB_ERROR_INIT;
    repo *r = NULL;
    rs_verify_stats st;
    int rc = cmd_open_repo(&r, o, &err);
    if (rc == 0)
        rc = rs_verify_repo(r, o->restore.set, o->restore.jobs, verify_note, NULL, &st, &err);
    if ((rc == 0 || rc == PB_ECORRUPT) && o->restore.set)
        printf("verify %s: %zu problems in %.1f s\n", rc ? "FAILED" : "passed", st.problems,
               st.seconds);
    else if (rc == 0 || rc == PB_ECORRUPT)
        printf("verify %s: %zu backups (%zu failed), %" PRIu64 " frames, %" PRIu64
               " WAL segments, %" PRIu64 " history files checked; %zu problems in %.1f s\n",
               rc ? "FAILED" : "passed", st.backups, st.backups_failed, st.frames_read,
               st.wal_segments, st.wal_history, st.problems, st.seconds);
    fflush(stdout);
    repo_free(r);
    return rc ? cmd_report(&err) : 0;
}

int cmd_rebase(pb_options *o)
{
    pb_error err = PB_ERROR_INIT;
    repo *r = NULL;
    char id[MF_ID_LEN];
    repo_lock *lock = NULL;
    int rc = cmd_open_repo(&r, o, &err);
    if (rc == 0)
        rc = repo_lock_acquire(r, "rebase", &lock, &err);
    /* What a killed backup, rebase or expire left goes first (as backup does it); that
     * failing does not block the rebase. */
    pb_error cerr = PB_ERROR_INIT;
    if (rc == 0 && chain_cleanup(r, lock, &cerr) != 0)
        pb_warn("could not clean up after earlier interrupted runs: %s", cerr.msg);
    if (rc == 0)
        rc = rs_rebase(r, o->restore.set, o->backup.zstd_level, lock, id, &err);
    if (rc == 0)
        printf("synthetic full backup %s written\n", id);
    repo_lock_release(lock);
    repo_free(r);
    return rc ? cmd_report(&err) : 0;
}

int cmd_tune(pb_options *o)
{
    const char *path = o->backup.pgdata ? o->backup.pgdata : getenv("PGDATA");
    scan_io_plan plan; /* the plan a backup with these options would use */
    scan_plan_io(path ? path : ".", o->backup.read_size, o->backup.queue_depth, &plan);
    bool single = plan.layout == SCAN_LAYOUT_SINGLE;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    printf("data directory     %s\n", path ? path : "(not given; using the current directory)");
    printf("read size          %zu KiB  (%s)\n", plan.read_size / 1024,
           single ? "single device: small requests keep the database's reads from queueing"
           : plan.layout == SCAN_LAYOUT_GIVEN ? "given with --read-size" : plan.why);
    printf("queue depth        %u  (%s)\n", plan.queue_depth,
           o->backup.queue_depth ? "given with --queue-depth"
           : single ? "1 MiB in flight on one device" : "enough in flight to keep every disk busy");
    if (plan.adaptive)
        printf("in flight          adaptive: 1 to start, at most %u (docs/DESIGN.md, \"Polite "
               "I/O\"); the queue depth above applies when pinned\n", plan.depth_max);
    printf("vCPUs              %ld\n", cpus);
    printf("reader threads     %ld  (direct I/O: all vCPUs on hosts with <= 2 vCPUs, half "
           "elsewhere)\n", cpus <= 2 ? cpus : cpus / 2);
    printf("page cache         O_DIRECT reads; buffered+fadvise(DONTNEED) where refused\n");
    return 0;
}
