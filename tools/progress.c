/*
 * tools/progress.c — the progress display of a backup, fed by the engine's progress
 * callback (bk_opts.progress; the engine prints nothing). On a terminal a live line on
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
    p->drew = false;
}

static void format_line(char *out, size_t cap, const bk_progress *b, double elapsed)
{
    double rate = elapsed > 0 ? (double)b->bytes_done / elapsed : 0;
    double left = b->bytes_total > b->bytes_done ? (double)(b->bytes_total - b->bytes_done) : 0;
    char eta[32];
    if (rate > 0) {
        unsigned s = (unsigned)(left / rate);
        snprintf(eta, sizeof(eta), "%u:%02u:%02u", s / 3600, s / 60 % 60, s % 60);
    } else {
        snprintf(eta, sizeof(eta), "unknown");
    }
    snprintf(out, cap, "%.1f / %.1f MiB (%.0f%%), %.1f MB/s, files %" PRIu64 "/%" PRIu64
             ", pages changed %" PRIu64 ", ETA %s", b->bytes_done / 1048576.0,
             b->bytes_total / 1048576.0,
             b->bytes_total ? 100.0 * (double)b->bytes_done / (double)b->bytes_total : 100.0,
             rate / 1e6, b->files_done, b->files_total, b->pages_changed, eta);
}

void cmd_progress_backup(void *ctx, const bk_progress *b)
{
    cmd_progress *p = ctx;
    if (!p->enabled)
        return;
    double now = pb_now();
    if (now - p->last < (p->tty ? TTY_REDRAW_SECONDS : (double)p->interval))
        return;
    p->last = now;
    char line[256];
    format_line(line, sizeof(line), b, now - p->start);
    if (p->tty) {
        fprintf(stderr, "\rbackup: %s\033[K", line);
        p->drew = true;
    } else {
        pb_info("progress: %s", line);
    }
}

void cmd_progress_end(cmd_progress *p)
{
    if (p->drew)
        fputc('\n', stderr);
    p->drew = false;
}
