/*
 * engine/backup/backup_adapt.c — the compression level policy and the stage accounting of a
 * backup (engine/backup/backup_pipe_internal.h). Pure functions of what the pipe observed: the
 * pipe calls them under its lock, the unit test (tests/unit/engine/backup/backup_adapt_test.c)
 * with made-up observations.
 */
#include "engine/backup/backup_pipe_internal.h"

#include <string.h>

void bk_adapt_init(bk_adapt *a, bool on, int ceiling, int floor)
{
    memset(a, 0, sizeof(*a));
    a->on = on;
    a->ceiling = ceiling;
    a->floor = floor < ceiling ? floor : ceiling;
    a->level = ceiling;
}

/* Level 0 is zstd's default (3), not a step between 1 and -1: the ladder skips it. */
int bk_level_down(int level, int floor)
{
    int next = level > 1 ? level / 2 : level >= 0 ? -1 : level * 2;
    return next < floor ? floor : next;
}

int bk_level_up(int level, int ceiling)
{
    int next = level < -1 ? level / 2 : level == -1 ? 1 : level + 1;
    return next > ceiling ? ceiling : next;
}

bk_adapt_event bk_adapt_decide(bk_adapt *a, const bk_adapt_window *w)
{
    if (!a->on || w->elapsed <= 0)
        return BK_ADAPT_NONE;
    double waited = w->reader_wait / w->elapsed, idled = w->worker_idle / w->elapsed;
    if (waited > BK_ADAPT_BEHIND_FRAC && idled < BK_ADAPT_IDLE_FRAC && a->level > a->floor) {
        a->level = bk_level_down(a->level, a->floor);
        a->downs++;
        return BK_ADAPT_DOWN;
    }
    if (waited < BK_ADAPT_AHEAD_FRAC && idled > BK_ADAPT_IDLE_FRAC && a->level < a->ceiling) {
        a->level = bk_level_up(a->level, a->ceiling);
        a->ups++;
        return BK_ADAPT_UP;
    }
    return BK_ADAPT_NONE;
}

int bk_adapt_frame_level(const bk_adapt *a, int wanted)
{
    int want = wanted ? wanted : a->ceiling;
    if (!a->on || a->level >= a->ceiling)
        return want;
    /* Below the ceiling the CPU is short: scattered frames (which ask for more) follow too. */
    return a->level < want ? a->level : want;
}

void bk_levels_add(bk_level_use *u, unsigned *n, unsigned cap, int level, uint64_t raw,
                   uint64_t stored, double seconds)
{
    unsigned i = 0;
    while (i < *n && u[i].level > level)
        i++;
    if (i == *n || u[i].level != level) {
        if (*n == cap) {
            i = cap - 1;
        } else {
            memmove(&u[i + 1], &u[i], (*n - i) * sizeof(*u));
            memset(&u[i], 0, sizeof(*u));
            u[i].level = level;
            (*n)++;
        }
    }
    u[i].frames++;
    u[i].raw_bytes += raw;
    u[i].stored_bytes += stored;
    u[i].seconds += seconds;
}

void bk_stages_close(bk_stages *st)
{
    if (st->check_seconds > 0) { /* the checks ran on the scanner's check thread */
        double work = st->check_seconds - st->queue_wait_seconds;
        st->page_work_seconds = work > 0 ? work : 0;
        return;
    }
    double rest = st->scan_seconds - st->read_wait_seconds - st->pause_seconds -
                  st->queue_wait_seconds;
    st->page_work_seconds = rest > 0 ? rest : 0;
}
