/*
 * engine/storage/crypt_io.c — the repo_* operations of an encrypted repository: seal
 * what is written, open what is read, translate sizes, and the key check at open
 * (docs/FORMAT.md, "Encrypted repositories"). storage.c calls these in place of the
 * driver when the repository has keys, so nothing above the storage room changes: pack
 * offsets, manifests, WAL objects and the lock are the same bytes inside.
 */
#include "engine/storage/crypt_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the key check at open -------------------------------------------------------- */

typedef struct kc_list {
    uint64_t ids[64];
    size_t n;
    bool any; /* for the emptiness probe */
} kc_list;

static int collect_keycheck(void *ctx, const char *key, uint64_t size)
{
    kc_list *l = ctx;
    const char *hex = key + strlen(CRYPT_KEYCHECK_PREFIX);
    char *end;
    uint64_t id = strtoull(hex, &end, 16);
    if (strlen(hex) == 16 && *end == '\0' && l->n < sizeof(l->ids) / sizeof(l->ids[0]))
        l->ids[l->n++] = id;
    return 0;
}

static int first_object(void *ctx, const char *key, uint64_t size)
{
    ((kc_list *)ctx)->any = true;
    return 1; /* one object is enough to know the repository is not empty */
}

static void keycheck_key(char *out, size_t cap, uint64_t id)
{
    snprintf(out, cap, CRYPT_KEYCHECK_PREFIX "%016" PRIx64, id);
}

static bool listed(const kc_list *l, uint64_t id)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->ids[i] == id)
            return true;
    return false;
}

static int open_keycheck(const repo_driver *drv, void *impl, const repo_crypt *c,
                         const char *loc, uint64_t id, pb_error *err)
{
    char key[64];
    keycheck_key(key, sizeof(key), id);
    void *obj = NULL, *text = NULL;
    size_t len = 0, tlen = 0;
    int rc = drv->get(impl, key, &obj, &len, err);
    if (rc == 0)
        rc = crypt_open(c, key, obj, len, &text, &tlen, err);
    if (rc == 0 && (tlen != strlen(CRYPT_KEYCHECK_TEXT) || memcmp(text, CRYPT_KEYCHECK_TEXT,
                                                                   tlen) != 0))
        rc = pb_fail(err, PB_ECORRUPT, "key check %s/%s opens but holds the wrong text", loc,
                     key);
    free(obj);
    free(text);
    return rc;
}

/* Keys given, key checks present: at least one key must open its key check (else the
 * key is wrong); every key after the first must have one (an old key that opens
 * nothing is a mistake); the first may be new (key rotation), its check written later. */
static int check_keys(const repo_driver *drv, void *impl, repo_crypt *c, const char *loc,
                      const kc_list *l, pb_error *err)
{
    size_t opened = 0;
    for (size_t i = 0; i < crypt_nkeys(c); i++) {
        uint64_t id = crypt_key_id(c, i);
        if (!listed(l, id)) {
            if (i > 0)
                return pb_fail(err, PB_EAUTH, "repository %s: encryption key %zu (id %016"
                               PRIx64 ") opens nothing in it", loc, i + 1, id);
            crypt_set_keycheck_pending(c, true);
            continue;
        }
        int rc = open_keycheck(drv, impl, c, loc, id, err);
        if (rc)
            return pb_error_wrap(err, "repository %s", loc);
        opened++;
    }
    if (opened == 0)
        return pb_fail(err, PB_EAUTH, "repository %s: wrong encryption key (id %016" PRIx64
                       " is not one of its %zu key(s), first %016" PRIx64 ")", loc,
                       crypt_key_id(c, 0), l->n, l->ids[0]);
    return 0;
}

int cio_refuse_encrypted(const repo_driver *drv, void *impl, const char *loc, pb_error *err)
{
    kc_list l = {{0}, 0, false};
    int rc = drv->list(impl, CRYPT_KEYCHECK_PREFIX, collect_keycheck, &l, err);
    if (rc == 0 && l.n)
        rc = pb_fail(err, PB_EAUTH, "repository %s is encrypted: give --encrypt-key-file (or "
                     "PAGEBACK_ENCRYPT_KEY)", loc);
    return rc;
}

int cio_open(const repo_driver *drv, void *impl, const char *loc, const repo_opts *opts,
             repo_crypt **out, pb_error *err)
{
    *out = NULL;
    kc_list l = {{0}, 0, false};
    int rc = drv->list(impl, CRYPT_KEYCHECK_PREFIX, collect_keycheck, &l, err);
    if (rc)
        return rc;
    repo_crypt *c = NULL;
    if ((rc = crypt_new(&c, opts->keys, opts->n_keys, err)))
        return rc;
    if (l.n == 0) {
        rc = drv->list(impl, "", first_object, &l, err);
        if (rc == 1)
            rc = 0;
        if (rc == 0 && l.any)
            rc = pb_fail(err, PB_EINVAL, "repository %s is not encrypted: an unencrypted "
                         "repository stays so, drop --encrypt-key-file", loc);
        crypt_set_keycheck_pending(c, true); /* an empty repository becomes encrypted */
    } else {
        rc = check_keys(drv, impl, c, loc, &l, err);
    }
    if (rc) {
        crypt_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

/* Before the first write through a key without a key check: write it, so that a
 * repository never holds objects of a key it cannot check. Writers wait meanwhile. */
int cio_ensure_keycheck(const repo_driver *drv, void *impl, repo_crypt *c, pb_error *err)
{
    int rc = 0;
    crypt_keycheck_lock(c);
    if (crypt_keycheck_pending(c)) {
        char key[64];
        keycheck_key(key, sizeof(key), crypt_key_id(c, 0));
        void *obj = NULL;
        size_t len = 0;
        const char *text = CRYPT_KEYCHECK_TEXT;
        rc = crypt_seal(c, key, text, strlen(text), &obj, &len, err);
        if (rc == 0)
            rc = drv->put(impl, key, obj, len, err);
        if (rc == 0)
            crypt_set_keycheck_pending(c, false);
        free(obj);
    }
    crypt_keycheck_unlock(c);
    return rc;
}

/* ---- reads -------------------------------------------------------------------------- */

int cio_get(const repo_driver *drv, void *impl, repo_crypt *c, const char *key, void **out,
            size_t *out_len, pb_error *err)
{
    void *obj = NULL;
    size_t len = 0;
    int rc = drv->get(impl, key, &obj, &len, err);
    if (rc == 0)
        rc = crypt_open(c, key, obj, len, out, out_len, err);
    free(obj);
    return rc;
}

int cio_reseal(const repo_driver *drv, void *impl, repo_crypt *c, const char *key,
               bool *resealed, pb_error *err)
{
    *resealed = false;
    uint8_t hdr[CRYPT_HEADER];
    int rc = drv->get_range(impl, key, 0, CRYPT_HEADER, hdr, err);
    if (rc || (memcmp(hdr, CRYPT_MAGIC, 8) == 0 && pb_get_u64(hdr + 8) == crypt_key_id(c, 0)))
        return rc; /* already sealed by the first key (a bad magic fails in cio_get) */
    void *plain = NULL, *sealed = NULL;
    size_t plain_len = 0, sealed_len = 0;
    rc = cio_get(drv, impl, c, key, &plain, &plain_len, err); /* authenticated first */
    if (rc == 0)
        rc = cio_ensure_keycheck(drv, impl, c, err);
    if (rc == 0)
        rc = crypt_seal(c, key, plain, plain_len, &sealed, &sealed_len, err);
    if (rc == 0)
        rc = drv->put(impl, key, sealed, sealed_len, err); /* replaces it whole, atomically */
    if (rc == 0)
        *resealed = true;
    free(plain);
    free(sealed);
    return rc;
}

static int range_header(const repo_driver *drv, void *impl, repo_crypt *c, const char *key,
                        uint8_t *hdr, uint64_t *stored, pb_error *err)
{
    if (crypt_cache_get(c, key, hdr, stored))
        return 0;
    int rc = drv->stat(impl, key, stored, err);
    if (rc == 0 && *stored < CRYPT_HEADER)
        rc = pb_fail(err, PB_ECORRUPT, "encrypted object %s is %" PRIu64 " bytes, shorter "
                     "than its header", key, *stored);
    if (rc == 0)
        rc = drv->get_range(impl, key, 0, CRYPT_HEADER, hdr, err);
    if (rc == 0)
        rc = crypt_header_check(c, key, hdr, *stored, err);
    if (rc == 0)
        crypt_cache_put(c, key, hdr, *stored);
    return rc;
}

int cio_get_range(const repo_driver *drv, void *impl, repo_crypt *c, const char *key,
                  uint64_t off, size_t len, void *buf, pb_error *err)
{
    uint8_t hdr[CRYPT_HEADER];
    uint64_t stored, span_off;
    size_t span_len;
    int rc = range_header(drv, impl, c, key, hdr, &stored, err);
    if (rc == 0)
        rc = crypt_range_span(key, stored, off, len, &span_off, &span_len, err);
    if (rc)
        return rc;
    uint8_t *span = malloc(span_len);
    if (!span)
        return pb_fail(err, PB_ENOMEM, "out of memory reading %s", key);
    rc = drv->get_range(impl, key, span_off, span_len, span, err);
    if (rc == 0)
        rc = crypt_open_range(c, key, hdr, stored, off, len, span, buf, err);
    free(span);
    return rc;
}

int cio_stat(const repo_driver *drv, void *impl, const char *key, uint64_t *size,
             pb_error *err)
{
    uint64_t stored = 0;
    int rc = drv->stat(impl, key, &stored, err);
    if (rc == 0 && crypt_plain_size(stored, size))
        rc = pb_fail(err, PB_ECORRUPT, "encrypted object %s has an impossible size of %"
                     PRIu64 " bytes (truncated?)", key, stored);
    return rc;
}

typedef struct list_ctx {
    repo_list_cb cb;
    void *ctx;
} list_ctx;

/* A listing reports content sizes; a size no writer produces is passed on as is (the
 * object fails when read, naming itself). */
static int list_plain(void *ctx, const char *key, uint64_t size)
{
    const list_ctx *l = ctx;
    uint64_t plain;
    return l->cb(l->ctx, key, crypt_plain_size(size, &plain) ? size : plain);
}

int cio_list(const repo_driver *drv, void *impl, const char *prefix, repo_list_cb cb,
             void *ctx, pb_error *err)
{
    list_ctx l = {cb, ctx};
    return drv->list(impl, prefix, list_plain, &l, err);
}

/* ---- the streaming writer ----------------------------------------------------------- */

struct cio_writer {
    const repo_driver *drv;
    void *dw;
    crypt_sealer *sealer;
};

static int emit_to_driver(void *ctx, const void *data, size_t len, pb_error *err)
{
    const cio_writer *w = ctx;
    return w->drv->writer_write(w->dw, data, len, err);
}

int cio_writer_open(const repo_driver *drv, void *impl, repo_crypt *c, const char *key,
                    cio_writer **out, pb_error *err)
{
    *out = NULL;
    cio_writer *w = calloc(1, sizeof(*w));
    if (!w)
        return pb_fail(err, PB_ENOMEM, "out of memory opening writer for %s", key);
    w->drv = drv;
    int rc = crypt_sealer_new(c, key, &w->sealer, err);
    if (rc == 0)
        rc = drv->writer_open(impl, key, &w->dw, err);
    if (rc) {
        crypt_sealer_free(w->sealer);
        free(w);
        return rc;
    }
    *out = w;
    return 0;
}

int cio_writer_write(cio_writer *w, const void *data, size_t len, pb_error *err)
{
    return crypt_sealer_write(w->sealer, data, len, emit_to_driver, w, err);
}

int cio_writer_commit(cio_writer *w, pb_error *err)
{
    int rc = crypt_sealer_finish(w->sealer, emit_to_driver, w, err);
    if (rc)
        w->drv->writer_abort(w->dw);
    else
        rc = w->drv->writer_commit(w->dw, err);
    crypt_sealer_free(w->sealer);
    free(w);
    return rc;
}

void cio_writer_abort(cio_writer *w)
{
    if (!w)
        return;
    w->drv->writer_abort(w->dw);
    crypt_sealer_free(w->sealer);
    free(w);
}
