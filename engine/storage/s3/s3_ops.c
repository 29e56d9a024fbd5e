/*
 * engine/storage/s3/s3_ops.c — the S3 driver behind repo_*: whole-object operations
 * (put, conditional put, get, ranged get, stat, delete), listing, and opening a
 * repository. The requests themselves are s3_http.c's, the answers are read by
 * s3_xml.c, the streaming writer and the cleanup of unfinished uploads are
 * s3_multipart.c's (engine/storage/s3/s3_internal.h).
 */
#include "engine/storage/s3/s3_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *s3_strdup(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* ---------- whole-object operations ---------- */

static int s3_put(void *impl, const char *key, const void *data, size_t len, pb_error *err)
{
    s3_repo *r = impl;
    int rc = s3_check_key(r, key, err);
    if (rc)
        return rc;
    if (len > r->part_size) {
        /* Large objects go through multipart; the writer frees itself on commit. */
        void *w = NULL;
        rc = s3_writer_open(impl, key, &w, err);
        if (rc == 0)
            rc = s3_writer_write(w, data, len, err);
        if (w) {
            int crc = s3_writer_commit(w, rc ? NULL : err);
            if (rc == 0)
                rc = crc;
        }
        return rc;
    }
    char *full = s3_full_key(r, key);
    if (!full)
        return pb_fail(err, PB_ENOMEM, "S3 PUT %s: out of memory", key);
    rc = s3_put_full(r, full, data, len, err);
    free(full);
    return rc;
}

/* Create-if-absent with If-None-Match: * (AWS S3 since 2024: 412 when present, 409 when
 * a concurrent conditional write wins). Multipart objects and servers that answer 501
 * (Swift s3api) get PB_EUNSUPPORTED, and storage.c's best effort takes over. */
static int s3_put_new(void *impl, const char *key, const void *data, size_t len, int *hold_fd,
                      pb_error *err)
{
    s3_repo *r = impl;
    if (hold_fd)
        *hold_fd = -1;
    int rc = s3_check_key(r, key, err);
    if (rc)
        return rc;
    if (len > r->part_size || r->no_cond_put)
        return pb_fail(err, PB_EUNSUPPORTED, "S3 conditional PUT of %s: not available", key);
    s3_req q = {.method = "PUT", .key = s3_full_key(r, key), .body = data, .body_len = len,
                .if_none_match = true};
    if (!q.key)
        return pb_fail(err, PB_ENOMEM, "S3 PUT %s: out of memory", key);
    rc = s3_do(r, &q, err);
    if (rc == PB_EUNSUPPORTED) {
        r->no_cond_put = true; /* one 501 is enough to know */
        pb_debug("%s: the server refuses conditional PUT (If-None-Match); create-if-absent "
                "falls back to check, write and read back", r->location);
    }
    pb_buf_free(&q.resp);
    free((char *)q.key);
    return rc;
}

static int s3_get(void *impl, const char *key, void **out, size_t *out_len, pb_error *err)
{
    s3_repo *r = impl;
    int rc = s3_check_key(r, key, err);
    if (rc)
        return rc;
    s3_req q = {.method = "GET", .key = s3_full_key(r, key)};
    if (!q.key)
        return pb_fail(err, PB_ENOMEM, "S3 GET %s: out of memory", key);
    rc = s3_do(r, &q, err);
    if (rc == 0 && !q.resp.data) {
        /* An empty object: hand back a valid pointer all the same. */
        q.resp.data = malloc(1);
        if (!q.resp.data)
            rc = pb_fail(err, PB_ENOMEM, "S3 GET %s: out of memory", q.key);
    }
    if (rc == 0) {
        *out = q.resp.data;
        *out_len = q.resp.len;
        q.resp.data = NULL;
    }
    pb_buf_free(&q.resp);
    free((char *)q.key);
    return rc;
}

static int s3_stat(void *impl, const char *key, uint64_t *size, pb_error *err);

/* One GET of bytes [off, off + len) of key into buf (len > 0). *q holds the answer for
 * the caller to check; ranged_get_done frees it, whatever happened. */
static int ranged_get(s3_repo *r, const char *key, uint64_t off, size_t len, void *buf,
                      s3_req *q, char *range, size_t range_cap, pb_error *err)
{
    snprintf(range, range_cap, "bytes=%" PRIu64 "-%" PRIu64, off, off + len - 1);
    *q = (s3_req){.method = "GET", .key = s3_full_key(r, key), .range = range, .dst = buf,
                  .dst_cap = len};
    if (!q->key)
        return pb_fail(err, PB_ENOMEM, "S3 GET %s: out of memory", key);
    return s3_do(r, q, err);
}

static void ranged_get_done(s3_req *q)
{
    pb_buf_free(&q->resp);
    free((char *)q->key);
}

static int s3_get_range(void *impl, const char *key, uint64_t off, size_t len, void *buf,
                        pb_error *err)
{
    s3_repo *r = impl;
    int rc = s3_check_key(r, key, err);
    if (rc)
        return rc;
    if (len == 0) {
        /* No byte to ask for; still report a missing object or an offset past its end. */
        uint64_t size = 0;
        rc = s3_stat(impl, key, &size, err);
        if (rc == 0 && off > size)
            rc = pb_fail(err, PB_ECORRUPT, "S3 s3://%s/%s%s: offset %" PRIu64
                         " is past the end of the %" PRIu64 "-byte object",
                         r->bucket, r->prefix, key, off, size);
        return rc;
    }
    char range[80];
    s3_req q;
    rc = ranged_get(r, key, off, len, buf, &q, range, sizeof(range), err);
    if (rc == 0 && q.status != 206 && !(q.status == 200 && off == 0))
        rc = pb_fail(err, PB_EREMOTE, "S3 GET s3://%s/%s: range %s answered HTTP %ld, not 206",
                     r->bucket, q.key, range, q.status);
    else if (rc == 0 && q.dst_len != len)
        rc = pb_fail(err, PB_ECORRUPT, "S3 GET s3://%s/%s: object too short: range %s gave "
                     "%zu of %zu bytes", r->bucket, q.key, range, q.dst_len, len);
    ranged_get_done(&q);
    return rc;
}

/* Up to len bytes at off in one ranged GET: S3 answers a range that runs past the end
 * with the bytes there are (RFC 9110 14.1.2) and names the object's size in its
 * Content-Range, so a reader reading ahead needs no HEAD first. */
static int s3_get_range_upto(void *impl, const char *key, uint64_t off, size_t len, void *buf,
                             size_t *got, uint64_t *size, pb_error *err)
{
    s3_repo *r = impl;
    int rc = s3_check_key(r, key, err);
    if (rc)
        return rc;
    char range[80];
    s3_req q;
    rc = ranged_get(r, key, off, len, buf, &q, range, sizeof(range), err);
    uint64_t total = q.range_total >= 0 ? (uint64_t)q.range_total : 0;
    if (rc == 0 && q.status == 200 && off == 0 && q.content_length >= 0)
        total = (uint64_t)q.content_length; /* the whole object, and it fitted */
    else if (rc == 0 && (q.status != 206 || q.range_total < 0))
        rc = pb_fail(err, PB_EREMOTE, "S3 GET s3://%s/%s: range %s answered HTTP %ld without "
                     "the object's size", r->bucket, q.key, range, q.status);
    uint64_t expect = rc == 0 && total > off ? total - off : 0;
    if (rc == 0 && (q.dst_len != (expect < len ? expect : len) || total <= off))
        rc = pb_fail(err, PB_ECORRUPT, "S3 GET s3://%s/%s: range %s gave %zu bytes of an "
                     "object of %" PRIu64, r->bucket, q.key, range, q.dst_len, total);
    if (rc == 0) {
        *got = q.dst_len;
        *size = total;
    }
    ranged_get_done(&q);
    return rc;
}

static int s3_stat(void *impl, const char *key, uint64_t *size, pb_error *err)
{
    s3_repo *r = impl;
    int rc = s3_check_key(r, key, err);
    if (rc)
        return rc;
    s3_req q = {.method = "HEAD", .key = s3_full_key(r, key)};
    if (!q.key)
        return pb_fail(err, PB_ENOMEM, "S3 HEAD %s: out of memory", key);
    rc = s3_do(r, &q, err);
    if (rc == 0 && q.content_length < 0)
        rc = pb_fail(err, PB_EREMOTE, "S3 HEAD s3://%s/%s: no Content-Length in the answer",
                     r->bucket, q.key);
    if (rc == 0 && size)
        *size = (uint64_t)q.content_length;
    pb_buf_free(&q.resp);
    free((char *)q.key);
    return rc;
}

/* S3 answers 204 whether or not the key existed, so deleting a missing object is not an
 * error here (a server that answers 404 gives PB_ENOENT). */
static int s3_del(void *impl, const char *key, pb_error *err)
{
    s3_repo *r = impl;
    int rc = s3_check_key(r, key, err);
    if (rc)
        return rc;
    s3_req q = {.method = "DELETE", .key = s3_full_key(r, key)};
    if (!q.key)
        return pb_fail(err, PB_ENOMEM, "S3 DELETE %s: out of memory", key);
    rc = s3_do(r, &q, err);
    pb_buf_free(&q.resp);
    free((char *)q.key);
    return rc;
}

/* ---------- listing ---------- */

/* One page of ListObjectsV2, parsed. */
typedef struct s3_page {
    char **keys;
    uint64_t *sizes;
    size_t n, cap;
    char *next_token; /* NULL when the listing is complete */
} s3_page;

static void s3_page_clear(s3_page *pg)
{
    for (size_t i = 0; i < pg->n; i++)
        free(pg->keys[i]);
    free(pg->keys);
    free(pg->sizes);
    free(pg->next_token);
    memset(pg, 0, sizeof(*pg));
}

static int s3_page_add(s3_page *pg, char *key, uint64_t size)
{
    if (pg->n == pg->cap) {
        size_t cap = pg->cap ? 2 * pg->cap : 64;
        char **k = realloc(pg->keys, cap * sizeof(*k));
        if (!k)
            return PB_ENOMEM;
        pg->keys = k;
        uint64_t *s = realloc(pg->sizes, cap * sizeof(*s));
        if (!s)
            return PB_ENOMEM;
        pg->sizes = s;
        pg->cap = cap;
    }
    pg->keys[pg->n] = key;
    pg->sizes[pg->n++] = size;
    return 0;
}

static int s3_parse_list(const s3_repo *r, const char *xml, size_t len, s3_page *pg,
                         pb_error *err)
{
    const char *p = xml, *end = xml + len, *b, *be;
    while (s3_xml_block(p, end, "Contents", &b, &be)) {
        char *key = s3_xml_get(b, be, "Key", NULL);
        char *size = s3_xml_get(b, be, "Size", NULL);
        bool ok = key && size && strncmp(key, r->prefix, strlen(r->prefix)) == 0;
        int rc = ok ? s3_page_add(pg, key, strtoull(size, NULL, 10)) : 0;
        free(size);
        if (!ok || rc) {
            free(key);
            return ok ? pb_fail(err, PB_ENOMEM, "listing %s: out of memory", r->location)
                      : pb_fail(err, PB_EREMOTE, "listing %s: malformed ListObjectsV2 entry",
                                r->location);
        }
        p = be;
    }
    char *trunc = s3_xml_get(xml, end, "IsTruncated", NULL);
    bool truncated = trunc && strcmp(trunc, "true") == 0;
    free(trunc);
    if (truncated) {
        pg->next_token = s3_xml_get(xml, end, "NextContinuationToken", NULL);
        if (!pg->next_token)
            return pb_fail(err, PB_EREMOTE,
                           "listing %s: truncated answer without NextContinuationToken",
                           r->location);
    }
    return 0;
}

static int s3_list_page(s3_repo *r, const char *full_prefix, const char *token, s3_page *pg,
                        pb_error *err)
{
    char *ep = s3_encode(full_prefix, false);
    char *et = token ? s3_encode(token, false) : NULL;
    char maxk[32] = "";
    if (r->list_max_keys)
        snprintf(maxk, sizeof(maxk), "&max-keys=%u", r->list_max_keys);
    /* Sorted: continuation-token < list-type < max-keys < prefix. */
    char *query = (ep && (et || !token))
                      ? s3_printf("%s%s%slist-type=2%s&prefix=%s", et ? "continuation-token=" : "",
                                  et ? et : "", et ? "&" : "", maxk, ep)
                      : NULL;
    s3_req q = {.method = "GET", .query = query};
    int rc = query ? s3_do(r, &q, err)
                   : pb_fail(err, PB_ENOMEM, "listing %s: out of memory", r->location);
    if (rc == 0)
        rc = s3_parse_list(r, (const char *)q.resp.data, q.resp.len, pg, err);
    pb_buf_free(&q.resp);
    free(query);
    free(ep);
    free(et);
    return rc;
}

static int s3_list(void *impl, const char *prefix, repo_list_cb cb, void *ctx, pb_error *err)
{
    s3_repo *r = impl;
    char *full = s3_full_key(r, prefix ? prefix : "");
    char *token = NULL;
    int rc = 0;
    if (!full)
        return pb_fail(err, PB_ENOMEM, "listing %s: out of memory", r->location);
    do {
        s3_page pg = {0};
        rc = s3_list_page(r, full, token, &pg, err);
        if (rc && err)
            pb_error_wrap(err, "listing %s/%s", r->location, prefix ? prefix : "");
        free(token);
        token = NULL;
        /* Callbacks run with no handle held, so they may use the repository. */
        for (size_t i = 0; rc == 0 && i < pg.n; i++)
            rc = cb(ctx, pg.keys[i] + strlen(r->prefix), pg.sizes[i]);
        if (rc == 0) {
            token = pg.next_token;
            pg.next_token = NULL;
        }
        s3_page_clear(&pg);
    } while (rc == 0 && token);
    free(token);
    free(full);
    return rc;
}
/* ---------- open / free ---------- */

static void s3_free(void *impl)
{
    s3_repo *r = impl;
    if (!r)
        return;
    s3_pool_free(r);
    pthread_mutex_destroy(&r->lock);
    free(r->bucket);
    free(r->prefix);
    free(r->base_url);
    free(r->key);
    free(r->secret);
    free(r->token_hdr);
    free(r->ca_file);
    free(r);
}

/* Bucket URL: "scheme://host[:port]/bucket" (path-style) or "scheme://bucket.host[:port]". */
static char *s3_base_url(const repo_opts *o, const char *bucket, const char *region)
{
    char *aws = NULL, *url = NULL;
    const char *ep = o->s3_endpoint;
    if (!ep || !*ep)
        ep = aws = s3_printf("https://s3.%s.amazonaws.com", region);
    if (!ep)
        return NULL;
    size_t n = strlen(ep);
    while (n && ep[n - 1] == '/')
        n--;
    const char *hs = strstr(ep, "://");
    if (o->s3_path_style || !hs || (size_t)(hs - ep) >= n)
        url = s3_printf("%.*s/%s", (int)n, ep, bucket);
    else
        url = s3_printf("%.*s://%s.%.*s", (int)(hs - ep), ep, bucket, (int)(n - (size_t)(hs + 3 - ep)),
                        hs + 3);
    free(aws);
    return url;
}

int repo_s3_open(const repo_opts *opts, const char *bucket, const char *prefix, void **impl,
                 pb_error *err)
{
    const char *region = opts->s3_region && *opts->s3_region ? opts->s3_region : "us-east-1";
    if (!bucket || !*bucket || strchr(bucket, '/'))
        return pb_fail(err, PB_EINVAL, "S3 repository: invalid bucket name \"%s\"",
                       bucket ? bucket : "");
    if (!opts->s3_key || !*opts->s3_key || !opts->s3_secret || !*opts->s3_secret)
        return pb_fail(err, PB_EINVAL, "S3 repository s3://%s/%s: no access key or secret "
                       "(AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)", bucket, prefix ? prefix : "");
    int rc = s3_global_init(err);
    if (rc)
        return rc;
    s3_repo *r = calloc(1, sizeof(*r));
    if (!r)
        return pb_fail(err, PB_ENOMEM, "S3 repository: out of memory");
    if (pthread_mutex_init(&r->lock, NULL) != 0) {
        free(r);
        return pb_fail(err, PB_ENOMEM, "S3 repository: cannot create a mutex");
    }
    /* Normalise the prefix to "" or "a/b/" so keys join with no '//'. */
    const char *pf = prefix ? prefix : "";
    while (*pf == '/')
        pf++;
    size_t pl = strlen(pf);
    while (pl && pf[pl - 1] == '/')
        pl--;
    r->prefix = pl ? s3_printf("%.*s/", (int)pl, pf) : strdup("");
    r->bucket = strdup(bucket);
    r->key = strdup(opts->s3_key);
    r->secret = strdup(opts->s3_secret);
    r->token_hdr = opts->s3_token && *opts->s3_token
                       ? s3_printf("x-amz-security-token: %s", opts->s3_token) : NULL;
    r->ca_file = s3_strdup(opts->s3_ca_file);
    r->base_url = s3_base_url(opts, bucket, region);
    if (!r->prefix || !r->bucket || !r->key || !r->secret || !r->base_url ||
        (opts->s3_token && *opts->s3_token && !r->token_hdr) ||
        (opts->s3_ca_file && !r->ca_file)) {
        s3_free(r);
        return pb_fail(err, PB_ENOMEM, "S3 repository: out of memory");
    }
    snprintf(r->sigv4, sizeof(r->sigv4), "aws:amz:%s:s3", region);
    snprintf(r->location, sizeof(r->location), "s3://%s%s%.*s", bucket, pl ? "/" : "", (int)pl,
             pf);
    r->insecure = opts->s3_insecure;
    r->part_size = opts->s3_part_size ? opts->s3_part_size : (size_t)16 << 20;
    if (r->part_size < S3_MIN_PART)
        r->part_size = S3_MIN_PART; /* S3 refuses smaller non-last parts */
    if (r->part_size > S3_MAX_PART)
        r->part_size = S3_MAX_PART;
    r->parallel = opts->s3_parallel ? opts->s3_parallel : 1;
    r->retries = opts->s3_retries;
    r->backoff_base_ms = S3_BACKOFF_BASE_MS;
    r->rng = ((uint64_t)(uintptr_t)r << 17) ^ (uint64_t)(pb_now() * 1e9) ^ 0x9E3779B97F4A7C15ull;
    if (!r->rng)
        r->rng = 1;
    *impl = r;
    return 0;
}

/* Test hook (declared in tests/unit/engine/storage/s3_test.c): page size of listings, so paging is
 * exercised without thousands of objects. 0 restores the server default. */
void repo_s3_test_set_list_page(void *impl, unsigned max_keys);
void repo_s3_test_set_list_page(void *impl, unsigned max_keys)
{
    ((s3_repo *)impl)->list_max_keys = max_keys;
}

static void s3_requests(void *impl, repo_requests *out)
{
    repo_requests_load(&((s3_repo *)impl)->requests, out);
}

const repo_driver repo_s3_driver = {
    .name = "s3",
    .free = s3_free,
    .put = s3_put,
    .get = s3_get,
    .get_range = s3_get_range,
    .stat = s3_stat,
    .del = s3_del,
    .list = s3_list,
    .writer_open = s3_writer_open,
    .writer_write = s3_writer_write,
    .writer_commit = s3_writer_commit,
    .writer_abort = s3_writer_abort,
    .cleanup = s3_cleanup_uploads,
    .put_new = s3_put_new,
    .requests = s3_requests,
    .get_range_upto = s3_get_range_upto,
};
