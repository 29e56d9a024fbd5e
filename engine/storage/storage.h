/*
 * engine/storage/storage.h — the repository storage interface (prefix repo_).
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
typedef struct repo_lock repo_lock;

/* Key material for an encrypted repository (docs/FORMAT.md, "Encrypted repositories"):
 * at least 32 bytes, never stored. */
typedef struct repo_key {
    const void *data;
    size_t len;
} repo_key;
#define REPO_MAX_KEYS 4

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
    /* Encryption: keys[0] seals new objects, every key opens what it sealed; n_keys 0 =
     * an unencrypted repository. With keys, repo_open refuses an unencrypted repository
     * and keys none of which opens its key check (PB_EAUTH). Without, repo_open does no
     * I/O; an encrypted repository is refused (PB_EAUTH) by the first write, which looks
     * for key checks first, and by any read of a sealed object. */
    const repo_key *keys;
    size_t n_keys;
} repo_opts;

#define REPO_OPTS_INIT {NULL, NULL, "us-east-1", NULL, NULL, NULL, NULL, false, true, \
                        16u << 20, 4, 5, NULL, 0}

/* Open a repository location. Does not create anything. */
int repo_open(repo **out, const repo_opts *opts, pb_error *err);
/* Without a key: PB_EAUTH when r is an encrypted repository (it holds a key-check
 * object, docs/FORMAT.md), so a command can refuse up front instead of at its first
 * sealed read or write; one listing of keycheck/. With keys: 0 (repo_open checked). */
int repo_refuse_encrypted(repo *r, pb_error *err);
void repo_free(repo *r);
/* Opened with keys (an encrypted repository). */
bool repo_is_encrypted(const repo *r);
/* Key rotation (docs/GUIDE.md, "Encryption"): when key's object was sealed by another of
 * the given keys, open it (authenticated) and store it again sealed by the first key,
 * replacing it whole (*resealed true). Its content is unchanged, so readers see the same
 * bytes before and after. A no-op in an unencrypted repository. PB_ENOENT when absent. */
int repo_reseal(repo *r, const char *key, bool *resealed, pb_error *err);
/* Human-readable location for messages ("/srv/repo" or "s3://b/p"). */
const char *repo_location(const repo *r);
bool repo_is_local(const repo *r);
/* A commit made of many objects (a backup: its packs and database list, then the
 * manifest that makes them a backup). From repo_defer_syncs on, each object's data is
 * still on disk when its put or writer commit returns, but the names that objects and
 * new directories add are made durable only by repo_sync_deferred, which ends the
 * deferral: call it before writing the object that commits the whole. Deletes and
 * repo_put_new are durable at once as always. No-ops where every write is durable with
 * its name when answered (S3). */
void repo_defer_syncs(repo *r);
int repo_sync_deferred(repo *r, pb_error *err);
/* Waits for the disk (fsync, fdatasync, sync_file_range WAIT) and bytes written through
 * this handle since it was opened; 0s where the driver does not count (S3). */
void repo_io_counts(const repo *r, uint64_t *flushes, uint64_t *bytes_written);

/* Tests: cb sees every repo_get ("get") and repo_list ("list", with the prefix) made
 * through r, so a unit test can count what a command reads. cb NULL stops it. */
typedef void (*repo_observe_cb)(void *ctx, const char *op, const char *key);
void repo_observe(repo *r, repo_observe_cb cb, void *ctx);

/* Object-store requests made through one handle since repo_open (what users of object
 * storage pay for and wait on). S3: every HTTP request the driver sent, retries and
 * multipart parts included (a listing page is one list; a PUT, POST or part one put).
 * posix: one per operation (a streaming writer's commit is one put). Thread-safe. */
typedef struct repo_requests {
    uint64_t get;       /* whole-object GETs */
    uint64_t get_range; /* ranged GETs (pack frames) */
    uint64_t put;       /* PUTs, multipart initiate/part/complete */
    uint64_t list;      /* listing requests (pages) */
    uint64_t head;      /* HEADs (repo_stat, existence checks) */
    uint64_t del;       /* DELETEs (multipart aborts included) */
} repo_requests;
void repo_requests_get(const repo *r, repo_requests *out);
/* after - before, field by field (a command's own requests on a shared handle). */
repo_requests repo_requests_since(const repo_requests *after, const repo_requests *before);
uint64_t repo_requests_total(const repo_requests *q);
/* "N requests (G GET, R ranged GET, P PUT, L LIST, H HEAD, D DELETE)" into out. */
void repo_requests_format(const repo_requests *q, char *out, size_t cap);

/* Whole-object operations. repo_get allocates *out (caller frees with free()). */
int repo_put(repo *r, const char *key, const void *data, size_t len, pb_error *err);
/* Create-if-absent: PB_EEXIST when key exists already (nothing is written then). posix:
 * link(2) of the temp file, so exactly one of two racing writers wins. S3: a PUT with
 * If-None-Match: *; a server that does not honour it (Swift s3api answers 501) gets a
 * documented best effort instead: HEAD, PUT, wait twice the PUT's duration (0.05..2 s),
 * then read back and compare. That catches a loser whose bytes were overwritten, unless
 * the winner's PUT took far longer than its own. */
int repo_put_new(repo *r, const char *key, const void *data, size_t len, pb_error *err);
int repo_get(repo *r, const char *key, void **out, size_t *out_len, pb_error *err);
/* Read len bytes at offset into buf; a short object is PB_ECORRUPT. */
int repo_get_range(repo *r, const char *key, uint64_t offset, size_t len, void *buf,
                   pb_error *err);
/* Read up to len bytes at offset into buf: *got = len, or fewer when the object ends
 * first (an offset at or past its end is PB_ECORRUPT); *size = the object's size. One
 * request where the driver can (S3: a ranged GET and its Content-Range), else a stat and
 * a range read. For readers that read ahead without knowing where an object ends. */
int repo_get_range_upto(repo *r, const char *key, uint64_t offset, size_t len, void *buf,
                        size_t *got, uint64_t *size, pb_error *err);
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

/* The writer lock: one writer (backup, expire, rebase) per repository, held in the
 * repository itself at REPO_LOCK_KEY, whatever the local state directory.
 * posix: created with link(2) (exclusive) and flock'ed while held, so a holder that died
 * on this host is detected at once. S3: created with repo_put_new; a lease, renewed by
 * repo_lock_renew, lets a writer on another host take over a lock whose holder stopped
 * renewing it. A holder on this host that is provably gone (pid not alive, another boot)
 * is taken over at once in both drivers.
 * owner is a short description for messages ("backup", "expire"). A lock held by a live
 * writer is PB_ESTATE with a message naming its holder (host, pid, command, start). */
#define REPO_LOCK_KEY "lock/writer"
#define REPO_LOCK_LEASE_SECS 600
int repo_lock_acquire(repo *r, const char *owner, repo_lock **out, pb_error *err);
/* Cheap when called often: touches the repository once a third of the lease has passed.
 * PB_ESTATE when the lock was lost (taken over after the lease expired). */
int repo_lock_renew(repo_lock *l, pb_error *err);
/* Removes the lock object (only if it is still ours) and frees l; NULL is fine. */
void repo_lock_release(repo_lock *l);

/* The writer lock as a reader sees it (info: "running since"): PB_ENOENT when no writer
 * holds it. gone: its holder is provably gone (lease run out, this host rebooted or its
 * pid dead here), so the lock is a leftover the next writer takes over. */
typedef struct repo_lock_view {
    char owner[64], user[64], host[256];
    long pid;
    int64_t started, renewed;
    bool gone;
} repo_lock_view;
int repo_lock_peek(repo *r, repo_lock_view *out, pb_error *err);

/* Remove leftovers of interrupted writes (temp files, unfinished multipart uploads) of
 * writers that are gone. With held == NULL only what is provably dead goes (posix: temp
 * files whose flock is free — a writer holds it on its temp file until the file has its
 * final name, and loses it when it dies; S3: uploads initiated more than
 * REPO_STALE_UPLOAD_SECS ago). With the writer lock held, every leftover under
 * "backup/" goes at once: only the lock holder writes there, and held is ours, so what
 * is there is the debris of a writer that is gone. WAL ("wal/") is pushed without the
 * lock, so its leftovers always follow the first rule. */
#define REPO_STALE_UPLOAD_SECS 3600
int repo_cleanup(repo *r, const repo_lock *held, pb_error *err);
/* The same first rule for one key's leftovers only, without the writer lock: what a
 * killed earlier write of key left (posix: its temp files whose flock is free; a
 * concurrent writer of key keeps its own). S3: nothing (repo_cleanup handles uploads).
 * archive-push calls it for the segment it pushes. */
int repo_cleanup_key(repo *r, const char *key, pb_error *err);

#endif
