/*
 * restore/recovery/wal_view.c — the WAL archive as recovery will read it: one listing of
 * the archive, timeline histories, and which segment file recovery reads for each
 * position. Each WAL segment is looked for on the newest timeline of the history that
 * had begun by then, falling back to older ones as PostgreSQL does. The timeline
 * recovery follows is timeline.c's, which stands on this listing.
 */
#include "restore/recovery/recovery.h"

#include "engine/wal/wal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>



static int collect_name(void *vctx, const char *name)
{
    rs_wal_view *v = vctx;
    if (strlen(name) == 24) {
        if (PB_GROW(v->segs, &v->scap, v->nsegs + 1))
            return PB_ENOMEM;
        memcpy(v->segs[v->nsegs++], name, 25);
        return 0;
    }
    if (PB_GROW(v->hist, &v->hcap, v->nhist + 1))
        return PB_ENOMEM;
    v->hist[v->nhist++] = (uint32_t)strtoul(name, NULL, 16);
    return 0;
}

static int cmp_seg(const void *a, const void *b)
{
    return memcmp(a, b, 24);
}

/* What the command's scans have seen (wal_events.c records it): kept with the listing,
 * so every copy of the view shares it and rs_view_free frees it. */
bool rs_seen_checked(const rs_wal_seen *s, const char *name)
{
    for (size_t i = 0; s && i < s->nchecked; i++)
        if (!strcmp(s->checked[i], name))
            return true;
    return false;
}

void rs_seen_free(rs_wal_seen *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nspc; i++)
        free(s->spc[i].path);
    free(s->spc);
    free(s->checked);
    free(s);
}

int rs_view_load(rs_wal_view *v, repo *r, unsigned kinds, pb_error *err)
{
    memset(v, 0, sizeof(*v));
    v->r = r;
    if (!(v->seen = calloc(1, sizeof(*v->seen))))
        return pb_fail(err, PB_ENOMEM, "out of memory listing the WAL archive");
    int rc = arch_list(r, kinds, collect_name, v, err);
    if (rc)
        rs_view_free(v); /* a failed load holds nothing */
    if (rc == PB_ENOMEM)
        return pb_fail(err, rc, "out of memory listing the WAL archive of %s",
                       repo_location(r));
    if (rc)
        return pb_error_wrap(err, "listing the WAL archive");
    if (v->nsegs)
        qsort(v->segs, v->nsegs, sizeof(*v->segs), cmp_seg);
    return 0;
}

void rs_view_free(rs_wal_view *v)
{
    free(v->hist);
    free(v->segs);
    free(v->tl);
    rs_seen_free(v->seen);
    memset(v, 0, sizeof(*v));
}

bool rs_view_has_history(const rs_wal_view *v, uint32_t tli)
{
    for (size_t i = 0; i < v->nhist; i++)
        if (v->hist[i] == tli)
            return true;
    return false;
}

bool rs_view_has_segment(const rs_wal_view *v, const char *name)
{
    return v->nsegs && bsearch(name, v->segs, v->nsegs, sizeof(*v->segs), cmp_seg) != NULL;
}

static int add_entry(rs_wal_view *v, uint32_t tli, uint64_t begin, uint64_t end)
{
    rs_tl_entry *p = realloc(v->tl, (v->ntl + 1) * sizeof(*p));
    if (!p)
        return PB_ENOMEM;
    v->tl = p;
    v->tl[v->ntl++] = (rs_tl_entry){tli, begin, end};
    return 0;
}

/* Load the history of timeline tli into v->tl (timeline 1, or one without an archived
 * history file, is a history of its own). */
int rs_view_history(rs_wal_view *v, uint32_t tli, pb_error *err)
{
    if (v->tl && v->tl_of == tli)
        return 0;
    free(v->tl);
    v->tl = NULL;
    v->ntl = 0;
    v->tl_of = tli;
    if (tli == 1 || !rs_view_has_history(v, tli))
        return add_entry(v, tli, 0, UINT64_MAX)
                   ? pb_fail(err, PB_ENOMEM, "out of memory reading timeline history") : 0;
    char name[17];
    arch_history_name(name, tli);
    uint8_t *text = NULL;
    size_t len = 0;
    int rc = arch_read(v->r, name, &text, &len, err);
    if (rc == 0)
        rc = arch_history_parse((const char *)text, len, tli, &v->tl, &v->ntl, err);
    free(text);
    return rc;
}

/* Is backup h on the path of the loaded history, ending before its timeline branched? */
bool rs_on_path(const rs_wal_view *v, const mf_backup *h, char *why, size_t why_len)
{
    for (size_t i = 0; i < v->ntl; i++) {
        if (v->tl[i].tli != h->timeline)
            continue;
        if (h->stop_lsn <= v->tl[i].end)
            return true;
        char a[32], b[32];
        pb_lsn_format(h->stop_lsn, a);
        pb_lsn_format(v->tl[i].end, b);
        snprintf(why, why_len, "it ends at LSN %s on timeline %u, after timeline %u branched "
                 "off at %s", a, h->timeline, v->tl_of, b);
        return false;
    }
    snprintf(why, why_len, "its timeline %u is not in the history of target timeline %u",
             h->timeline, v->tl_of);
    return false;
}

/* Which archived file recovery reads for segment segno: the newest timeline of the
 * history that had begun by then, else an older one whose part ends inside or after it.
 * Returns whether one is archived; name is the one found, or the one expected. */
bool rs_segment_for(const rs_wal_view *v, uint64_t segno, uint32_t seg_size,
                    char name[25])
{
    name[0] = '\0';
    for (size_t i = v->ntl; i-- > 0;) {
        const rs_tl_entry *e = &v->tl[i];
        if (e->begin / seg_size > segno || (e->end != UINT64_MAX && segno * seg_size >= e->end))
            continue;
        char cand[25];
        arch_segment_name(cand, e->tli, segno, seg_size);
        if (!name[0])
            memcpy(name, cand, 25);
        if (rs_view_has_segment(v, cand)) {
            memcpy(name, cand, 25);
            return true;
        }
    }
    return false;
}
