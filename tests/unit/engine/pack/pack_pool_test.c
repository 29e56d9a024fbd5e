/*
 * tests/unit/engine/pack/pack_pool_test.c — one budget shared by several pack sources
 * (engine/pack/pack.h): four "workers" each rebuild a large segment (a 24 MiB pack of
 * 256 KiB frames, every frame needed) through their own source, planning with
 * pack_source_plan. Together their buffers never hold more than their floors and the
 * pool; the first to plan keeps 4 MiB ranges (its requests as without a pool), the
 * others fall back to ranges their floor holds; a source alone gets 4 MiB ranges; four
 * threads at once read every byte right and the pool's peak stays within its size.
 * Without the pool the same four sources held their four budgets at once.
 */
#include "engine/pack/pack.h"
#include "tests/unit/fixtures.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { WORKERS = 4, FRAMES = 96 };
#define FRAME (256u << 10)
#define OBJ ((size_t)PACK_HEADER_LEN + (size_t)FRAMES * FRAME)
#define BUDGET ((uint64_t)PACK_SOURCE_MIN_BUDGET + (1u << 20)) /* a restore worker's */
#define POOL (2 * (BUDGET - PACK_SOURCE_FLOOR))                 /* restore's default */

static char root[256];
static char keys[WORKERS][256];
static pack_loc frames[FRAMES];

static uint8_t byte_at(int k, uint64_t o)
{
    return (uint8_t)(o * 31u + (uint64_t)k * 7u + (o >> 12));
}

static void make_packs(repo *r)
{
    pb_error e = PB_ERROR_INIT;
    uint8_t *obj = malloc(OBJ);
    for (int k = 0; obj && k < WORKERS; k++) {
        for (size_t b = 0; b < OBJ; b++)
            obj[b] = byte_at(k, b);
        snprintf(keys[k], sizeof(keys[k]), "backup/P/pack/%06d", k + 1);
        PBT_CHECK(repo_put(r, keys[k], obj, OBJ, &e) == 0);
    }
    free(obj);
    for (int i = 0; i < FRAMES; i++)
        frames[i] = (pack_loc){1, PACK_HEADER_LEN + (uint64_t)i * FRAME, FRAME, FRAME / 2};
}

/* Range rg of worker k's plan: fetched, every byte checked. */
static bool fetch_range(pack_source *s, int k, const pack_range *rg)
{
    pb_error e = PB_ERROR_INIT;
    const uint8_t *p = NULL;
    if (pack_source_fetch(s, keys[k], rg->start, (size_t)rg->len, &p, &e) != 0 || !p)
        return false;
    size_t bad = 0;
    for (uint64_t b = 0; b < rg->len; b += 997)
        bad += p[b] != byte_at(k, rg->start + b);
    return bad == 0 && p[rg->len - 1] == byte_at(k, rg->start + rg->len - 1);
}

static uint64_t held_by_all(pack_source *const *s)
{
    uint64_t sum = 0;
    for (int k = 0; k < WORKERS; k++)
        sum += pack_source_held(s[k]);
    return sum;
}

/* The four plan one after another, then read their ranges in lock step (every worker
 * in the middle of its segment at once, as at pgbench scale 1000). pool NULL: each
 * source has only its own budget (the code before the pool). *most: the largest sum
 * of what the four held after any fetch. */
static void lock_step(pack_pool *pool, uint64_t *most, size_t nr[WORKERS])
{
    pb_error e = PB_ERROR_INIT;
    repo *r = pbt_repo_open(root);
    pack_source *s[WORKERS] = {0};
    static pack_range rg[WORKERS][FRAMES];
    *most = 0;
    for (int k = 0; k < WORKERS; k++) {
        PBT_CHECK(pack_source_new(&s[k], r, &e) == 0);
        PBT_CHECK(pack_source_set_budget(s[k], BUDGET, &e) == 0);
        if (pool)
            pack_source_set_pool(s[k], pool);
        PBT_CHECK(pack_source_plan(s[k], keys[k], frames, FRAMES, rg[k], &nr[k], &e) == 0);
    }
    bool ok = true;
    for (size_t i = 0; i < FRAMES; i++)
        for (int k = 0; k < WORKERS; k++) {
            if (i >= nr[k])
                continue;
            ok = ok && fetch_range(s[k], k, &rg[k][i]);
            uint64_t sum = held_by_all(s);
            if (sum > *most)
                *most = sum;
            if (pool)
                ok = ok && pack_pool_taken(pool) <= POOL;
        }
    PBT_CHECK(ok);
    for (int k = 0; k < WORKERS; k++)
        pack_source_free(s[k]);
    if (pool)
        PBT_CHECK(pack_pool_taken(pool) == 0); /* everything given back */
    repo_free(r);
}

static void test_shared_bound(void)
{
    pb_error e = PB_ERROR_INIT;
    pack_pool *pool = NULL;
    PBT_CHECK(pack_pool_new(&pool, POOL, &e) == 0);
    uint64_t most = 0, bound = WORKERS * PACK_SOURCE_FLOOR + POOL;
    size_t nr[WORKERS] = {0};
    lock_step(pool, &most, nr);
    PBT_CHECK(most > 0 && most <= bound);
    if (most > bound)
        fprintf(stderr, "the four held %llu bytes, over %llu\n", (unsigned long long)most,
                (unsigned long long)bound);
    /* the first keeps 4 MiB ranges; the pool has nothing left for the last */
    size_t big = (FRAMES * FRAME + PACK_PLAN_MAX_RANGE - 1) / PACK_PLAN_MAX_RANGE;
    PBT_CHECK(nr[0] == big);
    PBT_CHECK(nr[WORKERS - 1] == FRAMES * FRAME / (PACK_SOURCE_FLOOR / FRAME * FRAME));
    PBT_CHECK(pack_pool_peak(pool) <= POOL);
    pack_pool_free(pool);
    uint64_t shared = most;
    /* without a pool each source holds its own budget's worth at once */
    lock_step(NULL, &most, nr);
    PBT_CHECK(most > bound);
    printf("four sources held at most %.1f MiB with the pool (bound %.1f), %.1f without\n",
           shared / 1048576.0, bound / 1048576.0, most / 1048576.0);
    PBT_CHECK(nr[WORKERS - 1] == big);
}

/* A source alone with a pool plans and reads as one without: 4 MiB ranges, one request
 * each, and then gives everything back. */
static void test_alone(void)
{
    pb_error e = PB_ERROR_INIT;
    repo *r = pbt_repo_open(root);
    pack_pool *pool = NULL;
    pack_source *s = NULL;
    PBT_CHECK(pack_pool_new(&pool, POOL, &e) == 0 && pack_source_new(&s, r, &e) == 0);
    PBT_CHECK(pack_source_set_budget(s, BUDGET, &e) == 0);
    pack_source_set_pool(s, pool);
    static pack_range rg[FRAMES];
    size_t n = 0;
    PBT_CHECK(pack_source_plan(s, keys[0], frames, FRAMES, rg, &n, &e) == 0);
    PBT_CHECK(n == (FRAMES * FRAME + PACK_PLAN_MAX_RANGE - 1) / PACK_PLAN_MAX_RANGE);
    repo_requests q0, q1;
    repo_requests_get(r, &q0);
    bool ok = true;
    for (size_t i = 0; i < n; i++)
        ok = ok && fetch_range(s, 0, &rg[i]);
    repo_requests_get(r, &q1);
    repo_requests d = repo_requests_since(&q1, &q0);
    PBT_CHECK(ok && repo_requests_total(&d) == n);
    PBT_CHECK(pack_source_held(s) <= BUDGET);
    pack_source_free(s);
    PBT_CHECK(pack_pool_taken(pool) == 0 && pack_pool_peak(pool) <= BUDGET - PACK_SOURCE_FLOOR);
    pack_pool_free(pool);
    repo_free(r);
}

typedef struct worker_arg {
    repo *r;
    pack_pool *pool;
    int k;
    bool ok;
} worker_arg;

static void *worker(void *va)
{
    worker_arg *a = va;
    pb_error e = PB_ERROR_INIT;
    pack_source *s = NULL;
    pack_range *rg = malloc(sizeof(*rg) * FRAMES);
    a->ok = rg && pack_source_new(&s, a->r, &e) == 0 &&
            pack_source_set_budget(s, BUDGET, &e) == 0;
    if (a->ok)
        pack_source_set_pool(s, a->pool);
    for (int round = 0; a->ok && round < 3; round++) {
        size_t n = 0;
        int k = (a->k + round) % WORKERS;
        a->ok = pack_source_plan(s, keys[k], frames, FRAMES, rg, &n, &e) == 0;
        for (size_t i = 0; a->ok && i < n; i++)
            a->ok = fetch_range(s, k, &rg[i]) && pack_source_held(s) <= BUDGET;
    }
    pack_source_free(s);
    free(rg);
    return NULL;
}

static void test_threads(void)
{
    pb_error e = PB_ERROR_INIT;
    repo *r = pbt_repo_open(root);
    pack_pool *pool = NULL;
    PBT_CHECK(pack_pool_new(&pool, POOL, &e) == 0);
    pthread_t t[WORKERS];
    worker_arg a[WORKERS];
    for (int k = 0; k < WORKERS; k++) {
        a[k] = (worker_arg){r, pool, k, false};
        PBT_CHECK(pthread_create(&t[k], NULL, worker, &a[k]) == 0);
    }
    for (int k = 0; k < WORKERS; k++) {
        pthread_join(t[k], NULL);
        PBT_CHECK(a[k].ok);
    }
    PBT_CHECK(pack_pool_peak(pool) <= POOL && pack_pool_taken(pool) == 0);
    pack_pool_free(pool);
    repo_free(r);
}

int main(void)
{
    if (pbt_tmpdir(root, sizeof(root), "pack-pool-test") != 0)
        return 1;
    repo *r = pbt_repo_open(root);
    make_packs(r);
    repo_free(r);
    PBT_RUN(test_shared_bound);
    PBT_RUN(test_alone);
    PBT_RUN(test_threads);
    pbt_rmtree(root);
    return PBT_DONE();
}
