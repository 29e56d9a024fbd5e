/*
 * engine/scan_ctl.c — the scanner's delay-based controller (see scan_ctl_internal.h).
 *
 * Why delay-based: the database's query latency rises with the bytes the backup keeps
 * in flight on a shared device, and the backup can see that cost coming as its own
 * completion latency rising above the unloaded floor. Throughput alone cannot tell a
 * single disk (a second request only queues behind the first) from a RAID0 of NVMe
 * drives (a second request doubles the rate), so growth is allowed only while it pays.
 * docs/DESIGN.md, "Polite I/O", states the rules; the thresholds are below.
 */
#include "engine/scan_ctl_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EPOCH_SAMPLES 8u       /* completions per decision, at least ... */
#define EPOCH_SECONDS 0.05     /* ... and this long, so one slow request decides nothing */
#define GROW_LATENCY 1.5       /* mean latency within this of the floor: may grow */
#define GROW_GAIN 0.10         /* the last request added must have bought 10% */
#define CUT_LATENCY 2.0        /* mean latency above this times the floor: halve */
#define REPROBE_EPOCHS 40u     /* after a plateau, try one more again this much later */
#define DEVICE_PERIOD 0.1      /* seconds between device samples that count */
#define YIELD_READS 50.0       /* foreground reads/s that make the scan yield */
#define PAUSE_FULL_BYTES (512.0 * 1024) /* a request this big earns the whole pause */
#define PAUSE_MIN 0.0001               /* shorter pauses are not taken */
#define PAUSE_MAX 0.020

void scan_ctl_init(scan_ctl *c, unsigned max_depth, bool pinned)
{
    memset(c, 0, sizeof(*c));
    c->max_depth = max_depth ? max_depth : 1;
    c->pinned = pinned;
    c->yield_reads = YIELD_READS;
    c->depth = pinned ? c->max_depth : 1;
    c->st.adaptive = !pinned;
    c->st.depth_start = c->st.depth_final = c->st.depth_peak = c->depth;
}

unsigned scan_ctl_depth(const scan_ctl *c) { return c->depth; }

static void set_depth(scan_ctl *c, unsigned depth)
{
    c->depth = depth < 1 ? 1 : depth > c->max_depth ? c->max_depth : depth;
    c->st.depth_final = c->depth;
    if (c->depth > c->st.depth_peak)
        c->st.depth_peak = c->depth;
}

static void epoch_reset(scan_ctl *c, double now)
{
    c->ep_start = now;
    c->ep_bytes = 0;
    c->ep_lat = 0;
    c->ep_n = 0;
}

/* One epoch is over: decide from its mean latency and throughput. */
static scan_ctl_event decide(scan_ctl *c, double tput, double lat)
{
    double ratio = lat / c->floor_s, gain = c->prev_tput > 0 ? tput / c->prev_tput - 1 : 0;
    unsigned was = c->depth;
    if (ratio > CUT_LATENCY && was > 1) {
        set_depth(c, was / 2);
        c->prev_tput = 0;
        c->plateau = false;
        c->st.cuts++;
        snprintf(c->msg, sizeof(c->msg), "%u in flight: latency %.1fx the %.2f ms floor at %u",
                 c->depth, ratio, c->floor_s * 1e3, was);
        return SCAN_CTL_CUT;
    }
    if (ratio > GROW_LATENCY)
        return SCAN_CTL_NONE; /* between near and too far: hold */
    if (c->plateau) {
        if (++c->calm_epochs < REPROBE_EPOCHS || was >= c->max_depth)
            return SCAN_CTL_NONE;
        c->plateau = false; /* the device or the load may have changed: probe again */
        c->prev_tput = 0;
    }
    if (c->prev_tput > 0 && gain < GROW_GAIN) {
        set_depth(c, was - 1);
        c->plateau = true;
        c->calm_epochs = 0;
        c->st.plateaus++;
        snprintf(c->msg, sizeof(c->msg), "%u in flight: throughput flat at %u (%+.0f%%), "
                 "holding", c->depth, was, gain * 100);
        return SCAN_CTL_PLATEAU;
    }
    if (was >= c->max_depth)
        return SCAN_CTL_NONE;
    bool probe = c->prev_tput <= 0;
    c->prev_tput = tput;
    set_depth(c, was + 1);
    c->st.grows++;
    if (probe)
        snprintf(c->msg, sizeof(c->msg), "%u in flight: probing (floor %.2f ms, %.0f MB/s at "
                 "%u)", c->depth, c->floor_s * 1e3, tput / 1e6, was);
    else
        snprintf(c->msg, sizeof(c->msg), "%u in flight: %+.0f%% throughput at %u (%.0f MB/s, "
                 "latency %.1fx floor)", c->depth, gain * 100, was, tput / 1e6, ratio);
    return SCAN_CTL_GROW;
}

scan_ctl_event scan_ctl_sample(scan_ctl *c, double now, size_t bytes, double latency_s)
{
    c->last = SCAN_CTL_NONE;
    c->st.requests++;
    c->last_lat = latency_s;
    c->last_bytes = bytes;
    bool full = bytes >= c->full_bytes;
    if (full && latency_s > 0 && (c->floor_s <= 0 || latency_s < c->floor_s)) {
        c->floor_s = latency_s;
        c->st.latency_floor_ms = latency_s * 1e3;
    }
    if (c->pinned || c->yielding)
        return SCAN_CTL_NONE;
    if (c->ep_n == 0 && c->ep_bytes == 0 && c->ep_start <= 0)
        c->ep_start = now - latency_s; /* the very first request began then */
    c->ep_bytes += bytes;
    if (full) {
        c->ep_lat += latency_s;
        c->ep_n++;
    }
    double span = now - c->ep_start;
    if (c->ep_n < EPOCH_SAMPLES || span < EPOCH_SECONDS || c->floor_s <= 0)
        return SCAN_CTL_NONE;
    double tput = (double)c->ep_bytes / span, lat = c->ep_lat / c->ep_n;
    epoch_reset(c, now);
    c->last = decide(c, tput, lat);
    return c->last;
}

/* Reads the device completed that this scanner did not issue, per second. Merges are
 * ignored (they can only make the estimate of others' reads lower). */
static double foreground_rate(const scan_ctl *c, double now, uint64_t dev_reads,
                              uint64_t own_reads)
{
    uint64_t dreads = dev_reads - c->dev_reads;
    uint64_t own = own_reads - c->dev_own_reads;
    return dreads > own ? (double)(dreads - own) / (now - c->dev_t) : 0;
}

scan_ctl_event scan_ctl_device(scan_ctl *c, double now, uint64_t dev_reads,
                               uint64_t own_reads)
{
    c->last = SCAN_CTL_NONE;
    if (c->dev_have && now - c->dev_t < DEVICE_PERIOD)
        return SCAN_CTL_NONE;
    if (!c->dev_have || dev_reads < c->dev_reads || own_reads < c->dev_own_reads) {
        c->dev_have = true; /* first sample, or a counter reset: a new baseline */
        goto baseline;
    }
    double fg = foreground_rate(c, now, dev_reads, own_reads);
    if (fg > c->st.foreground_reads_per_s_peak)
        c->st.foreground_reads_per_s_peak = fg;
    if (c->pinned)
        goto baseline;
    if (!c->yielding && fg > c->yield_reads) {
        c->yielding = true;
        set_depth(c, 1);
        c->st.yields++;
        snprintf(c->msg, sizeof(c->msg), "yielding: %.0f foreground reads/s (1 in flight, "
                 "pauses between reads)", fg);
        c->last = SCAN_CTL_YIELD;
    } else if (c->yielding && fg < c->yield_reads / 2) {
        c->yielding = false;
        c->prev_tput = 0;
        c->plateau = false;
        epoch_reset(c, now);
        c->st.resumes++;
        snprintf(c->msg, sizeof(c->msg), "resuming: %.0f foreground reads/s, probing again "
                 "from 1 in flight", fg);
        c->last = SCAN_CTL_RESUME;
    }
baseline:
    c->dev_t = now;
    c->dev_reads = dev_reads;
    c->dev_own_reads = own_reads;
    return c->last;
}

double scan_ctl_pause(scan_ctl *c, double now)
{
    if (!c->yielding)
        return 0;
    if (c->pause_until <= 0) {
        /* Leave the device idle twice as long as our last read held it, scaled down for
         * a small read (it delays others little; a data directory of small files must
         * not crawl): others' reads then find it free most of the time. */
        double full = c->pause_full_bytes ? (double)c->pause_full_bytes : PAUSE_FULL_BYTES;
        double scale = (double)c->last_bytes / full;
        double p = 2 * c->last_lat * (scale < 1 ? scale : 1);
        if (p < PAUSE_MIN)
            return 0;
        p = p > PAUSE_MAX ? PAUSE_MAX : p;
        c->pause_until = now + p;
        c->st.pauses++;
        c->st.pause_seconds += p;
    }
    double left = c->pause_until - now;
    if (left <= 0) {
        c->pause_until = 0;
        return 0;
    }
    return left;
}

int scan_ctl_parse_stat(const char *text, scan_dev_counters *out)
{
    uint64_t v[11];
    const char *p = text;
    for (int i = 0; i < 11; i++) {
        char *end;
        errno = 0;
        while (*p == ' ' || *p == '\t')
            p++;
        v[i] = strtoull(p, &end, 10);
        if (errno || end == p || (*end != ' ' && *end != '\t' && *end != '\n' && *end))
            return PB_EINVAL;
        p = end;
    }
    out->reads = v[0];
    out->read_sectors = v[2];
    out->writes = v[4];
    out->write_sectors = v[6];
    out->in_flight = v[8];
    return 0;
}
