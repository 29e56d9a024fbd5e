/*
 * engine/backup_pipe.h — compression off the reading thread (prefix bk_pipe_). The
 * scanning thread fills frame buffers taken from a bounded pool and submits them; a
 * worker compresses and appends them to the pack writer in submission order. The pool
 * bounds memory (BK_PIPE_JOBS x PACK_MAX_FRAME_RAW) and makes the reader wait when
 * compression falls behind. Private to engine/.
 */
#ifndef PB_ENGINE_BACKUP_PIPE_H
#define PB_ENGINE_BACKUP_PIPE_H

#include "engine/pack.h"
#include "manifest/manifest.h"

#define BK_PIPE_JOBS 12

/* Runs one frame can hold: the changed pages of one region, each page its own run at
 * worst (engine/backup_file.c). */
#define BK_JOB_RUNS 32u

typedef struct bk_job {
    uint8_t *data;   /* PACK_MAX_FRAME_RAW bytes, 4096-aligned */
    size_t len;
    /* first/count/frame_page from the submitter; the location from the worker */
    mf_run runs[BK_JOB_RUNS];
    uint32_t nruns;
    int level;       /* zstd level of this frame, 0 = the writer's */
    uint32_t seq;    /* index of runs[0] among the runs submitted since the last take */
    struct bk_job *next;
} bk_job;

typedef struct bk_pipe bk_pipe;

#define BK_PIPE_MAX_WORKERS 8

/* Start one worker per pack writer (nworkers <= BK_PIPE_MAX_WORKERS); the writers stay
 * owned by the caller and must outlive the pipe. Frames of one file may land in
 * different writers' packs: each run records its pack. */
int bk_pipe_start(bk_pipe **out, pack_writer **packs, unsigned nworkers, pb_error *err);
/* The same, each worker first lowering its own CPU priority (bk_cpu_priority in
 * engine/backup.h: SCHED_IDLE, nice 19 where refused). Returns once every worker has
 * applied it; bk_pipe_cpu_applied then says what was applied. */
int bk_pipe_start_prio(bk_pipe **out, pack_writer **packs, unsigned nworkers, int cpu_priority,
                       pb_error *err);
/* The same with njobs frame buffers (2..BK_PIPE_JOBS; 0 = BK_PIPE_JOBS): --max-memory. */
int bk_pipe_start_jobs(bk_pipe **out, pack_writer **packs, unsigned nworkers, int cpu_priority,
                       unsigned njobs, pb_error *err);
const char *bk_pipe_cpu_applied(const bk_pipe *p);
/* Stop the worker and free the pool. Accepts NULL. */
void bk_pipe_free(bk_pipe *p);
/* A free buffer (waits while all are in flight). */
bk_job *bk_pipe_acquire(bk_pipe *p);
/* Queue a filled buffer for compression; the worker returns it to the pool once stored. */
void bk_pipe_submit(bk_pipe *p, bk_job *job, uint32_t first, uint32_t count, size_t len);
/* The same for a frame whose runs the submitter set in job->runs[0..job->nruns). */
void bk_pipe_submit_runs(bk_pipe *p, bk_job *job, size_t len);
/* Wait until every submitted job is stored, then hand over their runs in submission
 * order (*runs is malloc'd, caller frees; NULL when none). Returns the first failure. */
int bk_pipe_take_runs(bk_pipe *p, mf_run **runs, uint32_t *count, pb_error *err);
/* Give an acquired but unsubmitted buffer back. */
void bk_pipe_release(bk_pipe *p, bk_job *job);

#endif
