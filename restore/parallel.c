/*
 * restore/parallel.c — files rebuilt by several workers at once. Each worker owns its
 * buffers and zstd context and takes the next file from a shared counter; the
 * repository handle is shared (both drivers are thread-safe). With object storage the
 * time of a restore is mostly request latency, which workers overlap.
 */
#include "restore/restore_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define FILES_PER_GRAB 32

typedef struct par_state {
    const rs_ctx *proto;
    const mf_manifest *m;
    atomic_size_t next;
    atomic_int failed;
    pthread_mutex_t mu;
    int rc;
    pb_error err;
} par_state;

typedef struct par_worker {
    par_state *st;
    rs_stats stats;
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

static void *par_run(void *vw)
{
    par_worker *w = vw;
    par_state *st = w->st;
    rs_ctx ctx = *st->proto;
    ctx.stats = &w->stats;
    ctx.frame = ctx.existing = NULL;
    ctx.frame_valid = false;
    ctx.source = NULL;
    ctx.reader = NULL;
    pb_error err = PB_ERROR_INIT;
    int rc = rs_ctx_buffers(&ctx, &err);
    /* Files are taken in runs of FILES_PER_GRAB in manifest order (which is pack order
     * for a full backup), so each worker reads its part of a pack sequentially. */
    while (rc == 0 && !atomic_load(&st->failed)) {
        size_t first = atomic_fetch_add(&st->next, FILES_PER_GRAB);
        if (first >= mf_count(st->m))
            break;
        for (size_t i = first; rc == 0 && i < first + FILES_PER_GRAB && i < mf_count(st->m);
             i++) {
            const mf_file *f = mf_at(st->m, i);
            if (f->kind == MF_REL || f->kind == MF_FILE)
                rc = rs_rebuild_file(&ctx, f, &err);
        }
    }
    if (rc)
        record_failure(st, rc, &err);
    rs_ctx_free_buffers(&ctx);
    return NULL;
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
}

int rs_rebuild_parallel(const rs_ctx *proto, const mf_manifest *m, unsigned jobs,
                        pb_error *err)
{
    if (jobs < 1)
        jobs = 1;
    par_worker *w = calloc(jobs, sizeof(*w));
    if (!w)
        return pb_fail(err, PB_ENOMEM, "out of memory for restore workers");
    par_state st;
    memset(&st, 0, sizeof(st));
    st.proto = proto;
    st.m = m;
    atomic_init(&st.next, 0);
    atomic_init(&st.failed, 0);
    pthread_mutex_init(&st.mu, NULL);
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
    }
    int rc = st.rc;
    if (rc)
        *err = st.err;
    pthread_mutex_destroy(&st.mu);
    free(w);
    return rc;
}
