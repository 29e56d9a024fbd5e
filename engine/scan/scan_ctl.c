/*
 * engine/scan/scan_ctl.c — the scanner's delay-based controller (see scan_ctl_internal.h).
 *
 * Why delay-based: the database's query latency rises with the bytes the backup keeps
 * in flight on a shared device, and the backup can see that cost coming as its own
 * completion latency rising above the unloaded floor. Throughput alone cannot tell a
 * single disk (a second request only queues behind the first) from a RAID0 of NVMe
 * drives (a second request doubles the rate), so growth is allowed only while it pays.
 * docs/DESIGN.md, "Polite I/O", states the rules; the thresholds are below.
 */
#include "engine/scan/scan_ctl_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EPOCH_SAMPLES 8u       /* completions per decision, at least ... */
#define EPOCH_SECONDS 0.05     /* ... and this long, so one slow request decides nothing */
#define GROW_LATENCY 1.5       /* median latency within this of the floor: may grow */
#define GROW_GAIN 0.10         /* the last step (request, size) must have bought 10% */
#define CUT_LATENCY 2.0        /* median latency above this times the floor: halve */
#define REPROBE_EPOCHS 40u     /* after a plateau, try one more again this much later */
#define DEVICE_PERIOD 0.1      /* seconds between device samples that count */
#define YIELD_READS 20.0       /* others' reads/s that make the scan steer by their cost */

void scan_ctl_init(scan_ctl *c, unsigned max_depth, bool pinned)
{
    memset(c, 0, sizeof(*c));
    c->max_depth = max_depth ? max_depth : 1;
    c->pinned = pinned;
    c->yield_reads = YIELD_READS;
    c->budget = SCAN_CTL_BUDGET;
    c->st.budget = c->budget;
    c->depth = pinned ? c->max_depth : 1;
    c->mult = c->mult_max = 1;
    c->st.adaptive = !pinned;
    c->st.depth_start = c->st.depth_final = c->st.depth_peak = c->depth;
}

void scan_ctl_sizes(scan_ctl *c, size_t base_bytes, unsigned mult_max)
{
    c->base_bytes = base_bytes;
    c->mult_max = c->pinned || mult_max < 1 ? 1 : mult_max;
    c->st.request_bytes_peak = c->st.request_bytes_final = base_bytes;
    scan_ctl_ladder(c);
}

unsigned scan_ctl_depth(const scan_ctl *c) { return c->depth; }

unsigned scan_ctl_mult(const scan_ctl *c) { return c->pinned ? 1 : c->mult; }

static void set_depth(scan_ctl *c, unsigned depth)
{
    c->depth = depth < 1 ? 1 : depth > c->max_depth ? c->max_depth : depth;
    c->st.depth_final = c->depth;
    if (c->depth > c->st.depth_peak)
        c->st.depth_peak = c->depth;
}

static void set_mult(scan_ctl *c, unsigned mult)
{
    c->mult = mult < 1 ? 1 : mult;
    c->st.request_bytes_final = c->base_bytes * c->mult;
    if (c->st.request_bytes_final > c->st.request_bytes_peak)
        c->st.request_bytes_peak = c->st.request_bytes_final;
}

static void epoch_reset(scan_ctl *c, double now)
{
    c->ep_start = now;
    c->ep_bytes = 0;
    c->ep_n = 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of the epoch's kept latencies: one request's latency scatters on a virtual
 * disk (a mean of eight is over 1.5x the lowest one ever seen), a median does not. */
static double epoch_median(const scan_ctl *c)
{
    double v[SCAN_CTL_EPOCH_KEEP];
    unsigned n = c->ep_n < SCAN_CTL_EPOCH_KEEP ? c->ep_n : SCAN_CTL_EPOCH_KEEP;
    memcpy(v, c->ep_lats, n * sizeof(v[0]));
    qsort(v, n, sizeof(v[0]), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static scan_ctl_event said(scan_ctl *c, scan_ctl_event ev)
{
    snprintf(c->st.decision, sizeof(c->st.decision), "%s", c->msg);
    return ev;
}

static size_t req_kib(const scan_ctl *c) { return c->base_bytes * c->mult / 1024; }

/* Latency climbed: halve what is in flight, or at one request, the request size. */
static scan_ctl_event cut(scan_ctl *c, double ratio)
{
    unsigned was = c->depth, mult = c->mult;
    if (was > 1)
        set_depth(c, was / 2);
    else
        set_mult(c, mult / 2);
    c->prev_tput = 0;
    c->plateau = c->size_probe = c->size_held = false;
    c->st.cuts++;
    snprintf(c->msg, sizeof(c->msg), "%u in flight of %zu KiB: latency %.1fx the %.2f ms floor "
             "at %u of %zu KiB", c->depth, req_kib(c), ratio, c->floor_s * 1e3, was,
             c->base_bytes * mult / 1024);
    return said(c, SCAN_CTL_CUT);
}

/* The last step bought under GROW_GAIN: take it back and hold. */
static scan_ctl_event step_back(scan_ctl *c, double gain)
{
    c->prev_tput = 0;
    c->plateau = true;
    c->calm_epochs = 0;
    if (c->size_probe) {
        set_mult(c, c->mult / 2);
        c->size_probe = false;
        c->size_held = true;
        c->st.size_plateaus++;
        c->st.size_gain_pct = gain * 100;
        snprintf(c->msg, sizeof(c->msg), "%zu KiB requests: throughput flat at twice that "
                 "(%+.0f%%), holding", req_kib(c), gain * 100);
        return said(c, SCAN_CTL_SIZE_PLATEAU);
    }
    unsigned was = c->depth;
    set_depth(c, was - 1);
    c->size_held = c->depth > 1; /* larger requests are tried only at one in flight */
    c->st.plateaus++;
    c->st.depth_gain_pct = gain * 100;
    snprintf(c->msg, sizeof(c->msg), "%u in flight: throughput flat at %u (%+.0f%%), "
             "holding", c->depth, was, gain * 100);
    return said(c, SCAN_CTL_PLATEAU);
}

/* The last step bought GROW_GAIN or more: say so once, and keep it. */
static scan_ctl_event step_kept(scan_ctl *c, double gain)
{
    c->kept = true;
    if (c->size_probe) {
        c->st.size_gain_pct = gain * 100;
        snprintf(c->msg, sizeof(c->msg), "%zu KiB requests: %+.0f%% throughput", req_kib(c),
                 gain * 100);
    } else {
        c->st.depth_gain_pct = gain * 100;
        snprintf(c->msg, sizeof(c->msg), "%u in flight: %+.0f%% throughput", c->depth,
                 gain * 100);
    }
    return said(c, SCAN_CTL_KEPT);
}

/* Twice the request size fits when twice that is free: one request is read into while
 * the one before is checked. Only at one request in flight (a second did not pay). */
static bool size_can_grow(const scan_ctl *c)
{
    return c->depth == 1 && c->mult * 2 <= c->mult_max && c->mult * 4 <= c->max_depth;
}

static scan_ctl_event size_grow(scan_ctl *c, double tput)
{
    c->prev_tput = tput;
    c->size_probe = true;
    c->kept = false;
    set_mult(c, c->mult * 2);
    c->st.size_grows++;
    snprintf(c->msg, sizeof(c->msg), "%zu KiB requests: probing (%.0f MB/s at %zu KiB)",
             req_kib(c), tput / 1e6, req_kib(c) / 2);
    return said(c, SCAN_CTL_SIZE_GROW);
}

static scan_ctl_event depth_grow(scan_ctl *c, double tput, double ratio)
{
    unsigned was = c->depth;
    c->prev_tput = tput;
    c->kept = false;
    set_depth(c, was + 1);
    c->st.grows++;
    snprintf(c->msg, sizeof(c->msg), "%u in flight: probing (floor %.2f ms, %.0f MB/s at %u, "
             "latency %.1fx floor)", c->depth, c->floor_s * 1e3, tput / 1e6, was, ratio);
    return said(c, SCAN_CTL_GROW);
}

/* One epoch is over: decide from its median latency and throughput. A step is judged by
 * throughput first: one that bought under a tenth is taken back whatever the latency (on
 * one disk a second request only queues, so its latency is about twice the floor: that
 * is the step failing, not the device loaded, and is held as a plateau, not re-probed at
 * once as after a cut). Then a latency over CUT_LATENCY cuts, and one near the floor
 * allows the next step. */
static scan_ctl_event decide(scan_ctl *c, double tput, double lat)
{
    double ratio = lat / c->floor_s, gain = c->prev_tput > 0 ? tput / c->prev_tput - 1 : 0;
    bool judging = c->prev_tput > 0 && !c->kept;
    if (judging && gain < GROW_GAIN)
        return step_back(c, gain);
    if (ratio > CUT_LATENCY && (c->depth > 1 || c->mult > 1))
        return cut(c, ratio);
    if (judging)
        return step_kept(c, gain);
    if (ratio > GROW_LATENCY)
        return SCAN_CTL_NONE; /* between near and too far: hold */
    if (c->size_probe || (c->plateau && !c->size_held)) {
        if (size_can_grow(c))
            return size_grow(c, tput);
        c->size_probe = false; /* as large as the buffers allow: hold there */
        c->size_held = true;
        c->prev_tput = 0;
        c->calm_epochs = 0;
        c->plateau = true;
    }
    bool room = (c->depth + 1) * c->mult <= c->max_depth;
    if (c->plateau) {
        if (++c->calm_epochs < REPROBE_EPOCHS || !room)
            return SCAN_CTL_NONE;
        c->plateau = c->size_held = false; /* the device or the load may have changed */
        c->prev_tput = 0;
    }
    return room ? depth_grow(c, tput, ratio) : SCAN_CTL_NONE;
}

scan_ctl_event scan_ctl_sample(scan_ctl *c, double now, size_t bytes, double latency_s)
{
    c->last = SCAN_CTL_NONE;
    c->st.requests++;
    bool full = bytes > 0 && bytes >= c->full_bytes && latency_s > 0;
    if (full && (c->st.latency_floor_ms <= 0 || latency_s * 1e3 < c->st.latency_floor_ms))
        c->st.latency_floor_ms = latency_s * 1e3;
    if (c->pinned || c->yielding)
        return SCAN_CTL_NONE;
    if (c->ep_n == 0 && c->ep_bytes == 0 && c->ep_start <= 0)
        c->ep_start = now - latency_s; /* the very first request began then */
    c->ep_bytes += bytes;
    if (full) /* scaled to the base size: like is compared with like */
        c->ep_lats[c->ep_n++ % SCAN_CTL_EPOCH_KEEP] =
            c->base_bytes ? latency_s * (double)c->base_bytes / (double)bytes : latency_s;
    double span = now - c->ep_start;
    if (c->ep_n < EPOCH_SAMPLES || span < EPOCH_SECONDS)
        return SCAN_CTL_NONE;
    double tput = (double)c->ep_bytes / span, lat = epoch_median(c);
    epoch_reset(c, now);
    if (c->depth == 1 && c->mult == 1 && (c->floor_s <= 0 || lat < c->floor_s)) {
        c->floor_s = lat;
        c->st.latency_floor_median_ms = lat * 1e3;
    }
    c->last = decide(c, tput, lat);
    return c->last;
}

double scan_ctl_pause(scan_ctl *c, double now)
{
    if (!c->yielding)
        return 0;
    if (scan_ctl_quiet_wait(c, now)) /* until the device sample that closes it */
        return DEVICE_PERIOD / 4;
    if (c->pause_s <= 0)
        return 0;
    if (c->pause_until <= 0) {
        /* Only at the bottom step and still over budget (scan_devstat.c): the pause doubles
         * while others' latency stays over, and halves away once it is within. */
        c->pause_until = now + c->pause_s;
        c->st.pauses++;
        c->st.pause_seconds += c->pause_s;
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
    out->read_ticks = v[3];
    out->in_flight = v[8];
    return 0;
}
