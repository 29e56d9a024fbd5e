/*
 * restore/rebase.c — a synthetic full backup built from a chain in the repository
 * (no database read): every file is rebuilt through the verified restore path and
 * its pages packed again into the new backup, so the chain before it can expire.
 */
#include "restore/plan_internal.h"
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
    dst->hash = src->hash;
    dst->npages = src->npages;
    snprintf(dst->stored_in, sizeof(dst->stored_in), "%s", id);
    if (src->link_target)
        dst->link_target = strdup(src->link_target);
    return dst->path && (!src->link_target || dst->link_target) ? 0 : PB_ENOMEM;
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

static int rebase_files(rs_ctx *ctx, rebase_sink *sink, const mf_manifest *src, mf_manifest *dst,
                        repo_lock *lock, const rs_progress_hook *hook, pb_error *err)
{
    const char *id = mf_header_c(dst)->id;
    rs_progress prog = {0, 0, 0, 0};
    for (size_t i = 0; i < mf_count(src); i++) {
        const mf_file *f = mf_at(src, i);
        prog.files_total += f->kind == MF_REL || f->kind == MF_FILE;
        prog.bytes_total += f->kind == MF_REL || f->kind == MF_FILE ? f->size : 0;
    }
    for (size_t i = 0; i < mf_count(src); i++) {
        const mf_file *f = mf_at(src, i);
        mf_file nf;
        if (copy_entry(&nf, f, id)) {
            mf_file_clear(&nf);
            return pb_fail(err, PB_ENOMEM, "out of memory rebasing %s", f->path);
        }
        sink->out = &nf;
        sink->runs_cap = sink->hashes_cap = sink->nhashes = 0;
        int rc = repo_lock_renew(lock, err); /* a long rebase keeps its lease */
        if (rc == 0 && (f->kind == MF_REL || f->kind == MF_FILE))
            rc = rs_rebuild_file(ctx, f, err);
        if (rc == 0)
            rc = mf_add_file(dst, &nf, err);
        if (rc) {
            mf_file_clear(&nf);
            return rc;
        }
        rebase_progress(hook, &prog, f);
        PB_FAULT_POINT("rebase.mid-pack");
    }
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
    mf_manifest *dst = NULL;
    rebase_sink sink = {0};
    rs_stats stats = {0};
    rs_ctx ctx;
    memset(&ctx, 0, sizeof(ctx));
    int rc = rs_plan_build(r, &o, 0, &p, err); /* no WAL: a rebase reads only the chain */
    if (rc)
        return rc;
    const mf_manifest *src = rs_plan_manifest(p);
    mf_backup hdr = *mf_header_c(src);
    chain_ids ids;
    rc = chain_list(r, &ids, err);
    if (rc)
        goto out;
    /* The id only has to be unique (after the last id); the header keeps the source's
     * start/stop LSN and time, so history order places the copy at the state it holds. */
    chain_new_id(hdr.id, 'S', ids.count ? ids.ids[ids.count - 1] : NULL);
    chain_ids_free(&ids);
    hdr.parent[0] = '\0';
    hdr.type = 'S';
    hdr.bytes_read = 0;
    rc = mf_new(&dst, &hdr, err);
    chain_backup_dir(dir, sizeof(dir), hdr.id);
    if (rc == 0)
        rc = pack_writer_open(&sink.packs, r, dir, 256ull << 20, zstd_level, err);
    ctx.repo = r;
    ctx.chain = &p->chain;
    ctx.stats = &stats;
    ctx.sink = sink_span;
    ctx.sink_ctx = &sink;
    if (rc == 0)
        rc = rs_ctx_buffers(&ctx, err);
    if (rc == 0)
        rc = rebase_files(&ctx, &sink, src, dst, lock, progress, err);
    if (rc == 0)
        rc = pack_writer_finish(sink.packs, err);
    if (rc == 0) {
        mf_header(dst)->bytes_stored = pack_writer_stored_bytes(sink.packs);
        mf_sort(dst);
        rc = rs_db_list_copy(r, p->id, hdr.id, err);
    }
    if (rc == 0)
        rc = reseal_wal(r, &hdr, err);
    if (rc == 0) {
        PB_FAULT_POINT("rebase.before-manifest-commit");
        rc = chain_commit(r, dst, err);
    }
    if (rc == 0)
        snprintf(out_id, MF_ID_LEN, "%s", hdr.id);
out:
    pack_writer_free(sink.packs);
    rs_ctx_free_buffers(&ctx);
    mf_free(dst);
    rs_plan_free(p);
    return rc;
}
