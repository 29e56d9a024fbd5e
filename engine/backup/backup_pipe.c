/* engine/backup/backup_pipe.c — compression workers fed by the scanning thread; the level
 * follows the queue (bk_adapt, engine/backup/backup_adapt.c) and the waits on both sides are
 * timed for the backup's stage report. */
#include "engine/backup/backup_pipe_internal.h"
#include "engine/backup/backup.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct bk_pipe {
    pthread_t threads[BK_PIPE_MAX_WORKERS];
    unsigned nthreads;
    pthread_mutex_t mu;
    pthread_cond_t work, idle, freed;
    bk_job *head, *tail; /* submitted, not yet stored */
    bk_job *free_list;
    bool stop;
    int rc;              /* first failure, sticky */
    pb_error err;
    pack_writer *packs[BK_PIPE_MAX_WORKERS];
    unsigned next_worker; /* hands each starting worker its writer */
    int cpu_priority;    /* bk_cpu_priority each worker applies to itself */
    unsigned ready;      /* workers that applied it */
    char cpu_applied[160];
    unsigned njobs;      /* frame buffers in the pool (the first njobs of jobs[]) */
    bk_pipe_file *open;  /* the file being submitted (NULL until its first frame) */
    bk_pipe_file *files; /* every file not yet taken, oldest first (open one included) */
    pthread_cond_t landed; /* a file's last frame was stored */
    bool held;           /* tests: workers start no new frame (bk_pipe_hold) */
    bk_adapt adapt;      /* the level policy, under mu */
    double reader_wait;  /* the reader blocked: no free buffer, or draining */
    double drain_wait;   /* ... the draining part (bk_pipe_file_take waiting) */
    double idle_s;       /* workers waiting for frames, summed */
    double win_start, win_wait, win_idle; /* the policy's window: start, sums at its start */
    unsigned win_frames; /* frames compressed in it */
    unsigned nlevels;
    bk_level_use levels[BK_LEVELS_MAX];
    bk_job jobs[BK_PIPE_JOBS];
};

/* One file's frames. runs grows under the lock at submit time, so workers only write
 * into place (under the lock too); nruns and pages are the submitter's alone. */
struct bk_pipe_file {
    mf_run *runs;        /* in submission order; locations filled as frames are stored */
    size_t cap;
    uint32_t nruns;
    uint64_t pages;      /* pages the runs hold */
    unsigned unstored;   /* frames submitted and not yet stored (or skipped after a failure) */
    bk_pipe_file *next;  /* p->files */
};

/* The file receiving submissions, created at its first frame. Lock held. */
static bk_pipe_file *open_file(bk_pipe *p)
{
    if (p->open)
        return p->open;
    bk_pipe_file *f = calloc(1, sizeof(*f)), **tail = &p->files;
    if (!f)
        return NULL;
    while (*tail)
        tail = &(*tail)->next;
    *tail = f;
    p->open = f;
    return f;
}

static void unlink_file(bk_pipe *p, bk_pipe_file *f)
{
    bk_pipe_file **at = &p->files;
    while (*at && *at != f)
        at = &(*at)->next;
    if (*at)
        *at = f->next;
}

/* Place job's runs in its file (at submit, lock held); false when out of memory. */
static bool reserve_runs(bk_pipe *p, bk_job *job)
{
    bk_pipe_file *f = open_file(p);
    job->file = f;
    if (!f || PB_GROW(f->runs, &f->cap, (size_t)f->nruns + job->nruns)) {
        job->file = NULL;
        return false;
    }
    job->seq = f->nruns;
    f->nruns += job->nruns;
    for (uint32_t i = 0; i < job->nruns; i++)
        f->pages += job->runs[i].count;
    f->unstored++;
    return true;
}

double bk_thread_cpu(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return 0;
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU seconds a live worker has used (its thread's CPU clock); 0 where unknown. */
static double worker_cpu(pthread_t t)
{
    clockid_t clk;
    struct timespec ts;
    if (pthread_getcpuclockid(t, &clk) != 0 || clock_gettime(clk, &ts) != 0)
        return 0;
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Rule of politeness (docs/DESIGN.md, "Polite I/O"): compression and page checks run only
 * on CPU the database leaves idle. Linux applies both calls to the calling thread alone. */
void bk_cpu_lower(int prio, char *applied, size_t len)
{
    if (prio == BK_CPU_NORMAL) {
        snprintf(applied, len, "at the process's priority (--cpu-priority normal)");
        return;
    }
    struct sched_param sp = {0};
    if (prio == BK_CPU_IDLE && sched_setscheduler(0, SCHED_IDLE, &sp) == 0) {
        snprintf(applied, len, "SCHED_IDLE");
        return;
    }
    int why = errno;
    if (setpriority(PRIO_PROCESS, (id_t)gettid(), 19) == 0)
        snprintf(applied, len, prio == BK_CPU_IDLE ? "nice 19 (SCHED_IDLE refused: %s)"
                                                   : "nice 19%s",
                 prio == BK_CPU_IDLE ? strerror(why) : "");
    else
        snprintf(applied, len, "none: nice 19 refused (%s)", strerror(errno));
}

/* Wait for work, timed and told to the level policy. Called with the lock held. */
static void wait_for_work(bk_pipe *p)
{
    if ((p->head && !p->held) || p->stop)
        return;
    double t0 = pb_now();
    while ((!p->head || p->held) && !p->stop)
        pthread_cond_wait(&p->work, &p->mu);
    p->idle_s += pb_now() - t0;
}

/* A frame was compressed: close the policy's window when it is long enough. Lock held. */
static void window_frame(bk_pipe *p)
{
    double now = pb_now();
    if (++p->win_frames < p->njobs || now - p->win_start < BK_ADAPT_WINDOW_MIN)
        return;
    bk_adapt_window w = {now - p->win_start, p->reader_wait - p->win_wait,
                         (p->idle_s - p->win_idle) / (p->nthreads ? p->nthreads : 1)};
    bk_adapt_event ev = bk_adapt_decide(&p->adapt, &w);
    if (ev != BK_ADAPT_NONE)
        pb_debug("compression %s the reads (reader waited %.0f%%, workers idle %.0f%% of "
                 "%.2f s): level %d", ev == BK_ADAPT_DOWN ? "behind" : "ahead of",
                 100 * w.reader_wait / w.elapsed, 100 * w.worker_idle / w.elapsed, w.elapsed,
                 p->adapt.level);
    p->win_start = now;
    p->win_wait = p->reader_wait;
    p->win_idle = p->idle_s;
    p->win_frames = 0;
}

/* Compress and store one job at the level the policy gives it; count it by level. */
static int store_job(bk_pipe *p, pack_writer *packs, bk_job *job, int level, pb_error *err)
{
    double c0, c1, w;
    pack_writer_times(packs, &c0, &w);
    int rc = pack_write_runs(packs, job->data, job->len, job->runs, job->nruns, level, err);
    pack_writer_times(packs, &c1, &w);
    pthread_mutex_lock(&p->mu);
    window_frame(p);
    if (rc == 0)
        bk_levels_add(p->levels, &p->nlevels, BK_LEVELS_MAX, level, job->len,
                      job->runs[0].clen, c1 - c0);
    pthread_mutex_unlock(&p->mu);
    return rc;
}

static void *worker(void *vp)
{
    bk_pipe *p = vp;
    char applied[140];
    bk_cpu_lower(p->cpu_priority, applied, sizeof(applied));
    pthread_mutex_lock(&p->mu);
    if (p->ready++ == 0)
        snprintf(p->cpu_applied, sizeof(p->cpu_applied), "workers %s", applied);
    pthread_cond_broadcast(&p->idle);
    pack_writer *packs = p->packs[p->next_worker++];
    for (;;) {
        wait_for_work(p);
        if (!p->head)
            break;
        bk_job *job = p->head;
        p->head = job->next;
        if (!p->head)
            p->tail = NULL;
        bool failed = p->rc != 0;
        int level = bk_adapt_frame_level(&p->adapt, job->level);
        pthread_mutex_unlock(&p->mu);
        pb_error err = PB_ERROR_INIT;
        int rc = failed ? 0 : store_job(p, packs, job, level, &err);
        pthread_mutex_lock(&p->mu);
        if (rc && !p->rc) {
            p->rc = rc;
            p->err = err;
            pthread_cond_broadcast(&p->landed); /* a waiting reader learns it now */
        }
        bk_pipe_file *f = job->file;
        if (f && !failed && !rc)
            memcpy(&f->runs[job->seq], job->runs, job->nruns * sizeof(mf_run));
        if (f && --f->unstored == 0)
            pthread_cond_broadcast(&p->landed);
        job->next = p->free_list;
        p->free_list = job;
        pthread_cond_signal(&p->freed);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int bk_pipe_start(bk_pipe **out, pack_writer **packs, unsigned nworkers, pb_error *err)
{
    return bk_pipe_start_prio(out, packs, nworkers, BK_CPU_NORMAL, err);
}

const char *bk_pipe_cpu_applied(const bk_pipe *p) { return p->cpu_applied; }

int bk_pipe_start_prio(bk_pipe **out, pack_writer **packs, unsigned nworkers, int cpu_priority,
                       pb_error *err)
{
    return bk_pipe_start_jobs(out, packs, nworkers, cpu_priority, 0, err);
}

unsigned bk_pipe_jobs_for(unsigned nworkers)
{
    unsigned n = nworkers > BK_PIPE_JOBS ? BK_PIPE_JOBS : 2 * nworkers + 1;
    return n < 2 ? 2 : n > BK_PIPE_JOBS ? BK_PIPE_JOBS : n;
}

int bk_pipe_start_jobs(bk_pipe **out, pack_writer **packs, unsigned nworkers, int cpu_priority,
                       unsigned njobs, pb_error *err)
{
    if (njobs == 0)
        njobs = bk_pipe_jobs_for(nworkers);
    if (njobs < 2 || njobs > BK_PIPE_JOBS)
        return pb_fail(err, PB_EINVAL, "%u compression buffers: must be 2..%d", njobs,
                       BK_PIPE_JOBS);
    if (nworkers < 1 || nworkers > BK_PIPE_MAX_WORKERS)
        return pb_fail(err, PB_EINVAL, "%u compression workers: must be 1..%d", nworkers,
                       BK_PIPE_MAX_WORKERS);
    bk_pipe *p = calloc(1, sizeof(*p));
    if (!p)
        return pb_fail(err, PB_ENOMEM, "out of memory for the compression pipeline");
    for (unsigned i = 0; i < nworkers; i++)
        p->packs[i] = packs[i];
    p->cpu_priority = cpu_priority;
    p->njobs = njobs;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->idle, NULL);
    pthread_cond_init(&p->freed, NULL);
    pthread_cond_init(&p->landed, NULL);
    for (unsigned i = 0; i < njobs; i++) {
        p->jobs[i].data = aligned_alloc(PB_ALIGN, PACK_MAX_FRAME_RAW);
        if (!p->jobs[i].data) {
            bk_pipe_free(p);
            return pb_fail(err, PB_ENOMEM, "out of memory for the compression pipeline");
        }
        p->jobs[i].next = p->free_list;
        p->free_list = &p->jobs[i];
    }
    for (unsigned i = 0; i < nworkers; i++) {
        if (pthread_create(&p->threads[i], NULL, worker, p) != 0) {
            bk_pipe_free(p);
            return pb_fail(err, PB_ENOMEM, "cannot start compression thread %u", i);
        }
        p->nthreads++;
    }
    pthread_mutex_lock(&p->mu);
    while (p->ready < p->nthreads)
        pthread_cond_wait(&p->idle, &p->mu);
    pthread_mutex_unlock(&p->mu);
    *out = p;
    return 0;
}

void bk_pipe_free(bk_pipe *p)
{
    if (!p)
        return;
    if (p->nthreads) {
        pthread_mutex_lock(&p->mu);
        p->stop = true;
        pthread_cond_broadcast(&p->work);
        pthread_mutex_unlock(&p->mu);
        for (unsigned i = 0; i < p->nthreads; i++)
            pthread_join(p->threads[i], NULL);
    }
    for (unsigned i = 0; i < p->njobs; i++)
        free(p->jobs[i].data);
    while (p->files) {
        bk_pipe_file *f = p->files;
        p->files = f->next;
        free(f->runs);
        free(f);
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->idle);
    pthread_cond_destroy(&p->freed);
    pthread_cond_destroy(&p->landed);
    free(p);
}

bk_job *bk_pipe_acquire(bk_pipe *p)
{
    pthread_mutex_lock(&p->mu);
    if (!p->free_list) {
        double t0 = pb_now();
        while (!p->free_list)
            pthread_cond_wait(&p->freed, &p->mu);
        p->reader_wait += pb_now() - t0;
    }
    bk_job *job = p->free_list;
    p->free_list = job->next;
    pthread_mutex_unlock(&p->mu);
    job->next = NULL;
    job->len = 0;
    job->nruns = 0;
    job->level = 0;
    return job;
}

void bk_pipe_submit(bk_pipe *p, bk_job *job, uint32_t first, uint32_t count, size_t len)
{
    memset(&job->runs[0], 0, sizeof(job->runs[0]));
    job->runs[0].first = first;
    job->runs[0].count = count;
    job->nruns = 1;
    bk_pipe_submit_runs(p, job, len);
}

void bk_pipe_submit_runs(bk_pipe *p, bk_job *job, size_t len)
{
    job->len = len;
    job->next = NULL;
    pthread_mutex_lock(&p->mu);
    if (!reserve_runs(p, job) && !p->rc)
        p->rc = pb_fail(&p->err, PB_ENOMEM, "out of memory recording frames");
    if (p->tail)
        p->tail->next = job;
    else
        p->head = job;
    p->tail = job;
    pthread_cond_signal(&p->work);
    pthread_mutex_unlock(&p->mu);
}

/* The first failure (sticky) into err. Lock held. */
static int sticky(bk_pipe *p, pb_error *err)
{
    if (p->rc && err)
        *err = p->err;
    return p->rc;
}

int bk_pipe_file_end(bk_pipe *p, bk_pipe_file **out, pb_error *err)
{
    pthread_mutex_lock(&p->mu);
    *out = p->open;
    p->open = NULL;
    int rc = sticky(p, err);
    pthread_mutex_unlock(&p->mu);
    return rc;
}

uint64_t bk_pipe_file_bytes(const bk_pipe_file *f)
{
    return f ? (uint64_t)f->nruns * sizeof(mf_run) + 8 * f->pages : 0;
}

int bk_pipe_file_take(bk_pipe *p, bk_pipe_file *f, bool wait, bool *landed, mf_run **runs,
                      uint32_t *count, pb_error *err)
{
    *runs = NULL;
    *count = 0;
    *landed = !f;
    pthread_mutex_lock(&p->mu);
    if (!f) {
        int rc = sticky(p, err);
        pthread_mutex_unlock(&p->mu);
        return rc;
    }
    if (wait && f->unstored && !p->rc) {
        double t0 = pb_now();
        while (f->unstored && !p->rc)
            pthread_cond_wait(&p->landed, &p->mu);
        double waited = pb_now() - t0;
        p->reader_wait += waited;
        p->drain_wait += waited;
    }
    int rc = sticky(p, err);
    if (rc == 0 && f->unstored == 0) {
        unlink_file(p, f);
        *landed = true;
        *runs = f->runs;
        *count = f->nruns;
        free(f);
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

int bk_pipe_take_runs(bk_pipe *p, mf_run **runs, uint32_t *count, pb_error *err)
{
    bk_pipe_file *f = NULL;
    bool landed = false;
    int rc = bk_pipe_file_end(p, &f, err);
    return rc ? rc : bk_pipe_file_take(p, f, true, &landed, runs, count, err);
}

void bk_pipe_hold(bk_pipe *p, bool hold)
{
    pthread_mutex_lock(&p->mu);
    p->held = hold;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
}

void bk_pipe_release(bk_pipe *p, bk_job *job)
{
    if (!job)
        return;
    pthread_mutex_lock(&p->mu);
    job->next = p->free_list;
    p->free_list = job;
    pthread_cond_signal(&p->freed);
    pthread_mutex_unlock(&p->mu);
}

void bk_pipe_set_adapt(bk_pipe *p, bool on, int ceiling)
{
    int floor = pack_level_min() > BK_ADAPT_FLOOR ? pack_level_min() : BK_ADAPT_FLOOR;
    pthread_mutex_lock(&p->mu);
    bk_adapt_init(&p->adapt, on, ceiling, floor);
    p->win_start = pb_now();
    p->win_wait = p->reader_wait;
    p->win_idle = p->idle_s;
    p->win_frames = 0;
    pthread_mutex_unlock(&p->mu);
}

void bk_pipe_report(bk_pipe *p, bk_io_report *io)
{
    pthread_mutex_lock(&p->mu);
    io->stages.queue_wait_seconds = p->reader_wait;
    io->stages.worker_idle_seconds = p->idle_s;
    io->stages.workers = p->nthreads;
    io->stages.drain_wait_seconds = p->drain_wait;
    io->stages.worker_cpu_seconds = 0;
    for (unsigned i = 0; i < p->nthreads; i++)
        io->stages.worker_cpu_seconds += worker_cpu(p->threads[i]);
    io->compress_adapt = p->adapt.on;
    io->level_ceiling = p->adapt.ceiling;
    io->level_floor = p->adapt.floor;
    io->level_final = p->adapt.level;
    io->level_downs = p->adapt.downs;
    io->level_ups = p->adapt.ups;
    io->nlevels = p->nlevels;
    memcpy(io->levels, p->levels, sizeof(io->levels));
    pthread_mutex_unlock(&p->mu);
}
