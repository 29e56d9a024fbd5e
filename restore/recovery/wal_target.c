/*
 * restore/recovery/wal_target.c — transaction-id and restore-point-name targets, placed by
 * reading the archived WAL (wal_events.c) so that the backup is chosen for them exactly
 * as for an LSN target (choose_set.c).
 *
 * Replay from a backup starts at its start LSN and stops at the first record that
 * matches (PostgreSQL's recoveryStopsBefore/After): for a name, the first restore point
 * of that name; for an xid, the commit or abort of that top-level transaction. The stop
 * must come at or after the backup's stop LSN, where replay becomes consistent, or
 * PostgreSQL refuses ("requested recovery stop point is before consistent recovery
 * point"). So for backups B1..Bn (history order, on the timeline path), newest first:
 * F(k) is the first match at or after Bk's start; Bk can reach the target when F(k) is
 * at or after Bk's stop. F(k) needs only WAL from Bk's start up to where F(k+1) was
 * looked for, so each segment is read at most once and the search stops at the first
 * backup that can reach its match. A match before every backup's stop is still placed:
 * the choice then refuses, naming why (docs/DESIGN.md, rule 9: history follows LSNs).
 */
#include "restore/recovery/recovery.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct match_ctx {
    const rs_opts *opts;
    uint32_t xid;
    bool found;
    rs_wal_event first; /* the earliest match seen */
    unsigned count;     /* matches seen */
    uint64_t other;     /* another match's LSN, for the message */
} match_ctx;

static int on_event(void *vctx, const rs_wal_event *e)
{
    match_ctx *m = vctx;
    bool hit = m->opts->target == RS_TARGET_NAME
                   ? e->kind == 'r' && strcmp(e->name, m->opts->target_value) == 0
                   : e->kind != 'r' && e->xid == m->xid;
    if (!hit)
        return 0;
    m->count++;
    if (!m->found || e->lsn < m->first.lsn) {
        if (m->found)
            m->other = m->first.lsn;
        m->first = *e;
        m->found = true;
    } else {
        m->other = e->lsn;
    }
    return 1;
}

static uint32_t tli_of(const rs_wal_view *v, uint64_t lsn)
{
    for (size_t i = v->ntl; i-- > 0;)
        if (v->tl[i].begin <= lsn && lsn < v->tl[i].end)
            return v->tl[i].tli;
    return v->ntl ? v->tl[v->ntl - 1].tli : 0;
}

static void describe(const rs_opts *opts, const rs_wal_event *e, uint32_t tli, char *out,
                     size_t cap)
{
    char lsn[32], when[40];
    pb_lsn_format(e->lsn, lsn);
    rs_fmt_time(e->time, when);
    if (e->kind == 'r') {
        snprintf(out, cap, "restore point %s at %s on timeline %u (%s)", e->name, lsn, tli,
                 when);
        return;
    }
    const char *what = e->kind == 'c' ? "commit" : e->kind == 'a' ? "abort"
                     : e->kind == 'C' ? "commit of the prepared" : "abort of the prepared";
    snprintf(out, cap, "%s transaction %s at %s on timeline %u (%s)", what, opts->target_value,
             lsn, tli, when);
}

/* The backups on the path, in history order, with the path's segment size. */
static size_t on_path(rs_wal_view *v, const chain_history *hist, const mf_backup **out,
                      uint32_t seg)
{
    size_t n = 0;
    for (size_t i = 0; i < hist->count; i++) {
        char why[300];
        const mf_backup *h = &hist->items[i];
        if (h->wal_segment_size == seg && rs_on_path(v, h, why, sizeof(why)))
            out[n++] = h;
    }
    return n;
}

/* Search newest backup first; *lo_out: where the searched WAL began. */
static int search(rs_events *s, const mf_backup **b, size_t n, match_ctx *m, uint64_t *lo_out,
                  pb_error *err)
{
    uint64_t hi = UINT64_MAX; /* everything from hi on was searched already */
    for (size_t k = n; k-- > 0;) {
        uint64_t lo = b[k]->start_lsn;
        *lo_out = lo;
        if (lo < hi) {
            match_ctx region = *m;
            region.found = false, region.count = 0;
            int rc = rs_events_range(s, lo, hi, on_event, &region, err);
            if (rc)
                return rc;
            if (region.found) {
                if (m->found)
                    region.other = m->first.lsn;
                region.count += m->count;
                *m = region;
            }
            hi = lo;
        }
        if (m->found && m->first.lsn >= b[k]->stop_lsn)
            return 0;
    }
    return 0;
}

/* The first archived segment on the path (UINT64_MAX when none): where the archive's
 * WAL begins, for what lies before every backup and for the listing of restore points. */
static uint64_t first_on_path(const rs_wal_view *v, uint32_t seg)
{
    uint64_t first = UINT64_MAX;
    for (size_t i = 0; i < v->nsegs; i++) {
        uint32_t tli;
        uint64_t n;
        if (!arch_parse_segment(v->segs[i], seg, &tli, &n) || n >= first)
            continue;
        for (size_t j = 0; j < v->ntl; j++)
            if (v->tl[j].tli == tli && n * seg < v->tl[j].end && v->tl[j].begin / seg <= n)
                first = n;
    }
    return first;
}

/* Not found from the oldest backup's start on: look before it, so that a target older
 * than every backup is refused as unreachable rather than as absent. */
static int search_before(rs_events *s, uint64_t oldest_start, match_ctx *m, uint64_t *lo,
                         pb_error *err)
{
    uint64_t first = first_on_path(s->v, s->seg_size), end = s->end_lsn;
    uint64_t valid_end = s->valid_end;
    bool at_end = s->at_end;
    if (first == UINT64_MAX || first * s->seg_size >= oldest_start)
        return 0;
    *lo = first * s->seg_size;
    int rc = rs_events_range(s, *lo, oldest_start, on_event, m, err);
    s->end_lsn = end; /* the message names where the whole search ended */
    s->valid_end = valid_end;
    s->at_end = at_end;
    return rc;
}

/* Where the search ended: at the end of the archived WAL, where its last valid record
 * ends (a record running into a segment not archived yet cannot be read), not the
 * boundary of the segment holding it. */
static uint64_t searched_to(const rs_events *s)
{
    return s->at_end && s->valid_end ? s->valid_end : s->end_lsn;
}

static int not_found(repo *r, const rs_opts *opts, const rs_wal_view *v, uint64_t lo,
                     const rs_events *s, pb_error *err)
{
    char a[32], b[32];
    pb_lsn_format(lo, a);
    pb_lsn_format(searched_to(s), b);
    return pb_fail(err, PB_ENOENT, "%s '%s' is not in the archived WAL of repository %s: "
                   "searched from %s to %s (%s) along timeline %u; nothing was written",
                   opts->target == RS_TARGET_NAME ? "restore point" : "the end of transaction",
                   opts->target_value, repo_location(r), a, b,
                   s->at_end ? "the end of the archived WAL" : "where the search stopped",
                   v->tl_of);
}

int rs_place_target(repo *r, const rs_opts *opts, rs_wal_view *v, const chain_history *hist,
                    rs_target_val *tv, pb_error *err)
{
    if ((opts->target != RS_TARGET_XID && opts->target != RS_TARGET_NAME) || hist->count == 0)
        return 0;
    const mf_backup *newest = &hist->items[hist->count - 1];
    uint32_t tli, seg = newest->wal_segment_size;
    if (!arch_valid_seg_size(seg))
        return pb_fail(err, PB_ECORRUPT, "backup %s records an impossible WAL segment size "
                       "%u", newest->id, seg);
    int rc = rs_timeline_path(v, opts, newest->timeline, &tli, err);
    const mf_backup **b = rc ? NULL : malloc(hist->count * sizeof(*b));
    if (!rc && !b)
        rc = pb_fail(err, PB_ENOMEM, "out of memory placing the recovery target");
    if (rc)
        return rc;
    size_t n = on_path(v, hist, b, seg);
    if (n == 0) { /* no backup on the path: the choice says why */
        free(b);
        return 0;
    }
    match_ctx m = {opts, (uint32_t)strtoull(opts->target_value, NULL, 10), false, {0}, 0, 0};
    rs_events s;
    rs_events_init(&s, r, v, seg, opts->state_dir);
    uint64_t lo = newest->start_lsn;
    rc = search(&s, b, n, &m, &lo, err);
    if (rc == 0 && !m.found)
        rc = search_before(&s, b[0]->start_lsn, &m, &lo, err);
    char a[32], c[32];
    pb_lsn_format(lo, a);
    pb_lsn_format(searched_to(&s), c);
    if (rc == 0)
        pb_info("searched the archived WAL from %s to %s for the recovery target: %" PRIu64
                " segments decoded, %" PRIu64 " from the cache", a, c, s.decoded,
                s.from_cache);
    if (rc == 0 && !m.found)
        rc = not_found(r, opts, v, lo, &s, err);
    if (rc == 0) {
        tv->placed = true;
        tv->lsn = m.first.lsn;
        tv->placed_tli = tli_of(v, m.first.lsn);
        describe(opts, &m.first, tv->placed_tli, tv->placed_desc, sizeof(tv->placed_desc));
        pb_info("found the recovery target: %s", tv->placed_desc);
        if (m.count > 1) {
            pb_lsn_format(m.other, c);
            pb_warn("the %s '%s' occurs %u times in the WAL searched (also at %s): recovery "
                    "stops at the first, %s", opts->target == RS_TARGET_NAME ? "restore point"
                                                                             : "transaction",
                    opts->target_value, m.count, c, tv->placed_desc);
        }
    }
    rs_events_free(&s);
    free(b);
    return rc;
}

/* ---- the restore points of the archive (info --restore-points) ------------------- */

typedef struct list_ctx {
    const rs_wal_view *v;
    rs_restore_point_cb cb;
    void *ctx;
} list_ctx;

static int list_event(void *vctx, const rs_wal_event *e)
{
    list_ctx *l = vctx;
    if (e->kind != 'r')
        return 0;
    rs_restore_point p;
    memset(&p, 0, sizeof(p));
    memcpy(p.name, e->name, sizeof(p.name));
    p.lsn = e->lsn;
    p.time = e->time;
    p.tli = tli_of(l->v, e->lsn);
    l->cb(l->ctx, &p);
    return 0;
}

int rs_list_restore_points(repo *r, uint32_t seg_size, const char *state_dir,
                           rs_restore_point_cb cb, void *ctx, uint32_t *tli_out,
                           pb_error *err)
{
    rs_wal_view v;
    *tli_out = 0;
    if (!arch_valid_seg_size(seg_size))
        return pb_fail(err, PB_EINVAL, "WAL segment size %u is not valid", seg_size);
    int rc = state_dir ? pb_state_dir_ready(state_dir, err) : 0; /* backup's checks */
    if (rc == 0)
        rc = rs_view_load(&v, r, ARCH_LIST_SEGMENTS | ARCH_LIST_HISTORY, err);
    if (rc)
        return rc;
    uint32_t tli = 1; /* the newest timeline: PostgreSQL's "latest" */
    for (size_t i = 0; i < v.nhist; i++)
        tli = v.hist[i] > tli ? v.hist[i] : tli;
    for (size_t i = 0; i < v.nsegs; i++) {
        uint32_t t;
        uint64_t n;
        if (arch_parse_segment(v.segs[i], seg_size, &t, &n) && t > tli)
            tli = t;
    }
    rc = rs_view_history(&v, tli, err);
    uint64_t first = rc ? UINT64_MAX : first_on_path(&v, seg_size);
    *tli_out = tli;
    if (rc == 0 && first != UINT64_MAX) {
        rs_events s;
        list_ctx l = {&v, cb, ctx};
        rs_events_init(&s, r, &v, seg_size, state_dir);
        rc = rs_events_range(&s, first * seg_size, UINT64_MAX, list_event, &l, err);
        rs_events_free(&s);
    }
    rs_view_free(&v);
    return rc;
}
