/*
 * engine/storage/crypt.c — the cryptography of encrypted repositories (layout in
 * docs/FORMAT.md, "Encrypted repositories"): key derivation, objects sealed in 16 KiB
 * chunks with XChaCha20-Poly1305, range opening, and the header cache of range reads.
 * The only file that includes <sodium.h>; no I/O here (crypt_io.c does it).
 *
 * Chunks rather than one AEAD per object so that a range read (one pack frame) fetches
 * and authenticates only the chunks it covers; the associated data binds each chunk to
 * its object, its position and whether it is the last, so chunks cannot be moved,
 * dropped or appended without failing.
 */
#include "engine/storage/crypt_internal.h"

#include <inttypes.h>
#include <pthread.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#define KDF_CONTEXT "PBREPO01"
#define CACHE_SLOTS 32u

_Static_assert(CRYPT_TAG == crypto_aead_xchacha20poly1305_ietf_ABYTES, "tag size");
_Static_assert(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES == 24, "nonce size");

typedef struct crypt_key {
    uint8_t data_key[crypto_aead_xchacha20poly1305_ietf_KEYBYTES];
    uint64_t id;
} crypt_key;

typedef struct cache_slot {
    char *name;
    uint8_t hdr[CRYPT_HEADER];
    uint64_t stored;
} cache_slot;

struct repo_crypt {
    crypt_key keys[REPO_MAX_KEYS];
    size_t n;
    pthread_mutex_t lock; /* the cache */
    cache_slot cache[CACHE_SLOTS];
    unsigned next_slot;
    pthread_mutex_t keycheck_lock;
    bool keycheck_pending;
};

int crypt_new(repo_crypt **out, const repo_key *keys, size_t n, pb_error *err)
{
    *out = NULL;
    if (n == 0 || n > REPO_MAX_KEYS)
        return pb_fail(err, PB_EINVAL, "between 1 and %d encryption keys, not %zu",
                       REPO_MAX_KEYS, n);
    if (sodium_init() < 0)
        return pb_fail(err, PB_EIO, "libsodium cannot initialise");
    repo_crypt *c = calloc(1, sizeof(*c));
    if (!c)
        return pb_fail(err, PB_ENOMEM, "out of memory for the encryption keys");
    pthread_mutex_init(&c->lock, NULL);
    pthread_mutex_init(&c->keycheck_lock, NULL);
    for (size_t i = 0; i < n; i++) {
        if (keys[i].len < CRYPT_MIN_KEY) {
            crypt_free(c);
            return pb_fail(err, PB_EINVAL, "encryption key %zu has %zu bytes: at least %u "
                           "random bytes are needed", i + 1, keys[i].len, CRYPT_MIN_KEY);
        }
        /* The material itself never keys the cipher: it is hashed into a master key,
         * from which the data key and the (public) key id are derived apart. */
        uint8_t master[crypto_kdf_KEYBYTES], idkey[16];
        crypto_generichash(master, sizeof(master), keys[i].data, keys[i].len, NULL, 0);
        crypto_kdf_derive_from_key(c->keys[i].data_key, sizeof(c->keys[i].data_key), 1,
                                   KDF_CONTEXT, master);
        crypto_kdf_derive_from_key(idkey, sizeof(idkey), 2, KDF_CONTEXT, master);
        c->keys[i].id = pb_get_u64(idkey);
        sodium_memzero(master, sizeof(master));
    }
    c->n = n;
    *out = c;
    return 0;
}

void crypt_free(repo_crypt *c)
{
    if (!c)
        return;
    for (unsigned i = 0; i < CACHE_SLOTS; i++)
        free(c->cache[i].name);
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->keycheck_lock);
    sodium_memzero(c->keys, sizeof(c->keys));
    free(c);
}

size_t crypt_nkeys(const repo_crypt *c)
{
    return c->n;
}

uint64_t crypt_key_id(const repo_crypt *c, size_t i)
{
    return c->keys[i].id;
}

static uint64_t chunks_of(uint64_t plain)
{
    return plain == 0 ? 1 : (plain + CRYPT_CHUNK - 1) / CRYPT_CHUNK;
}

uint64_t crypt_stored_size(uint64_t plain)
{
    return CRYPT_HEADER + plain + chunks_of(plain) * CRYPT_TAG;
}

int crypt_plain_size(uint64_t stored, uint64_t *plain)
{
    *plain = 0;
    if (stored < CRYPT_HEADER + CRYPT_TAG)
        return PB_ECORRUPT;
    uint64_t body = stored - CRYPT_HEADER;
    uint64_t n = (body + CRYPT_CHUNK + CRYPT_TAG - 1) / (CRYPT_CHUNK + CRYPT_TAG);
    uint64_t p = body - n * CRYPT_TAG;
    if (chunks_of(p) != n)
        return PB_ECORRUPT;
    *plain = p;
    return 0;
}

/* Associated data of chunk i: header, u64 i, the last-chunk byte, the object's name. */
static int chunk_ad(uint8_t **ad, size_t *ad_len, const uint8_t *hdr, uint64_t i, bool last,
                    const char *name, uint8_t *stack, size_t stack_cap)
{
    size_t nlen = strlen(name), need = CRYPT_HEADER + 9 + nlen;
    uint8_t *p = need <= stack_cap ? stack : malloc(need);
    if (!p)
        return PB_ENOMEM;
    memcpy(p, hdr, CRYPT_HEADER);
    pb_put_u64(p + CRYPT_HEADER, i);
    p[CRYPT_HEADER + 8] = last ? 1 : 0;
    memcpy(p + CRYPT_HEADER + 9, name, nlen);
    *ad = p;
    *ad_len = need;
    return 0;
}

static void chunk_nonce(uint8_t *nonce, const uint8_t *hdr, uint64_t i)
{
    memcpy(nonce, hdr + 16, 16);
    pb_put_u64(nonce + 16, i);
}

/* Seal plain[0..len) as chunk i into out (len + CRYPT_TAG bytes). */
static int seal_chunk(const crypt_key *k, const uint8_t *hdr, const char *name, uint64_t i,
                      bool last, const uint8_t *plain, size_t len, uint8_t *out,
                      pb_error *err)
{
    uint8_t stack[512], *ad, nonce[24];
    size_t ad_len;
    if (chunk_ad(&ad, &ad_len, hdr, i, last, name, stack, sizeof(stack)))
        return pb_fail(err, PB_ENOMEM, "out of memory sealing %s", name);
    chunk_nonce(nonce, hdr, i);
    crypto_aead_xchacha20poly1305_ietf_encrypt(out, NULL, plain, len, ad, ad_len, NULL, nonce,
                                               k->data_key);
    if (ad != stack)
        free(ad);
    return 0;
}

/* Open chunk i (clen stored bytes, tag included) into out (clen - CRYPT_TAG bytes). */
static int open_chunk(const crypt_key *k, const uint8_t *hdr, const char *name, uint64_t i,
                      bool last, const uint8_t *in, size_t clen, uint8_t *out, pb_error *err)
{
    uint8_t stack[512], *ad, nonce[24];
    size_t ad_len;
    if (chunk_ad(&ad, &ad_len, hdr, i, last, name, stack, sizeof(stack)))
        return pb_fail(err, PB_ENOMEM, "out of memory opening %s", name);
    chunk_nonce(nonce, hdr, i);
    int bad = crypto_aead_xchacha20poly1305_ietf_decrypt(out, NULL, NULL, in, clen, ad, ad_len,
                                                         nonce, k->data_key);
    if (ad != stack)
        free(ad);
    if (bad)
        return pb_fail(err, PB_ECORRUPT, "object %s: encrypted chunk %" PRIu64 " (stored "
                       "offset %" PRIu64 ") fails authentication: damaged, tampered with or "
                       "moved", name, i, CRYPT_HEADER + i * (uint64_t)(CRYPT_CHUNK + CRYPT_TAG));
    return 0;
}

static void make_header(const crypt_key *k, uint8_t *hdr)
{
    memcpy(hdr, CRYPT_MAGIC, 8);
    pb_put_u64(hdr + 8, k->id);
    randombytes_buf(hdr + 16, 16);
}

/* The key that sealed the object whose header is hdr: PB_ECORRUPT for a bad magic,
 * PB_EAUTH when none of the given keys has its id. */
static int key_of(const repo_crypt *c, const char *name, const uint8_t *hdr,
                  const crypt_key **out, pb_error *err)
{
    *out = NULL;
    if (memcmp(hdr, CRYPT_MAGIC, 8) != 0)
        return pb_fail(err, PB_ECORRUPT, "object %s is not an encrypted object (bad magic)",
                       name);
    uint64_t id = pb_get_u64(hdr + 8);
    for (size_t i = 0; i < c->n; i++) {
        if (c->keys[i].id == id) {
            *out = &c->keys[i];
            return 0;
        }
    }
    return pb_fail(err, PB_EAUTH, "object %s is sealed by key id %016" PRIx64 ", which none "
                   "of the given keys has: give its --encrypt-key-file", name, id);
}

int crypt_seal(const repo_crypt *c, const char *name, const void *data, size_t len,
               void **out, size_t *out_len, pb_error *err)
{
    *out = NULL;
    *out_len = 0;
    uint64_t n = chunks_of(len), total = crypt_stored_size(len);
    uint8_t *buf = total <= SIZE_MAX ? malloc((size_t)total) : NULL;
    if (!buf)
        return pb_fail(err, PB_ENOMEM, "out of memory sealing %s (%zu bytes)", name, len);
    make_header(&c->keys[0], buf);
    const uint8_t *src = data;
    for (uint64_t i = 0; i < n; i++) {
        size_t off = (size_t)i * CRYPT_CHUNK, clen = len - off < CRYPT_CHUNK ? len - off
                                                                                 : CRYPT_CHUNK;
        uint8_t *dst = buf + CRYPT_HEADER + (size_t)i * (CRYPT_CHUNK + CRYPT_TAG);
        int rc = seal_chunk(&c->keys[0], buf, name, i, i + 1 == n, src + off, clen, dst, err);
        if (rc) {
            free(buf);
            return rc;
        }
    }
    *out = buf;
    *out_len = (size_t)total;
    return 0;
}

int crypt_header_check(const repo_crypt *c, const char *name, const uint8_t *hdr,
                       uint64_t stored, pb_error *err)
{
    uint64_t plain;
    const crypt_key *k;
    int rc = key_of(c, name, hdr, &k, err);
    if (rc)
        return rc;
    if (crypt_plain_size(stored, &plain))
        return pb_fail(err, PB_ECORRUPT, "encrypted object %s has an impossible size of %"
                       PRIu64 " bytes (truncated?)", name, stored);
    return 0;
}

int crypt_open(const repo_crypt *c, const char *name, const void *obj, size_t len,
               void **out, size_t *out_len, pb_error *err)
{
    *out = NULL;
    *out_len = 0;
    if (len < CRYPT_HEADER)
        return pb_fail(err, PB_ECORRUPT, "encrypted object %s is %zu bytes, shorter than its "
                       "header", name, len);
    int rc = crypt_header_check(c, name, obj, len, err);
    if (rc)
        return rc;
    uint64_t plain;
    crypt_plain_size(len, &plain);
    uint8_t *buf = malloc((size_t)plain + 1);
    if (!buf)
        return pb_fail(err, PB_ENOMEM, "out of memory opening %s", name);
    rc = crypt_open_range(c, name, obj, len, 0, (size_t)plain,
                          (const uint8_t *)obj + CRYPT_HEADER, buf, err);
    if (rc) {
        free(buf);
        return rc;
    }
    buf[plain] = '\0';
    *out = buf;
    *out_len = (size_t)plain;
    return 0;
}

int crypt_range_span(const char *name, uint64_t stored, uint64_t off, size_t len,
                     uint64_t *span_off, size_t *span_len, pb_error *err)
{
    uint64_t plain;
    if (crypt_plain_size(stored, &plain))
        return pb_fail(err, PB_ECORRUPT, "encrypted object %s has an impossible size of %"
                       PRIu64 " bytes", name, stored);
    if (off > plain || len > plain - off)
        return pb_fail(err, PB_ECORRUPT, "object %s is %" PRIu64 " bytes: a read of %zu at %"
                       PRIu64 " passes its end", name, plain, len, off);
    uint64_t n = chunks_of(plain), a = off / CRYPT_CHUNK;
    uint64_t b = len ? (off + len - 1) / CRYPT_CHUNK : a;
    if (b >= n)
        b = n - 1;
    uint64_t start = CRYPT_HEADER + a * (CRYPT_CHUNK + CRYPT_TAG);
    uint64_t end = b + 1 == n ? stored : CRYPT_HEADER + (b + 1) * (CRYPT_CHUNK + CRYPT_TAG);
    *span_off = start;
    *span_len = (size_t)(end - start);
    return 0;
}

/* span holds the stored bytes crypt_range_span named; each chunk is opened into a
 * chunk-sized buffer and its part of [off, off + len) copied out. */
int crypt_open_range(const repo_crypt *c, const char *name, const uint8_t *hdr,
                     uint64_t stored, uint64_t off, size_t len, const uint8_t *span,
                     void *buf, pb_error *err)
{
    const crypt_key *k;
    uint64_t span_off, plain;
    size_t span_len;
    int rc = key_of(c, name, hdr, &k, err);
    if (rc == 0)
        rc = crypt_range_span(name, stored, off, len, &span_off, &span_len, err);
    if (rc)
        return rc;
    crypt_plain_size(stored, &plain);
    uint64_t n = chunks_of(plain), first = off / CRYPT_CHUNK;
    uint8_t *chunk = malloc(CRYPT_CHUNK);
    if (!chunk)
        return pb_fail(err, PB_ENOMEM, "out of memory opening %s", name);
    size_t done = 0, pos = 0;
    for (uint64_t i = first; rc == 0 && pos < span_len; i++) {
        size_t clen = span_len - pos < CRYPT_CHUNK + CRYPT_TAG ? span_len - pos
                                                                : CRYPT_CHUNK + CRYPT_TAG;
        uint64_t cstart = i * CRYPT_CHUNK, from = off + done - cstart;
        size_t take = clen - CRYPT_TAG - (size_t)from;
        if (take > len - done)
            take = len - done;
        /* a chunk wholly inside the range opens in place, the others through chunk */
        bool whole = from == 0 && take == clen - CRYPT_TAG;
        uint8_t *dst = whole ? (uint8_t *)buf + done : chunk;
        rc = open_chunk(k, hdr, name, i, i + 1 == n, span + pos, clen, dst, err);
        if (rc == 0 && take && !whole)
            memcpy((uint8_t *)buf + done, chunk + from, take);
        done += rc ? 0 : take;
        pos += clen;
    }
    sodium_memzero(chunk, CRYPT_CHUNK);
    free(chunk);
    return rc;
}

/* ---- streaming sealer ----------------------------------------------------------- */

struct crypt_sealer {
    const crypt_key *key;
    char *name;
    uint8_t hdr[CRYPT_HEADER];
    bool hdr_sent;
    uint64_t index;
    size_t fill;
    uint8_t plain[CRYPT_CHUNK];
    uint8_t sealed[CRYPT_CHUNK + CRYPT_TAG];
};

int crypt_sealer_new(const repo_crypt *c, const char *name, crypt_sealer **out,
                     pb_error *err)
{
    *out = NULL;
    crypt_sealer *s = calloc(1, sizeof(*s));
    if (!s || !(s->name = strdup(name))) {
        free(s);
        return pb_fail(err, PB_ENOMEM, "out of memory sealing %s", name);
    }
    s->key = &c->keys[0];
    make_header(s->key, s->hdr);
    *out = s;
    return 0;
}

static int emit_chunk(crypt_sealer *s, bool last, crypt_emit_fn emit, void *ctx,
                      pb_error *err)
{
    int rc = 0;
    if (!s->hdr_sent && (rc = emit(ctx, s->hdr, CRYPT_HEADER, err)))
        return rc;
    s->hdr_sent = true;
    rc = seal_chunk(s->key, s->hdr, s->name, s->index, last, s->plain, s->fill, s->sealed,
                    err);
    if (rc == 0)
        rc = emit(ctx, s->sealed, s->fill + CRYPT_TAG, err);
    s->index++;
    s->fill = 0;
    return rc;
}

/* A full chunk is sealed only when more bytes follow: until then it may be the last. */
int crypt_sealer_write(crypt_sealer *s, const void *data, size_t len, crypt_emit_fn emit,
                       void *ctx, pb_error *err)
{
    const uint8_t *p = data;
    while (len > 0) {
        int rc;
        if (s->fill == CRYPT_CHUNK && (rc = emit_chunk(s, false, emit, ctx, err)))
            return rc;
        size_t take = CRYPT_CHUNK - s->fill < len ? CRYPT_CHUNK - s->fill : len;
        memcpy(s->plain + s->fill, p, take);
        s->fill += take;
        p += take;
        len -= take;
    }
    return 0;
}

int crypt_sealer_finish(crypt_sealer *s, crypt_emit_fn emit, void *ctx, pb_error *err)
{
    return emit_chunk(s, true, emit, ctx, err);
}

void crypt_sealer_free(crypt_sealer *s)
{
    if (!s)
        return;
    sodium_memzero(s->plain, sizeof(s->plain));
    free(s->name);
    free(s);
}

/* ---- header cache and key-check state ------------------------------------------- */

bool crypt_cache_get(repo_crypt *c, const char *name, uint8_t *hdr, uint64_t *stored)
{
    bool hit = false;
    pthread_mutex_lock(&c->lock);
    for (unsigned i = 0; i < CACHE_SLOTS && !hit; i++) {
        if (c->cache[i].name && strcmp(c->cache[i].name, name) == 0) {
            memcpy(hdr, c->cache[i].hdr, CRYPT_HEADER);
            *stored = c->cache[i].stored;
            hit = true;
        }
    }
    pthread_mutex_unlock(&c->lock);
    return hit;
}

void crypt_cache_put(repo_crypt *c, const char *name, const uint8_t *hdr, uint64_t stored)
{
    char *copy = strdup(name);
    if (!copy)
        return; /* a cache: the next read fetches the header again */
    pthread_mutex_lock(&c->lock);
    cache_slot *s = &c->cache[c->next_slot];
    c->next_slot = (c->next_slot + 1) % CACHE_SLOTS;
    free(s->name);
    s->name = copy;
    memcpy(s->hdr, hdr, CRYPT_HEADER);
    s->stored = stored;
    pthread_mutex_unlock(&c->lock);
}

void crypt_cache_drop(repo_crypt *c, const char *name)
{
    pthread_mutex_lock(&c->lock);
    for (unsigned i = 0; i < CACHE_SLOTS; i++) {
        if (c->cache[i].name && strcmp(c->cache[i].name, name) == 0) {
            free(c->cache[i].name);
            c->cache[i].name = NULL;
        }
    }
    pthread_mutex_unlock(&c->lock);
}

void crypt_keycheck_lock(repo_crypt *c)
{
    pthread_mutex_lock(&c->keycheck_lock);
}

void crypt_keycheck_unlock(repo_crypt *c)
{
    pthread_mutex_unlock(&c->keycheck_lock);
}

bool crypt_keycheck_pending(const repo_crypt *c)
{
    return c->keycheck_pending;
}

void crypt_set_keycheck_pending(repo_crypt *c, bool pending)
{
    c->keycheck_pending = pending;
}
