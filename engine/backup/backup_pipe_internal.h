/*
 * engine/backup/backup_pipe_internal.h — compression off the reading thread (prefix
 * bk_pipe_). The scanning thread fills frame buffers taken from a bounded pool and submits
 * them; a worker compresses and appends them to the pack writer in submission order. The
 * pool bounds memory (BK_PIPE_JOBS x PACK_MAX_FRAME_RAW) and makes the reader wait when
 * compression falls behind. The frames submitted between two bk_pipe_file_end calls are
 * one file's: the reader goes on to the next file at once and takes a file's runs (their
 * locations) once its last frame is stored (engine/backup/backup_records.c, "pending
 * records"). Private to engine/backup/.
 */
#ifndef PB_ENGINE_BACKUP_PIPE_H
#define PB_ENGINE_BACKUP_PIPE_H

#include "engine/backup/backup.h"
#include "engine/pack/pack.h"
#include "manifest/manifest.h"

#include <stdbool.h>

#define BK_PIPE_JOBS 12

/* Runs one frame can hold: the changed pages of one region, each page its own run at
 * worst (engine/backup/backup_file.c). */
#define BK_JOB_RUNS 128u

typedef struct bk_job {
    uint8_t *data;   /* PACK_MAX_FRAME_RAW bytes, 4096-aligned */
    size_t len;
    /* first/count/frame_page from the submitter; the location from the worker */
    mf_run runs[BK_JOB_RUNS];
    uint32_t nruns;
    int level;       /* zstd level of this frame, 0 = the writer's */
    struct bk_pipe_file *file; /* the file it belongs to (NULL: recording it failed) */
    uint32_t seq;    /* index of runs[0] among that file's runs */
    struct bk_job *next;
} bk_job;

typedef struct bk_pipe bk_pipe;
/* One file's frames, from its first submit to bk_pipe_file_take (owned by the pipe). */
typedef struct bk_pipe_file bk_pipe_file;

#define BK_PIPE_MAX_WORKERS 8

/* Start one worker per pack writer (nworkers <= BK_PIPE_MAX_WORKERS); the writers stay
 * owned by the caller and must outlive the pipe. Frames of one file may land in
 * different writers' packs: each run records its pack. */
int bk_pipe_start(bk_pipe **out, pack_writer **packs, unsigned nworkers, pb_error *err);
/* The same, each worker first lowering its own CPU priority (bk_cpu_priority in
 * engine/backup/backup.h: SCHED_IDLE, nice 19 where refused). Returns once every worker has
 * applied it; bk_pipe_cpu_applied then says what was applied. */
int bk_pipe_start_prio(bk_pipe **out, pack_writer **packs, unsigned nworkers, int cpu_priority,
                       pb_error *err);
/* The same with njobs frame buffers (2..BK_PIPE_JOBS; 0 = bk_pipe_jobs_for(nworkers)):
 * --max-memory. */
int bk_pipe_start_jobs(bk_pipe **out, pack_writer **packs, unsigned nworkers, int cpu_priority,
                       unsigned njobs, pb_error *err);
const char *bk_pipe_cpu_applied(const bk_pipe *p);
/* The frame buffers that keep nworkers busy (docs/DESIGN.md, "Memory"): one being
 * compressed and one queued per worker, and the one the reader fills; at least 2, at
 * most BK_PIPE_JOBS. More only sit full while the reader waits anyway. */
unsigned bk_pipe_jobs_for(unsigned nworkers);
/* Stop the worker and free the pool. Accepts NULL. */
void bk_pipe_free(bk_pipe *p);
/* A free buffer (waits while all are in flight). */
bk_job *bk_pipe_acquire(bk_pipe *p);
/* Queue a filled buffer for compression; the worker returns it to the pool once stored. */
void bk_pipe_submit(bk_pipe *p, bk_job *job, uint32_t first, uint32_t count, size_t len);
/* The same for a frame whose runs the submitter set in job->runs[0..job->nruns). */
void bk_pipe_submit_runs(bk_pipe *p, bk_job *job, size_t len);
/* The frames submitted since the previous call are one file's: *out is its handle (NULL
 * when it had none: nothing to wait for). The handle stays the pipe's until
 * bk_pipe_file_take hands its runs over (bk_pipe_free frees what was never taken). */
int bk_pipe_file_end(bk_pipe *p, bk_pipe_file **out, pb_error *err);
/* Memory the file's record will hold once its runs come: the runs and one page hash per
 * page they hold. Reading thread only (the submitter's counts). */
uint64_t bk_pipe_file_bytes(const bk_pipe_file *f);
/* Are all of f's frames stored? wait: block until they are (timed as a drain wait, the
 * reader's wait at a file's end). When they are (*landed true), hand over the runs in
 * submission order with their locations (*runs malloc'd, caller frees; NULL when none)
 * and free the handle. Returns the pipe's first failure (sticky), at once. */
int bk_pipe_file_take(bk_pipe *p, bk_pipe_file *f, bool wait, bool *landed, mf_run **runs,
                      uint32_t *count, pb_error *err);
/* bk_pipe_file_end, then wait for that file's frames and take them: the runs submitted
 * since the previous end (earlier files' handles are untouched). */
int bk_pipe_take_runs(bk_pipe *p, mf_run **runs, uint32_t *count, pb_error *err);
/* Tests: while held, no worker starts a new frame (bk_pipe_free still drains the queue). */
void bk_pipe_hold(bk_pipe *p, bool hold);
/* Give an acquired but unsubmitted buffer back. */
void bk_pipe_release(bk_pipe *p, bk_job *job);
/* Compression levels (--compress-level is the ceiling; on = --compress-adapt): call once
 * after the start, before the first submit. Without it frames keep the level they ask. */
void bk_pipe_set_adapt(bk_pipe *p, bool on, int ceiling);
/* What the pipe measured (queue waits, worker idle time, levels used) into io. */
void bk_pipe_report(bk_pipe *p, bk_io_report *io);

/* CPU seconds (user + sys) the calling thread has used so far; 0 where unknown. */
double bk_thread_cpu(void);

/* Lower the calling thread's CPU priority (bk_cpu_priority; Linux applies it to that thread
 * alone and threads it starts later inherit it); applied receives what was applied. */
void bk_cpu_lower(int prio, char *applied, size_t len);

/* ---- adaptive compression (engine/backup/backup_adapt.c): pure, no clock, no threads ----------
 * In the spirit of zstd --adapt: the pipe measures, over windows of a queue's length of
 * frames (and at least BK_ADAPT_WINDOW_MIN s), how long the reading thread waited for
 * compression (a full queue, or pending records waiting for files' last frames) and how long
 * the workers waited for frames. When the reader waited more than BK_ADAPT_BEHIND_FRAC of
 * the window while the workers were busy (idle under BK_ADAPT_IDLE_FRAC), compression is
 * behind the reads: the level steps down (1, then zstd's negative "fast" levels). A reader
 * that waits while the workers idle waits for one frame's latency (the last frame of a file
 * whose record is due), which a faster level does not shorten much: the level holds. When
 * the reader hardly waited and the workers idled more than BK_ADAPT_IDLE_FRAC,
 * compression is ahead: one step back up towards the ceiling. Down is
 * multiplicative (level / 2 above 1, x 2 below 0), up is one step (level + 1 above 0,
 * level / 2 below): cut fast, creep back, as a congestion controller does. A window with
 * waits on both sides holds the level: reader and workers keep pace. */
#define BK_ADAPT_FLOOR (-32)        /* lower levels barely compress 8 kB pages */
#define BK_ADAPT_WINDOW_MIN 0.05    /* seconds: shorter windows are noise */
#define BK_ADAPT_BEHIND_FRAC 0.10   /* the reader waited this share of the window: down */
#define BK_ADAPT_AHEAD_FRAC 0.05    /* ... under this share, and */
#define BK_ADAPT_IDLE_FRAC 0.25     /* the workers idled over this share (each): up; under
                                     * it they count as busy */

typedef enum bk_adapt_event { BK_ADAPT_NONE = 0, BK_ADAPT_DOWN, BK_ADAPT_UP } bk_adapt_event;

/* One window's measurements, in seconds. */
typedef struct bk_adapt_window {
    double elapsed;
    double reader_wait;  /* the reading thread waiting for compression */
    double worker_idle;  /* a worker waiting for frames (the workers' mean) */
} bk_adapt_window;

typedef struct bk_adapt {
    bool on;
    int ceiling, floor, level;
    uint64_t downs, ups;
} bk_adapt;

/* ceiling: --compress-level; floor: the lowest level allowed (>= ZSTD_minCLevel()). */
void bk_adapt_init(bk_adapt *a, bool on, int ceiling, int floor);
/* Decide on one window; returns the step taken, if any (a->level is the new one). */
bk_adapt_event bk_adapt_decide(bk_adapt *a, const bk_adapt_window *w);
/* The level for a frame that asks for wanted (0 = the ceiling): wanted while the adaptation
 * sits at the ceiling (or is off), else the adapted level when that is lower. */
int bk_adapt_frame_level(const bk_adapt *a, int wanted);
int bk_level_down(int level, int floor);
int bk_level_up(int level, int ceiling);
/* Count one frame at level into u[0..*n) (kept sorted, highest level first; when all cap
 * entries are taken, the frame is counted in the last). */
void bk_levels_add(bk_level_use *u, unsigned *n, unsigned cap, int level, uint64_t raw,
                   uint64_t stored, double seconds);
/* The page work: the check thread's time in the callbacks less its waits for compression
 * (check_seconds set), else what the reading thread's scan time leaves after waiting for
 * reads, pausing and waiting for compression (never below 0: the clocks are read apart). */
void bk_stages_close(bk_stages *st);

#endif
