/* tests/unit/engine/wal/archive_test.c — the WAL room: archive push/get over a posix
 * repository, WAL names, history files, the stored envelope. */
#include "engine/wal/wal.h"
#include "engine/pack/pack.h"
#include "tests/unit/pbtest.h"

#include <fcntl.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SEG_SIZE (16u << 20)
#define SEG1 "000000010000000A000000FE"

static char tmpdir[] = "/tmp/pb-archive-test-XXXXXX";
static char repodir[600], srcdir[600], dstdir[600];

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    return remove(p);
}

static repo *open_repo(void)
{
    repo_opts o = REPO_OPTS_INIT;
    o.location = repodir;
    repo *r = NULL;
    pb_error e = PB_ERROR_INIT;
    PBT_CHECK(repo_open(&r, &o, &e) == 0);
    return r;
}

/* The long page header PostgreSQL writes at the start of every segment (archive.c
 * checks it against the name). */
static void wal_header(uint8_t *p, uint32_t tli, uint64_t segno, uint32_t seg_size)
{
    memset(p, 0, 40);
    pb_put_u16(p, 0xD110);
    pb_put_u16(p + 2, 0x0002);
    pb_put_u32(p + 4, tli);
    pb_put_u64(p + 8, segno * seg_size);
    pb_put_u32(p + 32, seg_size);
    pb_put_u32(p + 36, 8192);
}

/* WAL-like content: mostly compressible records with random bytes mixed in, behind the
 * long page header of SEG1 (timeline 1, segment 0xA * 256 + 0xFE). */
static uint8_t *make_segment(uint32_t seed)
{
    uint8_t *p = malloc(SEG_SIZE);
    uint32_t s = seed;
    for (size_t i = 0; i < SEG_SIZE; i++) {
        s = s * 1664525u + 1013904223u;
        p[i] = (i % 256) < 200 ? (uint8_t)(i / 4096) : (uint8_t)(s >> 24);
    }
    wal_header(p, 1, 0xAull * 256 + 0xFE, SEG_SIZE);
    return p;
}

static void write_file(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    PBT_CHECK(fd >= 0);
    PBT_CHECK(write(fd, data, len) == (ssize_t)len);
    close(fd);
}

static bool file_equals(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return false;
    uint8_t *buf = malloc(len + 1);
    ssize_t n = read(fd, buf, len + 1);
    close(fd);
    bool eq = n == (ssize_t)len && memcmp(buf, data, len) == 0;
    free(buf);
    return eq;
}

static void test_keys(void)
{
    char k[256];
    arch_key(k, sizeof(k), SEG1);
    PBT_CHECK(strcmp(k, "wal/00000001/" SEG1 ".zst") == 0);
    arch_key(k, sizeof(k), "00000003000000000000000A.partial");
    PBT_CHECK(strcmp(k, "wal/00000003/00000003000000000000000A.partial.zst") == 0);
    arch_key(k, sizeof(k), "000000010000000000000002.00000028.backup");
    PBT_CHECK(strcmp(k, "wal/00000001/000000010000000000000002.00000028.backup.zst") == 0);
    arch_key(k, sizeof(k), "0000000A.history");
    PBT_CHECK(strcmp(k, "wal/history/0000000A.history.zst") == 0);
    const char *bad[] = {"", "foo", "00000001000000000000000", "0000000100000000000000001",
                         "000000010000000000000001.tmp", "00000001.History", "0000000g.history",
                         "../00000001.history", "000000010000000000000001.0000002.backup"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        arch_key(k, sizeof(k), bad[i]);
        PBT_CHECK(k[0] == '\0');
    }
}

static void test_push_get(void)
{
    repo *r = open_repo();
    pb_error e = PB_ERROR_INIT;
    uint8_t *seg = make_segment(1);
    char src[700], dst[700], obj[800];
    snprintf(src, sizeof(src), "%s/" SEG1, srcdir);
    snprintf(dst, sizeof(dst), "%s/RECOVERYXLOG", dstdir);
    snprintf(obj, sizeof(obj), "%s/wal/00000001/" SEG1 ".zst", repodir);
    write_file(src, seg, SEG_SIZE);

    bool present = true;
    PBT_CHECK(arch_exists(r, SEG1, &present, &e) == 0 && !present);
    int rc = arch_push(r, src, &e);
    PBT_CHECK(rc == 0);
    if (rc)
        fprintf(stderr, "push: %s\n", e.msg);
    PBT_CHECK(arch_exists(r, SEG1, &present, &e) == 0 && present);
    struct stat st;
    PBT_CHECK(stat(obj, &st) == 0 && st.st_size > 32 && st.st_size < SEG_SIZE / 2);

    PBT_CHECK(arch_get(r, SEG1, dst, &e) == 0);
    PBT_CHECK(file_equals(dst, seg, SEG_SIZE));

    /* a second push of identical content succeeds and changes nothing */
    PBT_CHECK(arch_push(r, src, &e) == 0);

    /* different content under the same name is refused, the archive keeps the first */
    seg[SEG_SIZE / 2] ^= 0xff;
    write_file(src, seg, SEG_SIZE);
    PBT_CHECK(arch_push(r, src, &e) == PB_EEXIST);
    PBT_CHECK(strstr(e.msg, SEG1) != NULL);
    seg[SEG_SIZE / 2] ^= 0xff;
    unlink(dst);
    PBT_CHECK(arch_get(r, SEG1, dst, &e) == 0 && file_equals(dst, seg, SEG_SIZE));
    /* a shorter file is different too */
    write_file(src, seg, SEG_SIZE - 8192);
    PBT_CHECK(arch_push(r, src, &e) == PB_EEXIST);

    /* missing WAL */
    char missing[700];
    snprintf(missing, sizeof(missing), "%s/missing", dstdir);
    PBT_CHECK(arch_get(r, "000000010000000A000000FF", missing, &e) == PB_ENOENT);
    PBT_CHECK(strstr(e.msg, "000000010000000A000000FF") != NULL);
    PBT_CHECK(access(missing, F_OK) != 0);
    PBT_CHECK(arch_exists(r, "000000010000000A000000FF", &present, &e) == 0 && !present);
    snprintf(missing, sizeof(missing), "%s/000000010000000A000000FF", srcdir);
    PBT_CHECK(arch_push(r, missing, &e) == PB_ENOENT);

    /* names that are not WAL files */
    char odd[700];
    snprintf(odd, sizeof(odd), "%s/not-a-wal-file", srcdir);
    write_file(odd, "x", 1);
    PBT_CHECK(arch_push(r, odd, &e) == PB_EINVAL);
    PBT_CHECK(arch_get(r, "../../etc/passwd", dst, &e) == PB_EINVAL);
    PBT_CHECK(arch_exists(r, "nope", &present, &e) == PB_EINVAL);
    free(seg);
    repo_free(r);
}

static void test_corrupt(void)
{
    repo *r = open_repo();
    pb_error e = PB_ERROR_INIT;
    char obj[800], dst[700], src[700];
    snprintf(obj, sizeof(obj), "%s/wal/00000001/" SEG1 ".zst", repodir);
    snprintf(dst, sizeof(dst), "%s/corrupt-dest", dstdir);
    snprintf(src, sizeof(src), "%s/" SEG1, srcdir);
    uint8_t *seg = make_segment(1);
    write_file(src, seg, SEG_SIZE);
    int fd = open(obj, O_RDWR);
    PBT_CHECK(fd >= 0);
    struct stat st;
    fstat(fd, &st);
    const off_t spots[] = {3, 9, 17, 25, 40, st.st_size - 1};
    for (size_t i = 0; i < sizeof(spots) / sizeof(spots[0]); i++) {
        uint8_t b;
        PBT_CHECK(pread(fd, &b, 1, spots[i]) == 1);
        b ^= 0x04;
        PBT_CHECK(pwrite(fd, &b, 1, spots[i]) == 1);
        PBT_CHECK(arch_get(r, SEG1, dst, &e) == PB_ECORRUPT);
        PBT_CHECK(strstr(e.msg, "wal/00000001/" SEG1 ".zst") != NULL);
        PBT_CHECK(access(dst, F_OK) != 0);
        /* pushing onto a damaged copy is not silently accepted */
        PBT_CHECK(arch_push(r, src, &e) == PB_ECORRUPT);
        b ^= 0x04;
        PBT_CHECK(pwrite(fd, &b, 1, spots[i]) == 1);
    }
    PBT_CHECK(ftruncate(fd, 20) == 0);
    PBT_CHECK(arch_get(r, SEG1, dst, &e) == PB_ECORRUPT);
    close(fd);
    free(seg);
    repo_free(r);
}

static void test_history_and_small(void)
{
    repo *r = open_repo();
    pb_error e = PB_ERROR_INIT;
    const char *hist = "1\t0/3000000\tno recovery target specified\n";
    char src[700], dst[700];
    snprintf(src, sizeof(src), "%s/00000002.history", srcdir);
    snprintf(dst, sizeof(dst), "%s/00000002.history", dstdir);
    write_file(src, hist, strlen(hist));
    PBT_CHECK(arch_push(r, src, &e) == 0);
    bool present = false;
    PBT_CHECK(arch_exists(r, "00000002.history", &present, &e) == 0 && present);
    uint64_t size = 0;
    PBT_CHECK(repo_stat(r, "wal/history/00000002.history.zst", &size, &e) == 0 && size > 32);
    PBT_CHECK(arch_get(r, "00000002.history", dst, &e) == 0);
    PBT_CHECK(file_equals(dst, hist, strlen(hist)));

    /* .backup label file and an empty .partial */
    const char *label = "START WAL LOCATION: 0/2000028 (file 000000010000000000000002)\n";
    snprintf(src, sizeof(src), "%s/000000010000000000000002.00000028.backup", srcdir);
    write_file(src, label, strlen(label));
    PBT_CHECK(arch_push(r, src, &e) == 0);
    snprintf(dst, sizeof(dst), "%s/label", dstdir);
    PBT_CHECK(arch_get(r, "000000010000000000000002.00000028.backup", dst, &e) == 0);
    PBT_CHECK(file_equals(dst, label, strlen(label)));
    snprintf(src, sizeof(src), "%s/000000020000000000000003.partial", srcdir);
    write_file(src, "", 0);
    PBT_CHECK(arch_push(r, src, &e) == 0);
    snprintf(dst, sizeof(dst), "%s/partial", dstdir);
    PBT_CHECK(arch_get(r, "000000020000000000000003.partial", dst, &e) == 0);
    PBT_CHECK(file_equals(dst, "", 0));
    repo_free(r);
}

/* An archived object under key built with the manifest envelope's encoder, its magic
 * replaced by the WAL one (the magic is outside both checksums). */
static void put_wal_object(repo *r, const char *key, const void *raw, size_t len)
{
    pb_buf obj = {0};
    pb_error e = PB_ERROR_INIT;
    PBT_CHECK(pack_object_encode(raw, len, 1, &obj, &e) == 0);
    memcpy(obj.data, "PBWAL001", 8);
    PBT_CHECK(repo_put(r, key, obj.data, obj.len, &e) == 0);
    pb_buf_free(&obj);
}

/* Defect 10: the WAL object header's raw size is bounded by what the name can hold (a
 * history file is text, not 64 MiB) and by what the payload can expand to. */
static void test_hostile_sizes(void)
{
    repo *r = open_repo();
    pb_error e = PB_ERROR_INIT;
    size_t big = 64u << 20;
    uint8_t *zeros = calloc(1, big);
    put_wal_object(r, "wal/history/00000007.history.zst", zeros, big);
    uint8_t *out = NULL;
    size_t out_len = 0;
    PBT_CHECK(arch_read(r, "00000007.history", &out, &out_len, &e) == PB_ECORRUPT);
    PBT_CHECK(strstr(e.msg, "wal/history/00000007.history.zst") != NULL);
    PBT_CHECK(out == NULL);
    free(out);
    /* a segment-sized object is fine for a segment name */
    wal_header(zeros, 7, 1, 16u << 20);
    put_wal_object(r, "wal/00000007/000000070000000000000001.zst", zeros, 16u << 20);
    PBT_CHECK(arch_read(r, "000000070000000000000001", &out, &out_len, &e) == 0);
    PBT_CHECK(out_len == 16u << 20);
    free(out);
    /* another segment's content under this name (a swap): the page address tells */
    put_wal_object(r, "wal/00000007/000000070000000000000003.zst", zeros, 16u << 20);
    PBT_CHECK(arch_read(r, "000000070000000000000003", &out, &out_len, &e) == PB_ECORRUPT);
    PBT_CHECK(strstr(e.msg, "000000070000000000000003") && strstr(e.msg, "another segment"));
    /* a segment-named object that is not a segment at all */
    put_wal_object(r, "wal/00000007/000000070000000000000004.zst", zeros, 4096);
    PBT_CHECK(arch_read(r, "000000070000000000000004", &out, &out_len, &e) == PB_ECORRUPT);
    /* the first segment of timeline 8 is a copy of timeline 7's: an older page tli is fine */
    wal_header(zeros, 7, 3, 16u << 20);
    put_wal_object(r, "wal/00000008/000000080000000000000003.zst", zeros, 16u << 20);
    PBT_CHECK(arch_read(r, "000000080000000000000003", &out, &out_len, &e) == 0);
    free(out);
    /* header claims 1 GiB, payload of a few bytes: refused before allocating */
    uint8_t obj[32 + 17] = "PBWAL001";
    uint8_t z[17] = {0x28, 0xB5, 0x2F, 0xFD, 0xE0};
    pb_put_u64(z + 5, 1u << 30);
    z[13] = 0x03, z[15] = 0x10;
    pb_put_u64(obj + 8, 1u << 30);
    pb_put_u64(obj + 24, pb_hash64(z, sizeof(z)));
    memcpy(obj + 32, z, sizeof(z));
    PBT_CHECK(repo_put(r, "wal/00000007/000000070000000000000002.zst", obj, sizeof(obj), &e) ==
              0);
    PBT_CHECK(arch_read(r, "000000070000000000000002", &out, &out_len, &e) == PB_ECORRUPT);
    PBT_CHECK(strstr(e.msg, "000000070000000000000002") != NULL);
    free(zeros);
    repo_free(r);
}

/* WAL names come from one place (walname.c): PostgreSQL's XLogFileName for an LSN and
 * for a segment number, and back. */
static void test_names(void)
{
    char n[25], h[17];
    arch_walfile_name(n, 1, 0xAull << 32 | 0xFE000000u, SEG_SIZE);
    PBT_CHECK(strcmp(n, SEG1) == 0);
    arch_walfile_name(n, 1, (0xAull << 32 | 0xFE000000u) - 1, SEG_SIZE);
    PBT_CHECK(strcmp(n, "000000010000000A000000FD") == 0); /* the boundary starts SEG1 */
    arch_walfile_name(n, 0x1F, 0x12345678ull << 30, 1u << 30);
    PBT_CHECK(strcmp(n, "0000001F048D159E00000000") == 0); /* 4 segments per log id */
    arch_walfile_name(n, 1, 0, 3 << 20);
    PBT_CHECK(n[0] == '\0'); /* not a power of two */
    uint32_t tli = 0;
    uint64_t segno = 0;
    PBT_CHECK(arch_parse_segment(SEG1, SEG_SIZE, &tli, &segno) && tli == 1 &&
              segno == 0xAull * 256 + 0xFE);
    arch_segment_name(n, tli, segno + 2, SEG_SIZE);
    PBT_CHECK(strcmp(n, "000000010000000B00000000") == 0); /* the next log id */
    PBT_CHECK(arch_parse_segment("000000020000000100000003", 64u << 20, &tli, &segno) &&
              tli == 2 && segno == 64 + 3);
    PBT_CHECK(!arch_parse_segment("000000010000000000000100", SEG_SIZE, &tli, &segno));
    PBT_CHECK(!arch_parse_segment("000000000000000000000001", SEG_SIZE, &tli, &segno));
    PBT_CHECK(!arch_parse_segment(SEG1 ".partial", SEG_SIZE, &tli, &segno));
    PBT_CHECK(!arch_parse_segment(SEG1, 3u << 20, &tli, &segno));
    PBT_CHECK(arch_valid_seg_size(1u << 20) && arch_valid_seg_size(1u << 30));
    PBT_CHECK(!arch_valid_seg_size(1u << 19) && !arch_valid_seg_size(2ull << 30));
    arch_history_name(h, 0xA);
    PBT_CHECK(strcmp(h, "0000000A.history") == 0);
}

/* History files parse as PostgreSQL's readTimeLineHistory reads them (history.c). */
static void test_history_parse(void)
{
    pb_error e = PB_ERROR_INIT;
    arch_tl_entry *tl = NULL;
    size_t n = 0;
    const char *ok = "1\t0/3000000\tno recovery target specified\n\n# a comment\n"
                     "  2 1/A0000028 after LSN\n";
    PBT_CHECK(arch_history_parse(ok, strlen(ok), 3, &tl, &n, &e) == 0 && n == 3);
    PBT_CHECK(tl && tl[0].tli == 1 && tl[0].begin == 0 && tl[0].end == 0x3000000);
    PBT_CHECK(tl && tl[1].tli == 2 && tl[1].begin == 0x3000000 && tl[1].end == 0x1A0000028ull);
    PBT_CHECK(tl && tl[2].tli == 3 && tl[2].begin == 0x1A0000028ull && tl[2].end == UINT64_MAX);
    free(tl);
    PBT_CHECK(arch_history_parse("", 0, 2, &tl, &n, &e) == 0 && n == 1 && tl[0].tli == 2);
    free(tl);
    const char *bad[] = {"1\tnot an lsn\n", "2\t0/3000000\tparent is not older\n",
                         "1\t0/5000000\ta\n1\t0/3000000\tgoes back\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        PBT_CHECK(arch_history_parse(bad[i], strlen(bad[i]), 2, &tl, &n, &e) == PB_ECORRUPT);
        PBT_CHECK(tl == NULL && n == 0 && strstr(e.msg, "00000002.history") != NULL);
    }
}

/* The stored format did not change when the WAL encoder became the shared envelope: an
 * archived object is byte for byte the manifest envelope at zstd level 1 under the WAL
 * magic (what archive.c wrote by hand before), and reads back through both decoders. */
static void test_stored_envelope(void)
{
    repo *r = open_repo();
    pb_error e = PB_ERROR_INIT;
    const char *text = "1\t0/3000000\tno recovery target specified\n";
    char src[700];
    snprintf(src, sizeof(src), "%s/00000009.history", srcdir);
    write_file(src, text, strlen(text));
    PBT_CHECK(arch_push(r, src, &e) == 0);
    void *obj = NULL, *back = NULL;
    size_t olen = 0, back_len = 0;
    PBT_CHECK(repo_get(r, "wal/history/00000009.history.zst", &obj, &olen, &e) == 0);
    pb_buf expect = {0};
    PBT_CHECK(pack_object_encode(text, strlen(text), 1, &expect, &e) == 0);
    memcpy(expect.data, "PBWAL001", 8);
    PBT_CHECK(olen == expect.len && obj && memcmp(obj, expect.data, olen) == 0);
    PBT_CHECK(olen > 32 && pb_get_u64((uint8_t *)obj + 8) == strlen(text) &&
              pb_get_u64((uint8_t *)obj + 16) == pb_hash64(text, strlen(text)) &&
              pb_get_u64((uint8_t *)obj + 24) == pb_hash64((uint8_t *)obj + 32, olen - 32));
    PBT_CHECK(pack_envelope_decode(obj, olen, "PBWAL001", 1u << 20, "w", &back, &back_len,
                                   &e) == 0 && back_len == strlen(text));
    PBT_CHECK(back && memcmp(back, text, back_len) == 0);
    free(back);
    pb_buf direct = {0};
    PBT_CHECK(pack_envelope_encode(text, strlen(text), "PBWAL001", 1, "h", &direct, &e) == 0);
    PBT_CHECK(direct.len == olen && memcmp(direct.data, obj, olen) == 0);
    pb_buf_free(&direct);
    pb_buf_free(&expect);
    free(obj);
    repo_free(r);
}

/* A source of n bytes (a byte pattern that compresses well, like most WAL) in pieces of at most
 * cap, or of extra bytes more or fewer than it claims. */
typedef struct {
    uint64_t n, at;
} pat_src;

static uint8_t pat(uint64_t i) { return (uint8_t)((i >> 6) * 31 + (i % 3) + (i >> 20)); }

static int pat_read(void *ctx, void *buf, size_t cap, size_t *got, pb_error *err)
{
    (void)err;
    pat_src *s = ctx;
    size_t k = s->n - s->at < cap ? (size_t)(s->n - s->at) : cap;
    for (size_t i = 0; i < k; i++)
        ((uint8_t *)buf)[i] = pat(s->at + i);
    s->at += k;
    *got = k;
    return 0;
}

/* The segment in pieces: the same envelope as the whole, decoded back; a source that ends
 * early or runs past its length is refused by name. */
static void test_pieces(void)
{
    const uint64_t n = (5u << 20) + 12345;
    pb_error e = PB_ERROR_INIT;
    pat_src src = {n, 0};
    pb_buf obj = {0};
    PBT_CHECK(pack_envelope_encode_pieces(pat_read, &src, n, "PBWAL001", 1, "w5", &obj, &e) ==
              0);
    void *back = NULL;
    size_t len = 0;
    PBT_CHECK(pack_envelope_decode(obj.data, obj.len, "PBWAL001", 1u << 30, "w5", &back, &len,
                                   &e) == 0 && len == n);
    bool same = back != NULL;
    for (uint64_t i = 0; same && i < n; i++)
        same = ((uint8_t *)back)[i] == pat(i);
    PBT_CHECK(same);
    free(back);
    PBT_CHECK(obj.cap < n); /* it held the compressed bytes, never the raw length */
    size_t before = obj.len;
    src = (pat_src){n - 1, 0};
    PBT_CHECK(pack_envelope_encode_pieces(pat_read, &src, n, "PBWAL001", 1, "short", &obj,
                                          &e) == PB_EIO && strstr(e.msg, "short shrank"));
    src = (pat_src){n + 1, 0};
    PBT_CHECK(pack_envelope_encode_pieces(pat_read, &src, n, "PBWAL001", 1, "long", &obj,
                                          &e) == PB_EIO && strstr(e.msg, "long grew"));
    PBT_CHECK(obj.len == before); /* a failure appends nothing */
    pb_buf_free(&obj);
}


/* archive-get writes through a temp file beside its destination: a symlink planted at
 * that temp name (a stale file of a reused pid, or someone else's link) must be replaced,
 * never followed into the file it points at. */
static void test_get_temp_symlink(void)
{
    repo *r = open_repo();
    pb_error e = PB_ERROR_INIT;
    uint8_t *seg = make_segment(1);
    char src[700], dst[700], tmp[800], victim[700];
    snprintf(src, sizeof(src), "%s/" SEG1, srcdir);
    snprintf(dst, sizeof(dst), "%s/RECOVERYXLOG.link", dstdir);
    snprintf(tmp, sizeof(tmp), "%s.pbtmp.%ld", dst, (long)getpid());
    snprintf(victim, sizeof(victim), "%s/victim", tmpdir);
    write_file(src, seg, SEG_SIZE);
    write_file(victim, "keep", 4);
    PBT_CHECK(symlink(victim, tmp) == 0);
    char obj[800];
    snprintf(obj, sizeof(obj), "%s/wal/00000001/" SEG1 ".zst", repodir);
    unlink(obj); /* earlier tests left it damaged on purpose */
    PBT_CHECK(arch_push(r, src, &e) == 0);
    int rc = arch_get(r, SEG1, dst, &e);
    PBT_CHECK(rc == 0);
    if (rc)
        fprintf(stderr, "get: %s\n", e.msg);
    PBT_CHECK(file_equals(dst, seg, SEG_SIZE));
    PBT_CHECK(file_equals(victim, "keep", 4));
    struct stat st;
    PBT_CHECK(lstat(tmp, &st) != 0);
    free(seg);
    repo_free(r);
}

int main(void)
{
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(repodir, sizeof(repodir), "%s/repo", tmpdir);
    snprintf(srcdir, sizeof(srcdir), "%s/pg_wal", tmpdir);
    snprintf(dstdir, sizeof(dstdir), "%s/restore", tmpdir);
    mkdir(repodir, 0700);
    mkdir(srcdir, 0700);
    mkdir(dstdir, 0700);
    PBT_RUN(test_keys);
    PBT_RUN(test_push_get);
    PBT_RUN(test_corrupt);
    PBT_RUN(test_history_and_small);
    PBT_RUN(test_hostile_sizes);
    PBT_RUN(test_names);
    PBT_RUN(test_history_parse);
    PBT_RUN(test_stored_envelope);
    PBT_RUN(test_pieces);
    PBT_RUN(test_get_temp_symlink);
    nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return PBT_DONE();
}
