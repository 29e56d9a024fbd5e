/*
 * engine/storage/s3/s3_http.c — one S3 request: URL and headers, SigV4 signing through
 * libcurl, retries with backoff, and the pool of easy handles.
 *
 * Why it looks the way it does (facts checked against libcurl 7.88 and Swift s3api):
 * - libcurl signs (CURLOPT_AWS_SIGV4) but does not canonicalise query strings, so every
 *   query is built sorted and percent-encoded by the caller (s3_encode; "uploads=" with '=').
 * - libcurl 7.88 does not add x-amz-content-sha256; we send UNSIGNED-PAYLOAD (libcurl
 *   has no SHA-256 API and we do not hand-roll crypto). Object integrity is checked a
 *   layer up with per-object XXH3 checksums; TLS protects the bytes in transit.
 * - The access key may contain ':' (Swift "test:tester"), so the credentials go through
 *   CURLOPT_USERNAME/CURLOPT_PASSWORD, never "user:pass".
 * - Every PUT sets its size (CURLOPT_INFILESIZE_LARGE): AWS answers 411 to a chunked
 *   PUT and signs nothing for it.
 * Easy handles are kept in a small pool per repository so connections are reused and
 * several threads may use one repository at once.
 *
 * curl_global_init lives here, behind pthread_once, rather than in main: libcurl is
 * this driver's business, and no other file of the tree includes <curl/curl.h>.
 */
#include "engine/storage/s3/s3_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define S3_ERRBODY_MAX 4096                    /* bytes of an error body kept for messages */
#define S3_BACKOFF_CAP_MS 5000u

/* Written once, by the pthread_once routine, then only read. */
static pthread_once_t s3_global_once = PTHREAD_ONCE_INIT;
static CURLcode s3_global_rc = CURLE_OK;

static void s3_global_init_once(void)
{
    s3_global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int s3_global_init(pb_error *err)
{
    pthread_once(&s3_global_once, s3_global_init_once);
    if (s3_global_rc != CURLE_OK)
        return pb_fail(err, PB_EREMOTE, "S3 repository: libcurl cannot initialise: %s",
                       curl_easy_strerror(s3_global_rc));
    return 0;
}

char *s3_printf(const char *fmt, ...)
{
    va_list ap;
    char *out = NULL;
    va_start(ap, fmt);
    if (vasprintf(&out, fmt, ap) < 0)
        out = NULL;
    va_end(ap);
    return out;
}

static bool s3_unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_' || c == '.' || c == '~';
}

/* Percent-encode as SigV4 wants it (uppercase hex); keep '/' only when keep_slash
 * (object paths), never in query values. Returns malloc'd text or NULL. */
char *s3_encode(const char *s, bool keep_slash)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(s);
    char *out = malloc(3 * n + 1), *o = out;
    if (!out)
        return NULL;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (s3_unreserved(*p) || (keep_slash && *p == '/')) {
            *o++ = (char)*p;
        } else {
            *o++ = '%';
            *o++ = hex[*p >> 4];
            *o++ = hex[*p & 15];
        }
    }
    *o = '\0';
    return out;
}

static size_t s3_write_cb(char *data, size_t size, size_t nmemb, void *ud)
{
    s3_req *q = ud;
    size_t n = size * nmemb;
    long status = 0;
    curl_easy_getinfo(q->h, CURLINFO_RESPONSE_CODE, &status);
    if (status < 200 || status >= 300) {
        size_t room = S3_ERRBODY_MAX - q->errbody.len;
        if (room > 0 && pb_buf_append(&q->errbody, data, n < room ? n : room) != 0)
            q->nomem = true;
        return q->nomem ? 0 : n;
    }
    if (q->dst) {
        if (n > q->dst_cap - q->dst_len) {
            q->overflow = true;
            return 0;
        }
        memcpy((uint8_t *)q->dst + q->dst_len, data, n);
        q->dst_len += n;
        return n;
    }
    if (pb_buf_append(&q->resp, data, n) != 0) {
        q->nomem = true;
        return 0;
    }
    return n;
}

static size_t s3_read_cb(char *out, size_t size, size_t nmemb, void *ud)
{
    s3_req *q = ud;
    size_t n = size * nmemb, left = q->body_len - q->body_off;
    if (n > left)
        n = left;
    if (n)
        memcpy(out, (const uint8_t *)q->body + q->body_off, n);
    q->body_off += n;
    return n;
}

/* libcurl rewinds the upload when it must resend (e.g. after a redirect). */
static int s3_seek_cb(void *ud, curl_off_t off, int origin)
{
    s3_req *q = ud;
    if (origin != SEEK_SET || off < 0 || (uint64_t)off > q->body_len)
        return CURL_SEEKFUNC_FAIL;
    q->body_off = (size_t)off;
    return CURL_SEEKFUNC_OK;
}

static size_t s3_header_cb(char *data, size_t size, size_t nmemb, void *ud)
{
    s3_req *q = ud;
    size_t n = size * nmemb;
    /* Size the answer buffer once for a whole-object GET instead of doubling up to it
     * (only for a 2xx answer; capped so a bad header cannot make us allocate wildly). */
    if (n > 15 && strncasecmp(data, "Content-Length:", 15) == 0 && !q->dst &&
        strcmp(q->method, "GET") == 0) {
        long status = 0;
        curl_easy_getinfo(q->h, CURLINFO_RESPONSE_CODE, &status);
        unsigned long long cl = strtoull(data + 15, NULL, 10);
        if (status >= 200 && status < 300 && cl <= ((size_t)1 << 30) &&
            pb_buf_reserve(&q->resp, (size_t)cl) != 0)
            q->nomem = true;
        return q->nomem ? 0 : n;
    }
    /* "Content-Range: bytes a-b/total": a ranged GET tells the object's size too. */
    if (n > 14 && strncasecmp(data, "Content-Range:", 14) == 0) {
        char line[128]; /* libcurl's header data is not NUL-terminated */
        size_t l = n < sizeof(line) - 1 ? n : sizeof(line) - 1;
        memcpy(line, data, l);
        line[l] = '\0';
        const char *slash = strchr(line, '/');
        char *end = NULL;
        unsigned long long total = slash ? strtoull(slash + 1, &end, 10) : 0;
        if (slash && end > slash + 1 && total <= (unsigned long long)INT64_MAX)
            q->range_total = (int64_t)total;
        return n;
    }
    if (n > 5 && strncasecmp(data, "ETag:", 5) == 0) {
        const char *v = data + 5;
        size_t l = n - 5;
        while (l && (*v == ' ' || *v == '\t'))
            v++, l--;
        while (l && (v[l - 1] == '\r' || v[l - 1] == '\n' || v[l - 1] == ' '))
            l--;
        if (l < sizeof(q->etag)) {
            memcpy(q->etag, v, l);
            q->etag[l] = '\0';
        }
    }
    return n;
}

static CURL *s3_handle_get(s3_repo *r)
{
    CURL *h = NULL;
    pthread_mutex_lock(&r->lock);
    if (r->npool)
        h = r->pool[--r->npool];
    pthread_mutex_unlock(&r->lock);
    if (h)
        curl_easy_reset(h); /* keeps the connection cache: that is the point */
    else
        h = curl_easy_init();
    return h;
}

static void s3_handle_put(s3_repo *r, CURL *h)
{
    pthread_mutex_lock(&r->lock);
    if (r->npool < S3_POOL_MAX) {
        r->pool[r->npool++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&r->lock);
    if (h)
        curl_easy_cleanup(h);
}

void s3_pool_free(s3_repo *r)
{
    for (unsigned i = 0; i < r->npool; i++)
        curl_easy_cleanup(r->pool[i]);
    r->npool = 0;
}

/* Full jitter between half and all of min(cap, base * 2^attempt). */
static void s3_backoff(s3_repo *r, unsigned attempt)
{
    uint64_t ms = r->backoff_base_ms;
    for (unsigned i = 0; i < attempt && ms < S3_BACKOFF_CAP_MS; i++)
        ms *= 2;
    if (ms > S3_BACKOFF_CAP_MS)
        ms = S3_BACKOFF_CAP_MS;
    pthread_mutex_lock(&r->lock);
    r->rng ^= r->rng << 13; /* xorshift64 */
    r->rng ^= r->rng >> 7;
    r->rng ^= r->rng << 17;
    uint64_t rnd = r->rng;
    pthread_mutex_unlock(&r->lock);
    ms = ms / 2 + (ms > 1 ? rnd % (ms / 2 + 1) : 0);
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static char *s3_url(const s3_repo *r, const s3_req *q)
{
    char *path = s3_encode(q->key ? q->key : "", true);
    if (!path)
        return NULL;
    char *url = s3_printf("%s/%s%s%s", r->base_url, path, q->query ? "?" : "",
                          q->query ? q->query : "");
    free(path);
    return url;
}

/* "s3://bucket/prefix/key" for messages. */
static void s3_name(const s3_repo *r, const char *key, char *out, size_t cap)
{
    snprintf(out, cap, "s3://%s/%s", r->bucket, key ? key : "");
}

static bool s3_curl_retryable(CURLcode rc)
{
    switch (rc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_SSL_CONNECT_ERROR:
        return true;
    default:
        return false;
    }
}

/* Set the options of one attempt. Returns a curl_slist the caller frees, or NULL with
 * *nomem set. */
static struct curl_slist *s3_setup(s3_repo *r, s3_req *q, const char *url, char *errbuf,
                                   bool *nomem)
{
    CURL *h = q->h;
    struct curl_slist *hdrs = NULL, *t;
    /* No "Expect:" removal here: libcurl 7.88 would sign the empty header it does not
     * send. Its 100-continue for big bodies is welcome anyway (a 403 before 16 MiB). */
    const char *add[4] = {"x-amz-content-sha256: UNSIGNED-PAYLOAD", r->token_hdr, NULL,
                          q->if_none_match ? "If-None-Match: *" : NULL};
    char range_hdr[96];
    if (q->range) {
        snprintf(range_hdr, sizeof(range_hdr), "Range: %s", q->range);
        add[2] = range_hdr;
    }
    for (size_t i = 0; i < 4; i++) {
        if (!add[i])
            continue;
        t = curl_slist_append(hdrs, add[i]);
        if (!t) {
            curl_slist_free_all(hdrs);
            *nomem = true;
            return NULL;
        }
        hdrs = t;
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_AWS_SIGV4, r->sigv4);
    curl_easy_setopt(h, CURLOPT_USERNAME, r->key);
    curl_easy_setopt(h, CURLOPT_PASSWORD, r->secret);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, s3_write_cb);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, q);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, s3_header_cb);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, q);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    /* Larger socket reads/writes than libcurl's 16/64 KiB defaults: fewer callbacks and
     * syscalls per part. */
    curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 512L << 10);
    curl_easy_setopt(h, CURLOPT_UPLOAD_BUFFERSIZE, 512L << 10);
    /* A transfer that moves nothing for 60 s is dead; big objects may take long. */
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, r->insecure ? 0L : 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, r->insecure ? 0L : 2L);
    if (r->ca_file)
        curl_easy_setopt(h, CURLOPT_CAINFO, r->ca_file);
    if (strcmp(q->method, "HEAD") == 0) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (strcmp(q->method, "PUT") == 0 || strcmp(q->method, "POST") == 0) {
        /* POST goes through the upload path too, so libcurl signs it like a PUT and
         * adds no form Content-Type. */
        curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(h, CURLOPT_READFUNCTION, s3_read_cb);
        curl_easy_setopt(h, CURLOPT_READDATA, q);
        curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, s3_seek_cb);
        curl_easy_setopt(h, CURLOPT_SEEKDATA, q);
        curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)q->body_len);
        if (q->method[1] == 'O')
            curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "POST");
    } else if (strcmp(q->method, "GET") != 0) {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, q->method);
    }
    return hdrs;
}

/* Turn a final non-2xx answer into a pb_code and a message naming the object. */
static int s3_http_fail(s3_repo *r, s3_req *q, const char *name, unsigned attempts,
                        pb_error *err)
{
    const char *b = (const char *)q->errbody.data, *e = b + q->errbody.len;
    char *code = b ? s3_xml_get(b, e, "Code", NULL) : NULL;
    char *msg = b ? s3_xml_get(b, e, "Message", NULL) : NULL;
    int rc;
    const char *what = code ? code : "no S3 error code";
    bool auth = q->status == 403 || q->status == 401 ||
                (code && (strcmp(code, "AuthorizationHeaderMalformed") == 0 ||
                          strcmp(code, "InvalidToken") == 0 || strcmp(code, "ExpiredToken") == 0));
    if (auth)
        rc = pb_fail(err, PB_EAUTH,
                     "S3 %s %s refused: HTTP %ld %s (%s); check the access key, secret, "
                     "session token, region and clock",
                     q->method, name, q->status, what, msg ? msg : "no message");
    else if (q->status == 404 && !(code && strcmp(code, "NoSuchBucket") == 0))
        rc = pb_fail(err, PB_ENOENT, "S3 %s %s: no such object (HTTP 404 %s)", q->method,
                     name, what);
    else if (q->if_none_match && (q->status == 412 || q->status == 409))
        rc = pb_fail(err, PB_EEXIST, "S3 %s %s: object exists already (HTTP %ld %s)",
                     q->method, name, q->status, what);
    else if (q->if_none_match && q->status == 501)
        rc = pb_fail(err, PB_EUNSUPPORTED, "S3 %s %s: the server does not support "
                     "conditional PUT (HTTP 501 %s)", q->method, name, what);
    else if (q->status == 416)
        rc = pb_fail(err, PB_ECORRUPT, "S3 %s %s: range %s is beyond the object (HTTP 416)",
                     q->method, name, q->range ? q->range : "");
    else if (q->status >= 500 || q->status == 429)
        rc = pb_fail(err, PB_EREMOTE, "S3 %s %s failed after %u attempt%s: HTTP %ld %s (%s)",
                     q->method, name, attempts, attempts == 1 ? "" : "s", q->status, what,
                     msg ? msg : "no message");
    else
        rc = pb_fail(err, PB_EREMOTE, "S3 %s %s failed: HTTP %ld %s (%s)", q->method, name,
                     q->status, what, msg ? msg : "no message");
    free(code);
    free(msg);
    return rc;
}

/* Every attempt is a request the user pays for. A GET of the bucket is a listing. */
static void s3_count(s3_repo *r, const s3_req *q)
{
    repo_req_kind kind = REPO_REQ_GET;
    if (strcmp(q->method, "HEAD") == 0)
        kind = REPO_REQ_HEAD;
    else if (strcmp(q->method, "PUT") == 0 || strcmp(q->method, "POST") == 0)
        kind = REPO_REQ_PUT;
    else if (strcmp(q->method, "DELETE") == 0)
        kind = REPO_REQ_DEL;
    else if (q->range)
        kind = REPO_REQ_GET_RANGE;
    else if (!q->key)
        kind = REPO_REQ_LIST;
    repo_requests_add(&r->requests, kind);
}

/* One line per request at debug level: what a request cost in time and whether it
 * opened a connection (what an S3 restore waits on, docs/BENCHMARKS.md). */
static void s3_trace(s3_req *q, const char *name)
{
    double total = 0, start = 0;
    long conns = 0;
    curl_off_t got = 0;
    curl_easy_getinfo(q->h, CURLINFO_TOTAL_TIME, &total);
    curl_easy_getinfo(q->h, CURLINFO_STARTTRANSFER_TIME, &start);
    curl_easy_getinfo(q->h, CURLINFO_NUM_CONNECTS, &conns);
    curl_easy_getinfo(q->h, CURLINFO_SIZE_DOWNLOAD_T, &got);
    pb_debug("S3 %s %s%s%s: HTTP %ld, %lld bytes, %.1f ms (first byte %.1f ms)%s", q->method,
             name, q->range ? " " : "", q->range ? q->range : "", q->status, (long long)got,
             total * 1e3, start * 1e3, conns ? ", new connection" : "");
}

/* Run q with retries. On success q->status is 2xx and q->resp / q->dst_len hold the
 * body. The caller frees q->resp (also on failure). */
int s3_do(s3_repo *r, s3_req *q, pb_error *err)
{
    char name[1024], errbuf[CURL_ERROR_SIZE];
    char *url = s3_url(r, q);
    int rc = 0;
    unsigned attempt = 0;
    CURLcode crc = CURLE_OK;
    s3_name(r, q->key, name, sizeof(name));
    if (!url)
        return pb_fail(err, PB_ENOMEM, "S3 %s %s: out of memory", q->method, name);
    q->h = s3_handle_get(r);
    if (!q->h) {
        rc = pb_fail(err, PB_ENOMEM, "S3 %s %s: cannot create a curl handle", q->method, name);
        goto out;
    }
    for (;; attempt++) {
        bool nomem = false;
        q->resp.len = 0;
        q->errbody.len = 0;
        q->dst_len = 0;
        q->body_off = 0;
        q->overflow = q->nomem = false;
        q->etag[0] = '\0';
        q->range_total = -1;
        q->status = 0;
        errbuf[0] = '\0';
        if (attempt)
            curl_easy_reset(q->h);
        struct curl_slist *hdrs = s3_setup(r, q, url, errbuf, &nomem);
        if (nomem) {
            rc = pb_fail(err, PB_ENOMEM, "S3 %s %s: out of memory", q->method, name);
            goto out;
        }
        s3_count(r, q);
        crc = curl_easy_perform(q->h);
        curl_slist_free_all(hdrs);
        curl_easy_getinfo(q->h, CURLINFO_RESPONSE_CODE, &q->status);
        if (q->nomem) {
            rc = pb_fail(err, PB_ENOMEM, "S3 %s %s: out of memory for the answer", q->method,
                         name);
            goto out;
        }
        if (q->overflow) {
            rc = pb_fail(err, PB_EREMOTE, "S3 %s %s: server sent more than the %zu bytes asked",
                         q->method, name, q->dst_cap);
            goto out;
        }
        bool retry;
        if (crc != CURLE_OK)
            retry = s3_curl_retryable(crc);
        else /* 501 Not Implemented is the server's answer, not a passing fault: a
              * request it refuses (Swift s3api's If-None-Match) is refused every time */
            retry = (q->status >= 500 && q->status != 501) || q->status == 429;
        s3_trace(q, name);
        if (crc == CURLE_OK && q->status >= 200 && q->status < 300) {
            curl_easy_getinfo(q->h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &q->content_length);
            goto out;
        }
        if (!retry || attempt >= r->retries)
            break;
        pb_debug("S3 %s %s: attempt %u failed (%s), retrying", q->method, name, attempt + 1,
                 crc != CURLE_OK ? curl_easy_strerror(crc) : "HTTP error");
        s3_backoff(r, attempt);
    }
    if (crc != CURLE_OK)
        rc = pb_fail(err, PB_EREMOTE, "S3 %s %s failed after %u attempt%s: %s%s%s%s", q->method,
                     name, attempt + 1, attempt ? "s" : "", curl_easy_strerror(crc),
                     errbuf[0] ? " (" : "", errbuf, errbuf[0] ? ")" : "");
    else
        rc = s3_http_fail(r, q, name, attempt + 1, err);
out:
    if (q->h)
        s3_handle_put(r, q->h);
    q->h = NULL;
    pb_buf_free(&q->errbody);
    free(url);
    return rc;
}

/* ---------- keys and the one-request PUT (s3_ops.c and s3_multipart.c both use them) */

char *s3_full_key(const s3_repo *r, const char *key)
{
    return s3_printf("%s%s", r->prefix, key);
}

int s3_check_key(const s3_repo *r, const char *key, pb_error *err)
{
    if (!key || !*key)
        return pb_fail(err, PB_EINVAL, "%s: empty object key", r->location);
    return 0;
}

int s3_put_full(s3_repo *r, const char *full, const void *data, size_t len, pb_error *err)
{
    s3_req q = {.method = "PUT", .key = full, .body = data, .body_len = len};
    int rc = s3_do(r, &q, err);
    pb_buf_free(&q.resp);
    return rc;
}
