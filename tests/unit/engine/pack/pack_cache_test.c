/*
 * tests/unit/engine/pack/pack_cache_test.c — the shared pack cache (engine/pack/pack_cache.c):
 * workers reading one small pack at once cost one request between them; a big pack of a
 * local repository is not held (its source reads it all, byte-exact); past its
 * budget the cache stands aside; a missing pack is the source's own error. Requests are
 * counted with repo_requests.
 */
#include "engine/pack/pack.h"
#include "tests/unit/fixtures.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define SMALL "backup/C/pack/000001"
#define BIG "backup/C/pack/000002"
#define SMALL_LEN (600u << 10)
#define BIG_LEN (3u << 20)
#define WORKERS 4
#define READS 50

static char root[256];
static uint8_t small_data[SMALL_LEN], big_data[BIG_LEN];

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (uint8_t)(seed >> 16);
    }
}

static uint64_t ranged(repo *r, const repo_requests *since)
{
    repo_requests now, d;
    repo_requests_get(r, &now);
    d = repo_requests_since(&now, since);
    return repo_requests_total(&d) == d.get_range ? d.get_range : UINT64_MAX;
}

typedef struct worker {
    repo *r;
    pack_cache *c;
    unsigned seed;
    int bad;
} worker;

/* READS scattered ranges of the small pack through a source of its own. */
static void *read_small(void *vw)
{
    worker *w = vw;
    pb_error e = PB_ERROR_INIT;
    pack_source *s = NULL;
    if (pack_source_new(&s, w->r, &e) != 0) {
        w->bad++;
        return NULL;
    }
    pack_source_set_cache(s, w->c);
    for (int i = 0; i < READS; i++) {
        uint64_t off = 16 + (uint64_t)((w->seed + (unsigned)i * 7919u) * 4096u % (SMALL_LEN - 9000));
        const uint8_t *p = NULL;
        if (pack_source_fetch(s, SMALL, off, 8192, &p, &e) != 0 ||
            memcmp(p, small_data + off, 8192) != 0)
            w->bad++;
    }
    pack_source_free(s);
    return NULL;
}

static void test_workers_share(void)
{
    pb_error e = PB_ERROR_INIT;
    repo *r = pbt_repo_open(root);
    pack_cache *c = NULL;
    PBT_CHECK(pack_cache_new(&c, r, &e) == 0);
    repo_requests q0;
    repo_requests_get(r, &q0);
    worker w[WORKERS];
    pthread_t t[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
        w[i] = (worker){r, c, (unsigned)i * 31u + 1u, 0};
        PBT_CHECK(pthread_create(&t[i], NULL, read_small, &w[i]) == 0);
    }
    for (int i = 0; i < WORKERS; i++) {
        pthread_join(t[i], NULL);
        PBT_CHECK(w[i].bad == 0);
    }
    /* one read of the whole pack for all: not one per worker and range */
    PBT_CHECK(ranged(r, &q0) == 1);
    pack_cache_free(c);
    repo_free(r);
}

static void test_big_pack(void)
{
    pb_error e = PB_ERROR_INIT;
    repo *r = pbt_repo_open(root);
    pack_cache *c = NULL;
    pack_source *s = NULL;
    PBT_CHECK(pack_cache_new(&c, r, &e) == 0);
    PBT_CHECK(pack_source_new(&s, r, &e) == 0);
    pack_source_set_cache(s, c);
    repo_requests q0;
    repo_requests_get(r, &q0);
    /* a local repository's large pack: the read that finds its size is dropped, and the
     * cache stands aside for it from then on (no further read, nothing held) */
    uint64_t fetched = 0;
    const uint8_t *p = NULL;
    PBT_CHECK(pack_cache_get(c, BIG, 100, 1000, &p, &fetched) == 0 && p == NULL);
    PBT_CHECK(fetched == PACK_CACHE_PREFIX && pack_cache_held(c) == 0);
    PBT_CHECK(ranged(r, &q0) == 1);
    PBT_CHECK(pack_cache_get(c, BIG, 5000, 100, &p, &fetched) == 0 && p == NULL);
    PBT_CHECK(fetched == PACK_CACHE_PREFIX && ranged(r, &q0) == 1);
    /* the source reads it for itself, byte-exact, within the prefix, across it and past */
    PBT_CHECK(pack_source_fetch(s, BIG, 100, 1000, &p, &e) == 0);
    PBT_CHECK(p && memcmp(p, big_data + 100, 1000) == 0);
    PBT_CHECK(pack_source_fetch(s, BIG, 5000, 70000, &p, &e) == 0);
    PBT_CHECK(p && memcmp(p, big_data + 5000, 70000) == 0);
    PBT_CHECK(pack_source_fetch(s, BIG, PACK_CACHE_PREFIX - 10, 100, &p, &e) == 0);
    PBT_CHECK(p && memcmp(p, big_data + PACK_CACHE_PREFIX - 10, 100) == 0);
    PBT_CHECK(pack_source_fetch(s, BIG, 2u << 20, 4096, &p, &e) == 0);
    PBT_CHECK(p && memcmp(p, big_data + (2u << 20), 4096) == 0);
    PBT_CHECK(pack_cache_held(c) == 0);
    /* the small pack is still held whole */
    PBT_CHECK(pack_cache_get(c, SMALL, 16, 100, &p, &fetched) == 1);
    PBT_CHECK(p && memcmp(p, small_data + 16, 100) == 0);
    PBT_CHECK(pack_cache_held(c) == SMALL_LEN);
    /* a missing pack: the cache stands aside, the source names the error */
    PBT_CHECK(pack_source_fetch(s, "backup/C/pack/000009", 16, 100, &p, &e) == PB_ENOENT);
    PBT_CHECK(strstr(e.msg, "backup/C/pack/000009") != NULL);
    pack_source_free(s);
    pack_cache_free(c);
    repo_free(r);
}

/* Packs of PACK_CACHE_PREFIX bytes or more hold the whole prefix each: once the budget is
 * used up, a new pack is not cached (the cache reads nothing for it). */
static void test_budget(void)
{
    pb_error e = PB_ERROR_INIT;
    repo *r = pbt_repo_open(root);
    size_t fit = PACK_CACHE_BUDGET / PACK_CACHE_PREFIX;
    char key[64];
    for (size_t i = 0; i <= fit; i++) {
        snprintf(key, sizeof(key), "backup/B/pack/%06zu", i + 1);
        PBT_CHECK(repo_put(r, key, big_data, PACK_CACHE_PREFIX, &e) == 0);
    }
    pack_cache *c = NULL;
    PBT_CHECK(pack_cache_new(&c, r, &e) == 0);
    uint64_t fetched = 0;
    const uint8_t *p = NULL;
    for (size_t i = 0; i < fit; i++) {
        snprintf(key, sizeof(key), "backup/B/pack/%06zu", i + 1);
        PBT_CHECK(pack_cache_get(c, key, 16, 100, &p, &fetched) == 1);
        PBT_CHECK(p && memcmp(p, big_data + 16, 100) == 0);
    }
    PBT_CHECK(fetched == (uint64_t)fit * PACK_CACHE_PREFIX);
    snprintf(key, sizeof(key), "backup/B/pack/%06zu", fit + 1);
    PBT_CHECK(pack_cache_get(c, key, 16, 100, &p, &fetched) == 0 && p == NULL);
    PBT_CHECK(fetched == (uint64_t)fit * PACK_CACHE_PREFIX);
    /* what it holds it still serves; NULL is no cache */
    PBT_CHECK(pack_cache_get(c, "backup/B/pack/000001", 200, 10, &p, &fetched) == 1);
    PBT_CHECK(pack_cache_get(NULL, "backup/B/pack/000001", 200, 10, &p, &fetched) == 0);
    pack_cache_free(c);
    pack_cache_free(NULL);
    repo_free(r);
}

int main(void)
{
    if (pbt_tmpdir(root, sizeof(root), "pack-cache-test") != 0)
        return 1;
    fill(small_data, sizeof(small_data), 1);
    fill(big_data, sizeof(big_data), 2);
    repo *r = pbt_repo_open(root);
    pb_error e = PB_ERROR_INIT;
    PBT_CHECK(r && repo_put(r, SMALL, small_data, sizeof(small_data), &e) == 0);
    PBT_CHECK(r && repo_put(r, BIG, big_data, sizeof(big_data), &e) == 0);
    repo_free(r);
    PBT_RUN(test_workers_share);
    PBT_RUN(test_big_pack);
    PBT_RUN(test_budget);
    pbt_rmtree(root);
    return PBT_DONE();
}
