/*
 * tools/progress.c — the progress display of a backup, restore, verify or rebase, fed by
 * their progress callbacks (bk_opts.progress, rs_opts.progress, the rs_progress_hook of
 * rs_verify_repo and rs_rebase; the modules print nothing). On a terminal a live line on
 * stderr, redrawn at most twice a second; elsewhere (cron, systemd, a log file) one
 * log line every --progress-interval seconds, so a journal is not flooded. --quiet
 * turns both off.
 */
#include "tools/commands.h"

#include <inttypes.h>
#include <stdio.h>
#include <unistd.h>

#define TTY_REDRAW_SECONDS 0.5

void cmd_progress_init(cmd_progress *p, const pb_options *o)
{
    p->tty = isatty(STDERR_FILENO) == 1;
    p->interval = o->progress_interval;
    p->enabled = !o->quiet && (p->tty || p->interval > 0);
    p->start = p->last = pb_now();
    p->first_byte = 0;
    p->drew = p->pending = false;
    p->latest[0] = '\0';
    p->whole_repo = false;
}

/* What both displays show: bytes done of the total, the rate, files, the time left;
 * extra (pages changed) follows the files. */
typedef struct prog_view {
    const char *what;
    uint64_t bytes_done, bytes_total, files_done, files_total;
    char extra[64];
    const char *unit; /* what files_done counts: NULL = "files" */
} prog_view;

/* The rate counts from the first byte, not from the start: a spread checkpoint can hold
 * a backup at zero bytes for minutes, and a rate over that wait makes the first ETAs
 * absurd (days). Under a second of reading, neither is known yet. */
#define RATE_MIN_SECONDS 1.0

static void format_line(char *out, size_t cap, const prog_view *v, double reading)
{
    double rate = reading >= RATE_MIN_SECONDS ? (double)v->bytes_done / reading : 0;
    double left = v->bytes_total > v->bytes_done ? (double)(v->bytes_total - v->bytes_done) : 0;
    char eta[32];
    if (rate > 0) {
        unsigned s = (unsigned)(left / rate);
        snprintf(eta, sizeof(eta), "%u:%02u:%02u", s / 3600, s / 60 % 60, s % 60);
    } else {
        snprintf(eta, sizeof(eta), "unknown");
    }
    snprintf(out, cap, "%.1f / %.1f MiB (%.0f%%), %.1f MB/s, %s %" PRIu64 "/%" PRIu64
             "%s, ETA %s", v->bytes_done / 1048576.0, v->bytes_total / 1048576.0,
             v->bytes_total ? 100.0 * (double)v->bytes_done / (double)v->bytes_total : 100.0,
             rate / 1e6, v->unit ? v->unit : "files", v->files_done, v->files_total, v->extra,
             eta);
}

static void draw_latest(cmd_progress *p)
{
    fprintf(stderr, "\r%s\033[K", p->latest);
    p->drew = true;
    p->pending = false;
}

static void show(cmd_progress *p, const prog_view *v)
{
    if (!p->enabled)
        return;
    double now = pb_now();
    bool due = now - p->last >= (p->tty ? TTY_REDRAW_SECONDS : (double)p->interval);
    if (!due && !p->tty)
        return;
    char line[256];
    if (v->bytes_done > 0 && p->first_byte == 0)
        p->first_byte = now;
    format_line(line, sizeof(line), v, p->first_byte > 0 ? now - p->first_byte : 0);
    if (!p->tty) {
        p->last = now;
        pb_info("progress: %s", line);
        return;
    }
    snprintf(p->latest, sizeof(p->latest), "%s: %s", v->what, line);
    p->pending = true;
    if (due) {
        p->last = now;
        draw_latest(p);
    }
}

void cmd_progress_backup(void *ctx, const bk_progress *b)
{
    prog_view v = {"backup", b->bytes_done, b->bytes_total, b->files_done, b->files_total,
                   "", NULL};
    int n = snprintf(v.extra, sizeof(v.extra), ", pages changed %" PRIu64, b->pages_changed);
    if (b->bytes_skipped && n > 0 && (size_t)n < sizeof(v.extra))
        snprintf(v.extra + n, sizeof(v.extra) - (size_t)n, ", skipped %.1f MiB",
                 b->bytes_skipped / 1048576.0);
    show(ctx, &v);
}

void cmd_progress_restore(void *ctx, const rs_progress *r)
{
    prog_view v = {"restore", r->bytes_done, r->bytes_total, r->files_done, r->files_total,
                   "", NULL};
    show(ctx, &v);
}

void cmd_progress_verify(void *ctx, const rs_progress *r)
{
    const cmd_progress *p = ctx;
    prog_view v = {"verify", r->bytes_done, r->bytes_total, r->files_done, r->files_total, "",
                   p->whole_repo ? "backups" : NULL};
    show(ctx, &v);
}

void cmd_progress_rebase(void *ctx, const rs_progress *r)
{
    prog_view v = {"rebase", r->bytes_done, r->bytes_total, r->files_done, r->files_total,
                   "", NULL};
    show(ctx, &v);
}

void cmd_progress_clear(cmd_progress *p)
{
    if (!p->drew)
        return;
    fputs("\r\033[K", stderr);
    p->drew = false;
    p->pending = p->latest[0] != '\0';
}

void cmd_progress_end(cmd_progress *p)
{
    if (p->pending)
        draw_latest(p);
    if (p->drew)
        fputc('\n', stderr);
    p->drew = false;
}
