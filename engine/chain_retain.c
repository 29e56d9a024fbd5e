/*
 * engine/chain_retain.c — retention by time, and the WAL a retention keeps.
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
#include "engine/chain.h"

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
