/* restore/restore_internal.h — the rebuild core's own (restore/, not its rooms below):
 * the target directory, the checks before writing, durability and --db-include. What
 * verify/ may use of the core is restore/plan.h. */
#ifndef PB_RESTORE_INTERNAL_H
#define PB_RESTORE_INTERNAL_H

#include "engine/chain/chain.h"
#include "engine/pack/pack.h"
#include "restore/restore.h"

#include <dirent.h>

/* ---- the target directory, opened without following links (target.c) ---- */
typedef struct rs_target rs_target;

/* Open an existing target directory. allow_openat2 false forces the component walk
 * (tests of the fallback). */
int rs_target_open(rs_target **out, const char *dir, bool allow_openat2, pb_error *err);
void rs_target_free(rs_target *t); /* accepts NULL */
const char *rs_target_path(const rs_target *t);
int rs_target_fd(const rs_target *t);
/* A link the restore created or verified (rel "pg_tblspc/<oid>" or "pg_wal") whose
 * directory dir paths beneath rel resolve into. */
int rs_target_add_link(rs_target *t, const char *rel, const char *dir, pb_error *err);
size_t rs_target_nlinks(const rs_target *t);
int rs_target_link_fd(const rs_target *t, size_t i);
const char *rs_target_link_dir(const rs_target *t, size_t i);

#define RS_DIR_CREATE 1u  /* create missing directories (0700) */
#define RS_DIR_REPLACE 2u /* remove a link or file standing where a directory belongs */
/* Open directory rel ("" is the target) beneath the target without following links
 * other than registered ones; *out is a new fd the caller closes. A link in the way is
 * PB_EINVAL unless RS_DIR_REPLACE. */
int rs_target_dir(const rs_target *t, const char *rel, unsigned how, int *out, pb_error *err);
/* The parent directory of rel as with rs_target_dir, and rel's last component. */
int rs_target_parent(const rs_target *t, const char *rel, unsigned how, int *dirfd,
                     const char **base, pb_error *err);
/* Remove name in dfd recursively without following links; shown names it in errors. */
int rs_remove_at(int dfd, const char *name, const char *shown, pb_error *err);
/* A listing of directory dfd from its first entry, whoever read dfd before (closedir
 * it); NULL with errno set. */
DIR *rs_dir_list(int dfd);
/* As root: chown the tree to the target's owner, never through a foreign link, then
 * sync the file systems involved. */
int rs_target_fix_owner(const rs_target *t, pb_error *err);

/* ---- checks before anything is written (guard.c) ---- */
/* Is path "pg_tblspc/<oid>"? Then *oid is the OID. */
bool rs_link_oid(const char *path, unsigned *oid);
/* PB_ESTATE when target_dir/postmaster.pid names a live process. */
int rs_check_not_running(const char *target_dir, pb_error *err);

/* ---- durability (durable.c) ---- */
/* fsync fd; the error names dir/rel. */
int rs_fsync(int fd, const char *dir, const char *rel, pb_error *err);
/* fsync every manifest directory, the tablespace directories, the target and the
 * parents of the directories a restore may have created. */
int rs_sync_dirs(const rs_target *t, const mf_manifest *m, pb_error *err);
/* fsync what rs_write_recovery and tablespace_map wrote, and the target directory. */
int rs_sync_recovery(const rs_target *t, pb_error *err);

/* ---- restore --db-include (db_filter.c) ---- */
typedef struct rs_db_filter {
    uint32_t *keep; /* OIDs of the databases restored in full */
    size_t nkeep, cap;
    bool active;    /* --db-include was given */
} rs_db_filter;

/* From opts->db_include and the database list of backup id; inactive (and 0) without
 * --db-include. An unknown name, or a backup without a list, is PB_EINVAL. *out is the
 * caller's: rs_db_filter_free. */
int rs_db_filter_build(repo *r, const rs_opts *opts, const char *id, rs_db_filter *out,
                       pb_error *err);
void rs_db_filter_free(rs_db_filter *f); /* accepts NULL */
/* Rebase: the synthetic full to gets the database list of from (none: nothing to do). */
int rs_db_list_copy(repo *r, const char *from, const char *to, pb_error *err);
/* Is file a relation file of a database the filter leaves out (restored as a stub)? */
bool rs_db_filter_stub(const rs_db_filter *f, const mf_file *file);

#endif
