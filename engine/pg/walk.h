/*
 * engine/pg/walk.h — the data-directory walk and its exclusion rules (prefix walk_).
 * Exclusions match pg_basebackup (docs/DESIGN.md rule 5). Tablespaces are followed
 * through the pg_tblspc symlinks.
 */
#ifndef PB_ENGINE_WALK_H
#define PB_ENGINE_WALK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/pb.h"

typedef enum walk_kind {
    WALK_DIR = 0,
    WALK_REL = 1,  /* relation segment: page-diffed */
    WALK_FILE = 2, /* other regular file: stored whole */
    WALK_LINK = 3, /* symlink (pg_tblspc/<oid>) */
} walk_kind;

typedef struct walk_entry {
    char *path;        /* relative to PGDATA, e.g. "base/5/16384.1" */
    walk_kind kind;
    uint32_t mode;     /* st_mode & 07777 */
    uint64_t size;
    int64_t mtime;
    uint64_t inode;    /* st_ino: a file replaced under the same name gets a new one */
    char *link_target; /* WALK_LINK: absolute target directory */
    uint32_t segno;    /* WALK_REL: segment number from the ".N" suffix */
} walk_entry;

typedef struct walk_list {
    walk_entry *items;
    size_t count;
} walk_list;

/* Walk pgdata. The list is sorted by path, except that "global/pg_control" is
 * always last. Files that vanish during the walk are skipped. */
int walk_pgdata(const char *pgdata, walk_list *out, pb_error *err);
/* The same, taking from each tablespace (pg_tblspc/<oid>/) only the directory
 * tblspc_dir, this cluster's "PG_<major>_<catversion>" (pgc_info.tblspc_dir), as
 * pg_basebackup does: another cluster's directory in the same location is left out.
 * tblspc_dir NULL or "": every entry (walk_pgdata). */
int walk_pgdata_cluster(const char *pgdata, const char *tblspc_dir, walk_list *out,
                        pb_error *err);
void walk_list_free(walk_list *l);

/* Rules, exposed for unit tests. rel is a path relative to PGDATA. */
bool walk_is_excluded(const char *rel, bool is_dir);
/* Is rel a relation data file (page-diffed)? Sets *segno. Unlogged relations' non-init
 * forks and temp relations are excluded by walk_is_excluded, not here. */
bool walk_is_relation(const char *rel, uint32_t *segno);

#endif
