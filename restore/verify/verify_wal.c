/*
 * restore/verify/verify_wal.c — the WAL archive part of verify (rs_verify_repo with no set):
 * every archived object read and its checksum checked, each backup's own WAL (start to
 * stop on its timeline, the rule a backup is completed by: present, and decoded as a
 * restore decodes it before writing, record CRCs included), gaps on each timeline from
 * the oldest backup's start to the newest segment, and history files that parse and
 * extend their parent's history. Reading every segment is what checking every checksum
 * costs: it is one pass, one object at a time.
 */
#include "restore/verify/verify_internal.h"

#include "engine/chain/chain.h"
#include "engine/wal/wal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_objects(vfy_run *v, const rs_wal_view *w, pb_error *err)
{
    for (size_t i = 0; i < w->nsegs + w->nhist; i++) {
        char name[32];
        if (i < w->nsegs)
            snprintf(name, sizeof(name), "%s", w->segs[i]);
        else
            arch_history_name(name, w->hist[i - w->nsegs]);
        uint8_t *data = NULL;
        size_t len = 0;
        pb_error e = PB_ERROR_INIT;
        int rc = arch_read(v->r, name, &data, &len, &e);
        free(data);
        if (rc == PB_ENOMEM)
            return pb_fail(err, rc, "%s", e.msg);
        if (rc)
            vfy_problem(v, NULL, "WAL file %s: %s", name, e.msg);
        else if (i < w->nsegs)
            v->stats->wal_segments++;
        else
            v->stats->wal_history++;
    }
    return 0;
}

static int no_event(void *ctx, const rs_wal_event *e)
{
    (void)ctx, (void)e;
    return 0;
}

/* Backup h's own WAL, all present, decoded from its start to its stop as a restore reads
 * it (restore/wal_check.c): a checksum, page header or record CRC that fails, or valid
 * WAL that ends before the stop, is a problem of h naming the segment. */
static void decode_backup_wal(vfy_run *v, const rs_wal_view *w, const mf_backup *h)
{
    uint32_t seg = h->wal_segment_size;
    rs_tl_entry own = {h->timeline, 0, UINT64_MAX};
    rs_wal_view bv = *w; /* the listing, along the backup's own timeline */
    bv.tl = &own;
    bv.ntl = 1;
    bv.seen = NULL;
    rs_events s;
    pb_error e = PB_ERROR_INIT;
    rs_events_init(&s, v->r, &bv, seg, NULL);
    int rc = rs_events_check(&s, h->start_lsn, h->stop_lsn, false, no_event, NULL, &e);
    char name[25], at[32];
    arch_segment_name(name, h->timeline, rc ? s.failed_segno : s.valid_end / seg, seg);
    pb_lsn_format(s.valid_end, at);
    if (rc)
        vfy_problem(v, h->id, "WAL segment %s, needed to make backup %s consistent, cannot be "
                    "read whole: %s", name, h->id, e.msg);
    else if (s.at_end && s.valid_end < h->stop_lsn)
        vfy_problem(v, h->id, "WAL segment %s, needed to make backup %s consistent, is "
                    "damaged: its valid WAL ends at %s", name, h->id, at);
    rs_events_free(&s);
}

void vfy_backup_wal(vfy_run *v, const rs_wal_view *w, const mf_backup *h)
{
    uint32_t seg = h->wal_segment_size;
    bool all = true;
    if (!arch_valid_seg_size(seg)) {
        vfy_problem(v, h->id, "the manifest records an impossible WAL segment size %u", seg);
        return;
    }
    for (uint64_t s = h->start_lsn / seg; h->stop_lsn && s <= (h->stop_lsn - 1) / seg; s++) {
        char name[25];
        arch_segment_name(name, h->timeline, s, seg);
        if (rs_view_has_segment(w, name))
            continue;
        all = false;
        vfy_problem(v, h->id, "WAL segment %s, needed to make backup %s consistent, is "
                    "missing from the archive (wal/%.8s/%s.zst)", name, h->id, name, name);
    }
    if (all && h->stop_lsn > h->start_lsn)
        decode_backup_wal(v, w, h);
}

static void note_gap(vfy_run *v, uint32_t tli, uint64_t from, uint64_t to, uint32_t seg)
{
    char a[25], b[25];
    arch_segment_name(a, tli, from, seg);
    arch_segment_name(b, tli, to, seg);
    vfy_problem(v, NULL, "gap in the WAL archive on timeline %u: %s%s%s missing (%" PRIu64
                " segments)", tli, a, from == to ? "" : "..", from == to ? "" : b,
                to - from + 1);
}

/* A gap before the mark expire --retain-archive left (engine/chain/chain_retain.c) is the WAL
 * it removed on purpose: each older backup's own WAL is still checked (its start to its
 * stop), the continuity between them is not. */
typedef struct vfy_gaps {
    uint32_t mark_tli;
    uint64_t mark_no; /* 0: no mark */
    uint64_t excused;
} vfy_gaps;

static void gap(vfy_run *v, vfy_gaps *g, uint32_t tli, uint64_t from, uint64_t to, uint32_t seg)
{
    if (g->mark_no && tli <= g->mark_tli && to < g->mark_no)
        g->excused += to - from + 1;
    else
        note_gap(v, tli, from, to, seg);
}

/* Where timeline tli begins (its branch point, from its history file), as a segment;
 * 0 when unknown (timeline 1, or no readable history: check_histories names that). */
static uint64_t timeline_begin(rs_wal_view *w, uint32_t tli, uint32_t seg)
{
    pb_error e = PB_ERROR_INIT;
    if (tli == 1 || !rs_view_has_history(w, tli) || rs_view_history(w, tli, &e) != 0 ||
        w->ntl == 0)
        return 0;
    return w->tl[w->ntl - 1].begin / seg;
}

/* Segments are sorted by name: per timeline, in position order. A timeline is checked
 * from the oldest backup's start, or from where it begins if that is later (its branch
 * point; else its first archived segment), or from an earlier start of a backup on it. */
static void check_gaps(vfy_run *v, vfy_gaps *g, rs_wal_view *w, const mf_backup *hs, size_t n,
                       uint32_t seg)
{
    uint64_t oldest = UINT64_MAX;
    for (size_t i = 0; i < n; i++)
        if (hs[i].start_lsn / seg < oldest)
            oldest = hs[i].start_lsn / seg;
    uint32_t cur = 0;
    uint64_t prev = 0;
    for (size_t i = 0; i < w->nsegs; i++) {
        uint32_t tli;
        uint64_t no;
        if (!arch_parse_segment(w->segs[i], seg, &tli, &no) || (n && no < oldest))
            continue;
        if (tli != cur) {
            uint64_t begin = timeline_begin(w, tli, seg), lo = no;
            if (begin && begin < lo)
                lo = n && begin < oldest ? oldest : begin;
            for (size_t k = 0; k < n; k++) {
                const mf_backup *h = &hs[k];
                if (h->timeline == tli && h->start_lsn / seg < lo)
                    lo = h->start_lsn / seg;
            }
            if (lo < no)
                gap(v, g, tli, lo, no - 1, seg);
            cur = tli;
        } else if (no > prev + 1) {
            gap(v, g, tli, prev + 1, no - 1, seg);
        }
        prev = no;
    }
}

/* The history of tli must start with its parent's history: same timelines, same
 * switch points (PostgreSQL writes a new history as the parent's plus one line). */
static int check_history(vfy_run *v, rs_wal_view *w, uint32_t tli, pb_error *err)
{
    pb_error e = PB_ERROR_INIT;
    int rc = rs_view_history(w, tli, &e);
    if (rc == PB_ENOMEM)
        return pb_fail(err, rc, "%s", e.msg);
    if (rc) {
        vfy_problem(v, NULL, "WAL history file %08X.history: %s", tli, e.msg);
        return 0;
    }
    size_t n = w->ntl;
    rs_tl_entry *mine = malloc(n * sizeof(*mine));
    if (!mine)
        return pb_fail(err, PB_ENOMEM, "out of memory checking timeline histories");
    memcpy(mine, w->tl, n * sizeof(*mine));
    uint32_t parent = n >= 2 ? mine[n - 2].tli : 0;
    if (parent > 1 && rs_view_has_history(w, parent) && rs_view_history(w, parent, &e) == 0) {
        bool same = w->ntl == n - 1;
        for (size_t i = 0; same && i + 1 < w->ntl; i++)
            same = w->tl[i].tli == mine[i].tli && w->tl[i].end == mine[i].end;
        if (!same)
            vfy_problem(v, NULL, "WAL history file %08X.history does not extend the history "
                        "of its parent timeline %u (%08X.history)", tli, parent, parent);
    }
    free(mine);
    return 0;
}

static int check_histories(vfy_run *v, rs_wal_view *w, uint32_t seg, pb_error *err)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < w->nhist; i++)
        rc = check_history(v, w, w->hist[i], err);
    uint32_t last = 0;
    for (size_t i = 0; rc == 0 && i < w->nsegs; i++) {
        uint32_t tli;
        uint64_t no;
        if (!arch_parse_segment(w->segs[i], seg, &tli, &no) || tli == last)
            continue;
        last = tli;
        if (tli > 1 && !rs_view_has_history(w, tli))
            vfy_problem(v, NULL, "timeline %u has archived WAL (from %s) but no history file "
                        "%08X.history", tli, w->segs[i], tli);
    }
    return rc;
}

int vfy_wal_archive(vfy_run *v, rs_wal_view *w, const mf_backup *hs, size_t n,
                    pb_error *err)
{
    uint32_t seg = 16u << 20;
    for (size_t i = 0; i < n; i++)
        if (arch_valid_seg_size(hs[i].wal_segment_size))
            seg = hs[i].wal_segment_size;
    v->subject_problems = 0;
    size_t before = v->stats->problems;
    vfy_gaps g = {0, 0, 0};
    char mark[25];
    int rc = chain_archive_marked(v->r, mark, err);
    if (rc == 0 && mark[0] && !arch_parse_segment(mark, seg, &g.mark_tli, &g.mark_no))
        vfy_problem(v, NULL, "archive retention mark %sarchive-from-%s names no segment",
                    CHAIN_ARCHIVE_MARKS, mark);
    if (rc == 0)
        rc = check_objects(v, w, err);
    if (rc == 0) {
        check_gaps(v, &g, w, hs, n, seg);
        rc = check_histories(v, w, seg, err);
    }
    if (rc == 0) {
        char msg[300], excused[120] = "";
        uint64_t segs = v->stats->wal_segments, hist = v->stats->wal_history;
        if (g.excused)
            snprintf(excused, sizeof(excused), "; %" PRIu64 " %s before %s removed by "
                     "expire --retain-archive", g.excused,
                     pb_plural(g.excused, "segment", "segments"), mark);
        snprintf(msg, sizeof(msg), "WAL archive: %s; %" PRIu64 " %s and %" PRIu64
                 " history %s read and checked%s", v->stats->problems > before ? "FAILED"
                 : "ok", segs, pb_plural(segs, "segment", "segments"), hist,
                 pb_plural(hist, "file", "files"), excused);
        v->note(v->note_ctx, NULL, false, msg);
    }
    return rc;
}
