/*
 * engine/pack_read.c — the pack-reading source: read plans (which frames one range read
 * covers) and the buffer that serves frames from those reads, with sequential
 * readahead. Decoding a frame is pack.c's (pack_reader_decode); this file only decides
 * what to read and keeps what was read. The limits are explained in engine/pack.h.
 */
#include "engine/pack.h"

#include <stdlib.h>
#include <string.h>

#define READAHEAD_FIRST (256u << 10)
#define SEQUENTIAL_GAP 65536u /* a read this close after the last one is sequential */

static bool same_frame(const pack_loc *a, const pack_loc *b)
{
    return a->offset == b->offset && a->clen == b->clen;
}

int pack_plan(const char *key, const pack_loc *frames, size_t n, pack_range *ranges,
              size_t *nranges, pb_error *err)
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
                              end - cur->start <= PACK_PLAN_MAX_RANGE));
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
    uint64_t budget, held; /* bytes its buffers may hold, and hold (engine/pack.h) */
};

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
    return 0;
}

uint64_t pack_source_held(const pack_source *s)
{
    return s->held;
}

/* Room for need bytes in sl within the budget: sl's buffer is reused when it is large
 * enough, else freed and allocated anew after the least recently used other buffers
 * are freed until it fits (what an earlier fetch returned is valid only until this
 * call: engine/pack.h). need <= budget (plan_read). */
static int grow(pack_source *s, slot *sl, size_t need, pb_error *err)
{
    if (need <= sl->cap)
        return 0;
    drop(s, sl);
    while (s->held + need > s->budget) {
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
    int rc = grow(s, sl, *want, err);
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
