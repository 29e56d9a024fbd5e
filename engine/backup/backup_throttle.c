/*
 * engine/backup/backup_throttle.c — what a backup does to stay out of the database's way
 * (docs/DESIGN.md, "Polite I/O"): the read plan and its controller, the I/O class, the
 * memory bound, the CPU weight of the process, and the report of what was applied.
 * Split from backup.c so the backup's order of steps reads on one screen there.
 */
#include "engine/backup/backup_internal.h"
#include "engine/backup/backup_throttle_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define PIPE_JOBS_MIN 2u /* one being filled, one being compressed */

/* --max-memory bounds the read buffers (read size x in flight, plus spare: the buffer a
 * pinned scan checks while its reads are in flight) and the compression queue (jobs x 1
 * MiB). The queue takes at most half of what one request leaves, down to two buffers;
 * the ceiling of in-flight reads comes down to fit the rest. One request (with its spare)
 * and two buffers must fit. */
static int fit_memory(const bk_opts *opts, const scan_io_plan *plan, unsigned spare,
                      unsigned *depth, unsigned *jobs, pb_error *err)
{
    const uint64_t frame = PACK_MAX_FRAME_RAW, one = plan->read_size * (1 + (uint64_t)spare);
    *jobs = BK_PIPE_JOBS;
    if (!opts->max_memory)
        return 0;
    if (opts->max_memory < PIPE_JOBS_MIN * frame + one)
        return pb_fail(err, PB_EINVAL, "--max-memory %" PRIu64 " bytes is too small: one read "
                       "request of %zu KiB plus the smallest compression queue (%u x %" PRIu64
                       " KiB) need %" PRIu64 " bytes", opts->max_memory, plan->read_size / 1024,
                       PIPE_JOBS_MIN, frame / 1024, PIPE_JOBS_MIN * frame + one);
    uint64_t q = (opts->max_memory - one) / 2 / frame;
    *jobs = q < PIPE_JOBS_MIN ? PIPE_JOBS_MIN : q > BK_PIPE_JOBS ? BK_PIPE_JOBS : (unsigned)q;
    uint64_t fit = (opts->max_memory - *jobs * frame) / plan->read_size - spare;
    if (fit < *depth || *jobs < BK_PIPE_JOBS) {
        pb_detail("--max-memory %" PRIu64 " MiB: at most %" PRIu64 " reads in flight (of %u) and "
                "%u compression buffers (of %d)", opts->max_memory >> 20,
                fit < *depth ? fit : *depth, *depth, *jobs, BK_PIPE_JOBS);
        if (fit < *depth)
            *depth = (unsigned)fit;
    }
    return 0;
}

/* PAGEBACK_READ_BUDGET: how much slower others' reads may get while the backup reads
 * (their latency, times theirs while it does not), 1.05 to 10; unset: 1.3. */
static int bk_read_budget(double *out, pb_error *err)
{
    const char *v = getenv("PAGEBACK_READ_BUDGET");
    char *end = NULL;
    *out = 0;
    if (!v || !v[0])
        return 0;
    errno = 0;
    double b = strtod(v, &end);
    if (errno || end == v || *end || !(b >= 1.05 && b <= 10))
        return pb_fail(err, PB_EINVAL, "PAGEBACK_READ_BUDGET=\"%s\": not a ratio from 1.05 to "
                       "10 (others' read latency allowed while the backup reads, times theirs "
                       "while it does not; default 1.3)", v);
    *out = b;
    return 0;
}

int bk_open_scanner(bk_ctx *ctx, const bk_opts *opts, pb_error *err)
{
    bk_io_report *io = &ctx->io;
    scan_io_plan plan;
    scan_plan_io(ctx->pgdata, opts->read_size, opts->queue_depth, &plan);
    scan_opts so = SCAN_OPTS_INIT;
    /* Given sizes, depths or rates pin the reads: no adaptation. */
    so.adaptive = plan.adaptive && !opts->max_rate;
    unsigned depth = so.adaptive ? plan.depth_max : plan.queue_depth;
    so.queue_depth = depth;
    int rc = fit_memory(opts, &plan, scan_buffers(&so) - depth, &depth, &io->pipe_jobs, err);
    if (rc)
        return rc;
    so.read_size = plan.read_size;
    so.queue_depth = depth;
    so.use_uring = opts->use_uring;
    so.direct = opts->direct;
    so.device_path = ctx->pgdata;
    if ((rc = bk_read_budget(&so.budget, err)))
        return rc;
    scan_io_class_apply(opts->io_class, opts->io_level, ctx->pgdata, &so.ioprio,
                        io->io_class_applied, sizeof(io->io_class_applied));
    pb_detail("I/O class: %s", io->io_class_applied);
    /* The page checks and hashing run on this thread, next to the database as much as the
     * compression is: --cpu-priority lowers it too (the workers it starts inherit it). */
    bk_cpu_lower((int)opts->cpu_priority, io->cpu_reader_applied,
                 sizeof(io->cpu_reader_applied));
    pb_detail("CPU priority: reading thread (page checks, hashing) %s", io->cpu_reader_applied);
    if (so.adaptive)
        pb_detail("reading %zu KiB requests, adaptive: 1 in flight to start, at most %u%s%s",
                so.read_size / 1024, depth, plan.why[0] ? ": " : "", plan.why);
    else
        pb_detail("reading %zu KiB x %u in flight (pinned by %s)%s%s", so.read_size / 1024,
                depth, opts->max_rate ? "--max-rate" : "--read-size/--queue-depth",
                plan.why[0] ? ": " : "", plan.why);
    io->read_size = so.read_size;
    io->depth_max = depth;
    io->buffer_bytes = (uint64_t)so.read_size * scan_buffers(&so) +
                       (uint64_t)io->pipe_jobs * PACK_MAX_FRAME_RAW;
    return scan_open(&ctx->scan, &so, err);
}

/* v2 (cgroup2 mounted at /sys/fs/cgroup) has cpu.weight 1..10000; v1 has cpu.shares,
 * 1024 for weight 100. The backup goes into a new child of the cgroup it runs in, when
 * that is writable (root, or a delegated subtree), and back out at the end. */
static bool write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    if (!fp)
        return false;
    bool ok = fputs(text, fp) >= 0;
    return fclose(fp) == 0 && ok;
}

/* The process's cgroup directory for the cpu controller (v1 "N:cpu,cpuacct:/x" or
 * "N:cpu:/x"; v2 "0::/x"), under its mount point. */
static bool own_cgroup(bool v2, char *out, size_t len)
{
    char line[512];
    bool found = false;
    FILE *fp = fopen("/proc/self/cgroup", "r");
    if (!fp)
        return false;
    while (!found && fgets(line, sizeof(line), fp)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = '\0';
        const char *ctrl = c1 + 1, *path = c2 + 1;
        bool cpu = v2 ? ctrl[0] == '\0' : (strcmp(ctrl, "cpu") == 0 ||
                                           strncmp(ctrl, "cpu,", 4) == 0);
        if (cpu)
            found = snprintf(out, len, "%s%s", v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/cpu",
                             strcmp(path, "/") == 0 ? "" : path) < (int)len;
    }
    fclose(fp);
    return found;
}

void bk_apply_cpu_weight(const bk_opts *opts, bk_io_report *io)
{
    char base[256], path[400], val[32];
    io->cpu_cgroup[0] = '\0';
    snprintf(io->cpu_weight_applied, sizeof(io->cpu_weight_applied), "none");
    if (!opts->cpu_weight)
        return;
    struct stat st;
    bool v2 = stat("/sys/fs/cgroup/cgroup.controllers", &st) == 0;
    const char *knob = v2 ? "cpu.weight" : "cpu.shares";
    unsigned value = v2 ? opts->cpu_weight : opts->cpu_weight * 1024 / 100;
    int why = ENOENT;
    if (!own_cgroup(v2, base, sizeof(base)))
        goto refused;
    snprintf(io->cpu_cgroup, sizeof(io->cpu_cgroup), "%s/pageback-%ld", base, (long)getpid());
    if (mkdir(io->cpu_cgroup, 0755) != 0 && errno != EEXIST) {
        why = errno;
        goto refused;
    }
    snprintf(path, sizeof(path), "%s/%s", io->cpu_cgroup, knob);
    snprintf(val, sizeof(val), "%u\n", value ? value : 2);
    bool ok = write_file(path, val);
    snprintf(path, sizeof(path), "%s/cgroup.procs", io->cpu_cgroup); /* every thread */
    snprintf(val, sizeof(val), "%ld\n", (long)getpid());
    if (ok && write_file(path, val)) {
        snprintf(io->cpu_weight_applied, sizeof(io->cpu_weight_applied), "cgroup %s %s %u",
                 io->cpu_cgroup, knob, value);
        pb_detail("CPU weight: %s", io->cpu_weight_applied);
        return;
    }
    why = errno;
    (void)rmdir(io->cpu_cgroup);
refused:
    io->cpu_cgroup[0] = '\0';
    snprintf(io->cpu_weight_applied, sizeof(io->cpu_weight_applied),
             "not applied: cannot create or join a cgroup under %s (%s)",
             v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/cpu", strerror(why));
    pb_warn("--cpu-weight %u %s", opts->cpu_weight, io->cpu_weight_applied);
}

void bk_release_cpu_weight(bk_io_report *io)
{
    char parent[sizeof(io->cpu_cgroup) + 16], val[32];
    if (!io->cpu_cgroup[0])
        return;
    snprintf(parent, sizeof(parent), "%s", io->cpu_cgroup);
    char *slash = strrchr(parent, '/');
    if (slash) {
        strcpy(slash, "/cgroup.procs");
        snprintf(val, sizeof(val), "%ld\n", (long)getpid());
        if (!write_file(parent, val) || rmdir(io->cpu_cgroup) != 0)
            pb_debug("could not leave and remove %s", io->cpu_cgroup);
    }
}

/* Where the time went: the reading thread's waits from the scanner and the pipe, the
 * workers' from the pipe and their pack writers; the reading thread's own work is the rest. */
static void collect_stages(bk_ctx *ctx)
{
    bk_io_report *io = &ctx->io;
    bk_stages *st = &io->stages;
    st->read_wait_seconds = io->scan.wait_seconds;
    st->pause_seconds = io->scan.pause_seconds;
    st->check_seconds = io->scan.check_seconds;
    st->check_wait_seconds = io->scan.check_wait_seconds;
    st->check_cpu_seconds = io->scan.check_cpu_seconds;
    if (ctx->pipe)
        bk_pipe_report(ctx->pipe, io);
    st->compress_seconds = st->write_seconds = 0;
    for (unsigned i = 0; i < ctx->nwriters; i++) {
        double c, w;
        pack_writer_times(ctx->writers[i], &c, &w);
        st->compress_seconds += c;
        st->write_seconds += w;
    }
    bk_stages_close(st);
}

static void log_stages(const bk_io_report *io)
{
    const bk_stages *st = &io->stages;
    char lv[400];
    size_t used = 0;
    uint64_t raw = 0;
    for (unsigned i = 0; i < io->nlevels; i++)
        raw += io->levels[i].raw_bytes;
    for (unsigned i = 0; i < io->nlevels && used < sizeof(lv); i++) {
        const bk_level_use *u = &io->levels[i];
        int n = snprintf(lv + used, sizeof(lv) - used, "%s%d: %.1f MiB (%.0f%%)", i ? ", " : "",
                         u->level, (double)u->raw_bytes / 1048576.0,
                         raw ? 100.0 * (double)u->raw_bytes / (double)raw : 0.0);
        used += n > 0 ? (size_t)n : 0;
    }
    pb_detail("stages: reading thread %.2f s: read wait %.2f s, pauses %.2f s, waiting for the "
            "checks %.2f s; check thread %.2f s = page checks and hashing %.2f s + compression "
            "queue full %.2f s; %u workers: compression %.2f s,"
            " repository writes %.2f s, idle %.2f s; %.2f s of the queue wait for files' last "
            "frames (at most %" PRIu64 " records waited for theirs at once)",
            st->scan_seconds, st->read_wait_seconds, st->pause_seconds, st->check_wait_seconds,
            st->check_seconds, st->page_work_seconds, st->queue_wait_seconds, st->workers,
            st->compress_seconds, st->write_seconds, st->worker_idle_seconds,
            st->drain_wait_seconds, io->manifest_pending_peak);
    pb_detail("compression levels (%s, ceiling %d, floor %d, %" PRIu64 " down, %" PRIu64 " up, "
            "final %d): %s", io->compress_adapt ? "adaptive" : "pinned", io->level_ceiling,
            io->level_floor, io->level_downs, io->level_ups, io->level_final,
            io->nlevels ? lv : "no frames");
}

/* CPU per GB read, per thread kind (the threads' own CPU clocks, robust on a shared machine
 * where wall-time rates are not): what a 2-vCPU host has to keep up with the disk. */
static void log_cpu(const bk_ctx *ctx, const struct rusage *ru)
{
    const bk_stages *st = &ctx->io.stages;
    double gb = (double)st->bytes_read / 1e9;
    double proc = (double)ru->ru_utime.tv_sec + ru->ru_utime.tv_usec / 1e6 +
                  (double)ru->ru_stime.tv_sec + ru->ru_stime.tv_usec / 1e6;
    if (gb <= 0)
        return;
    pb_detail("CPU per GB read: reading thread %.2f s/GB (%.2f s), check thread %.2f s/GB "
            "(%.2f s), %u workers %.2f s/GB (%.2f s), process %.2f s/GB (%.2f s user+sys, "
            "%.2f GB read)",
            st->reader_cpu_seconds / gb, st->reader_cpu_seconds, st->check_cpu_seconds / gb,
            st->check_cpu_seconds, st->workers,
            st->worker_cpu_seconds / gb, st->worker_cpu_seconds, proc / gb, proc, gb);
}

void bk_finish_report(bk_ctx *ctx)
{
    bk_io_report *io = &ctx->io;
    struct rusage ru;
    if (ctx->scan)
        scan_get_io_stats(ctx->scan, &io->scan);
    collect_stages(ctx);
    log_stages(io);
    repo_io_counts(ctx->repo, &io->repo_flushes, &io->repo_bytes_written);
    io->flushes_per_gb = io->repo_bytes_written
                             ? (double)io->repo_flushes / ((double)io->repo_bytes_written / 1e9)
                             : 0;
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        io->peak_rss_bytes = (uint64_t)ru.ru_maxrss * 1024;
        log_cpu(ctx, &ru);
    }
    const scan_io_stats *s = &io->scan;
    pb_detail("I/O: %s, %u..%u in flight (peak %u, final %u): %" PRIu64 " grows, %" PRIu64
            " plateaus, %" PRIu64 " cuts, %" PRIu64 " yields (%" PRIu64 " pauses, %.2f s); "
            "latency floor %.2f ms; others' reads up to %.0f/s; %" PRIu64 " of %" PRIu64
            " chunks read while the one before was checked (%" PRIu64 " requests; %" PRIu64
            " others held back by yielding pauses)",
            s->adaptive ? "adaptive" : "pinned", s->depth_start, io->depth_max, s->depth_peak,
            s->depth_final, s->grows, s->plateaus, s->cuts, s->yields, s->pauses,
            s->pause_seconds, s->latency_floor_ms, s->foreground_reads_per_s_peak,
            s->overlapped, s->chunks, s->requests, s->paused_chunks);
    if (s->adaptive && s->device_watched)
        pb_detail("cost to others' reads: %s; %.2f s of the scan while they read: their read "
                  "latency %.2f ms (latest), %.2f ms while not reading (%" PRIu64 " quiet "
                  "windows, %.2f s), budget %.2fx, up to %.2fx; %" PRIu64 " steps up, %" PRIu64
                  " down, %" PRIu64 " windows unclear; last step %zu KiB x %u in flight; %"
                  PRIu64 " pauses, %.2f s paused",
                  s->yields ? "steered" : "others did not read", s->steer_seconds, s->others_ms,
                  s->others_base_ms, s->quiet_windows, s->quiet_seconds, s->budget,
                  s->others_ratio_peak, s->steer_ups, s->steer_downs, s->unclear_windows,
                  s->steer_bytes / 1024, s->steer_depth, s->pauses, s->pause_seconds);
    pb_info("checks: on the check thread %.2f s (CPU %.2f s) for %" PRIu64 " chunks; the reading "
            "thread waited %" PRIu64 " times for a buffer they held, %.2f s in all", s->check_seconds,
            s->check_cpu_seconds, s->chunks, s->check_waits, s->check_wait_seconds);
    if (s->adaptive)
        pb_detail("I/O sizes: floor %.2f ms (median of an epoch at 1 in flight), requests %zu KiB "
                "(peak %zu KiB): %" PRIu64 " size grows, %" PRIu64 " size plateaus; last "
                "step: depth %+.0f%%, size %+.0f%%; latest decision: %s",
                s->latency_floor_median_ms, s->request_bytes_final / 1024,
                s->request_bytes_peak / 1024, s->size_grows, s->size_plateaus,
                s->depth_gain_pct, s->size_gain_pct, s->decision[0] ? s->decision : "none");
    pb_detail("repository: %" PRIu64 " flushes for %.1f MiB written (%.1f per GB); peak RSS "
            "%.1f MiB (buffers %.1f MiB)", io->repo_flushes,
            (double)io->repo_bytes_written / 1048576.0, io->flushes_per_gb,
            (double)io->peak_rss_bytes / 1048576.0, (double)io->buffer_bytes / 1048576.0);
    pb_detail("page cache: %.1f MiB of the %" PRIu64 " files read became resident while they "
            "were read", (double)io->page_cache_left_bytes / 1048576.0, io->page_cache_files);
    if (ctx->report)
        *ctx->report = *io;
}

void bk_stage_mark(double *mark, double *field)
{
    double now = pb_now();
    *field += now - *mark;
    *mark = now;
}

void bk_log_fixed_costs(const bk_stages *st)
{
    double scan = st->scan_seconds - st->walk_seconds;
    pb_detail("steps: connect %.3f s, plan %.3f s, start (checkpoint) %.3f s, prepare %.3f s, "
            "walk %.3f s, scan %.3f s, stop %.3f s, WAL wait %.3f s, manifest commit %.3f s, "
            "exit %.3f s; %.3f s in all, %.3f s outside the scan",
            st->connect_seconds, st->plan_seconds, st->start_seconds, st->prepare_seconds,
            st->walk_seconds, scan > 0 ? scan : 0, st->stop_seconds, st->wal_wait_seconds,
            st->commit_seconds, st->exit_seconds, st->total_seconds,
            st->total_seconds - (scan > 0 ? scan : 0));
}
