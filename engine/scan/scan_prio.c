/*
 * engine/scan/scan_prio.c — the I/O scheduling class of the scan (--io-class, see scan.h).
 *
 * Why here and why both ways: io_uring requests carry their own priority (sqe->ioprio,
 * set by scan.c), and the pread path and the repository writers take the thread's
 * (ioprio_set). A class is only a hint to the device's scheduler: mq-deadline and bfq
 * act on it, none and kyber ignore it, so the log says which one the device has
 * (docs/DESIGN.md, "Polite I/O").
 */
#include "engine/scan/scan.h"
#include "engine/scan/scan_ctl_internal.h"

#include <errno.h>
#include <linux/ioprio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The active scheduler of the device under path ("mq-deadline"), or "" if unknown. */
static void device_scheduler(const char *path, char *out, size_t len)
{
    char stat_path[4096], line[256];
    size_t max_io;
    out[0] = '\0';
    if (scan_device_stat(path, stat_path, sizeof(stat_path), &max_io) != 0)
        return;
    char *slash = strrchr(stat_path, '/');
    if (!slash || (size_t)(slash - stat_path) + sizeof("/queue/scheduler") > sizeof(stat_path))
        return;
    strcpy(slash, "/queue/scheduler");
    FILE *fp = fopen(stat_path, "r");
    if (!fp)
        return;
    bool ok = fgets(line, sizeof(line), fp) != NULL;
    fclose(fp);
    char *open = ok ? strchr(line, '[') : NULL, *close = open ? strchr(open, ']') : NULL;
    if (close) /* "none [mq-deadline] kyber bfq": the bracketed one is active */
        snprintf(out, len, "%.*s", (int)(close - open - 1), open + 1);
    else if (ok) /* a single scheduler is printed without brackets */
        snprintf(out, len, "%.*s", (int)strcspn(line, " \n"), line);
}

static int set_ioprio(int value)
{
    return (int)syscall(SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, value);
}

void scan_io_class_apply(scan_io_class cls, int level, const char *path, int *ioprio_out,
                         char *applied, size_t len)
{
    char what[64], sched[64];
    *ioprio_out = 0;
    if (cls == SCAN_IO_DEFAULT) {
        snprintf(applied, len, "the process's own (--io-class default)");
        return;
    }
    int value = IOPRIO_PRIO_VALUE(IOPRIO_CLASS_IDLE, 0);
    snprintf(what, sizeof(what), "idle");
    if (cls == SCAN_IO_IDLE && set_ioprio(value) != 0) {
        snprintf(what, sizeof(what), "best-effort 7 (idle refused: %s)", strerror(errno));
        cls = SCAN_IO_BEST_EFFORT;
        level = 7;
    } else if (cls == SCAN_IO_BEST_EFFORT) {
        snprintf(what, sizeof(what), "best-effort %d", level);
    }
    if (cls == SCAN_IO_BEST_EFFORT) {
        value = IOPRIO_PRIO_VALUE(IOPRIO_CLASS_BE, level);
        if (set_ioprio(value) != 0) {
            snprintf(applied, len, "none: best-effort %d refused (%s)", level,
                     strerror(errno));
            return;
        }
    }
    *ioprio_out = value;
    device_scheduler(path ? path : ".", sched, sizeof(sched));
    if (!sched[0])
        snprintf(applied, len, "%s; the device's scheduler is unknown", what);
    else if (strcmp(sched, "mq-deadline") == 0 || strcmp(sched, "bfq") == 0 ||
             strcmp(sched, "cfq") == 0)
        snprintf(applied, len, "%s; scheduler %s honours it", what, sched);
    else
        snprintf(applied, len, "%s; scheduler %s ignores I/O classes", what, sched);
}
