/*
 * restore/recovery/recovery.h — the recovery room (prefix rs_): the WAL archive as
 * recovery will read it (wal_view.c), the timeline it follows and the WAL a restore
 * needs (timeline.c), targets and the recovery settings (settings.c), which backup can
 * reach a target (choose_set.c), what the archived WAL holds (wal_events.c, wal_target.c,
 * wal_branch.c) and the replayed WAL read and checked (wal_check.c). It stands on the
 * engine and the module's public types (restore/restore.h), never on the rebuild core:
 * the restore plan and verify use it.
 */
#ifndef PB_RESTORE_RECOVERY_H
#define PB_RESTORE_RECOVERY_H

#include "engine/chain/chain.h"
#include "engine/wal/wal.h"
#include "restore/restore.h"

/* The timeline recovery will follow, and the recovery_target_timeline that says so. */
typedef struct rs_timeline {
    uint32_t tli;
    char setting[16]; /* "latest", "current" or a timeline id */
} rs_timeline;

typedef struct rs_target_val {
    int64_t time;      /* RS_TARGET_TIME: unix seconds (fraction dropped) */
    int64_t time_us;   /* the same in unix microseconds, with the fraction (to 1 us) */
    bool zoned;        /* the text carried a time zone */
    char time_text[96];/* the time with an explicit offset, as written for PostgreSQL */
    uint64_t lsn;      /* RS_TARGET_LSN, or where a placed xid or name target lies */
    /* RS_TARGET_XID / RS_TARGET_NAME once found in the archived WAL (wal_target.c): lsn
     * is the record's, on timeline placed_tli; placed_desc says which record it is. */
    bool placed;
    uint32_t placed_tli;
    char placed_desc[200];
} rs_target_val;

/* Read opts->target_value for opts->target (messages name the option at fault). */
int rs_parse_target(const rs_opts *opts, rs_target_val *tv, pb_error *err);
/* Write recovery settings and recovery.signal into the restored directory for the
 * target tv (parsed from opts); recovery_target_timeline is tl->setting (as
 * rs_check_wal chose it). */
int rs_write_recovery(const char *target_dir, const rs_opts *opts, const rs_target_val *tv,
                      const mf_backup *h, const rs_timeline *tl, pb_error *err);
/* "YYYY-MM-DD HH:MM:SS+00". */
void rs_fmt_time(int64_t t, char out[40]);

/* One timeline of a history: WAL positions [begin, end) belong to tli (engine/wal). */
typedef arch_tl_entry rs_tl_entry;

/* A tablespace created by a WAL record (XLOG_TBLSPC_CREATE): replay makes
 * pg_tblspc/<oid> a link to path, the location the WAL carries (wal_check.c). */
typedef struct rs_spc_event {
    uint64_t lsn;
    uint32_t oid;
    char seg[25]; /* the archived segment the record was read from */
    char *path;   /* owned; "" for an in-place tablespace */
} rs_spc_event;

/* What the scans of one command learned beyond their events (wal_events.c), shared by
 * every copy of the view that points at it: the segments decoded whole without a fault
 * (a later check need not read them again) and the tablespaces created in them. */
typedef struct rs_wal_seen {
    char (*checked)[25];
    size_t nchecked, chkcap;
    rs_spc_event *spc;
    size_t nspc, spccap;
} rs_wal_seen;
/* Was segment name decoded whole by this command? (wal_view.c, with the listing) */
bool rs_seen_checked(const rs_wal_seen *s, const char *name);
void rs_seen_free(rs_wal_seen *s); /* accepts NULL */

typedef struct rs_wal_view {
    repo *r;
    rs_wal_seen *seen;    /* made by rs_view_load (NULL: nothing is recorded) */
    uint32_t *hist;       /* timelines with an archived .history file */
    size_t nhist, hcap;
    char (*segs)[25];     /* archived segments, sorted */
    size_t nsegs, scap;
    rs_tl_entry *tl;      /* history of timeline tl_of (oldest first) */
    size_t ntl;
    uint32_t tl_of;
} rs_wal_view;

/* List the archive (kinds: ARCH_LIST_SEGMENTS | ARCH_LIST_HISTORY) once. */
int rs_view_load(rs_wal_view *v, repo *r, unsigned kinds, pb_error *err);
void rs_view_free(rs_wal_view *v);
bool rs_view_has_history(const rs_wal_view *v, uint32_t tli);
bool rs_view_has_segment(const rs_wal_view *v, const char *name);
/* Read and check the history of tli into v->tl (timeline 1, or one without a history
 * file, is a history of its own). */
int rs_view_history(rs_wal_view *v, uint32_t tli, pb_error *err);
/* Which archived file recovery reads for segno along the loaded history (see wal_view.c);
 * false when none is archived (name is then the one expected). */
bool rs_segment_for(const rs_wal_view *v, uint64_t segno, uint32_t seg_size, char name[25]);
/* Is backup h on the loaded history, ending before its timeline branched off? */
bool rs_on_path(const rs_wal_view *v, const mf_backup *h, char *why, size_t why_len);

/* The timeline recovery from backup h follows for this target (see timeline.c), with
 * v->tl loaded for it. A target that cannot be placed on one timeline is refused. */
int rs_follow_timeline(rs_wal_view *v, const rs_opts *opts, const rs_target_val *tv,
                       const mf_backup *h, rs_timeline *out, pb_error *err);

/* ---- which backup (choose_set.c) ---- */
/* Does opts->set name one backup (not NULL or "latest")? */
bool rs_names_set(const rs_opts *opts);
/* PB_EINVAL for a target time well in the future (a warning for one slightly ahead). */
int rs_check_future(const rs_opts *opts, const rs_target_val *tv, pb_error *err);
/* Order hist for opts' target and timeline (choose_set.c). */
int rs_order_history(repo *r, const rs_opts *opts, chain_history *hist, pb_error *err);
/* Pick from hist (history order) the newest backup whose stop point precedes the target
 * (opts->set: that one, if it can reach it); v is used only for a target other than
 * immediate or an explicit --target-timeline. why says why it was chosen. *tl is the
 * timeline recovery from it follows when the choice had to follow it (v->tl then holds
 * its history), else zero (tl->setting ""). */
int rs_choose_in(repo *r, const rs_opts *opts, const rs_target_val *tv, rs_wal_view *v,
                 const chain_history *hist, char out_id[MF_ID_LEN], rs_timeline *tl,
                 char *why, size_t why_len, pb_error *err);

/* The timeline recovery from a backup on backup_tli will follow by the options alone
 * (latest, current or an id), with v->tl loaded with its history: the path a target is
 * searched along before it is placed. */
int rs_timeline_path(rs_wal_view *v, const rs_opts *opts, uint32_t backup_tli, uint32_t *tli,
                   pb_error *err);

/* ---- what the archived WAL holds (wal_events.c) ---- */
typedef struct rs_wal_event {
    uint64_t lsn;   /* the record's */
    int64_t time;   /* unix seconds: the restore point's or the transaction end's */
    int64_t time_us;/* the same in unix microseconds, as the record has it */
    uint32_t xid;   /* transaction ends: the top-level (or prepared) transaction */
    char kind;      /* 'r' restore point; 'c' commit, 'a' abort, 'C'/'A' of a prepared one */
    char name[64];  /* restore points */
} rs_wal_event;
/* Called for each event in LSN order; non-zero: stop after the current segment. */
typedef int (*rs_event_fn)(void *ctx, const rs_wal_event *e);
typedef struct rs_events {
    repo *r;
    rs_wal_view *v;        /* the listing, v->tl the timeline path */
    uint32_t seg_size;
    const char *state_dir; /* NULL: no cache */
    arch_walsource *src;
    bool held;             /* the segment last fetched, served again to the next reader */
    uint64_t held_segno;
    const uint8_t *held_data;
    size_t held_len;
    uint64_t decoded, from_cache, skipped; /* segments (skipped: check mode, read before) */
    uint64_t end_lsn;      /* where the last scan stopped */
    bool at_end;           /* because the archived WAL on the path ends there */
    /* check mode (rs_events_check): every segment read and decoded, none from the cache,
     * records starting at or after check_hi not read; segments in v->seen->checked are
     * skipped when skip_checked */
    bool check, skip_checked;
    uint64_t check_lo, check_hi;
    uint64_t valid_end;    /* at_end: where valid WAL ended (a record's start) */
    uint64_t failed_segno; /* the segment whose reading failed (set with an error) */
} rs_events;
void rs_events_init(rs_events *s, repo *r, rs_wal_view *v, uint32_t seg_size,
                  const char *state_dir);
void rs_events_free(rs_events *s);
/* Hand fn the events of [lo, hi) on the path, segment by segment (each from the cache
 * in state_dir/walscan when it holds the segment's content hash, else decoded and
 * cached). Stops after the segment where fn asked to, or where archived WAL ends. */
int rs_events_range(rs_events *s, uint64_t lo, uint64_t hi, rs_event_fn fn, void *ctx,
                  pb_error *err);
/* rs_events_range in check mode over [lo, hi): each segment read and decoded whole (not
 * answered from the cache), errors carried with s->failed_segno; skip_checked: segments
 * this command already decoded whole are not read again (no events are given for them). */
int rs_events_check(rs_events *s, uint64_t lo, uint64_t hi, bool skip_checked, rs_event_fn fn,
                  void *ctx, pb_error *err);

/* ---- a time target past a branch point (wal_branch.c) ---- */
/* Backup h's timeline branched off at v->tl[at].end (before h ended it went on too):
 * *stay when only its own WAL after the branch holds the time tv (recovery then stays on
 * it); not when only the branch's does or neither does. Both: PB_EINVAL naming both
 * stops; a gap or undecodable WAL on either side: the error. */
int rs_place_time(rs_wal_view *v, const rs_opts *opts, const rs_target_val *tv,
                  const mf_backup *h, size_t at, bool *stay, pb_error *err);

/* ---- xid and name targets placed in the archived WAL (wal_target.c) ---- */
/* For RS_TARGET_XID / RS_TARGET_NAME: find the record recovery will stop at, searching
 * from the newest backup backwards (stop at the first match) along the path recovery
 * follows, and set tv->lsn, placed, placed_tli, placed_desc. A target not in the
 * archive is PB_ENOENT naming the WAL range searched. Other targets: nothing. */
int rs_place_target(repo *r, const rs_opts *opts, rs_wal_view *v, const chain_history *hist,
                    rs_target_val *tv, pb_error *err);

/* rs_check_wal against a listing the caller holds (v: segments and history files) and a
 * target it parsed. */
int rs_check_wal_in(rs_wal_view *v, const rs_opts *opts, const rs_target_val *tv,
                    const mf_backup *h, rs_timeline *tl, pb_error *err);
/* rs_check_wal_in on the path v->tl already holds: the timeline h's recovery follows. */
int rs_check_wal_on_path(rs_wal_view *v, const rs_opts *opts, const rs_target_val *tv,
                         const mf_backup *h, pb_error *err);

/* Check, before anything is written, that the repository holds the WAL the restore of
 * backup h needs for this target: start to stop on the timeline path recovery will
 * follow, and on to the target LSN for an LSN target. Names the first missing segment.
 * For other targets, reports how far the archived WAL runs without a gap. *tl is the
 * timeline followed (a target past a timeline branch is placed or refused here). */
int rs_check_wal(repo *r, const rs_opts *opts, const mf_backup *h, rs_timeline *tl,
                 pb_error *err);

/* After rs_check_wal_in, before anything is written: read and check every segment
 * recovery replays from h's start to consistency and on to the target tv (envelope, page
 * headers, continuity, record CRCs; wal_check.c) along the history loaded in w, naming
 * the first damaged one. restoring: also refuse a tablespace replay would create in a
 * non-empty directory of this host (replay links it whatever --tablespace-map says). */
int rs_check_replay(rs_wal_view *w, const rs_target_val *tv, const mf_backup *h,
                    const rs_opts *opts, bool restoring, pb_error *err);

#endif
