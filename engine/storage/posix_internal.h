/* engine/storage/posix_internal.h — what the posix driver's files share. Private to
 * posix.c, posix_excl.c, posix_clean.c, posix_write.c and posix_defer.c. */
#ifndef PB_ENGINE_STORAGE_POSIX_INTERNAL_H
#define PB_ENGINE_STORAGE_POSIX_INTERNAL_H

#include "engine/storage/storage_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Modes of everything the driver creates, whatever the umask (the repository holds
 * pg_authid's pages): owner read/write, group read, nothing for others. The group bit
 * lets a backup user in the postgres group read what archive-push wrote. */
#define POSIX_FILE_MODE 0640
#define POSIX_DIR_MODE 0750
#define POSIX_TMP_MARK ".tmp."

typedef struct posix_repo {
    int dirfd;  /* the repository directory; every path is resolved relative to it */
    char *root; /* for messages */
    /* Run as root in a repository that belongs to another user (the postgres user, as
     * the tools set it up): what we create is given to that user, so archive-push,
     * running as postgres, can still read and extend a repository a root backup wrote
     * into despite the 0640/0750 modes. */
    bool give_away;
    uid_t owner_uid;
    gid_t owner_gid;
    /* Waits for the disk (fsync, fdatasync, sync_file_range WAIT) and bytes written,
     * by every writer thread of this handle: the backup reports flushes per GB. */
    _Atomic uint64_t flushes;
    _Atomic uint64_t bytes_written;
    /* repo_defer_syncs (posix_defer.c): while defer is set, directories that got a new
     * entry are listed here instead of fsynced, until repo_sync_deferred. */
    pthread_mutex_t defer_mu;
    bool defer;
    char **pending;
    size_t npending, pending_cap;
} posix_repo;

int posix_write_all(int fd, const void *data, size_t len);
/* data into the temp file tmp (open as fd) a MiB at a time, paced like the streaming
 * writer (posix_write.c, writer_pace) and counted in bytes_written; no flush. */
int posix_write_paced(posix_repo *pr, int fd, const char *tmp, const void *data, size_t len,
                      pb_error *err);
/* "a/b/c" -> "a/b", "c" -> ".". */
void posix_parent_of(const char *key, char *out, size_t cap);
int posix_fsync_dir(posix_repo *pr, const char *dir, pb_error *err);
/* A fresh temp file beside key (parents created, mode POSIX_FILE_MODE). */
int posix_open_tmp(posix_repo *pr, const char *key, char *tmp, size_t cap, int *fd,
                   pb_error *err);

/* Does key still name the file open on fd? (A takeover or a cleaner replaces it.) */
bool posix_same_file(posix_repo *pr, const char *key, int fd);
/* For the cleanup: cb for every temp file in the repository; prune emptied backup dirs. */
int posix_walk_tmp(posix_repo *pr, int (*cb)(posix_repo *pr, const char *tmp, void *ctx),
                   void *ctx, pb_error *err);
void posix_prune_backup_dirs(posix_repo *pr, const char *dir);
int posix_cleanup(void *impl, bool locked, pb_error *err);

/* Every temp file is flock'ed by its writer for as long as it is a temp file (see
 * posix_excl.c). posix_lock_tmp takes that flock on a fresh temp file; PB_ENOENT
 * when a cleaner removed the file first (make another). posix_remove_abandoned removes tmp
 * only when its flock is free, i.e. its writer is gone (*removed says whether it did).
 * posix_cleanup_key does that for every temp file of key (driver op cleanup_key). */
int posix_lock_tmp(posix_repo *pr, int fd, const char *tmp, pb_error *err);
int posix_remove_abandoned(posix_repo *pr, const char *tmp, bool *removed, pb_error *err);
int posix_cleanup_key(void *impl, const char *key, pb_error *err);

int posix_put_new(void *impl, const char *key, const void *data, size_t len, int *hold_fd,
                  pb_error *err);
int posix_lock_probe(void *impl, const char *key, int *fd, pb_error *err);
int posix_lock_rewrite(void *impl, const char *key, int fd, const void *data, size_t len,
                       pb_error *err);

/* The write and flush path (posix_write.c). posix_finish_tmp: fdatasync, drop from
 * cache, rename over key, close, fsync the directory; closes fd in every case and
 * removes the temp file on failure. posix_remove_tmp: a failed write's temp file and the
 * backup directories it was the last entry of. */
int posix_finish_tmp(posix_repo *pr, int fd, const char *tmp, const char *key, pb_error *err);
void posix_remove_tmp(posix_repo *pr, const char *tmp);
int posix_writer_open(void *impl, const char *key, void **out, pb_error *err);
int posix_writer_write(void *wp, const void *data, size_t len, pb_error *err);
int posix_writer_commit(void *wp, pb_error *err);
void posix_writer_abort(void *wp);
/* dir got a new entry (a name renamed or linked into it, a directory made in it): fsync
 * it now, or list it for posix_sync_deferred while the handle defers (posix_defer.c). */
int posix_sync_entry(posix_repo *pr, const char *dir, pb_error *err);
void posix_defer_syncs(void *impl);
int posix_sync_deferred(void *impl, pb_error *err);
void posix_defer_free(posix_repo *pr);
/* Count one wait for the disk; the driver's io_counts op reads the totals. */
void posix_count_flush(posix_repo *pr);
void posix_io_counts(void *impl, uint64_t *flushes, uint64_t *bytes_written);

#endif
