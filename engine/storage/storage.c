/*
 * engine/storage/storage.c — the repo_* interface: parses the location, picks a driver and
 * forwards every call through the driver vtable (engine/storage/storage_internal.h).
 *
 * Key validation lives here, once, so both drivers see only well-formed keys: a key
 * that could escape the repository root ("..", a leading '/') or that names a
 * directory rather than an object (empty components) is refused before any I/O.
 *
 * An encrypted repository (docs/FORMAT.md, "Encrypted repositories") routes each call
 * through crypt_io.c instead, here too once: r->crypt set means every byte below this
 * file is sealed, every byte above it is plain.
 */
#include "engine/storage/storage_internal.h"

#include "engine/storage/crypt_internal.h"

#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define S3_SCHEME "s3://"

struct repo {
    const repo_driver *drv;
    void *impl;
    char *location;
    repo_observe_cb observe; /* tests only (repo_observe) */
    void *observe_ctx;
    repo_requests ops; /* operations, for a driver that does not count its requests */
    repo_crypt *crypt; /* NULL: an unencrypted repository */
    /* Without a key: whether the first write still has to make sure the repository is
     * not an encrypted one (cio_refuse_encrypted), so that opening does no I/O. */
    pthread_mutex_t plain_lock;
    bool plain_checked;
};

struct repo_writer {
    const repo_driver *drv;
    void *impl;
    repo *r;
    cio_writer *sealed; /* instead of impl in an encrypted repository */
};

/* One operation is one request for a driver without its own count (posix). */
static void count(repo *r, repo_req_kind kind)
{
    if (!r->drv->requests)
        repo_requests_add(&r->ops, kind);
}

void repo_requests_get(const repo *r, repo_requests *out)
{
    memset(out, 0, sizeof(*out));
    if (!r)
        return;
    if (r->drv->requests)
        r->drv->requests(r->impl, out);
    else
        repo_requests_load(&r->ops, out);
}

/* Checks every '/'-separated component of s[0..len): non-empty, not "." or "..".
 * Temp-file names of the posix driver contain ".tmp." and are skipped by listings,
 * so such keys would be invisible: they are refused too. */
static int check_components(const char *s, size_t len, const char *what, const char *orig,
                            pb_error *err)
{
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && s[i] != '/')
            continue;
        size_t n = i - start;
        const char *c = s + start;
        if (n == 0)
            return pb_fail(err, PB_EINVAL, "invalid repository %s \"%s\": empty path component",
                           what, orig);
        if ((n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
            return pb_fail(err, PB_EINVAL,
                           "invalid repository %s \"%s\": \".\" and \"..\" are not allowed",
                           what, orig);
        start = i + 1;
    }
    if (memmem(s, len, ".tmp.", 5))
        return pb_fail(err, PB_EINVAL,
                       "invalid repository %s \"%s\": \".tmp.\" is reserved for temporary files",
                       what, orig);
    return 0;
}

static int check_key(const char *key, pb_error *err)
{
    if (!key || !key[0])
        return pb_fail(err, PB_EINVAL, "invalid repository key: empty");
    if (key[0] == '/')
        return pb_fail(err, PB_EINVAL, "invalid repository key \"%s\": leading '/'", key);
    return check_components(key, strlen(key), "key", key, err);
}

/* A listing prefix may be empty (whole repository) or end in '/' (a "directory"). */
static int check_prefix(const char *prefix, pb_error *err)
{
    if (!prefix || !prefix[0])
        return 0;
    if (prefix[0] == '/')
        return pb_fail(err, PB_EINVAL, "invalid repository prefix \"%s\": leading '/'", prefix);
    size_t len = strlen(prefix);
    if (prefix[len - 1] == '/')
        len--;
    return check_components(prefix, len, "prefix", prefix, err);
}

/* "s3://bucket/some/prefix/" -> bucket "bucket", prefix "some/prefix" (no leading or
 * trailing '/', possibly empty). */
static int open_s3(repo *r, const repo_opts *opts, pb_error *err)
{
    const char *p = opts->location + strlen(S3_SCHEME);
    const char *slash = strchr(p, '/');
    size_t blen = slash ? (size_t)(slash - p) : strlen(p);
    if (blen == 0)
        return pb_fail(err, PB_EINVAL, "invalid repository location \"%s\": no bucket name",
                       opts->location);
    char *bucket = strndup(p, blen);
    const char *pre = slash ? slash + 1 : "";
    while (*pre == '/')
        pre++;
    size_t plen = strlen(pre);
    while (plen > 0 && pre[plen - 1] == '/')
        plen--;
    char *prefix = strndup(pre, plen);
    int rc;
    if (!bucket || !prefix) {
        rc = pb_fail(err, PB_ENOMEM, "out of memory opening %s", opts->location);
        goto out;
    }
    if (plen > 0 && (rc = check_components(prefix, plen, "location", opts->location, err)))
        goto out;
    r->drv = &repo_s3_driver;
    rc = repo_s3_open(opts, bucket, prefix, &r->impl, err);
out:
    free(bucket);
    free(prefix);
    return rc;
}

int repo_open(repo **out, const repo_opts *opts, pb_error *err)
{
    *out = NULL;
    if (!opts || !opts->location || !opts->location[0])
        return pb_fail(err, PB_EINVAL, "no repository location given");
    repo *r = calloc(1, sizeof(*r));
    if (!r || !(r->location = strdup(opts->location))) {
        free(r);
        return pb_fail(err, PB_ENOMEM, "out of memory opening %s", opts->location);
    }
    int rc;
    /* The s3 symbols are referenced only on this branch; a local repository never
     * touches the s3 driver. */
    if (strncmp(opts->location, S3_SCHEME, strlen(S3_SCHEME)) == 0) {
        rc = open_s3(r, opts, err);
    } else {
        r->drv = &repo_posix_driver;
        rc = repo_posix_open(opts, opts->location, &r->impl, err);
    }
    if (rc) {
        r->drv = NULL; /* impl was not created: nothing for the driver to free */
        repo_free(r);
        return rc;
    }
    pthread_mutex_init(&r->plain_lock, NULL);
    if (opts->n_keys && (rc = cio_open(r->drv, r->impl, r->location, opts, &r->crypt, err))) {
        repo_free(r);
        return rc;
    }
    *out = r;
    return 0;
}

void repo_free(repo *r)
{
    if (!r)
        return;
    if (r->drv && r->impl)
        r->drv->free(r->impl);
    crypt_free(r->crypt);
    if (r->location && r->drv) /* plain_lock exists once the driver opened */
        pthread_mutex_destroy(&r->plain_lock);
    free(r->location);
    free(r);
}

const char *repo_location(const repo *r)
{
    return r->location;
}

void repo_io_counts(const repo *r, uint64_t *flushes, uint64_t *bytes_written)
{
    *flushes = *bytes_written = 0;
    if (r && r->drv->io_counts)
        r->drv->io_counts(r->impl, flushes, bytes_written);
}

bool repo_is_local(const repo *r)
{
    return r->drv == &repo_posix_driver;
}

/* In an encrypted repository: the first write writes the key check, then data is
 * sealed into *sealed (caller frees) and *data / *len point to it. */
static int check_plain_write(repo *r, const char *key, pb_error *err)
{
    int rc = 0;
    pthread_mutex_lock(&r->plain_lock);
    if (!r->plain_checked && (rc = cio_refuse_encrypted(r->drv, r->impl, r->location, err)) == 0)
        r->plain_checked = true;
    pthread_mutex_unlock(&r->plain_lock);
    return rc ? pb_error_wrap(err, "before writing %s/%s", r->location, key) : 0;
}

int repo_refuse_encrypted(repo *r, pb_error *err)
{
    if (r->crypt)
        return 0;
    int rc = 0;
    pthread_mutex_lock(&r->plain_lock);
    if (!r->plain_checked) {
        count(r, REPO_REQ_LIST);
        if ((rc = cio_refuse_encrypted(r->drv, r->impl, r->location, err)) == 0)
            r->plain_checked = true; /* the first write need not look again */
    }
    pthread_mutex_unlock(&r->plain_lock);
    return rc;
}

static int seal_for_write(repo *r, const char *key, const void **data, size_t *len,
                          void **sealed, pb_error *err)
{
    *sealed = NULL;
    if (!r->crypt)
        return check_plain_write(r, key, err);
    crypt_cache_drop(r->crypt, key);
    int rc = cio_ensure_keycheck(r->drv, r->impl, r->crypt, err);
    if (rc == 0)
        rc = crypt_seal(r->crypt, key, *data, *len, sealed, len, err);
    if (rc == 0)
        *data = *sealed;
    return rc;
}

int repo_put(repo *r, const char *key, const void *data, size_t len, pb_error *err)
{
    void *sealed = NULL;
    int rc = check_key(key, err);
    if (rc == 0)
        rc = seal_for_write(r, key, &data, &len, &sealed, err);
    if (rc == 0) {
        count(r, REPO_REQ_PUT);
        rc = r->drv->put(r->impl, key, data, len, err);
    }
    free(sealed);
    return rc;
}

/* Without the server's help: refuse when present, write, then read back. A racing
 * writer passed its HEAD before our PUT ended, so its PUT ends about one PUT's duration
 * after ours at most: waiting that long (bounded) before reading back lets the loser
 * (whose bytes were overwritten) see the winner's and fail. A much slower racing PUT
 * can still slip through (see storage.h). */
static int put_new_best_effort(repo *r, const char *key, const void *data, size_t len,
                               pb_error *err)
{
    int rc = r->drv->stat(r->impl, key, &(uint64_t){0}, err);
    if (rc == 0)
        return pb_fail(err, PB_EEXIST, "object %s/%s exists already", r->location, key);
    if (rc != PB_ENOENT)
        return rc;
    double t0 = pb_now();
    if ((rc = r->drv->put(r->impl, key, data, len, err)))
        return rc;
    double settle = 2 * (pb_now() - t0);
    settle = settle < 0.05 ? 0.05 : settle > 2.0 ? 2.0 : settle;
    usleep((useconds_t)(settle * 1e6));
    void *back = NULL;
    size_t back_len = 0;
    rc = r->drv->get(r->impl, key, &back, &back_len, err);
    if (rc == 0 && (back_len != len || memcmp(back, data, len) != 0))
        rc = pb_fail(err, PB_EEXIST, "object %s/%s was written by a concurrent writer",
                     r->location, key);
    free(back);
    return rc;
}

int repo_drv_put_new(repo *r, const char *key, const void *data, size_t len, int *hold_fd,
                     pb_error *err)
{
    void *sealed = NULL;
    int rc = check_key(key, err);
    if (rc == 0)
        rc = seal_for_write(r, key, &data, &len, &sealed, err);
    if (rc == 0)
        count(r, REPO_REQ_PUT);
    if (rc == 0)
        rc = r->drv->put_new(r->impl, key, data, len, hold_fd, err);
    if (rc == PB_EUNSUPPORTED)
        rc = put_new_best_effort(r, key, data, len, err);
    free(sealed);
    return rc;
}

int repo_put_new(repo *r, const char *key, const void *data, size_t len, pb_error *err)
{
    return repo_drv_put_new(r, key, data, len, NULL, err);
}

int repo_drv_lock_probe(repo *r, const char *key, int *fd, pb_error *err)
{
    *fd = -1;
    int rc = check_key(key, err);
    if (rc || !r->drv->lock_probe)
        return rc;
    return r->drv->lock_probe(r->impl, key, fd, err);
}

bool repo_drv_has_probe(const repo *r)
{
    return r->drv->lock_probe != NULL;
}

int repo_drv_lock_rewrite(repo *r, const char *key, int fd, const void *data, size_t len,
                          pb_error *err)
{
    void *sealed = NULL;
    int rc = check_key(key, err);
    if (rc == 0)
        rc = seal_for_write(r, key, &data, &len, &sealed, err);
    if (rc == 0 && r->drv->lock_rewrite && fd >= 0)
        rc = r->drv->lock_rewrite(r->impl, key, fd, data, len, err);
    else if (rc == 0)
        rc = r->drv->put(r->impl, key, data, len, err);
    free(sealed);
    return rc;
}

void repo_observe(repo *r, repo_observe_cb cb, void *ctx)
{
    r->observe = cb;
    r->observe_ctx = ctx;
}

int repo_get(repo *r, const char *key, void **out, size_t *out_len, pb_error *err)
{
    *out = NULL;
    *out_len = 0;
    int rc = check_key(key, err);
    if (rc)
        return rc;
    if (r->observe)
        r->observe(r->observe_ctx, "get", key);
    count(r, REPO_REQ_GET);
    if (rc == 0 && r->crypt)
        return cio_get(r->drv, r->impl, r->crypt, key, out, out_len, err);
    if (rc == 0 && (rc = r->drv->get(r->impl, key, out, out_len, err)) == 0 &&
        *out_len >= CRYPT_HEADER && memcmp(*out, CRYPT_MAGIC, 8) == 0) {
        free(*out); /* sealed bytes, and no key to open them */
        *out = NULL;
        *out_len = 0;
        rc = pb_fail(err, PB_EAUTH, "repository %s is encrypted (object %s is sealed): give "
                     "--encrypt-key-file (or PAGEBACK_ENCRYPT_KEY)", r->location, key);
    }
    return rc;
}

bool repo_is_encrypted(const repo *r)
{
    return r->crypt != NULL;
}

int repo_reseal(repo *r, const char *key, bool *resealed, pb_error *err)
{
    *resealed = false;
    int rc = check_key(key, err);
    if (rc || !r->crypt)
        return rc;
    count(r, REPO_REQ_GET_RANGE);
    crypt_cache_drop(r->crypt, key);
    rc = cio_reseal(r->drv, r->impl, r->crypt, key, resealed, err);
    if (rc == 0 && *resealed) {
        count(r, REPO_REQ_GET);
        count(r, REPO_REQ_PUT);
    }
    return rc;
}

int repo_get_range(repo *r, const char *key, uint64_t offset, size_t len, void *buf,
                   pb_error *err)
{
    int rc = check_key(key, err);
    if (rc)
        return rc;
    if (len == 0)
        return 0;
    count(r, REPO_REQ_GET_RANGE);
    if (r->crypt)
        return cio_get_range(r->drv, r->impl, r->crypt, key, offset, len, buf, err);
    return r->drv->get_range(r->impl, key, offset, len, buf, err);
}

int repo_get_range_upto(repo *r, const char *key, uint64_t offset, size_t len, void *buf,
                        size_t *got, uint64_t *size, pb_error *err)
{
    *got = 0;
    int rc = check_key(key, err);
    if (rc)
        return rc;
    if (!r->crypt && r->drv->get_range_upto && len > 0) {
        count(r, REPO_REQ_GET_RANGE);
        return r->drv->get_range_upto(r->impl, key, offset, len, buf, got, size, err);
    }
    rc = repo_stat(r, key, size, err);
    if (rc == 0 && offset >= *size && len > 0)
        rc = pb_fail(err, PB_ECORRUPT, "%s/%s: offset %llu is at or past the end of the "
                     "%llu-byte object", repo_location(r), key, (unsigned long long)offset,
                     (unsigned long long)*size);
    if (rc)
        return rc;
    size_t n = *size - offset < len ? (size_t)(*size - offset) : len;
    rc = repo_get_range(r, key, offset, n, buf, err);
    if (rc == 0)
        *got = n;
    return rc;
}

int repo_stat(repo *r, const char *key, uint64_t *size, pb_error *err)
{
    uint64_t dummy;
    int rc = check_key(key, err);
    if (rc)
        return rc;
    count(r, REPO_REQ_HEAD);
    if (rc == 0 && r->crypt)
        return cio_stat(r->drv, r->impl, key, size ? size : &dummy, err);
    return rc ? rc : r->drv->stat(r->impl, key, size ? size : &dummy, err);
}

/* repo_delete and repo_drv_lock_remove: the same request, del the durable one. */
static int delete_with(repo *r, const char *key,
                       int (*del)(void *impl, const char *key, pb_error *err), pb_error *err)
{
    int rc = check_key(key, err);
    if (rc)
        return rc;
    count(r, REPO_REQ_DEL);
    if (r->crypt)
        crypt_cache_drop(r->crypt, key);
    return del(r->impl, key, err);
}

int repo_delete(repo *r, const char *key, pb_error *err)
{
    return delete_with(r, key, r->drv->del, err);
}

int repo_drv_lock_remove(repo *r, const char *key, pb_error *err)
{
    return delete_with(r, key, r->drv->lock_remove ? r->drv->lock_remove : r->drv->del, err);
}

void repo_defer_syncs(repo *r)
{
    if (r->drv->defer_syncs)
        r->drv->defer_syncs(r->impl);
}

int repo_sync_deferred(repo *r, pb_error *err)
{
    return r->drv->sync_deferred ? r->drv->sync_deferred(r->impl, err) : 0;
}

int repo_list(repo *r, const char *prefix, repo_list_cb cb, void *ctx, pb_error *err)
{
    int rc = check_prefix(prefix, err);
    if (rc)
        return rc;
    if (r->observe)
        r->observe(r->observe_ctx, "list", prefix ? prefix : "");
    count(r, REPO_REQ_LIST);
    if (rc == 0 && r->crypt)
        return cio_list(r->drv, r->impl, prefix ? prefix : "", cb, ctx, err);
    return rc ? rc : r->drv->list(r->impl, prefix ? prefix : "", cb, ctx, err);
}

int repo_writer_open(repo *r, const char *key, repo_writer **out, pb_error *err)
{
    *out = NULL;
    int rc = check_key(key, err);
    if (rc)
        return rc;
    repo_writer *w = calloc(1, sizeof(*w));
    if (!w)
        return pb_fail(err, PB_ENOMEM, "out of memory opening writer for %s", key);
    w->drv = r->drv;
    w->r = r;
    if (r->crypt) {
        crypt_cache_drop(r->crypt, key);
        rc = cio_ensure_keycheck(r->drv, r->impl, r->crypt, err);
        if (rc == 0)
            rc = cio_writer_open(r->drv, r->impl, r->crypt, key, &w->sealed, err);
    } else if ((rc = check_plain_write(r, key, err)) == 0) {
        rc = r->drv->writer_open(r->impl, key, &w->impl, err);
    }
    if (rc) {
        free(w);
        return rc;
    }
    *out = w;
    return 0;
}

int repo_writer_write(repo_writer *w, const void *data, size_t len, pb_error *err)
{
    if (len == 0)
        return 0;
    if (w->sealed)
        return cio_writer_write(w->sealed, data, len, err);
    return w->drv->writer_write(w->impl, data, len, err);
}

int repo_writer_commit(repo_writer *w, pb_error *err)
{
    assert(w);
    count(w->r, REPO_REQ_PUT);
    int rc = w->sealed ? cio_writer_commit(w->sealed, err) : w->drv->writer_commit(w->impl, err);
    free(w);
    return rc;
}

void repo_writer_abort(repo_writer *w)
{
    if (!w)
        return;
    if (w->sealed)
        cio_writer_abort(w->sealed);
    else
        w->drv->writer_abort(w->impl);
    free(w);
}

int repo_cleanup(repo *r, const repo_lock *held, pb_error *err)
{
    return r->drv->cleanup(r->impl, held != NULL, err);
}

int repo_cleanup_key(repo *r, const char *key, pb_error *err)
{
    int rc = check_key(key, err);
    if (rc || !r->drv->cleanup_key)
        return rc;
    return r->drv->cleanup_key(r->impl, key, err);
}
