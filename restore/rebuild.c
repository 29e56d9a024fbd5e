/*
 * restore/rebuild.c — one file from a chain in one pass, after pg_combinebackup's
 * reconstruct.c: build a per-page source map (the newest backup holding each page),
 * then read each needed frame once and write each page once, verifying its hash.
 */
#include "restore/restore_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NO_SOURCE UINT32_MAX

typedef struct page_src {
    uint32_t backup; /* index in the chain */
    uint32_t hash_index;
} page_src;

/* Newest-first walk of the chain until every page of f has a source. */
static int map_sources(const rs_ctx *ctx, const mf_file *f, page_src *src, pb_error *err)
{
    uint32_t missing = f->npages;
    for (uint32_t p = 0; p < f->npages; p++)
        src[p].backup = NO_SOURCE;
    for (size_t i = ctx->chain->count; i-- > 0 && missing;) {
        const mf_file *fi = mf_find(ctx->chain->items[i], f->path);
        if (!fi || fi->kind != MF_REL)
            break;
        uint32_t h = 0;
        for (uint32_t r = 0; r < fi->nruns; r++) {
            const mf_run *run = &fi->runs[r];
            for (uint32_t k = 0; k < run->count; k++, h++) {
                uint32_t p = run->first + k;
                if (p < f->npages && src[p].backup == NO_SOURCE) {
                    src[p].backup = (uint32_t)i;
                    src[p].hash_index = h;
                    missing--;
                }
            }
        }
    }
    if (missing == 0)
        return 0;
    for (uint32_t p = 0; p < f->npages; p++)
        if (src[p].backup == NO_SOURCE)
            return pb_fail(err, PB_ECORRUPT,
                           "%s block %u has no source in the chain of backup %s "
                           "(%u blocks missing)",
                           f->path, p, mf_header_c(ctx->chain->items[ctx->chain->count - 1])->id,
                           missing);
    return 0;
}

static int write_span(rs_ctx *ctx, int fd, const mf_file *f, uint64_t off, const uint8_t *data,
                      size_t len, pb_error *err)
{
    if (ctx->sink)
        return ctx->sink(ctx->sink_ctx, f, off, data, len, err);
    if (fd < 0)
        return 0;
    if (ctx->delta) {
        ssize_t n = pread(fd, ctx->existing, len, (off_t)off);
        if (n == (ssize_t)len && memcmp(ctx->existing, data, len) == 0) {
            ctx->stats->pages_skipped += len / PB_PAGE_SIZE;
            return 0;
        }
    }
    size_t done = 0;
    while (done < len) {
        ssize_t n = pwrite(fd, data + done, len - done, (off_t)(off + done));
        if (n < 0)
            return pb_fail_errno(err, PB_EIO, "writing %s/%s at offset %llu", ctx->target_dir,
                                 f->path, (unsigned long long)(off + done));
        done += (size_t)n;
    }
    ctx->stats->pages_written += len / PB_PAGE_SIZE;
    ctx->stats->bytes_written += len;
    return 0;
}

/* Verify and write the pages of one frame that page_src selects, coalescing spans. */
static int apply_frame(rs_ctx *ctx, int fd, const mf_file *f, const mf_file *fi,
                       const mf_run *run, uint32_t bidx, const page_src *src, pb_error *err)
{
    uint32_t span_start = 0, span_len = 0;
    for (uint32_t k = 0; k <= run->count; k++) {
        uint32_t p = run->first + k;
        bool take = k < run->count && p < f->npages && src[p].backup == bidx;
        if (take) {
            const uint8_t *page = ctx->frame + (size_t)k * PB_PAGE_SIZE;
            if (pb_hash64(page, PB_PAGE_SIZE) != fi->page_hashes[src[p].hash_index])
                return pb_fail(err, PB_ECORRUPT,
                               "%s block %u from backup %s (pack %u, frame at %llu) fails its "
                               "hash check",
                               f->path, p, mf_header_c(ctx->chain->items[bidx])->id,
                               run->pack_no, (unsigned long long)run->offset);
            if (span_len == 0)
                span_start = k;
            span_len++;
            continue;
        }
        if (span_len) {
            int rc = write_span(ctx, fd, f, (uint64_t)(run->first + span_start) * PB_PAGE_SIZE,
                                ctx->frame + (size_t)span_start * PB_PAGE_SIZE,
                                (size_t)span_len * PB_PAGE_SIZE, err);
            if (rc)
                return rc;
            span_len = 0;
        }
    }
    return 0;
}

#define SPAN_MAX (8u << 20) /* one range read covers adjacent frames up to this size */

static bool run_needed(const mf_run *run, const mf_file *f, const page_src *src, uint32_t bidx)
{
    for (uint32_t k = 0; k < run->count; k++) {
        uint32_t p = run->first + k;
        if (p < f->npages && src[p].backup == bidx)
            return true;
    }
    return false;
}

static int grow_span(rs_ctx *ctx, size_t need, pb_error *err)
{
    if (need <= ctx->span_cap)
        return 0;
    uint8_t *p = realloc(ctx->span, need);
    if (!p)
        return pb_fail(err, PB_ENOMEM, "out of memory for a %zu-byte read", need);
    ctx->span = p;
    ctx->span_cap = need;
    return 0;
}

#define READAHEAD_MAX (4u << 20)

/* Bytes [start, start + span) of a pack. Small files of a full backup sit back to back
 * in pack order, so when requests run sequentially through a pack the read grows
 * ahead (doubling up to READAHEAD_MAX) and the next files are served from memory:
 * one request instead of one per file, which is what object storage needs. Random
 * access (an incremental chain) never reads ahead. */
static int fetch_span(rs_ctx *ctx, const char *key, uint32_t bidx, uint32_t pack_no,
                      uint64_t start, size_t span, const uint8_t **out, pb_error *err)
{
    bool same = ctx->cached && ctx->cache_backup == bidx && ctx->cache_pack == pack_no;
    if (same && start >= ctx->cache_start && start + span <= ctx->cache_start + ctx->cache_len) {
        *out = ctx->span + (start - ctx->cache_start);
        return 0;
    }
    uint64_t end = ctx->cache_start + ctx->cache_len;
    bool sequential = same && start >= end && start - end <= 65536;
    size_t ahead = ctx->readahead ? ctx->readahead * 2 : 256u << 10;
    ctx->readahead = sequential ? (ahead > READAHEAD_MAX ? READAHEAD_MAX : ahead) : 0;
    size_t want = span;
    int rc = 0;
    if (ctx->readahead) {
        if (!same || !ctx->cache_obj_size)
            rc = repo_stat(ctx->repo, key, &ctx->cache_obj_size, err);
        if (rc)
            return rc;
        uint64_t room = ctx->cache_obj_size > start ? ctx->cache_obj_size - start : 0;
        want = span + ctx->readahead < room ? span + ctx->readahead : (size_t)room;
        if (want < span)
            want = span;
    }
    ctx->cached = false;
    rc = grow_span(ctx, want, err);
    if (rc == 0)
        rc = repo_get_range(ctx->repo, key, start, want, ctx->span, err);
    if (rc)
        return rc;
    if (!same)
        ctx->cache_obj_size = ctx->readahead ? ctx->cache_obj_size : 0;
    ctx->cached = true;
    ctx->cache_backup = bidx;
    ctx->cache_pack = pack_no;
    ctx->cache_start = start;
    ctx->cache_len = want;
    ctx->stats->bytes_fetched += want;
    *out = ctx->span;
    return 0;
}

/* One frame of a whole file, through the same readahead as relation frames. */
static int fetch_frame(rs_ctx *ctx, uint32_t bidx, const mf_run *run, pb_error *err)
{
    const char *id = mf_header_c(ctx->chain->items[bidx])->id;
    char dir[128], key[256], what[400];
    chain_backup_dir(dir, sizeof(dir), id);
    pack_key(key, sizeof(key), dir, run->pack_no);
    int rc = pack_loc_check(key, run->offset, run->clen, run->rlen, err);
    if (rc)
        return pb_error_wrap(err, "backup %s", id);
    const uint8_t *base = NULL;
    size_t got = 0;
    rc = fetch_span(ctx, key, bidx, run->pack_no, run->offset, run->clen, &base, err);
    snprintf(what, sizeof(what), "%s frame at offset %llu", key, (unsigned long long)run->offset);
    if (rc == 0)
        rc = pack_reader_decode(ctx->reader, base, run->clen, ctx->frame, PACK_MAX_FRAME_RAW, &got,
                                what, err);
    if (rc == 0 && got != run->rlen)
        rc = pb_fail(err, PB_ECORRUPT, "%s holds %zu bytes, expected %u", what, got, run->rlen);
    if (rc == 0)
        ctx->stats->frames_read++;
    return rc;
}

/* Frames of one backup that sit back to back in one pack are fetched with one range
 * read (a whole file of a full backup usually is), then decoded one by one. */
static int apply_batch(rs_ctx *ctx, int fd, const mf_file *f, const mf_file *fi,
                       const mf_run **runs, size_t n, uint32_t bidx, const page_src *src,
                       pb_error *err)
{
    const char *id = mf_header_c(ctx->chain->items[bidx])->id;
    char dir[128], key[256], what[400];
    chain_backup_dir(dir, sizeof(dir), id);
    pack_key(key, sizeof(key), dir, runs[0]->pack_no);
    uint64_t start = runs[0]->offset;
    size_t span = (size_t)(runs[n - 1]->offset + runs[n - 1]->clen - start);
    const uint8_t *base = NULL;
    int rc = fetch_span(ctx, key, bidx, runs[0]->pack_no, start, span, &base, err);
    if (rc)
        return rc;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const mf_run *run = runs[i];
        size_t got = 0;
        snprintf(what, sizeof(what), "%s frame at offset %llu", key,
                 (unsigned long long)run->offset);
        rc = pack_reader_decode(ctx->reader, base + (run->offset - start), run->clen,
                                ctx->frame, PACK_MAX_FRAME_RAW, &got, what, err);
        if (rc == 0 && (got != run->rlen || got != (size_t)run->count * PB_PAGE_SIZE))
            rc = pb_fail(err, PB_ECORRUPT, "%s of %s holds %zu bytes, expected %u pages", what,
                         f->path, got, run->count);
        if (rc == 0) {
            ctx->stats->frames_read++;
            rc = apply_frame(ctx, fd, f, fi, run, bidx, src, err);
        }
    }
    return rc;
}

/* A run's frame location comes from a manifest: refuse one no writer produced. */
static int check_run(const rs_ctx *ctx, uint32_t bidx, const mf_file *f, const mf_run *run,
                     pb_error *err)
{
    const char *id = mf_header_c(ctx->chain->items[bidx])->id;
    char dir[128], key[256];
    chain_backup_dir(dir, sizeof(dir), id);
    pack_key(key, sizeof(key), dir, run->pack_no);
    if (pack_loc_check(key, run->offset, run->clen, run->rlen, err) != 0)
        return pb_error_wrap(err, "%s in backup %s", f->path, id);
    return 0;
}

static int rebuild_from(rs_ctx *ctx, int fd, const mf_file *f, uint32_t bidx,
                        const page_src *src, pb_error *err)
{
    const mf_file *fi = mf_find(ctx->chain->items[bidx], f->path);
    if (!fi || fi->kind != MF_REL)
        return 0;
    const mf_run **batch = malloc(sizeof(*batch) * (fi->nruns ? fi->nruns : 1));
    if (!batch)
        return pb_fail(err, PB_ENOMEM, "out of memory planning %s", f->path);
    size_t n = 0;
    int rc = 0;
    for (uint32_t r = 0; rc == 0 && r <= fi->nruns; r++) {
        const mf_run *run = r < fi->nruns ? &fi->runs[r] : NULL;
        if (run && !run_needed(run, f, src, bidx))
            continue;
        /* bounded before the span arithmetic below and before any allocation */
        if (run && (rc = check_run(ctx, bidx, f, run, err)))
            break;
        bool joins = run && n && run->pack_no == batch[n - 1]->pack_no &&
                     run->offset == batch[n - 1]->offset + batch[n - 1]->clen &&
                     run->offset + run->clen - batch[0]->offset <= SPAN_MAX;
        if (n && !joins) {
            rc = apply_batch(ctx, fd, f, fi, batch, n, bidx, src, err);
            n = 0;
        }
        if (run)
            batch[n++] = run;
    }
    free(batch);
    return rc;
}

static int rebuild_rel(rs_ctx *ctx, int fd, const mf_file *f, pb_error *err)
{
    page_src *src = calloc(f->npages ? f->npages : 1, sizeof(*src));
    if (!src)
        return pb_fail(err, PB_ENOMEM, "out of memory planning %s", f->path);
    int rc = map_sources(ctx, f, src, err);
    /* Oldest backup first, frames in pack order: each needed frame is read once. */
    for (size_t i = 0; rc == 0 && i < ctx->chain->count; i++)
        rc = rebuild_from(ctx, fd, f, (uint32_t)i, src, err);
    free(src);
    return rc;
}

static int rebuild_whole(rs_ctx *ctx, int fd, const mf_file *f, pb_error *err)
{
    uint32_t bidx = 0;
    const mf_manifest *holder = NULL;
    for (size_t i = 0; i < ctx->chain->count && !holder; i++)
        if (strcmp(mf_header_c(ctx->chain->items[i])->id, f->stored_in) == 0) {
            holder = ctx->chain->items[i];
            bidx = (uint32_t)i;
        }
    const mf_file *fs = holder ? mf_find(holder, f->path) : NULL;
    if (!fs || fs->kind != MF_FILE || fs->hash != f->hash)
        return pb_fail(err, PB_ECORRUPT, "%s: content recorded in backup %s is missing from "
                       "the chain", f->path, f->stored_in);
    pb_hasher *h = pb_hasher_new();
    if (!h)
        return pb_fail(err, PB_ENOMEM, "out of memory restoring %s", f->path);
    int rc = 0;
    uint64_t off = 0;
    /* Verify the whole content before writing any of it (rule 8). */
    for (int pass = 0; pass < 2 && rc == 0; pass++) {
        off = 0;
        for (uint32_t r = 0; rc == 0 && r < fs->nruns; r++) {
            rc = fetch_frame(ctx, bidx, &fs->runs[r], err);
            if (rc)
                break;
            if (pass == 0)
                pb_hasher_update(h, ctx->frame, fs->runs[r].rlen);
            else
                rc = write_span(ctx, fd, f, off, ctx->frame, fs->runs[r].rlen, err);
            off += fs->runs[r].rlen;
        }
        if (pass == 0 && rc == 0 && (pb_hasher_digest(h) != f->hash || off != f->size))
            rc = pb_fail(err, PB_ECORRUPT, "%s from backup %s fails its hash check", f->path,
                         f->stored_in);
        if (pass == 0 && fd < 0 && !ctx->sink)
            break; /* verifying only */
    }
    pb_hasher_free(h);
    return rc;
}

/* Open f beneath the target without following links. A delta restore replaces a link
 * or directory standing where the file belongs (the link, never what it points to). */
static int open_target(rs_ctx *ctx, const mf_file *f, int *fd, pb_error *err)
{
    int flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC;
    if (ctx->delta)
        flags = O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC;
    else
        flags |= O_TRUNC;
    int dfd = -1;
    const char *base = NULL;
    int rc = rs_target_parent(ctx->target, f->path, 0, &dfd, &base, err);
    for (int attempt = 0; rc == 0; attempt++) {
        *fd = openat(dfd, base, flags, 0600);
        if (*fd >= 0)
            break;
        if (attempt || !ctx->delta || (errno != ELOOP && errno != EISDIR)) {
            rc = pb_fail_errno(err, PB_EIO, "cannot open %s/%s for restore", ctx->target_dir,
                               f->path);
            break;
        }
        pb_warn("%s/%s is a link or directory; the backup has a file there: replaced",
                ctx->target_dir, f->path);
        char shown[8192];
        snprintf(shown, sizeof(shown), "%s/%s", ctx->target_dir, f->path);
        rc = rs_remove_at(dfd, base, shown, err);
    }
    if (dfd >= 0)
        close(dfd);
    return rc;
}

/* Delta restore of a whole file: skip it when the existing content hashes the same. */
static bool whole_unchanged(rs_ctx *ctx, int fd, const mf_file *f)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != f->size)
        return false;
    pb_hasher *h = pb_hasher_new();
    if (!h)
        return false;
    uint64_t off = 0;
    ssize_t n;
    while ((n = pread(fd, ctx->frame, PACK_MAX_FRAME_RAW, (off_t)off)) > 0) {
        pb_hasher_update(h, ctx->frame, (size_t)n);
        off += (uint64_t)n;
    }
    bool same = n == 0 && off == f->size && pb_hasher_digest(h) == f->hash;
    pb_hasher_free(h);
    return same;
}

int rs_rebuild_file(rs_ctx *ctx, const mf_file *f, pb_error *err)
{
    int fd = -1, rc = 0;
    if (ctx->target_dir) {
        rc = open_target(ctx, f, &fd, err);
        if (rc)
            return rc;
    }
    /* --db-include: a left-out database's relation is a zero-length stub (db_filter.c) */
    bool stub = rs_db_filter_stub(ctx->dbf, f);
    if (stub) {
        ctx->stats->files_written++;
    } else if (f->kind == MF_FILE && ctx->delta && fd >= 0 && whole_unchanged(ctx, fd, f)) {
        ctx->stats->files_skipped++;
    } else {
        rc = f->kind == MF_REL ? rebuild_rel(ctx, fd, f, err) : rebuild_whole(ctx, fd, f, err);
        ctx->stats->files_written++;
    }
    if (rc == 0 && fd >= 0 && ftruncate(fd, stub ? 0 : (off_t)f->size) != 0)
        rc = pb_fail_errno(err, PB_EIO, "cannot set the size of %s/%s", ctx->target_dir,
                           f->path);
    if (rc == 0 && fd >= 0 && fchmod(fd, f->mode & 07777) != 0)
        rc = pb_fail_errno(err, PB_EIO, "cannot set the mode of %s/%s", ctx->target_dir,
                           f->path);
    /* Skipped files too: a file left by an earlier, interrupted restore may not be on
     * disk yet. */
    if (rc == 0 && fd >= 0)
        rc = rs_fsync(fd, ctx->target_dir, f->path, err);
    if (fd >= 0 && close(fd) != 0 && rc == 0)
        rc = pb_fail_errno(err, PB_EIO, "cannot close %s/%s", ctx->target_dir, f->path);
    return rc;
}

int rs_ctx_buffers(rs_ctx *ctx, pb_error *err)
{
    ctx->frame = malloc(PACK_MAX_FRAME_RAW);
    ctx->existing = malloc(PACK_MAX_FRAME_RAW);
    if (!ctx->frame || !ctx->existing)
        return pb_fail(err, PB_ENOMEM, "out of memory for restore buffers");
    return pack_reader_new(&ctx->reader, err);
}

void rs_ctx_free_buffers(rs_ctx *ctx)
{
    free(ctx->frame);
    free(ctx->existing);
    free(ctx->span);
    ctx->span = NULL;
    ctx->span_cap = 0;
    ctx->cached = false;
    pack_reader_free(ctx->reader);
    ctx->frame = ctx->existing = NULL;
    ctx->reader = NULL;
}
