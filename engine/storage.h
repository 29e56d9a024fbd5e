/*
 * engine/storage.h — the repository storage interface (prefix repo_).
 * One small interface, two drivers: posix (a local directory) and s3
 * (S3-compatible object storage through libcurl). Keys are '/'-separated
 * relative names such as "backup/20261130-101500F/pack/000001".
 *
 * Objects are immutable once written: repo_put and repo_writer_commit make an
 * object visible atomically (posix: temp name, fsync, rename, fsync dir; s3:
 * final PUT or CompleteMultipartUpload). Writes do not linger in the page cache.
 */
#ifndef PB_ENGINE_STORAGE_H
#define PB_ENGINE_STORAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/pb.h"

typedef struct repo repo;
typedef struct repo_writer repo_writer;

typedef struct repo_opts {
    const char *location;    /* "/path/to/dir" or "s3://bucket/prefix" */
    const char *s3_endpoint; /* e.g. "http://127.0.0.1:8080"; NULL = AWS default */
    const char *s3_region;   /* default "us-east-1" */
    const char *s3_key;      /* access key id */
    const char *s3_secret;   /* secret access key */
    const char *s3_token;    /* session token or NULL */
    const char *s3_ca_file;  /* CA bundle for TLS verification or NULL */
    bool s3_insecure;        /* disable TLS verification (tests only) */
    bool s3_path_style;      /* path-style addressing (default true for custom endpoints) */
    size_t s3_part_size;     /* multipart part size, default 16 MiB */
    unsigned s3_parallel;    /* transfers in flight, default 4 */
    unsigned s3_retries;     /* attempts after the first, default 5 */
} repo_opts;

#define REPO_OPTS_INIT {NULL, NULL, "us-east-1", NULL, NULL, NULL, NULL, false, true, \
                        16u << 20, 4, 5}

/* Open a repository location. Does not create anything. */
int repo_open(repo **out, const repo_opts *opts, pb_error *err);
void repo_free(repo *r);
/* Human-readable location for messages ("/srv/repo" or "s3://b/p"). */
const char *repo_location(const repo *r);
bool repo_is_local(const repo *r);

/* Whole-object operations. repo_get allocates *out (caller frees with free()). */
int repo_put(repo *r, const char *key, const void *data, size_t len, pb_error *err);
int repo_get(repo *r, const char *key, void **out, size_t *out_len, pb_error *err);
/* Read len bytes at offset into buf; a short object is PB_ECORRUPT. */
int repo_get_range(repo *r, const char *key, uint64_t offset, size_t len, void *buf,
                   pb_error *err);
/* PB_ENOENT when absent; size may be NULL. */
int repo_stat(repo *r, const char *key, uint64_t *size, pb_error *err);
int repo_delete(repo *r, const char *key, pb_error *err);

/* List keys under prefix (recursively), in lexical order. cb returning non-zero stops
 * the listing and that value is returned. */
typedef int (*repo_list_cb)(void *ctx, const char *key, uint64_t size);
int repo_list(repo *r, const char *prefix, repo_list_cb cb, void *ctx, pb_error *err);

/* Streaming writer for large objects (packs). Nothing is visible before commit;
 * commit and abort both free the writer. */
int repo_writer_open(repo *r, const char *key, repo_writer **out, pb_error *err);
int repo_writer_write(repo_writer *w, const void *data, size_t len, pb_error *err);
int repo_writer_commit(repo_writer *w, pb_error *err);
void repo_writer_abort(repo_writer *w);

/* Remove leftovers of interrupted writes (temp files, unfinished multipart uploads). */
int repo_cleanup(repo *r, pb_error *err);

#endif
