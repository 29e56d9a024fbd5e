/*
 * tests/unit/fixtures.h — the fixture builders the repository-level runners share: a
 * posix repository in a runner's temp directory, backup headers and manifests committed
 * to it, relation runs stored as pack frames, WAL segments archived into it, and small
 * file helpers. Header-only like pbtest.h (include it after pbtest.h): the checks made
 * here count in the runner that includes it, so each runner's totals stay its own.
 * Each builder says how many checks it makes.
 */
#ifndef PB_TEST_FIXTURES_H
#define PB_TEST_FIXTURES_H
#include "engine/chain/chain.h"
#include "engine/pack/pack.h"
#include "engine/wal/wal.h"
#include "tests/unit/pbtest.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The segment size of every synthetic backup and WAL segment. */
#define PBT_SEG (16u << 20)

/* A posix repository at dir (made if missing); NULL when it cannot be opened. One
 * check; the error goes to stderr. The caller frees it with repo_free. */
static inline repo *pbt_repo_open(const char *dir)
{
    repo *r = NULL;
    repo_opts o = REPO_OPTS_INIT;
    o.location = dir;
    pb_error err = PB_ERROR_INIT;
    mkdir(dir, 0700);
    int rc = repo_open(&r, &o, &err);
    PBT_CHECK(rc == 0);
    if (rc)
        fprintf(stderr, "repo_open %s: %s\n", dir, err.msg);
    return r;
}

/* pbt_repo_open of root/name. */
static inline repo *pbt_repo_open_in(const char *root, const char *name)
{
    char dir[4200];
    snprintf(dir, sizeof(dir), "%s/%s", root, name);
    return pbt_repo_open(dir);
}

/* Write the identity file a first backup writes (restore, verify and the backup plan
 * check the chain against it). One check. */
static inline void pbt_repo_identity(repo *r, uint64_t system_id)
{
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(r && chain_check_identity(r, system_id, true, &err) == 0);
}

/* A backup header on timeline 1 with PBT_SEG segments; LSNs and times are zero (the
 * caller sets what its test needs). */
static inline mf_backup pbt_header(const char *id, const char *parent, char type)
{
    mf_backup h;
    memset(&h, 0, sizeof(h));
    snprintf(h.id, sizeof(h.id), "%s", id);
    snprintf(h.parent, sizeof(h.parent), "%s", parent);
    h.type = type;
    h.timeline = 1;
    h.wal_segment_size = PBT_SEG;
    return h;
}

/* An empty manifest for h (the caller frees it with mf_free). One check. */
static inline mf_manifest *pbt_manifest_new(const mf_backup *h)
{
    mf_manifest *m = NULL;
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(mf_new(&m, h, &err) == 0);
    return m;
}

/* Commit a backup of h that holds no files. Two checks. */
static inline void pbt_commit_header(repo *r, const mf_backup *h)
{
    mf_manifest *m = pbt_manifest_new(h);
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(chain_commit(r, m, &err) == 0);
    mf_free(m);
}

/* Sort m, commit it to r and free it. One check. */
static inline void pbt_commit_manifest(repo *r, mf_manifest *m)
{
    pb_error err = PB_ERROR_INIT;
    mf_sort(m);
    PBT_CHECK(chain_commit(r, m, &err) == 0);
    mf_free(m);
}

/* Finish and free pw, the pack writer of m's backup, then pbt_commit_manifest. Two
 * checks. */
static inline void pbt_finish_commit(repo *r, pack_writer *pw, mf_manifest *m)
{
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(pack_writer_finish(pw, &err) == 0);
    pack_writer_free(pw);
    pbt_commit_manifest(r, m);
}

/* Add a directory (mode 0700) or, with link_to, a link (0777) to m. One check. */
static inline void pbt_add_entry(mf_manifest *m, const char *path, mf_kind kind,
                                 const char *link_to)
{
    mf_file f;
    memset(&f, 0, sizeof(f));
    f.path = strdup(path);
    f.kind = kind;
    f.mode = kind == MF_LINK ? 0777 : 0700;
    f.link_target = link_to ? strdup(link_to) : NULL;
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(mf_add_file(m, &f, &err) == 0);
}

/* A relation entry of npages pages (mode 0600) with no runs yet; add it with
 * mf_add_file, which takes what it holds. */
static inline mf_file pbt_rel_file(const char *path, uint32_t npages)
{
    mf_file f;
    memset(&f, 0, sizeof(f));
    f.path = strdup(path);
    f.kind = MF_REL;
    f.mode = 0600;
    f.size = (uint64_t)npages * PB_PAGE_SIZE;
    f.npages = npages;
    return f;
}

/* A page whose content is a function of seed (distinct seeds, distinct pages). */
static inline void pbt_fill_page(uint8_t *p, int seed)
{
    for (int i = 0; i < (int)PB_PAGE_SIZE; i++)
        p[i] = (uint8_t)(seed * 31 + i / 97);
}

/* Store pages [first, first+count) of data as one frame and append the run and its page
 * hashes to f (whose runs so far are in page order). One check. */
static inline void pbt_ship(pack_writer *pw, mf_file *f, uint32_t first, uint32_t count,
                            const uint8_t *data)
{
    pack_loc loc;
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(pack_write_frame(pw, data, (size_t)count * PB_PAGE_SIZE, &loc, &err) == 0);
    f->runs = realloc(f->runs, (f->nruns + 1) * sizeof(mf_run));
    mf_run run = {first, count, loc.pack_no, loc.clen, loc.offset, loc.rlen, 0};
    uint32_t shipped = 0;
    for (uint32_t i = 0; i < f->nruns; i++)
        shipped += f->runs[i].count;
    f->runs[f->nruns++] = run;
    f->page_hashes = realloc(f->page_hashes, (shipped + count) * sizeof(uint64_t));
    for (uint32_t k = 0; k < count; k++)
        f->page_hashes[shipped + k] = pb_hash64(data + (size_t)k * PB_PAGE_SIZE, PB_PAGE_SIZE);
}

/* Archive a file named name holding data (written to tmp first, then arch_push). Two
 * checks. */
static inline void pbt_push_file(repo *r, const char *tmp, const char *name, const void *data,
                                 size_t len)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s", tmp, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    PBT_CHECK(fd >= 0 && write(fd, data, len) == (ssize_t)len);
    if (fd >= 0)
        close(fd);
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(arch_push(r, path, &err) == 0);
    unlink(path);
}

/* CRC-32C (Castagnoli, reflected), bit by bit: PostgreSQL's pg_crc32c. */
static inline uint32_t pbt_crc32c(uint32_t crc, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
    }
    return crc;
}

/* The first 64 bytes of a WAL segment: the long page header, then one XLOG_SWITCH
 * record at 0x28 (no payload; its CRC over the header up to xl_crc), so that the whole
 * segment reads as valid WAL, as a restore checks before writing. */
static inline void pbt_wal_switch_head(uint8_t h[64], uint32_t tli, uint64_t segno,
                                       uint32_t seg)
{
    memset(h, 0, 64);
    pb_put_u16(h, 0xD110);     /* XLOG_PAGE_MAGIC of PostgreSQL 15 */
    pb_put_u16(h + 2, 0x0002); /* XLP_LONG_HEADER */
    pb_put_u32(h + 4, tli);
    pb_put_u64(h + 8, segno * seg);
    pb_put_u32(h + 32, seg);
    pb_put_u32(h + 36, 8192);
    uint8_t *rec = h + 40;
    pb_put_u32(rec, 24);       /* xl_tot_len */
    rec[16] = 0x40;            /* XLOG_SWITCH */
    rec[17] = 0;               /* RM_XLOG_ID */
    pb_put_u32(rec + 20, pbt_crc32c(0xFFFFFFFFu, rec, 20) ^ 0xFFFFFFFFu);
}

/* Archive WAL segment segno of timeline tli: the long page header PostgreSQL writes
 * first (which archive-push and archive-get check) and a WAL switch, then zeros (sparse).
 * Three checks. */
static inline void pbt_push_segment(repo *r, const char *tmp, uint32_t tli, uint64_t segno)
{
    char name[25], path[4200];
    arch_segment_name(name, tli, segno, PBT_SEG);
    snprintf(path, sizeof(path), "%s/%s", tmp, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    PBT_CHECK(fd >= 0 && ftruncate(fd, PBT_SEG) == 0);
    uint8_t h[64];
    pbt_wal_switch_head(h, tli, segno, PBT_SEG);
    PBT_CHECK(pwrite(fd, h, sizeof(h), 0) == (ssize_t)sizeof(h));
    if (fd >= 0)
        close(fd);
    pb_error err = PB_ERROR_INIT;
    PBT_CHECK(arch_push(r, path, &err) == 0);
    unlink(path);
}

/* n pseudo-random bytes (xorshift from seed; the same seed gives the same bytes), for
 * file contents a test can compare. The caller frees. */
static inline uint8_t *pbt_random_bytes(size_t n, uint64_t seed)
{
    uint8_t *p = malloc(n ? n : 1);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; p && i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (uint8_t)(x >> 24);
    }
    return p;
}

/* Write n bytes to path (created or truncated) and fsync it; 0 or -1. */
static inline int pbt_write_bytes(const char *path, const uint8_t *data, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return -1;
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(fd, data + done, n - done);
        if (w <= 0) {
            close(fd);
            return -1;
        }
        done += (size_t)w;
    }
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* A file of size pseudo-random bytes (seed) at dir/name, its path left in path (path_len
 * bytes); the bytes, for the caller to compare and free. The write is checked. */
static inline uint8_t *pbt_random_file(char *path, size_t path_len, const char *dir,
                                       const char *name, size_t size, uint64_t seed)
{
    snprintf(path, path_len, "%s/%s", dir, name);
    uint8_t *bytes = pbt_random_bytes(size, seed);
    PBT_CHECK(pbt_write_bytes(path, bytes, size) == 0);
    return bytes;
}

/* Whether the file at path holds exactly len bytes equal to data. */
static inline bool pbt_file_equals(const char *path, const void *data, size_t len)
{
    uint8_t *buf = malloc(len + 1);
    int fd = open(path, O_RDONLY);
    ssize_t n = fd >= 0 && buf ? read(fd, buf, len + 1) : -1;
    if (fd >= 0)
        close(fd);
    bool same = n == (ssize_t)len && memcmp(buf, data, len) == 0;
    free(buf);
    return same;
}

/* Whether the file at path holds exactly the (short) text. */
static inline bool pbt_file_is(const char *path, const char *text)
{
    return pbt_file_equals(path, text, strlen(text));
}

/* Create or replace the file at path with text. One check. */
static inline void pbt_write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    PBT_CHECK(fp != NULL);
    if (fp) {
        fputs(text, fp);
        fclose(fp);
    }
}

/* Entries in dir besides . and ..; -1 when dir cannot be opened. */
static inline int pbt_count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
    if (d)
        closedir(d);
    return d ? n : -1;
}

#endif
