/*
 * tools/progress.c — the progress display of a backup, restore, verify or rebase, fed by
 * their progress callbacks (bk_opts.progress, rs_opts.progress, the rs_progress_hook of
 * rs_verify_repo and rs_rebase; the modules print nothing). On a terminal a live line on
 * stderr, redrawn at most twice a second; elsewhere (cron, systemd, a log file) one
 * log line every --progress-interval seconds, so a journal is not flooded. --quiet
 * turns both off. A callback comes after every chunk read, so it only keeps the figures;
 * a line is formatted when it is drawn or logged.
 */
#include "tools/commands.h"

#include <inttypes.h>
#include <stdio.h>
#include <unistd.h>

#define TTY_REDRAW_SECONDS 0.5

static double wall_clock(void *unused)
{
    (void)unused;
    return pb_now();
}

void cmd_progress_init(cmd_progress *p, const pb_options *o)
{
    p->tty = isatty(STDERR_FILENO) == 1;
    p->interval = o->progress_interval;
    p->enabled = !o->quiet && (p->tty || p->interval > 0);
    p->now = wall_clock;
    p->now_ctx = NULL;
    p->out = stderr;
    p->formats = 0;
    p->start = p->last = p->now(p->now_ctx);
    p->first_byte = 0;
    p->drew = p->pending = false;
    p->latest = (cmd_progress_view){0};
    p->whole_repo = false;
    if (p->enabled && p->tty) /* a log line takes the live line off first */
        pb_log_set_console_hook(cmd_progress_before_log, p);
}

void cmd_progress_before_log(void *ctx)
{
    cmd_progress_clear(ctx);
}

/* The rate counts from the first byte, not from the start: a spread checkpoint can hold
 * a backup at zero bytes for minutes, and a rate over that wait makes the first ETAs
 * absurd (days). Under a second of reading, neither is known yet. */
#define RATE_MIN_SECONDS 1.0

/* The line of v: bytes done of the total, the rate, files, pages changed, the time left. */
static void format_line(cmd_progress *p, char *out, size_t cap, const cmd_progress_view *v)
{
    double reading = p->first_byte > 0 ? v->at - p->first_byte : 0;
    double rate = reading >= RATE_MIN_SECONDS ? (double)v->bytes_done / reading : 0;
    double left = v->bytes_total > v->bytes_done ? (double)(v->bytes_total - v->bytes_done) : 0;
    char eta[32], extra[64] = "";
    if (rate > 0) {
        unsigned s = (unsigned)(left / rate);
        snprintf(eta, sizeof(eta), "%u:%02u:%02u", s / 3600, s / 60 % 60, s % 60);
    } else {
        snprintf(eta, sizeof(eta), "unknown");
    }
    int n = v->pages ? snprintf(extra, sizeof(extra), ", pages changed %" PRIu64,
                                v->pages_changed) : 0;
    if (v->bytes_skipped && n > 0 && (size_t)n < sizeof(extra))
        snprintf(extra + n, sizeof(extra) - (size_t)n, ", skipped %.1f MiB",
                 v->bytes_skipped / 1048576.0);
    snprintf(out, cap, "%.1f / %.1f MiB (%.0f%%), %.1f MB/s, %s %" PRIu64 "/%" PRIu64
             "%s, ETA %s", v->bytes_done / 1048576.0, v->bytes_total / 1048576.0,
             v->bytes_total ? 100.0 * (double)v->bytes_done / (double)v->bytes_total : 100.0,
             rate / 1e6, v->unit ? v->unit : "files", v->files_done, v->files_total, extra,
             eta);
    p->formats++;
}

static void draw_latest(cmd_progress *p)
{
    char line[320];
    format_line(p, line, sizeof(line), &p->latest);
    fprintf(p->out, "\r%s: %s\033[K", p->latest.what, line);
    p->drew = true;
    p->pending = false;
}

static void show(cmd_progress *p, cmd_progress_view *v)
{
    if (!p->enabled)
        return;
    double now = p->now(p->now_ctx);
    if (v->bytes_done > 0 && p->first_byte == 0)
        p->first_byte = now;
    bool due = now - p->last >= (p->tty ? TTY_REDRAW_SECONDS : (double)p->interval);
    v->at = now;
    p->latest = *v; /* kept even when not drawn: the end shows the last figures */
    p->pending = p->tty || p->pending;
    if (!due)
        return;
    p->last = now;
    if (p->tty) {
        draw_latest(p);
        return;
    }
    char line[256];
    format_line(p, line, sizeof(line), v);
    p->pending = false;
    pb_info("progress: %s", line);
}

void cmd_progress_backup(void *ctx, const bk_progress *b)
{
    cmd_progress_view v = {"backup", NULL, b->bytes_done, b->bytes_total, b->files_done,
                           b->files_total, true, b->pages_changed, b->bytes_skipped, 0};
    show(ctx, &v);
}

void cmd_progress_restore(void *ctx, const rs_progress *r)
{
    cmd_progress_view v = {"restore", NULL, r->bytes_done, r->bytes_total, r->files_done,
                           r->files_total, false, 0, 0, 0};
    show(ctx, &v);
}

void cmd_progress_verify(void *ctx, const rs_progress *r)
{
    const cmd_progress *p = ctx;
    cmd_progress_view v = {"verify", p->whole_repo ? "backups" : NULL, r->bytes_done,
                           r->bytes_total, r->files_done, r->files_total, false, 0, 0, 0};
    show(ctx, &v);
}

void cmd_progress_rebase(void *ctx, const rs_progress *r)
{
    cmd_progress_view v = {"rebase", NULL, r->bytes_done, r->bytes_total, r->files_done,
                           r->files_total, false, 0, 0, 0};
    show(ctx, &v);
}

void cmd_progress_clear(cmd_progress *p)
{
    if (!p->drew)
        return;
    fputs("\r\033[K", p->out);
    p->drew = false;
    p->pending = p->latest.what != NULL;
}

void cmd_progress_done(cmd_progress *p)
{
    cmd_progress_view *v = &p->latest;
    if (!p->enabled || !v->what)
        return;
    /* Done is 100%: a file that grew while it was read, or a total that was an estimate,
     * must not leave "98%" as the last word before the summary. */
    if (v->bytes_total < v->bytes_done)
        v->bytes_total = v->bytes_done;
    v->bytes_done = v->bytes_total;
    if (v->files_total < v->files_done)
        v->files_total = v->files_done;
    v->files_done = v->files_total;
    v->at = p->now(p->now_ctx);
    if (p->tty) {
        p->pending = true;
    } else if (p->formats > 0) { /* a run short enough to log no line logs no end either */
        char line[256];
        format_line(p, line, sizeof(line), v);
        pb_info("progress: %s", line);
    }
}

void cmd_progress_end(cmd_progress *p)
{
    if (p->enabled && p->tty)
        pb_log_set_console_hook(NULL, NULL);
    if (p->pending && p->tty)
        draw_latest(p);
    if (p->drew)
        fputc('\n', p->out);
    p->drew = false;
    p->pending = false;
}
