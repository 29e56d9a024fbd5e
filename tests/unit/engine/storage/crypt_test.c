/*
 * tests/unit/engine/storage/crypt_test.c — encrypted repositories (docs/FORMAT.md,
 * "Encrypted repositories"): the sealed object format (round trip, sizes, tampering with
 * each field, wrong key, nonce uniqueness, ranges, the streaming sealer) and the
 * repository behaviour through repo_* on a posix directory (key check, refusals, key
 * rotation, no plaintext on disk).
 */
#include "engine/storage/crypt_internal.h"
#include "tests/unit/pbtest.h"

#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char key1[] = "0123456789abcdef0123456789abcdef-key-one";
static const char key2[] = "fedcba9876543210fedcba9876543210-key-two";

static repo_crypt *new_crypt(const char *k)
{
    repo_key rk = {k, strlen(k)};
    repo_crypt *c = NULL;
    pb_error e = PB_ERROR_INIT;
    PBT_CHECK(crypt_new(&c, &rk, 1, &e) == 0);
    return c;
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (uint8_t)(seed >> 16);
    }
}

static int open_obj(const repo_crypt *c, const char *name, const void *obj, size_t len,
                    const void *want, size_t want_len)
{
    void *back = NULL;
    size_t blen = 0;
    pb_error e = PB_ERROR_INIT;
    int rc = crypt_open(c, name, obj, len, &back, &blen, &e);
    if (rc == 0 && (blen != want_len || memcmp(back, want, want_len) != 0))
        rc = 1;
    free(back);
    return rc;
}

static void test_round_trip_and_sizes(void)
{
    repo_crypt *c = new_crypt(key1);
    static const size_t sizes[] = {0, 1, CRYPT_CHUNK - 1, CRYPT_CHUNK, CRYPT_CHUNK + 1,
                                   3 * CRYPT_CHUNK + 5, 4 * CRYPT_CHUNK};
    uint8_t *data = malloc(5 * CRYPT_CHUNK);
    fill(data, 5 * CRYPT_CHUNK, 7);
    pb_error e = PB_ERROR_INIT;
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        void *obj = NULL;
        size_t olen = 0;
        PBT_CHECK(crypt_seal(c, "backup/x/pack/000001", data, sizes[i], &obj, &olen, &e) == 0);
        PBT_CHECK(olen == crypt_stored_size(sizes[i]));
        uint64_t plain = 99;
        PBT_CHECK(crypt_plain_size(olen, &plain) == 0 && plain == sizes[i]);
        PBT_CHECK(open_obj(c, "backup/x/pack/000001", obj, olen, data, sizes[i]) == 0);
        free(obj);
    }
    for (uint64_t p = 0; p < 3 * CRYPT_CHUNK + 40; p += 7) {
        uint64_t back;
        PBT_CHECK(crypt_plain_size(crypt_stored_size(p), &back) == 0 && back == p);
    }
    uint64_t dummy;
    /* sizes no writer produces: no room for a tag, a chunk holding only a tag after a
     * full one, a body shorter than one tag */
    PBT_CHECK(crypt_plain_size(CRYPT_HEADER + 15, &dummy) == PB_ECORRUPT);
    PBT_CHECK(crypt_plain_size(CRYPT_HEADER + CRYPT_CHUNK + 2 * CRYPT_TAG, &dummy) ==
              PB_ECORRUPT);
    PBT_CHECK(crypt_plain_size(3, &dummy) == PB_ECORRUPT);
    free(data);
    crypt_free(c);
}

/* Every field of a sealed object matters: magic, key id, nonce, ciphertext, tag, the
 * chunk order, the object's length and its name. */
static void test_tamper(void)
{
    repo_crypt *c = new_crypt(key1);
    size_t len = 2 * CRYPT_CHUNK + 100;
    uint8_t *data = malloc(len);
    fill(data, len, 3);
    void *obj = NULL;
    size_t olen = 0;
    pb_error e = PB_ERROR_INIT;
    const char *name = "backup/x/manifest";
    PBT_CHECK(crypt_seal(c, name, data, len, &obj, &olen, &e) == 0);
    uint8_t *o = obj, *copy = malloc(olen);
    const size_t spots[] = {0, 9, 20, CRYPT_HEADER + 5, CRYPT_HEADER + CRYPT_CHUNK + 3,
                            CRYPT_HEADER + CRYPT_CHUNK + CRYPT_TAG + 1, olen - 1};
    for (size_t i = 0; i < sizeof(spots) / sizeof(spots[0]); i++) {
        memcpy(copy, o, olen);
        copy[spots[i]] ^= 0x20;
        void *back = NULL;
        size_t blen = 0;
        int rc = crypt_open(c, name, copy, olen, &back, &blen, &e);
        PBT_CHECK(rc == (spots[i] >= 8 && spots[i] < 16 ? PB_EAUTH : PB_ECORRUPT));
        PBT_CHECK(back == NULL);
        if (rc == PB_ECORRUPT && spots[i] >= CRYPT_HEADER)
            PBT_CHECK(strstr(e.msg, name) != NULL && strstr(e.msg, "chunk") != NULL);
    }
    /* swap the first two chunks */
    memcpy(copy, o, olen);
    memcpy(copy + CRYPT_HEADER, o + CRYPT_HEADER + CRYPT_CHUNK + CRYPT_TAG,
           CRYPT_CHUNK + CRYPT_TAG);
    memcpy(copy + CRYPT_HEADER + CRYPT_CHUNK + CRYPT_TAG, o + CRYPT_HEADER,
           CRYPT_CHUNK + CRYPT_TAG);
    PBT_CHECK(open_obj(c, name, copy, olen, data, len) == PB_ECORRUPT);
    /* drop the last chunk: the second becomes last, and was not sealed as last */
    PBT_CHECK(open_obj(c, name, o, CRYPT_HEADER + 2 * (CRYPT_CHUNK + CRYPT_TAG), data,
                       2 * CRYPT_CHUNK) == PB_ECORRUPT);
    PBT_CHECK(open_obj(c, name, o, olen - 1, data, len - 1) != 0);
    PBT_CHECK(open_obj(c, name, o, 20, data, 0) == PB_ECORRUPT);
    /* the same bytes under another name (an object swapped for another) */
    PBT_CHECK(open_obj(c, "backup/y/manifest", o, olen, data, len) == PB_ECORRUPT);
    PBT_CHECK(open_obj(c, name, o, olen, data, len) == 0);
    free(copy);
    free(obj);
    free(data);
    crypt_free(c);
}

static void test_wrong_key_and_nonces(void)
{
    repo_crypt *c1 = new_crypt(key1), *c2 = new_crypt(key2);
    PBT_CHECK(crypt_key_id(c1, 0) != crypt_key_id(c2, 0));
    uint8_t data[3 * CRYPT_CHUNK];
    memset(data, 'A', sizeof(data)); /* identical chunks */
    void *a = NULL, *b = NULL;
    size_t alen, blen;
    pb_error e = PB_ERROR_INIT;
    PBT_CHECK(crypt_seal(c1, "k", data, sizeof(data), &a, &alen, &e) == 0);
    PBT_CHECK(crypt_seal(c1, "k", data, sizeof(data), &b, &blen, &e) == 0);
    const uint8_t *pa = a, *pb = b;
    /* two seals of the same content under the same name: other nonce prefixes, other
     * bytes; inside one object identical chunks differ (the index is in the nonce) */
    PBT_CHECK(memcmp(pa + 16, pb + 16, 16) != 0);
    PBT_CHECK(memcmp(pa + CRYPT_HEADER, pb + CRYPT_HEADER, 64) != 0);
    PBT_CHECK(memcmp(pa + CRYPT_HEADER, pa + CRYPT_HEADER + CRYPT_CHUNK + CRYPT_TAG, 64) != 0);
    void *back = NULL;
    size_t back_len = 0;
    PBT_CHECK(crypt_open(c2, "k", a, alen, &back, &back_len, &e) == PB_EAUTH);
    PBT_CHECK(strstr(e.msg, "--encrypt-key-file") != NULL);
    /* a key id forged to the other key's: authentication fails */
    uint8_t *forged = malloc(alen);
    memcpy(forged, a, alen);
    pb_put_u64(forged + 8, crypt_key_id(c2, 0));
    PBT_CHECK(crypt_open(c2, "k", forged, alen, &back, &back_len, &e) == PB_ECORRUPT);
    /* many seals: no nonce prefix repeats */
    enum { N = 2000 };
    uint8_t (*prefixes)[16] = malloc(N * 16);
    for (int i = 0; i < N; i++) {
        void *o = NULL;
        size_t olen;
        crypt_seal(c1, "k", "x", 1, &o, &olen, &e);
        memcpy(prefixes[i], (uint8_t *)o + 16, 16);
        free(o);
    }
    int dup = 0;
    for (int i = 0; i < N; i++)
        for (int j = i + 1; j < N; j++)
            dup += memcmp(prefixes[i], prefixes[j], 16) == 0;
    PBT_CHECK(dup == 0);
    repo_key short_key = {"short", 5};
    repo_crypt *bad = NULL;
    PBT_CHECK(crypt_new(&bad, &short_key, 1, &e) == PB_EINVAL && bad == NULL);
    free(prefixes);
    free(forged);
    free(a);
    free(b);
    crypt_free(c1);
    crypt_free(c2);
}

typedef struct sink {
    uint8_t *buf;
    size_t len;
} sink;

static int to_sink(void *ctx, const void *data, size_t len, pb_error *err)
{
    sink *s = ctx;
    memcpy(s->buf + s->len, data, len);
    s->len += len;
    return 0;
}

/* The streaming sealer gives the layout crypt_open reads whatever the write sizes, and
 * any range opens to the same bytes. */
static void test_sealer_and_ranges(void)
{
    repo_crypt *c = new_crypt(key1);
    const size_t lens[] = {0, 10, CRYPT_CHUNK, 2 * CRYPT_CHUNK + 777};
    pb_error e = PB_ERROR_INIT;
    for (size_t t = 0; t < sizeof(lens) / sizeof(lens[0]); t++) {
        size_t len = lens[t];
        uint8_t *data = malloc(len + 1);
        fill(data, len, (uint32_t)t);
        sink s = {malloc(crypt_stored_size(len)), 0};
        crypt_sealer *w = NULL;
        PBT_CHECK(crypt_sealer_new(c, "p", &w, &e) == 0);
        for (size_t off = 0; off < len;) {
            size_t n = 1 + (off * 31) % 5000;
            n = n > len - off ? len - off : n;
            PBT_CHECK(crypt_sealer_write(w, data + off, n, to_sink, &s, &e) == 0);
            off += n;
        }
        PBT_CHECK(crypt_sealer_finish(w, to_sink, &s, &e) == 0);
        crypt_sealer_free(w);
        PBT_CHECK(s.len == crypt_stored_size(len));
        PBT_CHECK(open_obj(c, "p", s.buf, s.len, data, len) == 0);
        for (size_t off = 0; len && off < len; off += 4099) {
            size_t n = len - off < 9000 ? len - off : 9000;
            uint64_t so;
            size_t sl;
            uint8_t *out = malloc(n);
            PBT_CHECK(crypt_range_span("p", s.len, off, n, &so, &sl, &e) == 0);
            PBT_CHECK(so + sl <= s.len);
            PBT_CHECK(crypt_open_range(c, "p", s.buf, s.len, off, n, s.buf + so, out, &e) == 0);
            PBT_CHECK(memcmp(out, data + off, n) == 0);
            free(out);
        }
        uint64_t so;
        size_t sl;
        PBT_CHECK(crypt_range_span("p", s.len, len, 1, &so, &sl, &e) == PB_ECORRUPT);
        free(s.buf);
        free(data);
    }
    crypt_free(c);
}

/* ---- through repo_* ------------------------------------------------------------- */

static char dir[256];

static int open_with(repo **r, const char *const *keys, size_t n, pb_error *e)
{
    repo_key rk[REPO_MAX_KEYS];
    for (size_t i = 0; i < n; i++) {
        rk[i].data = keys[i];
        rk[i].len = strlen(keys[i]);
    }
    repo_opts o = REPO_OPTS_INIT;
    o.location = dir;
    o.keys = rk;
    o.n_keys = n;
    return repo_open(r, &o, e);
}

static bool file_contains(const char *path, const char *needle)
{
    FILE *f = fopen(path, "rb");
    char buf[65536];
    size_t n = f ? fread(buf, 1, sizeof(buf), f) : 0;
    if (f)
        fclose(f);
    return memmem(buf, n, needle, strlen(needle)) != NULL;
}

static void test_repository(void)
{
    PBT_CHECK(pbt_tmpdir(dir, sizeof(dir), "crypt") == 0);
    const char *k1[] = {key1}, *k2[] = {key2}, *k21[] = {key2, key1}, *k12[] = {key1, key2};
    repo *r = NULL;
    pb_error e = PB_ERROR_INIT;
    const char *secret = "MARKER-ROW-secret-plaintext";
    void *back = NULL;
    size_t blen = 0;
    PBT_CHECK(open_with(&r, k1, 1, &e) == 0);
    /* opening with a key wrote nothing: the key check comes with the first write */
    PBT_CHECK(access(dir, F_OK) == 0);
    char path[512];
    snprintf(path, sizeof(path), "%s/keycheck", dir);
    PBT_CHECK(access(path, F_OK) != 0);
    PBT_CHECK(repo_put(r, "backup/a/manifest", secret, strlen(secret), &e) == 0);
    PBT_CHECK(access(path, F_OK) == 0);
    repo_writer *w = NULL;
    uint8_t big[40000];
    fill(big, sizeof(big), 9);
    memcpy(big + 20000, secret, strlen(secret));
    PBT_CHECK(repo_writer_open(r, "backup/a/pack/000001", &w, &e) == 0);
    PBT_CHECK(repo_writer_write(w, big, 30000, &e) == 0);
    PBT_CHECK(repo_writer_write(w, big + 30000, sizeof(big) - 30000, &e) == 0);
    PBT_CHECK(repo_writer_commit(w, &e) == 0);
    uint64_t size = 0;
    PBT_CHECK(repo_stat(r, "backup/a/pack/000001", &size, &e) == 0 && size == sizeof(big));
    uint8_t part[100];
    PBT_CHECK(repo_get_range(r, "backup/a/pack/000001", 16380, 100, part, &e) == 0);
    PBT_CHECK(memcmp(part, big + 16380, 100) == 0);
    PBT_CHECK(repo_get_range(r, "backup/a/pack/000001", sizeof(big) - 10, 20, part, &e) ==
              PB_ECORRUPT);
    snprintf(path, sizeof(path), "%s/backup/a/pack/000001", dir);
    PBT_CHECK(!file_contains(path, secret));
    snprintf(path, sizeof(path), "%s/backup/a/manifest", dir);
    PBT_CHECK(!file_contains(path, secret));
    repo_free(r);

    /* no key: opening does no I/O, but the first write and any read of a sealed object
     * are refused, naming what to do; a wrong key: refused at open */
    PBT_CHECK(open_with(&r, NULL, 0, &e) == 0);
    PBT_CHECK(repo_get(r, "backup/a/manifest", &back, &blen, &e) == PB_EAUTH && !back);
    PBT_CHECK(strstr(e.msg, "is encrypted") && strstr(e.msg, "--encrypt-key-file"));
    PBT_CHECK(repo_put(r, "wal/x", "plain", 5, &e) == PB_EAUTH);
    PBT_CHECK(strstr(e.msg, "is encrypted") && strstr(e.msg, "wal/x"));
    PBT_CHECK(repo_writer_open(r, "backup/c/pack/000001", &w, &e) == PB_EAUTH && !w);
    snprintf(path, sizeof(path), "%s/wal/x", dir);
    PBT_CHECK(access(path, F_OK) != 0); /* nothing written */
    repo_free(r);
    PBT_CHECK(open_with(&r, k2, 1, &e) == PB_EAUTH && strstr(e.msg, "wrong encryption key"));
    PBT_CHECK(open_with(&r, k12, 2, &e) == PB_EAUTH); /* an old key that opens nothing */

    /* rotation: the new key first seals new objects, the old one still opens old ones */
    PBT_CHECK(open_with(&r, k21, 2, &e) == 0);
    PBT_CHECK(repo_get(r, "backup/a/manifest", &back, &blen, &e) == 0);
    PBT_CHECK(blen == strlen(secret) && memcmp(back, secret, blen) == 0);
    free(back);
    PBT_CHECK(repo_put(r, "backup/b/manifest", "new", 3, &e) == 0);
    repo_free(r);
    PBT_CHECK(open_with(&r, k2, 1, &e) == 0); /* the new key alone now has its key check */
    PBT_CHECK(repo_get(r, "backup/b/manifest", &back, &blen, &e) == 0 && blen == 3);
    free(back);
    PBT_CHECK(repo_get(r, "backup/a/manifest", &back, &blen, &e) == PB_EAUTH);
    repo_free(r);

    /* rotation by reseal: the old object sealed again by the first key, then the new key
     * alone opens it; an object already sealed by the first key is left as it is; without
     * a key, repo_refuse_encrypted refuses the repository up front */
    PBT_CHECK(open_with(&r, k21, 2, &e) == 0);
    bool resealed = false;
    PBT_CHECK(repo_reseal(r, "backup/a/manifest", &resealed, &e) == 0 && resealed);
    PBT_CHECK(repo_reseal(r, "backup/a/manifest", &resealed, &e) == 0 && !resealed);
    PBT_CHECK(repo_reseal(r, "backup/b/manifest", &resealed, &e) == 0 && !resealed);
    PBT_CHECK(repo_reseal(r, "backup/none", &resealed, &e) == PB_ENOENT);
    repo_free(r);
    PBT_CHECK(open_with(&r, k2, 1, &e) == 0);
    PBT_CHECK(repo_get(r, "backup/a/manifest", &back, &blen, &e) == 0);
    PBT_CHECK(blen == strlen(secret) && memcmp(back, secret, blen) == 0);
    free(back);
    repo_free(r);
    PBT_CHECK(open_with(&r, NULL, 0, &e) == 0);
    PBT_CHECK(repo_refuse_encrypted(r, &e) == PB_EAUTH && strstr(e.msg, "is encrypted"));
    repo_free(r);

    /* an unencrypted repository with objects refuses a key */
    pbt_rmtree(dir);
    PBT_CHECK(pbt_tmpdir(dir, sizeof(dir), "crypt") == 0);
    PBT_CHECK(open_with(&r, NULL, 0, &e) == 0);
    PBT_CHECK(repo_put(r, "pageback.repo", "x", 1, &e) == 0);
    repo_free(r);
    PBT_CHECK(open_with(&r, k1, 1, &e) == PB_EINVAL && strstr(e.msg, "not encrypted"));
    pbt_rmtree(dir);
}

int main(void)
{
    PBT_RUN(test_round_trip_and_sizes);
    PBT_RUN(test_tamper);
    PBT_RUN(test_wrong_key_and_nonces);
    PBT_RUN(test_sealer_and_ranges);
    PBT_RUN(test_repository);
    return PBT_DONE();
}
