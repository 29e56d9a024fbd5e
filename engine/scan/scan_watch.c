/*
 * engine/scan/scan_watch.c — the scanner's look at the device for its controller (see
 * scan_queue_internal.h): the device's counters beside the scanner's own (its requests,
 * their latencies, this process's other reads), sampled as reads complete, before the
 * first read and while a pause is slept. The controller itself is pure
 * (scan_ctl.c, scan_devstat.c); this is where its samples come from.
 */
#include "engine/scan/scan_queue_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void log_decision(const scanner *s, scan_ctl_event ev)
{
    if (ev != SCAN_CTL_NONE)
        pb_detail("scan: %s", s->ctl.msg);
}

/* Reads on an md array's member disks that its own reads do not explain, so far. */
static uint64_t member_direct_reads(scanner *s, const scan_dev_counters *md)
{
    char text[512];
    uint64_t member_reads = 0;
    for (size_t i = 0; i < s->nmembers; i++) {
        scan_dev_counters mc;
        ssize_t m = pread(s->member_fd[i], text, sizeof(text) - 1, 0);
        if (m <= 0)
            continue;
        text[m] = '\0';
        if (scan_ctl_parse_stat(text, &mc) == 0)
            member_reads += mc.reads;
    }
    return scan_members_direct(&s->members, md->reads, md->read_sectors, member_reads,
                               s->md_chunk);
}

/* Every 0.1 s (the controller decides on that period): the device's completed reads,
 * and on an md array those that bypassed it on its member disks. */
/* This process's reads other than the scan's requests so far (bytes): /proc/self/io's
 * read_bytes counts every read that reached a device, direct or not, at submission. */
static uint64_t own_other_bytes(const scanner *s)
{
    char text[512];
    ssize_t n = s->io_fd >= 0 ? pread(s->io_fd, text, sizeof(text) - 1, 0) : -1;
    if (n <= 0)
        return 0;
    text[n] = '\0';
    const char *p = strstr(text, "\nread_bytes: ");
    if (!p)
        return 0;
    uint64_t all = strtoull(p + 13, NULL, 10), scan = s->bytes_done + s->own_inflight_bytes;
    return all > scan ? all - scan : 0;
}

/* The device's counters beside ours now; false when they cannot be read. */
static bool dev_sample(scanner *s, scan_dev_sample *d)
{
    char text[512];
    scan_dev_counters dc;
    ssize_t n = pread(s->stat_fd, text, sizeof(text) - 1, 0);
    if (n <= 0)
        return false;
    text[n] = '\0';
    if (scan_ctl_parse_stat(text, &dc) != 0)
        return false;
    uint64_t direct = s->nmembers ? member_direct_reads(s, &dc) : 0;
    *d = (scan_dev_sample){.reads = dc.reads + direct, .read_ticks_ms = dc.read_ticks,
                           .in_flight = dc.in_flight, .own_reads = s->own_dev_reads,
                           .own_ticks_ms = s->own_ticks_ms, .own_floor_ms = s->own_floor_ms,
                           .own_bytes = s->bytes_done, .own_inflight = s->own_inflight};
    if (s->io_fd >= 0) {
        d->read_bytes = dc.read_sectors * 512;
        d->own_other_bytes = own_other_bytes(s);
    }
    return true;
}

void scan_watch_device(scanner *s, double now)
{
    scan_dev_sample d;
    if (s->stat_fd < 0 || now - s->dev_read_at < 0.02) /* the controller's windows are longer */
        return;
    s->dev_read_at = now;
    if (dev_sample(s, &d))
        log_decision(s, scan_ctl_device(&s->ctl, now, &d));
}

void scan_watch_start(scanner *s)
{
    scan_watch_device(s, pb_now());
}

/* Before the first read: what others read since scan_watch_start is their baseline. */
void scan_watch_prescan(scanner *s)
{
    scan_dev_sample d;
    s->prescanned = true;
    if (s->stat_fd >= 0 && dev_sample(s, &d)) {
        double now = pb_now();
        s->dev_read_at = now;
        scan_ctl_prescan(&s->ctl, now, &d);
    }
}

/* One completion: its latency and size go to the controller. */
void scan_note_completion(scanner *s, double submitted, int res)
{
    double now = pb_now();
    /* Each of our requests is at least one device read, split at the device's largest
     * request: counting them so (not our bytes over that size, which undercounts a 512 KiB
     * read on a 4 MiB device 8 times) keeps our own reads out of "others' reads". */
    if (res > 0) {
        uint64_t parts = ((size_t)res + s->dev_max_io - 1) / s->dev_max_io;
        s->own_dev_reads += parts;
        double ms = (now - submitted) * 1e3;
        unsigned cls = 0;
        for (size_t b = (size_t)res; b; b >>= 1)
            cls++;
        if (s->lat_min[cls] <= 0 || ms < s->lat_min[cls])
            s->lat_min[cls] = ms;
        s->own_ticks_ms += (double)parts * ms;
        s->own_floor_ms += (double)parts * s->lat_min[cls];
        s->bytes_done += (uint64_t)res;
    }
    log_decision(s, scan_ctl_sample(&s->ctl, now, res > 0 ? (size_t)res : 0, now - submitted));
    scan_watch_device(s, now);
}
