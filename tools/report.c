/*
 * tools/report.c — --report FILE: one JSON object per run, written atomically after the
 * command, on failure too (docs/pageback.1, REPORT). The figures are the structs the
 * modules hand back (bk_run's manifest header, rs_stats, rs_verify_stats), described by
 * the field tables below: a field added to one of those structs is reported by adding
 * one row. What the engine does not measure yet (page-cache bytes left behind, adaptive
 * I/O decisions) is null, never a guess.
 */
#include "tools/commands.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "unknown"
#endif

/* ---- a small JSON writer over pb_buf; the first failure sticks ---- */

typedef struct jw {
    pb_buf b;
    int failed;
    int depth;
    bool first[8]; /* per nesting level: nothing written yet */
} jw;

static void jw_vraw(jw *j, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
static void jw_vraw(jw *j, const char *fmt, va_list ap)
{
    char tmp[512];
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    if (n < 0 || (size_t)n >= sizeof(tmp) || pb_buf_append(&j->b, tmp, (size_t)n))
        j->failed = 1;
}

static void jw_raw(jw *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void jw_raw(jw *j, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    jw_vraw(j, fmt, ap);
    va_end(ap);
}

static void jw_key(jw *j, const char *key)
{
    jw_raw(j, "%s\n%*s\"%s\": ", j->first[j->depth] ? "" : ",", 2 * j->depth, "", key);
    j->first[j->depth] = false;
}

static void jw_str(jw *j, const char *s)
{
    jw_raw(j, "\"");
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            jw_raw(j, "\\%c", c);
        else if (c < 0x20)
            jw_raw(j, "\\u%04x", c);
        else
            jw_raw(j, "%c", c);
    }
    jw_raw(j, "\"");
}

static void jw_open(jw *j, const char *key)
{
    if (key)
        jw_key(j, key);
    jw_raw(j, "{");
    if (j->depth + 1 < 8)
        j->first[++j->depth] = true;
    else
        j->failed = 1;
}

static void jw_close(jw *j)
{
    j->depth--;
    jw_raw(j, "\n%*s}", 2 * j->depth, "");
}

static void jw_kstr(jw *j, const char *key, const char *v)
{
    jw_key(j, key);
    if (v)
        jw_str(j, v);
    else
        jw_raw(j, "null");
}

/* A key and its value as printf formats it (numbers, true/false, null). */
static void jw_kfmt(jw *j, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void jw_kfmt(jw *j, const char *key, const char *fmt, ...)
{
    va_list ap;
    jw_key(j, key);
    va_start(ap, fmt);
    jw_vraw(j, fmt, ap);
    va_end(ap);
}

/* ---- field tables: one row per reported field ---- */

typedef enum { FT_STR, FT_KIND, FT_U64, FT_U32, FT_I64, FT_F64, FT_BOOL, FT_LSN, FT_SIZE,
               FT_INT } ftype;
typedef struct rfield {
    const char *key;
    ftype type;
    size_t off;
} rfield;
#define RF(S, t, f) {#f, t, offsetof(S, f)}

static const rfield backup_fields[] = {
    RF(mf_backup, FT_STR, id), RF(mf_backup, FT_KIND, type), RF(mf_backup, FT_STR, parent),
    RF(mf_backup, FT_U32, timeline), RF(mf_backup, FT_LSN, start_lsn),
    RF(mf_backup, FT_LSN, stop_lsn), RF(mf_backup, FT_STR, start_wal),
    RF(mf_backup, FT_STR, stop_wal), RF(mf_backup, FT_I64, start_time),
    RF(mf_backup, FT_I64, stop_time), RF(mf_backup, FT_U64, files),
    RF(mf_backup, FT_U64, pages_scanned), RF(mf_backup, FT_U64, pages_changed),
    RF(mf_backup, FT_U64, pages_in_window), RF(mf_backup, FT_U64, bytes_read),
    RF(mf_backup, FT_U64, bytes_stored), RF(mf_backup, FT_U64, checksum_errors),
    RF(mf_backup, FT_U64, collisions), RF(mf_backup, FT_F64, seconds),
    RF(mf_backup, FT_BOOL, data_checksums), RF(mf_backup, FT_U32, pg_version),
    RF(mf_backup, FT_BOOL, verify_scan), RF(mf_backup, FT_U64, files_skipped),
    RF(mf_backup, FT_U64, bytes_skipped), RF(mf_backup, FT_U64, pages_missed),
    RF(mf_backup, FT_I64, mtime_horizon), RF(mf_backup, FT_STR, read_why),
};
static const rfield restore_fields[] = {
    RF(rs_stats, FT_STR, id), RF(rs_stats, FT_SIZE, chain_length),
    RF(rs_stats, FT_U64, files_written), RF(rs_stats, FT_U64, files_skipped),
    RF(rs_stats, FT_U64, pages_written), RF(rs_stats, FT_U64, pages_skipped),
    RF(rs_stats, FT_U64, frames_read), RF(rs_stats, FT_U64, bytes_fetched),
    RF(rs_stats, FT_U64, bytes_written), RF(rs_stats, FT_U64, files_removed),
    RF(rs_stats, FT_F64, seconds), RF(rs_stats, FT_U64, manifest_peak),
    RF(rs_stats, FT_U64, frame_peak), RF(rs_stats, FT_U64, files_direct),
    RF(rs_stats, FT_U64, direct_fallbacks),
};
static const rfield verify_fields[] = {
    RF(rs_verify_stats, FT_SIZE, backups), RF(rs_verify_stats, FT_SIZE, backups_failed),
    RF(rs_verify_stats, FT_SIZE, problems), RF(rs_verify_stats, FT_U64, frames_read),
    RF(rs_verify_stats, FT_U64, wal_segments), RF(rs_verify_stats, FT_U64, wal_history),
    RF(rs_verify_stats, FT_F64, seconds),
};

static const rfield scan_fields[] = {
    RF(scan_io_stats, FT_BOOL, adaptive), RF(scan_io_stats, FT_U32, depth_start),
    RF(scan_io_stats, FT_U32, depth_final), RF(scan_io_stats, FT_U32, depth_peak),
    RF(scan_io_stats, FT_U64, requests), RF(scan_io_stats, FT_U64, overlapped),
    RF(scan_io_stats, FT_U64, grows),
    RF(scan_io_stats, FT_U64, plateaus), RF(scan_io_stats, FT_U64, cuts),
    RF(scan_io_stats, FT_U64, yields), RF(scan_io_stats, FT_U64, resumes),
    RF(scan_io_stats, FT_U64, pauses), RF(scan_io_stats, FT_F64, pause_seconds),
    RF(scan_io_stats, FT_F64, latency_floor_ms),
    RF(scan_io_stats, FT_F64, foreground_reads_per_s_peak),
    RF(scan_io_stats, FT_BOOL, device_watched), RF(scan_io_stats, FT_U64, own_device_reads),
    RF(scan_io_stats, FT_U32, member_disks_watched),
    RF(scan_io_stats, FT_F64, latency_floor_median_ms),
    RF(scan_io_stats, FT_U64, size_grows), RF(scan_io_stats, FT_U64, size_plateaus),
    RF(scan_io_stats, FT_SIZE, request_bytes_peak), RF(scan_io_stats, FT_SIZE, request_bytes_final),
    RF(scan_io_stats, FT_F64, depth_gain_pct), RF(scan_io_stats, FT_F64, size_gain_pct),
    RF(scan_io_stats, FT_STR, decision),
    RF(scan_io_stats, FT_U64, chunks), RF(scan_io_stats, FT_U64, check_waits),
    RF(scan_io_stats, FT_F64, check_wait_seconds), RF(scan_io_stats, FT_F64, check_seconds),
    RF(scan_io_stats, FT_F64, check_cpu_seconds), RF(scan_io_stats, FT_U64, paused_chunks),
    RF(scan_io_stats, FT_F64, budget), RF(scan_io_stats, FT_F64, others_ms),
    RF(scan_io_stats, FT_F64, others_base_ms), RF(scan_io_stats, FT_F64, others_ratio_peak),
    RF(scan_io_stats, FT_U64, steer_ups), RF(scan_io_stats, FT_U64, steer_downs),
    RF(scan_io_stats, FT_U64, quiet_windows), RF(scan_io_stats, FT_F64, quiet_seconds),
    RF(scan_io_stats, FT_U64, quiet_given_up), RF(scan_io_stats, FT_U64, unclear_windows),
    RF(scan_io_stats, FT_F64, steer_seconds), RF(scan_io_stats, FT_U32, steer_depth),
    RF(scan_io_stats, FT_SIZE, steer_bytes),
};
static const rfield io_fields[] = {
    RF(bk_io_report, FT_SIZE, read_size), RF(bk_io_report, FT_U32, depth_max),
    RF(bk_io_report, FT_STR, io_class_applied), RF(bk_io_report, FT_STR, cpu_priority_applied),
    RF(bk_io_report, FT_STR, cpu_weight_applied), RF(bk_io_report, FT_BOOL, checkpoint_fast),
    RF(bk_io_report, FT_F64, checkpoint_wait_seconds), RF(bk_io_report, FT_U64, repo_flushes),
    RF(bk_io_report, FT_U64, repo_bytes_written), RF(bk_io_report, FT_F64, flushes_per_gb),
    RF(bk_io_report, FT_U64, buffer_bytes), RF(bk_io_report, FT_U32, pipe_jobs),
    RF(bk_io_report, FT_U64, manifest_records_peak),
    RF(bk_io_report, FT_U64, manifest_bytes_peak),
    RF(bk_io_report, FT_U64, manifest_pending_peak),
    RF(bk_io_report, FT_STR, cpu_reader_applied),
};
/* Where the backup's time went (engine/backup/backup.h, bk_stages). */
static const rfield stage_fields[] = {
    RF(bk_stages, FT_F64, scan_seconds), RF(bk_stages, FT_F64, read_wait_seconds),
    RF(bk_stages, FT_F64, pause_seconds), RF(bk_stages, FT_F64, queue_wait_seconds),
    RF(bk_stages, FT_F64, page_work_seconds), RF(bk_stages, FT_F64, compress_seconds),
    RF(bk_stages, FT_F64, write_seconds), RF(bk_stages, FT_F64, worker_idle_seconds),
    RF(bk_stages, FT_U32, workers),
    RF(bk_stages, FT_F64, drain_wait_seconds), RF(bk_stages, FT_F64, reader_cpu_seconds),
    RF(bk_stages, FT_F64, worker_cpu_seconds), RF(bk_stages, FT_U64, bytes_read),
    RF(bk_stages, FT_F64, check_seconds), RF(bk_stages, FT_F64, check_wait_seconds),
    RF(bk_stages, FT_F64, check_cpu_seconds),
    RF(bk_stages, FT_F64, connect_seconds), RF(bk_stages, FT_F64, plan_seconds),
    RF(bk_stages, FT_F64, start_seconds), RF(bk_stages, FT_F64, prepare_seconds),
    RF(bk_stages, FT_F64, walk_seconds), RF(bk_stages, FT_F64, stop_seconds),
    RF(bk_stages, FT_F64, wal_wait_seconds), RF(bk_stages, FT_F64, commit_seconds),
    RF(bk_stages, FT_F64, exit_seconds), RF(bk_stages, FT_F64, total_seconds),
};
static const rfield compression_fields[] = {
    RF(bk_io_report, FT_BOOL, compress_adapt), RF(bk_io_report, FT_INT, level_ceiling),
    RF(bk_io_report, FT_INT, level_floor), RF(bk_io_report, FT_INT, level_final),
    RF(bk_io_report, FT_U64, level_downs), RF(bk_io_report, FT_U64, level_ups),
};
static const rfield level_fields[] = {
    RF(bk_level_use, FT_INT, level), RF(bk_level_use, FT_U64, frames),
    RF(bk_level_use, FT_U64, raw_bytes), RF(bk_level_use, FT_U64, stored_bytes),
    RF(bk_level_use, FT_F64, seconds),
};
static const rfield request_fields[] = {
    RF(repo_requests, FT_U64, get), RF(repo_requests, FT_U64, get_range),
    RF(repo_requests, FT_U64, put), RF(repo_requests, FT_U64, list),
    RF(repo_requests, FT_U64, head), RF(repo_requests, FT_U64, del),
};

/* The fields of base as keys of the object open in j. */
static void jw_fields_in(jw *j, const void *base, const rfield *f, size_t n)
{
    const char *p = base;
    for (size_t i = 0; i < n; i++) {
        const void *v = p + f[i].off;
        char lsn[32];
        jw_key(j, f[i].key);
        switch (f[i].type) {
        case FT_STR: jw_str(j, v); break;
        case FT_KIND: {
            char k = *(const char *)v;
            jw_str(j, k == 'F' ? "full" : k == 'S' ? "synthetic-full" : "incr");
            break;
        }
        case FT_U64: jw_raw(j, "%" PRIu64, *(const uint64_t *)v); break;
        case FT_U32: jw_raw(j, "%" PRIu32, *(const uint32_t *)v); break;
        case FT_I64: jw_raw(j, "%" PRId64, *(const int64_t *)v); break;
        case FT_F64: jw_raw(j, "%.3f", *(const double *)v); break;
        case FT_BOOL: jw_raw(j, "%s", *(const bool *)v ? "true" : "false"); break;
        case FT_LSN: pb_lsn_format(*(const uint64_t *)v, lsn); jw_str(j, lsn); break;
        case FT_SIZE: jw_raw(j, "%zu", *(const size_t *)v); break;
        case FT_INT: jw_raw(j, "%d", *(const int *)v); break;
        }
    }
}

static void jw_fields(jw *j, const char *key, const void *base, const rfield *f, size_t n)
{
    jw_open(j, key);
    jw_fields_in(j, base, f, n);
    jw_close(j);
}
#define JW_FIELDS(j, key, base, table) \
    jw_fields((j), (key), (base), (table), sizeof(table) / sizeof((table)[0]))

/* ---- the report ---- */

/* "compression": the level policy's settings and steps, and the frames at each level. */
static void report_compression(jw *j, const bk_io_report *io)
{
    jw_open(j, "compression");
    jw_fields_in(j, io, compression_fields,
                 sizeof(compression_fields) / sizeof(compression_fields[0]));
    jw_key(j, "levels");
    jw_raw(j, "[");
    for (unsigned i = 0; i < io->nlevels && i < BK_LEVELS_MAX; i++) {
        if (i)
            jw_raw(j, ",");
        JW_FIELDS(j, NULL, &io->levels[i], level_fields);
    }
    jw_raw(j, "]");
    jw_close(j);
}

static void report_resources(jw *j, const cmd_outcome *res)
{
    struct rusage ru;
    memset(&ru, 0, sizeof(ru));
    getrusage(RUSAGE_SELF, &ru);
    jw_kfmt(j, "duration_seconds", "%.3f", pb_now() - res->started);
    jw_kfmt(j, "cpu_user_seconds", "%.3f", (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6);
    jw_kfmt(j, "cpu_system_seconds", "%.3f",
            (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6);
    jw_kfmt(j, "peak_rss_bytes", "%" PRIu64, (uint64_t)ru.ru_maxrss * 1024); /* Linux: KiB */
    jw_key(j, "page_cache_bytes_left"); /* measured by a backup (engine/backup/backup_cache.c) */
    if (res->have_io)
        jw_raw(j, "%" PRIu64, res->io.page_cache_left_bytes);
    else
        jw_raw(j, "null");
    if (!res->have_io) {
        jw_kfmt(j, "adaptive_io", "null");
        return;
    }
    JW_FIELDS(j, "adaptive_io", &res->io.scan, scan_fields);
    JW_FIELDS(j, "io_applied", &res->io, io_fields);
    JW_FIELDS(j, "backup_requests", &res->backup_requests, request_fields);
    JW_FIELDS(j, "stages", &res->io.stages, stage_fields);
    report_compression(j, &res->io);
}

/* The limits this run was given (0 = automatic or unlimited). */
static void report_limits(jw *j, const pb_options *o)
{
    jw_open(j, "limits");
    jw_kfmt(j, "max_rate_bytes_per_second", "%" PRIu64, o->backup.max_rate);
    jw_kfmt(j, "nice", "%d", o->backup.nice);
    jw_kfmt(j, "read_size", "%zu", o->backup.read_size);
    jw_kfmt(j, "queue_depth", "%u", o->backup.queue_depth);
    jw_kfmt(j, "direct_io", "%s", o->backup.direct ? "true" : "false");
    jw_kfmt(j, "io_uring", "%s", o->backup.use_uring ? "true" : "false");
    jw_kfmt(j, "jobs", "%u", o->restore.jobs);
    jw_kfmt(j, "compress_level", "%d", o->backup.zstd_level);
    jw_close(j);
}

static void report_body(jw *j, const pb_options *o, const cmd_outcome *res)
{
    jw_open(j, NULL);
    jw_kfmt(j, "report_version", "1");
    jw_kstr(j, "pageback_version", PACKAGE_VERSION);
    jw_kstr(j, "command", res->command);
    jw_kstr(j, "repository", o->repo.location);
    jw_kfmt(j, "started_at", "%" PRId64, res->started_unix);
    jw_kfmt(j, "exit_status", "%d", res->exit_code);
    jw_kfmt(j, "ok", "%s", res->failed || res->exit_code ? "false" : "true");
    jw_key(j, "error");
    if (res->failed) {
        jw_open(j, NULL);
        jw_kstr(j, "code", pb_code_name(res->err.code));
        jw_kstr(j, "message", res->err.msg);
        jw_close(j);
    } else {
        jw_raw(j, "null");
    }
    report_resources(j, res);
    report_limits(j, o);
    if (res->have_backup) {
        JW_FIELDS(j, "backup", &res->backup, backup_fields);
        jw_kfmt(j, "read_rate_bytes_per_second", "%.0f",
                res->backup.seconds > 0 ? res->backup.bytes_read / res->backup.seconds : 0.0);
    }
    if (res->have_restore)
        JW_FIELDS(j, "restore", &res->restore, restore_fields);
    if (res->have_verify)
        JW_FIELDS(j, "verify", &res->verify, verify_fields);
    if (res->rebase_id[0])
        jw_kstr(j, "rebase_id", res->rebase_id);
    jw_close(j);
    jw_raw(j, "\n");
}

int cmd_write_report(const char *path, const pb_options *o, const cmd_outcome *res,
                     pb_error *err)
{
    jw j = {.first = {true}};
    report_body(&j, o, res);
    int rc = j.failed ? pb_fail(err, PB_ENOMEM, "out of memory building the report %s", path)
                      : cmd_write_atomic(path, j.b.data, j.b.len, err);
    pb_buf_free(&j.b);
    return rc;
}
