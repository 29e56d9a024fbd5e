/*
 * common/log.c — the log: lines to stderr (the console) and to a log file, each with
 * its own level. The file gets each line in one write(2) on an O_APPEND descriptor, so
 * the lines of concurrent runs (archive-push is run once per segment, sometimes several
 * at once) interleave whole. Writing the file is best effort: a full disk or a revoked
 * permission warns once on stderr and the command goes on.
 */
#include "pb.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Program options, set in main before the command runs (the hook by the progress
 * display, around the run it draws). */
static pb_log_level console_level = PB_LOG_INFO;
static pb_log_level file_level = PB_LOG_INFO;
static int file_fd = -1;
static int file_failed; /* a write failed: warned once, the file is no longer written */
static void (*console_hook)(void *ctx);
static void *console_hook_ctx;
/* One line at a time, so the hook's clearing and the line stay together. */
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const level_names[] = {"ERROR", "WARNING", "INFO", "DETAIL", "DEBUG"};

void pb_log_set_level(pb_log_level level)
{
    console_level = level;
}

void pb_log_set_file_level(pb_log_level level)
{
    file_level = level;
}

void pb_log_set_file(int fd)
{
    pthread_mutex_lock(&out_lock);
    file_fd = fd;
    file_failed = 0;
    pthread_mutex_unlock(&out_lock);
}

void pb_log_set_console_hook(void (*before)(void *ctx), void *ctx)
{
    pthread_mutex_lock(&out_lock);
    console_hook = before;
    console_hook_ctx = ctx;
    pthread_mutex_unlock(&out_lock);
}

int pb_log_level_parse(const char *text, int allow_off, pb_log_level *out)
{
    static const char *const names[] = {"error", "warn", "info", "detail", "debug"};
    for (int i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++)
        if (!strcmp(text, names[i])) {
            *out = (pb_log_level)i;
            return 0;
        }
    if (allow_off && !strcmp(text, "off")) {
        *out = PB_LOG_OFF;
        return 0;
    }
    return PB_EINVAL;
}

/* Called with out_lock held. */
static void file_write(const char *level_name, const char *line)
{
    char when[32], buf[2200];
    time_t now = time(NULL);
    struct tm tm;
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
    int n = snprintf(buf, sizeof(buf), "%s [%d] %s: %s\n", when, (int)getpid(), level_name,
                     line);
    if (n < 0)
        return;
    size_t len = (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1;
    if (len == sizeof(buf) - 1)
        buf[len - 1] = '\n';
    ssize_t w;
    do
        w = write(file_fd, buf, len);
    while (w < 0 && errno == EINTR);
    if (w == (ssize_t)len)
        return;
    file_failed = 1;
    fprintf(stderr, "pageback: WARNING: cannot write the log file (%s): logging to the "
            "console only\n", w < 0 ? strerror(errno) : "short write");
}

static void log_line(pb_log_level level, int to_console, const char *line)
{
    pthread_mutex_lock(&out_lock);
    if (to_console && level <= console_level) {
        if (console_hook)
            console_hook(console_hook_ctx);
        fprintf(stderr, "pageback: %s: %s\n", level_names[level], line);
    }
    if (file_fd >= 0 && !file_failed && (!to_console || (file_level != PB_LOG_OFF &&
                                                         level <= file_level)))
        file_write(level_names[level], line);
    pthread_mutex_unlock(&out_lock);
}

void pb_log(pb_log_level level, const char *fmt, ...)
{
    if (level < PB_LOG_ERROR || (level > console_level && (file_fd < 0 || level > file_level)))
        return; /* the common case, a debug line nobody reads, costs no formatting */
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    log_line(level, 1, line);
}

void pb_log_file_only(const char *fmt, ...)
{
    if (file_fd < 0)
        return;
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    log_line(PB_LOG_INFO, 0, line);
}

const char *pb_plural(uint64_t n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}
