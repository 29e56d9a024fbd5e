/* engine/storage/storage_internal.h — the driver vtable behind repo_*. Private to
 * engine/storage/ (and its unit tests). */
#ifndef PB_ENGINE_STORAGE_INTERNAL_H
#define PB_ENGINE_STORAGE_INTERNAL_H

#include <stdbool.h>

#include "engine/storage/storage.h"

#include <stdbool.h>

typedef struct repo_driver {
    const char *name;
    void (*free)(void *impl);
    int (*put)(void *impl, const char *key, const void *data, size_t len, pb_error *err);
    int (*get)(void *impl, const char *key, void **out, size_t *out_len, pb_error *err);
    int (*get_range)(void *impl, const char *key, uint64_t off, size_t len, void *buf,
                     pb_error *err);
    int (*stat)(void *impl, const char *key, uint64_t *size, pb_error *err);
    int (*del)(void *impl, const char *key, pb_error *err);
    int (*list)(void *impl, const char *prefix, repo_list_cb cb, void *ctx, pb_error *err);
    int (*writer_open)(void *impl, const char *key, void **out, pb_error *err);
    int (*writer_write)(void *w, const void *data, size_t len, pb_error *err);
    int (*writer_commit)(void *w, pb_error *err);
    void (*writer_abort)(void *w);
    int (*cleanup)(void *impl, bool locked, pb_error *err);
    /* Remove key's own leftovers whose writers are provably gone, without the writer
     * lock (posix: temp files whose flock is free). NULL: the driver leaves none that
     * cleanup would not handle (S3: uploads). */
    int (*cleanup_key)(void *impl, const char *key, pb_error *err);
    /* Create-if-absent (PB_EEXIST when present). hold_fd, when not NULL, gets an fd that
     * keeps the new object flock'ed (posix; -1 elsewhere). PB_EUNSUPPORTED: the server
     * cannot do it; storage.c falls back to a best effort. */
    int (*put_new)(void *impl, const char *key, const void *data, size_t len, int *hold_fd,
                   pb_error *err);
    /* posix only (NULL elsewhere): open key and try its flock without waiting. *fd >= 0:
     * we got it, so no process on this host holds the lock; -1: a live process does. */
    int (*lock_probe)(void *impl, const char *key, int *fd, pb_error *err);
    /* posix only (NULL elsewhere: repo_put): rewrite the held lock file in place. */
    int (*lock_rewrite)(void *impl, const char *key, int fd, const void *data, size_t len,
                        pb_error *err);
    /* Remove the writer lock without making the removal durable (posix: no directory
     * fsync; the lock needs none, posix_excl.c). NULL: del (S3, where every DELETE is
     * durable once answered). */
    int (*lock_remove)(void *impl, const char *key, pb_error *err);
    /* The requests the driver sent (repo_requests). NULL: one per operation, which
     * storage.c counts itself (posix). */
    void (*requests)(void *impl, repo_requests *out);
    /* Waits for the disk and bytes written since open (NULL: not counted, 0s). */
    void (*io_counts)(void *impl, uint64_t *flushes, uint64_t *bytes_written);
    /* repo_get_range_upto in one request (S3). NULL: storage.c does a stat and a range
     * read. Never called for an encrypted repository. */
    int (*get_range_upto)(void *impl, const char *key, uint64_t off, size_t len, void *buf,
                          size_t *got, uint64_t *size, pb_error *err);
    /* repo_defer_syncs / repo_sync_deferred (posix). NULL: every commit is durable with
     * its name when it returns (S3). */
    void (*defer_syncs)(void *impl);
    int (*sync_deferred)(void *impl, pb_error *err);
} repo_driver;

/* Counters behind repo_requests: relaxed atomic adds (handles are shared by threads). */
typedef enum repo_req_kind {
    REPO_REQ_GET, REPO_REQ_GET_RANGE, REPO_REQ_PUT, REPO_REQ_LIST, REPO_REQ_HEAD, REPO_REQ_DEL
} repo_req_kind;
void repo_requests_add(repo_requests *q, repo_req_kind kind);
/* A consistent-enough copy of q (each field read atomically). */
void repo_requests_load(const repo_requests *q, repo_requests *out);

/* For storage_lock.c: the driver operations behind the writer lock (keys checked). */
int repo_drv_put_new(repo *r, const char *key, const void *data, size_t len, int *hold_fd,
                     pb_error *err);
int repo_drv_lock_probe(repo *r, const char *key, int *fd, pb_error *err);
bool repo_drv_has_probe(const repo *r);
int repo_drv_lock_rewrite(repo *r, const char *key, int fd, const void *data, size_t len,
                          pb_error *err);
/* repo_delete of the lock object through the driver's lock_remove (its del when NULL). */
int repo_drv_lock_remove(repo *r, const char *key, pb_error *err);

/* Driver constructors. */
int repo_posix_open(const repo_opts *opts, const char *dir, void **impl, pb_error *err);
extern const repo_driver repo_posix_driver;
int repo_s3_open(const repo_opts *opts, const char *bucket, const char *prefix, void **impl,
                 pb_error *err);
extern const repo_driver repo_s3_driver;

#endif
