/*
 * engine/backup/backup_file.c — backing up one file: relation segments page by page
 * (verify, hash, diff against the chain head, pack what changed), other files
 * whole when their hash changed.
 */
#include "engine/backup/backup_rel_internal.h"
#include "engine/backup/backup_file_internal.h"
#include "engine/backup/backup_records_internal.h"
#include "engine/backup/backup_skip_internal.h"
#include "engine/backup/backup_throttle_internal.h"
#include "engine/pack/pack.h"
#include "common/fault.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#define RELSEG_PAGES 131072u /* 1 GiB segments of 8 kB pages */

static int append_run(mf_file *f, size_t *cap, const mf_run *run)
{
    if (PB_GROW(f->runs, cap, (size_t)f->nruns + 1))
        return PB_ENOMEM;
    f->runs[f->nruns++] = *run;
    return 0;
}

static int append_hash(rel_scan *s, uint64_t h)
{
    if (PB_GROW(s->out.page_hashes, &s->hashes_cap, s->nhashes + 1))
        return PB_ENOMEM;
    s->out.page_hashes[s->nhashes++] = h;
    return 0;
}

static int flush_frame(bk_ctx *ctx, mf_file *f, size_t *runs_cap, uint32_t first,
                       uint32_t count, const uint8_t *data, size_t len, pb_error *err)
{
    mf_run run = {first, count, 0, 0, 0, 0, 0};
    int rc = pack_write_runs(ctx->packs, data, len, &run, 1, 0, err);
    if (rc)
        return pb_error_wrap(err, "storing %s", f->path);
    if (append_run(f, runs_cap, &run))
        return pb_fail(err, PB_ENOMEM, "out of memory recording frames of %s", f->path);
    return 0;
}

/* Close the open run into the frame's runs. */
static void close_run(rel_scan *s)
{
    if (s->run_count == 0)
        return;
    mf_run *run = &s->cur->runs[s->cur->nruns++];
    memset(run, 0, sizeof(*run));
    run->first = s->run_first;
    run->count = s->run_count;
    run->frame_page = s->frame_pages - s->run_count;
    s->run_count = 0;
}

static void flush_rel_run(rel_scan *s)
{
    close_run(s);
    if (!s->cur || s->cur->nruns == 0)
        return;
    bool bulk = s->cur->nruns == 1 && s->frame_pages == BK_FRAME_PAGES;
    int level = s->ctx->opts->zstd_level;
    s->cur->level = bulk || level >= BK_SCATTERED_LEVEL ? 0 : BK_SCATTERED_LEVEL;
    bk_pipe_submit_runs(s->ctx->pipe, s->cur, (size_t)s->frame_pages * PB_PAGE_SIZE);
    s->cur = NULL;
    s->frame_pages = 0;
}

/* Page blk changed: where it goes (the open run, a new run of the frame, a new frame). */
static void place_page(rel_scan *s, uint32_t blk)
{
    bool adjacent = s->run_count && blk == s->run_first + s->run_count;
    bool same_region = s->frame_pages &&
                       blk / BK_REGION_PAGES == (s->run_count ? s->run_first
                                                              : s->cur->runs[0].first) /
                                                    BK_REGION_PAGES;
    /* One run so far: bulk data, cut at BK_FRAME_PAGES; a frame of several runs holds
     * scattered pages and grows to BK_SCATTERED_PAGES (engine/backup/backup_internal.h). */
    uint32_t limit = s->cur && s->cur->nruns ? BK_SCATTERED_PAGES : BK_FRAME_PAGES;
    bool fits = s->frame_pages < limit &&
                (adjacent || (s->cur && s->cur->nruns + 1 < BK_JOB_RUNS));
    if (s->frame_pages && !(fits && (adjacent || (BK_SHARE_FRAMES && same_region))))
        flush_rel_run(s);
    if (!s->cur) {
        s->cur = bk_pipe_acquire(s->ctx->pipe);
        s->frame_pages = 0;
    }
    if (s->run_count && blk != s->run_first + s->run_count)
        close_run(s);
    if (s->run_count == 0)
        s->run_first = blk;
}

/* Rule 2: a bad page below the start LSN may be a torn read of a page being written
 * right now; re-read it a few times before calling it corrupt. Returns the page to use. */
static int check_page(rel_scan *s, const uint8_t *page, uint32_t blk, const uint8_t **use)
{
    bk_ctx *ctx = s->ctx;
    uint32_t relblk = s->e->segno * RELSEG_PAGES + blk;
    *use = page;
    page_verdict v = page_verify(page, relblk, true);
    for (int attempt = 0; v >= PAGE_BAD_HEADER && attempt < BK_REREAD_TRIES; attempt++) {
        page_header h;
        page_read_header(*use, &h);
        if (v == PAGE_BAD_CHECKSUM && h.lsn >= ctx->start_lsn)
            return 0; /* WAL replay rewrites it from the full-page image */
        if (attempt)
            usleep(10000u * (unsigned)attempt);
        pb_error rerr = PB_ERROR_INIT;
        if (scan_reread(ctx->scan, s->abspath, (uint64_t)blk * PB_PAGE_SIZE, s->reread,
                        PB_PAGE_SIZE, &rerr) != 0)
            break;
        *use = s->reread;
        v = page_verify(*use, relblk, true);
    }
    if (v < PAGE_BAD_HEADER)
        return 0;
    mf_header(ctx->m)->checksum_errors++;
    const char *what = v == PAGE_BAD_CHECKSUM ? "checksum mismatch" : "invalid page header";
    if (ctx->opts->on_checksum_error == BK_CHECKSUM_FAIL)
        return pb_fail(s->err, PB_ECORRUPT, "%s in %s block %u (relation block %u)", what,
                       s->e->path, blk, relblk);
    pb_warn("%s in %s block %u (relation block %u): persisted after %d re-reads; stored as read",
            what, s->e->path, blk, relblk, BK_REREAD_TRIES);
    return 0;
}

/* Would the WAL-guided read have read blk (named, or past the parent's end)? */
static bool wal_named(const rel_scan *s, uint32_t blk)
{
    if (blk >= s->old.npages)
        return true;
    size_t lo = 0, hi = s->nnamed;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->named[mid] < blk)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < s->nnamed && s->named[lo] == blk;
}

static int rel_page(rel_scan *s, uint32_t blk, const uint8_t *page)
{
    bk_ctx *ctx = s->ctx;
    mf_backup *hdr = mf_header(ctx->m);
    const uint8_t *use = page;
    if (ctx->checksums) {
        int rc = check_page(s, page, blk, &use);
        if (rc)
            return rc;
    }
    page_header ph;
    page_read_header(use, &ph);
    hdr->pages_scanned++;
    if (ph.lsn >= ctx->start_lsn)
        hdr->pages_in_window++;
    uint64_t h = pb_hash64(use, PB_PAGE_SIZE);
    bool same = s->has_old && blk < s->old.npages && s->old.hashes[blk] == h;
    if (same && ctx->prev_stop_lsn && ph.lsn > ctx->prev_stop_lsn && !page_is_zero(use)) {
        /* Rule 3: the page was written after the previous backup yet hashes equal. */
        hdr->collisions++;
        pb_warn("hash collision alarm: %s block %u has LSN past the previous backup but the "
                "same hash; shipping it", s->e->path, blk);
        same = false;
    }
    if (same)
        return 0;
    if ((s->cheap_skip || (s->wal_check && !wal_named(s, blk))) && ph.lsn < ctx->start_lsn) {
        /* Changed before this backup began, in a segment the rule calls unchanged. A page
         * written after the start is WAL's to replay (rule 2), not a miss. */
        if (s->nmissed < sizeof(s->missed) / sizeof(s->missed[0]))
            s->missed[s->nmissed] = blk;
        s->nmissed++;
    }
    hdr->pages_changed++;
    place_page(s, blk);
    memcpy(s->cur->data + (size_t)s->frame_pages * PB_PAGE_SIZE, use, PB_PAGE_SIZE);
    if (append_hash(s, h))
        return pb_fail(s->err, PB_ENOMEM, "out of memory hashing %s", s->e->path);
    s->run_count++;
    s->frame_pages++;
    return 0;
}

void bk_progress_note(bk_ctx *ctx, uint64_t bytes)
{
    if (!ctx->opts->progress)
        return;
    const mf_backup *h = mf_header(ctx->m);
    ctx->progress.bytes_done += bytes;
    ctx->progress.pages_scanned = h->pages_scanned;
    ctx->progress.pages_changed = h->pages_changed;
    ctx->opts->progress(ctx->opts->progress_ctx, &ctx->progress);
}

void bk_throttle(bk_ctx *ctx, size_t bytes)
{
    if (!ctx->opts->max_rate)
        return;
    if (ctx->rate_start == 0)
        ctx->rate_start = pb_now();
    ctx->rate_bytes += bytes;
    double due = ctx->rate_start + (double)ctx->rate_bytes / (double)ctx->opts->max_rate;
    double now = pb_now();
    if (due > now)
        usleep((useconds_t)((due - now) * 1e6));
}

int bk_rel_chunk(void *vs, uint64_t offset, const uint8_t *data, size_t len)
{
    rel_scan *s = vs;
    bk_throttle(s->ctx, len);
    bk_progress_note(s->ctx, len);
    uint8_t tail[PB_PAGE_SIZE];
    for (size_t pos = 0; pos < len; pos += PB_PAGE_SIZE) {
        const uint8_t *page = data + pos;
        if (len - pos < PB_PAGE_SIZE) {
            /* A partial last page (the file is being extended): keep it zero-padded;
             * the recorded size restores the exact length. */
            memset(tail, 0, sizeof(tail));
            memcpy(tail, page, len - pos);
            page = tail;
        }
        int rc = rel_page(s, (uint32_t)((offset + pos) / PB_PAGE_SIZE), page);
        if (rc)
            return rc;
    }
    return 0;
}

static int fill_entry(mf_file *f, const walk_entry *e, mf_kind kind)
{
    memset(f, 0, sizeof(*f));
    f->path = strdup(e->path);
    f->kind = kind;
    f->mode = e->mode;
    f->size = e->size;
    f->mtime = e->mtime;
    f->inode = e->inode;
    if (e->link_target)
        f->link_target = strdup(e->link_target);
    return f->path && (!e->link_target || f->link_target) ? 0 : PB_ENOMEM;
}

/* A segment the skip rule proved unchanged: recorded as an unchanged file is (no runs;
 * the catalog and restore keep every page's hash and location from the chain). */
static int add_skipped(bk_ctx *ctx, mf_file *f, pb_error *err)
{
    uint64_t size = f->size;
    f->npages = (uint32_t)((size + PB_PAGE_SIZE - 1) / PB_PAGE_SIZE);
    int rc = bk_record_add(ctx, f, err);
    if (rc)
        return rc;
    memset(f, 0, sizeof(*f));
    mf_backup *h = mf_header(ctx->m);
    h->files_skipped++;
    h->bytes_skipped += size;
    return 0;
}

/* Verify scan: the pages of a would-be-skipped segment that changed before the backup are
 * misses of the skip rule, unless the segment changed after the walk (then the rule would
 * have seen it next time, and WAL replays the change): a bug, shipped already, told loudly. */
static void report_missed(rel_scan *s)
{
    struct stat st;
    if (!s->nmissed)
        return;
    if (s->cheap_skip && (stat(s->abspath, &st) != 0 || (int64_t)st.st_mtime != s->e->mtime ||
                          (uint64_t)st.st_size != s->e->size))
        return;
    const char *how = s->cheap_skip ? "the file-level skip" : "the WAL-guided read";
    mf_header(s->ctx->m)->pages_missed += s->nmissed;
    size_t shown = s->nmissed < 8 ? (size_t)s->nmissed : 8;
    for (size_t i = 0; i < shown; i++)
        pb_log(PB_LOG_ERROR, "verify scan: %s block %u changed but %s would have missed "
               "it; shipped", s->e->path, s->missed[i], how);
    if (s->nmissed > shown)
        pb_log(PB_LOG_ERROR, "verify scan: %s: %llu more missed blocks", s->e->path,
               (unsigned long long)(s->nmissed - shown));
}

static int bk_relation(bk_ctx *ctx, const walk_entry *e, pb_error *err)
{
    rel_scan s;
    memset(&s, 0, sizeof(s));
    s.ctx = ctx;
    s.e = e;
    s.err = err;
    snprintf(s.abspath, sizeof(s.abspath), "%s/%s", ctx->pgdata, e->path);
    int rc = fill_entry(&s.out, e, MF_REL);
    if (rc)
        return pb_fail(err, rc, "out of memory for %s", e->path);
    if (ctx->cat) {
        rc = mf_catalog_lookup(ctx->cat, e->path, &s.old, err);
        if (rc == 0 && s.old.kind == MF_REL)
            s.has_old = true;
        else if (rc && rc != PB_ENOENT)
            goto out;
    }
    const mf_file *prev = NULL;
    if (ctx->skip_on && (rc = bk_parent_find(ctx, e->path, &prev, err)))
        goto out;
    bk_skip_verdict v = ctx->skip_on ? bk_skip_file(ctx, e, prev) : BK_READ_NEW;
    /* A segment whose metadata cannot be trusted is read whole, whatever WAL says. */
    s.untrusted = v == BK_READ_INODE || v == BK_READ_MTIME_FUTURE ||
                  v == BK_READ_MTIME_BACKWARDS || v == BK_READ_SIZE_SAME_MTIME;
    if (v == BK_SKIP && s.has_old) {
        if (!ctx->verify) {
            rc = add_skipped(ctx, &s.out, err);
            goto out;
        }
        s.cheap_skip = true;
    }
    if (posix_memalign((void **)&s.reread, PB_ALIGN, PB_PAGE_SIZE)) {
        rc = pb_fail(err, PB_ENOMEM, "out of memory for %s", e->path);
        goto out;
    }
    uint64_t size = 0;
    uint32_t *named = NULL;
    size_t nnamed = 0;
    bool guided = false;
    if (!s.cheap_skip && (rc = bk_wal_blocks(&s, &named, &nnamed, &guided)))
        goto out;
    s.named = named;
    s.nnamed = nnamed;
    s.wal_check = guided && ctx->verify;
    uint64_t cached = bk_cache_resident(s.abspath);
    if (guided && !ctx->verify) {
        ctx->wal_guided++;
        rc = bk_read_named(&s, named, nnamed, &size);
    } else {
        rc = scan_file(ctx->scan, s.abspath, bk_rel_chunk, &s, &size, err);
        if (rc == 0)
            mf_header(ctx->m)->bytes_read += size;
    }
    s.named = NULL;
    free(named);
    bk_cache_left(ctx, s.abspath, cached);
    if (rc == 0)
        flush_rel_run(&s);
    bk_pipe_release(ctx->pipe, s.cur);
    s.cur = NULL;
    /* The file's frames are compressed and stored behind the reader, which goes on to the
     * next file: the record waits for them instead (bk_record_later). */
    bk_pipe_file *frames = NULL;
    pb_error perr = PB_ERROR_INIT;
    int prc = bk_pipe_file_end(ctx->pipe, &frames, &perr);
    if (rc == PB_ENOENT) {
        pb_debug("%s vanished during the backup (dropped): skipped", e->path);
        /* Frames already queued are stored all the same, never named: harmless. */
        rc = bk_record_later(ctx, NULL, frames, err);
        goto out;
    }
    if (rc == 0 && prc) {
        *err = perr;
        rc = pb_error_wrap(err, "storing %s", e->path);
    }
    if (rc)
        goto out;
    PB_FAULT_POINT("backup.mid-pack");
    report_missed(&s);
    s.out.size = size;
    s.out.npages = (uint32_t)((size + PB_PAGE_SIZE - 1) / PB_PAGE_SIZE);
    rc = bk_record_later(ctx, &s.out, frames, err);
    if (rc == 0)
        memset(&s.out, 0, sizeof(s.out));
out:
    mf_file_clear(&s.out);
    free(s.old.hashes);
    free(s.reread);
    return rc;
}

/* ---- whole files ---- */

typedef struct whole_scan {
    pb_hasher *hasher;
    bk_ctx *ctx;
    mf_file *out;
    uint32_t frames;
    pb_error *err;
} whole_scan;

static int whole_hash_chunk(void *vw, uint64_t offset, const uint8_t *data, size_t len)
{
    whole_scan *w = vw;
    pb_hasher_update(w->hasher, data, len);
    return 0;
}

static int whole_store_chunk(void *vw, uint64_t offset, const uint8_t *data, size_t len)
{
    whole_scan *w = vw;
    bk_throttle(w->ctx, len);
    for (size_t pos = 0; pos < len; pos += PACK_MAX_FRAME_RAW) {
        size_t n = len - pos < PACK_MAX_FRAME_RAW ? len - pos : PACK_MAX_FRAME_RAW;
        pb_hasher_update(w->hasher, data + pos, n);
        bk_job *job = bk_pipe_acquire(w->ctx->pipe);
        memcpy(job->data, data + pos, n);
        bk_pipe_submit(w->ctx->pipe, job, w->frames++, 1, n);
    }
    return 0;
}

static int bk_whole(bk_ctx *ctx, const walk_entry *e, pb_error *err)
{
    mf_file f;
    whole_scan w = {pb_hasher_new(), ctx, &f, 0, err};
    mf_head_entry old = {0};
    char abspath[4096];
    snprintf(abspath, sizeof(abspath), "%s/%s", ctx->pgdata, e->path);
    int rc = fill_entry(&f, e, MF_FILE);
    if (rc || !w.hasher) {
        rc = pb_fail(err, PB_ENOMEM, "out of memory for %s", e->path);
        goto out;
    }
    bool has_old = false;
    bk_pipe_file *frames = NULL; /* the stored copy's frames, when it is shipped */
    uint64_t size = 0, cached = bk_cache_resident(abspath);
    if (ctx->cat) {
        rc = mf_catalog_lookup(ctx->cat, e->path, &old, err);
        free(old.hashes);
        if (rc && rc != PB_ENOENT)
            goto out;
        has_old = rc == 0 && old.kind == MF_FILE;
        rc = 0; /* a file new since the chain head is simply shipped */
        if (has_old)
            rc = scan_file(ctx->scan, abspath, whole_hash_chunk, &w, &size, err);
    }
    if (rc == 0 && has_old && pb_hasher_digest(w.hasher) == old.hash) {
        f.hash = old.hash;
        snprintf(f.stored_in, sizeof(f.stored_in), "%s", old.stored_in);
    } else if (rc == 0) {
        pb_hasher_free(w.hasher);
        w.hasher = pb_hasher_new();
        if (!w.hasher) {
            rc = pb_fail(err, PB_ENOMEM, "out of memory for %s", e->path);
            goto out;
        }
        rc = scan_file(ctx->scan, abspath, whole_store_chunk, &w, &size, err);
        pb_error perr = PB_ERROR_INIT;
        int prc = bk_pipe_file_end(ctx->pipe, &frames, &perr);
        if (rc == 0 && prc) {
            *err = perr;
            rc = pb_error_wrap(err, "storing %s", e->path);
        }
        f.hash = pb_hasher_digest(w.hasher);
        snprintf(f.stored_in, sizeof(f.stored_in), "%s", mf_header(ctx->m)->id);
    }
    bk_cache_left(ctx, abspath, cached);
    if (rc == PB_ENOENT) {
        pb_debug("%s vanished during the backup: skipped", e->path);
        rc = bk_record_later(ctx, NULL, frames, err);
        goto out;
    }
    if (rc)
        goto out;
    mf_header(ctx->m)->bytes_read += size;
    f.size = size;
    rc = bk_record_later(ctx, &f, frames, err);
    if (rc == 0)
        memset(&f, 0, sizeof(f));
out:
    mf_file_clear(&f);
    pb_hasher_free(w.hasher);
    return rc;
}

/* Called after the scan settled every record (engine/backup/backup.c): the pipe is idle, so its
 * first writer is free for this frame. */
int bk_memory_file(bk_ctx *ctx, const char *path, const void *data, size_t len, pb_error *err)
{
    mf_file f;
    memset(&f, 0, sizeof(f));
    f.path = strdup(path);
    f.kind = MF_FILE;
    f.mode = 0600;
    f.size = len;
    f.mtime = (int64_t)time(NULL);
    f.hash = pb_hash64(data, len);
    snprintf(f.stored_in, sizeof(f.stored_in), "%s", mf_header(ctx->m)->id);
    size_t cap = 0;
    int rc = f.path ? 0 : pb_fail(err, PB_ENOMEM, "out of memory for %s", path);
    if (rc == 0 && len)
        rc = flush_frame(ctx, &f, &cap, 0, 1, data, len, err);
    if (rc == 0)
        rc = bk_record_add(ctx, &f, err);
    if (rc == 0)
        memset(&f, 0, sizeof(f));
    mf_file_clear(&f);
    return rc;
}

int bk_file(bk_ctx *ctx, const walk_entry *e, pb_error *err)
{
    mf_file f;
    int rc;
    switch (e->kind) {
    case WALK_REL:
        return bk_relation(ctx, e, err);
    case WALK_FILE:
        return bk_whole(ctx, e, err);
    case WALK_DIR:
    case WALK_LINK:
        rc = fill_entry(&f, e, e->kind == WALK_DIR ? MF_DIR : MF_LINK);
        if (rc == 0)
            rc = bk_record_add(ctx, &f, err);
        else
            pb_fail(err, rc, "out of memory for %s", e->path);
        if (rc)
            mf_file_clear(&f);
        return rc;
    }
    return pb_fail(err, PB_EINVAL, "unknown entry kind for %s", e->path);
}
