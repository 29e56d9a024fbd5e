/*
 * engine/storage/s3/s3_internal.h — what the S3 driver's files share. Private to
 * engine/storage/s3/ (and the fuzz target of its XML reading, tests/fuzz/fuzz_s3xml.c).
 *
 * The driver is split by concern: s3_http.c runs one request (SigV4 through libcurl,
 * retries with backoff, the per-repository handle pool, libcurl's global init);
 * s3_xml.c reads the answers; s3_multipart.c is the streaming writer and the cleanup
 * of unfinished uploads; s3_ops.c is the repo_driver itself (whole-object operations,
 * listing, open/free).
 * Only these files include <curl/curl.h> (tests/deps_test.sh checks it).
 */
#ifndef PB_ENGINE_STORAGE_S3_INTERNAL_H
#define PB_ENGINE_STORAGE_S3_INTERNAL_H

#include "engine/storage/storage_internal.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define S3_MIN_PART ((size_t)5 << 20)          /* S3 minimum for every part but the last */
#define S3_MAX_PART ((size_t)5 << 30)          /* S3 maximum part size */
#define S3_POOL_MAX 16
#define S3_BACKOFF_BASE_MS 100u

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
    repo_requests requests; /* every HTTP request sent, by kind (repo_requests_add) */
} s3_repo;

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
    int64_t range_total; /* the object's size from a 206's Content-Range; -1 = none */
    /* per attempt */
    size_t body_off;
    pb_buf errbody;      /* body of a non-2xx answer, capped */
    bool overflow;       /* more bytes than dst_cap arrived */
    bool nomem;
    CURL *h;
} s3_req;

/* ---------- s3_http.c ---------- */

/* libcurl's global init, once per process (pthread_once), before the first handle:
 * repo_s3_open calls it, so programs that never open an S3 repository never load
 * libcurl's TLS state. PB_EREMOTE when libcurl cannot initialise. */
int s3_global_init(pb_error *err);
/* malloc'd printf; NULL when out of memory. */
char *s3_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Percent-encode as SigV4 wants it (uppercase hex); keep '/' only when keep_slash
 * (object paths), never in query values. Returns malloc'd text or NULL. */
char *s3_encode(const char *s, bool keep_slash);
/* Run q with retries. On success q->status is 2xx and q->resp / q->dst_len hold the
 * body. The caller frees q->resp (also on failure). */
int s3_do(s3_repo *r, s3_req *q, pb_error *err);
/* Frees the handles pooled in r (not r itself). */
void s3_pool_free(s3_repo *r);

/* ---------- s3_xml.c (minimal XML reading: S3 answers are flat and machine-written) */

/* A malloc'd, unescaped copy of the text of the first <tag>...</tag> in [p, end), *next
 * (when not NULL) set past the closing tag; NULL when absent or out of memory, which
 * callers treat the same as a malformed answer. */
char *s3_xml_get(const char *p, const char *end, const char *tag, const char **next);
/* The raw extent of the next <tag>...</tag> in [p, end): *b at its content, *be just
 * past the closing tag. false when there is none. */
bool s3_xml_block(const char *p, const char *end, const char *tag, const char **b,
                  const char **be);

/* ---------- s3_multipart.c (the streaming writer behind repo_writer_*) ---------- */

int s3_writer_open(void *impl, const char *key, void **out, pb_error *err);
int s3_writer_write(void *wv, const void *data, size_t len, pb_error *err);
/* Commit and abort both free the writer. */
int s3_writer_commit(void *wv, pb_error *err);
void s3_writer_abort(void *wv);
/* Abort the multipart upload upload_id of full_key (full: prefix included). */
int s3_abort_upload(s3_repo *r, const char *full_key, const char *upload_id, pb_error *err);
/* repo_cleanup: abort the unfinished multipart uploads under the prefix (see
 * REPO_STALE_UPLOAD_SECS for whose). */
int s3_cleanup_uploads(void *impl, bool locked, pb_error *err);

/* ---------- s3_http.c: keys and the one-request PUT ---------- */

/* prefix + key, malloc'd; NULL when out of memory. */
char *s3_full_key(const s3_repo *r, const char *key);
int s3_check_key(const s3_repo *r, const char *key, pb_error *err);
/* One PUT of a whole object under its full key. */
int s3_put_full(s3_repo *r, const char *full, const void *data, size_t len, pb_error *err);

#endif
