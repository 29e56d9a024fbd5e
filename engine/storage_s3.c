/*
 * engine/storage_s3.c — the S3 driver behind repo_* (libcurl, SigV4).
 *
 * Why it looks the way it does (facts checked against libcurl 7.88 and Swift s3api):
 * - libcurl signs (CURLOPT_AWS_SIGV4) but does not canonicalise query strings, so every
 *   query here is built sorted and percent-encoded by hand ("uploads=" with '=').
 * - libcurl 7.88 does not add x-amz-content-sha256; we send UNSIGNED-PAYLOAD (libcurl
 *   has no SHA-256 API and we do not hand-roll crypto). Object integrity is checked a
 *   layer up with per-object XXH3 checksums; TLS protects the bytes in transit.
 * - The access key may contain ':' (Swift "test:tester"), so the credentials go through
 *   CURLOPT_USERNAME/CURLOPT_PASSWORD, never "user:pass".
 * - Every PUT sets its size (CURLOPT_INFILESIZE_LARGE): AWS answers 411 to a chunked
 *   PUT and signs nothing for it.
 * Easy handles are kept in a small pool per repository so connections are reused and
 * several threads may use one repository at once.
 */
#include "engine/storage_internal.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define S3_MIN_PART ((size_t)5 << 20)          /* S3 minimum for every part but the last */
#define S3_MAX_PART ((size_t)5 << 30)          /* S3 maximum part size */
#define S3_MAX_PARTS 10000u
#define S3_PARTS_PER_STEP 1000u                /* part size doubles every 1000 parts */
#define S3_POOL_MAX 16
#define S3_ERRBODY_MAX 4096                    /* bytes of an error body kept for messages */
#define S3_BACKOFF_BASE_MS 100u
#define S3_BACKOFF_CAP_MS 5000u

typedef struct s3_repo {
    char *bucket;
    char *prefix;   /* "" or ends with '/' */
    char *base_url; /* URL of the bucket without trailing '/', path-style or virtual-host */
    char *key;
    char *secret;
    char *token_hdr; /* "x-amz-security-token: ..." or NULL */
    char *ca_file;
    char sigv4[96];
    char location[512];
    bool insecure;
    size_t part_size;
    unsigned parallel;
    unsigned retries;
    unsigned list_max_keys; /* 0 = server default (1000); a knob for tests */
    unsigned backoff_base_ms;
    bool no_cond_put; /* the server answered 501 to If-None-Match: * once */
    pthread_mutex_t lock; /* guards pool/npool and rng */
    CURL *pool[S3_POOL_MAX];
    unsigned npool;
    uint64_t rng;
} s3_repo;

/* ---------- small helpers ---------- */

static char *s3_strdup(const char *s)
{
    return s ? strdup(s) : NULL;
}

static char *s3_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *s3_printf(const char *fmt, ...)
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
static char *s3_encode(const char *s, bool keep_slash)
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

/* ---------- minimal XML reading (S3 answers are flat and machine-written) ---------- */

/* Decode the five predefined entities and numeric references in place. */
static void s3_xml_unescape(char *s)
{
    static const struct { const char *ent; char c; } ents[] = {
        {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
    char *o = s;
    for (const char *p = s; *p;) {
        if (*p != '&') {
            *o++ = *p++;
            continue;
        }
        bool done = false;
        for (size_t i = 0; i < sizeof(ents) / sizeof(ents[0]) && !done; i++) {
            size_t l = strlen(ents[i].ent);
            if (strncmp(p, ents[i].ent, l) == 0) {
                *o++ = ents[i].c;
                p += l;
                done = true;
            }
        }
        if (!done && p[1] == '#') {
            char *end;
            bool hexa = p[2] == 'x' || p[2] == 'X';
            unsigned long cp = strtoul(p + (hexa ? 3 : 2), &end, hexa ? 16 : 10);
            if (*end == ';' && cp > 0 && cp < 0x110000) {
                /* UTF-8 encode the code point */
                if (cp < 0x80) {
                    *o++ = (char)cp;
                } else if (cp < 0x800) {
                    *o++ = (char)(0xC0 | (cp >> 6));
                    *o++ = (char)(0x80 | (cp & 0x3F));
                } else if (cp < 0x10000) {
                    *o++ = (char)(0xE0 | (cp >> 12));
                    *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
                    *o++ = (char)(0x80 | (cp & 0x3F));
                } else {
                    *o++ = (char)(0xF0 | (cp >> 18));
                    *o++ = (char)(0x80 | ((cp >> 12) & 0x3F));
                    *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
                    *o++ = (char)(0x80 | (cp & 0x3F));
                }
                p = end + 1;
                done = true;
            }
        }
        if (!done)
            *o++ = *p++;
    }
    *o = '\0';
}

/* Find <tag>...</tag> within [p, end); on success return a malloc'd, unescaped copy of
 * the text and set *next past the closing tag. NULL when absent (or out of memory, which
 * callers treat the same as a malformed answer). */
char *s3_xml_get(const char *p, const char *end, const char *tag, const char **next)
{
    char open[64], close[64];
    if (!p)
        return NULL;
    snprintf(open, sizeof(open), "<%s>", tag);
    snprintf(close, sizeof(close), "</%s>", tag);
    const char *a = memmem(p, (size_t)(end - p), open, strlen(open));
    if (!a)
        return NULL;
    a += strlen(open);
    const char *b = memmem(a, (size_t)(end - a), close, strlen(close));
    if (!b)
        return NULL;
    char *out = strndup(a, (size_t)(b - a));
    if (!out)
        return NULL;
    s3_xml_unescape(out);
    if (next)
        *next = b + strlen(close);
    return out;
}

/* Find the raw extent of the next <tag>...</tag> in [p, end): *b at its content, *be just
 * past the closing tag. */
bool s3_xml_block(const char *p, const char *end, const char *tag, const char **b,
                  const char **be)
{
    char open[64], close[64];
    int ol = snprintf(open, sizeof(open), "<%s>", tag);
    int cl = snprintf(close, sizeof(close), "</%s>", tag);
    const char *a = p ? memmem(p, (size_t)(end - p), open, (size_t)ol) : NULL;
    const char *z = a ? memmem(a, (size_t)(end - a), close, (size_t)cl) : NULL;
    if (!z)
        return false;
    *b = a + ol;
    *be = z + cl;
    return true;
}

/* ---------- one HTTP request with retries ---------- */

typedef struct s3_req {
    /* in */
    const char *method;  /* GET HEAD PUT POST DELETE */
    const char *key;     /* full object key (prefix included) or NULL for the bucket */
    const char *query;   /* canonical query string or NULL */
    const void *body;    /* request body for PUT/POST */
    size_t body_len;
    const char *range;   /* "bytes=a-b" or NULL */
    bool if_none_match;  /* PUT only if absent ("If-None-Match: *") */
    void *dst;           /* fixed destination (range reads) or NULL to use resp */
    size_t dst_cap;
    /* out */
    pb_buf resp;         /* response body of a 2xx answer when dst is NULL */
    size_t dst_len;
    long status;
    char etag[128];
    curl_off_t content_length;
    /* per attempt */
    size_t body_off;
    pb_buf errbody;      /* body of a non-2xx answer, capped */
    bool overflow;       /* more bytes than dst_cap arrived */
    bool nomem;
    CURL *h;
} s3_req;

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

/* Run q with retries. On success q->status is 2xx and q->resp / q->dst_len hold the
 * body. The caller frees q->resp (also on failure). */
static int s3_do(s3_repo *r, s3_req *q, pb_error *err)
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
        q->status = 0;
        errbuf[0] = '\0';
        if (attempt)
            curl_easy_reset(q->h);
        struct curl_slist *hdrs = s3_setup(r, q, url, errbuf, &nomem);
        if (nomem) {
            rc = pb_fail(err, PB_ENOMEM, "S3 %s %s: out of memory", q->method, name);
            goto out;
        }
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
        else
            retry = q->status >= 500 || q->status == 429;
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

static char *s3_full_key(const s3_repo *r, const char *key)
{
    return s3_printf("%s%s", r->prefix, key);
}

static int s3_check_key(const s3_repo *r, const char *key, pb_error *err)
{
    if (!key || !*key)
        return pb_fail(err, PB_EINVAL, "%s: empty object key", r->location);
    return 0;
}

/* ---------- whole-object operations ---------- */

static int s3_put_full(s3_repo *r, const char *full, const void *data, size_t len,
                       pb_error *err)
{
    s3_req q = {.method = "PUT", .key = full, .body = data, .body_len = len};
    int rc = s3_do(r, &q, err);
    pb_buf_free(&q.resp);
    return rc;
}

static int s3_writer_open(void *impl, const char *key, void **out, pb_error *err);
static int s3_writer_write(void *wv, const void *data, size_t len, pb_error *err);
static int s3_writer_commit(void *wv, pb_error *err);

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
    snprintf(range, sizeof(range), "bytes=%" PRIu64 "-%" PRIu64, off, off + len - 1);
    s3_req q = {.method = "GET", .key = s3_full_key(r, key), .range = range, .dst = buf,
                .dst_cap = len};
    if (!q.key)
        return pb_fail(err, PB_ENOMEM, "S3 GET %s: out of memory", key);
    rc = s3_do(r, &q, err);
    if (rc == 0 && q.status != 206 && !(q.status == 200 && off == 0))
        rc = pb_fail(err, PB_EREMOTE, "S3 GET s3://%s/%s: range %s answered HTTP %ld, not 206",
                     r->bucket, q.key, range, q.status);
    else if (rc == 0 && q.dst_len != len)
        rc = pb_fail(err, PB_ECORRUPT, "S3 GET s3://%s/%s: object too short: range %s gave "
                     "%zu of %zu bytes", r->bucket, q.key, range, q.dst_len, len);
    pb_buf_free(&q.resp);
    free((char *)q.key);
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

/* ---------- multipart upload ---------- */

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

static int s3_writer_open(void *impl, const char *key, void **out, pb_error *err)
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

static int s3_writer_write(void *wv, const void *data, size_t len, pb_error *err)
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

static int s3_abort_upload(s3_repo *r, const char *full_key, const char *upload_id,
                           pb_error *err)
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

static int s3_writer_commit(void *wv, pb_error *err)
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

static void s3_writer_abort(void *wv)
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

static int s3_cleanup(void *impl, bool locked, pb_error *err)
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

/* ---------- open / free ---------- */

static void s3_free(void *impl)
{
    s3_repo *r = impl;
    if (!r)
        return;
    for (unsigned i = 0; i < r->npool; i++)
        curl_easy_cleanup(r->pool[i]);
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

/* Test hook (declared in tests/unit/s3_test.c): page size of listings, so paging is
 * exercised without thousands of objects. 0 restores the server default. */
void repo_s3_test_set_list_page(void *impl, unsigned max_keys);
void repo_s3_test_set_list_page(void *impl, unsigned max_keys)
{
    ((s3_repo *)impl)->list_max_keys = max_keys;
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
    .cleanup = s3_cleanup,
    .put_new = s3_put_new,
};
