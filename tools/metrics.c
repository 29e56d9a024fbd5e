/*
 * tools/metrics.c — --metrics-file FILE: Prometheus text exposition format, written
 * atomically after the run (for node_exporter's textfile collector; docs/GUIDE.md,
 * "Monitoring"). The backup figures come from the repository's history (a backup's
 * own, as its plan read it, with the repository it holds open), so the file is right
 * whichever command writes it; the WAL archive lag needs a connection
 * (--dbname or the PG* environment, asked only when --dbname is given or the command
 * is a backup); archive-push failures are counted in the state directory because
 * archive_command runs are separate processes. What is not measured is left out.
 */
#include "tools/commands.h"

#include "engine/chain/chain.h"
#include "engine/pg/pg.h"
#include "engine/wal/wal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ARCHIVE_STATE "archive-push.state"

typedef struct archive_state {
    uint64_t failures;
    int64_t last_failure, last_success;
} archive_state;

static void state_path(const pb_options *o, char *out, size_t cap)
{
    char sd[4096];
    const char *dir = cmd_state_dir(o, sd, sizeof(sd));
    snprintf(out, cap, "%s/%s", dir ? dir : ".", ARCHIVE_STATE);
}

static void read_archive_state(const char *path, archive_state *st)
{
    memset(st, 0, sizeof(*st));
    FILE *fp = fopen(path, "r");
    if (!fp)
        return;
    char name[32];
    long long v;
    while (fscanf(fp, "%31s %lld", name, &v) == 2) {
        if (!strcmp(name, "failures")) st->failures = (uint64_t)v;
        else if (!strcmp(name, "last_failure")) st->last_failure = v;
        else if (!strcmp(name, "last_success")) st->last_success = v;
    }
    fclose(fp);
}

/* Never fails the push: the counters are for monitoring only. */
void cmd_note_archive_push(const pb_options *o, bool ok)
{
    char sd[4096], path[4200], text[160];
    const char *dir = cmd_state_dir(o, sd, sizeof(sd));
    pb_error err = PB_ERROR_INIT;
    if (!dir || pb_state_dir_ready(dir, &err) != 0) { /* backup's checks: not trusted */
        if (dir)
            pb_debug("archive-push counters not updated: %s", err.msg);
        return;
    }
    snprintf(path, sizeof(path), "%s/%s", dir, ARCHIVE_STATE);
    archive_state st;
    read_archive_state(path, &st);
    if (ok)
        st.last_success = (int64_t)time(NULL);
    else {
        st.failures++;
        st.last_failure = (int64_t)time(NULL);
    }
    int n = snprintf(text, sizeof(text), "failures %" PRIu64 "\nlast_failure %" PRId64
                     "\nlast_success %" PRId64 "\n", st.failures, st.last_failure,
                     st.last_success);
    if (cmd_write_atomic(path, text, (size_t)n, &err) != 0)
        pb_debug("archive-push counters not updated: %s", err.msg);
}

/* ---- writing ---- */

typedef struct mw {
    pb_buf b;
    int failed;
    char labels[2048]; /* cluster="...",repo="..." on every sample (see mw_labels) */
} mw;

/* A label value in the exposition format: backslash, quote and newline escaped. */
static void label_value(char *out, size_t cap, const char *v)
{
    size_t n = 0;
    for (; v && *v && n + 3 < cap; v++) {
        if (*v == '\\' || *v == '"' || *v == '\n')
            out[n++] = '\\';
        out[n++] = *v == '\n' ? 'n' : *v;
    }
    out[n] = '\0';
}

/* Every sample names its cluster and repository, so the files of several clusters (or
 * repositories) in one textfile directory never give two series the same labels. */
static void mw_labels(mw *m, const pb_options *o)
{
    char c[256], r[1536];
    label_value(c, sizeof(c), o->cluster ? o->cluster : "");
    label_value(r, sizeof(r), o->repo_root ? o->repo_root
                              : o->repo.location ? o->repo.location : "");
    snprintf(m->labels, sizeof(m->labels), "cluster=\"%s\",repo=\"%s\"", c, r);
}

static void mw_raw(mw *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void mw_raw(mw *m, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(tmp)) {
        m->failed = 1;
        return;
    }
    /* A sample line: "name{labels} value" or "name value"; the common labels go first. */
    size_t name = strncmp(tmp, "pageback_", 9) ? 0 : strcspn(tmp, "{ ");
    int fail = 0;
    if (name && m->labels[0]) {
        bool more = tmp[name] == '{';
        fail = pb_buf_append(&m->b, tmp, name) || pb_buf_append(&m->b, "{", 1) ||
               pb_buf_append(&m->b, m->labels, strlen(m->labels)) ||
               pb_buf_append(&m->b, more ? "," : "}", 1);
        name += more;
    }
    if (fail || pb_buf_append(&m->b, tmp + name, (size_t)n - name))
        m->failed = 1;
}

static void mw_head(mw *m, const char *name, const char *type, const char *help)
{
    mw_raw(m, "# HELP pageback_%s %s\n# TYPE pageback_%s %s\n", name, help, name, type);
}

static const char *type_label(char t)
{
    return t == 'F' ? "full" : t == 'S' ? "synthetic-full" : "incr";
}

/* The newest backup of each type, by history order. */
static void backup_metrics(mw *m, const chain_history *h)
{
    static const char types[] = {'F', 'I', 'S'};
    static const struct {
        const char *name, *help;
    } g[] = {
        {"backup_last_success_timestamp_seconds", "stop time of the newest backup"},
        {"backup_last_duration_seconds", "duration of the newest backup"},
        {"backup_last_read_bytes", "bytes the newest backup read"},
        {"backup_last_stored_bytes", "bytes the newest backup stored"},
        {"backup_last_pages_changed", "pages the newest backup shipped"},
        {"backup_last_checksum_errors", "page checksum failures in the newest backup"},
        {"backup_last_read_rate_bytes_per_second", "read rate of the newest backup"},
    };
    for (size_t k = 0; k < sizeof(g) / sizeof(g[0]); k++) {
        mw_head(m, g[k].name, "gauge", g[k].help);
        for (size_t t = 0; t < sizeof(types); t++) {
            const mf_backup *b = NULL;
            for (size_t i = 0; i < h->count; i++)
                if (h->items[i].type == types[t])
                    b = &h->items[i];
            if (!b)
                continue;
            double v[] = {(double)b->stop_time, b->seconds, (double)b->bytes_read,
                          (double)b->bytes_stored, (double)b->pages_changed,
                          (double)b->checksum_errors,
                          b->seconds > 0 ? b->bytes_read / b->seconds : 0};
            mw_raw(m, "pageback_%s{type=\"%s\"} %.17g\n", g[k].name, type_label(types[t]),
                   v[k]);
        }
    }
    mw_head(m, "backups", "gauge", "backups in the repository");
    mw_raw(m, "pageback_backups %zu\n", h->count);
}

typedef struct wal_newest {
    uint32_t seg_size, timeline;
    uint64_t segno, count;
} wal_newest;

static int newest_wal(void *ctx, const char *name)
{
    wal_newest *w = ctx;
    uint32_t tli;
    uint64_t n;
    if (!arch_parse_segment(name, w->seg_size, &tli, &n))
        return 0;
    w->count++;
    if (tli > w->timeline || (tli == w->timeline && n > w->segno)) {
        w->timeline = tli;
        w->segno = n;
    }
    return 0;
}

/* Segments between the server's current one and the newest archived (the current
 * segment is still being written, so an up-to-date archive has a lag of 0). */
static void lag_metrics(mw *m, const pb_options *o, const wal_newest *w)
{
    pgc *c = NULL;
    pb_error err = PB_ERROR_INIT;
    uint64_t lsn = 0;
    uint32_t tli = 0;
    int rc = pgc_connect(&c, o->backup.conninfo, &err);
    if (rc == 0)
        rc = pgc_current_wal(c, &lsn, &tli, &err);
    pgc_free(c);
    if (rc) {
        pb_warn("WAL archive lag not measured: %s", err.msg);
        return;
    }
    if (!w->count)
        return; /* nothing archived: no lag to speak of, the segment count says 0 */
    uint64_t current = lsn / w->seg_size;
    uint64_t lag = current > w->segno ? current - w->segno - 1 : 0;
    mw_head(m, "wal_archive_lag_segments", "gauge",
            "WAL segments between the server's current one and the newest archived");
    mw_raw(m, "pageback_wal_archive_lag_segments %" PRIu64 "\n", lag);
    mw_head(m, "wal_server_timeline", "gauge", "the server's timeline");
    mw_raw(m, "pageback_wal_server_timeline %" PRIu32 "\n", tli);
}

static void wal_metrics(mw *m, const pb_options *o, repo *r, const chain_history *h)
{
    wal_newest w = {16u << 20, 0, 0, 0};
    for (size_t i = 0; i < h->count; i++)
        if (h->items[i].wal_segment_size)
            w.seg_size = h->items[i].wal_segment_size;
    pb_error err = PB_ERROR_INIT;
    if (arch_list(r, ARCH_LIST_SEGMENTS, newest_wal, &w, &err) != 0) {
        pb_warn("WAL metrics not written: %s", err.msg);
        return;
    }
    mw_head(m, "wal_archive_segments", "gauge", "WAL segments in the archive");
    mw_raw(m, "pageback_wal_archive_segments %" PRIu64 "\n", w.count);
    if (w.count) {
        mw_head(m, "wal_archive_newest_segment", "gauge",
                "number of the newest archived segment on the newest timeline");
        mw_raw(m, "pageback_wal_archive_newest_segment{timeline=\"%" PRIu32 "\"} %" PRIu64
               "\n", w.timeline, w.segno);
    }
    if (o->backup.conninfo || !strcmp(o->command ? o->command : "", "backup"))
        lag_metrics(m, o, &w);
}

static void archive_metrics(mw *m, const pb_options *o)
{
    char path[4200];
    archive_state st;
    state_path(o, path, sizeof(path));
    read_archive_state(path, &st);
    mw_head(m, "archive_push_failures_total", "counter", "archive-push runs that failed");
    mw_raw(m, "pageback_archive_push_failures_total %" PRIu64 "\n", st.failures);
    mw_head(m, "archive_push_last_success_timestamp_seconds", "gauge",
            "time of the last archive-push that succeeded (0: none seen)");
    mw_raw(m, "pageback_archive_push_last_success_timestamp_seconds %" PRId64 "\n",
           st.last_success);
}

/* This run: its command, outcome and duration; a backup's own cost to the database. */
static void run_metrics(mw *m, const cmd_outcome *res)
{
    const char *cmd = res->command ? res->command : "none";
    mw_head(m, "run_timestamp_seconds", "gauge", "start of the run that wrote this file");
    mw_raw(m, "pageback_run_timestamp_seconds{command=\"%s\"} %" PRId64 "\n", cmd,
           res->started_unix);
    mw_head(m, "run_success", "gauge", "1 when that run succeeded");
    mw_raw(m, "pageback_run_success{command=\"%s\"} %d\n", cmd,
           res->failed || res->exit_code ? 0 : 1);
    mw_head(m, "run_duration_seconds", "gauge", "duration of that run");
    mw_raw(m, "pageback_run_duration_seconds{command=\"%s\"} %.3f\n", cmd,
           pb_now() - res->started);
    if (res->have_backup) {
        const mf_backup *b = &res->backup;
        mw_head(m, "run_read_rate_bytes_per_second", "gauge", "this backup's read rate");
        mw_raw(m, "pageback_run_read_rate_bytes_per_second %.0f\n",
               b->seconds > 0 ? b->bytes_read / b->seconds : 0.0);
        mw_head(m, "run_checksum_errors", "gauge", "page checksum failures in this backup");
        mw_raw(m, "pageback_run_checksum_errors %" PRIu64 "\n", b->checksum_errors);
    }
    if (res->have_io) {
        mw_head(m, "run_page_cache_left_bytes", "gauge",
                "page cache this backup's reads left behind in the files they read");
        mw_raw(m, "pageback_run_page_cache_left_bytes %" PRIu64 "\n",
               res->io.page_cache_left_bytes);
    }
}

/* From what the command holds (its repository, the history its backup planned from),
 * else read here: a backup's metrics cost no second opening or listing. */
static void repo_metrics(mw *m, const pb_options *o, const cmd_outcome *res)
{
    repo *r = res->repo, *own = NULL;
    chain_history h = {0};
    const chain_history *hist = res->have_history ? &res->history : &h;
    pb_error rerr = PB_ERROR_INIT;
    int rc = r ? 0 : cmd_open_repo(&own, o, &rerr);
    r = r ? r : own;
    if (rc == 0 && !res->have_history)
        rc = chain_history_load(r, &h, &rerr);
    if (rc == 0) {
        backup_metrics(m, hist);
        wal_metrics(m, o, r, hist);
    } else {
        pb_warn("repository metrics not written: %s", rerr.msg);
    }
    chain_history_free(&h);
    repo_free(own);
    archive_metrics(m, o);
}

int cmd_write_metrics(const char *path, pb_options *o, const cmd_outcome *res, pb_error *err)
{
    mw m = {{0}, 0, ""};
    mw_labels(&m, o);
    run_metrics(&m, res);
    if (o->repo.location)
        repo_metrics(&m, o, res);
    int rc = m.failed ? pb_fail(err, PB_ENOMEM, "out of memory building the metrics %s", path)
                      : cmd_write_atomic(path, m.b.data, m.b.len, err);
    pb_buf_free(&m.b);
    return rc;
}
