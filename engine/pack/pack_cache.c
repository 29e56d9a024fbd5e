/*
 * engine/pack/pack_cache.c — the first bytes of packs, read once and shared by the workers
 * of one restore (engine/pack/pack.h, "the shared pack cache").
 *
 * Why: a restore's workers each take a batch of files, and each file is read from every
 * backup of the chain that changed it, pack by pack. An incremental's packs are small
 * (scattered changed pages: ~0.6 MiB each in the chain benchmark) and each of the few
 * files changed in it takes a different worker, so each pack was fetched by several
 * ranged GETs, one per file and worker, on object storage a round trip each. Here the
 * first worker to need a small pack reads it whole in one request and every worker is
 * served from memory; the others wait for that read instead of making their own.
 *
 * Entries are never dropped before the cache is freed, so what pack_cache_get hands out
 * stays valid; a budget bounds what the cache holds (PACK_CACHE_BUDGET), and once it is
 * used up the readers read for themselves as before.
 *
 * On a local repository a pack larger than the prefix (a full's) is not held: the read
 * that finds its size (the same request) is dropped, its readers read for themselves, and
 * the cache stands aside for that pack from then on. Its prefix saved next to nothing
 * there, and the prefixes of a large database's many full packs filled the budget, so a
 * restore at pgbench scale 1000 held 5 MiB more than at scale 100 (docs/BENCHMARKS.md,
 * "Restore workers share one read pool", 2026-12-02). That costs one local read of the
 * prefix per large pack; on object storage, where a request is what costs, the prefix is
 * kept as before.
 */
#include "engine/pack/pack.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ENTRY_LARGE: a pack of a local repository larger than the prefix, not held (see above). */
typedef enum { ENTRY_LOADING, ENTRY_READY, ENTRY_FAILED, ENTRY_LARGE } entry_state;

typedef struct entry {
    char key[256];
    uint8_t *data; /* [0, len) of the pack */
    size_t len;
    entry_state state;
} entry;

struct pack_cache {
    repo *r;
    pthread_mutex_t mu;
    pthread_cond_t loaded;
    entry *items;
    size_t n, cap;
    uint64_t budget, held; /* bytes allowed, bytes taken (LOADING entries reserve theirs) */
};

int pack_cache_new(pack_cache **out, repo *r, pb_error *err)
{
    pack_cache *c = *out = calloc(1, sizeof(*c));
    if (!c)
        return pb_fail(err, PB_ENOMEM, "out of memory creating a pack cache");
    c->r = r;
    c->budget = PACK_CACHE_BUDGET;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->loaded, NULL);
    return 0;
}

void pack_cache_set_budget(pack_cache *c, uint64_t bytes)
{
    pthread_mutex_lock(&c->mu);
    c->budget = bytes;
    pthread_mutex_unlock(&c->mu);
}

void pack_cache_free(pack_cache *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n; i++)
        free(c->items[i].data);
    free(c->items);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->loaded);
    free(c);
}

uint64_t pack_cache_held(pack_cache *c)
{
    pthread_mutex_lock(&c->mu);
    uint64_t held = c->held;
    pthread_mutex_unlock(&c->mu);
    return held;
}

static entry *find(pack_cache *c, const char *key)
{
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->items[i].key, key) == 0)
            return &c->items[i];
    return NULL;
}

/* Read the first PACK_CACHE_PREFIX bytes of key (fewer when the pack is smaller) into
 * entry i, without the lock; a failure leaves the entry FAILED (the caller's own read
 * then reports the error with its context). */
static void load(pack_cache *c, size_t i, const char *key, uint64_t *fetched)
{
    uint8_t *data = malloc(PACK_CACHE_PREFIX);
    size_t got = 0;
    uint64_t size = 0;
    pb_error ignored = PB_ERROR_INIT;
    int rc = data ? repo_get_range_upto(c->r, key, 0, PACK_CACHE_PREFIX, data, &got, &size,
                                        &ignored)
                  : PB_ENOMEM;
    uint8_t *shrunk = rc == 0 && got < PACK_CACHE_PREFIX ? realloc(data, got ? got : 1) : NULL;
    if (shrunk)
        data = shrunk;
    if (rc == 0)
        *fetched += got;
    pthread_mutex_lock(&c->mu);
    entry *e = &c->items[i];
    c->held -= PACK_CACHE_PREFIX;
    if (rc == 0 && size > PACK_CACHE_PREFIX && repo_is_local(c->r)) {
        free(data); /* a local large pack: see the head comment */
        e->state = ENTRY_LARGE;
    } else if (rc == 0) {
        e->data = data;
        e->len = got;
        c->held += got;
        e->state = ENTRY_READY;
    } else {
        free(data);
        e->state = ENTRY_FAILED;
    }
    pthread_cond_broadcast(&c->loaded);
    pthread_mutex_unlock(&c->mu);
}

int pack_cache_get(pack_cache *c, const char *key, uint64_t start, size_t len,
                   const uint8_t **out, uint64_t *fetched)
{
    *out = NULL;
    if (!c || strlen(key) >= sizeof(c->items[0].key) || start >= PACK_CACHE_PREFIX ||
        len > PACK_CACHE_PREFIX - start)
        return 0;
    pthread_mutex_lock(&c->mu);
    entry *e = find(c, key);
    if (!e && c->held + PACK_CACHE_PREFIX <= c->budget && c->n < PACK_CACHE_ENTRIES &&
        !PB_GROW(c->items, &c->cap, c->n + 1)) {
        size_t i = c->n++;
        memset(&c->items[i], 0, sizeof(c->items[i]));
        memcpy(c->items[i].key, key, strlen(key) + 1);
        c->items[i].state = ENTRY_LOADING;
        c->held += PACK_CACHE_PREFIX;
        pthread_mutex_unlock(&c->mu);
        load(c, i, key, fetched);
        pthread_mutex_lock(&c->mu);
        e = &c->items[i];
    }
    while (e && e->state == ENTRY_LOADING) {
        size_t i = (size_t)(e - c->items);
        pthread_cond_wait(&c->loaded, &c->mu);
        e = &c->items[i]; /* the array may have moved */
    }
    if (e && e->state == ENTRY_READY && start + len <= e->len)
        *out = e->data + start;
    pthread_mutex_unlock(&c->mu);
    return *out != NULL;
}
