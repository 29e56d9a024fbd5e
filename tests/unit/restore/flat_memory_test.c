/*
 * tests/unit/restore/flat_memory_test.c — restore, verify --set and rebase hold a bounded
 * amount of manifest, whatever the number of files (memory bounds). A posix repository holds
 * a chain (a full and an incremental changing one page of every tenth file) of NSMALL
 * and then NLARGE relation files, its manifests written through mf_writer with small
 * chunks so each is many chunks long. rs_stats.manifest_peak (streams, outline, copied
 * records; an in-memory version 1 stream counts its whole manifest) must stay below a
 * bound that does not grow with the files, and far below what the manifests hold whole;
 * so must rs_verify_stats.manifest_peak of the repository pass.
 */
#include "engine/wal/wal.h"
#include "engine/chain/chain.h"
#include "engine/pack/pack.h"
#include "restore/restore.h"
#include "restore/verify/verify.h"
#include "tests/unit/fixtures.h"
#include "tests/unit/pbtest.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SEG (16u << 20)
#define NSMALL 300u
#define NLARGE 2400u
#define CHUNK 4096u /* manifest chunk target of the test's manifests */

static char root[256];

static void fill_page(uint8_t *p, unsigned seed)
{
    for (size_t i = 0; i < PB_PAGE_SIZE; i++)
        p[i] = (uint8_t)(seed * 29 + i / 83);
}

static void push_wal(repo *r, uint64_t segno)
{
    char name[25], path[512];
    arch_segment_name(name, 1, segno, SEG);
    snprintf(path, sizeof(path), "%s/%s", root, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    PBT_CHECK(fd >= 0 && ftruncate(fd, SEG) == 0);
    uint8_t h[64];
    pbt_wal_switch_head(h, 1, segno, SEG); /* valid WAL: a restore reads it */
    PBT_CHECK(pwrite(fd, h, sizeof(h), 0) == (ssize_t)sizeof(h));
    close(fd);
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(arch_push(r, path, &err) == 0);
    unlink(path);
}

static int to_buf(void *ctx, const void *data, size_t len, pb_error *err)
{
    return pb_buf_append(ctx, data, len) ? pb_fail(err, PB_ENOMEM, "chunk") : 0;
}

static void add_dir(mf_writer *w, const char *path)
{
    mf_file d = {0};
    d.path = (char *)path;
    d.kind = MF_DIR;
    d.mode = 0700;
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(mf_writer_add(w, &d, &err) == 0);
}

/* Page k of file i as backup b holds it: the incremental (b 1) changed page 0 of every
 * tenth file. */
static unsigned seed_of(unsigned i, unsigned k, unsigned b)
{
    return b && k == 0 && i % 10 == 0 ? 100000 + i : i * 2 + k;
}

/* One backup of n two-page relations: frames to its pack, records through mf_writer
 * (chunks of CHUNK bytes), the object stored as a backup's manifest. Returns its size. */
static size_t write_backup(repo *r, const char *id, const char *parent, unsigned n)
{
    pb_error err = PB_ERROR_INIT;
    char dir[128], key[200];
    snprintf(dir, sizeof(dir), "backup/%s", id);
    pack_writer *pw = NULL;
    PBT_CHECK(pack_writer_open(&pw, r, dir, 64u << 20, 1, &err) == 0);
    mf_backup h = {0};
    snprintf(h.id, sizeof(h.id), "%s", id);
    snprintf(h.parent, sizeof(h.parent), "%s", parent);
    h.type = parent[0] ? 'I' : 'F';
    h.timeline = 1;
    h.wal_segment_size = SEG;
    h.start_lsn = SEG + 0x28;
    h.stop_lsn = SEG + 0x100;
    pb_buf body = {0}, head = {0};
    mf_writer *w = NULL;
    PBT_CHECK(mf_writer_new(&w, &h, chain_manifest_codec(), to_buf, &body, &err) == 0);
    mf_writer_set_chunk_target(w, CHUNK);
    add_dir(w, "base");
    add_dir(w, "base/1");
    uint8_t pages[2][PB_PAGE_SIZE];
    for (unsigned i = 0; i < n; i++) {
        char path[64];
        snprintf(path, sizeof(path), "base/1/%06u", i);
        unsigned b = parent[0] ? 1 : 0, count = b ? 1 : 2;
        if (b && i % 10)
            count = 0;
        for (unsigned k = 0; k < count; k++)
            fill_page(pages[k], seed_of(i, k, b));
        mf_run run = {0, count, 0, 0, 0, 0, 0};
        uint64_t hashes[2] = {pb_hash64(pages[0], PB_PAGE_SIZE), pb_hash64(pages[1], PB_PAGE_SIZE)};
        if (count)
            PBT_CHECK(pack_write_runs(pw, pages, count * PB_PAGE_SIZE, &run, 1, 0, &err) == 0);
        mf_file f = {0};
        f.path = path;
        f.kind = MF_REL;
        f.mode = 0600;
        f.size = 2 * PB_PAGE_SIZE;
        f.npages = 2;
        f.nruns = count ? 1 : 0;
        f.runs = count ? &run : NULL;
        f.page_hashes = count ? hashes : NULL;
        PBT_CHECK(mf_writer_add(w, &f, &err) == 0);
    }
    PBT_CHECK(pack_writer_finish(pw, &err) == 0);
    pack_writer_free(pw);
    PBT_CHECK(mf_writer_finish(w, &head, &err) == 0);
    mf_writer_free(w);
    PBT_CHECK(pb_buf_append(&head, body.data, body.len) == 0);
    snprintf(key, sizeof(key), "backup/%s/manifest", id);
    PBT_CHECK(repo_put(r, key, head.data, head.len, &err) == 0);
    size_t len = head.len;
    pb_buf_free(&head);
    pb_buf_free(&body);
    return len;
}

static bool file_is(const char *path, unsigned i)
{
    uint8_t want[2][PB_PAGE_SIZE], got[2 * PB_PAGE_SIZE + 1];
    fill_page(want[0], seed_of(i, 0, 1));
    fill_page(want[1], seed_of(i, 1, 1));
    int fd = open(path, O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, got, sizeof(got)) : -1;
    if (fd >= 0)
        close(fd);
    return n == (ssize_t)sizeof(want) && memcmp(got, want, sizeof(want)) == 0;
}

static void note(void *ctx, const char *id, bool problem, const char *msg)
{
    (void)ctx;
    if (problem)
        fprintf(stderr, "verify: problem in %s: %s\n", id ? id : "WAL", msg);
}

typedef struct held {
    uint64_t restore, verify, repo; /* peaks: restore, verify --set, verify (repository) */
    uint64_t stored, whole;   /* the manifests' stored bytes, and what they hold parsed */
} held;

/* A chain of n files: restored (every tenth file checked), verified, rebased. */
static held run_chain(unsigned n)
{
    held out = {0, 0, 0, 0, 0};
    char repodir[320], target[320], path[400];
    snprintf(repodir, sizeof(repodir), "%s/repo-%u", root, n);
    snprintf(target, sizeof(target), "%s/target-%u", root, n);
    repo *r = NULL;
    repo_opts ro = REPO_OPTS_INIT;
    ro.location = repodir;
    pb_error err = PB_ERROR_INIT;
    mkdir(repodir, 0700);
    PBT_CHECK(repo_open(&r, &ro, &err) == 0);
    if (!r)
        return out;
    PBT_CHECK(chain_check_identity(r, 0, true, &err) == 0);
    static const char *const ids[2] = {"20260101-000000F", "20260101-000100I"};
    out.stored = write_backup(r, ids[0], "", n);
    out.stored += write_backup(r, ids[1], ids[0], n);
    for (int b = 0; b < 2; b++) { /* what the old whole-manifest load held */
        mf_manifest *m = NULL;
        mf_stream *s = NULL;
        PBT_CHECK(chain_load(r, ids[b], &m, &err) == 0);
        PBT_CHECK(m && mf_stream_from_manifest(&s, m, &err) == 0);
        out.whole += s ? mf_stream_peak(s) : 0;
        mf_stream_close(s);
    }
    push_wal(r, 1);
    rs_opts o = RS_OPTS_INIT;
    o.target_dir = target;
    o.jobs = 2;
    rs_stats st;
    int rc = rs_restore(r, &o, &st, &err);
    PBT_CHECK(rc == 0);
    if (rc)
        fprintf(stderr, "restore: %s\n", err.msg);
    PBT_CHECK(st.pages_written == 2ull * n && st.chain_length == 2);
    for (unsigned i = 0; i < n; i += 10) {
        snprintf(path, sizeof(path), "%s/base/1/%06u", target, i);
        PBT_CHECK(file_is(path, i));
        snprintf(path, sizeof(path), "%s/base/1/%06u", target, i + 1);
        PBT_CHECK(file_is(path, i + 1));
    }
    out.restore = st.manifest_peak;
    PBT_CHECK(rs_verify(r, "latest", 2, &st, &err) == 0);
    out.verify = st.manifest_peak;
    rs_verify_stats vs;
    rc = rs_verify_repo(r, NULL, 2, note, NULL, NULL, &vs, &err);
    PBT_CHECK(rc == 0 && vs.backups == 2 && vs.problems == 0);
    if (rc)
        fprintf(stderr, "verify: %s\n", err.msg);
    out.repo = vs.manifest_peak;
    /* rebase: the synthetic full, written through the streaming writer, restores alike */
    char sid[MF_ID_LEN];
    rc = rs_rebase(r, NULL, 1, NULL, NULL, sid, &err);
    PBT_CHECK(rc == 0);
    if (rc)
        fprintf(stderr, "rebase: %s\n", err.msg);
    o.set = sid;
    o.force = true;
    PBT_CHECK(rc == 0 && rs_restore(r, &o, &st, &err) == 0 && st.chain_length == 1);
    snprintf(path, sizeof(path), "%s/base/1/%06u", target, n - 1);
    PBT_CHECK(file_is(path, n - 1));
    printf("  %u files: manifests %llu bytes stored, %llu parsed; held at once: restore "
           "%llu, verify --set %llu, verify %llu, rebased restore %llu\n", n,
           (unsigned long long)out.stored, (unsigned long long)out.whole,
           (unsigned long long)out.restore, (unsigned long long)out.verify,
           (unsigned long long)out.repo,
           (unsigned long long)st.manifest_peak);
    repo_free(r);
    return out;
}

static void test_flat(void)
{
    held small = run_chain(NSMALL), large = run_chain(NLARGE);
    /* 8x the files: what is held grows only by the two indexes (one entry per chunk)
     * and stays a small part of what the manifests hold parsed (the old whole load) */
    PBT_CHECK(large.restore > 0 && large.verify > 0);
    PBT_CHECK(large.whole > 6 * small.whole); /* the manifests did grow */
    PBT_CHECK(large.restore < small.restore + large.whole / 20);
    PBT_CHECK(large.verify < small.verify + large.whole / 20);
    PBT_CHECK(large.repo > 0 && large.repo < small.repo + large.whole / 20);
    PBT_CHECK(large.restore < large.whole / 4 && large.verify < large.whole / 4);
    PBT_CHECK(large.repo < large.whole / 4);
    PBT_CHECK(large.restore < (256u << 10));
}

int main(void)
{
    static const pbt_case cases[] = {PBT_CASE(test_flat)};
    return pbt_main_in_tmpdir(root, sizeof(root), "flat-memory-test", cases, PBT_COUNT(cases));
}
