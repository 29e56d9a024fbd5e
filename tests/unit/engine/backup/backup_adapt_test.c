/* tests/unit/engine/backup/backup_adapt_test.c — the compression level policy (a pure function of
 * the queue's observations), the per-level and per-stage accounting, and a frame written at
 * a negative ("fast") level read back byte-exact. */
#include "engine/backup/backup_pipe_internal.h"
#include "tests/unit/pbtest.h"

#include <stdlib.h>
#include <string.h>

static void test_ladder(void)
{
    static const int down[] = {19, 9, 4, 2, 1, -1, -2, -4, -8, -16, -32, -32};
    for (size_t i = 0; i + 1 < sizeof(down) / sizeof(down[0]); i++)
        PBT_CHECK(bk_level_down(down[i], -32) == down[i + 1]);
    static const int up[] = {-32, -16, -8, -4, -2, -1, 1, 2, 3, 3};
    for (size_t i = 0; i + 1 < sizeof(up) / sizeof(up[0]); i++)
        PBT_CHECK(bk_level_up(up[i], 3) == up[i + 1]);
    PBT_CHECK(bk_level_down(-20, -32) == -32); /* the floor holds */
    PBT_CHECK(bk_level_down(3, 2) == 2);
    PBT_CHECK(bk_level_up(-1, -1) == -1);    /* a negative ceiling holds */
}

static bk_adapt_event window(bk_adapt *a, double reader_wait, double worker_idle)
{
    bk_adapt_window w = {1.0, reader_wait, worker_idle};
    return bk_adapt_decide(a, &w);
}

static void test_steps(void)
{
    bk_adapt a;
    bk_adapt_init(&a, true, 1, -32);
    PBT_CHECK(a.level == 1);
    PBT_CHECK(window(&a, 0.0, 0.9) == BK_ADAPT_NONE);  /* at the ceiling already */
    PBT_CHECK(window(&a, 0.08, 0.0) == BK_ADAPT_NONE); /* under a tenth waiting: enough */
    PBT_CHECK(window(&a, 0.5, 0.0) == BK_ADAPT_DOWN);  /* half the time waiting */
    PBT_CHECK(a.level == -1 && a.downs == 1);
    PBT_CHECK(window(&a, 0.3, 0.1) == BK_ADAPT_DOWN);
    PBT_CHECK(a.level == -2);
    /* The reader waits while the workers idle: a frame's latency (small files), not the
     * level's throughput: the level holds. */
    PBT_CHECK(window(&a, 0.4, 0.6) == BK_ADAPT_NONE);
    PBT_CHECK(window(&a, 0.4, 0.3) == BK_ADAPT_NONE);
    /* A little waiting, or a little idling: the two keep pace, the level holds. */
    PBT_CHECK(window(&a, 0.07, 0.5) == BK_ADAPT_NONE);
    PBT_CHECK(window(&a, 0.0, 0.2) == BK_ADAPT_NONE);
    PBT_CHECK(a.level == -2);
    /* The reader never waited and the workers idled: one step back up. */
    PBT_CHECK(window(&a, 0.01, 0.6) == BK_ADAPT_UP);
    PBT_CHECK(a.level == -1 && a.ups == 1);
    PBT_CHECK(window(&a, 0.0, 0.6) == BK_ADAPT_UP);
    PBT_CHECK(a.level == 1);
    PBT_CHECK(window(&a, 0.0, 0.6) == BK_ADAPT_NONE);
    for (int i = 0; i < 10; i++)
        window(&a, 0.9, 0.0);
    PBT_CHECK(a.level == -32); /* the floor holds */
    PBT_CHECK(window(&a, 0.9, 0.0) == BK_ADAPT_NONE);
    bk_adapt_window empty = {0, 0, 0};
    PBT_CHECK(bk_adapt_decide(&a, &empty) == BK_ADAPT_NONE);
}

static void test_off_and_frame_levels(void)
{
    bk_adapt a;
    bk_adapt_init(&a, false, 1, -32);
    for (int i = 0; i < 10; i++)
        PBT_CHECK(window(&a, 0.9, 0.0) == BK_ADAPT_NONE);
    PBT_CHECK(a.level == 1 && a.downs == 0);
    PBT_CHECK(bk_adapt_frame_level(&a, 0) == 1);
    PBT_CHECK(bk_adapt_frame_level(&a, 9) == 9); /* scattered frames keep their level */
    bk_adapt_init(&a, true, 3, -32);
    PBT_CHECK(bk_adapt_frame_level(&a, 0) == 3);
    PBT_CHECK(bk_adapt_frame_level(&a, 9) == 9);
    window(&a, 0.9, 0.0);
    PBT_CHECK(a.level == 1);
    PBT_CHECK(bk_adapt_frame_level(&a, 0) == 1);
    PBT_CHECK(bk_adapt_frame_level(&a, 9) == 1); /* below the ceiling, all frames follow */
    bk_adapt_init(&a, true, 5, -64);
    PBT_CHECK(a.floor == -64);
    bk_adapt_init(&a, true, -40, -32);
    PBT_CHECK(a.floor == -40 && a.level == -40); /* a floor above the ceiling is the ceiling */
}

/* A reader producing frames at 1 per time unit; workers (2) each compressing at a speed
 * that grows as the level falls. Over a window, whoever is slower waits for the other: the
 * reader waits 1 - capacity (when compression is behind), the workers idle 1 - 1/capacity
 * (when ahead). The level must settle at the first level whose capacity covers the reads
 * with the reader waiting under a tenth (-4 here) and stay there, not run to the floor or back up. */
static double capacity(int level)
{
    double one = level >= 1 ? 0.25 / level : level == -1 ? 0.3 : level == -2 ? 0.4
                 : level == -4 ? 0.55 : 0.9;
    return 2 * one;
}

static void test_settles(void)
{
    bk_adapt a;
    bk_adapt_init(&a, true, 3, -32);
    for (int i = 0; i < 200; i++) {
        double cap = capacity(a.level);
        window(&a, cap < 1 ? 1 - cap : 0, cap > 1 ? 1 - 1 / cap : 0);
        if (i >= 20)
            PBT_CHECK(a.level == -4);
    }
    PBT_CHECK(a.ups == 0 && a.downs == 4); /* 3 -> 1 -> -1 -> -2 -> -4 */
}

static void test_levels_add(void)
{
    bk_level_use u[3];
    unsigned n = 0;
    bk_levels_add(u, &n, 3, 1, 100, 40, 0.5);
    bk_levels_add(u, &n, 3, -4, 100, 70, 0.1);
    bk_levels_add(u, &n, 3, 1, 50, 20, 0.25);
    bk_levels_add(u, &n, 3, 9, 10, 3, 0.1);
    PBT_CHECK(n == 3);
    PBT_CHECK(u[0].level == 9 && u[1].level == 1 && u[2].level == -4); /* highest first */
    PBT_CHECK(u[1].frames == 2 && u[1].raw_bytes == 150 && u[1].stored_bytes == 60);
    PBT_CHECK(u[1].seconds > 0.74 && u[1].seconds < 0.76);
    bk_levels_add(u, &n, 3, -8, 5, 5, 0); /* no room: counted in the last */
    PBT_CHECK(n == 3 && u[2].level == -4 && u[2].frames == 2 && u[2].raw_bytes == 105);
}

static void test_stages_close(void)
{
    bk_stages st = {0};
    st.scan_seconds = 10;
    st.read_wait_seconds = 4;
    st.pause_seconds = 1;
    st.queue_wait_seconds = 2;
    bk_stages_close(&st);
    PBT_CHECK(st.page_work_seconds > 2.99 && st.page_work_seconds < 3.01);
    st.queue_wait_seconds = 7; /* clocks read apart can overshoot: never negative */
    bk_stages_close(&st);
    PBT_CHECK(st.page_work_seconds == 0);
}

/* A local repository in a new temporary directory and a pack writer on object obj. */
static void open_pack_repo(char *dir, size_t dir_len, const char *obj, uint64_t pack_size,
                           int level, repo **r, pack_writer **w)
{
    PBT_CHECK(pbt_tmpdir(dir, dir_len, "adapt") == 0);
    repo_opts o = REPO_OPTS_INIT;
    o.location = dir;
    pb_error e = PB_ERROR_INIT;
    PBT_CHECK(repo_open(r, &o, &e) == 0);
    PBT_CHECK(pack_writer_open(w, *r, obj, pack_size, level, &e) == 0);
}

/* Frames stay valid zstd at the lowest level the policy may use: restore reads them. */
static void test_fast_level_round_trip(void)
{
    char dir[256];
    repo *r = NULL;
    pack_writer *w = NULL;
    pb_error e = PB_ERROR_INIT;
    open_pack_repo(dir, sizeof(dir), "backup/x", 1u << 20, 1, &r, &w);
    size_t len = 32 * PB_PAGE_SIZE;
    uint8_t *data = malloc(len), *back = malloc(len);
    for (size_t i = 0; i < len; i++)
        data[i] = (uint8_t)((i / 64) % 7 == 0 ? i * 31 : i % 13);
    PBT_CHECK(pack_level_min() < BK_ADAPT_FLOOR);
    int levels[] = {BK_ADAPT_FLOOR, -1, 1};
    for (int k = 0; k < 3; k++) {
        mf_run run = {0, 32, 0, 0, 0, 0, 0};
        PBT_CHECK(pack_write_runs(w, data, len, &run, 1, levels[k], &e) == 0);
        PBT_CHECK(run.clen > PACK_FRAME_HEADER && run.clen < len);
        PBT_CHECK(pack_writer_finish(w, &e) == 0);
        pack_loc loc = {run.pack_no, run.offset, run.clen, run.rlen};
        memset(back, 0, len);
        PBT_CHECK(pack_read_frame(r, "backup/x", &loc, back, len, &e) == 0);
        PBT_CHECK(memcmp(back, data, len) == 0);
    }
    double c, wr;
    pack_writer_times(w, &c, &wr);
    PBT_CHECK(c > 0 && wr > 0);
    free(data);
    free(back);
    pack_writer_free(w);
    repo_free(r);
    pbt_rmtree(dir);
}

/* The pipe's CPU and wait accounting: the workers' CPU comes from their own thread clocks
 * (compression of a few MiB costs CPU), and a reader waiting for a file's frames at its end
 * counts that wait as a drain, part of its queue wait (the stages' "files' last frames"). */
static void test_pipe_accounting(void)
{
    char dir[256];
    repo *r = NULL;
    pack_writer *w = NULL;
    pb_error e = PB_ERROR_INIT;
    open_pack_repo(dir, sizeof(dir), "backup/p", 64u << 20, 3, &r, &w);
    bk_pipe *p = NULL;
    PBT_CHECK(bk_pipe_start(&p, &w, 1, &e) == 0);
    bk_pipe_set_adapt(p, false, 3);
    double cpu0 = bk_thread_cpu();
    for (uint32_t f = 0; f < 8; f++) {
        bk_job *job = bk_pipe_acquire(p);
        for (size_t i = 0; i < PACK_MAX_FRAME_RAW; i++)
            job->data[i] = (uint8_t)((i * 2654435761u) >> (13 + f % 3));
        bk_pipe_submit(p, job, f, 1, PACK_MAX_FRAME_RAW);
    }
    mf_run *runs = NULL;
    uint32_t n = 0;
    PBT_CHECK(bk_pipe_take_runs(p, &runs, &n, &e) == 0 && n == 8);
    free(runs);
    bk_io_report io;
    memset(&io, 0, sizeof(io));
    bk_pipe_report(p, &io);
    PBT_CHECK(io.stages.worker_cpu_seconds > 0);
    PBT_CHECK(io.stages.drain_wait_seconds > 0);
    PBT_CHECK(io.stages.drain_wait_seconds <= io.stages.queue_wait_seconds);
    PBT_CHECK(bk_thread_cpu() >= cpu0 && cpu0 > 0);
    bk_pipe_free(p);
    pack_writer_free(w);
    repo_free(r);
    pbt_rmtree(dir);
}

int main(void)
{
    PBT_RUN(test_ladder);
    PBT_RUN(test_steps);
    PBT_RUN(test_off_and_frame_levels);
    PBT_RUN(test_settles);
    PBT_RUN(test_levels_add);
    PBT_RUN(test_stages_close);
    PBT_RUN(test_fast_level_round_trip);
    PBT_RUN(test_pipe_accounting);
    return PBT_DONE();
}
