/*
 * restore/recovery/timeline.c — the timeline recovery will follow, and the check (before
 * anything is written) that the WAL a restore needs is there.
 *
 * Timelines follow PostgreSQL's rules: the target timeline ("latest" = the highest
 * timeline whose history file is archived, counting up from the backup's) must contain
 * the backup's timeline, and the backup must end before that timeline branched off.
 * A target past a branch point is placed on the timeline that holds it
 * (rs_follow_timeline) or refused: the check follows the timeline path recovery will
 * follow (docs/DESIGN.md, rule 9).
 */
#include "restore/recovery/recovery.h"

#include "engine/wal/wal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Consistency at the backup's end lies on the backup's own timeline: "current" there,
 * so a backup taken before a later promotion still restores without naming a timeline. */
static const char *timeline_setting(const rs_opts *opts)
{
    if (opts->target_timeline)
        return opts->target_timeline;
    return opts->target == RS_TARGET_IMMEDIATE ? "current" : "latest";
}

/* The timeline recovery will follow from a backup on timeline backup_tli. */
static int target_tli(const rs_wal_view *v, const rs_opts *opts, uint32_t backup_tli,
                      uint32_t *out, pb_error *err)
{
    const char *t = timeline_setting(opts);
    if (!strcmp(t, "current")) {
        *out = backup_tli;
    } else if (!strcmp(t, "latest")) {
        uint32_t tli = backup_tli;
        while (rs_view_has_history(v, tli + 1)) /* PostgreSQL's findNewestTimeLine */
            tli++;
        *out = tli;
    } else {
        char *end;
        unsigned long n = strtoul(t, &end, 0);
        if (*end || n == 0 || n > UINT32_MAX)
            return pb_fail(err, PB_EINVAL, "--target-timeline must be latest, current or a "
                           "timeline id, not '%s'", t);
        *out = (uint32_t)n;
    }
    return 0;
}
/* ---- the timeline recovery follows ---------------------------------------------------- */

/* Where the loaded history leaves timeline b (UINT64_MAX when b is its last timeline or
 * not in it at all: rs_on_path then decides). */
static uint64_t branch_point(const rs_wal_view *v, uint32_t b, size_t *at)
{
    for (size_t i = 0; i < v->ntl; i++)
        if (v->tl[i].tli == b) {
            *at = i;
            return v->tl[i].end;
        }
    return UINT64_MAX;
}

/*
 * Where written WAL ends inside an archived segment, as an offset: the last non-zero
 * byte outside the page headers of pages whose header names this position. A segment is
 * archived whole, and what follows the last record (after a WAL switch, or on a new
 * timeline after the copied part of the old one) is zero-filled pages; pages left over
 * from a recycled segment name another position and are skipped. Page headers: 24 bytes
 * (SizeOfXLogShortPHD), 40 on a segment's first page (SizeOfXLogLongPHD, which also
 * carries XLOG_BLCKSZ), PostgreSQL's access/xlog_internal.h.
 */
static int wal_end_in_segment(repo *r, const char *name, uint64_t segno, uint32_t seg_size,
                              uint64_t *end, pb_error *err)
{
    uint8_t *data = NULL;
    size_t len = 0;
    *end = 0;
    int rc = arch_read(r, name, &data, &len, err);
    if (rc)
        return rc;
    uint32_t blck = len >= 40 ? pb_get_u32(data + 36) : 0;
    if (blck < 1024 || blck > 65536 || (blck & (blck - 1)) || len != seg_size)
        blck = 8192;
    uint64_t base = segno * (uint64_t)seg_size;
    for (size_t p = len / blck; p-- > 0 && *end == 0;) {
        const uint8_t *page = data + p * blck;
        if (pb_get_u64(page + 8) != base + p * blck)
            continue;
        for (size_t k = blck; k-- > (p == 0 ? 40u : 24u);)
            if (page[k]) {
                *end = p * blck + k + 1;
                break;
            }
    }
    free(data);
    return 0;
}

/* Does timeline tli's archived WAL go on past lsn? Yes when the next segment is archived;
 * else when written WAL in lsn's segment ends after it. */
static int holds_lsn(rs_wal_view *v, uint32_t tli, uint64_t lsn, uint32_t seg, bool *out,
                     pb_error *err)
{
    char name[25], next[25];
    uint64_t segno = lsn / seg, end = 0;
    arch_segment_name(name, tli, segno, seg);
    arch_segment_name(next, tli, segno + 1, seg);
    *out = rs_view_has_segment(v, next);
    if (*out || !rs_view_has_segment(v, name))
        return 0;
    int rc = wal_end_in_segment(v->r, name, segno, seg, &end, err);
    *out = rc == 0 && lsn % seg < end;
    return rc;
}

/* Has timeline b archived WAL in a segment after the one where the branch left it? */
static bool lived_on(const rs_wal_view *v, uint32_t b, uint64_t branch, uint32_t seg,
                     char last[25])
{
    last[0] = '\0';
    for (size_t i = 0; i < v->nsegs; i++) {
        uint32_t tli;
        uint64_t n;
        if (arch_parse_segment(v->segs[i], seg, &tli, &n) && tli == b && n > branch / seg)
            memcpy(last, v->segs[i], 25);
    }
    return last[0] != '\0';
}

/* An LSN past the branch: the timeline whose archived WAL goes on past it; refused when
 * both do (the user must say which) or neither does (recovery could not reach it). */
static int place_lsn(rs_wal_view *v, const mf_backup *h, uint64_t lsn, size_t at,
                     bool *stay, pb_error *err)
{
    uint32_t seg = h->wal_segment_size, later = 0;
    for (size_t i = at + 1; i < v->ntl && !later; i++)
        if (v->tl[i].begin <= lsn && lsn < v->tl[i].end)
            later = v->tl[i].tli;
    bool on_b = false, on_later = false;
    int rc = holds_lsn(v, h->timeline, lsn, seg, &on_b, err);
    if (rc == 0 && later)
        rc = holds_lsn(v, later, lsn, seg, &on_later, err);
    if (rc)
        return rc;
    *stay = on_b && !on_later;
    if (on_b != on_later)
        return 0;
    char a[32], b[32];
    pb_lsn_format(lsn, a);
    pb_lsn_format(v->tl[at].end, b);
    if (!on_b)
        return pb_fail(err, PB_ENOENT, "the target LSN %s lies after %s, where timeline %u "
                       "branched off timeline %u, and the archived WAL of neither timeline "
                       "reaches it: recovery would end before the target; nothing was "
                       "written", a, b, later, h->timeline);
    return pb_fail(err, PB_EINVAL, "the target LSN %s lies after %s, where timeline %u "
                   "branched off timeline %u, and the archive holds WAL at that LSN on both: "
                   "say which with --target-timeline %u (stay on timeline %u) or "
                   "--target-timeline %u; nothing was written", a, b, later, h->timeline,
                   h->timeline, h->timeline, later);
}

/* A target other than a time or an LSN (end of WAL) cannot be placed against the branch
 * point (a history file has its LSN, not its time). It can only be on the branch when
 * timeline b has no WAL after the branch's segment; it is on b when the backup itself
 * ends after the branch; otherwise both went on, and the user must say which. */
static int place_unplaceable(const rs_wal_view *v, const rs_opts *opts, const mf_backup *h,
                             size_t at, bool *stay, pb_error *err)
{
    uint64_t branch = v->tl[at].end;
    char last[25], a[32];
    *stay = h->stop_lsn > branch;
    if (*stay || !lived_on(v, h->timeline, branch, h->wal_segment_size, last))
        return 0;
    pb_lsn_format(branch, a);
    return pb_fail(err, PB_EINVAL, "the recovery target '%s' cannot be placed on one timeline: "
                   "timeline %u branched off timeline %u at LSN %s, after backup %s ended, and "
                   "timeline %u went on after that point too (archived WAL up to %s); say "
                   "--target-timeline %u to stay on timeline %u or --target-timeline %u (or "
                   "latest) to follow the branch; nothing was written",
                   opts->target_value ? opts->target_value : "end of WAL", v->tl_of,
                   h->timeline, a, h->id, h->timeline, last, h->timeline, h->timeline,
                   v->tl_of);
}

/* A time past the branch, when timeline b went on after it too: placed by the WAL of
 * both sides (wal_branch.c). */
static int place_time(rs_wal_view *v, const rs_opts *opts, const rs_target_val *tv,
                      const mf_backup *h, size_t at, bool *stay, pb_error *err)
{
    char last[25];
    *stay = h->stop_lsn > v->tl[at].end;
    if (*stay || !lived_on(v, h->timeline, v->tl[at].end, h->wal_segment_size, last))
        return 0;
    return rs_place_time(v, opts, tv, h, at, stay, err);
}

/*
 * PostgreSQL's default target timeline is "latest": the newest timeline whose history
 * file is archived. A promoted test restore that still archives into the repository
 * adds such a timeline, branching off at the LSN where its recovery ended; a target on
 * the original timeline past that point is then unreachable along "latest" (recovery
 * ends before the target). Without --target-timeline, a target past the branch follows
 * the timeline whose archived WAL holds it: LSN targets by where each timeline's WAL
 * goes on (place_lsn), times by the transaction ends of each side's WAL (place_time),
 * others as place_unplaceable says; both holding it is refused.
 */
int rs_follow_timeline(rs_wal_view *v, const rs_opts *opts, const rs_target_val *tv,
                       const mf_backup *h, rs_timeline *out, pb_error *err)
{
    const char *setting = timeline_setting(opts);
    int rc = target_tli(v, opts, h->timeline, &out->tli, err);
    if (rc == 0)
        rc = rs_view_history(v, out->tli, err);
    snprintf(out->setting, sizeof(out->setting), "%s", setting);
    if (rc || opts->target_timeline || opts->target == RS_TARGET_IMMEDIATE ||
        out->tli == h->timeline)
        return rc;
    size_t at = 0;
    uint64_t branch = branch_point(v, h->timeline, &at);
    bool stay = false, by_lsn = opts->target == RS_TARGET_LSN || tv->placed;
    if (branch == UINT64_MAX || (by_lsn && tv->lsn < branch))
        return 0;
    if (tv->placed) /* found in the WAL of the path it was searched along (wal_target.c) */
        stay = tv->placed_tli == h->timeline;
    else if (opts->target == RS_TARGET_LSN)
        rc = place_lsn(v, h, tv->lsn, at, &stay, err);
    else if (opts->target == RS_TARGET_TIME)
        rc = place_time(v, opts, tv, h, at, &stay, err);
    else
        rc = place_unplaceable(v, opts, h, at, &stay, err);
    if (rc || !stay)
        return rc;
    pb_info("the target lies on timeline %u, past the point where timeline %u branched off "
            "it: recovering along timeline %u", h->timeline, out->tli, h->timeline);
    out->tli = h->timeline;
    snprintf(out->setting, sizeof(out->setting), "%u", h->timeline);
    return rs_view_history(v, out->tli, err);
}

int rs_timeline_path(rs_wal_view *v, const rs_opts *opts, uint32_t backup_tli, uint32_t *tli,
                   pb_error *err)
{
    int rc = target_tli(v, opts, backup_tli, tli, err);
    return rc ? rc : rs_view_history(v, *tli, err);
}

/* ---- the WAL a restore needs -------------------------------------------------------- */

/* After the required range: how far the archive goes on without a gap, and whether WAL
 * exists beyond a gap (replay would stop at the gap without reaching it). */
static void report_reach(const rs_wal_view *v, const mf_backup *h, uint64_t last)
{
    uint32_t seg = h->wal_segment_size;
    char name[25], end[25] = "", gap[25];
    uint64_t s = last;
    while (rs_segment_for(v, s + 1, seg, name)) {
        memcpy(end, name, 25);
        s++;
    }
    if (!end[0])
        rs_segment_for(v, last, seg, end);
    rs_segment_for(v, s + 1, seg, gap);
    bool beyond = false;
    for (size_t i = 0; i < v->nsegs && !beyond; i++) {
        uint32_t tli;
        uint64_t n;
        if (!arch_parse_segment(v->segs[i], seg, &tli, &n) || n <= s + 1)
            continue;
        for (size_t j = 0; j < v->ntl; j++)
            beyond |= v->tl[j].tli == tli;
    }
    char lsn[32];
    pb_lsn_format((s + 1) * (uint64_t)seg, lsn);
    if (beyond)
        pb_warn("WAL segment %s is missing from the repository although later WAL is "
                "archived: replay will end at LSN %s and cannot reach a target after it",
                gap, lsn);
    else
        pb_info("archived WAL runs without a gap to %s: replay can go up to LSN %s", end, lsn);
}

/* The segments from the backup's start to its stop (on to the target LSN) on the path
 * recovery follows; the first missing one is named. */
int rs_check_wal_in(rs_wal_view *v, const rs_opts *opts, const rs_target_val *tv,
                    const mf_backup *h, rs_timeline *tl, pb_error *err)
{
    if (!arch_valid_seg_size(h->wal_segment_size))
        return pb_fail(err, PB_ECORRUPT, "backup %s records an impossible WAL segment size "
                       "%u", h->id, h->wal_segment_size);
    int rc = rs_follow_timeline(v, opts, tv, h, tl, err);
    return rc ? rc : rs_check_wal_on_path(v, opts, tv, h, err);
}

int rs_check_wal_on_path(rs_wal_view *v, const rs_opts *opts, const rs_target_val *tv,
                         const mf_backup *h, pb_error *err)
{
    uint32_t seg = h->wal_segment_size;
    if (!arch_valid_seg_size(seg))
        return pb_fail(err, PB_ECORRUPT, "backup %s records an impossible WAL segment size "
                       "%u", h->id, seg);
    uint64_t first = h->start_lsn / seg, need = (h->stop_lsn - 1) / seg, last = need;
    if (opts->target == RS_TARGET_LSN && tv->lsn / seg > last)
        last = tv->lsn / seg;
    for (uint64_t s = first; s <= last; s++) {
        char name[25];
        if (rs_segment_for(v, s, seg, name))
            continue;
        char what[200];
        if (s <= need)
            snprintf(what, sizeof(what), "to make backup %s consistent", h->id);
        else
            snprintf(what, sizeof(what), "to replay backup %s up to the target LSN %s", h->id,
                     opts->target_value);
        return pb_fail(err, PB_ENOENT, "WAL segment %s needed %s is missing from repository "
                       "%s; nothing was written", name[0] ? name : "(none on this timeline)",
                       what, repo_location(v->r));
    }
    if (opts->target != RS_TARGET_IMMEDIATE && opts->target != RS_TARGET_LSN)
        report_reach(v, h, last);
    return 0;
}

int rs_check_wal(repo *r, const rs_opts *opts, const mf_backup *h, rs_timeline *tl,
                 pb_error *err)
{
    rs_target_val tv;
    rs_wal_view v;
    memset(&v, 0, sizeof(v));
    int rc = rs_parse_target(opts, &tv, err);
    if (rc == 0)
        rc = rs_view_load(&v, r, ARCH_LIST_SEGMENTS | ARCH_LIST_HISTORY, err);
    if (rc == 0)
        rc = rs_check_wal_in(&v, opts, &tv, h, tl, err);
    rs_view_free(&v);
    return rc;
}
