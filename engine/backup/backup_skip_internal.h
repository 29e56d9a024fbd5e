/* engine/backup/backup_skip_internal.h — the file-level skip rule and the choice of how a
 * backup reads (backup_skip.c). */
#ifndef PB_ENGINE_BACKUP_SKIP_INTERNAL_H
#define PB_ENGINE_BACKUP_SKIP_INTERNAL_H

#include "engine/backup/backup_internal.h"

/* ---- the file-level skip rule (engine/backup/backup_skip.c) -------------------------------- */

/* Why a relation segment is read or skipped; decisions read the value, people the name. */
typedef enum bk_skip_verdict {
    BK_SKIP = 0,             /* size and mtime equal the parent's, mtime before its horizon */
    BK_READ_NEW,             /* not a relation segment in the parent backup */
    BK_READ_NO_HORIZON,      /* the parent recorded no mtime horizon (an older manifest) */
    BK_READ_INODE,           /* replaced under the same name (both inodes known) */
    BK_READ_MTIME_FUTURE,    /* mtime after the server's clock now */
    BK_READ_MTIME_BACKWARDS, /* mtime before the parent's */
    BK_READ_SIZE_SAME_MTIME, /* the size changed but an mtime before the horizon did not */
    BK_READ_CHANGED,         /* the size or mtime moved: the ordinary change */
    BK_READ_RECENT,          /* mtime not before the parent's horizon: may have changed after
                              * the parent read it */
} bk_skip_verdict;
#define BK_SKIP_NVERDICTS 9

typedef struct bk_skip_stat {
    uint64_t size;
    int64_t mtime;
    uint64_t inode; /* 0 = unknown */
} bk_skip_stat;

/* The rule (pgBackRest's, on the server's clock): skip only when prev exists, the parent's
 * horizon is known, the inode is unchanged when both are known, the mtime is not in the
 * future (after now) and equals prev's, the size equals prev's, and the mtime lies before
 * the parent's horizon. prev NULL: not in the parent. Pure: no I/O. */
bk_skip_verdict bk_skip_decide(const bk_skip_stat *cur, const bk_skip_stat *prev,
                               int64_t parent_horizon, int64_t now);
const char *bk_skip_verdict_name(bk_skip_verdict v);

/* Is a verify scan due for an incremental on top of chain c (full first)? Counts the
 * incrementals since the last backup that read every page (a full, a scan-mode
 * incremental, an older manifest without a read mode, or a verify scan). why (may be
 * NULL) receives the reason when due. */
bool bk_verify_due(const chain *c, unsigned every, int64_t after_secs, int64_t now,
                   char *why, size_t why_len);

/* Choose how this backup reads (sets ctx->skip_on, ctx->verify, ctx->wal and the header's
 * read_mode) and log why; for WAL guidance it decodes the WAL window (walguide_read.c). Called
 * after pg_backup_start, with ctx->parent, the catalog and the server clock set; plan is the
 * chain this incremental builds on (NULL for a full). */
int bk_choose_read(bk_ctx *ctx, const chain *plan_chain, bool parent_is_head, pb_error *err);
/* Log what the skip rule decided (files and bytes skipped, segments read and why) and, for a
 * verify scan, what it found. */
void bk_report_read(const bk_ctx *ctx);
/* The server's clock now, following it from ctx->server_start (unix s). */
int64_t bk_server_now(const bk_ctx *ctx);
/* The mtime horizon a backup records when the server's clock read server_second (the
 * floor of its time) just before the walk: one second back. A write after the walk comes
 * at or after that reading, so its mtime, even from the kernel's coarse clock (behind by
 * a tick, well under a second), is not below it: no wait for the next second is needed
 * (backup.c). Pure. */
int64_t bk_mtime_horizon(int64_t server_second);
/* The rule's verdict on relation segment e for this backup (counted in ctx->verdicts);
 * prev is the parent's entry for e (NULL if none). The test fault backup.skip-miss turns
 * a "changed" verdict into a skip. */
bk_skip_verdict bk_skip_file(bk_ctx *ctx, const walk_entry *e, const mf_file *prev);
/* The bytes of e this backup expects to read, for the progress total, from the walk and
 * the parent's header alone (the parent's records are streamed once, by the backup): 0
 * for a segment untouched since before the parent's mtime horizon when the skip rule
 * applies, the named blocks of a WAL-guided one when the block set is in memory, else
 * the whole size. Pure prediction (counts nothing); the backup corrects the total by what
 * each file really read. */
uint64_t bk_planned_read(const bk_ctx *ctx, const walk_entry *e);

#endif
