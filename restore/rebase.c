/*
 * restore/rebase.c — a synthetic full backup built from a chain in the repository
 * (no database read): every file is rebuilt through the verified restore path and
 * its pages packed again into the new backup, so the chain before it can expire. The
 * chain is read as merged manifest streams and the new manifest written through the
 * streaming writer, file by file, so a rebase holds no manifest whole.
 */
#include "restore/plan.h"
#include "restore/restore_internal.h"
#include "common/fault.h"
#include "engine/wal/wal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct rebase_sink {
    pack_writer *packs;
    mf_file *out; /* the file being rebuilt in the new manifest */
    size_t runs_cap, hashes_cap, nhashes;
} rebase_sink;

static int sink_span(void *vs, const mf_file *f, uint64_t offset, const uint8_t *data,
                     size_t len, pb_error *err)
{
    rebase_sink *s = vs;
    mf_file *o = s->out;
    uint32_t pages = (uint32_t)(len / PB_PAGE_SIZE);
    mf_run run = {f->kind == MF_REL ? (uint32_t)(offset / PB_PAGE_SIZE) : o->nruns,
                  f->kind == MF_REL ? pages : 1, 0, 0, 0, 0, 0};
    int rc = pack_write_runs(s->packs, data, len, &run, 1, 0, err);
    if (rc)
        return rc;
    if (PB_GROW(o->runs, &s->runs_cap, (size_t)o->nruns + 1) ||
        (f->kind == MF_REL && PB_GROW(o->page_hashes, &s->hashes_cap, s->nhashes + pages)))
        return pb_fail(err, PB_ENOMEM, "out of memory rebasing %s", f->path);
    o->runs[o->nruns++] = run;
    for (uint32_t k = 0; f->kind == MF_REL && k < pages; k++)
        o->page_hashes[s->nhashes++] = pb_hash64(data + (size_t)k * PB_PAGE_SIZE, PB_PAGE_SIZE);
    return 0;
}

static int copy_entry(mf_file *dst, const mf_file *src, const char *id)
{
    memset(dst, 0, sizeof(*dst));
    dst->path = strdup(src->path);
    dst->kind = src->kind;
    dst->mode = src->mode;
    dst->size = src->size;
    dst->mtime = src->mtime;
    dst->inode = src->inode; /* with the size, mtime and the header's horizon: the skip rule's
                              * record (docs/DESIGN.md, "Rooms and arrows") */
    dst->hash = src->hash;
    dst->npages = src->npages;
    snprintf(dst->stored_in, sizeof(dst->stored_in), "%s", id);
    if (src->link_target)
        dst->link_target = strdup(src->link_target);
    return dst->path && (!src->link_target || dst->link_target) ? 0 : PB_ENOMEM;
}

/* Chunks of the new manifest wait in a temporary file: its head (header and index)
 * precedes them in the object and is known only once every file is added. */
static int spool_chunk(void *ctx, const void *data, size_t len, pb_error *err)
{
    if (fwrite(data, 1, len, ctx) != len)
        return pb_fail_errno(err, PB_EIO, "cannot spool a manifest chunk of %zu bytes", len);
    return 0;
}

/* The manifest object: head, then the spooled chunks, committed atomically (the last
 * object of the backup, docs/DESIGN.md rule 7). */
static int commit_manifest(repo *r, const char *id, const pb_buf *head, FILE *spool,
                           pb_error *err)
{
    char key[256];
    snprintf(key, sizeof(key), "backup/%s/manifest", id);
    repo_writer *w = NULL;
    int rc = fflush(spool) == 0 && fseek(spool, 0, SEEK_SET) == 0
                 ? repo_writer_open(r, key, &w, err)
                 : pb_fail_errno(err, PB_EIO, "cannot read back the spooled manifest of %s", id);
    if (rc == 0)
        rc = repo_writer_write(w, head->data, head->len, err);
    uint8_t buf[65536];
    size_t n;
    while (rc == 0 && (n = fread(buf, 1, sizeof(buf), spool)) > 0)
        rc = repo_writer_write(w, buf, n, err);
    if (rc == 0 && ferror(spool))
        rc = pb_fail_errno(err, PB_EIO, "cannot read back the spooled manifest of %s", id);
    if (rc == 0) {
        PB_FAULT_POINT("rebase.before-manifest-commit");
        return repo_writer_commit(w, err);
    }
    if (w)
        repo_writer_abort(w);
    return rc;
}

/* Files rebuilt so far, as a restore counts them (regular files and their sizes). */
static void rebase_progress(const rs_progress_hook *hook, rs_progress *p, const mf_file *f)
{
    if (!hook || !hook->fn || (f->kind != MF_REL && f->kind != MF_FILE))
        return;
    p->files_done++;
    p->bytes_done += f->size;
    hook->fn(hook->ctx, p);
}

/* One path of the merged chain: rebuilt into the new packs, its record to the writer. */
static int rebase_one(rs_ctx *ctx, rebase_sink *sink, const mf_file *const *files,
                      mf_writer *w, repo_lock *lock, pb_error *err)
{
    const mf_file *f = files[ctx->nchain - 1];
    mf_file nf;
    if (copy_entry(&nf, f, mf_writer_header(w)->id)) {
        mf_file_clear(&nf);
        return pb_fail(err, PB_ENOMEM, "out of memory rebasing %s", f->path);
    }
    sink->out = &nf;
    sink->runs_cap = sink->hashes_cap = sink->nhashes = 0;
    int rc = repo_lock_renew(lock, err); /* a long rebase keeps its lease */
    if (rc == 0 && (f->kind == MF_REL || f->kind == MF_FILE))
        rc = rs_rebuild_file(ctx, files, err);
    if (rc == 0)
        rc = mf_writer_add(w, &nf, err);
    mf_file_clear(&nf);
    return rc;
}

/* Every file of the restored backup, in path order from the chain's merged streams, so
 * the new manifest is written chunk by chunk as the old ones are read. */
static int rebase_files(rs_ctx *ctx, rebase_sink *sink, mf_writer *w, repo_lock *lock,
                        const rs_progress_hook *hook, rs_progress *prog, pb_error *err)
{
    mf_merge *mg = NULL;
    int rc = rs_merge_open(ctx->repo, ctx->hdrs, ctx->nchain, &mg, err);
    const mf_file *const *files = NULL;
    while (rc == 0 && (rc = mf_merge_next(mg, &files, err)) == 1) {
        rc = 0;
        if (files[ctx->nchain - 1])
            rc = rebase_one(ctx, sink, files, w, lock, err);
        if (rc == 0 && files[ctx->nchain - 1])
            rebase_progress(hook, prog, files[ctx->nchain - 1]);
        PB_FAULT_POINT("rebase.mid-pack");
    }
    if (mg)
        ctx->stats->manifest_peak += mf_merge_peak(mg);
    mf_merge_close(mg);
    return rc;
}

/* The synthetic full's header: the source's, under a new id (after the last id, so it
 * is unique; the start/stop LSN and time stay, so history order places the copy at the
 * state it holds). */
static int new_header(repo *r, const mf_backup *src, mf_backup *hdr, pb_error *err)
{
    chain_ids ids;
    int rc = chain_list(r, &ids, err);
    if (rc)
        return rc;
    /* The header keeps the source's mtime horizon and read mode: the copy holds exactly
     * the pages the source's walk vouched for, so the next incremental's file-level skip
     * may trust the source's size, mtime and inode records against that horizon; the read
     * mode tells the verify-scan cadence whether the source read every page. */
    *hdr = *src;
    chain_new_id(hdr->id, 'S', ids.count ? ids.ids[ids.count - 1] : NULL);
    chain_ids_free(&ids);
    hdr->parent[0] = '\0';
    hdr->type = 'S';
    hdr->bytes_read = 0;
    return 0;
}

/* Key rotation (docs/GUIDE.md, "Encryption"): the synthetic full's packs are sealed by the
 * first key as they are written; the WAL it needs (its start to stop segment), the history
 * files and the identity file are sealed again by that key too, so the new key alone
 * restores it. */
typedef struct reseal_count {
    repo *r;
    unsigned n;
    pb_error *err;
} reseal_count;

static int reseal_one(reseal_count *c, const char *name)
{
    char key[64];
    bool done = false;
    arch_key(key, sizeof(key), name);
    int rc = repo_reseal(c->r, key, &done, c->err);
    if (rc == PB_ENOENT)
        return pb_fail(c->err, PB_ESTATE, "WAL file %s is not in repository %s",
                       name, repo_location(c->r));
    c->n += done;
    return rc;
}

static int reseal_history(void *ctx, const char *name)
{
    return reseal_one(ctx, name);
}

static int reseal_wal(repo *r, const mf_backup *h, pb_error *err)
{
    reseal_count c = {r, 0, err};
    uint64_t seg = h->wal_segment_size;
    if (!repo_is_encrypted(r) || seg == 0)
        return 0;
    bool done = false; /* the identity file, which restore and verify read too */
    int rc = repo_reseal(r, CHAIN_IDENTITY_KEY, &done, err);
    c.n += done;
    if (rc == 0)
        rc = arch_list(r, ARCH_LIST_HISTORY, reseal_history, &c, err);
    for (uint64_t s = h->start_lsn / seg; rc == 0 && s <= (h->stop_lsn - 1) / seg; s++) {
        char name[25];
        arch_walfile_name(name, h->timeline, s * seg, (uint32_t)seg);
        rc = reseal_one(&c, name);
    }
    if (rc == 0 && c.n)
        pb_info("rebase: %u WAL, history and identity object(s) sealed again with the first "
                "key", c.n);
    return rc ? pb_error_wrap(err, "sealing the WAL of backup %s with the first key", h->id)
              : 0;
}

int rs_rebase(repo *r, const char *set, int zstd_level, repo_lock *lock,
              const rs_progress_hook *progress, char out_id[MF_ID_LEN], pb_error *err)
{
    rs_opts o = RS_OPTS_INIT;
    o.set = set;
    char dir[128];
    rs_plan *p = NULL;
    mf_writer *w = NULL;
    FILE *spool = NULL;
    pb_buf head = {0};
    rebase_sink sink = {0};
    rs_stats stats = {0};
    rs_ctx ctx;
    memset(&ctx, 0, sizeof(ctx));
    mf_backup hdr;
    memset(&hdr, 0, sizeof(hdr));
    rs_outline ol = {0};
    out_id[0] = '\0';
    /* no WAL: a rebase reads only the chain */
    int rc = rs_set_open(r, &o, 0, NULL, &p, NULL, err);
    if (rc)
        return rc;
    const mf_backup *chosen = rs_plan_header(p);
    /* Nothing new (a weekly job run twice): a second identical full is never written. */
    if (chosen->type == 'F' || chosen->type == 'S') {
        pb_info("nothing to rebase: backup %s (timeline %u) is already a %s backup; no "
                "synthetic full written", chosen->id, chosen->timeline,
                chosen->type == 'F' ? "full" : "synthetic full");
        rs_plan_free(p);
        return 0;
    }
    if (progress && progress->fn) /* the totals it counts against: one pass more */
        rc = rs_plan_outline(r, p, false, &ol, err);
    if (rc == 0)
        rc = new_header(r, rs_plan_header(p), &hdr, err);
    if (rc == 0 && !(spool = tmpfile()))
        rc = pb_fail_errno(err, PB_EIO, "cannot create a temporary file for the manifest");
    if (rc == 0)
        rc = mf_writer_new(&w, &hdr, chain_manifest_codec(), spool_chunk, spool, err);
    chain_backup_dir(dir, sizeof(dir), hdr.id);
    if (rc == 0)
        rc = pack_writer_open(&sink.packs, r, dir, 256ull << 20, zstd_level, err);
    rs_ctx_init(&ctx, r, p, &stats);
    ctx.sink = sink_span;
    ctx.sink_ctx = &sink;
    ctx.source_budget = RS_DEFAULT_SOURCE; /* as a restore worker's (docs/DESIGN.md, memory) */
    if (rc == 0)
        rc = rs_ctx_buffers(&ctx, err);
    /* As a backup's: the packs' and the database list's names are made durable once, all
     * together, before the manifest commits (repo_defer_syncs, storage.h); each pack
     * paid its own directory sync before. */
    repo_defer_syncs(r);
    if (rc == 0)
        rc = rebase_files(&ctx, &sink, w, lock, progress, &ol.totals, err);
    if (rc == 0)
        rc = pack_writer_finish(sink.packs, err);
    if (rc == 0) {
        mf_writer_header(w)->bytes_stored = pack_writer_stored_bytes(sink.packs);
        rc = rs_db_list_copy(r, p->id, hdr.id, err);
    }
    pb_error derr = PB_ERROR_INIT; /* a failed rebase ends the deferral too */
    int src = repo_sync_deferred(r, rc ? &derr : err);
    if (rc == 0)
        rc = src;
    if (rc == 0)
        rc = reseal_wal(r, &hdr, err);
    if (rc == 0)
        rc = mf_writer_finish(w, &head, err);
    if (rc == 0)
        rc = commit_manifest(r, hdr.id, &head, spool, err);
    pb_error rerr = PB_ERROR_INIT; /* committed: the next record write lists it */
    if (rc == 0 && chain_record_update(r, hdr.id, NULL, 0, &rerr) != 0)
        pb_warn("%s", rerr.msg);
    if (rc == 0)
        snprintf(out_id, MF_ID_LEN, "%s", hdr.id);
    pack_writer_free(sink.packs);
    rs_ctx_free_buffers(&ctx);
    mf_writer_free(w);
    pb_buf_free(&head);
    if (spool)
        fclose(spool);
    rs_outline_free(&ol);
    rs_plan_free(p);
    return rc;
}
