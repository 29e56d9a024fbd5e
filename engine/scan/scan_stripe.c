/*
 * engine/scan/scan_stripe.c — the scanner's I/O plan: the stripe of the md RAID array holding
 * a path, read from sysfs, and from it the read size and depth (see scan.h). Split from
 * scan.c, which does the reading; this file only decides how much to read per request
 * and how many requests to keep in flight.
 */
#include "engine/scan/scan.h"
#include "engine/scan/scan_ctl_internal.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)
#define READ_SIZE_MIN (128 * KiB)
#define READ_SIZE_MAX (16 * MiB)
#define READ_SIZE_DEFAULT MiB
#define SINGLE_READ_SIZE (512 * KiB)
#define SINGLE_QUEUE_DEPTH 2u
#define STRIPED_QUEUE_DEPTH 8u
/* Adaptive ceilings: buffers the controller may fill, not what it starts with (one). */
#define SINGLE_DEPTH_MAX 8u
#define STRIPED_DEPTH_MAX 32u

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

static bool read_sys_line(const char *dir, const char *name, char *out, size_t len)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *fp = fopen(path, "r");
    if (!fp)
        return false;
    bool ok = fgets(out, (int)len, fp) != NULL;
    fclose(fp);
    if (ok)
        out[strcspn(out, "\n")] = '\0';
    return ok;
}

static bool read_sys_ulong(const char *dir, const char *name, unsigned long *out)
{
    char line[64], *end;
    if (!read_sys_line(dir, name, line, sizeof(line)))
        return false;
    errno = 0;
    *out = strtoul(line, &end, 0);
    return errno == 0 && end != line;
}

static size_t gcd(size_t a, size_t b)
{
    while (b) {
        size_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* A small stripe becomes the fewest whole stripes of at least 128 KiB that are also whole
 * 8 kB pages (lcm of the two: 3 data disks x 4 KiB chunks is a 12 KiB stripe, and 132 KiB
 * would end every request inside a page, which scan_open refuses); a huge one is capped
 * to bound memory. */
static size_t clamp_read_size(size_t stripe)
{
    if (stripe >= READ_SIZE_MAX)
        return READ_SIZE_MAX;
    size_t unit = stripe / gcd(stripe, PB_PAGE_SIZE) * PB_PAGE_SIZE;
    size_t n = unit < READ_SIZE_MIN ? round_up(READ_SIZE_MIN, unit) : unit;
    if (n > READ_SIZE_MAX)
        n = READ_SIZE_MAX;
    assert(n % PB_PAGE_SIZE == 0 && n % PB_ALIGN == 0);
    return n;
}

/* Data disks of an md array, from md/level, md/raid_disks and (raid10) md/layout;
 * 0 when the level has no striping we can use. */
static unsigned long md_data_disks(const char *md, const char *level, unsigned long disks,
                                   char *note, size_t note_len)
{
    note[0] = '\0';
    if (strcmp(level, "raid0") == 0)
        return disks;
    if (strcmp(level, "raid4") == 0 || strcmp(level, "raid5") == 0)
        return disks > 1 ? disks - 1 : 0;
    if (strcmp(level, "raid6") == 0)
        return disks > 2 ? disks - 2 : 0;
    if (strcmp(level, "raid10") == 0) {
        /* layout: near copies in bits 0-7, far copies in 8-15. Far and offset layouts
         * stripe the first copy across every disk; near copies divide the width. */
        unsigned long layout = 0, near = 2;
        if (read_sys_ulong(md, "md/layout", &layout) && (layout & 0xff) > 0)
            near = layout & 0xff;
        snprintf(note, note_len, ", %lu near copies", near);
        return disks / near;
    }
    return 0;
}

/* If dir/slaves holds exactly one device, put its path in out. */
static bool single_slave(const char *dir, char *out, size_t len)
{
    char slaves[PATH_MAX + 8];
    snprintf(slaves, sizeof(slaves), "%s/slaves", dir);
    DIR *d = opendir(slaves);
    if (!d)
        return false;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (++n == 1 && snprintf(out, len, "%s/%s", slaves, e->d_name) >= (int)len)
            n = 2; /* path too long: give up rather than follow a truncated one */
    }
    closedir(d);
    return n == 1;
}

/* *striped is set only when an md array with a usable stripe was found: every other
 * answer is the default size, and why says which case it was. */
static size_t stripe_from_sysfs(const char *sys_dev_dir, char *why, size_t why_len,
                                bool *striped)
{
    char dir[PATH_MAX], next[PATH_MAX + 16];
    *striped = false;
    if (!realpath(sys_dev_dir, dir)) {
        snprintf(why, why_len, "no sysfs entry %s; default %zu KiB", sys_dev_dir,
                 READ_SIZE_DEFAULT / KiB);
        return READ_SIZE_DEFAULT;
    }
    /* Walk from the file system's device to an md array: partition -> whole disk,
     * a stacked device (LVM, dm-crypt) with exactly one slave -> that slave. */
    for (int depth = 0; depth < 8; depth++) {
        const char *name = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
        char level[64];
        unsigned long chunk = 0, disks = 0, data;
        char note[64];
        if (read_sys_line(dir, "md/level", level, sizeof(level))) {
            if (!read_sys_ulong(dir, "md/chunk_size", &chunk) ||
                !read_sys_ulong(dir, "md/raid_disks", &disks) || chunk == 0 ||
                (data = md_data_disks(dir, level, disks, note, sizeof(note))) == 0) {
                snprintf(why, why_len, "%s is md %s without a usable stripe; default %zu KiB",
                         name, level, READ_SIZE_DEFAULT / KiB);
                return READ_SIZE_DEFAULT;
            }
            size_t stripe = (size_t)chunk * data, size = clamp_read_size(stripe);
            snprintf(why, why_len,
                     "%s is md %s, %lu KiB chunk x %lu data disks (%lu raid disks%s) = %zu KiB "
                     "stripe%s",
                     name, level, chunk / KiB, data, disks, note, stripe / KiB,
                     size != stripe ? ", adjusted to the 128 KiB..16 MiB range" : "");
            *striped = true;
            return size;
        }
        struct stat st;
        snprintf(next, sizeof(next), "%s/partition", dir);
        if (stat(next, &st) == 0) {
            snprintf(next, sizeof(next), "%s/..", dir);
        } else if (!single_slave(dir, next, sizeof(next))) {
            break;
        }
        if (!realpath(next, dir))
            break;
    }
    const char *name = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
    snprintf(why, why_len, "%s is not an md RAID device; default %zu KiB", name,
             READ_SIZE_DEFAULT / KiB);
    return READ_SIZE_DEFAULT;
}

size_t scan_stripe_from_sysfs(const char *sys_dev_dir, char *why, size_t why_len)
{
    bool striped;
    return stripe_from_sysfs(sys_dev_dir, why, why_len, &striped);
}

static size_t default_read_size(const char *path, char *why, size_t why_len, bool *striped)
{
    char tmp[8];
    if (!why || why_len == 0) {
        why = tmp;
        why_len = sizeof(tmp);
    }
    *striped = false;
    struct stat st;
    if (stat(path, &st) != 0) {
        snprintf(why, why_len, "cannot stat %s (%s); default %zu KiB", path, strerror(errno),
                 READ_SIZE_DEFAULT / KiB);
        return READ_SIZE_DEFAULT;
    }
    if (major(st.st_dev) == 0) {
        snprintf(why, why_len, "%s is on a virtual file system (device 0:%u); default %zu KiB",
                 path, minor(st.st_dev), READ_SIZE_DEFAULT / KiB);
        return READ_SIZE_DEFAULT;
    }
    char sys[64];
    snprintf(sys, sizeof(sys), "/sys/dev/block/%u:%u", major(st.st_dev), minor(st.st_dev));
    return stripe_from_sysfs(sys, why, why_len, striped);
}

size_t scan_default_read_size(const char *path, char *why, size_t why_len)
{
    bool striped;
    return default_read_size(path, why, why_len, &striped);
}

/* Bytes in flight decide both throughput and the database's read latency. An md array
 * needs a full stripe per request and several in flight to keep every disk busy; a
 * single device does not, and there megabytes queued ahead of the database's random
 * reads multiply its query p99 (docs/BENCHMARKS.md, "Query latency"): 512 KiB x 2
 * read ~88% as fast as 1 MiB x 8 here and kept p99 at pg_basebackup's level. With a
 * read size the user gives the device is not probed, and the depth is the array's 8
 * unless a depth is given too. */
void scan_plan_io(const char *path, size_t read_size, unsigned queue_depth,
                  scan_io_plan *out)
{
    memset(out, 0, sizeof(*out));
    out->layout = SCAN_LAYOUT_GIVEN;
    out->read_size = read_size;
    if (!read_size) {
        bool striped;
        out->read_size = default_read_size(path, out->why, sizeof(out->why), &striped);
        out->layout = striped ? SCAN_LAYOUT_STRIPED : SCAN_LAYOUT_SINGLE;
        if (!striped)
            out->read_size = SINGLE_READ_SIZE;
    }
    out->queue_depth = queue_depth ? queue_depth
                       : out->layout == SCAN_LAYOUT_SINGLE ? SINGLE_QUEUE_DEPTH
                                                           : STRIPED_QUEUE_DEPTH;
    /* Neither given: the controller adapts from one request up to a ceiling. */
    out->adaptive = !read_size && !queue_depth;
    out->depth_max = !out->adaptive ? out->queue_depth
                     : out->layout == SCAN_LAYOUT_STRIPED ? STRIPED_DEPTH_MAX
                                                          : SINGLE_DEPTH_MAX;
}

/* The device's sysfs directory as the kernel counts its I/O: a partition's reads are
 * also the whole disk's, and the disk is what others share with us. */
int scan_device_stat(const char *path, char *stat_path, size_t len, size_t *max_io)
{
    struct stat st;
    char sys[64], dir[PATH_MAX], next[PATH_MAX + 16];
    *max_io = 0;
    if (stat(path, &st) != 0 || major(st.st_dev) == 0)
        return PB_ENOENT;
    snprintf(sys, sizeof(sys), "/sys/dev/block/%u:%u", major(st.st_dev), minor(st.st_dev));
    if (!realpath(sys, dir))
        return PB_ENOENT;
    snprintf(next, sizeof(next), "%s/partition", dir);
    if (stat(next, &st) == 0) {
        snprintf(next, sizeof(next), "%s/..", dir);
        if (!realpath(next, dir))
            return PB_ENOENT;
    }
    /* A request is split at max_sectors_kb, and also where it would need more than
     * max_segments segments (a page each at worst): a 4 MiB read on 254 segments
     * becomes several device reads, all ours. */
    unsigned long kb = 0, segments = 0;
    if (read_sys_ulong(dir, "queue/max_sectors_kb", &kb))
        *max_io = (size_t)kb * KiB;
    if (read_sys_ulong(dir, "queue/max_segments", &segments) && segments > 0 &&
        (*max_io == 0 || segments * 4 * KiB < *max_io))
        *max_io = (size_t)segments * 4 * KiB;
    if (snprintf(stat_path, len, "%s/stat", dir) >= (int)len)
        return PB_ENOENT;
    return 0;
}
