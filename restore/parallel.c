/*
 * restore/parallel.c — files rebuilt by several workers at once. Each worker owns its
 * buffers and zstd context and takes the next files from the chain's merged manifest
 * streams (restore/plan_merge.c), copying their records out under a lock; the repository
 * handle is shared (both drivers are thread-safe), and so is one pack cache, which reads
 * each small pack once for all of them (engine/pack/pack.h). With object storage the time of
 * a restore is mostly request latency, which workers overlap.
 */
#include "restore/plan.h"
#include "restore/restore_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define FILES_PER_GRAB 32

typedef struct par_state {
    const rs_ctx *proto;
    mf_merge *mg;         /* under mg_mu: each worker copies its batch out of it */
    pthread_mutex_t mg_mu;
    bool end;             /* under mg_mu: the merge is exhausted */
    atomic_int failed;
    pthread_mutex_t mu;
    int rc;
    pb_error err;
    rs_progress progress; /* under mu */
    pack_cache *cache;    /* small packs read once for all workers (engine/pack/pack.h) */
    uint64_t source_budget; /* each worker's pack source (split_memory; 0: default) */
    pack_pool *pool;      /* what the sources hold beyond their floors, shared (engine/pack/pack.h) */
} par_state;

typedef struct par_worker {
    par_state *st;
    rs_stats stats;
    rs_recs batch[FILES_PER_GRAB];
    uint64_t peak; /* most record bytes its batch held */
    pthread_t thread;
    bool started;
} par_worker;

static void record_failure(par_state *st, int rc, const pb_error *err)
{
    pthread_mutex_lock(&st->mu);
    if (!st->rc) {
        st->rc = rc;
        st->err = *err;
    }
    pthread_mutex_unlock(&st->mu);
    atomic_store(&st->failed, 1);
}

/* One file more is done: tell the caller's progress hook, one call at a time. */
static void note_progress(par_state *st, uint64_t size)
{
    if (!st->proto->progress)
        return;
    pthread_mutex_lock(&st->mu);
    st->progress.files_done++;
    st->progress.bytes_done += size;
    st->proto->progress(st->proto->progress_ctx, &st->progress);
    pthread_mutex_unlock(&st->mu);
}

/* The next regular files of the restored backup, in path order, copied into w->batch
 * (rs_recs_batch): consecutive files go to one worker (a full backup's packs hold them in
 * that order, so each worker reads its part of a pack sequentially). *n = 0 at the end. */
static int grab(par_worker *w, size_t *n, pb_error *err)
{
    par_state *st = w->st;
    uint64_t bytes = 0;
    bool end = false;
    *n = 0;
    pthread_mutex_lock(&st->mg_mu);
    int rc = st->end ? 0
                     : rs_recs_batch(st->mg, st->proto->nchain, w->batch, FILES_PER_GRAB,
                                     RS_BATCH_BYTES, n, &bytes, &end, err);
    if (rc || end)
        st->end = true; /* the end, or a stream error: nothing more to hand out */
    pthread_mutex_unlock(&st->mg_mu);
    if (bytes > w->peak)
        w->peak = bytes;
    return rc;
}

static void *par_run(void *vw)
{
    par_worker *w = vw;
    par_state *st = w->st;
    rs_ctx ctx = *st->proto;
    ctx.stats = &w->stats;
    ctx.frame = ctx.existing = NULL;
    ctx.frame_valid = false;
    ctx.source = NULL;
    ctx.source_budget = st->source_budget;
    ctx.reader = NULL;
    pb_error err = PB_ERROR_INIT;
    int rc = rs_ctx_buffers(&ctx, &err);
    if (rc == 0) {
        pack_source_set_cache(ctx.source, st->cache);
        pack_source_set_pool(ctx.source, st->pool);
    }
    size_t n = 0;
    while (rc == 0 && !atomic_load(&st->failed) && (rc = grab(w, &n, &err)) == 0 && n) {
        for (size_t i = 0; rc == 0 && i < n; i++) {
            const mf_file *f = w->batch[i].ptr[ctx.nchain - 1];
            rc = rs_rebuild_file(&ctx, w->batch[i].ptr, &err);
            if (rc == 0)
                note_progress(st, f->size);
        }
        for (size_t i = 0; i < n; i++)
            rs_recs_clear(&w->batch[i]);
    }
    if (rc)
        record_failure(st, rc, &err);
    for (size_t i = 0; i < FILES_PER_GRAB; i++)
        rs_recs_free(&w->batch[i]);
    rs_ctx_free_buffers(&ctx);
    return NULL;
}

/* A worker's own buffers besides its source: the decoded frame and the delta's pages
 * (rs_ctx_buffers). */
#define WORKER_FIXED (2u * PACK_MAX_FRAME_RAW)
#define RS_DEFAULT_CACHE (8u << 20)
/* The workers' sources share what they hold beyond their floors (engine/pack/pack.h, one
 * budget shared by several sources): by default as much as two sources take at their
 * full budget. A small database has at most two workers rebuilding large files at a
 * time; a large one has all of them, and with a budget each their sum was what grew
 * (jobs x RS_DEFAULT_SOURCE). One worker alone still plans 4 MiB ranges. */
#define RS_DEFAULT_POOL (2u * (RS_DEFAULT_SOURCE - PACK_SOURCE_FLOOR))

/* --max-memory split between the pack cache (a quarter, at most its default), each
 * worker's own buffers and source floor, and the pool the sources share (the rest), with
 * fewer workers when a floor each does not fit; refused when even one does not fit.
 * *source: each source's budget (what one may take of the pool and its floor).
 * 0: the defaults. */
static int split_memory(uint64_t max, unsigned *jobs, uint64_t *cache, uint64_t *source,
                        uint64_t *pool, pb_error *err)
{
    /* Without --max-memory the pack cache, each worker's source and the pool get fixed
     * budgets that a restore of a few GB already fills (docs/DESIGN.md, flat memory):
     * what a restore holds then depends on neither --jobs nor the size of the data. */
    *cache = RS_DEFAULT_CACHE;
    *source = RS_DEFAULT_SOURCE;
    *pool = RS_DEFAULT_POOL;
    if (!max)
        return 0;
    uint64_t need = WORKER_FIXED + PACK_SOURCE_FLOOR;
    *cache = max / 4 < PACK_CACHE_BUDGET ? max / 4 : PACK_CACHE_BUDGET;
    uint64_t rest = max - *cache;
    while (*jobs > 1 && rest / *jobs < need)
        (*jobs)--;
    if (rest / *jobs < need)
        return pb_fail(err, PB_EINVAL, "--max-memory %llu bytes is too small for a restore: "
                       "one worker needs %llu bytes and the pack cache takes %llu",
                       (unsigned long long)max, (unsigned long long)need,
                       (unsigned long long)*cache);
    *pool = rest - *jobs * need;
    *source = PACK_SOURCE_FLOOR + *pool;
    if (*source < PACK_SOURCE_MIN_BUDGET) /* the smallest budget; the pool still bounds it */
        *source = PACK_SOURCE_MIN_BUDGET;
    if (*source > PACK_SOURCE_BUDGET)
        *source = PACK_SOURCE_BUDGET;
    return 0;
}

static void add_stats(rs_stats *t, const rs_stats *s)
{
    t->files_written += s->files_written;
    t->files_skipped += s->files_skipped;
    t->pages_written += s->pages_written;
    t->pages_skipped += s->pages_skipped;
    t->frames_read += s->frames_read;
    t->bytes_fetched += s->bytes_fetched;
    t->bytes_written += s->bytes_written;
    t->frame_peak += s->frame_peak; /* each worker's peak: a bound of what all held at once */
    t->files_direct += s->files_direct;
    t->direct_fallbacks += s->direct_fallbacks;
}

int rs_rebuild_parallel(const rs_ctx *proto, mf_merge *mg, const rs_progress *totals,
                        unsigned jobs, pb_error *err)
{
    if (jobs < 1)
        jobs = 1;
    uint64_t cache_budget = 0, source_budget = 0, pool_bytes = 0;
    if (split_memory(proto->max_memory, &jobs, &cache_budget, &source_budget, &pool_bytes,
                     err) != 0)
        return PB_EINVAL;
    par_worker *w = calloc(jobs, sizeof(*w));
    if (!w)
        return pb_fail(err, PB_ENOMEM, "out of memory for restore workers");
    pack_pool *pool = NULL;
    if (pack_pool_new(&pool, pool_bytes, err) != 0) {
        free(w);
        return PB_ENOMEM;
    }
    par_state st;
    memset(&st, 0, sizeof(st));
    st.proto = proto;
    st.mg = mg;
    atomic_init(&st.failed, 0);
    pthread_mutex_init(&st.mu, NULL);
    pthread_mutex_init(&st.mg_mu, NULL);
    if (pack_cache_new(&st.cache, proto->repo, err) != 0) {
        pthread_mutex_destroy(&st.mu);
        pthread_mutex_destroy(&st.mg_mu);
        pack_pool_free(pool);
        free(w);
        return PB_ENOMEM;
    }
    st.pool = pool;
    pack_cache_set_budget(st.cache, cache_budget);
    st.source_budget = source_budget;
    if (totals) {
        st.progress.files_total = totals->files_total;
        st.progress.bytes_total = totals->bytes_total;
    }
    for (unsigned i = 0; i < jobs; i++) {
        w[i].st = &st;
        w[i].started = pthread_create(&w[i].thread, NULL, par_run, &w[i]) == 0;
        if (!w[i].started) {
            pb_error e = PB_ERROR_INIT;
            pb_fail(&e, PB_ENOMEM, "cannot start restore worker %u", i);
            record_failure(&st, PB_ENOMEM, &e);
        }
    }
    for (unsigned i = 0; i < jobs; i++) {
        if (w[i].started)
            pthread_join(w[i].thread, NULL);
        add_stats(proto->stats, &w[i].stats);
        proto->stats->manifest_peak += w[i].peak;
    }
    int rc = st.rc;
    if (rc)
        *err = st.err;
    pthread_mutex_destroy(&st.mu);
    pthread_mutex_destroy(&st.mg_mu);
    pack_cache_free(st.cache);
    pack_pool_free(pool);
    free(w);
    return rc;
}
