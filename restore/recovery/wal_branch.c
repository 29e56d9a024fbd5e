/*
 * restore/recovery/wal_branch.c — a --target-time past the point where the target timeline
 * branched off the backup's timeline, when that timeline went on after the branch too
 * (its next segment is archived): placed by reading the transaction ends of both
 * timelines' archived WAL after the branch (wal_events.c, with its cache), deciding as
 * PostgreSQL's recovery would (docs/DESIGN.md, rule 9: history follows LSNs).
 *
 * Only one side holding the target: recovery follows it. Both: refused, naming both
 * stops. Neither: "latest", as PostgreSQL. A gap in the old timeline's archived WAL or a
 * record that does not decode: refused, as the side cannot be judged.
 */
#include "restore/recovery/recovery.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Replay along one side from the branch: PostgreSQL stops before the first transaction
 * end whose time is > the target (>= with --target-exclusive; recoveryStopsBefore). The
 * side holds the target when it gets there after applying at least one transaction end
 * of its own: a side whose first one already stops replay began after the target. */
typedef struct time_reach {
    int64_t target_us;
    bool exclusive, applied, reached;
    rs_wal_event stop;
} time_reach;

static int on_xact_end(void *vctx, const rs_wal_event *e)
{
    time_reach *t = vctx;
    if (e->kind == 'r' || t->reached)
        return t->reached;
    if (t->exclusive ? e->time_us < t->target_us : e->time_us <= t->target_us) {
        t->applied = true;
        return 0;
    }
    t->reached = true;
    t->stop = *e;
    return 1;
}

static bool holds_time(const time_reach *t)
{
    return t->reached && t->applied;
}

static void describe_stop(const time_reach *t, uint32_t tli, char *out, size_t cap)
{
    char lsn[32], when[40];
    pb_lsn_format(t->stop.lsn, lsn);
    rs_fmt_time(t->stop.time, when);
    snprintf(out, cap, "the %s at %s on timeline %u (%s)",
             strchr("cC", t->stop.kind) ? "commit" : "abort", lsn, tli, when);
}

/* Scan the path pv->tl from the branch. On the old timeline (gap_tli set) WAL that ends
 * while later segments of it are archived is a gap: refused, as replay would stop there. */
static int scan_side(rs_wal_view *pv, const rs_opts *opts, uint32_t seg, uint64_t branch,
                     uint32_t gap_tli, time_reach *t, pb_error *err)
{
    rs_events s;
    rs_events_init(&s, pv->r, pv, seg, opts->state_dir);
    int rc = rs_events_range(&s, branch, UINT64_MAX, on_xact_end, t, err);
    rs_events_free(&s);
    if (rc || t->reached || !gap_tli)
        return rc;
    for (size_t i = 0; i < pv->nsegs; i++) {
        uint32_t tli;
        uint64_t n;
        if (arch_parse_segment(pv->segs[i], seg, &tli, &n) && tli == gap_tli &&
            n >= s.end_lsn / seg) {
            char at[32];
            pb_lsn_format(s.end_lsn, at);
            return pb_fail(err, PB_ENOENT, "the archived WAL of timeline %u ends at %s but "
                           "its segment %s is archived: the target time cannot be placed "
                           "against the branch point across that gap; say --target-timeline "
                           "to choose; nothing was written", tli, at, pv->segs[i]);
        }
    }
    return 0;
}

int rs_place_time(rs_wal_view *v, const rs_opts *opts, const rs_target_val *tv,
                  const mf_backup *h, size_t at, bool *stay, pb_error *err)
{
    uint64_t branch = v->tl[at].end;
    uint32_t seg = h->wal_segment_size;
    *stay = false;
    time_reach old = {tv->time_us, opts->target_exclusive, false, false, {0}}, nw = old;
    rs_tl_entry *path = malloc((at + 1) * sizeof(*path));
    if (!path)
        return pb_fail(err, PB_ENOMEM, "out of memory placing the target time");
    memcpy(path, v->tl, (at + 1) * sizeof(*path));
    path[at].end = UINT64_MAX; /* timeline b as if it had never branched */
    rs_wal_view ov = *v;
    ov.tl = path;
    ov.ntl = at + 1;
    ov.tl_of = h->timeline;
    int rc = scan_side(&ov, opts, seg, branch, h->timeline, &old, err);
    free(path);
    if (rc == 0)
        rc = scan_side(v, opts, seg, branch, 0, &nw, err);
    if (rc)
        return pb_error_wrap(err, "placing the target time %s against the branch of "
                             "timeline %u off timeline %u", tv->time_text, v->tl_of,
                             h->timeline);
    char a[32], d_old[120] = "", d_new[120] = "";
    pb_lsn_format(branch, a);
    if (old.reached)
        describe_stop(&old, h->timeline, d_old, sizeof(d_old));
    if (nw.reached)
        describe_stop(&nw, v->tl_of, d_new, sizeof(d_new));
    *stay = holds_time(&old) && !holds_time(&nw);
    if (holds_time(&old) && holds_time(&nw))
        return pb_fail(err, PB_EINVAL, "the target time %s lies past %s, where timeline %u "
                       "branched off timeline %u, and the WAL of both reaches it: recovery "
                       "would stop at %s staying on timeline %u, or at %s following timeline "
                       "%u; say which with --target-timeline %u or --target-timeline %u; "
                       "nothing was written", tv->time_text, a, v->tl_of, h->timeline, d_old,
                       h->timeline, d_new, v->tl_of, h->timeline, v->tl_of);
    if (holds_time(&old) || holds_time(&nw))
        pb_info("the target time %s is reached after the branch point %s only on timeline "
                "%u: replay stops before %s", tv->time_text, a,
                *stay ? h->timeline : v->tl_of, *stay ? d_old : d_new);
    else
        pb_info("the target time %s is held by neither timeline past the branch point %s: "
                "following timeline %u (latest), as PostgreSQL does", tv->time_text, a,
                v->tl_of);
    return 0;
}
