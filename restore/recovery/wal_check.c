/*
 * restore/recovery/wal_check.c — the WAL a restore's recovery will replay, read and checked
 * before anything is written (docs/DESIGN.md, rules 4 and 8: the WAL makes the restored
 * backup usable, and a restore fails naming what is corrupt before it writes).
 *
 * rs_check_wal_in only lists the archive: a segment that is there but damaged (a flipped
 * byte, half of it) passed, and the restored cluster then stopped short of consistency.
 * Here every segment recovery needs is read and decoded as the target scans decode them
 * (wal_events.c): the object's envelope checksum and raw hash (arch_read), each page header,
 * the records' continuity across pages and segments and their CRCs (engine/wal/reader.c).
 * The range is the backup's start to its stop (where replay becomes consistent) and, for
 * a target, on to where replay will stop: the target LSN, the placed xid or restore
 * point, the first transaction end past a target time, or the end of the archive. A
 * segment the target search of this command already decoded whole is not read again.
 *
 * The same pass finds the tablespaces replay will create (XLOG_TBLSPC_CREATE). Replay
 * makes pg_tblspc/<oid> a link to the location the record carries, whatever
 * --tablespace-map says, and uses a directory already there (commands/tablespace.c,
 * create_tablespace_directories): on the source's host that is the running source's
 * tablespace, which the restored copy would then write into and delete from. Such a
 * restore is refused while that location exists here and is not empty.
 */
#include "restore/recovery/recovery.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* Replay stops (a time target): before the first transaction end past the target time
 * at or after the backup's stop (recoveryStopsBefore; earlier ones the choice handled). */
/* What one check reads: the plan's listing (its records of what was decoded go on in
 * w->seen), the parsed target and the chosen backup. */
typedef struct replay {
    rs_wal_view *wal;
    const rs_target_val *tv;
    const mf_backup *h;
} replay;

typedef struct reach_ctx {
    const rs_opts *opts;
    const rs_target_val *tv;
    uint64_t from;
    bool reached;
    uint64_t stop_lsn;
} reach_ctx;

static int on_event(void *vctx, const rs_wal_event *e)
{
    reach_ctx *c = vctx;
    if (c->reached || c->opts->target != RS_TARGET_TIME || e->kind == 'r' || e->lsn < c->from)
        return c->reached;
    bool past = c->opts->target_exclusive ? e->time_us >= c->tv->time_us
                                          : e->time_us > c->tv->time_us;
    if (past) {
        c->reached = true;
        c->stop_lsn = e->lsn;
    }
    return past;
}

/* [*lo, *hi) is read; valid WAL must run past *must. */
static void replay_range(const rs_opts *opts, const rs_target_val *tv, const mf_backup *h,
                         uint64_t *lo, uint64_t *hi, uint64_t *must)
{
    *lo = h->start_lsn;
    *hi = *must = h->stop_lsn;
    if (opts->target == RS_TARGET_LSN || tv->placed) {
        if (tv->lsn + 1 > *hi)
            *hi = *must = tv->lsn + 1; /* the record at the target is read too */
    } else if (opts->target == RS_TARGET_TIME || opts->target == RS_TARGET_END) {
        *hi = UINT64_MAX;
    }
}

static void describe_need(const rs_opts *opts, const mf_backup *h, uint64_t lsn,
                          char *out, size_t cap)
{
    if (lsn < h->stop_lsn)
        snprintf(out, cap, "needed to make backup %s consistent", h->id);
    else
        snprintf(out, cap, "needed to replay backup %s to the recovery target %s", h->id,
                 opts->target_value ? opts->target_value : "(end of the archived WAL)");
}

/* After the read: valid WAL that ends before must, or inside a segment while later WAL
 * of the path is archived (replay would end there short of it), is a damaged segment. */
static int check_end(const replay *p, const rs_opts *opts, const rs_events *s, uint64_t must,
                     pb_error *err)
{
    const mf_backup *h = p->h;
    uint32_t seg = h->wal_segment_size;
    uint64_t at = s->valid_end, segno = at / seg;
    char name[25], next[25], lsn[32], need[300];
    bool archived = rs_segment_for(p->wal, segno, seg, name);
    bool later = rs_segment_for(p->wal, segno + 1, seg, next);
    /* at a segment's start: the scan found it missing, or its first page holds no WAL
     * of this position (zeroed, or another segment's content under its name) */
    if (!s->at_end || (at >= must && (!archived || !later)))
        return 0;
    pb_lsn_format(at, lsn);
    describe_need(opts, h, at < must ? at : h->stop_lsn + 1, need, sizeof(need));
    if (!archived)
        return pb_fail(err, PB_ENOENT, "WAL segment %s, %s, is missing from repository %s; "
                       "nothing was written", name, need, repo_location(p->wal->r));
    return pb_fail(err, PB_ECORRUPT, "WAL segment %s, %s, is damaged: its valid WAL ends at %s%s"
                   "%s, so recovery would stop there; nothing was written", name, need, lsn,
                   at % seg ? " inside the segment" : ", the segment's start",
                   at < must ? "" : " while later WAL is archived");
}

/* Read [lo, hi) along the timeline recovery follows; *reach: where replay will stop. */
static int read_range(const replay *p, const rs_opts *opts, uint64_t *reach, pb_error *err)
{
    const mf_backup *h = p->h;
    uint64_t lo, hi, must;
    replay_range(opts, p->tv, h, &lo, &hi, &must);
    reach_ctx c = {opts, p->tv, h->stop_lsn, false, 0};
    rs_events s;
    rs_events_init(&s, p->wal->r, p->wal, h->wal_segment_size, opts->state_dir);
    /* a time target needs the events of every segment: none is skipped */
    int rc = rs_events_check(&s, lo, hi, opts->target != RS_TARGET_TIME, on_event, &c, err);
    if (rc) {
        char name[25], need[300];
        rs_segment_for(p->wal, s.failed_segno, h->wal_segment_size, name);
        describe_need(opts, h, s.failed_segno * (uint64_t)h->wal_segment_size, need,
                      sizeof(need));
        pb_error_wrap(err, "WAL segment %s, %s, cannot be read whole (nothing was written)",
                      name, need);
    }
    if (rc == 0)
        rc = check_end(p, opts, &s, must, err);
    *reach = c.reached ? c.stop_lsn : s.at_end ? s.valid_end : hi;
    if (rc == 0) {
        char a[32], b[32];
        pb_lsn_format(lo, a);
        pb_lsn_format(*reach, b);
        char also[80] = "";
        if (s.skipped)
            snprintf(also, sizeof(also), " (%" PRIu64 " more read by the target search)",
                     s.skipped);
        pb_info("read and checked the WAL recovery replays, %s to %s: %" PRIu64 " segments%s",
                a, b, s.decoded, also);
    }
    rs_events_free(&s);
    return rc;
}

static bool dir_empty(const char *path, bool *exists)
{
    DIR *d = opendir(path);
    struct dirent *de;
    bool empty = true;
    *exists = d != NULL || errno != ENOENT;
    while (d && empty && (de = readdir(d)) != NULL)
        empty = !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");
    if (d)
        closedir(d);
    return d ? empty : !*exists;
}

/* A tablespace replay creates at location t->path: refused when that directory exists
 * here with something in it (a file standing there counts as occupied). */
static int check_spc(const rs_opts *opts, const rs_spc_event *t, pb_error *err)
{
    char lsn[32], mapped[160] = "";
    bool exists = false;
    pb_lsn_format(t->lsn, lsn);
    if (!t->path[0]) /* in place: inside the restored directory */
        return 0;
    bool empty = dir_empty(t->path, &exists);
    for (size_t i = 0; i < opts->ntblspc; i++)
        if (opts->tblspc[i].oid == t->oid)
            snprintf(mapped, sizeof(mapped), " (--tablespace-map %u=%s does not change that: "
                     "replay takes the location from the WAL)", t->oid, opts->tblspc[i].dir);
    if (!exists) {
        pb_warn("tablespace %u is created during replay (LSN %s, WAL segment %s) at %s, "
                "which does not exist on this host: recovery will stop there until that "
                "directory is created for the restored cluster%s", t->oid, lsn, t->seg,
                t->path, mapped);
        return 0;
    }
    if (empty) {
        pb_warn("tablespace %u is created during replay (LSN %s) at %s, an empty directory "
                "on this host: the restored cluster's recovery will put its files there%s",
                t->oid, lsn, t->path, mapped);
        return 0;
    }
    return pb_fail(err, PB_EINVAL, "tablespace %u is created during replay (LSN %s, WAL "
                   "segment %s) at %s, which exists on this host and is not empty: replay "
                   "would link the restored cluster to it (it may be the running source's "
                   "tablespace)%s; restore on a host where %s does not exist, or stop recovery "
                   "before LSN %s (--target-lsn); --tablespace-map applies only to tablespaces "
                   "in the backup; nothing was written", t->oid, lsn, t->seg, t->path, mapped,
                   t->path, lsn);
}

/* Every tablespace creation on the path in [lo, reach). */
static int check_spcs(const replay *p, const rs_opts *opts, uint64_t reach, pb_error *err)
{
    const mf_backup *h = p->h;
    const rs_wal_seen *w = p->wal->seen;
    uint32_t seg = h->wal_segment_size;
    int rc = 0;
    for (size_t i = 0; w && rc == 0 && i < w->nspc; i++) {
        const rs_spc_event *t = &w->spc[i];
        char name[25];
        if (t->lsn < h->start_lsn || t->lsn >= reach ||
            !rs_segment_for(p->wal, t->lsn / seg, seg, name) || strcmp(name, t->seg))
            continue;
        rc = check_spc(opts, t, err);
    }
    return rc;
}

int rs_check_replay(rs_wal_view *w, const rs_target_val *tv, const mf_backup *h,
                    const rs_opts *opts, bool restoring, pb_error *err)
{
    const replay rp = {w, tv, h};
    uint64_t reach = 0;
    int rc = read_range(&rp, opts, &reach, err);
    if (rc == 0 && restoring)
        rc = check_spcs(&rp, opts, reach, err);
    return rc;
}
