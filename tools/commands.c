/* tools/commands.c — the pageback commands: parse-free glue between options and modules. */
#include "tools/commands.h"

#include "engine/wal/wal.h"
#include "engine/chain/chain.h"
#include "engine/scan/scan.h"

#include <inttypes.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

int cmd_backup(pb_options *o, cmd_outcome *res)
{
    pb_error err = PB_ERROR_INIT;
    repo *r = NULL;
    char sd[4096];
    o->backup.state_dir = res->state_dir = cmd_state_dir(o, sd, sizeof(sd));
    if (!o->backup.state_dir)
        return cmd_usage_error(res, "no home directory to keep the local catalog in: set "
                               "--state-dir, PAGEBACK_STATE_DIR, XDG_STATE_HOME or HOME");
    cmd_progress prog;
    cmd_progress_init(&prog, o);
    o->backup.progress = prog.enabled ? cmd_progress_backup : NULL;
    o->backup.progress_ctx = &prog;
    int rc = cmd_open_repo(&r, o, &err);
    bk_result run; /* the committed manifest, the I/O report, the requests */
    memset(&run, 0, sizeof(run));
    if (rc == 0) {
        rc = bk_run(r, &o->backup, &run, &err);
        res->io = run.io;
        res->have_io = true;
        res->backup_requests = run.requests;
    }
    mf_manifest *m = run.manifest;
    if (rc == 0)
        cmd_progress_done(&prog);
    cmd_progress_end(&prog);
    o->backup.progress = NULL;
    if (rc == 0) {
        const mf_backup *h = mf_header(m);
        res->backup = *h;
        res->have_backup = true;
    }
    res->history = run.history; /* the metrics' (freed by main) */
    res->have_history = run.history_known;
    if (rc == 0 && !o->quiet) {
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
        char q[256];
        repo_requests_format(&run.requests, q, sizeof(q));
        pb_detail("backup %s object-store requests: %s", h->id, q);
    }
    mf_free(m);
    res->repo = r; /* the metrics' (freed by main) */
    return rc ? cmd_report(res, &err) : 0;
}

/* One word of restore_command for /bin/sh: in single quotes, where nothing expands
 * ($(...), backticks, $VAR), an embedded ' written '\''; % doubled, as PostgreSQL
 * reads %f, %p, %r and %% in restore_command before the shell sees it. A control
 * character (a newline would end the postgresql.auto.conf line) is refused. */
static int put_word(pb_buf *b, const char *opt, const char *word, pb_error *err)
{
    for (const char *p = word; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return pb_fail(err, PB_EINVAL, "%s holds a control character: it cannot be "
                           "written into restore_command", opt);
    int rc = pb_buf_append(b, " ", opt[0] ? 1 : 0);
    if (rc == 0 && opt[0] == '-')
        rc = pb_buf_append(b, opt, strlen(opt)) || pb_buf_append(b, " ", 1);
    rc = rc || pb_buf_append(b, "'", 1);
    for (const char *p = word; rc == 0 && *p; p++)
        rc = *p == '\'' ? pb_buf_append(b, "'\\''", 4)
             : *p == '%' ? pb_buf_append(b, "%%", 2) : pb_buf_append(b, p, 1);
    rc = rc || pb_buf_append(b, "'", 1);
    return rc ? pb_fail(err, PB_ENOMEM, "out of memory building restore_command") : 0;
}

/* The restore_command line (*out malloc'd, NUL-terminated). */
static int restore_command(pb_options *o, char **out, pb_error *err)
{
    *out = NULL;
    pb_buf b = {0};
    int rc = put_word(&b, "", o->program, err);
    if (rc == 0 && pb_buf_append(&b, " archive-get %f '%p'", 20))
        rc = pb_fail(err, PB_ENOMEM, "out of memory building restore_command");
    if (rc == 0)
        rc = put_word(&b, "--repo", o->repo_root ? o->repo_root
                      : o->repo.location ? o->repo.location : "", err); /* + --cluster */
    if (rc == 0 && o->repo.s3_endpoint)
        rc = put_word(&b, "--s3-endpoint", o->repo.s3_endpoint, err);
    if (rc == 0 && o->repo.s3_region && strcmp(o->repo.s3_region, "us-east-1"))
        rc = put_word(&b, "--s3-region", o->repo.s3_region, err);
    if (rc == 0 && o->s3_uri_style)
        rc = put_word(&b, "--s3-uri-style", o->s3_uri_style, err);
    if (rc == 0 && o->s3_insecure_given && pb_buf_append(&b, " --s3-insecure", 14))
        rc = pb_fail(err, PB_ENOMEM, "out of memory building restore_command");
    if (rc == 0 && o->repo.s3_ca_file)
        rc = put_word(&b, "--s3-ca-file", o->repo.s3_ca_file, err);
    for (size_t i = 0; rc == 0 && i < o->n_key_files; i++) /* the path, never the key */
        rc = put_word(&b, "--encrypt-key-file", o->key_files[i], err);
    if (rc == 0 && o->config_file)
        rc = put_word(&b, "--config", o->config_file, err);
    /* The cluster's section may hold what archive-get needs (docs/GUIDE.md). */
    if (rc == 0 && o->config_file && o->cluster)
        rc = put_word(&b, "--cluster", o->cluster, err);
    if (rc == 0 && pb_buf_append(&b, "", 1))
        rc = pb_fail(err, PB_ENOMEM, "out of memory building restore_command");
    if (rc) {
        pb_buf_free(&b);
        return pb_error_wrap(err, "restore_command");
    }
    *out = (char *)b.data;
    return 0;
}

int cmd_restore(pb_options *o, cmd_outcome *res)
{
    pb_error err = PB_ERROR_INIT;
    if (!o->restore.target_dir) {
        return cmd_usage_error(res, "restore needs --target-dir DIR");
    }
    if (o->restore.delta && o->restore.force) {
        return cmd_usage_error(res, "give --delta or --force, not both");
    }
    if (rs_check_target(&o->restore, &err))
        return cmd_usage_error(res, "%s", err.msg);
    repo *r = NULL;
    char *cmd = NULL;
    if (restore_command(o, &cmd, &err) != 0)
        return cmd_report(res, &err);
    o->restore.restore_command = cmd;
    char sd[4096];
    o->restore.state_dir = cmd_state_dir(o, sd, sizeof(sd)); /* caches what the WAL holds */
    rs_stats st;
    cmd_progress prog;
    cmd_progress_init(&prog, o);
    o->restore.progress = prog.enabled ? cmd_progress_restore : NULL;
    o->restore.progress_ctx = &prog;
    o->restore.max_memory = o->backup.max_memory; /* one --max-memory for every command */
    int rc = cmd_open_repo(&r, o, &err);
    if (rc == 0 && cmd_set_missing(r, o->restore.set)) {
        cmd_progress_end(&prog);
        free(cmd);
        repo_free(r);
        return cmd_usage_error(res, CMD_NO_SET_MSG, o->restore.set, o->repo.location);
    }
    if (rc == 0)
        rc = rs_restore(r, &o->restore, &st, &err);
    if (rc == 0)
        cmd_progress_done(&prog);
    cmd_progress_end(&prog);
    o->restore.progress = NULL;
    if (rc == 0) {
        res->restore = st;
        res->have_restore = true;
    }
    if (rc == 0 && !o->quiet) {
        char w[32], f[32];
        human((double)st.bytes_written, w, sizeof(w));
        human((double)st.bytes_fetched, f, sizeof(f));
        printf("restored backup %s (chain of %zu) into %s in %.1f s: %" PRIu64 " %s, %"
               PRIu64 " %s written, %" PRIu64 " %s already right, %" PRIu64 " %s read (%s "
               "fetched, %s written), %" PRIu64 " %s removed\n", st.id, st.chain_length,
               o->restore.target_dir, st.seconds, st.files_written,
               pb_plural(st.files_written, "file", "files"), st.pages_written,
               pb_plural(st.pages_written, "page", "pages"), st.pages_skipped,
               pb_plural(st.pages_skipped, "page", "pages"), st.frames_read,
               pb_plural(st.frames_read, "frame", "frames"), f, w, st.files_removed,
               pb_plural(st.files_removed, "entry", "entries"));
        char q[256];
        repo_requests_format(&st.requests, q, sizeof(q));
        pb_detail("restore %s object-store requests: %s", st.id, q);
    }
    free(cmd);
    repo_free(r);
    return rc ? cmd_report(res, &err) : 0;
}

/* One report line per backup and per problem; problems also go to stderr's log. */
static void verify_note(void *ctx, const char *id, bool problem, const char *msg)
{
    cmd_progress_clear(ctx);
    if (problem)
        printf("  problem in %s: %s\n", id ? id : "the WAL archive", msg);
    else
        printf("%s%s\n", id ? "backup " : "", msg);
}

int cmd_verify(pb_options *o, cmd_outcome *res)
{
    pb_error err = PB_ERROR_INIT;
    repo *r = NULL;
    rs_verify_stats st;
    cmd_progress prog;
    cmd_progress_init(&prog, o);
    prog.whole_repo = !o->restore.set;
    rs_progress_hook hook = {prog.enabled ? cmd_progress_verify : NULL, &prog};
    int rc = cmd_open_repo(&r, o, &err);
    if (rc == 0 && cmd_set_missing(r, o->restore.set)) {
        cmd_progress_end(&prog);
        repo_free(r);
        return cmd_usage_error(res, CMD_NO_SET_MSG, o->restore.set, o->repo.location);
    }
    if (rc == 0)
        rc = rs_verify_repo(r, o->restore.set, o->restore.jobs, verify_note, &prog, &hook, &st,
                            &err);
    if (rc == 0)
        cmd_progress_done(&prog);
    cmd_progress_end(&prog);
    if (rc == 0 || rc == PB_ECORRUPT) {
        res->verify = st;
        res->have_verify = true;
    }
    if ((rc == 0 || rc == PB_ECORRUPT) && o->restore.set)
        printf("verify %s: %zu %s in %.1f s\n", rc ? "FAILED" : "passed", st.problems,
               pb_plural(st.problems, "problem", "problems"), st.seconds);
    else if (rc == 0 || rc == PB_ECORRUPT)
        printf("verify %s: %zu %s (%zu failed), %" PRIu64 " %s, %" PRIu64 " WAL %s, %"
               PRIu64 " history %s checked; %zu %s in %.1f s\n", rc ? "FAILED" : "passed",
               st.backups, pb_plural(st.backups, "backup", "backups"), st.backups_failed,
               st.frames_read, pb_plural(st.frames_read, "frame", "frames"), st.wal_segments,
               pb_plural(st.wal_segments, "segment", "segments"), st.wal_history,
               pb_plural(st.wal_history, "file", "files"), st.problems,
               pb_plural(st.problems, "problem", "problems"), st.seconds);
    fflush(stdout);
    repo_free(r);
    return rc ? cmd_report(res, &err) : 0;
}

int cmd_rebase(pb_options *o, cmd_outcome *res)
{
    pb_error err = PB_ERROR_INIT;
    repo *r = NULL;
    char id[MF_ID_LEN];
    repo_lock *lock = NULL;
    int rc = cmd_open_repo(&r, o, &err);
    if (rc == 0 && cmd_set_missing(r, o->restore.set)) {
        repo_free(r);
        return cmd_usage_error(res, CMD_NO_SET_MSG, o->restore.set, o->repo.location);
    }
    if (rc == 0)
        rc = repo_lock_acquire(r, "rebase", &lock, &err);
    /* What a killed backup, rebase or expire left goes first (as backup does it); that
     * failing does not block the rebase. */
    pb_error cerr = PB_ERROR_INIT;
    if (rc == 0 && chain_cleanup(r, lock, &cerr) != 0)
        pb_warn("could not clean up after earlier interrupted runs: %s", cerr.msg);
    cmd_progress prog;
    cmd_progress_init(&prog, o);
    rs_progress_hook hook = {prog.enabled ? cmd_progress_rebase : NULL, &prog};
    if (rc == 0)
        rc = rs_rebase(r, o->restore.set, o->backup.zstd_level, lock, &hook, id, &err);
    if (rc == 0)
        cmd_progress_done(&prog);
    cmd_progress_end(&prog);
    if (rc == 0)
        memcpy(res->rebase_id, id, sizeof(res->rebase_id));
    if (rc == 0 && !o->quiet && id[0])
        printf("synthetic full backup %s written\n", id);
    else if (rc == 0 && !o->quiet)
        printf("nothing to rebase: the chain's newest backup is already a full backup\n");
    repo_lock_release(lock);
    repo_free(r);
    return rc ? cmd_report(res, &err) : 0;
}

int cmd_tune(pb_options *o, cmd_outcome *res)
{
    (void)res;
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
