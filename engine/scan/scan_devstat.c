/*
 * engine/scan/scan_devstat.c — steering the scan by what its reads cost the other readers of
 * the device (see scan_ctl_internal.h). Pure like the rest of the controller: the scanner
 * hands it the device's counters and its own (tests/unit/engine/scan/scan_steer_test.c feeds
 * made-up ones).
 *
 * Why by cost and not by count: others' reads per second say nothing about what a backup
 * read costs them. On one virtio disk with mq-deadline a 64 KiB O_DIRECT reader, one in
 * flight and never pausing, cost a database's point selects 1.17x their p99 at 640 MB/s;
 * 512 KiB cost 1.35-1.55x at 1.7-2.1 GB/s. Pausing whenever others read threw that room
 * away (0.05x the disk). The cost is visible in the device's counters: reads completed and
 * the milliseconds they took (read ticks), less this scanner's own requests and their
 * latencies, give the others' mean read latency over a window. Compared with the same
 * latency while the scanner does not read (a quiet window of a fraction of a second, taken
 * when others start and every REBASE_SECONDS), it says how much the scan slows them.
 * A mean is steered, not the p99 the database feels: a mean rising by the budget is the
 * earliest sign the tail will, and a p99 of a window of a few hundred reads scatters.
 */
#include "engine/scan/scan_ctl_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define WINDOW_MIN 0.1        /* seconds a judged window lasts at least ... */
#define WINDOW_MAX 1.0        /* ... and at most: fewer others' reads by then: they stopped */
#define OTHERS_MIN 8u         /* others' reads a window needs to be judged */
/* A quiet window ends by then, however few others read. With the database reading, the
 * eight reads it needs come within tens of ms; when they do not, the "others" were mostly
 * ours, miscounted, and each longer wait was a pause for nothing (0.5 s of a 2 s idle
 * backup, 2026-12-05). */
#define QUIET_MAX 0.15
/* ... and sooner when others read fast enough to bring OTHERS_MIN reads several times over
 * by then: at 400/s, eight come in 20 ms, and none in 60 ms says they stopped (a burst at
 * the backup's start, such as the archiver's read of the segment pg_backup_start closed). */
#define QUIET_SPARE 3.0
#define QUIET_FLOOR 0.03
#define QUIET_GIVE_UP 1.0     /* ... and is given up when it cannot begin by then */
#define REBASE_SECONDS 10.0   /* the baseline is measured again this often */
#define UNCLEAR_RATIO 0.5     /* others this much faster than their baseline: unclear */
#define SLACK_MS 0.25         /* a rise of others' latency this small is within budget */
#define GROW_MARGIN 0.9       /* step up only below this share of the budget: no flapping */
#define STEP_MIN_BYTES (64u * 1024) /* the ladder's bottom request (64 KiB: 1.17x above) */
#define ENTRY_BYTES (128u * 1024)   /* where steering starts, once the baseline is known */
/* The ladder's top while others read: 256 KiB, one in flight. Above it the cost could not
 * be held on one virtio disk under load (dd 512 KiB one in flight: 1.35-1.55x p99), and
 * the others' latency, read from device counters with ours taken out, is too coarse to
 * say so in time: in a run of 2026-12-05 the steps to 1 and 2 MiB took p99 to 2.9x. */
#define STEER_MAX_BYTES (256u * 1024)
#define PAUSE_START 0.001
#define PAUSE_MIN 0.0005      /* a pause halved below this is dropped */
#define PAUSE_MAX 0.020

static void put_level(scan_ctl *c, unsigned level, size_t bytes, unsigned depth)
{
    if (level < SCAN_CTL_LEVELS) {
        c->lv_bytes[level] = bytes;
        c->lv_depth[level] = depth;
        c->nlevels = level + 1;
    }
}

/* The steps, by bytes in flight up to STEER_MAX_BYTES: requests below the base size, one
 * in flight (a chunk is then read in several); the base size and its multiples the
 * buffers allow, one in flight with room for the next while one is checked; then more in
 * flight at the largest. */
void scan_ctl_ladder(scan_ctl *c)
{
    size_t base = c->base_bytes ? c->base_bytes : STEP_MIN_BYTES;
    unsigned n = 0, m = 1;
    c->nlevels = 0;
    for (size_t b = STEP_MIN_BYTES; b < base && b <= STEER_MAX_BYTES; b *= 2)
        put_level(c, n++, b, 1);
    if (base <= STEER_MAX_BYTES)
        put_level(c, n++, base, 1);
    while (m * 2 <= c->mult_max && m * 4 <= c->max_depth && base * m * 2 <= STEER_MAX_BYTES)
        put_level(c, n++, base * (m *= 2), 1);
    for (unsigned d = 2; (d + 1) * m <= c->max_depth && base * m * d <= STEER_MAX_BYTES; d++)
        put_level(c, n++, base * m, d);
    c->level = 0;
}

static scan_ctl_event stop_steering(scan_ctl *c, double now, double rate);

bool scan_ctl_quiet_wait(scan_ctl *c, double now)
{
    if (!c->quiet)
        return false;
    if (now - c->quiet_t0 <= QUIET_GIVE_UP)
        return true;
    /* Our requests never all completed meanwhile (one went out before the window was
     * asked for and is reaped after the pause): no baseline this time, read on. */
    c->quiet = c->quiet_open = false;
    c->base_at = now;
    c->st.quiet_given_up++;
    if (c->base_ms <= 0) /* nothing to steer by: read as on an idle device for a while */
        (void)stop_steering(c, now, 0);
    return false;
}

size_t scan_ctl_request_cap(const scan_ctl *c)
{
    if (!c->yielding || c->pinned || c->nlevels == 0)
        return 0;
    size_t b = c->lv_bytes[c->level];
    return b < c->base_bytes ? b : 0;
}

static void apply_level(scan_ctl *c, unsigned level)
{
    c->level = level;
    size_t b = c->lv_bytes[level];
    c->depth = c->lv_depth[level];
    c->mult = b > c->base_bytes && c->base_bytes ? (unsigned)(b / c->base_bytes) : 1;
    c->st.depth_final = c->depth;
    if (c->depth > c->st.depth_peak)
        c->st.depth_peak = c->depth;
    c->st.request_bytes_final = b;
    if (b > c->st.request_bytes_peak)
        c->st.request_bytes_peak = b;
    c->st.steer_bytes = b;
    c->st.steer_depth = c->depth;
}

/* The step whose bytes in flight are nearest above want (the top if none). */
static unsigned level_for(const scan_ctl *c, size_t want)
{
    unsigned l = 0;
    while (l + 1 < c->nlevels && c->lv_bytes[l] * c->lv_depth[l] < want)
        l++;
    return l;
}

static scan_ctl_event say(scan_ctl *c, scan_ctl_event ev)
{
    snprintf(c->st.decision, sizeof(c->st.decision), "%s", c->msg);
    return ev;
}

/* The share of the device's reads in the window that were not ours at all: the scan's
 * direct reads are counted out by request, but this process's other reads (the parent's
 * records and manifest from a repository on the same disk, the program's pages after a
 * cache drop) reach the device as anyone's. Counted by bytes (/proc/self/io); 1 when
 * unknown. Without it an incremental paused for a baseline of "others" that were its own
 * buffered reads (0.15 s of a 0.5 s backup, 2026-12-05). */
static double others_share(const scan_ctl *c, const scan_dev_sample *d)
{
    if (!d->read_bytes || d->read_bytes < c->win_read_bytes)
        return 1;
    double dev = (double)(d->read_bytes - c->win_read_bytes);
    double direct = (double)(d->own_bytes - c->win_own_bytes);
    double mine = d->own_other_bytes > c->win_own_other_bytes
                      ? (double)(d->own_other_bytes - c->win_own_other_bytes) : 0;
    double rest = dev > direct ? dev - direct : 0;
    if (rest <= 0)
        return 1;
    return rest > mine ? (rest - mine) / rest : 0;
}

/* The window's figures: others' reads and their mean latency (ms), our reads taken out.
 * A request of ours the block layer split counts each part with our whole latency, so
 * our share is over- rather than under-counted: others look faster, never slower. Our
 * other reads are taken out by their share of the bytes (their mean latency kept). */
static unsigned window_others(const scan_ctl *c, const scan_dev_sample *d, double *lat_ms,
                              double *hi_ms)
{
    uint64_t reads = d->reads - c->win_reads, own = d->own_reads - c->win_own_reads;
    double ticks = (double)(d->read_ticks_ms - c->win_ticks);
    double own_ticks = d->own_ticks_ms - c->win_own_ticks;
    double own_floor = d->own_floor_ms - c->win_own_floor;
    double share = others_share(c, d);
    uint64_t n = (uint64_t)((double)(reads > own ? reads - own : 0) * share + 0.5);
    double t = (ticks > own_ticks ? ticks - own_ticks : 0) * share;
    double th = (ticks > own_floor ? ticks - own_floor : 0) * share;
    *lat_ms = n ? t / (double)n : 0;
    if (hi_ms) /* ours at their floor: theirs over- rather than under-counted */
        *hi_ms = n ? th / (double)n : 0;
    return n > UINT32_MAX ? UINT32_MAX : (unsigned)n;
}

/* Whether d follows the open window's sample (no first look, no counter reset). */
static bool window_continues(const scan_ctl *c, const scan_dev_sample *d)
{
    return c->win_have && d->reads >= c->win_reads && d->read_ticks_ms >= c->win_ticks &&
           d->own_reads >= c->win_own_reads;
}

static void window_open(scan_ctl *c, double now, const scan_dev_sample *d)
{
    c->win_have = true;
    c->win_t = now;
    c->win_reads = d->reads;
    c->win_ticks = d->read_ticks_ms;
    c->win_own_reads = d->own_reads;
    c->win_own_ticks = d->own_ticks_ms;
    c->win_own_floor = d->own_floor_ms;
    c->win_own_bytes = d->own_bytes;
    c->win_read_bytes = d->read_bytes;
    c->win_own_other_bytes = d->own_other_bytes;
}

/* Ask for a quiet window from now. */
static void want_quiet(scan_ctl *c, double now)
{
    c->quiet = true;
    c->quiet_open = false;
    c->quiet_t0 = now;
}

static scan_ctl_event start_steering(scan_ctl *c, double now, double rate)
{
    c->yielding = true;
    c->steer_rate = rate;
    c->pause_s = 0;
    c->st.yields++;
    /* A baseline taken while the backup prepared (scan_ctl_prescan) needs no pause. */
    c->steered = c->base_ahead && now - c->base_at < REBASE_SECONDS;
    c->base_ahead = false;
    if (!c->steered) {
        want_quiet(c, now); /* the baseline first */
        apply_level(c, 0);
        snprintf(c->msg, sizeof(c->msg), "others read (%.0f/s): steering by their read "
                 "latency (budget %.2fx), measuring it while not reading first", rate,
                 c->budget);
        return say(c, SCAN_CTL_YIELD);
    }
    apply_level(c, level_for(c, ENTRY_BYTES));
    snprintf(c->msg, sizeof(c->msg), "others read (%.0f/s): steering by their read latency "
             "(budget %.2fx) from %.2f ms before the scan: %zu KiB x %u in flight", rate,
             c->budget, c->base_ms, c->lv_bytes[c->level] / 1024, c->lv_depth[c->level]);
    return say(c, SCAN_CTL_YIELD);
}

static scan_ctl_event stop_steering(scan_ctl *c, double now, double rate)
{
    c->yielding = c->quiet = c->quiet_open = false;
    c->pause_s = 0;
    c->pause_until = 0;
    c->prev_tput = 0;
    c->plateau = c->size_probe = c->size_held = false;
    c->ep_start = now;
    c->ep_bytes = 0;
    c->ep_n = 0;
    apply_level(c, level_for(c, c->base_bytes)); /* the base size, one in flight */
    c->st.resumes++;
    if (c->base_ms <= 0) { /* no baseline could be had: not again before a while */
        c->hold_until = now + REBASE_SECONDS;
        snprintf(c->msg, sizeof(c->msg), "resuming: others' reads (%.0f/s) could not be timed "
                 "while not reading; probing from 1 in flight, steering again in %.0f s at the "
                 "earliest", rate, REBASE_SECONDS);
        return say(c, SCAN_CTL_RESUME);
    }
    snprintf(c->msg, sizeof(c->msg), "resuming: others' reads down to %.0f/s, probing again "
             "from 1 in flight", rate);
    return say(c, SCAN_CTL_RESUME);
}

/* A quiet window closed: its others' latency is the baseline (averaged with the last). */
static scan_ctl_event quiet_done(scan_ctl *c, double now, unsigned n, double lat)
{
    double span = now - c->win_t;
    c->quiet = c->quiet_open = false;
    c->st.quiet_windows++;
    c->st.quiet_seconds += span;
    c->st.pause_seconds += span;
    c->st.pauses++;
    if (n >= OTHERS_MIN && lat > 0) {
        c->base_ms = c->base_ms > 0 ? (c->base_ms + lat) / 2 : lat;
        c->st.others_base_ms = c->base_ms;
    }
    c->base_at = now;
    if (c->base_ms <= 0) /* others too few to time: they are not reading much after all */
        return stop_steering(c, now, span > 0 ? n / span : 0);
    if (!c->steered) /* the first baseline since others began: start at the entry step */
        apply_level(c, level_for(c, ENTRY_BYTES));
    c->steered = true;
    snprintf(c->msg, sizeof(c->msg), "others' reads take %.2f ms while not reading (%u in "
             "%.2f s): %zu KiB x %u in flight", lat, n, span, c->lv_bytes[c->level] / 1024,
             c->lv_depth[c->level]);
    return say(c, SCAN_CTL_KEPT);
}

/* Others' latency allowed: budget x their baseline, or their baseline and SLACK_MS,
 * whichever is more (on a fast device a read of theirs takes 0.1 ms, and one request of
 * ours ahead of it doubles that: a rise the database's millisecond p99 never shows). */
static double allowed_ms(const scan_ctl *c, double share)
{
    double by_ratio = c->base_ms * c->budget * share;
    double by_slack = c->base_ms + SLACK_MS * share;
    return by_ratio > by_slack ? by_ratio : by_slack;
}

/* A window judged: step down when over budget (pause at the bottom), up when well within. */
static scan_ctl_event steer(scan_ctl *c, double lat, double hi)
{
    c->st.others_ms = lat;
    if (lat / c->base_ms < UNCLEAR_RATIO) {
        /* Far faster than when we did not read: our own latencies, as the reading thread
         * saw them (late, when it was not scheduled at once), were larger than the device's
         * and took some of theirs out with ours. Judged by the other estimate instead, ours
         * at the lowest latency seen at their size, which counts theirs high (ours may have
         * waited behind theirs): within budget it allows a step up, never a step down. */
        c->st.unclear_windows++;
        c->st.others_ms = hi;
        if (hi > allowed_ms(c, GROW_MARGIN))
            return SCAN_CTL_NONE;
        lat = hi;
    }
    double ratio = lat / c->base_ms;
    if (ratio > c->st.others_ratio_peak)
        c->st.others_ratio_peak = ratio;
    if (lat > allowed_ms(c, 1)) {
        if (c->level > 0) {
            apply_level(c, c->level - 1);
            c->st.steer_downs++;
        } else {
            c->pause_s = c->pause_s > 0 ? c->pause_s * 2 : PAUSE_START;
            c->pause_s = c->pause_s > PAUSE_MAX ? PAUSE_MAX : c->pause_s;
        }
        snprintf(c->msg, sizeof(c->msg), "others' reads %.2f ms, %.2fx their %.2f ms (budget "
                 "%.2fx): %zu KiB x %u in flight%s", lat, ratio, c->base_ms, c->budget,
                 c->lv_bytes[c->level] / 1024, c->lv_depth[c->level],
                 c->pause_s > 0 ? ", pausing" : "");
        return say(c, SCAN_CTL_CUT);
    }
    if (lat > allowed_ms(c, GROW_MARGIN))
        return SCAN_CTL_NONE;
    if (c->pause_s > 0) {
        c->pause_s = c->pause_s / 2 < PAUSE_MIN ? 0 : c->pause_s / 2;
        return SCAN_CTL_NONE;
    }
    if (c->level + 1 >= c->nlevels)
        return SCAN_CTL_NONE;
    apply_level(c, c->level + 1);
    c->st.steer_ups++;
    snprintf(c->msg, sizeof(c->msg), "others' reads %.2f ms, %.2fx their %.2f ms (budget "
             "%.2fx): up to %zu KiB x %u in flight", lat, ratio, c->base_ms, c->budget,
             c->lv_bytes[c->level] / 1024, c->lv_depth[c->level]);
    return say(c, SCAN_CTL_GROW);
}

/* How long to wait for OTHERS_MIN reads of others before saying they stopped: QUIET_SPARE
 * times what their rate when steering began says eight take, within [lo, hi]. A quiet
 * window waits so (QUIET_SPARE says why), and so does a steered window before the scan
 * goes back to full speed: a burst (the archiver, the WAL summarizer at a backup's start)
 * no longer holds a full at the entry step for a second after it ended. */
static double others_wait(const scan_ctl *c, double lo, double hi)
{
    double t = c->steer_rate > 0 ? QUIET_SPARE * OTHERS_MIN / c->steer_rate : hi;
    return t < lo ? lo : t > hi ? hi : t;
}

/* Steering, a window long enough: a quiet window closes, or the others' cost is judged. */
static scan_ctl_event judge(scan_ctl *c, double now, const scan_dev_sample *d)
{
    double lat, hi, span = now - c->win_t;
    unsigned n = window_others(c, d, &lat, &hi);
    if (c->quiet) {
        if (!c->quiet_open || d->own_reads != c->win_own_reads || d->own_inflight) {
            c->quiet_open = d->own_inflight == 0; /* starts once ours are all complete */
            window_open(c, now, d);
            return SCAN_CTL_NONE;
        }
        if (span + 1e-6 < (n < OTHERS_MIN ? others_wait(c, QUIET_FLOOR, QUIET_MAX) : WINDOW_MIN))
            return SCAN_CTL_NONE;
        scan_ctl_event ev = quiet_done(c, now, n, lat);
        window_open(c, now, d);
        return ev;
    }
    if ((double)n / span > c->st.foreground_reads_per_s_peak)
        c->st.foreground_reads_per_s_peak = (double)n / span;
    if (n < OTHERS_MIN) {
        if (span + 1e-6 < others_wait(c, WINDOW_MIN, WINDOW_MAX))
            return SCAN_CTL_NONE;
        scan_ctl_event ev = stop_steering(c, now, (double)n / span);
        window_open(c, now, d);
        return ev;
    }
    scan_ctl_event ev = c->base_ms > 0 ? steer(c, lat, hi) : SCAN_CTL_NONE;
    window_open(c, now, d);
    if (now - c->base_at >= REBASE_SECONDS)
        want_quiet(c, now); /* the others' load may have changed: measure it again */
    return ev;
}

void scan_ctl_prescan(scan_ctl *c, double now, const scan_dev_sample *d)
{
    if (window_continues(c, d) && !c->yielding && d->own_reads == c->win_own_reads) {
        double lat;
        unsigned n = window_others(c, d, &lat, NULL);
        if (n >= OTHERS_MIN && lat > 0) {
            c->base_ms = c->st.others_base_ms = lat;
            c->base_at = now;
            c->base_ahead = true;
        }
    }
    window_open(c, now, d);
}

scan_ctl_event scan_ctl_device(scan_ctl *c, double now, const scan_dev_sample *d)
{
    c->last = SCAN_CTL_NONE;
    if (!window_continues(c, d)) {
        window_open(c, now, d); /* first sample, or a counter reset: a new baseline */
        return SCAN_CTL_NONE;
    }
    if (c->yielding && c->dev_have)
        c->st.steer_seconds += now - c->dev_t;
    c->dev_have = true;
    c->dev_t = now;
    double span = now - c->win_t;
    if (span + 1e-6 < WINDOW_MIN && !c->quiet)
        return SCAN_CTL_NONE;
    if (c->yielding) {
        c->last = judge(c, now, d);
        return c->last;
    }
    double lat;
    unsigned n = window_others(c, d, &lat, NULL);
    double rate = (double)n / span;
    if (rate > c->st.foreground_reads_per_s_peak)
        c->st.foreground_reads_per_s_peak = rate;
    if (n > 0)
        c->st.others_ms = lat;
    window_open(c, now, d);
    if (c->pinned || n < OTHERS_MIN || rate <= c->yield_reads || now < c->hold_until)
        return SCAN_CTL_NONE;
    c->last = start_steering(c, now, rate);
    return c->last;
}
