/*
 * engine/pack/pack_read.c — the pack-reading source: read plans (which frames one range read
 * covers) and the buffer that serves frames from those reads, with sequential
 * readahead. Decoding a frame is pack.c's (pack_reader_decode); this file only decides
 * what to read and keeps what was read. The limits are explained in engine/pack.h.
 */
#include "engine/pack/pack.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define READAHEAD_FIRST (256u << 10)
#define SEQUENTIAL_GAP 65536u /* a read this close after the last one is sequential */

static bool same_frame(const pack_loc *a, const pack_loc *b)
{
    return a->offset == b->offset && a->clen == b->clen;
}

/* pack_plan with ranges of at most max bytes (one frame longer than that is its own). */
static int plan_with(const char *key, const pack_loc *frames, size_t n, uint64_t max,
                     pack_range *ranges, size_t *nranges, pb_error *err)
{
    *nranges = 0;
    size_t nr = 0;
    for (size_t i = 0; i < n; i++) {
        const pack_loc *f = &frames[i];
        int rc = pack_loc_check(key, f->offset, f->clen, f->rlen, err);
        if (rc)
            return rc;
        uint64_t end = f->offset + f->clen; /* bounded by pack_loc_check */
        if (i > 0 && !same_frame(f, &frames[i - 1])) {
            const pack_loc *p = &frames[i - 1];
            if (f->offset < p->offset + p->clen)
                return pb_fail(err, PB_ECORRUPT,
                               "%s frame at offset %llu (stored %u) overlaps or precedes the "
                               "frame at offset %llu (stored %u)",
                               key, (unsigned long long)f->offset, f->clen,
                               (unsigned long long)p->offset, p->clen);
        }
        pack_range *cur = nr ? &ranges[nr - 1] : NULL;
        uint64_t cur_end = cur ? cur->start + cur->len : 0;
        bool joins = cur && (same_frame(f, &frames[i - 1]) ||
                             (f->offset - cur_end <= PACK_PLAN_GAP &&
                              end - cur->start <= max));
        if (joins) {
            if (end > cur_end)
                cur->len = end - cur->start;
            cur->count++;
            continue;
        }
        ranges[nr++] = (pack_range){f->offset, f->clen, i, 1};
    }
    *nranges = nr;
    return 0;
}

int pack_plan(const char *key, const pack_loc *frames, size_t n, pack_range *ranges,
              size_t *nranges, pb_error *err)
{
    return plan_with(key, frames, n, PACK_PLAN_MAX_RANGE, ranges, nranges, err);
}

struct pack_pool {
    pthread_mutex_t mu;
    uint64_t size, taken, peak; /* under mu */
};

int pack_pool_new(pack_pool **out, uint64_t bytes, pb_error *err)
{
    pack_pool *p = *out = calloc(1, sizeof(*p));
    if (!p)
        return pb_fail(err, PB_ENOMEM, "out of memory creating a read pool");
    p->size = bytes;
    pthread_mutex_init(&p->mu, NULL);
    return 0;
}

void pack_pool_free(pack_pool *p)
{
    if (!p)
        return;
    pthread_mutex_destroy(&p->mu);
    free(p);
}

static uint64_t pool_read(pack_pool *p, bool peak)
{
    pthread_mutex_lock(&p->mu);
    uint64_t v = peak ? p->peak : p->taken;
    pthread_mutex_unlock(&p->mu);
    return v;
}

uint64_t pack_pool_taken(pack_pool *p)
{
    return pool_read(p, false);
}

uint64_t pack_pool_peak(pack_pool *p)
{
    return pool_read(p, true);
}

/* Up to want bytes of p, never waiting: what is free (force: all of want, past the pool's
 * size, for a caller that did not plan through its source). */
static uint64_t pool_take(pack_pool *p, uint64_t want, bool force)
{
    pthread_mutex_lock(&p->mu);
    uint64_t room = p->size > p->taken ? p->size - p->taken : 0;
    uint64_t got = force || want < room ? want : room;
    p->taken += got;
    if (p->taken > p->peak)
        p->peak = p->taken;
    pthread_mutex_unlock(&p->mu);
    return got;
}

static void pool_give(pack_pool *p, uint64_t bytes)
{
    pthread_mutex_lock(&p->mu);
    p->taken -= bytes;
    pthread_mutex_unlock(&p->mu);
}

/* One buffer of a source: a contiguous part of one pack. */
typedef struct slot {
    uint8_t *buf;
    size_t cap;
    bool used;
    char key[256];
    uint64_t start, len;
    uint64_t obj_size; /* of key, once readahead needed it; 0 = unknown */
    size_t readahead;
    uint64_t last_use;
} slot;

struct pack_source {
    repo *r;
    pack_cache *cache; /* shared by the workers of a restore, or NULL */
    slot slots[PACK_SOURCE_SLOTS];
    uint64_t clock;
    uint64_t fetched;
    uint64_t budget, held; /* bytes its buffers may hold, and hold (engine/pack/pack.h) */
    pack_pool *pool;       /* shared budget beyond PACK_SOURCE_FLOOR, or NULL */
    uint64_t granted;      /* bytes drawn from pool: held <= PACK_SOURCE_FLOOR + granted */
    uint64_t promise;      /* room kept for the current plan (pack_source_plan), or 0 */
    char plan_key[256];
    uint64_t plan_end;     /* where the current plan's last range ends */
};

/* What s's buffers may hold now. */
static uint64_t limit(const pack_source *s)
{
    return s->pool ? PACK_SOURCE_FLOOR + s->granted : s->budget;
}

/* Draw from the pool until s may hold total bytes (at most its budget), as far as the
 * pool has room. */
static void ask(pack_source *s, uint64_t total)
{
    if (total > s->budget)
        total = s->budget;
    if (s->pool && total > limit(s))
        s->granted += pool_take(s->pool, total - limit(s), false);
}

/* Give back to the pool what s neither holds nor keeps for its current plan. */
static void trim(pack_source *s)
{
    if (!s->pool)
        return;
    uint64_t keep = s->held > s->promise ? s->held : s->promise;
    if (keep > s->budget)
        keep = s->budget;
    uint64_t need = keep > PACK_SOURCE_FLOOR ? keep - PACK_SOURCE_FLOOR : 0;
    if (s->granted > need) {
        pool_give(s->pool, s->granted - need);
        s->granted = need;
    }
}

int pack_source_new(pack_source **out, repo *r, pb_error *err)
{
    *out = calloc(1, sizeof(**out));
    if (!*out)
        return pb_fail(err, PB_ENOMEM, "out of memory creating a pack source");
    (*out)->r = r;
    (*out)->budget = PACK_SOURCE_BUDGET;
    return 0;
}

void pack_source_free(pack_source *s)
{
    if (!s)
        return;
    for (int i = 0; i < PACK_SOURCE_SLOTS; i++)
        free(s->slots[i].buf);
    if (s->pool)
        pool_give(s->pool, s->granted);
    free(s);
}

uint64_t pack_source_fetched(const pack_source *s)
{
    return s->fetched;
}

void pack_source_set_cache(pack_source *s, pack_cache *c)
{
    s->cache = c;
}

void pack_source_set_pool(pack_source *s, pack_pool *p)
{
    s->pool = p;
}

static void drop(pack_source *s, slot *sl)
{
    free(sl->buf);
    s->held -= sl->cap;
    sl->buf = NULL;
    sl->cap = 0;
    sl->used = false;
}

int pack_source_set_budget(pack_source *s, uint64_t bytes, pb_error *err)
{
    if (bytes < PACK_SOURCE_MIN_BUDGET)
        return pb_fail(err, PB_EINVAL, "a pack source needs at least %llu bytes, not %llu",
                       (unsigned long long)PACK_SOURCE_MIN_BUDGET, (unsigned long long)bytes);
    for (int i = 0; i < PACK_SOURCE_SLOTS; i++)
        drop(s, &s->slots[i]);
    s->budget = bytes;
    trim(s);
    return 0;
}

uint64_t pack_source_held(const pack_source *s)
{
    return s->held;
}

/* Room for *want bytes in sl within what s may hold (its budget; with a pool, its floor
 * and what it can draw): sl's buffer is reused when it is large enough, else freed and
 * allocated anew after the least recently used other buffers are freed until it fits
 * (what an earlier fetch returned is valid only until this call: engine/pack/pack.h). When
 * the pool cannot give more, less is read ahead (*want shrinks, never below the len
 * bytes asked for; a range over the floor was kept for by pack_source_plan, and a caller
 * that planned without its source draws past the pool's size rather than fail). */
static int grow(pack_source *s, slot *sl, size_t len, size_t *want, pb_error *err)
{
    if (*want <= sl->cap)
        return 0;
    drop(s, sl);
    ask(s, s->held + *want);
    while (s->held + *want > limit(s)) {
        slot *lru = NULL;
        for (int i = 0; i < PACK_SOURCE_SLOTS; i++) {
            slot *o = &s->slots[i];
            if (o != sl && o->cap && (!lru || o->last_use < lru->last_use))
                lru = o;
        }
        if (!lru)
            break;
        drop(s, lru);
    }
    if (s->pool && s->held + *want > limit(s)) {
        uint64_t room = limit(s) - s->held;
        *want = room > len ? (size_t)room : len;
        if (s->held + *want > limit(s))
            s->granted += pool_take(s->pool, s->held + *want - limit(s), true);
    }
    size_t need = *want;
    sl->buf = malloc(need);
    if (!sl->buf)
        return pb_fail(err, PB_ENOMEM, "out of memory for a %zu-byte read", need);
    sl->cap = need;
    s->held += need;
    return 0;
}

static bool sequential(const slot *sl, const char *key, uint64_t start)
{
    uint64_t end = sl->start + sl->len;
    return sl->used && strcmp(sl->key, key) == 0 && start >= end &&
           start - end <= SEQUENTIAL_GAP;
}

/* The slot that holds [start, start + len) of key (*hit), else the one to read into:
 * the slot this read continues (it keeps its readahead), else the least recently used. */
static slot *pick(pack_source *s, const char *key, uint64_t start, size_t len, bool *hit)
{
    slot *lru = &s->slots[0], *seq = NULL;
    *hit = false;
    for (int i = 0; i < PACK_SOURCE_SLOTS; i++) {
        slot *sl = &s->slots[i];
        if (sl->used && strcmp(sl->key, key) == 0 && start >= sl->start &&
            start + len <= sl->start + sl->len) {
            *hit = true;
            return sl;
        }
        if (!seq && sequential(sl, key, start))
            seq = sl;
        if (!sl->used || (lru->used && sl->last_use < lru->last_use))
            lru = sl;
    }
    return seq ? seq : lru;
}

/* How much to read from start when len is asked: more when the reads run sequentially
 * through the pack (doubling up to PACK_READAHEAD_MAX, never past its end once known).
 * Random access (an incremental chain) never reads ahead. */
static size_t plan_read(const pack_source *s, slot *sl, const char *key, uint64_t start,
                        size_t len)
{
    bool seq = sequential(sl, key, start);
    size_t ahead = sl->readahead ? sl->readahead * 2 : READAHEAD_FIRST;
    uint64_t share = s->budget / PACK_SOURCE_SLOTS; /* read-ahead per slot, in budget */
    size_t most = share < PACK_READAHEAD_MAX ? (size_t)share : PACK_READAHEAD_MAX;
    if (len + (uint64_t)most > s->budget)
        most = (size_t)(s->budget - len);
    sl->readahead = seq ? (ahead > most ? most : ahead) : 0;
    if (!seq)
        sl->obj_size = 0;
    if (!sl->readahead)
        return len;
    uint64_t room = sl->obj_size > start ? sl->obj_size - start : UINT64_MAX;
    if (sl->obj_size == 0 || (uint64_t)len + sl->readahead < room)
        return len + sl->readahead;
    return room > len ? (size_t)room : len;
}

/* Read [start, start + want) into sl, of which len bytes are needed. A read ahead may
 * end early at the pack's end, which the same request tells (no stat first: one request
 * where there were two on object storage). */
static int read_into(pack_source *s, slot *sl, const char *key, uint64_t start, size_t len,
                     size_t *want, pb_error *err)
{
    int rc = grow(s, sl, len, want, err);
    if (rc || *want == len)
        return rc ? rc : repo_get_range(s->r, key, start, len, sl->buf, err);
    size_t got = 0;
    uint64_t size = 0;
    rc = repo_get_range_upto(s->r, key, start, *want, sl->buf, &got, &size, err);
    if (rc == 0 && got < len)
        rc = pb_fail(err, PB_ECORRUPT, "%s is too short: wanted %zu bytes at offset %llu, "
                     "the object holds %llu", key, len, (unsigned long long)start,
                     (unsigned long long)size);
    if (rc == 0) {
        sl->obj_size = size;
        *want = got;
    }
    return rc;
}

static int fetch(pack_source *s, const char *key, uint64_t start, size_t len,
                 const uint8_t **out, pb_error *err)
{
    bool hit = false;
    slot *sl = pick(s, key, start, len, &hit);
    sl->last_use = ++s->clock;
    if (hit) {
        *out = sl->buf + (start - sl->start);
        return 0;
    }
    if (pack_cache_get(s->cache, key, start, len, out, &s->fetched))
        return 0;
    size_t want = plan_read(s, sl, key, start, len);
    sl->used = false;
    int rc = read_into(s, sl, key, start, len, &want, err);
    if (rc)
        return rc;
    sl->used = true;
    memcpy(sl->key, key, strlen(key) + 1);
    sl->start = start;
    sl->len = want;
    s->fetched += want;
    *out = sl->buf;
    return 0;
}

int pack_source_fetch(pack_source *s, const char *key, uint64_t start, size_t len,
                      const uint8_t **out, pb_error *err)
{
    *out = NULL;
    if (strlen(key) >= sizeof(s->slots[0].key))
        return pb_fail(err, PB_EINVAL, "pack key %s is too long", key);
    if (len > (size_t)PACK_PLAN_MAX_RANGE + PACK_MAX_FRAME_STORED ||
        start > (uint64_t)INT64_MAX - len)
        return pb_fail(err, PB_ECORRUPT, "%s: impossible read of %zu bytes at offset %llu", key,
                       len, (unsigned long long)start);
    /* Another pack, or past the plan's last range: the room kept for the plan goes back. */
    if (s->promise && (strcmp(key, s->plan_key) != 0 || start >= s->plan_end))
        s->promise = 0;
    int rc = fetch(s, key, start, len, out, err);
    if (s->promise && start + len >= s->plan_end)
        s->promise = 0; /* the plan's last range is read */
    trim(s);
    return rc;
}

int pack_source_plan(pack_source *s, const char *key, const pack_loc *frames, size_t n,
                     pack_range *ranges, size_t *nranges, pb_error *err)
{
    uint64_t max = PACK_PLAN_MAX_RANGE;
    if (s->pool) {
        /* Room for the largest fetch a plan makes, as far as the pool has it: a range is
         * at most max long, or one frame, which the floor holds. */
        s->promise = 0;
        ask(s, (uint64_t)PACK_PLAN_MAX_RANGE + PACK_MAX_FRAME_STORED);
        if (limit(s) < max)
            max = limit(s);
    }
    int rc = plan_with(key, frames, n, max, ranges, nranges, err);
    if (s->pool && rc == 0 && *nranges && strlen(key) < sizeof(s->plan_key)) {
        const pack_range *last = &ranges[*nranges - 1];
        s->promise = limit(s);
        memcpy(s->plan_key, key, strlen(key) + 1);
        s->plan_end = last->start + last->len;
    }
    trim(s);
    return rc;
}
