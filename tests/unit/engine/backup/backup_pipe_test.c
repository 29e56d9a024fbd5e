/*
 * tests/unit/engine/backup/backup_pipe_test.c — the reading thread never waits at a file's end
 * (polite I/O): a file's frames are stored behind the reader while it goes on to the next
 * file, and the file's record waits for them in the pending queue
 * (engine/backup/backup_records.c). With the compression worker held back (bk_pipe_hold), the
 * reader submits file 2's frames before any of file 1's is stored, and a directory made
 * between them waits behind file 1. Then: every record comes out in path order and names
 * only stored frames (each read back byte-exact from its pack); a vanished file's frames
 * are stored but never named; the queue stays within BK_PENDING_FILES; a failed store
 * fails the backup naming the file; the commit refuses while a record is pending.
 */
#include "tests/unit/engine/backup/records_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PPF 16u /* pages per frame */
#define SYS 7003u

static char root[256];

/* A full of system SYS whose relations go through a pipe of every buffer into one pack
 * writer. Five checks. */
static void fx_open(fixture *fx, const char *name)
{
    pb_error err = PB_ERROR_INIT;
    fx_open_records(fx, root, name, "20260101-000000F", "", SYS);
    PBT_CHECK(pack_writer_open(&fx->w, fx->r, "backup/20260101-000000F", 64u << 20, 1,
                               &err) == 0);
    fx->ctx.packs = fx->ctx.writers[0] = fx->w;
    fx->ctx.nwriters = 1;
    /* every buffer: the held worker leaves six frames queued (test_reader_goes_on) */
    PBT_CHECK(bk_pipe_start_jobs(&fx->ctx.pipe, &fx->w, 1, BK_CPU_NORMAL, BK_PIPE_JOBS, &err) ==
              0);
    bk_pipe_set_adapt(fx->ctx.pipe, false, 1);
}

static uint8_t pattern(uint32_t file, uint32_t page, size_t i)
{
    return (uint8_t)(file * 131u + page * 7u + (i / 64) * 3u + (i % 5));
}

/* Relation base/1/<no>: nframes frames of PPF pages, submitted and ended like the scan
 * does (engine/backup/backup_file.c); the record goes to bk_record_later (f NULL: vanished). */
static int add_rel(bk_ctx *ctx, uint32_t no, uint32_t nframes, bool vanished, pb_error *err)
{
    char path[64];
    snprintf(path, sizeof(path), "base/1/%u", no);
    mf_file f = fx_file(path, MF_REL, 0600);
    f.size = (uint64_t)nframes * PPF * PB_PAGE_SIZE;
    f.npages = nframes * PPF;
    f.page_hashes = malloc(sizeof(uint64_t) * f.npages);
    for (uint32_t k = 0; k < nframes; k++) {
        bk_job *job = bk_pipe_acquire(ctx->pipe);
        for (size_t i = 0; i < PPF * PB_PAGE_SIZE; i++)
            job->data[i] = pattern(no, k * PPF + (uint32_t)(i / PB_PAGE_SIZE), i);
        for (uint32_t p = 0; p < PPF; p++)
            f.page_hashes[k * PPF + p] = pb_hash64(job->data + p * PB_PAGE_SIZE, PB_PAGE_SIZE);
        bk_pipe_submit(ctx->pipe, job, k * PPF, PPF, PPF * PB_PAGE_SIZE);
    }
    bk_pipe_file *frames = NULL;
    int rc = bk_pipe_file_end(ctx->pipe, &frames, err);
    if (rc == 0)
        rc = bk_record_later(ctx, vanished ? NULL : &f, frames, err);
    mf_file_clear(&f);
    return rc;
}

static int add_dir(bk_ctx *ctx, uint32_t no, pb_error *err)
{
    char path[64];
    snprintf(path, sizeof(path), "base/1/%u", no);
    mf_file f = fx_file(path, MF_DIR, 0700);
    return fx_record_add(ctx, &f, err);
}

/* Commit and stream back: paths in order as expected (nos[]), every relation's runs
 * located in a pack and read back byte-exact against its page hashes. */
static void check_object(fixture *fx, const uint32_t *nos, size_t n)
{
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(pack_writer_finish(fx->w, &err) == 0);
    mf_header(fx->ctx.m)->files = n;
    PBT_CHECK(bk_records_commit(&fx->ctx, &err) == 0);
    mf_stream *s = NULL;
    PBT_CHECK(chain_stream_open(fx->r, "20260101-000000F", &s, &err) == 0);
    if (!s)
        return;
    uint8_t *back = malloc(PPF * PB_PAGE_SIZE);
    mf_file f = {0};
    size_t count = 0, frames_ok = 0, frames = 0;
    int rc;
    while ((rc = mf_stream_next(s, &f, &err)) == 1) {
        char want[64];
        snprintf(want, sizeof(want), "base/1/%u", count < n ? nos[count] : 0);
        PBT_CHECK(strcmp(f.path, want) == 0);
        for (uint32_t k = 0, h = 0; f.kind == MF_REL && k < f.nruns; k++) {
            const mf_run *run = &f.runs[k];
            pack_loc loc = {run->pack_no, run->offset, run->clen, run->rlen};
            frames++;
            if (run->pack_no == 0 || run->clen == 0 ||
                pack_read_frame(fx->r, "backup/20260101-000000F", &loc, back,
                                PPF * PB_PAGE_SIZE, &err) != 0)
                continue;
            bool same = run->count == PPF;
            for (uint32_t p = 0; same && p < PPF; p++, h++)
                same = pb_hash64(back + p * PB_PAGE_SIZE, PB_PAGE_SIZE) == f.page_hashes[h];
            frames_ok += same;
        }
        count++;
        mf_file_clear(&f);
    }
    PBT_CHECK(rc == 0 && count == n);
    PBT_CHECK(frames > 0 && frames_ok == frames);
    free(back);
    mf_stream_close(s);
}

/* The heart of it: the reader passes file ends while nothing is stored. */
static void test_reader_goes_on(void)
{
    fixture fx;
    pb_error err = PB_ERROR_INIT;
    fx_open(&fx, "goes-on");
    bk_ctx *ctx = &fx.ctx;
    bk_pipe_hold(ctx->pipe, true);
    PBT_CHECK(add_rel(ctx, 100, 3, false, &err) == 0); /* returns: nothing waited for */
    PBT_CHECK(add_dir(ctx, 150, &err) == 0);          /* behind file 1, not before it */
    PBT_CHECK(add_rel(ctx, 200, 2, false, &err) == 0); /* file 2 while file 1 is unstored */
    PBT_CHECK(add_rel(ctx, 300, 1, true, &err) == 0);  /* vanished: frames, no record */
    PBT_CHECK(pack_writer_stored_bytes(fx.w) == 0);    /* not one frame stored yet */
    PBT_CHECK(bk_records_pending(ctx) == 4);
    PBT_CHECK(bk_records_settle(ctx, false, &err) == 0 && bk_records_pending(ctx) == 4);
    /* the commit refuses while records wait for frames */
    PBT_CHECK(bk_records_commit(ctx, &err) == PB_ESTATE && strstr(err.msg, "4 file records"));
    bk_pipe_hold(ctx->pipe, false);
    PBT_CHECK(bk_records_settle(ctx, true, &err) == 0 && bk_records_pending(ctx) == 0);
    PBT_CHECK(add_dir(ctx, 400, &err) == 0); /* nothing pending: written at once */
    PBT_CHECK(bk_records_pending(ctx) == 0);
    fx_close(&fx);

    /* the same again to the commit (one committed manifest per fixture) */
    fx_open(&fx, "goes-on-2");
    ctx = &fx.ctx;
    bk_pipe_hold(ctx->pipe, true);
    PBT_CHECK(add_rel(ctx, 100, 3, false, &err) == 0);
    PBT_CHECK(add_dir(ctx, 150, &err) == 0);
    PBT_CHECK(add_rel(ctx, 200, 2, false, &err) == 0);
    PBT_CHECK(add_rel(ctx, 300, 1, true, &err) == 0);
    PBT_CHECK(bk_records_pending(ctx) == 4 && pack_writer_stored_bytes(fx.w) == 0);
    bk_pipe_hold(ctx->pipe, false);
    PBT_CHECK(bk_records_settle(ctx, true, &err) == 0);
    PBT_CHECK(add_dir(ctx, 400, &err) == 0);
    bk_io_report io;
    memset(&io, 0, sizeof(io));
    bk_pipe_report(ctx->pipe, &io);
    PBT_CHECK(io.stages.drain_wait_seconds <= io.stages.queue_wait_seconds);
    static const uint32_t want[] = {100, 150, 200, 400};
    check_object(&fx, want, 4);
    PBT_CHECK(fx.ctx.io.manifest_pending_peak == 4);
    fx_close(&fx);
}

/* Many files, dirs between them, workers free: the queue never holds more than its bound
 * and every record is there, in order. */
static void test_bounded(void)
{
    fixture fx;
    pb_error err = PB_ERROR_INIT;
    fx_open(&fx, "bounded");
    enum { N = 300 };
    uint32_t *nos = malloc(sizeof(uint32_t) * N);
    for (uint32_t i = 0; i < N; i++) {
        nos[i] = 1000 + i;
        int rc = i % 3 == 1 ? add_dir(&fx.ctx, nos[i], &err)
                            : add_rel(&fx.ctx, nos[i], 1 + i % 2, false, &err);
        PBT_CHECK(rc == 0);
        PBT_CHECK(bk_records_pending(&fx.ctx) < BK_PENDING_FILES);
    }
    PBT_CHECK(bk_records_settle(&fx.ctx, true, &err) == 0);
    check_object(&fx, nos, N);
    PBT_CHECK(fx.ctx.io.manifest_pending_peak >= 1 &&
              fx.ctx.io.manifest_pending_peak <= BK_PENDING_FILES);
    printf("300 files: at most %llu records pending at once\n",
           (unsigned long long)fx.ctx.io.manifest_pending_peak);
    free(nos);
    fx_close(&fx);
}

/* A frame that cannot be stored fails the backup, naming the file it belongs to. */
static void test_store_failure(void)
{
    fixture fx;
    pb_error err = PB_ERROR_INIT;
    fx_open(&fx, "fails");
    bk_pipe_hold(fx.ctx.pipe, true);
    PBT_CHECK(add_rel(&fx.ctx, 500, 1, false, &err) == 0);
    /* the pack's directory becomes a file: the worker's first write fails */
    char path[600];
    snprintf(path, sizeof(path), "%s/backup", fx.dir);
    pbt_rmtree(path);
    FILE *fp = fopen(path, "w");
    PBT_CHECK(fp != NULL);
    if (fp)
        fclose(fp);
    bk_pipe_hold(fx.ctx.pipe, false);
    int rc = bk_records_settle(&fx.ctx, true, &err);
    PBT_CHECK(rc != 0 && strstr(err.msg, "base/1/500"));
    fx_close(&fx);
}

/* The queue keeps the workers busy and no more: one frame compressing and one queued
 * per worker, and the reader's (12 x 1 MiB sat full behind 2 workers). */
static void test_queue_sized(void)
{
    for (unsigned n = 1; n <= BK_PIPE_MAX_WORKERS; n++) {
        unsigned jobs = bk_pipe_jobs_for(n);
        PBT_CHECK(jobs >= 2 && jobs <= BK_PIPE_JOBS);
        PBT_CHECK(jobs <= 2 * n + 1);
        PBT_CHECK(jobs >= n + 1 || jobs == BK_PIPE_JOBS);
    }
    PBT_CHECK(bk_pipe_jobs_for(2) == 5);
    pb_error err = PB_ERROR_INIT;
    bk_pipe *p = NULL;
    pack_writer *w = NULL;
    PBT_CHECK(bk_pipe_start_jobs(&p, &w, 1, BK_CPU_NORMAL, BK_PIPE_JOBS + 1, &err) ==
              PB_EINVAL);
    PBT_CHECK(p == NULL);
}

int main(void)
{
    if (pbt_tmpdir(root, sizeof(root), "backup-pipe-test") != 0)
        return 1;
    alarm(120); /* a reader that waits for a held worker would hang: fail instead */
    PBT_RUN(test_reader_goes_on);
    PBT_RUN(test_bounded);
    PBT_RUN(test_store_failure);
    PBT_RUN(test_queue_sized);
    pbt_rmtree(root);
    return PBT_DONE();
}
