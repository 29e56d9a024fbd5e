/*
 * restore/plan_internal.h — the restore plan (restore/plan.c): what a restore, verify
 * --set or rebase decides before it reads a frame, built once per command: the target
 * parsed once, the WAL archive listed once, the backup chosen, and its chain resolved
 * with each manifest read once.
 */
#ifndef PB_RESTORE_PLAN_INTERNAL_H
#define PB_RESTORE_PLAN_INTERNAL_H

#include "restore/recovery/recovery.h"

/* rs_plan_build needs: list the WAL archive even for a target (immediate, default
 * timeline) whose choice does not read it, because rs_plan_check will. */
#define RS_PLAN_WAL 1u

typedef struct rs_plan {
    rs_target_val tv;   /* opts' target, parsed once */
    rs_wal_view wal;    /* the one listing of wal/ (empty when nothing needed it) */
    char id[MF_ID_LEN]; /* the chosen backup */
    char why[512];      /* why it was chosen (for the log) */
    mf_backup *hdrs;    /* its chain's manifest headers, full backup first, id last */
    size_t nchain;
    rs_timeline tl;     /* after rs_plan_check: the timeline recovery follows */
} rs_plan;

/* Build the plan for opts (opts->set, the target and timeline; the directory options are
 * not looked at). *out belongs to the caller: rs_plan_free. Errors are the choice's or
 * the chain's (PB_ENOENT: no usable backup; PB_ECORRUPT: a damaged manifest; PB_EINVAL:
 * a target that cannot be read or placed). */
int rs_plan_build(repo *r, const rs_opts *opts, unsigned needs, rs_plan **out,
                  pb_error *err);
void rs_plan_free(rs_plan *p); /* accepts NULL */
/* Before anything is read or written: the WAL the chosen backup's restore needs along
 * the timeline recovery follows (rs_check_wal, against the plan's listing: built with
 * RS_PLAN_WAL); sets p->tl. The manifest's entries are checked by rs_plan_outline. */
int rs_plan_check(rs_plan *p, const rs_opts *opts, pb_error *err);
/* After rs_plan_check, before anything is written: read and check every segment
 * recovery replays from the backup's start to consistency and on to the target (envelope,
 * page headers, continuity, record CRCs; restore/wal_check.c), naming the first damaged
 * one. restoring: also refuse a tablespace replay would create in a non-empty directory of
 * this host (replay links it whatever --tablespace-map says). */
int rs_check_replay(rs_plan *p, const rs_opts *opts, bool restoring, pb_error *err);
/* The chosen backup's manifest header: the chain's last. */
const mf_backup *rs_plan_header(const rs_plan *p);

/* What a restore needs of the chosen manifest besides the files it rebuilds, read in one
 * pass over its stream: every entry checked (rs_check_entry) before anything is
 * written, and kept in m without runs or page hashes: directories, links and
 * tablespace_map always, with `files` every entry (a delta restore prunes what m does not
 * name). So m grows with the number of directories (with files: of entries), never with
 * the pages of the database. */
typedef struct rs_outline {
    mf_manifest *m;
    rs_progress totals; /* regular files and their bytes */
    uint64_t peak;      /* manifest bytes held building it: the stream's and m's */
} rs_outline;
int rs_plan_outline(repo *r, const rs_plan *p, bool files, rs_outline *out, pb_error *err);
void rs_outline_free(rs_outline *o); /* accepts NULL */

#endif
