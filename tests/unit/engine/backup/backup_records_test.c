/*
 * tests/unit/engine/backup/backup_records_test.c — engine/backup/backup_records.c (memory
 * bounds): a backup's records go through the streaming writer and a spool, so what it holds at once
 * is bounded by a chunk whatever the number of files. Drives the writer path with
 * synthetic relation records (300 and 30,000 files of 128 shipped pages: a 0.3 MB and a
 * 31 MB manifest) plus the records that come out of path order (pg_control, backup_label,
 * tablespace_map), then checks: the committed object streams back whole and in path
 * order; records and bytes held peak at the same bound for both sizes, far below the
 * large manifest; the catalog applied from the spool holds the hashes; the parent's
 * records are found forward along the walk; nothing is left in the state directory.
 */
#include "tests/unit/engine/backup/records_fixture.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define NPAGES 128u
#define SYS 7002u

static char root[256];

static void fx_open(fixture *fx, const char *name, const char *id, const char *parent)
{
    fx_open_records(fx, root, name, id, parent, SYS);
}

/* Relation i: NPAGES pages shipped in one run, hashes that do not compress. */
static int add_rel(bk_ctx *ctx, size_t i, pb_error *err)
{
    char path[64];
    snprintf(path, sizeof(path), "base/5/%08zu", i);
    mf_file f = fx_file(path, MF_REL, 0600);
    f.size = NPAGES * 8192ull;
    f.mtime = 1000 + (int64_t)i;
    f.inode = 77 + i;
    f.npages = NPAGES;
    f.nruns = 1;
    f.runs = calloc(1, sizeof(*f.runs));
    f.page_hashes = malloc(NPAGES * 8);
    if (!f.path || !f.runs || !f.page_hashes) {
        mf_file_clear(&f);
        return PB_ENOMEM;
    }
    f.runs[0] = (mf_run){0, NPAGES, 1, 100, 4096ull * i, NPAGES * 8192u, 0};
    for (uint32_t p = 0; p < NPAGES; p++)
        f.page_hashes[p] = pb_hash64(&(uint64_t[2]){i, p}, 16) | 1;
    return fx_record_add(ctx, &f, err);
}

static int add_whole(bk_ctx *ctx, const char *path, pb_error *err)
{
    mf_file f = fx_file(path, MF_FILE, 0600);
    f.size = 10;
    f.hash = 42;
    snprintf(f.stored_in, sizeof(f.stored_in), "%s", mf_header_c(ctx->m)->id);
    f.nruns = 1;
    f.runs = calloc(1, sizeof(*f.runs));
    f.runs[0] = (mf_run){0, 1, 1, 10, 0, 10, 0};
    return fx_record_add(ctx, &f, err);
}

/* The walk's order (base/, then global/ without pg_control), then pg_control and the
 * files pg_backup_stop hands back. */
static void backup_of(fixture *fx, size_t n)
{
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(add_whole(&fx->ctx, "PG_VERSION", &err) == 0);
    for (size_t i = 0; i < n; i++)
        if (add_rel(&fx->ctx, i, &err) != 0) {
            PBT_CHECK(!"add_rel");
            break;
        }
    PBT_CHECK(add_whole(&fx->ctx, "global/1262", &err) == 0);
    PBT_CHECK(add_whole(&fx->ctx, "postgresql.conf", &err) == 0);
    PBT_CHECK(add_whole(&fx->ctx, "global/pg_control", &err) == 0);
    PBT_CHECK(add_whole(&fx->ctx, "backup_label", &err) == 0);
    PBT_CHECK(add_whole(&fx->ctx, "tablespace_map", &err) == 0);
    /* a duplicate of the last path is refused at once (one of an earlier path by the
     * writer at the commit: test_duplicate) */
    PBT_CHECK(add_whole(&fx->ctx, "tablespace_map", &err) == PB_ESTATE);
    mf_header(fx->ctx.m)->files = n + 6;
    PBT_CHECK(bk_records_commit(&fx->ctx, &err) == 0);
}

/* Streams the committed manifest back: count, order, and the bytes it takes. */
static void check_object(fixture *fx, size_t n, uint64_t *size)
{
    pb_error err = PB_ERROR_INIT;
    mf_stream *s = NULL;
    const char *id = mf_header_c(fx->ctx.m)->id;
    char key[128];
    snprintf(key, sizeof(key), "backup/%s/manifest", id);
    PBT_CHECK(repo_stat(fx->r, key, size, &err) == 0);
    PBT_CHECK(chain_stream_open(fx->r, id, &s, &err) == 0);
    if (!s)
        return;
    mf_file f = {0};
    char prev[64] = "";
    size_t count = 0, rels = 0;
    int rc;
    while ((rc = mf_stream_next(s, &f, &err)) == 1) {
        PBT_CHECK(strcmp(prev, f.path) < 0);
        snprintf(prev, sizeof(prev), "%s", f.path);
        rels += f.kind == MF_REL && f.npages == NPAGES && f.page_hashes[3] ==
                (pb_hash64(&(uint64_t[2]){strtoull(f.path + 7, NULL, 10), 3}, 16) | 1);
        count++;
        mf_file_clear(&f);
    }
    PBT_CHECK(rc == 0 && count == n + 6 && rels == n);
    PBT_CHECK(mf_stream_header(s)->files == n + 6);
    mf_stream_close(s);
}

static bool state_dir_empty(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    bool empty = true;
    while (d && (de = readdir(d)))
        if (strstr(de->d_name, ".spool"))
            empty = false;
    if (d)
        closedir(d);
    return empty;
}

static void test_bounded(void)
{
    uint64_t bytes_peak[2], records_peak[2], size[2];
    size_t n[2] = {300, 30000};
    for (int k = 0; k < 2; k++) {
        fixture fx;
        fx_open(&fx, k ? "large" : "small", "20260101-000000F", "");
        backup_of(&fx, n[k]);
        check_object(&fx, n[k], &size[k]);
        bytes_peak[k] = fx.ctx.io.manifest_bytes_peak;
        records_peak[k] = fx.ctx.io.manifest_records_peak;
        printf("files %zu: manifest %llu bytes, held at most %llu records, %llu bytes\n",
               n[k], (unsigned long long)size[k], (unsigned long long)records_peak[k],
               (unsigned long long)bytes_peak[k]);
        fx_close(&fx);
        PBT_CHECK(state_dir_empty(fx.state));
    }
    /* 100 times the files: the same few records held (those out of order and the one
     * being written), bytes within a few chunks' buffers, far below the manifest */
    PBT_CHECK(records_peak[0] <= 4 && records_peak[1] == records_peak[0]);
    PBT_CHECK(size[1] > 25u << 20);
    PBT_CHECK(bytes_peak[1] <= 8u << 20 && bytes_peak[1] * 4 < size[1]);
    PBT_CHECK(bytes_peak[0] > 0 && bytes_peak[0] <= size[0] * 2 + (1u << 20));
}

/* A record out of order that repeats an earlier path: the commit fails, nothing is
 * committed. */
static void test_duplicate(void)
{
    fixture fx;
    pb_error err = PB_ERROR_INIT;
    fx_open(&fx, "dup", "20260101-000000F", "");
    PBT_CHECK(add_whole(&fx.ctx, "base/1", &err) == 0);
    PBT_CHECK(add_whole(&fx.ctx, "global/1262", &err) == 0);
    PBT_CHECK(add_whole(&fx.ctx, "base/1", &err) == 0); /* held aside */
    PBT_CHECK(bk_records_commit(&fx.ctx, &err) == PB_EINVAL && strstr(err.msg, "base/1"));
    PBT_CHECK(repo_stat(fx.r, "backup/20260101-000000F/manifest", NULL, &err) == PB_ENOENT);
    fx_close(&fx);
    PBT_CHECK(state_dir_empty(fx.state));
}

/* The catalog from the spool, and the parent's records found along the walk. */
static void test_catalog_and_parent(void)
{
    fixture fx;
    pb_error err = PB_ERROR_INIT;
    fx_open(&fx, "chain", "20260101-000000F", "");
    backup_of(&fx, 50);
    mf_catalog *cat = NULL;
    PBT_CHECK(mf_catalog_open(&cat, fx.state, &err) == 0);
    PBT_CHECK(bk_records_apply(&fx.ctx, cat, &err) == 0);
    mf_head_entry e;
    memset(&e, 0, sizeof(e));
    PBT_CHECK(mf_catalog_lookup(cat, "base/5/00000007", &e, &err) == 0);
    PBT_CHECK(e.kind == MF_REL && e.npages == NPAGES && e.hashes &&
              e.hashes[3] == (pb_hash64(&(uint64_t[2]){7, 3}, 16) | 1));
    free(e.hashes);
    char head[MF_ID_LEN];
    PBT_CHECK(mf_catalog_head(cat, head, &err) == 0 && !strcmp(head, "20260101-000000F"));
    mf_catalog_close(cat);
    mf_manifest *parent = fx.ctx.m;
    fx.ctx.m = NULL;
    bk_records_free(fx.ctx.rec);
    fx.ctx.rec = NULL;

    /* an incremental on top: its parent's records, forward only */
    bk_ctx *ctx = &fx.ctx;
    mf_backup h = *mf_header_c(parent);
    snprintf(h.parent, sizeof(h.parent), "%s", h.id);
    snprintf(h.id, sizeof(h.id), "20260101-000100I");
    h.type = 'I';
    PBT_CHECK(mf_new(&ctx->m, &h, &err) == 0);
    PBT_CHECK(bk_records_open(ctx, &err) == 0);
    ctx->parent = parent;
    const mf_file *p = NULL;
    PBT_CHECK(bk_parent_find(ctx, "base/5/00000003", &p, &err) == 0 && p &&
              p->inode == 80 && p->mtime == 1003);
    PBT_CHECK(bk_parent_find(ctx, "base/5/00000003x", &p, &err) == 0 && !p);
    PBT_CHECK(bk_parent_find(ctx, "base/5/00000049", &p, &err) == 0 && p && p->inode == 126);
    /* behind the cursor: not found, so the file is read (always safe) */
    PBT_CHECK(bk_parent_find(ctx, "base/5/00000004", &p, &err) == 0 && !p);
    PBT_CHECK(bk_parent_find(ctx, "zzz", &p, &err) == 0 && !p);
    ctx->parent = NULL;
    mf_free(parent);
    fx_close(&fx);
}

int main(void)
{
    static const pbt_case cases[] = {PBT_CASE(test_bounded), PBT_CASE(test_duplicate),
                                     PBT_CASE(test_catalog_and_parent)};
    return pbt_main_in_tmpdir(root, sizeof(root), "backup-records-test", cases, PBT_COUNT(cases));
}
