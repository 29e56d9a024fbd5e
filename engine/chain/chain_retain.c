/*
 * engine/chain/chain_retain.c — retention by time, and the WAL a retention keeps.
 *
 * By time (pgBackRest's repo-retention-full-type=time): every full newer than the
 * cut-off stays, and so does the newest full older than it, so any point inside the
 * window is restorable (a window with no full of its own starts from that older one).
 * It is expressed as the count chain_retain understands: the fulls walked newest first,
 * as chain_retain walks them (one state counted once), up to and with the first one
 * that stopped before the cut-off.
 *
 * WAL (pgBackRest's repo-retention-archive, archive type full): the archive stays
 * continuous from the start of the newest N fulls' oldest; an older kept backup keeps
 * only its own WAL, start to stop segment, so it remains restorable to its end (not to
 * a point after it).
 */
#include "engine/chain/chain.h"

#include <stdio.h>
#include <string.h>

static bool is_full(const mf_backup *b)
{
    return b->type == 'F' || b->type == 'S';
}

static bool same_state(const mf_backup *a, const mf_backup *b)
{
    return a && a->stop_lsn == b->stop_lsn && a->timeline == b->timeline;
}

unsigned chain_retain_days_count(const chain_history *h, int64_t cutoff)
{
    unsigned fulls = 0;
    const mf_backup *counted = NULL;
    for (size_t i = h->count; i-- > 0;) {
        const mf_backup *b = &h->items[i];
        if (!is_full(b) || same_state(counted, b))
            continue;
        fulls++;
        counted = b;
        if (b->stop_time < cutoff)
            return fulls; /* the newest full older than the window starts it */
    }
    return 0; /* none older: everything is inside the window */
}

const mf_backup *chain_archive_start(const chain_history *h, const bool *keep,
                                     unsigned retain_archive)
{
    const mf_backup *counted = NULL, *start = NULL;
    unsigned fulls = 0;
    for (size_t i = h->count; retain_archive && i-- > 0;) {
        const mf_backup *b = &h->items[i];
        if (!keep[i] || !is_full(b))
            continue;
        if (same_state(counted, b)) {
            start = b->start_lsn < start->start_lsn ? b : start;
            continue;
        }
        if (fulls == retain_archive)
            break;
        fulls++;
        counted = start = b;
    }
    return fulls == retain_archive ? start : NULL;
}

bool chain_wal_in_backup(const mf_backup *b, const char *name)
{
    return strncmp(name, b->start_wal, 8) == 0 && strncmp(name + 8, b->start_wal + 8, 16) >= 0 &&
           strncmp(name + 8, b->stop_wal + 8, 16) <= 0;
}

/* ---- the mark of archive retention ----
 * A gap that --retain-archive made looks like one that damage made, so expire leaves a
 * mark saying from where the archive is kept continuous (retention/archive-from-<seg>,
 * written before any WAL goes): verify then holds only the WAL after it to continuity. */

static bool mark_name(const char *key, const char **seg)
{
    const char *base = strrchr(key, '/');
    base = base ? base + 1 : key;
    if (strncmp(base, "archive-from-", 13) != 0 || strlen(base + 13) != 24 ||
        strspn(base + 13, "0123456789ABCDEF") != 24)
        return false;
    *seg = base + 13;
    return true;
}

/* Later: the position first (a new timeline carries on where its parent left). */
static bool later_seg(const char *a, const char *b)
{
    int c = strncmp(a + 8, b + 8, 16);
    return c > 0 || (c == 0 && strncmp(a, b, 8) > 0);
}

static int newest_mark(void *vout, const char *key, uint64_t size)
{
    (void)size;
    char *out = vout;
    const char *seg;
    if (mark_name(key, &seg) && (!out[0] || later_seg(seg, out)))
        memcpy(out, seg, 25);
    return 0;
}

int chain_archive_marked(repo *r, char out[25], pb_error *err)
{
    out[0] = '\0';
    int rc = repo_list(r, CHAIN_ARCHIVE_MARKS, newest_mark, out, err);
    return rc == PB_ENOENT ? 0 : rc;
}

typedef struct mark_drop {
    repo *r;
    const char *keep;
} mark_drop;

static int drop_older_mark(void *vctx, const char *key, uint64_t size)
{
    (void)size;
    mark_drop *d = vctx;
    const char *seg;
    if (mark_name(key, &seg) && later_seg(d->keep, seg))
        chain_delete_object(d->r, key);
    return 0;
}

int chain_archive_mark(repo *r, const char *seg, const char *id, pb_error *err)
{
    char key[80], text[160];
    snprintf(key, sizeof(key), "%sarchive-from-%.24s", CHAIN_ARCHIVE_MARKS, seg);
    int n = snprintf(text, sizeof(text), "pageback-archive-retention 1\nfrom=%.24s\n"
                     "backup=%s\n", seg, id);
    int rc = repo_put_new(r, key, text, (size_t)n, err);
    if (rc == PB_EEXIST)
        rc = 0;
    mark_drop d = {r, seg};
    return rc ? rc : repo_list(r, CHAIN_ARCHIVE_MARKS, drop_older_mark, &d, err);
}
