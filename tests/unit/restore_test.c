/*
 * tests/unit/restore_test.c — restore/ against a chain built in a temporary posix
 * repository: one-pass rebuild from a full + incremental, verify, delta restore,
 * corrupt page hashes, missing WAL (nothing written).
 */
#include "engine/archive.h"
#include "engine/chain.h"
#include "engine/pack.h"
#include "restore/restore.h"
#include "tests/unit/pbtest.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SEG (16u << 20)

static char root[256], repodir[300];

static void fill_page(uint8_t *p, int seed)
{
    for (int i = 0; i < (int)PB_PAGE_SIZE; i++)
        p[i] = (uint8_t)(seed * 31 + i / 97);
}

static void push_wal(repo *r, const char *name)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", root, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    PBT_CHECK(fd >= 0 && ftruncate(fd, SEG) == 0);
    /* the long page header PostgreSQL writes first (archive.c checks it); the segment
     * number is the name's last eight digits (segment size 16 MiB) */
    uint8_t h[40] = {0};
    char tli[9], log[9];
    snprintf(tli, sizeof(tli), "%.8s", name);
    snprintf(log, sizeof(log), "%.8s", name + 8);
    uint64_t segno = strtoull(log, NULL, 16) * 256 + strtoull(name + 16, NULL, 16);
    pb_put_u16(h + 2, 0x0002);
    pb_put_u32(h + 4, (uint32_t)strtoul(tli, NULL, 16));
    pb_put_u64(h + 8, segno * SEG);
    pb_put_u32(h + 32, SEG);
    pb_put_u32(h + 36, 8192);
    PBT_CHECK(pwrite(fd, h, sizeof(h), 0) == (ssize_t)sizeof(h));
    close(fd);
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(arch_push(r, path, &err) == 0);
    unlink(path);
}

/* Store pages [first, first+count) of data as one frame and record the run. */
static void ship(pack_writer *pw, mf_file *f, uint32_t first, uint32_t count, const uint8_t *data)
{
    pack_loc loc;
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(pack_write_frame(pw, data, (size_t)count * PB_PAGE_SIZE, &loc, &err) == 0);
    f->runs = realloc(f->runs, (f->nruns + 1) * sizeof(mf_run));
    mf_run run = {first, count, loc.pack_no, loc.clen, loc.offset, loc.rlen};
    uint32_t shipped = 0;
    for (uint32_t i = 0; i < f->nruns; i++)
        shipped += f->runs[i].count;
    f->runs[f->nruns++] = run;
    f->page_hashes = realloc(f->page_hashes, (shipped + count) * sizeof(uint64_t));
    for (uint32_t k = 0; k < count; k++)
        f->page_hashes[shipped + k] = pb_hash64(data + (size_t)k * PB_PAGE_SIZE, PB_PAGE_SIZE);
}

static mf_manifest *new_backup(const char *id, const char *parent, char type)
{
    mf_backup h;
    memset(&h, 0, sizeof(h));
    snprintf(h.id, sizeof(h.id), "%s", id);
    snprintf(h.parent, sizeof(h.parent), "%s", parent);
    h.type = type;
    h.timeline = 1;
    h.wal_segment_size = SEG;
    h.start_lsn = SEG + 0x28;
    h.stop_lsn = SEG + 0x100;
    mf_manifest *m = NULL;
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(mf_new(&m, &h, &err) == 0);
    return m;
}

static void add_dir(mf_manifest *m, const char *path)
{
    mf_file d;
    memset(&d, 0, sizeof(d));
    d.path = strdup(path);
    d.kind = MF_DIR;
    d.mode = 0700;
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(mf_add_file(m, &d, &err) == 0);
}

static uint8_t expect[4][PB_PAGE_SIZE]; /* the newest state of base/1/100 */

/* F: base/1/100 = pages A0 A1 A2, PG_VERSION "15\n"; I: page 1 -> B1, page 3 added. */
static void build_chain(repo *r, bool corrupt_hash)
{
    pb_error err = PB_ERROR_INIT;
    uint8_t pages[4][PB_PAGE_SIZE];
    for (int i = 0; i < 3; i++)
        fill_page(pages[i], i);
    pack_writer *pw = NULL;
    PBT_CHECK(pack_writer_open(&pw, r, "backup/20260101-000000F", 1 << 20, 1, &err) == 0);
    mf_manifest *f = new_backup("20260101-000000F", "", 'F');
    add_dir(f, "base");
    add_dir(f, "base/1");
    mf_file rel = {0};
    rel.path = strdup("base/1/100");
    rel.kind = MF_REL;
    rel.mode = 0600;
    rel.size = 3 * PB_PAGE_SIZE;
    rel.npages = 3;
    ship(pw, &rel, 0, 3, pages[0]);
    PBT_CHECK(mf_add_file(f, &rel, &err) == 0);
    mf_file ver = {0};
    ver.path = strdup("PG_VERSION");
    ver.kind = MF_FILE;
    ver.mode = 0600;
    ver.size = 3;
    ver.hash = pb_hash64("15\n", 3);
    snprintf(ver.stored_in, sizeof(ver.stored_in), "20260101-000000F");
    pack_loc loc;
    PBT_CHECK(pack_write_frame(pw, "15\n", 3, &loc, &err) == 0);
    ver.runs = calloc(1, sizeof(mf_run));
    ver.runs[0] = (mf_run){0, 1, loc.pack_no, loc.clen, loc.offset, loc.rlen};
    ver.nruns = 1;
    PBT_CHECK(mf_add_file(f, &ver, &err) == 0);
    PBT_CHECK(pack_writer_finish(pw, &err) == 0);
    pack_writer_free(pw);
    mf_sort(f);
    PBT_CHECK(chain_commit(r, f, &err) == 0);
    mf_free(f);

    fill_page(pages[1], 101);
    fill_page(pages[3], 103);
    PBT_CHECK(pack_writer_open(&pw, r, "backup/20260101-000100I", 1 << 20, 1, &err) == 0);
    mf_manifest *inc = new_backup("20260101-000100I", "20260101-000000F", 'I');
    add_dir(inc, "base");
    add_dir(inc, "base/1");
    mf_file rel2 = {0};
    rel2.path = strdup("base/1/100");
    rel2.kind = MF_REL;
    rel2.mode = 0600;
    rel2.size = 4 * PB_PAGE_SIZE;
    rel2.npages = 4;
    ship(pw, &rel2, 1, 1, pages[1]);
    ship(pw, &rel2, 3, 1, pages[3]);
    if (corrupt_hash)
        rel2.page_hashes[1] ^= 1;
    PBT_CHECK(mf_add_file(inc, &rel2, &err) == 0);
    mf_file ver2 = {0};
    ver2.path = strdup("PG_VERSION");
    ver2.kind = MF_FILE;
    ver2.mode = 0600;
    ver2.size = 3;
    ver2.hash = pb_hash64("15\n", 3);
    snprintf(ver2.stored_in, sizeof(ver2.stored_in), "20260101-000000F");
    PBT_CHECK(mf_add_file(inc, &ver2, &err) == 0);
    PBT_CHECK(pack_writer_finish(pw, &err) == 0);
    pack_writer_free(pw);
    mf_sort(inc);
    PBT_CHECK(chain_commit(r, inc, &err) == 0);
    mf_free(inc);
    memcpy(expect, pages, sizeof(expect));
}

static bool file_equals(const char *path, const void *data, size_t len)
{
    uint8_t *buf = malloc(len + 1);
    int fd = open(path, O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, buf, len + 1) : -1;
    if (fd >= 0)
        close(fd);
    bool same = n == (ssize_t)len && memcmp(buf, data, len) == 0;
    free(buf);
    return same;
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
    if (d)
        closedir(d);
    return n;
}

static repo *open_repo(const char *dir)
{
    repo *r = NULL;
    repo_opts o = REPO_OPTS_INIT;
    o.location = dir;
    pb_error err = PB_ERROR_INIT;
    mkdir(dir, 0700);
    PBT_CHECK(repo_open(&r, &o, &err) == 0);
    /* the identity file a first backup writes: restore and verify check it */
    PBT_CHECK(r && chain_check_identity(r, 0, true, &err) == 0);
    return r;
}

static void test_restore_chain(void)
{
    snprintf(repodir, sizeof(repodir), "%s/repo", root);
    repo *r = open_repo(repodir);
    build_chain(r, false);
    push_wal(r, "000000010000000000000001");
    char target[300], path[400];
    snprintf(target, sizeof(target), "%s/target", root);
    rs_opts o = RS_OPTS_INIT;
    o.target_dir = target;
    rs_stats st;
    pb_error err = PB_ERROR_INIT;
    int rc = rs_restore(r, &o, &st, &err);
    PBT_CHECK(rc == 0);
    if (rc)
        fprintf(stderr, "restore: %s\n", err.msg);
    snprintf(path, sizeof(path), "%s/base/1/100", target);
    PBT_CHECK(file_equals(path, expect, sizeof(expect)));
    snprintf(path, sizeof(path), "%s/PG_VERSION", target);
    PBT_CHECK(file_equals(path, "15\n", 3));
    PBT_CHECK(st.chain_length == 2);
    PBT_CHECK(st.pages_written == 4); /* each page written once */
    snprintf(path, sizeof(path), "%s/recovery.signal", target);
    PBT_CHECK(access(path, F_OK) == 0);
    PBT_CHECK(rs_verify(r, "latest", 2, &st, &err) == 0);

    /* Delta: one damaged page is the only one rewritten. */
    snprintf(path, sizeof(path), "%s/base/1/100", target);
    int fd = open(path, O_WRONLY);
    PBT_CHECK(fd >= 0 && pwrite(fd, "XXXX", 4, 2 * PB_PAGE_SIZE + 10) == 4);
    close(fd);
    o.delta = true;
    PBT_CHECK(rs_restore(r, &o, &st, &err) == 0);
    PBT_CHECK(file_equals(path, expect, sizeof(expect)));
    PBT_CHECK(st.pages_written == 1 && st.pages_skipped == 3);

    /* A non-empty target without --delta/--force is refused. */
    o.delta = false;
    PBT_CHECK(rs_restore(r, &o, &st, &err) == PB_EINVAL);
    PBT_CHECK(strstr(err.msg, "not empty") != NULL);
    repo_free(r);
}

static void test_corrupt_hash_and_missing_wal(void)
{
    char dir[300], target[300];
    snprintf(dir, sizeof(dir), "%s/repo2", root);
    repo *r = open_repo(dir);
    build_chain(r, true);
    pb_error err = PB_ERROR_INIT;
    rs_stats st;
    rs_opts o = RS_OPTS_INIT;
    snprintf(target, sizeof(target), "%s/target2", root);
    o.target_dir = target;
    /* No WAL archived yet: refused before anything is written. */
    PBT_CHECK(rs_restore(r, &o, &st, &err) == PB_ENOENT);
    PBT_CHECK(strstr(err.msg, "000000010000000000000001") != NULL);
    PBT_CHECK(count_entries(target) <= 0);
    push_wal(r, "000000010000000000000001");
    PBT_CHECK(rs_restore(r, &o, &st, &err) == PB_ECORRUPT);
    PBT_CHECK(strstr(err.msg, "base/1/100 block 3") != NULL);
    PBT_CHECK(rs_verify(r, NULL, 1, &st, &err) == PB_ECORRUPT);
    repo_free(r);
}

/* Defect 10: a manifest whose run points at an impossible frame location (a stored length
 * of 4 GiB, an offset that wraps) is refused as corruption naming the pack, before any
 * allocation or read from it (old code: a 4 GiB buffer, or a negative pread offset). */
static void test_hostile_frame_locations(void)
{
    const mf_run evil[] = {{0, 1, 1, 0xFFFFFFF0u, 16, 8192},
                           {0, 1, 1, 64, UINT64_MAX - 20, 8192},
                           {0, 1, 1, 64, (uint64_t)INT64_MAX - 8, 8192},
                           {0, 1, 1, 3, 16, 8192}};
    for (size_t i = 0; i < sizeof(evil) / sizeof(evil[0]); i++) {
        char dir[300], target[300];
        snprintf(dir, sizeof(dir), "%s/repo-evil%zu", root, i);
        repo *r = open_repo(dir);
        pb_error err = PB_ERROR_INIT;
        uint8_t page[PB_PAGE_SIZE];
        fill_page(page, 5);
        pack_writer *pw = NULL;
        PBT_CHECK(pack_writer_open(&pw, r, "backup/20260101-000000F", 1 << 20, 1, &err) == 0);
        mf_manifest *f = new_backup("20260101-000000F", "", 'F');
        add_dir(f, "base");
        mf_file rel = {0};
        rel.path = strdup("base/100");
        rel.kind = MF_REL;
        rel.mode = 0600;
        rel.size = PB_PAGE_SIZE;
        rel.npages = 1;
        ship(pw, &rel, 0, 1, page);
        rel.runs[0] = evil[i];
        PBT_CHECK(mf_add_file(f, &rel, &err) == 0);
        PBT_CHECK(pack_writer_finish(pw, &err) == 0);
        pack_writer_free(pw);
        mf_sort(f);
        PBT_CHECK(chain_commit(r, f, &err) == 0);
        mf_free(f);
        push_wal(r, "000000010000000000000001");
        rs_stats st;
        int rc = rs_verify(r, NULL, 1, &st, &err);
        PBT_CHECK(rc == PB_ECORRUPT);
        PBT_CHECK(strstr(err.msg, "backup/20260101-000000F/pack/000001") != NULL);
        if (rc != PB_ECORRUPT)
            fprintf(stderr, "evil location #%zu: rc %d: %s\n", i, rc, err.msg);
        rs_opts o = RS_OPTS_INIT;
        snprintf(target, sizeof(target), "%s/target-evil%zu", root, i);
        o.target_dir = target;
        PBT_CHECK(rs_restore(r, &o, &st, &err) == PB_ECORRUPT);
        repo_free(r);
    }
}

int main(void)
{
    snprintf(root, sizeof(root), "/tmp/pb-restore-test.XXXXXX");
    if (!mkdtemp(root))
        return 1;
    PBT_RUN(test_restore_chain);
    PBT_RUN(test_corrupt_hash_and_missing_wal);
    PBT_RUN(test_hostile_frame_locations);
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", root);
    return PBT_DONE();
}
