/*
 * engine/storage/s3/s3_multipart.c — the S3 streaming writer (repo_writer_* for large
 * objects such as packs): multipart upload with parts in flight on threads.
 *
 * Nothing is visible before commit: an object that fits in one part goes out as a single
 * PUT at commit; a larger one as a multipart upload, initiated when more data follows a
 * full part, completed at commit, and aborted on any failure (repo_cleanup removes what
 * an abort could not). The writer holds nslots part buffers (repo_opts.s3_parallel): one
 * filling, the others uploading, so memory stays at nslots parts whatever the object's
 * size. Also the cleanup behind repo_cleanup: the unfinished uploads under the prefix
 * that no writer will complete, aborted.
 */
#include "engine/storage/s3/s3_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define S3_MAX_PARTS 10000u
#define S3_PARTS_PER_STEP 1000u                /* part size doubles every 1000 parts */

typedef struct s3_part {
    uint8_t *buf;
    size_t len;
    size_t bufcap;
    unsigned number;
    bool busy; /* a thread is uploading it */
    pthread_t thread;
    int rc;
    pb_error err;
    char etag[128];
    struct s3_writer *w;
} s3_part;

typedef struct s3_writer {
    s3_repo *r;
    char *key;        /* full key */
    char *upload_id;  /* NULL until the first part leaves */
    char *eid;        /* upload id, percent-encoded for queries */
    s3_part *slots;   /* nslots buffers: one filling, the rest uploading */
    unsigned nslots;
    unsigned cur;     /* slot being filled */
    size_t cap;       /* size of the current part */
    char (*etags)[128]; /* etags[i] of part i + 1, filled when its upload is joined */
    unsigned etags_cap;
    unsigned nparts;  /* parts handed out so far */
    int failed;       /* sticky: the first error, already in ferr */
    pb_error ferr;
} s3_writer;

static int s3_upload_part(s3_writer *w, s3_part *p, pb_error *err)
{
    char *query = s3_printf("partNumber=%u&uploadId=%s", p->number, w->eid);
    if (!query)
        return pb_fail(err, PB_ENOMEM, "S3 upload part %u: out of memory", p->number);
    s3_req q = {.method = "PUT", .key = w->key, .query = query, .body = p->buf,
                .body_len = p->len};
    int rc = s3_do(w->r, &q, err);
    if (rc == 0 && !q.etag[0])
        rc = pb_fail(err, PB_EREMOTE, "S3 upload part %u of s3://%s/%s: no ETag in the answer",
                     p->number, w->r->bucket, w->key);
    if (rc == 0)
        memcpy(p->etag, q.etag, sizeof(p->etag));
    pb_buf_free(&q.resp);
    free(query);
    return rc;
}

static void *s3_part_thread(void *arg)
{
    s3_part *p = arg;
    p->rc = s3_upload_part(p->w, p, &p->err);
    return NULL;
}

/* Wait for slot p's upload and record its result. */
static void s3_part_join(s3_writer *w, s3_part *p)
{
    if (!p->busy)
        return;
    pthread_join(p->thread, NULL);
    p->busy = false;
    if (p->rc == 0)
        memcpy(w->etags[p->number - 1], p->etag, sizeof(p->etag));
    else if (!w->failed) {
        w->failed = p->rc;
        w->ferr = p->err;
    }
}

static int s3_initiate(s3_writer *w, pb_error *err)
{
    s3_req q = {.method = "POST", .key = w->key, .query = "uploads="};
    int rc = s3_do(w->r, &q, err);
    if (rc == 0) {
        w->upload_id = s3_xml_get((const char *)q.resp.data,
                                  (const char *)q.resp.data + q.resp.len, "UploadId", NULL);
        w->eid = w->upload_id ? s3_encode(w->upload_id, false) : NULL;
        if (!w->eid)
            rc = pb_fail(err, PB_EREMOTE, "S3 initiate multipart s3://%s/%s: no UploadId",
                         w->r->bucket, w->key);
    }
    pb_buf_free(&q.resp);
    return rc;
}

/* Room for one more part's ETag (only this thread touches the array). */
static int s3_etags_reserve(s3_writer *w, pb_error *err)
{
    if (w->nparts < w->etags_cap)
        return 0;
    unsigned cap = w->etags_cap ? 2 * w->etags_cap : 16;
    void *e = realloc(w->etags, cap * sizeof(*w->etags));
    if (!e)
        return pb_fail(err, PB_ENOMEM, "S3 writer s3://%s/%s: out of memory", w->r->bucket,
                       w->key);
    w->etags = e;
    w->etags_cap = cap;
    return 0;
}

/* Hand the filled slot to an upload (a thread when several slots exist) and move on to
 * the next slot, waiting for its previous upload first. */
static int s3_flush(s3_writer *w, pb_error *err)
{
    s3_part *p = &w->slots[w->cur];
    if (w->nparts >= S3_MAX_PARTS)
        return pb_fail(err, PB_EINVAL, "S3 s3://%s/%s: more than %u parts", w->r->bucket,
                       w->key, S3_MAX_PARTS);
    if (!w->upload_id) {
        int rc = s3_initiate(w, err);
        if (rc)
            return rc;
    }
    int grc = s3_etags_reserve(w, err);
    if (grc)
        return grc;
    p->number = ++w->nparts;
    p->w = w;
    p->err = (pb_error)PB_ERROR_INIT;
    if (w->nslots > 1 && pthread_create(&p->thread, NULL, s3_part_thread, p) == 0) {
        p->busy = true;
    } else {
        /* One slot (or no thread to be had): upload inline. */
        int rc = s3_upload_part(w, p, err);
        if (rc)
            return rc;
        memcpy(w->etags[p->number - 1], p->etag, sizeof(p->etag));
    }
    w->cur = (w->cur + 1) % w->nslots;
    s3_part *nx = &w->slots[w->cur];
    s3_part_join(w, nx);
    if (w->failed)
        return pb_fail(err, w->failed, "%s", w->ferr.msg);
    /* Part size doubles every 1000 parts so 10,000 parts reach far enough; the buffer
     * grows when its slot comes around. */
    size_t want = w->r->part_size << (w->nparts / S3_PARTS_PER_STEP);
    if (want > S3_MAX_PART)
        want = S3_MAX_PART;
    if (want > w->cap)
        w->cap = want;
    nx->len = 0;
    return 0;
}

int s3_writer_open(void *impl, const char *key, void **out, pb_error *err)
{
    s3_repo *r = impl;
    int rc = s3_check_key(r, key, err);
    if (rc)
        return rc;
    s3_writer *w = calloc(1, sizeof(*w));
    if (!w)
        return pb_fail(err, PB_ENOMEM, "S3 writer %s: out of memory", key);
    w->r = r;
    w->nslots = r->parallel > 1 ? r->parallel : 1;
    w->cap = r->part_size;
    w->key = s3_full_key(r, key);
    w->slots = calloc(w->nslots, sizeof(*w->slots));
    if (!w->key || !w->slots) {
        free(w->key);
        free(w->slots);
        free(w);
        return pb_fail(err, PB_ENOMEM, "S3 writer %s: out of memory", key);
    }
    *out = w;
    return 0;
}

/* Grow slot p's buffer to hold want bytes (at most w->cap). Buffers grow as data comes
 * so a small object costs what it holds, not a whole part. */
static int s3_slot_grow(s3_writer *w, s3_part *p, size_t want, pb_error *err)
{
    if (want > w->cap)
        want = w->cap;
    if (p->bufcap >= want)
        return 0;
    size_t n = p->bufcap ? p->bufcap : (size_t)64 << 10;
    while (n < want)
        n *= 2;
    if (n > w->cap)
        n = w->cap;
    uint8_t *b = realloc(p->buf, n);
    if (!b)
        return pb_fail(err, PB_ENOMEM, "S3 writer s3://%s/%s: out of memory for a %zu-byte part",
                       w->r->bucket, w->key, n);
    p->buf = b;
    p->bufcap = n;
    return 0;
}

static int s3_writer_fail(s3_writer *w, int rc, const pb_error *e, pb_error *err)
{
    if (!w->failed) {
        w->failed = rc;
        w->ferr = *e;
    }
    if (err && err != e)
        *err = *e;
    return rc;
}

int s3_writer_write(void *wv, const void *data, size_t len, pb_error *err)
{
    s3_writer *w = wv;
    const uint8_t *d = data;
    pb_error e = PB_ERROR_INIT;
    if (w->failed)
        return pb_fail(err, w->failed, "%s", w->ferr.msg);
    while (len) {
        s3_part *p = &w->slots[w->cur];
        int rc;
        if (p->len == w->cap) {
            /* Flush only when more data comes, so an object of exactly one part still
             * goes out as a single PUT at commit. */
            rc = s3_flush(w, &e);
            if (rc)
                return s3_writer_fail(w, rc, &e, err);
            continue;
        }
        size_t n = w->cap - p->len < len ? w->cap - p->len : len;
        rc = s3_slot_grow(w, p, p->len + n, &e);
        if (rc)
            return s3_writer_fail(w, rc, &e, err);
        memcpy(p->buf + p->len, d, n);
        p->len += n;
        d += n;
        len -= n;
    }
    return 0;
}

static void s3_writer_free(s3_writer *w)
{
    if (!w)
        return;
    for (unsigned i = 0; i < w->nslots; i++)
        free(w->slots[i].buf);
    free(w->slots);
    free(w->etags);
    free(w->upload_id);
    free(w->eid);
    free(w->key);
    free(w);
}

static void s3_join_all(s3_writer *w)
{
    for (unsigned i = 0; i < w->nslots; i++)
        s3_part_join(w, &w->slots[i]);
}

int s3_abort_upload(s3_repo *r, const char *full_key, const char *upload_id, pb_error *err)
{
    char *eid = s3_encode(upload_id, false);
    char *query = eid ? s3_printf("uploadId=%s", eid) : NULL;
    s3_req q = {.method = "DELETE", .key = full_key, .query = query};
    int rc = query ? s3_do(r, &q, err)
                   : pb_fail(err, PB_ENOMEM, "S3 abort upload: out of memory");
    pb_buf_free(&q.resp);
    free(query);
    free(eid);
    return rc;
}

static int s3_complete(s3_writer *w, pb_error *err)
{
    pb_buf x = {0};
    int rc = pb_buf_append(&x, "<CompleteMultipartUpload>", 25);
    for (unsigned i = 0; rc == 0 && i < w->nparts; i++) {
        char part[256];
        int n = snprintf(part, sizeof(part), "<Part><PartNumber>%u</PartNumber><ETag>%s</ETag>"
                         "</Part>", i + 1, w->etags[i]);
        rc = pb_buf_append(&x, part, (size_t)n);
    }
    if (rc == 0)
        rc = pb_buf_append(&x, "</CompleteMultipartUpload>", 26);
    char *query = s3_printf("uploadId=%s", w->eid);
    if (rc || !query) {
        rc = pb_fail(err, PB_ENOMEM, "S3 complete s3://%s/%s: out of memory", w->r->bucket,
                     w->key);
        goto out;
    }
    s3_req q = {.method = "POST", .key = w->key, .query = query, .body = x.data,
                .body_len = x.len};
    rc = s3_do(w->r, &q, err);
    if (rc == 0) {
        /* S3 may answer 200 and still report an error in the body. */
        const char *b = (const char *)q.resp.data, *e = b + q.resp.len;
        char *code = b ? s3_xml_get(b, e, "Code", NULL) : NULL;
        if (!b || !memmem(b, q.resp.len, "CompleteMultipartUploadResult", 29) || code)
            rc = pb_fail(err, PB_EREMOTE, "S3 complete multipart s3://%s/%s (%u parts) failed: %s",
                         w->r->bucket, w->key, w->nparts, code ? code : "unexpected answer");
        free(code);
    }
    pb_buf_free(&q.resp);
out:
    pb_buf_free(&x);
    free(query);
    return rc;
}

int s3_writer_commit(void *wv, pb_error *err)
{
    s3_writer *w = wv;
    pb_error e = PB_ERROR_INIT;
    int rc = w->failed;
    if (rc) {
        e = w->ferr;
    } else if (!w->upload_id) {
        s3_part *p = &w->slots[w->cur];
        rc = s3_put_full(w->r, w->key, p->buf ? p->buf : (const uint8_t *)"", p->len, &e);
    } else {
        s3_part *p = &w->slots[w->cur];
        if (p->len && w->nparts >= S3_MAX_PARTS) {
            rc = pb_fail(&e, PB_EINVAL, "S3 s3://%s/%s: more than %u parts", w->r->bucket,
                         w->key, S3_MAX_PARTS);
        } else if (p->len && (rc = s3_etags_reserve(w, &e)) == 0) {
            /* The last part may be smaller than 5 MiB; upload it here, in this thread. */
            p->number = ++w->nparts;
            rc = s3_upload_part(w, p, &e);
            if (rc == 0)
                memcpy(w->etags[p->number - 1], p->etag, sizeof(p->etag));
        }
        s3_join_all(w);
        if (rc == 0 && w->failed) {
            rc = w->failed;
            e = w->ferr;
        }
        if (rc == 0)
            rc = s3_complete(w, &e);
    }
    if (rc && w->upload_id) {
        s3_join_all(w);
        pb_error ae = PB_ERROR_INIT;
        if (s3_abort_upload(w->r, w->key, w->upload_id, &ae) != 0)
            pb_warn("%s (repo_cleanup removes the leftover upload)", ae.msg);
    }
    if (rc && err)
        *err = e;
    s3_writer_free(w);
    return rc;
}

void s3_writer_abort(void *wv)
{
    s3_writer *w = wv;
    if (!w)
        return;
    s3_join_all(w);
    if (w->upload_id) {
        pb_error e = PB_ERROR_INIT;
        if (s3_abort_upload(w->r, w->key, w->upload_id, &e) != 0)
            pb_warn("%s (repo_cleanup removes the leftover upload)", e.msg);
    }
    s3_writer_free(w);
}

/* ---------- cleanup: abort unfinished multipart uploads under the prefix ---------- */

/* "2026-12-01T08:33:10.000Z" -> seconds since the epoch; 0 when it does not parse. */
static time_t s3_parse_time(const char *s)
{
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    if (!s || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                     &tm.tm_hour, &tm.tm_min, &tm.tm_sec) != 6)
        return 0;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return timegm(&tm);
}

/* Whose upload is it? Under backup/ with the writer lock held: a writer that is gone
 * (only the holder writes there, and the holder is us). Anything else (WAL, pushed
 * without the lock) only once it is older than REPO_STALE_UPLOAD_SECS; an upload whose
 * start time does not parse is kept. */
static bool s3_upload_is_stale(const s3_repo *r, const char *key, const char *initiated,
                               bool locked)
{
    const char *rel = key + strlen(r->prefix);
    if (locked && strncmp(rel, "backup/", 7) == 0)
        return true;
    time_t t = s3_parse_time(initiated);
    return t > 0 && time(NULL) - t > REPO_STALE_UPLOAD_SECS;
}

static int s3_cleanup_page(s3_repo *r, const char *xml, size_t len, bool locked,
                           unsigned *aborted, pb_error *err)
{
    const char *p = xml, *end = xml + len, *u, *ue;
    while (s3_xml_block(p, end, "Upload", &u, &ue)) {
        char *key = s3_xml_get(u, ue, "Key", NULL);
        char *id = s3_xml_get(u, ue, "UploadId", NULL);
        char *initiated = s3_xml_get(u, ue, "Initiated", NULL);
        int rc = 0;
        if (key && id && strncmp(key, r->prefix, strlen(r->prefix)) == 0 &&
            s3_upload_is_stale(r, key, initiated, locked)) {
            rc = s3_abort_upload(r, key, id, err);
            /* Gone already (another cleanup, or completed meanwhile): fine. */
            if (rc == PB_ENOENT)
                rc = 0;
            else if (rc == 0)
                (*aborted)++;
        }
        free(key);
        free(id);
        free(initiated);
        if (rc)
            return rc;
        p = ue;
    }
    return 0;
}

int s3_cleanup_uploads(void *impl, bool locked, pb_error *err)
{
    s3_repo *r = impl;
    char *ep = s3_encode(r->prefix, false);
    char *kmark = NULL, *umark = NULL;
    unsigned aborted = 0;
    int rc = ep ? 0 : pb_fail(err, PB_ENOMEM, "cleanup %s: out of memory", r->location);
    bool more = rc == 0;
    while (more) {
        char *ek = kmark ? s3_encode(kmark, false) : NULL;
        char *eu = umark ? s3_encode(umark, false) : NULL;
        /* Sorted: key-marker < prefix < upload-id-marker < uploads. */
        char *query = s3_printf("%s%s%sprefix=%s%s%s&uploads=", ek ? "key-marker=" : "",
                                ek ? ek : "", ek ? "&" : "", ep, eu ? "&upload-id-marker=" : "",
                                eu ? eu : "");
        free(ek);
        free(eu);
        s3_req q = {.method = "GET", .query = query};
        rc = query ? s3_do(r, &q, err)
                   : pb_fail(err, PB_ENOMEM, "cleanup %s: out of memory", r->location);
        free(query);
        if (rc == 0)
            rc = s3_cleanup_page(r, (const char *)q.resp.data, q.resp.len, locked, &aborted,
                                 err);
        more = false;
        if (rc == 0) {
            const char *b = (const char *)q.resp.data, *e = b + q.resp.len;
            char *t = s3_xml_get(b, e, "IsTruncated", NULL);
            more = t && strcmp(t, "true") == 0;
            free(t);
            free(kmark);
            free(umark);
            kmark = more ? s3_xml_get(b, e, "NextKeyMarker", NULL) : NULL;
            umark = more ? s3_xml_get(b, e, "NextUploadIdMarker", NULL) : NULL;
            if (more && !kmark)
                rc = pb_fail(err, PB_EREMOTE, "cleanup %s: truncated upload listing without "
                             "NextKeyMarker", r->location);
        }
        pb_buf_free(&q.resp);
        more = more && rc == 0;
    }
    if (rc == 0 && aborted)
        pb_info("%s: aborted %u unfinished multipart upload%s", r->location, aborted,
                aborted == 1 ? "" : "s");
    free(kmark);
    free(umark);
    free(ep);
    return rc;
}
