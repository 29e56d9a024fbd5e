/* tests/unit/manifest/manifest_catalog_test.c — the RocksDB catalog of the chain head
 * against an in-memory model: a chain of manifests applied whole and streamed, a damaged
 * catalog rebuilt, one that cannot be opened, batched applies. Manifests themselves are in
 * manifest_test.c. */
#include "manifest/manifest_internal.h"
#include "tests/unit/pbtest.h"
#include "tests/unit/manifest/manifest_fixtures.h"

/* manifest/catalog_internal.h's MF_CATALOG_WAL_FILES (that header includes RocksDB). */
#define MF_CATALOG_WAL_FILES_TEST 16

#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- catalog against an in-memory model ---- */

typedef struct mentry {
    char path[64];
    mf_kind kind;
    uint32_t npages;
    uint64_t *h;
    uint64_t hash;
    char stored_in[MF_ID_LEN];
} mentry;

typedef struct model {
    mentry e[32];
    size_t n;
} model;

static void model_free(model *md)
{
    for (size_t i = 0; i < md->n; i++)
        free(md->e[i].h);
    md->n = 0;
}

static const mentry *model_find(const model *md, const char *path)
{
    for (size_t i = 0; i < md->n; i++)
        if (strcmp(md->e[i].path, path) == 0)
            return &md->e[i];
    return NULL;
}

/* The head after m, computed page by page the slow, obvious way. */
static void model_apply(model *md, const mf_manifest *m)
{
    model nm = {.n = 0};
    int full = mf_header_c(m)->type != 'I';
    for (size_t i = 0; i < mf_count(m); i++) {
        const mf_file *f = mf_at(m, i);
        mentry *e = &nm.e[nm.n++];
        memset(e, 0, sizeof(*e));
        snprintf(e->path, sizeof(e->path), "%s", f->path);
        e->kind = f->kind;
        if (f->kind == MF_FILE) {
            e->hash = f->hash;
            memcpy(e->stored_in, f->stored_in, MF_ID_LEN);
        }
        if (f->kind != MF_REL)
            continue;
        e->npages = f->npages;
        e->h = calloc(f->npages + 1, 8);
        const mentry *old = full ? NULL : model_find(md, f->path);
        for (uint32_t p = 0; p < f->npages; p++)
            if (old && old->kind == MF_REL && p < old->npages)
                e->h[p] = old->h[p];
        uint64_t at = 0;
        for (uint32_t r = 0; r < f->nruns; r++)
            for (uint32_t p = 0; p < f->runs[r].count; p++)
                e->h[f->runs[r].first + p] = f->page_hashes[at++];
    }
    model_free(md);
    *md = nm;
}

static const char *all_paths[] = {"base",          "base/1/100",   "base/1/200", "base/1/300",
                                  "base/1/400",    "base/1/500",   "global/pg_control",
                                  "pg_tblspc/16384", "base/1/100.1", "base/1/999"};

static int model_matches(mf_catalog *cat, const model *md, const char *head)
{
    int ok = 1;
    pb_error err = PB_ERROR_INIT;
    uint64_t want_chunks = 0, nkeys = 0;
    for (size_t i = 0; i < sizeof(all_paths) / sizeof(all_paths[0]); i++) {
        const mentry *e = model_find(md, all_paths[i]);
        mf_head_entry got;
        int rc = mf_catalog_lookup(cat, all_paths[i], &got, &err);
        if (!e) {
            if (rc != PB_ENOENT) {
                fprintf(stderr, "%s: expected absent, rc %d\n", all_paths[i], rc);
                ok = 0;
            }
            free(got.hashes);
            continue;
        }
        want_chunks += (e->npages + 8191u) / 8192u;
        if (rc || got.kind != e->kind || got.npages != e->npages ||
            (e->npages && memcmp(got.hashes, e->h, (size_t)e->npages * 8)) ||
            (e->kind == MF_FILE &&
             (got.hash != e->hash || strcmp(got.stored_in, e->stored_in)))) {
            fprintf(stderr, "%s: mismatch (rc %d %s, npages %u/%u)\n", all_paths[i], rc,
                    err.msg, got.npages, e->npages);
            ok = 0;
        }
        free(got.hashes);
    }
    char id[MF_ID_LEN];
    if (mf_catalog_head(cat, id, &err) || strcmp(id, head) != 0)
        ok = 0;
    /* no stale keys: exactly one chunk key per 8192 pages, one F key per file */
    if (mf_catalog_count_keys(cat, 'H', &nkeys, &err) || nkeys != want_chunks) {
        fprintf(stderr, "H keys %llu, want %llu\n", (unsigned long long)nkeys,
                (unsigned long long)want_chunks);
        ok = 0;
    }
    if (mf_catalog_count_keys(cat, 'F', &nkeys, &err) || nkeys != md->n)
        ok = 0;
    return ok;
}

static int buf_read(void *ctx, uint64_t off, size_t len, void *dst, pb_error *err)
{
    const pb_buf *b = ctx;
    if (off > b->len || len > b->len - off)
        return pb_fail(err, PB_ECORRUPT, "read past the end");
    memcpy(dst, b->data + off, len);
    return 0;
}

/* m applied from a version 2 stream of its serialized bytes (mf_catalog_apply_stream). */
static int apply_streamed(mf_catalog *cat, const mf_manifest *m, pb_error *err)
{
    pb_buf b = {0};
    mf_stream *s = NULL;
    int rc = mf_serialize(m, &b, err);
    mf_source src = {buf_read, NULL, &b, 0, NULL};
    src.size = b.len;
    if (rc == 0)
        rc = mf_stream_open(&s, &src, "test stream", err);
    if (rc == 0)
        rc = mf_catalog_apply_stream(cat, s, err);
    mf_stream_close(s);
    pb_buf_free(&b);
    return rc;
}

/* Backups whose id has an even digit (B2, B4, ...) are applied from a stream, the others
 * from the manifest in memory: the model checks both paths. */
static int apply_both(mf_catalog *cat, model *md, mf_manifest *m)
{
    pb_error err = PB_ERROR_INIT;
    const char *id = mf_header_c(m)->id;
    bool streamed = id[1] >= '0' && id[1] <= '9' && (id[1] - '0') % 2 == 0;
    int rc = streamed ? apply_streamed(cat, m, &err) : mf_catalog_apply(cat, m, &err);
    if (rc)
        fprintf(stderr, "apply %s: %s\n", mf_header_c(m)->id, err.msg);
    else
        model_apply(md, m);
    mf_free(m);
    return rc;
}

static void test_catalog_chain(void)
{
    char dir[] = "/tmp/mf_test.XXXXXX";
    PBT_CHECK(mkdtemp(dir) != NULL);
    char db[64];
    snprintf(db, sizeof(db), "%s/catalog", dir);
    pb_error err = PB_ERROR_INIT;
    mf_catalog *cat = NULL;
    model md = {.n = 0};
    char id[MF_ID_LEN];
    mf_apply_stats st;
    PBT_CHECK(mf_catalog_open(&cat, db, &err) == 0);
    if (!cat)
        return;
    PBT_CHECK(mf_catalog_head(cat, id, &err) == PB_ENOENT);

    /* B1: full */
    mf_manifest *m = new_manifest("B1", "", 'F');
    add_rel(m, 1, "base/1/100", 20000, 1, 1, 0, 20000);
    add_rel(m, 1, "base/1/200", 5, 0, 1, 0, 5);
    add_rel(m, 1, "base/1/300", 0, 0, 0);
    add_other(m, "global/pg_control", MF_FILE, 111, "B1", NULL);
    add_other(m, "base", MF_DIR, 0, NULL, NULL);
    add_other(m, "pg_tblspc/16384", MF_LINK, 0, NULL, "/ts");
    PBT_CHECK(apply_both(cat, &md, m) == 0);
    PBT_CHECK(model_matches(cat, &md, "B1"));

    /* B2: change pages across chunk edges, extend 200, new 400, drop the link */
    m = new_manifest("B2", "B1", 'I');
    add_rel(m, 2, "base/1/100", 20000, 0, 3, 0, 3, 8190, 5, 19999, 1);
    add_rel(m, 2, "base/1/200", 10, 0, 2, 1, 1, 5, 5);
    add_rel(m, 2, "base/1/300", 0, 0, 0);
    add_rel(m, 2, "base/1/400", 3, 0, 1, 0, 3);
    add_other(m, "global/pg_control", MF_FILE, 222, "B2", NULL);
    add_other(m, "base", MF_DIR, 0, NULL, NULL);
    PBT_CHECK(apply_both(cat, &md, m) == 0);
    PBT_CHECK(model_matches(cat, &md, "B2"));
    mf_catalog_last_stats(cat, &st);
    /* 100: chunks 0, 1 (8190..8194 straddles 0/1) and 2 touched; 200 and 400 written */
    PBT_CHECK(st.chunks_put == 5 && st.files_deleted == 1);

    /* B3: one page of 100 changes: exactly one chunk written, the rest untouched */
    m = new_manifest("B3", "B2", 'I');
    add_rel(m, 3, "base/1/100", 20000, 0, 1, 9000, 1);
    add_rel(m, 3, "base/1/200", 10, 0, 0);
    add_rel(m, 3, "base/1/300", 0, 0, 0);
    add_rel(m, 3, "base/1/400", 3, 0, 0);
    add_other(m, "global/pg_control", MF_FILE, 222, "B2", NULL);
    add_other(m, "base", MF_DIR, 0, NULL, NULL);
    PBT_CHECK(apply_both(cat, &md, m) == 0);
    PBT_CHECK(model_matches(cat, &md, "B3"));
    mf_catalog_last_stats(cat, &st);
    PBT_CHECK(st.chunks_put == 1 && st.files_put == 0 && st.files_deleted == 0);
    PBT_CHECK(st.chunks_read == 1);

    /* B4: truncate 100 to 8192 pages (chunks 1, 2 go), 200 to 3; 300 grows */
    m = new_manifest("B4", "B3", 'I');
    add_rel(m, 4, "base/1/100", 8192, 0, 0);
    add_rel(m, 4, "base/1/200", 3, 0, 1, 0, 1);
    add_rel(m, 4, "base/1/300", 2, 0, 1, 0, 2);
    add_rel(m, 4, "base/1/400", 3, 0, 0);
    add_other(m, "global/pg_control", MF_FILE, 222, "B2", NULL);
    add_other(m, "base", MF_DIR, 0, NULL, NULL);
    PBT_CHECK(apply_both(cat, &md, m) == 0);
    PBT_CHECK(model_matches(cat, &md, "B4"));

    /* B5: extend 100 from 8192 to 17000 (new pages shipped, runs listed backwards),
     * add 500, and 400 becomes a plain file */
    m = new_manifest("B5", "B4", 'I');
    add_rel(m, 5, "base/1/100", 17000, 1, 2, 8192, 8808, 5, 2);
    add_rel(m, 5, "base/1/200", 3, 0, 0);
    add_rel(m, 5, "base/1/300", 2, 0, 0);
    add_other(m, "base/1/400", MF_FILE, 444, "B5", NULL);
    add_rel(m, 5, "base/1/500", 8193, 0, 1, 0, 8193);
    add_rel(m, 5, "base/1/100.1", 9000, 0, 1, 0, 9000);
    add_other(m, "global/pg_control", MF_FILE, 222, "B2", NULL);
    add_other(m, "base", MF_DIR, 0, NULL, NULL);
    PBT_CHECK(apply_both(cat, &md, m) == 0);
    PBT_CHECK(model_matches(cat, &md, "B5"));

    /* B5b: drop 100 (its neighbour 100.1 shares the prefix and must stay); ship two
     * pages of 500 whose hashes did not change: read, compared, not rewritten */
    m = new_manifest("B5b", "B5", 'I');
    add_rel(m, 6, "base/1/200", 3, 0, 0);
    add_rel(m, 6, "base/1/300", 2, 0, 0);
    add_other(m, "base/1/400", MF_FILE, 444, "B5", NULL);
    const mentry *e500 = model_find(&md, "base/1/500");
    PBT_CHECK(e500 && e500->npages == 8193);
    if (e500)
        add_rel_hashes(m, "base/1/500", 8193, 8190, 2, e500->h + 8190);
    add_rel(m, 6, "base/1/100.1", 9000, 0, 0);
    add_other(m, "global/pg_control", MF_FILE, 222, "B2", NULL);
    add_other(m, "base", MF_DIR, 0, NULL, NULL);
    PBT_CHECK(apply_both(cat, &md, m) == 0);
    PBT_CHECK(model_matches(cat, &md, "B5b"));
    mf_catalog_last_stats(cat, &st);
    PBT_CHECK(st.chunks_put == 0 && st.chunks_read == 1 && st.files_deleted == 1);

    /* reopen: the head persists */
    mf_catalog_close(cat);
    cat = NULL;
    PBT_CHECK(mf_catalog_open(&cat, db, &err) == 0);
    if (!cat)
        goto out;
    PBT_CHECK(model_matches(cat, &md, "B5b"));

    /* an unshipped page the head does not have: the chain is inconsistent */
    m = new_manifest("B6", "B5b", 'I');
    add_rel(m, 6, "base/1/100.1", 9001, 0, 1, 3, 1);
    PBT_CHECK(mf_catalog_apply(cat, m, &err) == PB_ECORRUPT);
    PBT_CHECK(strstr(err.msg, "base/1/100.1") && strstr(err.msg, "9000"));
    mf_free(m);
    /* a new file in an incremental must ship everything */
    m = new_manifest("B6", "B5b", 'I');
    add_rel(m, 6, "base/1/999", 4, 0, 1, 0, 3);
    PBT_CHECK(mf_catalog_apply(cat, m, &err) == PB_ECORRUPT);
    mf_free(m);
    /* a parent that is not the head */
    m = new_manifest("B6", "B4", 'I');
    PBT_CHECK(mf_catalog_apply(cat, m, &err) == PB_ESTATE);
    mf_free(m);
    /* a full that does not ship every page */
    m = new_manifest("F2", "", 'F');
    add_rel(m, 7, "base/1/100", 10, 0, 1, 0, 9);
    PBT_CHECK(mf_catalog_apply(cat, m, &err) == PB_ECORRUPT);
    mf_free(m);
    /* none of the failures changed anything */
    PBT_CHECK(model_matches(cat, &md, "B5b"));

    /* a synthetic full replaces the head */
    m = new_manifest("S1", "B5b", 'S');
    add_rel(m, 8, "base/1/200", 9000, 0, 1, 0, 9000);
    add_other(m, "base", MF_DIR, 0, NULL, NULL);
    PBT_CHECK(apply_both(cat, &md, m) == 0);
    PBT_CHECK(model_matches(cat, &md, "S1"));

    /* reset empties it */
    PBT_CHECK(mf_catalog_reset(cat, &err) == 0);
    PBT_CHECK(mf_catalog_head(cat, id, &err) == PB_ENOENT);
    model_free(&md);
    uint64_t n = 1;
    PBT_CHECK(mf_catalog_count_keys(cat, 'H', &n, &err) == 0 && n == 0);
    mf_head_entry e;
    PBT_CHECK(mf_catalog_lookup(cat, "base/1/200", &e, &err) == PB_ENOENT && !e.hashes);
    m = new_manifest("B7", "S1", 'I');
    PBT_CHECK(mf_catalog_apply(cat, m, &err) == PB_ESTATE);
    mf_free(m);
out:
    model_free(&md);
    mf_catalog_close(cat);
    rm_tree(dir);
}

/* Flip one byte in the middle of the largest table file of a closed catalog. */
static int damage_largest(const char *db, int truncate_it)
{
    char cmd[512], path[512] = "";
    snprintf(cmd, sizeof(cmd), "ls -S '%s'/*.sst 2>/dev/null | head -n 1", db);
    FILE *p = popen(cmd, "r");
    if (!p || !fgets(path, sizeof(path), p)) {
        if (p)
            pclose(p);
        return -1;
    }
    pclose(p);
    path[strcspn(path, "\n")] = '\0';
    struct stat st;
    int fd = open(path, O_RDWR);
    if (fd < 0 || fstat(fd, &st) != 0)
        return -1;
    int rc = 0;
    if (truncate_it) {
        rc = ftruncate(fd, st.st_size / 2);
    } else {
        uint8_t b;
        off_t at = st.st_size / 3;
        rc = pread(fd, &b, 1, at) == 1 && (b ^= 0x40, pwrite(fd, &b, 1, at) == 1) ? 0 : -1;
    }
    close(fd);
    return rc;
}

/* Files in db whose name ends with suffix. */
static int count_suffix(const char *db, const char *suffix)
{
    char cmd[512], line[64] = "";
    snprintf(cmd, sizeof(cmd), "ls '%s' | grep -c '%s$'", db, suffix);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    if (!fgets(line, sizeof(line), p))
        line[0] = '\0';
    pclose(p);
    return atoi(line);
}

/* A head of 80 relations of 8000 pages (5 MB of hashes: more than the memtables hold,
 * so part of it reaches a table file). */
static int apply_big_full(mf_catalog *cat, const char *id, pb_error *err)
{
    mf_manifest *m = new_manifest(id, "", 'F');
    for (int i = 0; i < 80; i++) {
        char path[32];
        snprintf(path, sizeof(path), "base/1/%d", 1000 + i);
        add_rel(m, 1, path, 8000, 0, 1, 0, 8000);
    }
    mf_sort(m);
    int rc = mf_catalog_apply(cat, m, err);
    mf_free(m);
    return rc;
}

/* The catalog is a cache: damage is found where it is read (RocksDB verifies each block's
 * checksum as it reads it; the catalog is no longer read whole at every open).
 * A damaged catalog answers "not in the head" from then on (the backup ships those files
 * whole), applies nothing, and is removed at close: the next open is empty, and the
 * backup rebuilds it from the repository instead of failing from now on. */
static void test_catalog_damage_rebuilds(void)
{
    for (int truncate_it = 0; truncate_it < 2; truncate_it++) {
        char dir[] = "/tmp/mf_test.XXXXXX";
        PBT_CHECK(mkdtemp(dir) != NULL);
        char db[64], id[MF_ID_LEN];
        snprintf(db, sizeof(db), "%s/catalog", dir);
        pb_error err = PB_ERROR_INIT;
        mf_catalog *cat = NULL;
        PBT_CHECK(mf_catalog_open(&cat, db, &err) == 0);
        PBT_CHECK(apply_big_full(cat, "F1", &err) == 0);
        mf_catalog_close(cat);
        PBT_CHECK(damage_largest(db, truncate_it) == 0);
        cat = NULL;
        int rc = mf_catalog_open(&cat, db, &err);
        PBT_CHECK(rc == 0);
        if (rc)
            fprintf(stderr, "  damaged catalog: %s\n", err.msg);
        int unknown = 0;
        for (int i = 0; cat && i < 80; i++) {
            char path[32];
            snprintf(path, sizeof(path), "base/1/%d", 1000 + i);
            mf_head_entry e;
            rc = mf_catalog_lookup(cat, path, &e, &err);
            PBT_CHECK(rc == 0 || rc == PB_ENOENT);
            PBT_CHECK(rc || (e.npages == 8000 && e.hashes && e.hashes[7999] != 0));
            unknown += rc == PB_ENOENT;
            free(e.hashes);
        }
        /* dropped at open (head gone), or found by a lookup (every answer after it none) */
        bool found = cat && mf_catalog_damaged(cat);
        PBT_CHECK(cat && (found ? unknown > 0 : mf_catalog_head(cat, id, &err) == PB_ENOENT));
        mf_manifest *m = new_manifest("I2", "F1", 'I');
        PBT_CHECK(!found || mf_catalog_apply(cat, m, &err) == PB_ECORRUPT);
        PBT_CHECK(!found || mf_catalog_head(cat, id, &err) == PB_ENOENT);
        mf_free(m);
        mf_catalog_close(cat);
        cat = NULL;
        PBT_CHECK(mf_catalog_open(&cat, db, &err) == 0);
        uint64_t n = 1;
        PBT_CHECK(cat && mf_catalog_head(cat, id, &err) == PB_ENOENT);
        PBT_CHECK(cat && mf_catalog_count_keys(cat, 'H', &n, &err) == 0 && n == 0);
        PBT_CHECK(cat && apply_big_full(cat, "F3", &err) == 0); /* rebuilt */
        mf_catalog_close(cat);
        rm_tree(dir);
    }
}

/* An open writes no table file (until 2026-12-01 it replayed the write-ahead log into one,
 * fsynced, on every open): the logs stay, at most MF_CATALOG_WAL_FILES + 1 of them, and
 * the head survives every reopen. Old code: the first reopen left a table file. */
static void test_catalog_open_no_flush(void)
{
    char dir[] = "/tmp/mf_test.XXXXXX";
    PBT_CHECK(mkdtemp(dir) != NULL);
    char db[64], id[MF_ID_LEN], prev[MF_ID_LEN] = "F0";
    snprintf(db, sizeof(db), "%s/catalog", dir);
    pb_error err = PB_ERROR_INIT;
    mf_catalog *cat = NULL;
    PBT_CHECK(mf_catalog_open(&cat, db, &err) == 0);
    mf_manifest *m = new_manifest("F0", "", 'F');
    add_rel(m, 1, "base/1/100", 10, 0, 1, 0, 10);
    PBT_CHECK(mf_catalog_apply(cat, m, &err) == 0);
    mf_free(m);
    mf_catalog_close(cat);
    int most_logs = 0;
    for (int i = 1; i <= 40; i++) {
        cat = NULL;
        PBT_CHECK(mf_catalog_open(&cat, db, &err) == 0);
        PBT_CHECK(cat && mf_catalog_head(cat, id, &err) == 0 && strcmp(id, prev) == 0);
        if (i == 1)
            PBT_CHECK(count_suffix(db, ".sst") == 0); /* reopened: nothing flushed */
        snprintf(id, sizeof(id), "I%d", i);
        m = new_manifest(id, prev, 'I');
        add_rel(m, 1, "base/1/100", 10, 0, 1, i % 10, 1);
        PBT_CHECK(cat && mf_catalog_apply(cat, m, &err) == 0);
        mf_free(m);
        snprintf(prev, sizeof(prev), "%s", id);
        mf_catalog_close(cat);
        int logs = count_suffix(db, ".log");
        most_logs = logs > most_logs ? logs : most_logs;
    }
    PBT_CHECK(most_logs >= 2 && most_logs <= MF_CATALOG_WAL_FILES_TEST + 1);
    if (most_logs > MF_CATALOG_WAL_FILES_TEST + 1 || most_logs < 2)
        fprintf(stderr, "  at most %d write-ahead logs\n", most_logs);
    rm_tree(dir);
}

/* A catalog in a path that cannot be created reports an error, not a crash. */
static void test_catalog_open_fails(void)
{
    pb_error err = PB_ERROR_INIT;
    mf_catalog *cat = (mf_catalog *)1;
    PBT_CHECK(mf_catalog_open(&cat, "/proc/no/such/catalog", &err) != 0);
    PBT_CHECK(cat == NULL && strstr(err.msg, "/proc/no/such/catalog"));
    mf_catalog_close(NULL);
}

/* An apply larger than the batch limit is written in several batches (bounded memory),
 * still all or nothing for a reader: an apply that fails after a batch was written
 * leaves no head (which the backup rebuilds), never a half-applied one. */
static void test_catalog_batches(void)
{
    char dir[] = "/tmp/mf_test.XXXXXX";
    PBT_CHECK(mkdtemp(dir) != NULL);
    char db[64], path[64], id[MF_ID_LEN];
    snprintf(db, sizeof(db), "%s/catalog", dir);
    pb_error err = PB_ERROR_INIT;
    mf_catalog *cat = NULL;
    mf_apply_stats st;
    PBT_CHECK(mf_catalog_open(&cat, db, &err) == 0);
    if (!cat)
        return;
    mf_catalog_set_batch_limit(cat, 256u << 10);
    mf_manifest *m = new_manifest("B1", "", 'F');
    for (int i = 0; i < 40; i++) {
        snprintf(path, sizeof(path), "base/1/%d", 1000 + i);
        add_rel(m, 1, path, 20000, 0, 1, 0, 20000);
    }
    PBT_CHECK(mf_catalog_apply(cat, m, &err) == 0);
    mf_free(m);
    mf_catalog_last_stats(cat, &st);
    PBT_CHECK(st.batches >= 10 && st.chunks_put == 40 * 3);
    PBT_CHECK(mf_catalog_head(cat, id, &err) == 0 && strcmp(id, "B1") == 0);
    mf_head_entry e;
    PBT_CHECK(mf_catalog_lookup(cat, "base/1/1039", &e, &err) == 0 && e.npages == 20000 &&
              e.hashes[19999] == hv(1, "base/1/1039", 19999));
    free(e.hashes);
    /* an incremental whose last file grows without shipping its new pages: corrupt,
     * found after earlier batches were written */
    m = new_manifest("B2", "B1", 'I');
    for (int i = 0; i < 40; i++) {
        snprintf(path, sizeof(path), "base/1/%d", 1000 + i);
        add_rel(m, 2, path, i == 39 ? 20001 : 20000, 0, 1, 0, 20000);
    }
    PBT_CHECK(mf_catalog_apply(cat, m, &err) == PB_ECORRUPT);
    mf_free(m);
    PBT_CHECK(mf_catalog_head(cat, id, &err) == PB_ENOENT);
    mf_catalog_close(cat);
    rm_tree(dir);
}

int main(void)
{
    PBT_RUN(test_catalog_chain);
    PBT_RUN(test_catalog_open_fails);
    PBT_RUN(test_catalog_damage_rebuilds);
    PBT_RUN(test_catalog_open_no_flush);
    PBT_RUN(test_catalog_batches);
    return PBT_DONE();
}
