/* engine/storage_posix_internal.h — what the posix driver's files share. Private to
 * storage_posix.c, storage_posix_excl.c and storage_posix_clean.c. */
#ifndef PB_ENGINE_STORAGE_POSIX_INTERNAL_H
#define PB_ENGINE_STORAGE_POSIX_INTERNAL_H

#include "engine/storage_internal.h"

#include <stdbool.h>
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
} posix_repo;

int posix_write_all(int fd, const void *data, size_t len);
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
 * storage_posix_excl.c). posix_lock_tmp takes that flock on a fresh temp file; PB_ENOENT
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

#endif
