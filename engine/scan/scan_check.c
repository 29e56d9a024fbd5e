/*
 * engine/scan/scan_check.c — the scanner's check stage (see scan_queue_internal.h): one thread
 * that runs the scan callback (page checks, checksums, hashing, framing) on the chunks the
 * reading thread has read, in file order, while the reading thread goes on reading into
 * the other buffers. Before, the reading thread ran the callback itself, so a read could be
 * in flight during the checks only if it had been submitted before them, and none was while
 * the controller asked for a pause or every buffer was in use (docs/BENCHMARKS.md: 636 of
 * 8,016 reads of one measured backup overlapped the checks).
 *
 * Why a thread of the scanner and not of the backup: the callback contract (chunks in file
 * order, one at a time, data valid during the call, a non-zero return stops the scan) stays
 * as it was, so the backup's per-file state needs no locking; only the buffers' ownership
 * moves, and that is the scanner's business. The thread is started by the first scan, from
 * the reading thread, so it inherits that thread's CPU and I/O priority (SCHED_IDLE, idle
 * class). It holds no buffer of its own: memory stays queue_depth x read_size.
 */
#include "engine/scan/scan_queue_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double thread_cpu_now(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return 0;
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Run the callback on one chunk; the lock is not held meanwhile. A chunk whose read went
 * out before the chunk before it was done being checked kept the device busy during those
 * checks: counted as overlapped. */
static void check_one(scan_check *c, const scan_check_item *it)
{
    if (c->first_done && it->submitted < c->last_end)
        c->overlapped++;
    else if (c->first_done && it->paused)
        c->paused++;
    double t0 = pb_now(), cpu0 = thread_cpu_now();
    bool call = c->rc == 0;
    int rc = call ? c->cb(c->ctx, it->off, it->data, it->len) : 0;
    double t1 = pb_now();
    c->busy_s += t1 - t0;
    c->cpu_s += thread_cpu_now() - cpu0;
    c->last_end = t1;
    c->first_done = true;
    c->chunks++;
    pthread_mutex_lock(&c->mu);
    if (rc && !c->rc)
        c->rc = rc;
    if (call)
        c->bytes += it->len;
    c->checked++;
    pthread_cond_broadcast(&c->done);
    pthread_mutex_unlock(&c->mu);
}

static void *check_main(void *arg)
{
    scan_check *c = arg;
    pthread_setname_np(pthread_self(), "pb-check"); /* for top -H, perf, /proc */
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->quit && c->checked == c->queued)
            pthread_cond_wait(&c->work, &c->mu);
        if (c->checked == c->queued)
            break; /* quit, and nothing left */
        scan_check_item it = c->q[c->checked % c->cap];
        pthread_mutex_unlock(&c->mu);
        check_one(c, &it);
        pthread_mutex_lock(&c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

int scan_check_begin(scan_check *c, unsigned cap, scan_chunk_cb cb, void *ctx, pb_error *err)
{
    if (!c->started) {
        c->q = calloc(cap, sizeof(*c->q));
        if (!c->q)
            return pb_fail(err, PB_ENOMEM, "scan: allocating the check queue");
        c->cap = cap;
        pthread_mutex_init(&c->mu, NULL);
        pthread_cond_init(&c->work, NULL);
        pthread_cond_init(&c->done, NULL);
        int prc = pthread_create(&c->thread, NULL, check_main, c);
        if (prc != 0) {
            pthread_cond_destroy(&c->done);
            pthread_cond_destroy(&c->work);
            pthread_mutex_destroy(&c->mu);
            free(c->q);
            c->q = NULL;
            errno = prc;
            return pb_fail_errno(err, PB_ENOMEM, "scan: starting the check thread");
        }
        c->started = true;
    }
    /* Between scans the thread waits for work (checked == queued): rearm it for this one. */
    pthread_mutex_lock(&c->mu);
    c->cb = cb;
    c->ctx = ctx;
    c->rc = 0;
    c->queued = c->checked = 0;
    c->bytes = 0;
    pthread_mutex_unlock(&c->mu);
    return 0;
}

uint64_t scan_check_done(scan_check *c)
{
    pthread_mutex_lock(&c->mu);
    uint64_t n = c->checked;
    pthread_mutex_unlock(&c->mu);
    return n;
}

int scan_check_push(scan_check *c, uint64_t off, const uint8_t *data, size_t len,
                    double submitted, bool paused)
{
    pthread_mutex_lock(&c->mu);
    /* The caller never has more chunks outstanding than buffers (cap). */
    c->q[c->queued % c->cap] = (scan_check_item){off, data, len, submitted, paused};
    c->queued++;
    int rc = c->rc;
    pthread_cond_signal(&c->work);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int scan_check_wait(scan_check *c, uint64_t upto, double *wait_s)
{
    double t0 = pb_now();
    pthread_mutex_lock(&c->mu);
    while (c->checked < upto && c->checked < c->queued)
        pthread_cond_wait(&c->done, &c->mu);
    int rc = c->rc;
    pthread_mutex_unlock(&c->mu);
    *wait_s += pb_now() - t0;
    return rc;
}

void scan_check_stop(scan_check *c)
{
    if (!c->started)
        return;
    pthread_mutex_lock(&c->mu);
    c->quit = true;
    pthread_cond_signal(&c->work);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->thread, NULL);
    pthread_cond_destroy(&c->done);
    pthread_cond_destroy(&c->work);
    pthread_mutex_destroy(&c->mu);
    free(c->q);
    memset(c, 0, sizeof(*c));
}
